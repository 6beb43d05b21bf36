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

typedef struct {
    size_t total;
} size_acc;

static void add_size(void *ud, const char *name, size_t nlen, const char *value, size_t vlen)
{
    (void)name;
    (void)value;
    ((size_acc *)ud)->total += nlen + vlen + 32;
}

/* The section's loop; want NULL: every value decoded (hb_qpack_decode). */
static inline __attribute__((always_inline)) int
decode_section(const uint8_t *in, size_t len, uint8_t *scratch, size_t max_list,
               hb_qpack_want_fn want, hb_qpack_field_fn fn, void *ud, char *err)
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
    int skipped = 0; /* a value was skipped: room is short by its decoded length's overcount */
    while (p < end) {
        uint8_t b = *p;
        const char *name = NULL, *value = NULL;
        size_t nlen = 0, vlen = 0;
        uint32_t idx = 0;
        uint8_t *sc = scratch;
        int skip = 0;
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
            goto field;
        } else if (b & 0x40) { /* 01NTxxxx: literal with name reference */
            if (HB_UNLIKELY(!(b & 0x10)))
                return FAIL("qpack: name reference into the dynamic table");
            if ((rc = hb_hp_int_decode(&p, end, 0x0f, &idx, &QP, err))) return rc;
            if (HB_UNLIKELY(idx >= HB_QPACK_STATIC_N))
                return FAIL("qpack: static name index %u (the table has 99)", idx);
            name = STATIC_TABLE[idx].name;
            nlen = STATIC_TABLE[idx].name_len;
        } else if (b & 0x20) { /* 001NHxxx: literal with literal name */
            if ((rc = hb_hp_str_decode(&p, end, 0x07, 0x08, &sc, &name, &nlen, &QP, err)))
                return rc;
        } else { /* 0001xxxx, 0000Nxxx: post-base index or name reference */
            return FAIL("qpack: post-base reference into the dynamic table");
        }
        /* the value: a string literal with a 7-bit prefix, H the 0x80 bit */
        if (want && p < end && (*p & 0x80) && !want(ud, name, nlen)) {
            uint32_t sl;
            if ((rc = hb_hp_int_decode(&p, end, 0x7f, &sl, &QP, err))) return rc;
            if (HB_UNLIKELY(sl > (size_t)(end - p)))
                return FAIL("qpack: string of %u bytes but %zu left in the section", sl,
                            (size_t)(end - p));
            p += sl;
            vlen = (size_t)sl * 8 / 5; /* the most it decodes to */
            skip = skipped = 1;
        } else if ((rc = hb_hp_str_decode(&p, end, 0x7f, 0x80, &sc, &value, &vlen, &QP, err))) {
            return rc;
        }
    field:
        if (HB_UNLIKELY(nlen + vlen + 32 > room)) {
            if (!skipped) return HB_QPACK_TOO_LARGE;
            /* near the cap with skipped values counted at their most: the exact size of
             * the section so far, every value decoded (the last line's name lands in
             * scratch where it was), and no more skipping */
            size_acc acc = {0};
            if ((rc = hb_qpack_decode(in, (size_t)(p - in), scratch, 0, add_size, &acc, err)))
                return rc;
            if (acc.total > max_list) return HB_QPACK_TOO_LARGE;
            room = max_list - acc.total;
            want = NULL;
            skipped = 0;
        } else {
            room -= nlen + vlen + 32;
        }
        if (skip) {
            value = NULL;
            vlen = 0;
        }
        fn(ud, name, nlen, value, vlen);
    }
    return 0;
}

int hb_qpack_decode(const uint8_t *in, size_t len, uint8_t *scratch, size_t max_list,
                    hb_qpack_field_fn fn, void *ud, char *err)
{
    return decode_section(in, len, scratch, max_list, NULL, fn, ud, err);
}

int hb_qpack_decode_some(const uint8_t *in, size_t len, uint8_t *scratch, size_t max_list,
                         hb_qpack_want_fn want, hb_qpack_field_fn fn, void *ud, char *err)
{
    return decode_section(in, len, scratch, max_list, want, fn, ud, err);
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

/* One field line at o, within lim: its end, or NULL when it does not fit. */
static uint8_t *encode_line(const hb_header *f, uint8_t *o, const uint8_t *lim)
{
    const name_group *g = find_name(f->name, f->name_len);
    size_t need;
    if (g) {
        for (unsigned k = 0; k < g->n; k++) {
            const hb_hp_entry *e = &STATIC_TABLE[g->ent[k]];
            if (e->value_len == f->value_len && memcmp(e->value, f->value, f->value_len) == 0) {
                if (2 > (size_t)(lim - o)) return NULL;
                return hb_hp_int_put(o, 0xc0, g->ent[k], 6);
            }
        }
        need = hb_hp_int_len(g->ent[0], 4) + hb_hp_int_len(f->value_len, 7) + f->value_len;
        if (need > (size_t)(lim - o)) return NULL;
        o = hb_hp_int_put(o, 0x50, g->ent[0], 4);
    } else {
        need = hb_hp_int_len(f->name_len, 3) + f->name_len + hb_hp_int_len(f->value_len, 7) +
               f->value_len;
        if (need > (size_t)(lim - o)) return NULL;
        o = hb_hp_str_put(o, 0x20, 3, f->name, f->name_len);
    }
    return hb_hp_str_put(o, 0, 7, f->value, f->value_len);
}

ssize_t hb_qpack_encode(const hb_header *fields, size_t n, uint8_t *out, size_t cap)
{
    pthread_once(&index_once, index_build);
    if (cap < 2) return HB_E_TOO_LARGE;
    uint8_t *o = out;
    *o++ = 0; /* Required Insert Count 0 */
    *o++ = 0; /* Base: sign 0, delta 0 */
    for (size_t i = 0; i < n; i++)
        if (!(o = encode_line(&fields[i], o, out + cap))) return HB_E_TOO_LARGE;
    return o - out;
}

/* ---- response heads from templates ---- */

#define HEAD_DATE 0x80u /* a slot's flag: the template has a date line */

void hb_qpack_head_cache_init(hb_qpack_head_cache *hc, const char *server, size_t server_len)
{
    memset(hc, 0, sizeof *hc);
    hc->server = server;
    hc->server_len = server_len;
}

/* status (100..999) as its three digits */
static void status_digits(char st[3], unsigned status)
{
    st[0] = (char)('0' + status / 100);
    st[1] = (char)('0' + status / 10 % 10);
    st[2] = (char)('0' + status % 10);
}

/* The head's fields, content-length last when cl_len > 0: how many. */
static size_t head_fields(const hb_qpack_head_cache *hc, hb_header *f, const char *st,
                          const char *date, const char *ct, size_t ct_len, unsigned flags,
                          const char *cl, size_t cl_len)
{
    size_t n = 0;
#define NV(nm, v, vl) (hb_header){(nm), sizeof(nm) - 1, (v), (vl)}
    f[n++] = NV(":status", st, 3);
    f[n++] = NV("server", hc->server, hc->server_len);
    if (date) f[n++] = NV("date", date, HB_QPACK_DATE_LEN);
    f[n++] = NV("content-type", ct, ct_len);
    if (flags & HB_QPACK_HEAD_NO_CACHE) f[n++] = NV("cache-control", "no-cache", 8);
    if (cl_len) f[n++] = NV("content-length", cl, cl_len);
#undef NV
    return n;
}

/* Fill slot: the section up to content-length, the date's value a placeholder. 0 or -1
 * (longer than a template holds). */
static int head_build(const hb_qpack_head_cache *hc, hb_qpack_head_slot *sl, unsigned status,
                      int with_date, const char *ct, size_t ct_len, unsigned flags)
{
    char st[3];
    status_digits(st, status);
    static const char placeholder[HB_QPACK_DATE_LEN] = {0};
    hb_header f[6];
    size_t n = head_fields(hc, f, st, with_date ? placeholder : NULL, ct, ct_len, flags, NULL, 0);
    ssize_t k = hb_qpack_encode(f, n, sl->tpl, sizeof sl->tpl);
    if (k < 0) return -1;
    sl->len = (uint8_t)k;
    sl->date_at = 0;
    if (with_date) { /* the date line is the third: after :status and server */
        uint8_t tmp[HB_QPACK_HEAD_TPL];
        ssize_t two = hb_qpack_encode(f, 2, tmp, sizeof tmp);
        if (two < 0) return -1;
        sl->date_at = (uint8_t)(two + 2); /* after the date line's 0x56 0x1d */
    }
    sl->ct = ct;
    sl->ct_len = ct_len;
    sl->status = (uint16_t)status;
    sl->flags = (uint8_t)(flags | (with_date ? HEAD_DATE : 0));
    return 0;
}

ssize_t hb_qpack_encode_head(hb_qpack_head_cache *hc, unsigned status, const char *date,
                             const char *ct, size_t ct_len, unsigned flags, const char *cl,
                             size_t cl_len, uint8_t *out, size_t cap)
{
    if (status < 100 || status > 999) return HB_E_TOO_LARGE;
    unsigned key = flags | (date ? HEAD_DATE : 0);
    hb_qpack_head_slot *sl = NULL;
    for (unsigned i = 0; i < HB_QPACK_HEAD_SLOTS; i++) {
        hb_qpack_head_slot *t = &hc->slot[i];
        if (t->ct == ct && t->status == status && t->flags == key && t->ct_len == ct_len) {
            sl = t;
            break;
        }
    }
    if (HB_UNLIKELY(!sl)) {
        pthread_once(&index_once, index_build);
        hb_qpack_head_slot *t = &hc->slot[hc->next];
        if (head_build(hc, t, status, date != NULL, ct, ct_len, flags) < 0) {
            t->ct = NULL; /* too long for a template: encoded whole */
            char st[3];
            status_digits(st, status);
            hb_header f[6];
            size_t n = head_fields(hc, f, st, date, ct, ct_len, flags, cl, cl_len);
            return hb_qpack_encode(f, n, out, cap);
        }
        hc->next = (hc->next + 1) % HB_QPACK_HEAD_SLOTS;
        sl = t;
    }
    /* the content-length line: indexed for "0" (static entry 4), else its name by
     * reference and the digits raw */
    size_t cl_line = !cl_len                       ? 0
                     : cl_len == 1 && cl[0] == '0' ? 1
                                                   : 1 + hb_hp_int_len(cl_len, 7) + cl_len;
    if (sl->len + cl_line > cap) return HB_E_TOO_LARGE;
    memcpy(out, sl->tpl, sl->len);
    if (sl->date_at) memcpy(out + sl->date_at, date, HB_QPACK_DATE_LEN);
    uint8_t *o = out + sl->len;
    if (cl_line == 1) {
        *o++ = 0xc0 | 4;
    } else if (cl_line) {
        *o++ = 0x50 | 4;
        o = hb_hp_str_put(o, 0, 7, cl, cl_len);
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
