/* hb_hist.c - HDR-style log-linear latency histogram; see hb_hist.h. */
#include "base/hb_hist.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

hb_hist_config hb_hist_default_config(void)
{
    hb_hist_config c = {HB_HIST_DEFAULT_LOWEST, HB_HIST_DEFAULT_HIGHEST, HB_HIST_DEFAULT_SIGFIGS};
    return c;
}

static int clz64(uint64_t v) /* v != 0 */
{
    return __builtin_clzll(v);
}

/* Layout derived from a configuration; returns 0 or HB_E_INVALID. */
static int layout(const hb_hist_config *cfg, hb_hist *h, char *err)
{
    if (cfg == NULL) return hb_fail(err, HB_E_INVALID, "histogram: no configuration");
    if (cfg->lowest < 1) return hb_fail(err, HB_E_INVALID, "histogram: lowest must be >= 1");
    if (cfg->sigfigs < 1 || cfg->sigfigs > 5)
        return hb_fail(err, HB_E_INVALID, "histogram: sigfigs must be 1..5, got %d", cfg->sigfigs);
    if (cfg->highest > (1ull << 62))
        return hb_fail(err, HB_E_INVALID, "histogram: highest must be <= 2^62");
    if (cfg->highest < 2 * cfg->lowest)
        return hb_fail(err, HB_E_INVALID, "histogram: highest (%llu) must be >= 2 * lowest (%llu)",
                       (unsigned long long)cfg->highest, (unsigned long long)cfg->lowest);
    uint64_t single_unit = 2;
    for (int i = 0; i < cfg->sigfigs; i++)
        single_unit *= 10;
    int mag = 0;
    while ((1ull << mag) < single_unit)
        mag++;
    int unit = 63 - clz64(cfg->lowest);
    if (unit + mag > 62)
        return hb_fail(err, HB_E_INVALID, "histogram: lowest too large for %d significant digits",
                       cfg->sigfigs);
    int32_t count = (int32_t)1 << mag;
    uint64_t smallest_untrackable = (uint64_t)count << unit;
    int32_t buckets = 1;
    while (smallest_untrackable <= cfg->highest) {
        if (smallest_untrackable > (UINT64_MAX >> 1)) {
            buckets++;
            break;
        }
        smallest_untrackable <<= 1;
        buckets++;
    }
    h->cfg = *cfg;
    h->unit_magnitude = unit;
    h->sub_bucket_half_mag = mag - 1;
    h->sub_bucket_count = count;
    h->sub_bucket_half = count / 2;
    h->sub_bucket_mask = ((uint64_t)count - 1) << unit;
    h->bucket_count = buckets;
    h->counts_len = (buckets + 1) * (count / 2);
    return 0;
}

size_t hb_hist_counts_size(const hb_hist_config *cfg)
{
    hb_hist tmp;
    if (layout(cfg, &tmp, NULL) != 0) return 0;
    return (size_t)tmp.counts_len * sizeof(uint64_t);
}

static void clear_state(hb_hist *h)
{
    h->total = 0;
    h->saturated = 0;
    h->min = UINT64_MAX;
    h->max = 0;
    h->max_index = -1;
}

int hb_hist_init(hb_hist *h, const hb_hist_config *cfg, char *err)
{
    memset(h, 0, sizeof *h);
    int rc = layout(cfg, h, err);
    if (rc != 0) return rc;
    h->counts = calloc((size_t)h->counts_len, sizeof(uint64_t));
    if (h->counts == NULL) return hb_fail(err, HB_E_NOMEM, "histogram: out of memory");
    h->owns_counts = 1;
    clear_state(h);
    return 0;
}

int hb_hist_init_buf(hb_hist *h, const hb_hist_config *cfg, void *buf, size_t len, char *err)
{
    memset(h, 0, sizeof *h);
    int rc = layout(cfg, h, err);
    if (rc != 0) return rc;
    size_t need = (size_t)h->counts_len * sizeof(uint64_t);
    if (buf == NULL || len < need)
        return hb_fail(err, HB_E_INVALID, "histogram: buffer of %zu bytes, need %zu", len, need);
    if (((uintptr_t)buf % _Alignof(uint64_t)) != 0)
        return hb_fail(err, HB_E_INVALID, "histogram: buffer not aligned");
    h->counts = buf;
    memset(buf, 0, need);
    h->owns_counts = 0;
    clear_state(h);
    return 0;
}

void hb_hist_free(hb_hist *h)
{
    if (h->owns_counts) free(h->counts);
    h->counts = NULL;
    h->owns_counts = 0;
    h->counts_len = 0;
    clear_state(h);
}

int hb_hist_init_copy(hb_hist *dst, const hb_hist *src, char *err)
{
    int rc = hb_hist_init(dst, &src->cfg, err);
    if (rc != 0) return rc;
    memcpy(dst->counts, src->counts, (size_t)src->counts_len * sizeof(uint64_t));
    dst->total = src->total;
    dst->saturated = src->saturated;
    dst->min = src->min;
    dst->max = src->max;
    dst->max_index = src->max_index;
    return 0;
}

void hb_hist_reset(hb_hist *h)
{
    if (h->counts && h->max_index >= 0)
        memset(h->counts, 0, (size_t)(h->max_index + 1) * sizeof(uint64_t));
    clear_state(h);
}

int hb_hist_same_config(const hb_hist *a, const hb_hist *b)
{
    return a->cfg.lowest == b->cfg.lowest && a->cfg.highest == b->cfg.highest &&
           a->cfg.sigfigs == b->cfg.sigfigs;
}

/* ---- bucket arithmetic ---- */

static inline int32_t index_of(const hb_hist *h, uint64_t v)
{
    return hb__hist_index(h, v);
}

static inline void bucket_sub_of_index(const hb_hist *h, int32_t i, int32_t *b, int32_t *sub)
{
    *b = (i >> h->sub_bucket_half_mag) - 1;
    *sub = (i & (h->sub_bucket_half - 1)) + h->sub_bucket_half;
    if (*b < 0) {
        *sub -= h->sub_bucket_half;
        *b = 0;
    }
}

static inline uint64_t value_of_index(const hb_hist *h, int32_t i)
{
    int32_t b, sub;
    bucket_sub_of_index(h, i, &b, &sub);
    return (uint64_t)sub << (b + h->unit_magnitude);
}

static inline uint64_t width_of_index(const hb_hist *h, int32_t i)
{
    int32_t b, sub;
    bucket_sub_of_index(h, i, &b, &sub);
    return 1ull << (b + h->unit_magnitude);
}

int32_t hb_hist_index_of(const hb_hist *h, uint64_t value)
{
    if (value > h->cfg.highest) value = h->cfg.highest;
    return index_of(h, value);
}

uint64_t hb_hist_lowest_equivalent(const hb_hist *h, uint64_t value)
{
    return value_of_index(h, hb_hist_index_of(h, value));
}

uint64_t hb_hist_highest_equivalent(const hb_hist *h, uint64_t value)
{
    int32_t i = hb_hist_index_of(h, value);
    return value_of_index(h, i) + width_of_index(h, i) - 1;
}

uint64_t hb_hist_count_at(const hb_hist *h, uint64_t value)
{
    return h->counts[hb_hist_index_of(h, value)];
}

/* ---- recording ---- */

static inline void add_at(hb_hist *h, uint64_t v, int32_t idx, uint64_t n)
{
    h->counts[idx] += n;
    h->total += n;
    h->min = v < h->min ? v : h->min;
    h->max = v > h->max ? v : h->max;
    h->max_index = idx > h->max_index ? idx : h->max_index;
}

/* Bulk adds keep the total <= INT64_MAX (so every count fits the signed
 * varint encoding and sums never wrap); only absurd record_n/corrected
 * inputs get there, and they are clamped rather than wrapped. */
static inline uint64_t room_for(const hb_hist *h, uint64_t n)
{
    uint64_t room = (uint64_t)INT64_MAX - h->total;
    return n < room ? n : room;
}

void hb_hist_record(hb_hist *h, uint64_t value)
{
    uint64_t sat = value > h->cfg.highest;
    value = sat ? h->cfg.highest : value;
    h->saturated += sat;
    add_at(h, value, index_of(h, value), 1);
}

int hb_hist_add_relaxed(hb_hist *dst, const hb_hist *src, char *err)
{
    if (!hb_hist_same_config(dst, src))
        return hb_fail(err, HB_E_INVALID, "histogram: configurations differ");
    for (int32_t i = 0; i < src->counts_len; i++) {
        uint64_t n = room_for(dst, __atomic_load_n(&src->counts[i], __ATOMIC_RELAXED));
        if (n) add_at(dst, value_of_index(dst, i), i, n);
    }
    return 0;
}

void hb_hist_record_n(hb_hist *h, uint64_t value, uint64_t n)
{
    n = room_for(h, n);
    if (n == 0) return;
    uint64_t sat = value > h->cfg.highest;
    value = sat ? h->cfg.highest : value;
    h->saturated += sat * n;
    add_at(h, value, index_of(h, value), n);
}

void hb_hist_record_corrected(hb_hist *h, uint64_t value, uint64_t interval)
{
    hb_hist_record(h, value);
    if (interval == 0 || value <= interval) return;
    /* Missing samples: s, s+I, ..., value-I with s = value - k*I in [I, 2I). */
    uint64_t k = value / interval - 1;
    if (k == 0) return;
    uint64_t s = value - k * interval;
    uint64_t highest = h->cfg.highest;
    if (value - interval > highest) {
        /* Terms above highest are clamped and counted as saturated. */
        uint64_t keep = s > highest ? 0 : (highest - s) / interval + 1;
        uint64_t above = room_for(h, k - keep);
        if (above) {
            h->saturated += above;
            add_at(h, highest, index_of(h, highest), above);
        }
        k = keep;
    }
    uint64_t x = s;
    while (k > 0) {
        /* One step per bucket: all terms that fall into x's bucket at once. */
        int32_t idx = index_of(h, x);
        uint64_t hi = value_of_index(h, idx) + width_of_index(h, idx) - 1;
        uint64_t last = x + (k - 1) * interval;
        uint64_t top = hi < last ? hi : last;
        uint64_t n = room_for(h, (top - x) / interval + 1);
        if (n == 0) break;
        add_at(h, x, idx, n);
        uint64_t vmax = x + (n - 1) * interval;
        h->max = vmax > h->max ? vmax : h->max;
        x += n * interval;
        k -= n;
    }
}

int hb_hist_merge(hb_hist *dst, const hb_hist *src, char *err)
{
    if (!hb_hist_same_config(dst, src))
        return hb_fail(err, HB_E_INVALID,
                       "histogram merge: configurations differ (%llu..%llu/%d vs %llu..%llu/%d)",
                       (unsigned long long)dst->cfg.lowest, (unsigned long long)dst->cfg.highest,
                       dst->cfg.sigfigs, (unsigned long long)src->cfg.lowest,
                       (unsigned long long)src->cfg.highest, src->cfg.sigfigs);
    if (src->total == 0) return 0;
    if (src->total > (uint64_t)INT64_MAX - dst->total)
        return hb_fail(err, HB_E_INVALID, "histogram merge: total count would overflow");
    for (int32_t i = 0; i <= src->max_index; i++)
        dst->counts[i] += src->counts[i];
    dst->total += src->total;
    dst->saturated += src->saturated;
    dst->min = src->min < dst->min ? src->min : dst->min;
    dst->max = src->max > dst->max ? src->max : dst->max;
    dst->max_index = src->max_index > dst->max_index ? src->max_index : dst->max_index;
    return 0;
}

/* ---- statistics ---- */

uint64_t hb_hist_count(const hb_hist *h)
{
    return h->total;
}
uint64_t hb_hist_saturated(const hb_hist *h)
{
    return h->saturated;
}
uint64_t hb_hist_min(const hb_hist *h)
{
    return h->total ? h->min : 0;
}
uint64_t hb_hist_max(const hb_hist *h)
{
    return h->total ? h->max : 0;
}

/* A bucket's representative value: its midpoint, clamped into [min, max]. */
static double mid_of_index(const hb_hist *h, int32_t i)
{
    uint64_t v = value_of_index(h, i) + width_of_index(h, i) / 2;
    if (v < h->min) v = h->min;
    if (v > h->max) v = h->max;
    return (double)v;
}

double hb_hist_mean(const hb_hist *h)
{
    if (h->total == 0) return 0.0;
    double sum = 0.0;
    for (int32_t i = 0; i <= h->max_index; i++)
        if (h->counts[i]) sum += (double)h->counts[i] * mid_of_index(h, i);
    return sum / (double)h->total;
}

double hb_hist_stddev(const hb_hist *h)
{
    if (h->total == 0) return 0.0;
    double mean = hb_hist_mean(h), acc = 0.0;
    for (int32_t i = 0; i <= h->max_index; i++) {
        if (h->counts[i] == 0) continue;
        double d = mid_of_index(h, i) - mean;
        acc += d * d * (double)h->counts[i];
    }
    return sqrt(acc / (double)h->total);
}

uint64_t hb_hist_value_at_percentile(const hb_hist *h, double p)
{
    if (h->total == 0) return 0;
    if (!(p > 0.0)) p = 0.0; /* also NaN */
    if (p > 100.0) p = 100.0;
    if (p == 0.0) return h->min; /* the 0th percentile is the minimum, exactly */
    /* The 1e-12 shave keeps e.g. 99.9% of 1000 at rank 999, not 1000 from fp noise. */
    double x = p / 100.0 * (double)h->total * (1.0 - 1e-12);
    uint64_t target = (uint64_t)ceil(x);
    if (target < 1) target = 1;
    if (target > h->total) target = h->total;
    uint64_t cum = 0;
    for (int32_t i = 0; i <= h->max_index; i++) {
        cum += h->counts[i];
        if (cum >= target) {
            uint64_t v = value_of_index(h, i) + width_of_index(h, i) - 1;
            if (v > h->max) v = h->max;
            if (v < h->min) v = h->min;
            return v;
        }
    }
    return h->max;
}

/* ---- iteration ---- */

void hb_hist_iter_init(hb_hist_iter *it, const hb_hist *h)
{
    memset(it, 0, sizeof *it);
    it->h = h;
    it->index = -1;
}

int hb_hist_iter_next(hb_hist_iter *it)
{
    const hb_hist *h = it->h;
    for (int32_t i = it->index + 1; i <= h->max_index; i++) {
        if (h->counts[i] == 0) continue;
        it->index = i;
        it->lo = value_of_index(h, i);
        it->hi = it->lo + width_of_index(h, i) - 1;
        it->count = h->counts[i];
        it->cumulative += it->count;
        return 1;
    }
    it->index = h->max_index;
    return 0;
}

/* ---- encoding ---- */

static const uint8_t MAGIC[3] = {'H', 'B', 'H'};

static size_t put_varint(uint8_t *p, uint64_t v)
{
    size_t n = 0;
    while (v >= 0x80) {
        p[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    p[n++] = (uint8_t)v;
    return n;
}

/* Reads one LEB128 varint; 0 on success, -1 on truncation or overlong input. */
static int get_varint(const uint8_t *buf, size_t len, size_t *pos, uint64_t *out)
{
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (*pos >= len) return -1;
        uint8_t b = buf[(*pos)++];
        if (shift == 63 && b > 1) return -1; /* would overflow 64 bits */
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *out = v;
            return 0;
        }
    }
    return -1;
}

static uint64_t zigzag(int64_t v)
{
    return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

static int64_t unzigzag(uint64_t v)
{
    return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}

size_t hb_hist_encoded_max(const hb_hist *h)
{
    return 4 + 8 * 10 + (size_t)(h->max_index + 1) * 10;
}

int64_t hb_hist_encode(const hb_hist *h, uint8_t *buf, size_t cap, char *err)
{
    if (cap < hb_hist_encoded_max(h))
        return hb_fail(err, HB_E_INVALID, "histogram encode: buffer too small (%zu < %zu)", cap,
                       hb_hist_encoded_max(h));
    size_t n = 0;
    memcpy(buf, MAGIC, 3);
    buf[3] = HB_HIST_ENC_VERSION;
    n = 4;
    n += put_varint(buf + n, h->cfg.lowest);
    n += put_varint(buf + n, h->cfg.highest);
    n += put_varint(buf + n, (uint64_t)h->cfg.sigfigs);
    n += put_varint(buf + n, h->total);
    n += put_varint(buf + n, h->saturated);
    n += put_varint(buf + n, h->min);
    n += put_varint(buf + n, h->max);
    n += put_varint(buf + n, (uint64_t)(h->max_index + 1));
    for (int32_t i = 0; i <= h->max_index;) {
        uint64_t c = h->counts[i];
        if (c == 0) {
            int64_t zeros = 0;
            while (i <= h->max_index && h->counts[i] == 0) {
                zeros++;
                i++;
            }
            n += put_varint(buf + n, zigzag(-zeros));
        } else {
            if (c > (uint64_t)INT64_MAX)
                return hb_fail(err, HB_E_INVALID, "histogram encode: count too large");
            n += put_varint(buf + n, zigzag((int64_t)c));
            i++;
        }
    }
    return (int64_t)n;
}

typedef struct header {
    hb_hist_config cfg;
    uint64_t total, saturated, min, max, ncounts;
} header;

static int read_header(const uint8_t *buf, size_t len, size_t *pos, header *hd, char *err)
{
    if (buf == NULL || len < 4 || memcmp(buf, MAGIC, 3) != 0)
        return hb_fail(err, HB_E_INVALID, "histogram decode: not an httpbench histogram");
    if (buf[3] != HB_HIST_ENC_VERSION)
        return hb_fail(err, HB_E_INVALID, "histogram decode: unsupported version %u", buf[3]);
    *pos = 4;
    uint64_t sig;
    if (get_varint(buf, len, pos, &hd->cfg.lowest) || get_varint(buf, len, pos, &hd->cfg.highest) ||
        get_varint(buf, len, pos, &sig) || get_varint(buf, len, pos, &hd->total) ||
        get_varint(buf, len, pos, &hd->saturated) || get_varint(buf, len, pos, &hd->min) ||
        get_varint(buf, len, pos, &hd->max) || get_varint(buf, len, pos, &hd->ncounts))
        return hb_fail(err, HB_E_INVALID, "histogram decode: truncated or malformed header");
    if (sig < 1 || sig > 5)
        return hb_fail(err, HB_E_INVALID, "histogram decode: bad sigfigs %llu",
                       (unsigned long long)sig);
    hd->cfg.sigfigs = (int)sig;
    char e2[HB_ERR_LEN];
    hb_hist tmp;
    if (layout(&hd->cfg, &tmp, e2) != 0)
        return hb_fail(err, HB_E_INVALID, "histogram decode: %s", e2);
    return 0;
}

int hb_hist_decode_config(const uint8_t *buf, size_t len, hb_hist_config *cfg, char *err)
{
    header hd;
    size_t pos;
    int rc = read_header(buf, len, &pos, &hd, err);
    if (rc == 0) *cfg = hd.cfg;
    return rc;
}

static int decode_body(hb_hist *h, const header *hd, const uint8_t *buf, size_t len, size_t pos,
                       char *err)
{
    if (hd->ncounts > (uint64_t)h->counts_len)
        return hb_fail(err, HB_E_INVALID, "histogram decode: %llu buckets, layout has %d",
                       (unsigned long long)hd->ncounts, h->counts_len);
    uint64_t idx = 0, sum = 0;
    int32_t first = -1;
    while (pos < len) {
        uint64_t raw;
        if (get_varint(buf, len, &pos, &raw))
            return hb_fail(err, HB_E_INVALID, "histogram decode: truncated counts");
        int64_t v = unzigzag(raw);
        if (v == 0) return hb_fail(err, HB_E_INVALID, "histogram decode: zero run entry");
        if (v < 0) {
            uint64_t zeros = (uint64_t)(-(v + 1)) + 1; /* no overflow for INT64_MIN */
            if (zeros > hd->ncounts - idx)
                return hb_fail(err, HB_E_INVALID, "histogram decode: zero run past the end");
            idx += zeros;
        } else {
            if (idx >= hd->ncounts)
                return hb_fail(err, HB_E_INVALID, "histogram decode: counts past the end");
            if ((uint64_t)v > UINT64_MAX - sum)
                return hb_fail(err, HB_E_INVALID, "histogram decode: total overflows");
            sum += (uint64_t)v;
            h->counts[idx] = (uint64_t)v;
            if (first < 0) first = (int32_t)idx;
            idx++;
        }
    }
    if (idx != hd->ncounts)
        return hb_fail(err, HB_E_INVALID, "histogram decode: %llu of %llu buckets present",
                       (unsigned long long)idx, (unsigned long long)hd->ncounts);
    if (hd->total > (uint64_t)INT64_MAX)
        return hb_fail(err, HB_E_INVALID, "histogram decode: total count too large");
    if (sum != hd->total)
        return hb_fail(err, HB_E_INVALID, "histogram decode: counts sum to %llu, header says %llu",
                       (unsigned long long)sum, (unsigned long long)hd->total);
    if (hd->total == 0) {
        if (hd->ncounts != 0 || hd->saturated != 0 || hd->min != UINT64_MAX || hd->max != 0)
            return hb_fail(err, HB_E_INVALID, "histogram decode: inconsistent empty histogram");
        return 0;
    }
    if (hd->saturated > hd->total)
        return hb_fail(err, HB_E_INVALID, "histogram decode: more saturated than recorded");
    if (hd->min > hd->max || hd->max > hd->cfg.highest)
        return hb_fail(err, HB_E_INVALID, "histogram decode: bad min/max");
    if (h->counts[hd->ncounts - 1] == 0)
        return hb_fail(err, HB_E_INVALID, "histogram decode: trailing empty buckets");
    if (index_of(h, hd->min) != first || (uint64_t)index_of(h, hd->max) != hd->ncounts - 1)
        return hb_fail(err, HB_E_INVALID, "histogram decode: min/max outside recorded buckets");
    if (hd->saturated > 0 && hd->max != hd->cfg.highest)
        return hb_fail(err, HB_E_INVALID, "histogram decode: saturated values but max < highest");
    h->total = hd->total;
    h->saturated = hd->saturated;
    h->min = hd->min;
    h->max = hd->max;
    h->max_index = (int32_t)hd->ncounts - 1;
    return 0;
}

int hb_hist_decode(hb_hist *h, const uint8_t *buf, size_t len, char *err)
{
    memset(h, 0, sizeof *h);
    clear_state(h);
    header hd;
    size_t pos;
    int rc = read_header(buf, len, &pos, &hd, err);
    if (rc != 0) return rc;
    rc = hb_hist_init(h, &hd.cfg, err);
    if (rc != 0) return rc;
    rc = decode_body(h, &hd, buf, len, pos, err);
    if (rc != 0) hb_hist_free(h);
    return rc;
}
