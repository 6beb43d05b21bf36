/* test_hist.c - unit tests of the latency histogram (hb_hist). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/hb_hist.h"
#include "hb_test.h"

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void) /* xorshift64* */
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545f4914f6cdd1dull;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void test_config(void)
{
    char err[HB_ERR_LEN] = "";
    hb_hist h;
    hb_hist_config c = hb_hist_default_config();
    CHECK_EQ_INT(hb_hist_init(&h, &c, err), 0);
    CHECK_EQ_INT(h.sub_bucket_count, 2048);
    CHECK(h.counts_len > 0);
    CHECK_EQ_INT(hb_hist_counts_size(&c), (size_t)h.counts_len * 8);
    hb_hist_free(&h);

    hb_hist_config bad[] = {
        {0, 1000, 3},
        {1, 1, 3},
        {1, 1000, 0},
        {1, 1000, 6},
        {1, (1ull << 62) + 1, 3},
        {1ull << 55, 1ull << 60, 5},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = 0;
        CHECK_EQ_INT(hb_hist_init(&h, &bad[i], err), HB_E_INVALID);
        CHECK(err[0] != 0);
        CHECK_EQ_INT(hb_hist_counts_size(&bad[i]), 0);
        hb_hist_free(&h);
    }

    /* Caller buffer: too small, misaligned, fine. */
    static uint64_t buf[40000];
    CHECK_EQ_INT(hb_hist_init_buf(&h, &c, buf, 16, err), HB_E_INVALID);
    CHECK_EQ_INT(hb_hist_init_buf(&h, &c, (char *)buf + 1, sizeof buf - 8, err), HB_E_INVALID);
    CHECK_EQ_INT(hb_hist_init_buf(&h, &c, buf, sizeof buf, err), 0);
    hb_hist_record(&h, 42);
    CHECK_EQ_INT(hb_hist_count(&h), 1);
    CHECK_EQ_INT(hb_hist_value_at_percentile(&h, 50), 42);
    hb_hist_free(&h); /* must not free buf */
}

static void test_edges(void)
{
    char err[HB_ERR_LEN];
    hb_hist h;
    hb_hist_config c = {1000, 1000000, 2}; /* lowest 1000: values below share bucket 0 */
    CHECK_EQ_INT(hb_hist_init(&h, &c, err), 0);
    CHECK_EQ_INT(hb_hist_count(&h), 0);
    CHECK_EQ_INT(hb_hist_min(&h), 0);
    CHECK_EQ_INT(hb_hist_max(&h), 0);
    CHECK_EQ_INT(hb_hist_value_at_percentile(&h, 99), 0);
    CHECK(hb_hist_mean(&h) == 0.0);
    hb_hist_record(&h, 0);
    hb_hist_record(&h, 5);
    CHECK_EQ_INT(hb_hist_count(&h), 2);
    CHECK_EQ_INT(hb_hist_min(&h), 0);
    CHECK_EQ_INT(hb_hist_max(&h), 5);
    CHECK_EQ_INT(hb_hist_index_of(&h, 0), hb_hist_index_of(&h, 5));
    CHECK_EQ_INT(hb_hist_value_at_percentile(&h, 100), 5);
    CHECK_EQ_INT(hb_hist_saturated(&h), 0);
    /* Above highest: clamped and counted. */
    hb_hist_record(&h, 5000000);
    hb_hist_record_n(&h, UINT64_MAX, 3);
    CHECK_EQ_INT(hb_hist_count(&h), 6);
    CHECK_EQ_INT(hb_hist_saturated(&h), 4);
    CHECK_EQ_INT(hb_hist_max(&h), 1000000);
    CHECK_EQ_INT(hb_hist_value_at_percentile(&h, 100), 1000000);
    hb_hist_record_n(&h, 7, 0); /* no-op */
    CHECK_EQ_INT(hb_hist_count(&h), 6);
    hb_hist_reset(&h);
    CHECK_EQ_INT(hb_hist_count(&h), 0);
    CHECK_EQ_INT(hb_hist_saturated(&h), 0);
    CHECK_EQ_INT(hb_hist_max(&h), 0);
    hb_hist_iter it;
    hb_hist_iter_init(&it, &h);
    CHECK_EQ_INT(hb_hist_iter_next(&it), 0);
    hb_hist_free(&h);
}

static void test_buckets(void)
{
    char err[HB_ERR_LEN];
    hb_hist h;
    hb_hist_config c = hb_hist_default_config();
    CHECK_EQ_INT(hb_hist_init(&h, &c, err), 0);
    /* Below 2048 every integer has its own bucket. */
    for (uint64_t v = 0; v < 2048; v++) {
        CHECK_EQ_INT(hb_hist_lowest_equivalent(&h, v), v);
        CHECK_EQ_INT(hb_hist_highest_equivalent(&h, v), v);
    }
    /* Everywhere: v lies in its bucket, width/lo < 10^-3, indexes increase. */
    int32_t prev = -1;
    int bad = 0;
    for (uint64_t v = 1; v <= c.highest; v = v + v / 997 + 1) {
        uint64_t lo = hb_hist_lowest_equivalent(&h, v), hi = hb_hist_highest_equivalent(&h, v);
        int32_t i = hb_hist_index_of(&h, v);
        if (lo > v || hi < v || (double)(hi - lo) > (double)lo * 1e-3 || i < prev ||
            i >= h.counts_len)
            bad++;
        prev = i;
    }
    CHECK_EQ_INT(bad, 0);
    CHECK(hb_hist_index_of(&h, c.highest) < h.counts_len);
    hb_hist_free(&h);
}

/* Percentiles of n samples vs the exact order statistic, for a distribution. */
static void check_accuracy(const char *name, uint64_t (*gen)(void), size_t n)
{
    char err[HB_ERR_LEN];
    hb_hist h;
    hb_hist_config c = hb_hist_default_config();
    CHECK_EQ_INT(hb_hist_init(&h, &c, err), 0);
    uint64_t *v = malloc(n * sizeof *v);
    double sum = 0;
    for (size_t i = 0; i < n; i++) {
        v[i] = gen();
        sum += (double)v[i];
        hb_hist_record(&h, v[i]);
    }
    qsort(v, n, sizeof *v, cmp_u64);
    CHECK_EQ_INT(hb_hist_count(&h), n);
    CHECK_EQ_INT(hb_hist_min(&h), v[0]);
    CHECK_EQ_INT(hb_hist_max(&h), v[n - 1]);
    static const double ps[] = {0, 1, 10, 25, 50, 75, 90, 99, 99.9, 99.99, 100};
    int bad = 0;
    for (size_t k = 0; k < sizeof ps / sizeof ps[0]; k++) {
        size_t rank = (size_t)ceil(ps[k] / 100.0 * (double)n - 1e-9);
        if (rank < 1) rank = 1;
        uint64_t exact = v[rank - 1], got = hb_hist_value_at_percentile(&h, ps[k]);
        if (got < exact || (double)(got - exact) > (double)exact * 1e-3) {
            bad++;
            fprintf(stderr, "%s p%g: got %llu exact %llu\n", name, ps[k], (unsigned long long)got,
                    (unsigned long long)exact);
        }
    }
    CHECK_EQ_INT(bad, 0);
    double mean = sum / (double)n;
    CHECK(fabs(hb_hist_mean(&h) - mean) <= mean * 1e-3 + 1);
    hb_hist_iter it;
    hb_hist_iter_init(&it, &h);
    uint64_t total = 0, last_hi = 0;
    int first = 1, order_ok = 1;
    while (hb_hist_iter_next(&it)) {
        if (!first && it.lo <= last_hi) order_ok = 0;
        if (it.count != hb_hist_count_at(&h, it.lo)) order_ok = 0;
        first = 0;
        last_hi = it.hi;
        total += it.count;
        if (it.cumulative != total) order_ok = 0;
    }
    CHECK(order_ok);
    CHECK_EQ_INT(total, n);
    free(v);
    hb_hist_free(&h);
}

static uint64_t gen_uniform(void)
{
    return rnd() % 10000000;
}
static uint64_t gen_lognormal(void)
{
    double u1 = ((double)(rnd() >> 11) + 1) / 9007199254740993.0;
    double u2 = (double)(rnd() >> 11) / 9007199254740992.0;
    double z = sqrt(-2 * log(u1)) * cos(2 * M_PI * u2);
    return (uint64_t)exp(13.0 + 1.5 * z); /* median ~ 440 us in ns */
}
static uint64_t gen_exp(void)
{
    double u = ((double)(rnd() >> 11) + 1) / 9007199254740993.0;
    return (uint64_t)(-log(u) * 50000.0);
}
static uint64_t gen_bimodal(void)
{
    return (rnd() & 7) ? 1000 + rnd() % 500 : 50000000 + rnd() % 1000000;
}

static void test_merge(void)
{
    char err[HB_ERR_LEN];
    hb_hist a, b, u;
    hb_hist_config c = hb_hist_default_config();
    CHECK_EQ_INT(hb_hist_init(&a, &c, err), 0);
    CHECK_EQ_INT(hb_hist_init(&b, &c, err), 0);
    CHECK_EQ_INT(hb_hist_init(&u, &c, err), 0);
    for (int i = 0; i < 100000; i++) {
        uint64_t v = gen_lognormal();
        hb_hist_record(i & 1 ? &a : &b, v);
        hb_hist_record(&u, v);
    }
    hb_hist_record(&b, c.highest * 2); /* saturation carries over */
    hb_hist_record(&u, c.highest * 2);
    CHECK_EQ_INT(hb_hist_merge(&a, &b, err), 0);
    CHECK_EQ_INT(hb_hist_count(&a), hb_hist_count(&u));
    CHECK_EQ_INT(hb_hist_saturated(&a), 1);
    CHECK_EQ_INT(hb_hist_min(&a), hb_hist_min(&u));
    CHECK_EQ_INT(hb_hist_max(&a), hb_hist_max(&u));
    CHECK_EQ_INT(a.max_index, u.max_index);
    CHECK(memcmp(a.counts, u.counts, (size_t)a.counts_len * 8) == 0);
    CHECK(hb_hist_mean(&a) == hb_hist_mean(&u));

    hb_hist other;
    hb_hist_config c2 = {1, 3600000000000ull, 2};
    CHECK_EQ_INT(hb_hist_init(&other, &c2, err), 0);
    hb_hist_record(&other, 5);
    err[0] = 0;
    CHECK_EQ_INT(hb_hist_merge(&a, &other, err), HB_E_INVALID);
    CHECK(strstr(err, "differ") != NULL);
    CHECK_EQ_INT(hb_hist_count(&a), hb_hist_count(&u));

    hb_hist cp;
    CHECK_EQ_INT(hb_hist_init_copy(&cp, &a, err), 0);
    CHECK_EQ_INT(hb_hist_count(&cp), hb_hist_count(&a));
    CHECK(memcmp(cp.counts, a.counts, (size_t)a.counts_len * 8) == 0);
    hb_hist_free(&cp);
    hb_hist_free(&other);
    hb_hist_free(&a);
    hb_hist_free(&b);
    hb_hist_free(&u);
}

/* The progress pair: relaxed records read through a snapshot land in the
 * same buckets as plain records, and the snapshot's min/max are bucket bounds. */
static void test_relaxed(void)
{
    char err[HB_ERR_LEN];
    hb_hist r, plain, snap;
    hb_hist_config c = {1, 3600000000000ull, 1};
    CHECK_EQ_INT(hb_hist_init(&r, &c, err), 0);
    CHECK_EQ_INT(hb_hist_init(&plain, &c, err), 0);
    CHECK_EQ_INT(hb_hist_init(&snap, &c, err), 0);
    CHECK_EQ_INT(r.sub_bucket_half, 16); /* 16 buckets per power of two */
    for (int i = 0; i < 20000; i++) {
        uint64_t v = gen_lognormal();
        hb_hist_record_relaxed(&r, v);
        hb_hist_record(&plain, v);
    }
    hb_hist_record_relaxed(&r, c.highest * 3); /* clamped into the last bucket */
    hb_hist_record(&plain, c.highest * 3);
    CHECK_EQ_INT(hb_hist_count(&r), 0); /* the writer keeps no totals */
    CHECK(memcmp(r.counts, plain.counts, (size_t)r.counts_len * 8) == 0);
    CHECK_EQ_INT(hb_hist_add_relaxed(&snap, &r, err), 0);
    CHECK_EQ_INT(hb_hist_add_relaxed(&snap, &r, err), 0);
    CHECK_EQ_INT(hb_hist_count(&snap), 2 * hb_hist_count(&plain));
    CHECK_EQ_INT(hb_hist_min(&snap), hb_hist_lowest_equivalent(&plain, hb_hist_min(&plain)));
    CHECK_EQ_INT(hb_hist_max(&snap), hb_hist_lowest_equivalent(&plain, c.highest));
    uint64_t p50 = hb_hist_value_at_percentile(&plain, 50);
    uint64_t s50 = hb_hist_value_at_percentile(&snap, 50);
    CHECK_EQ_INT(hb_hist_lowest_equivalent(&plain, s50), hb_hist_lowest_equivalent(&plain, p50));

    hb_hist other;
    hb_hist_config c2 = hb_hist_default_config();
    CHECK_EQ_INT(hb_hist_init(&other, &c2, err), 0);
    err[0] = 0;
    CHECK_EQ_INT(hb_hist_add_relaxed(&snap, &other, err), HB_E_INVALID);
    CHECK(strstr(err, "differ") != NULL);
    hb_hist_free(&other);
    hb_hist_free(&r);
    hb_hist_free(&plain);
    hb_hist_free(&snap);
}

static void test_corrected(void)
{
    char err[HB_ERR_LEN];
    hb_hist h, ref;
    hb_hist_config c = hb_hist_default_config();
    CHECK_EQ_INT(hb_hist_init(&h, &c, err), 0);
    CHECK_EQ_INT(hb_hist_init(&ref, &c, err), 0);
    /* HdrHistogram's example: 10000 x 1 ms then one 100 s stall at a 10 ms interval. */
    for (int i = 0; i < 10000; i++)
        hb_hist_record_corrected(&h, 1000000, 10000000);
    hb_hist_record_corrected(&h, 100000000000ull, 10000000);
    CHECK_EQ_INT(hb_hist_count(&h), 10000 + 10000);
    /* The reference loop, one value at a time. */
    for (int i = 0; i < 10000; i++)
        hb_hist_record(&ref, 1000000);
    hb_hist_record(&ref, 100000000000ull);
    for (uint64_t m = 100000000000ull - 10000000; m >= 10000000; m -= 10000000)
        hb_hist_record(&ref, m);
    CHECK_EQ_INT(hb_hist_count(&ref), hb_hist_count(&h));
    CHECK_EQ_INT(hb_hist_min(&ref), hb_hist_min(&h));
    CHECK_EQ_INT(hb_hist_max(&ref), hb_hist_max(&h));
    CHECK(memcmp(ref.counts, h.counts, (size_t)h.counts_len * 8) == 0);
    CHECK_EQ_INT(hb_hist_value_at_percentile(&h, 50), hb_hist_highest_equivalent(&h, 1000000));
    uint64_t p75 = hb_hist_value_at_percentile(&h, 75);
    CHECK(p75 > 49000000000ull && p75 < 51000000000ull);

    /* Random values/intervals: bucket-wise == term-by-term. */
    int mismatch = 0;
    for (int r = 0; r < 200; r++) {
        hb_hist_reset(&h);
        hb_hist_reset(&ref);
        uint64_t interval = 1 + rnd() % 100000, value = rnd() % 30000000;
        hb_hist_record_corrected(&h, value, interval);
        hb_hist_record(&ref, value);
        if (value > interval)
            for (uint64_t m = value - interval; m >= interval; m -= interval)
                hb_hist_record(&ref, m);
        if (hb_hist_count(&h) != hb_hist_count(&ref) || hb_hist_min(&h) != hb_hist_min(&ref) ||
            hb_hist_max(&h) != hb_hist_max(&ref) ||
            memcmp(ref.counts, h.counts, (size_t)h.counts_len * 8) != 0)
            mismatch++;
    }
    CHECK_EQ_INT(mismatch, 0);

    /* No correction for interval 0 or value <= interval; no hang for huge ratios. */
    hb_hist_reset(&h);
    hb_hist_record_corrected(&h, 500, 0);
    hb_hist_record_corrected(&h, 500, 500);
    hb_hist_record_corrected(&h, 999, 500);
    CHECK_EQ_INT(hb_hist_count(&h), 3);
    hb_hist_reset(&h);
    hb_hist_record_corrected(&h, c.highest, 1); /* 3.6e12 terms, bucket-wise */
    CHECK_EQ_INT(hb_hist_count(&h), c.highest);
    CHECK_EQ_INT(hb_hist_saturated(&h), 0);
    /* Above highest: the terms above are saturated. */
    hb_hist_reset(&h);
    hb_hist_record_corrected(&h, c.highest + 3000, 1000);
    CHECK_EQ_INT(hb_hist_count(&h), (c.highest + 3000) / 1000);
    CHECK_EQ_INT(hb_hist_saturated(&h), 1 + 2);
    CHECK_EQ_INT(hb_hist_max(&h), c.highest);
    hb_hist_free(&h);
    hb_hist_free(&ref);
}

static void test_encoding(void)
{
    char err[HB_ERR_LEN];
    hb_hist h, d;
    hb_hist_config c = hb_hist_default_config();
    CHECK_EQ_INT(hb_hist_init(&h, &c, err), 0);
    /* Empty round trip. */
    static uint8_t buf[1 << 20];
    int64_t n = hb_hist_encode(&h, buf, sizeof buf, err);
    CHECK(n > 4 && n < 64);
    CHECK_EQ_INT(hb_hist_decode(&d, buf, (size_t)n, err), 0);
    CHECK_EQ_INT(hb_hist_count(&d), 0);
    hb_hist_free(&d);

    for (int i = 0; i < 50000; i++)
        hb_hist_record(&h, gen_lognormal());
    hb_hist_record(&h, 0);
    hb_hist_record(&h, UINT64_MAX);
    n = hb_hist_encode(&h, buf, sizeof buf, err);
    CHECK(n > 0 && (size_t)n <= hb_hist_encoded_max(&h));
    CHECK_EQ_INT(hb_hist_encode(&h, buf, 10, err), HB_E_INVALID);
    CHECK_EQ_INT(hb_hist_decode(&d, buf, (size_t)n, err), 0);
    CHECK_EQ_INT(hb_hist_count(&d), hb_hist_count(&h));
    CHECK_EQ_INT(hb_hist_saturated(&d), 1);
    CHECK_EQ_INT(hb_hist_min(&d), 0);
    CHECK_EQ_INT(hb_hist_max(&d), c.highest);
    CHECK_EQ_INT(d.max_index, h.max_index);
    CHECK(memcmp(d.counts, h.counts, (size_t)h.counts_len * 8) == 0);
    hb_hist_config dc;
    CHECK_EQ_INT(hb_hist_decode_config(buf, (size_t)n, &dc, err), 0);
    CHECK_EQ_INT(dc.sigfigs, 3);
    CHECK_EQ_INT(dc.highest, c.highest);
    hb_hist_free(&d);

    /* Every truncation, every single-byte corruption: an error or a valid
     * histogram, never a crash (ASan watches). Truncations must all fail. */
    int trunc_ok = 0;
    for (int64_t k = 0; k < n; k++)
        if (hb_hist_decode(&d, buf, (size_t)k, err) == 0) {
            trunc_ok++;
            hb_hist_free(&d);
        }
    CHECK_EQ_INT(trunc_ok, 0);
    int accepted = 0;
    for (int64_t k = 0; k < n && k < 4000; k++) {
        uint8_t save = buf[k];
        buf[k] ^= (uint8_t)(1u << (k % 8));
        int rc = hb_hist_decode(&d, buf, (size_t)n, err);
        if (rc == 0) {
            accepted++;
            hb_hist_free(&d);
        } else {
            CHECK_EQ_INT(rc, HB_E_INVALID);
        }
        buf[k] = save;
    }
    CHECK(accepted < n / 10);
    /* Specific bad inputs. */
    CHECK_EQ_INT(hb_hist_decode(&d, NULL, 0, err), HB_E_INVALID);
    CHECK_EQ_INT(hb_hist_decode(&d, (const uint8_t *)"XXXX", 4, err), HB_E_INVALID);
    uint8_t v2[sizeof buf];
    memcpy(v2, buf, (size_t)n);
    v2[3] = 2;
    err[0] = 0;
    CHECK_EQ_INT(hb_hist_decode(&d, v2, (size_t)n, err), HB_E_INVALID);
    CHECK(strstr(err, "version") != NULL);
    memcpy(v2, buf, (size_t)n);
    v2[n] = 0x02; /* a trailing extra count */
    CHECK_EQ_INT(hb_hist_decode(&d, v2, (size_t)n + 1, err), HB_E_INVALID);
    /* Random garbage after a valid header prefix. */
    int garbage_ok = 0;
    for (int r = 0; r < 2000; r++) {
        size_t len = 20 + rnd() % 200;
        memcpy(v2, buf, 20);
        for (size_t i = 20; i < len; i++)
            v2[i] = (uint8_t)rnd();
        if (hb_hist_decode(&d, v2, len, err) == 0) {
            garbage_ok++;
            hb_hist_free(&d);
        }
    }
    CHECK_EQ_INT(garbage_ok, 0);
    hb_hist_free(&h);
}

static void test_stddev(void)
{
    char err[HB_ERR_LEN];
    hb_hist h;
    hb_hist_config c = hb_hist_default_config();
    CHECK_EQ_INT(hb_hist_init(&h, &c, err), 0);
    for (int i = 0; i < 1000; i++)
        hb_hist_record(&h, 1000);
    CHECK(hb_hist_mean(&h) == 1000.0);
    CHECK(hb_hist_stddev(&h) == 0.0);
    for (int i = 0; i < 1000; i++)
        hb_hist_record(&h, 2000);
    CHECK(fabs(hb_hist_mean(&h) - 1500.0) < 1.0);
    CHECK(fabs(hb_hist_stddev(&h) - 500.0) < 1.0);
    hb_hist_free(&h);
}

/* Every configuration shape: extreme values stay inside the counts array
 * (ASan watches), round-trip through the encoding, and report sane stats. */
static void test_config_sweep(void)
{
    static const uint64_t lows[] = {1, 7, 1000, 1ull << 20, 1ull << 40};
    static const uint64_t highs[] = {0, 1000000, 3600000000000ull, 1ull << 62};
    char err[HB_ERR_LEN];
    int bad = 0, configs = 0;
    for (int sig = 1; sig <= 5; sig++)
        for (size_t li = 0; li < sizeof lows / sizeof lows[0]; li++)
            for (size_t hi = 0; hi < sizeof highs / sizeof highs[0]; hi++) {
                if (sig >= 4 && highs[hi] == (1ull << 62)) continue; /* 50+ MB each: slow */
                hb_hist_config c = {lows[li], highs[hi] ? highs[hi] : 2 * lows[li], sig};
                hb_hist h, d;
                if (hb_hist_init(&h, &c, err) != 0) continue; /* e.g. highest < 2*lowest */
                configs++;
                uint64_t vals[] = {0,
                                   1,
                                   c.lowest - 1,
                                   c.lowest,
                                   c.lowest + 1,
                                   c.highest / 2,
                                   c.highest - 1,
                                   c.highest,
                                   c.highest + 1,
                                   UINT64_MAX};
                for (size_t k = 0; k < sizeof vals / sizeof vals[0]; k++) {
                    hb_hist_record(&h, vals[k]);
                    hb_hist_record_corrected(&h, vals[k], c.lowest + 1);
                }
                if (hb_hist_max(&h) != c.highest || hb_hist_min(&h) != 0) bad++;
                if (hb_hist_value_at_percentile(&h, 100) != c.highest) bad++;
                if (hb_hist_value_at_percentile(&h, 0) != 0) bad++;
                if (hb_hist_saturated(&h) < 2) bad++;
                size_t cap = hb_hist_encoded_max(&h);
                uint8_t *buf = malloc(cap);
                int64_t n = hb_hist_encode(&h, buf, cap, err);
                if (n <= 0 || hb_hist_decode(&d, buf, (size_t)n, err) != 0) {
                    bad++;
                } else {
                    if (hb_hist_count(&d) != hb_hist_count(&h) ||
                        memcmp(d.counts, h.counts, (size_t)h.counts_len * 8) != 0)
                        bad++;
                    hb_hist_free(&d);
                }
                free(buf);
                hb_hist_free(&h);
            }
    CHECK(configs > 50);
    CHECK_EQ_INT(bad, 0);
}

static void test_count_overflow_clamped(void)
{
    char err[HB_ERR_LEN];
    hb_hist h, o;
    hb_hist_config c = {1, 2, 1};
    CHECK_EQ_INT(hb_hist_init(&h, &c, err), 0);
    hb_hist_record_corrected(&h, UINT64_MAX, 2); /* ~9.2e18 missing samples */
    hb_hist_record_n(&h, 1, UINT64_MAX);
    CHECK(hb_hist_count(&h) == (uint64_t)INT64_MAX);
    CHECK_EQ_INT(hb_hist_max(&h), 2);
    CHECK_EQ_INT(hb_hist_init_copy(&o, &h, err), 0);
    CHECK_EQ_INT(hb_hist_merge(&h, &o, err), HB_E_INVALID);
    uint8_t buf[256];
    int64_t n = hb_hist_encode(&h, buf, sizeof buf, err);
    CHECK(n > 0);
    hb_hist d;
    CHECK_EQ_INT(hb_hist_decode(&d, buf, (size_t)n, err), 0);
    CHECK(hb_hist_count(&d) == (uint64_t)INT64_MAX);
    hb_hist_free(&d);
    hb_hist_free(&o);
    hb_hist_free(&h);
}

int main(void)
{
    test_count_overflow_clamped();
    test_config_sweep();
    test_config();
    test_edges();
    test_buckets();
    check_accuracy("uniform", gen_uniform, 1000000);
    check_accuracy("lognormal", gen_lognormal, 1000000);
    check_accuracy("exponential", gen_exp, 1000000);
    check_accuracy("bimodal", gen_bimodal, 1000000);
    test_merge();
    test_relaxed();
    test_corrected();
    test_encoding();
    test_stddev();
    HB_TEST_MAIN_END();
}
