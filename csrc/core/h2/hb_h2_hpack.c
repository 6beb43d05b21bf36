/* hb_h2_hpack.c - HPACK (RFC 7541) decoder and stateless encoder; see hb_h2_hpack.h.
 *
 * Integers, string literals and Huffman decoding are http/hb_huff (shared
 * with QPACK).
 *
 * The dynamic table keeps entry bytes in insertion order in a buffer twice
 * the advertised maximum; when the newest entry does not fit at the end, the
 * still-referenced bytes move to the front (amortised O(1) per byte), so each
 * name and value is always contiguous.
 */
#include "h2/hb_h2_hpack.h"

#include <stdlib.h>
#include <string.h>

#include "http/hb_huff.h"

/* ---- static table (RFC 7541 Appendix A) ---- */

#define SE HB_HP_ENTRY
static const hb_hp_entry STATIC_TABLE[62] = {
    {"", "", 0, 0}, /* index 0 is not an entry */
    SE(":authority", ""),
    SE(":method", "GET"),
    SE(":method", "POST"),
    SE(":path", "/"),
    SE(":path", "/index.html"),
    SE(":scheme", "http"),
    SE(":scheme", "https"),
    SE(":status", "200"),
    SE(":status", "204"),
    SE(":status", "206"),
    SE(":status", "304"),
    SE(":status", "400"),
    SE(":status", "404"),
    SE(":status", "500"),
    SE("accept-charset", ""),
    SE("accept-encoding", "gzip, deflate"),
    SE("accept-language", ""),
    SE("accept-ranges", ""),
    SE("accept", ""),
    SE("access-control-allow-origin", ""),
    SE("age", ""),
    SE("allow", ""),
    SE("authorization", ""),
    SE("cache-control", ""),
    SE("content-disposition", ""),
    SE("content-encoding", ""),
    SE("content-language", ""),
    SE("content-length", ""),
    SE("content-location", ""),
    SE("content-range", ""),
    SE("content-type", ""),
    SE("cookie", ""),
    SE("date", ""),
    SE("etag", ""),
    SE("expect", ""),
    SE("expires", ""),
    SE("from", ""),
    SE("host", ""),
    SE("if-match", ""),
    SE("if-modified-since", ""),
    SE("if-none-match", ""),
    SE("if-range", ""),
    SE("if-unmodified-since", ""),
    SE("last-modified", ""),
    SE("link", ""),
    SE("location", ""),
    SE("max-forwards", ""),
    SE("proxy-authenticate", ""),
    SE("proxy-authorization", ""),
    SE("range", ""),
    SE("referer", ""),
    SE("refresh", ""),
    SE("retry-after", ""),
    SE("server", ""),
    SE("set-cookie", ""),
    SE("strict-transport-security", ""),
    SE("transfer-encoding", ""),
    SE("user-agent", ""),
    SE("vary", ""),
    SE("via", ""),
    SE("www-authenticate", ""),
};
#undef SE
#define STATIC_N 61u

/* Static indexes of the distinct names, by name length (first index of a
 * name that has several entries), so the encoder compares at most six names. */
static const uint8_t NAMES_BY_LEN[28][7] = {
    [3] = {21, 60},
    [4] = {33, 34, 37, 38, 45, 59},
    [5] = {4, 22, 50},
    [6] = {19, 32, 35, 54},
    [7] = {2, 6, 8, 36, 51, 52},
    [8] = {39, 42, 46},
    [10] = {1, 55, 58},
    [11] = {53},
    [12] = {31, 47},
    [13] = {18, 23, 24, 30, 41, 44},
    [14] = {15, 28},
    [15] = {16, 17},
    [16] = {26, 27, 29, 61},
    [17] = {40, 57},
    [18] = {48},
    [19] = {25, 43, 49},
    [25] = {56},
    [27] = {20},
};

/* ---- integers and strings: http/hb_huff ---- */

static const hb_hp_ctx HP = {"hpack", "block", HB_E_H2};

/* ---- dynamic table ---- */

/* Entry i (0 = newest) of the ring: ent[2 * slot] = virtual offset,
 * ent[2 * slot + 1] = name length | value length << 16 (each <= 65536 - 32). */
static inline void dyn_get(const hb_h2_hpack_dec *d, uint32_t i, const char **name, size_t *nlen,
                           const char **value, size_t *vlen)
{
    uint32_t slot = (d->ent_head + d->ent_n - 1 - i) & d->ent_mask;
    uint32_t off = d->ent[2 * slot] - d->base;
    uint32_t lens = d->ent[2 * slot + 1];
    *name = (const char *)d->buf + off;
    *nlen = lens & 0xffff;
    *value = *name + *nlen;
    *vlen = lens >> 16;
}

static void dyn_evict_to(hb_h2_hpack_dec *d, uint32_t limit)
{
    while (d->size > limit) {
        uint32_t lens = d->ent[2 * d->ent_head + 1];
        d->size -= (lens & 0xffff) + (lens >> 16) + 32;
        d->ent_head = (d->ent_head + 1) & d->ent_mask;
        d->ent_n--;
    }
}

/* Add an entry; name may point into the table (a name by index), even at an
 * entry this insertion evicts. value never points into the table. Returns 1
 * when added (the bytes may have moved: read them back from entry 0), 0 when
 * too big (the table is emptied, no bytes move). */
static int dyn_add(hb_h2_hpack_dec *d, const char *name, size_t nlen, const char *value,
                   size_t vlen)
{
    size_t need = nlen + vlen + 32;
    /* Bytes from here on stay where they are until the new entry is written. */
    uint32_t keep = d->ent_n ? d->ent[2 * d->ent_head] : d->tail;
    if (need > d->limit) {
        dyn_evict_to(d, 0);
        return 0;
    }
    dyn_evict_to(d, d->limit - (uint32_t)need);
    uint32_t k = (uint32_t)(nlen + vlen);
    if (d->tail - d->base + k > d->buf_cap) {
        /* At most (max - 32) old bytes plus k <= max - 32 new ones: fits 2 * max. */
        uint32_t shift = keep - d->base;
        uintptr_t nb = (uintptr_t)name, b0 = (uintptr_t)d->buf;
        memmove(d->buf, d->buf + shift, d->tail - keep);
        if (nb >= b0 && nb < b0 + d->buf_cap) name -= shift;
        d->base = keep;
    }
    uint8_t *dst = d->buf + (d->tail - d->base);
    memmove(dst, name, nlen);
    if (vlen) memcpy(dst + nlen, value, vlen);
    uint32_t slot = (d->ent_head + d->ent_n) & d->ent_mask;
    d->ent[2 * slot] = d->tail;
    d->ent[2 * slot + 1] = (uint32_t)nlen | (uint32_t)vlen << 16;
    d->ent_n++;
    d->size += (uint32_t)need;
    d->tail += k;
    return 1;
}

int hb_h2_hpack_dec_init(hb_h2_hpack_dec *d, uint32_t max_table)
{
    memset(d, 0, sizeof *d);
    if (max_table > 65536) return HB_E_INVALID;
    hb_huff_init();
    uint32_t slots = 1;
    while (slots < max_table / 32)
        slots <<= 1;
    size_t bytes = (size_t)slots * 8 + (size_t)max_table * 2;
    uint32_t *mem = malloc(bytes);
    if (!mem) return HB_E_NOMEM;
    d->ent = mem;
    d->ent_mask = slots - 1;
    d->buf = (uint8_t *)(mem + 2 * slots);
    d->buf_cap = max_table * 2;
    d->limit = d->max = max_table;
    return 0;
}

void hb_h2_hpack_dec_free(hb_h2_hpack_dec *d)
{
    free(d->ent);
    d->ent = NULL;
    d->buf = NULL;
    d->ent_n = 0;
}

/* Resolve index idx (>= 1) to a name and value. */
static inline int lookup(const hb_h2_hpack_dec *d, uint32_t idx, const char **name, size_t *nlen,
                         const char **value, size_t *vlen, char *err)
{
    if (HB_LIKELY(idx <= STATIC_N)) {
        const hb_hp_entry *e = &STATIC_TABLE[idx];
        *name = e->name;
        *nlen = e->name_len;
        *value = e->value;
        *vlen = e->value_len;
        return 0;
    }
    if (HB_UNLIKELY(idx - STATIC_N > d->ent_n))
        return hb_fail(err, HB_E_H2, "hpack: index %u beyond the table (61 static + %u dynamic)",
                       idx, d->ent_n);
    dyn_get(d, idx - STATIC_N - 1, name, nlen, value, vlen);
    return 0;
}

int hb_h2_hpack_decode(hb_h2_hpack_dec *d, const uint8_t *in, size_t len, uint8_t *scratch,
                       size_t max_list, hb_h2_hpack_field_fn fn, void *ud, char *err)
{
    if (HB_UNLIKELY(d->failed || !d->ent))
        return hb_fail(err, HB_E_H2, "hpack: decoder unusable after an earlier error");
    if (len == 0) return 0; /* in may then be NULL */
    const uint8_t *p = in, *end = in + len;
    size_t room = max_list ? max_list : SIZE_MAX; /* list bytes fn may still get */
    int over = 0;
    const uint8_t *upd_ok = in; /* size updates only before the first field */
    while (p < end) {
        uint8_t b = *p;
        const char *name = NULL, *value = NULL;
        size_t nlen = 0, vlen = 0;
        uint32_t idx;
        uint8_t *sc = scratch;
        if (b & 0x80) { /* indexed field */
            if (hb_hp_int_decode(&p, end, 0x7f, &idx, &HP, err)) goto fail;
            if (HB_UNLIKELY(idx == 0)) {
                hb_fail(err, HB_E_H2, "hpack: index 0 in an indexed field");
                goto fail;
            }
            if (lookup(d, idx, &name, &nlen, &value, &vlen, err)) goto fail;
        } else {
            uint32_t mask = 0x0f; /* without indexing (0000), never indexed (0001) */
            int index_it = 0;
            if (HB_UNLIKELY(b >= 0x20)) {
                if (b < 0x40) { /* dynamic table size update */
                    if (p != upd_ok) {
                        hb_fail(err, HB_E_H2, "hpack: table size update after a header field");
                        goto fail;
                    }
                    if (hb_hp_int_decode(&p, end, 0x1f, &idx, &HP, err)) goto fail;
                    if (idx > d->max) {
                        hb_fail(err, HB_E_H2,
                                "hpack: table size update to %u above the advertised %u", idx,
                                d->max);
                        goto fail;
                    }
                    d->limit = idx;
                    dyn_evict_to(d, idx);
                    upd_ok = p;
                    continue;
                }
                mask = 0x3f; /* with incremental indexing */
                index_it = 1;
            }
            if (hb_hp_int_decode(&p, end, mask, &idx, &HP, err)) goto fail;
            if (idx) {
                const char *unused;
                size_t unused_len;
                if (lookup(d, idx, &name, &nlen, &unused, &unused_len, err)) goto fail;
            } else if (hb_hp_str_decode(&p, end, 0x7f, 0x80, &sc, &name, &nlen, &HP, err)) {
                goto fail;
            }
            if (hb_hp_str_decode(&p, end, 0x7f, 0x80, &sc, &value, &vlen, &HP, err)) goto fail;
            if (index_it && dyn_add(d, name, nlen, value, vlen))
                dyn_get(d, 0, &name, &nlen, &value, &vlen);
        }
        if (HB_LIKELY(nlen + vlen + 32 <= room)) {
            room -= nlen + vlen + 32;
            fn(ud, name, nlen, value, vlen);
        } else { /* nothing more for fn, even a smaller field */
            room = 0;
            over = 1;
        }
    }
    return over ? HB_H2_HPACK_TOO_LARGE : 0;
fail:
    d->failed = 1;
    return HB_E_H2;
}

/* ---- encoder ---- */

/* Static index of name (first of its entries), or 0. */
static inline unsigned static_name(const char *name, size_t len)
{
    if (len >= 28) return 0;
    const uint8_t *c = NAMES_BY_LEN[len];
    for (unsigned i = 0; i < 7 && c[i]; i++) {
        const hb_hp_entry *e = &STATIC_TABLE[c[i]];
        if (e->name[0] == name[0] && memcmp(e->name, name, len) == 0) return c[i];
    }
    return 0;
}

size_t hb_h2_hpack_encode_bound(const hb_header *fields, size_t n)
{
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        const hb_header *f = &fields[i];
        /* the larger of "name index (<= 2 bytes)" and "0x00 + name string" */
        total += 1 + hb_hp_int_len(f->name_len, 7) + f->name_len;
        total += hb_hp_int_len(f->value_len, 7) + f->value_len;
        total += 1;
    }
    return total;
}

ssize_t hb_h2_hpack_encode(const hb_header *fields, size_t n, uint8_t *out, size_t cap)
{
    uint8_t *o = out;
    for (size_t i = 0; i < n; i++) {
        const hb_header *f = &fields[i];
        unsigned idx = f->name_len ? static_name(f->name, f->name_len) : 0;
        size_t need;
        if (idx) {
            /* an exact match among this name's entries goes out as one index */
            /* names with values have them from their first entry on, consecutively */
            for (unsigned j = idx; j <= STATIC_N && STATIC_TABLE[j].value_len &&
                                   STATIC_TABLE[j].name_len == f->name_len &&
                                   memcmp(STATIC_TABLE[j].name, f->name, f->name_len) == 0;
                 j++) {
                const hb_hp_entry *e = &STATIC_TABLE[j];
                if (e->value_len == f->value_len && memcmp(e->value, f->value, f->value_len) == 0) {
                    if (o == out + cap) return HB_E_TOO_LARGE;
                    *o++ = (uint8_t)(0x80 | j);
                    goto next;
                }
            }
            need = hb_hp_int_len(idx, 4) + hb_hp_int_len(f->value_len, 7) + f->value_len;
            if (need > (size_t)(out + cap - o)) return HB_E_TOO_LARGE;
            o = hb_hp_int_put(o, 0, idx, 4);
        } else {
            need = 1 + hb_hp_int_len(f->name_len, 7) + f->name_len +
                   hb_hp_int_len(f->value_len, 7) + f->value_len;
            if (need > (size_t)(out + cap - o)) return HB_E_TOO_LARGE;
            *o++ = 0;
            o = hb_hp_str_put(o, 0, 7, f->name, f->name_len);
        }
        o = hb_hp_str_put(o, 0, 7, f->value, f->value_len);
    next:;
    }
    return o - out;
}
