/* hb_qpack.c - QPACK (RFC 9204) with no dynamic table; see hb_qpack.h. */
#include "h3codec/hb_qpack.h"

#include <pthread.h>
#include <string.h>

#include "base/hb_common.h"
#include "http/hb_huff.h"

/* ---- static table (RFC 9204 Appendix A) ---- */

#define SE HB_HP_ENTRY
static const hb_hp_entry STATIC_TABLE[HB_QPACK_STATIC_N] = {
    SE(":authority", ""),
    SE(":path", "/"),
    SE("age", "0"),
    SE("content-disposition", ""),
    SE("content-length", "0"),
    SE("cookie", ""),
    SE("date", ""),
    SE("etag", ""),
    SE("if-modified-since", ""),
    SE("if-none-match", ""),
    SE("last-modified", ""),
    SE("link", ""),
    SE("location", ""),
    SE("referer", ""),
    SE("set-cookie", ""),
    SE(":method", "CONNECT"),
    SE(":method", "DELETE"),
    SE(":method", "GET"),
    SE(":method", "HEAD"),
    SE(":method", "OPTIONS"),
    SE(":method", "POST"),
    SE(":method", "PUT"),
    SE(":scheme", "http"),
    SE(":scheme", "https"),
    SE(":status", "103"),
    SE(":status", "200"),
    SE(":status", "304"),
    SE(":status", "404"),
    SE(":status", "503"),
    SE("accept", "*/*"),
    SE("accept", "application/dns-message"),
    SE("accept-encoding", "gzip, deflate, br"),
    SE("accept-ranges", "bytes"),
    SE("access-control-allow-headers", "cache-control"),
    SE("access-control-allow-headers", "content-type"),
    SE("access-control-allow-origin", "*"),
    SE("cache-control", "max-age=0"),
    SE("cache-control", "max-age=2592000"),
    SE("cache-control", "max-age=604800"),
    SE("cache-control", "no-cache"),
    SE("cache-control", "no-store"),
    SE("cache-control", "public, max-age=31536000"),
    SE("content-encoding", "br"),
    SE("content-encoding", "gzip"),
    SE("content-type", "application/dns-message"),
    SE("content-type", "application/javascript"),
    SE("content-type", "application/json"),
    SE("content-type", "application/x-www-form-urlencoded"),
    SE("content-type", "image/gif"),
    SE("content-type", "image/jpeg"),
    SE("content-type", "image/png"),
    SE("content-type", "text/css"),
    SE("content-type", "text/html; charset=utf-8"),
    SE("content-type", "text/plain"),
    SE("content-type", "text/plain;charset=utf-8"),
    SE("range", "bytes=0-"),
    SE("strict-transport-security", "max-age=31536000"),
    SE("strict-transport-security", "max-age=31536000; includesubdomains"),
    SE("strict-transport-security", "max-age=31536000; includesubdomains; preload"),
    SE("vary", "accept-encoding"),
    SE("vary", "origin"),
    SE("x-content-type-options", "nosniff"),
    SE("x-xss-protection", "1; mode=block"),
    SE(":status", "100"),
    SE(":status", "204"),
    SE(":status", "206"),
    SE(":status", "302"),
    SE(":status", "400"),
    SE(":status", "403"),
    SE(":status", "421"),
    SE(":status", "425"),
    SE(":status", "500"),
    SE("accept-language", ""),
    SE("access-control-allow-credentials", "FALSE"),
    SE("access-control-allow-credentials", "TRUE"),
    SE("access-control-allow-headers", "*"),
    SE("access-control-allow-methods", "get"),
    SE("access-control-allow-methods", "get, post, options"),
    SE("access-control-allow-methods", "options"),
    SE("access-control-expose-headers", "content-length"),
    SE("access-control-request-headers", "content-type"),
    SE("access-control-request-method", "get"),
    SE("access-control-request-method", "post"),
    SE("alt-svc", "clear"),
    SE("authorization", ""),
    SE("content-security-policy", "script-src 'none'; object-src 'none'; base-uri 'none'"),
    SE("early-data", "1"),
    SE("expect-ct", ""),
    SE("forwarded", ""),
    SE("if-range", ""),
    SE("origin", ""),
    SE("purpose", "prefetch"),
    SE("server", ""),
    SE("timing-allow-origin", "*"),
    SE("upgrade-insecure-requests", "1"),
    SE("user-agent", ""),
    SE("x-forwarded-for", ""),
    SE("x-frame-options", "deny"),
    SE("x-frame-options", "sameorigin"),
};
#undef SE

int hb_qpack_static_entry(unsigned idx, const char **name, size_t *name_len, const char **value,
                          size_t *value_len)
{
    if (idx >= HB_QPACK_STATIC_N) return -1;
    const hb_hp_entry *e = &STATIC_TABLE[idx];
    *name = e->name;
    *name_len = e->name_len;
    *value = e->value;
    *value_len = e->value_len;
    return 0;
}

/* The encoder's index, built once: the entries of each distinct name, and
 * the distinct names by length. */
#define MAX_NAME_LEN 40u
typedef struct {
    uint8_t n;       /* entries with this name */
    uint8_t ent[16]; /* their indexes, ascending */
} name_group;
static name_group groups[HB_QPACK_STATIC_N];
static uint8_t by_len[MAX_NAME_LEN][12]; /* group number + 1, 0 ends */
static pthread_once_t index_once = PTHREAD_ONCE_INIT;

static void index_build(void)
{
    unsigned ng = 0;
    uint8_t group_of[HB_QPACK_STATIC_N];
    for (unsigned i = 0; i < HB_QPACK_STATIC_N; i++) {
        const hb_hp_entry *e = &STATIC_TABLE[i];
        unsigned g = ng;
        for (unsigned j = 0; j < i; j++)
            if (STATIC_TABLE[j].name_len == e->name_len &&
                memcmp(STATIC_TABLE[j].name, e->name, e->name_len) == 0) {
                g = group_of[j];
                break;
            }
        group_of[i] = (uint8_t)g;
        if (g == ng) { /* a new name */
            ng++;
            uint8_t *b = by_len[e->name_len];
            unsigned k = 0;
            while (b[k])
                k++;
            b[k] = (uint8_t)(g + 1);
        }
        groups[g].ent[groups[g].n++] = (uint8_t)i;
    }
}

/* The group of name, or NULL. */
static inline const name_group *find_name(const char *name, size_t len)
{
    if (len >= MAX_NAME_LEN || len == 0) return NULL;
    const uint8_t *b = by_len[len];
    for (unsigned k = 0; b[k]; k++) {
        const name_group *g = &groups[b[k] - 1];
        const hb_hp_entry *e = &STATIC_TABLE[g->ent[0]];
        if (e->name[0] == name[0] && memcmp(e->name, name, len) == 0) return g;
    }
    return NULL;
}

/* ---- integers and strings (RFC 9204 section 4.1): http/hb_huff ---- */

static const hb_hp_ctx QP = {"qpack", "section", -HB_H3_QPACK_DECOMPRESSION_FAILED};

#define FAIL(...) hb_fail(err, -HB_H3_QPACK_DECOMPRESSION_FAILED, __VA_ARGS__)

/* ---- decoder ---- */

int hb_qpack_decode(const uint8_t *in, size_t len, uint8_t *scratch, size_t max_list,
                    hb_qpack_field_fn fn, void *ud, char *err)
{
    if (HB_UNLIKELY(len < 2)) return FAIL("qpack: field section of %zu bytes (no prefix)", len);
    const uint8_t *p = in, *end = in + len;
    uint32_t ric = 0, delta = 0;
    int rc = hb_hp_int_decode(&p, end, 0xff, &ric, &QP, err);
    if (rc) return rc;
    if (HB_UNLIKELY(ric != 0))
        return FAIL("qpack: Required Insert Count %u with no dynamic table", ric);
    if (HB_UNLIKELY(p == end)) return FAIL("qpack: section ends inside its prefix");
    uint8_t sign = *p & 0x80;
    if ((rc = hb_hp_int_decode(&p, end, 0x7f, &delta, &QP, err))) return rc;
    if (HB_UNLIKELY(sign)) /* Base = 0 - delta - 1 < 0 */
        return FAIL("qpack: negative Base (sign bit with Required Insert Count 0)");
    size_t room = max_list ? max_list : SIZE_MAX;
    while (p < end) {
        uint8_t b = *p;
        const char *name = NULL, *value = NULL;
        size_t nlen = 0, vlen = 0;
        uint32_t idx = 0;
        uint8_t *sc = scratch;
        if (b & 0x80) { /* 1Txxxxxx: indexed field line */
            if (HB_UNLIKELY(!(b & 0x40))) return FAIL("qpack: indexed line into the dynamic table");
            if ((rc = hb_hp_int_decode(&p, end, 0x3f, &idx, &QP, err))) return rc;
            if (HB_UNLIKELY(idx >= HB_QPACK_STATIC_N))
                return FAIL("qpack: static index %u (the table has 99)", idx);
            const hb_hp_entry *e = &STATIC_TABLE[idx];
            name = e->name;
            nlen = e->name_len;
            value = e->value;
            vlen = e->value_len;
        } else if (b & 0x40) { /* 01NTxxxx: literal with name reference */
            if (HB_UNLIKELY(!(b & 0x10)))
                return FAIL("qpack: name reference into the dynamic table");
            if ((rc = hb_hp_int_decode(&p, end, 0x0f, &idx, &QP, err))) return rc;
            if (HB_UNLIKELY(idx >= HB_QPACK_STATIC_N))
                return FAIL("qpack: static name index %u (the table has 99)", idx);
            name = STATIC_TABLE[idx].name;
            nlen = STATIC_TABLE[idx].name_len;
            if ((rc = hb_hp_str_decode(&p, end, 0x7f, 0x80, &sc, &value, &vlen, &QP, err)))
                return rc;
        } else if (b & 0x20) { /* 001NHxxx: literal with literal name */
            if ((rc = hb_hp_str_decode(&p, end, 0x07, 0x08, &sc, &name, &nlen, &QP, err)))
                return rc;
            if ((rc = hb_hp_str_decode(&p, end, 0x7f, 0x80, &sc, &value, &vlen, &QP, err)))
                return rc;
        } else { /* 0001xxxx, 0000Nxxx: post-base index or name reference */
            return FAIL("qpack: post-base reference into the dynamic table");
        }
        if (HB_LIKELY(nlen + vlen + 32 <= room)) {
            room -= nlen + vlen + 32;
            fn(ud, name, nlen, value, vlen);
        } else {
            return HB_QPACK_TOO_LARGE;
        }
    }
    return 0;
}

/* ---- encoder ---- */

size_t hb_qpack_encode_bound(const hb_header *fields, size_t n)
{
    size_t total = 2;
    for (size_t i = 0; i < n; i++) {
        const hb_header *f = &fields[i];
        /* the larger of "name index (<= 2 bytes)" and "a literal name" */
        total += 1 + hb_hp_int_len(f->name_len, 3) + f->name_len;
        total += hb_hp_int_len(f->value_len, 7) + f->value_len;
    }
    return total;
}

ssize_t hb_qpack_encode(const hb_header *fields, size_t n, uint8_t *out, size_t cap)
{
    pthread_once(&index_once, index_build);
    if (cap < 2) return HB_E_TOO_LARGE;
    uint8_t *o = out;
    *o++ = 0; /* Required Insert Count 0 */
    *o++ = 0; /* Base: sign 0, delta 0 */
    for (size_t i = 0; i < n; i++) {
        const hb_header *f = &fields[i];
        const name_group *g = find_name(f->name, f->name_len);
        size_t need;
        if (g) {
            for (unsigned k = 0; k < g->n; k++) {
                const hb_hp_entry *e = &STATIC_TABLE[g->ent[k]];
                if (e->value_len == f->value_len && memcmp(e->value, f->value, f->value_len) == 0) {
                    if (2 > (size_t)(out + cap - o)) return HB_E_TOO_LARGE;
                    o = hb_hp_int_put(o, 0xc0, g->ent[k], 6);
                    goto next;
                }
            }
            need = hb_hp_int_len(g->ent[0], 4) + hb_hp_int_len(f->value_len, 7) + f->value_len;
            if (need > (size_t)(out + cap - o)) return HB_E_TOO_LARGE;
            o = hb_hp_int_put(o, 0x50, g->ent[0], 4);
        } else {
            need = hb_hp_int_len(f->name_len, 3) + f->name_len + hb_hp_int_len(f->value_len, 7) +
                   f->value_len;
            if (need > (size_t)(out + cap - o)) return HB_E_TOO_LARGE;
            o = hb_hp_str_put(o, 0x20, 3, f->name, f->name_len);
        }
        o = hb_hp_str_put(o, 0, 7, f->value, f->value_len);
    next:;
    }
    return o - out;
}

/* ---- the peer's QPACK streams ---- */

int hb_qpack_peer_encoder_stream(const uint8_t *in, size_t len, char *err)
{
    for (size_t i = 0; i < len; i++)
        if (in[i] != 0x20)
            return hb_fail(err, -HB_H3_QPACK_ENCODER_STREAM_ERROR,
                           "qpack: encoder instruction 0x%02x with a table capacity of 0", in[i]);
    return 0;
}

int hb_qpack_peer_decoder_stream(hb_qpack_dstream *st, const uint8_t *in, size_t len, char *err)
{
    for (size_t i = 0; i < len; i++) {
        uint8_t b = in[i];
        if (st->in_int) {
            st->in_int = (b & 0x80) != 0;
            continue;
        }
        if (b & 0x80)
            return hb_fail(
                err, -HB_H3_QPACK_DECODER_STREAM_ERROR,
                "qpack: Section Acknowledgment for a section without dynamic references");
        if (!(b & 0x40))
            return hb_fail(err, -HB_H3_QPACK_DECODER_STREAM_ERROR,
                           "qpack: Insert Count Increment with nothing inserted");
        st->in_int = (b & 0x3f) == 0x3f; /* Stream Cancellation: skipped */
    }
    return 0;
}
