/* fuzz_parse.c - libFuzzer harness for hb_parse: response heads, request heads
 * and the chunked decoder, each input through all three, strict and lenient,
 * and the bytes after a chunked head of either direction through the decoder.
 *
 * Beyond "no crash, no sanitizer report" it checks the contract: results
 * point inside the input, a complete head is incomplete one byte earlier and
 * parses identically from exactly its own bytes, tighter limits either fail
 * with the matching code or agree, the chunked decoder gives the same body,
 * consumption and error however the input is split, and HB_PARSE_LENIENT_LF
 * only ever adds inputs with a bare LF (tolerated > 0) to what strict accepts.
 *
 * build: clang -fsanitize=fuzzer,address,undefined -Icsrc/core \
 *          csrc/fuzz/fuzz_parse.c csrc/core/http/hb_parse.c csrc/core/base/hb_common.c
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "http/hb_parse.h"

#define REQUIRE(c)                                                                                 \
    do {                                                                                           \
        if (!(c)) __builtin_trap();                                                                \
    } while (0)

static uint64_t hash64(const uint8_t *d, size_t n)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (size_t i = 0; i < n; i++)
        h = (h ^ d[i]) * 1099511628211ULL;
    return h;
}

static uint64_t next_rand(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static int inside(const char *base, size_t len, const char *p, size_t n)
{
    return n == 0 || (p >= base && n <= len && (size_t)(p - base) <= len - n);
}

static hb_header hdrs[HB_PARSE_DEFAULT_MAX_HEADERS];

static void check_rc(int rc, int err, size_t len)
{
    if (rc > 0)
        REQUIRE((size_t)rc <= len && err == HB_PE_NONE);
    else if (rc == HB_ERROR)
        REQUIRE(hb_is_protocol_error(err) && err != HB_PE_NONE);
    else
        REQUIRE(rc == HB_AGAIN && err == HB_PE_NONE);
}

static int response(const char *b, size_t len, const hb_parse_limits *lim, hb_response_head *r,
                    size_t cap)
{
    memset(r, 0, sizeof *r);
    r->headers = hdrs;
    r->num_headers = cap;
    int rc = hb_parse_response_head(b, len, r, lim);
    check_rc(rc, r->error, len);
    if (rc > 0) {
        REQUIRE(r->num_headers <= cap && r->minor_version >= 0 && r->minor_version <= 9);
        REQUIRE(r->status >= 100 && r->status <= 999);
        REQUIRE(inside(b, (size_t)rc, r->reason, r->reason_len));
        for (size_t i = 0; i < r->num_headers; i++) {
            REQUIRE(hdrs[i].name_len > 0 && inside(b, (size_t)rc, hdrs[i].name, hdrs[i].name_len));
            REQUIRE(inside(b, (size_t)rc, hdrs[i].value, hdrs[i].value_len));
        }
        REQUIRE(r->framing.content_length >= -1);
        (void)hb_response_body_kind(r, 0);
        (void)hb_response_is_interim(r);
    } else {
        REQUIRE(r->num_headers == cap);
    }
    return rc;
}

static void fuzz_response(const char *b, size_t len, uint64_t h)
{
    hb_response_head r;
    int rc = response(b, len, NULL, &r, HB_PARSE_DEFAULT_MAX_HEADERS);
    int rc_err = r.error;
    if (rc > 0) {
        size_t n = r.num_headers;
        int status = r.status;
        int64_t cl = r.framing.content_length;
        REQUIRE(response(b, (size_t)rc, NULL, &r, HB_PARSE_DEFAULT_MAX_HEADERS) == rc);
        REQUIRE(r.num_headers == n && r.status == status && r.framing.content_length == cl);
        REQUIRE(response(b, (size_t)rc - 1, NULL, &r, HB_PARSE_DEFAULT_MAX_HEADERS) == HB_AGAIN);
        /* counting mode (headers == NULL) agrees */
        hb_response_head z = {0};
        REQUIRE(hb_parse_response_head(b, len, &z, NULL) == rc && z.num_headers == n);
        /* tighter limits: same result if it still fits, else the limit's error */
        hb_parse_limits lim = {.max_head = 1 + (size_t)(h % 600),
                               .max_headers = 1 + (size_t)((h >> 20) % 12)};
        int rc2 = response(b, len, &lim, &r, HB_PARSE_DEFAULT_MAX_HEADERS);
        if ((size_t)rc <= lim.max_head && n <= lim.max_headers)
            REQUIRE(rc2 == rc);
        else
            REQUIRE(rc2 == HB_ERROR &&
                    (r.error == HB_PE_HEAD_TOO_LARGE || r.error == HB_PE_TOO_MANY_HEADERS));
    } else if (rc == HB_AGAIN) {
        for (size_t k = 0; k < len; k += 1 + len / 8)
            REQUIRE(response(b, k, NULL, &r, HB_PARSE_DEFAULT_MAX_HEADERS) == HB_AGAIN);
    }
    /* lenient: the same where strict succeeds; more only with a bare LF */
    hb_response_head l = {.headers = hdrs, .num_headers = HB_PARSE_DEFAULT_MAX_HEADERS};
    int lr = hb_parse_response_head_ex(b, len, &l, NULL, HB_PARSE_LENIENT_LF);
    check_rc(lr, l.error, len);
    if (rc > 0) REQUIRE(lr == rc && l.tolerated == 0);
    if (lr > 0 && l.tolerated == 0) REQUIRE(rc == lr);
    if (lr > 0 && l.tolerated > 0) REQUIRE(rc == HB_ERROR && rc_err == HB_PE_BAD_LINE_ENDING);
    if (rc == HB_AGAIN) REQUIRE(lr == HB_AGAIN);
    /* a strict error other than a line end comes before any bare LF */
    if (rc == HB_ERROR && rc_err != HB_PE_BAD_LINE_ENDING)
        REQUIRE(lr == HB_ERROR && l.error == rc_err);
}

static int request(const char *b, size_t len, hb_request_head *q, const hb_parse_limits *lim)
{
    memset(q, 0, sizeof *q);
    q->headers = hdrs;
    q->num_headers = HB_PARSE_DEFAULT_MAX_HEADERS;
    int rc = hb_parse_request_head(b, len, q, lim);
    check_rc(rc, q->error, len);
    if (rc > 0) {
        REQUIRE(q->method_len > 0 && inside(b, (size_t)rc, q->method, q->method_len));
        REQUIRE(q->target_len > 0 && inside(b, (size_t)rc, q->target, q->target_len));
        for (size_t i = 0; i < q->num_headers; i++) {
            REQUIRE(inside(b, (size_t)rc, hdrs[i].name, hdrs[i].name_len));
            REQUIRE(inside(b, (size_t)rc, hdrs[i].value, hdrs[i].value_len));
        }
        /* no ambiguous framing ever gets through on the request side */
        REQUIRE(!(q->framing.transfer_encoding && q->framing.content_length >= 0));
        REQUIRE(!q->framing.transfer_encoding || q->framing.chunked);
        (void)hb_request_body_kind(q);
    }
    return rc;
}

static int fuzz_request(const char *b, size_t len, uint64_t h)
{
    hb_request_head q;
    int rc = request(b, len, &q, NULL);
    if (rc > 0) {
        size_t n = q.num_headers;
        int chunked = hb_request_body_kind(&q) == HB_BODY_CHUNKED;
        REQUIRE(request(b, (size_t)rc, &q, NULL) == rc);
        REQUIRE(request(b, (size_t)rc - 1, &q, NULL) == HB_AGAIN);
        /* tighter limits: same result if it still fits, else the limit's error */
        hb_parse_limits lim = {.max_head = 1 + (size_t)((h >> 8) % 600),
                               .max_headers = 1 + (size_t)((h >> 28) % 12)};
        int rc2 = request(b, len, &q, &lim);
        if ((size_t)rc <= lim.max_head && n <= lim.max_headers)
            REQUIRE(rc2 == rc);
        else
            REQUIRE(rc2 == HB_ERROR &&
                    (q.error == HB_PE_HEAD_TOO_LARGE || q.error == HB_PE_TOO_MANY_HEADERS));
        return chunked ? rc : 0;
    }
    return 0;
}

/* Decodes b in pieces (sizes from *seed, or whole when seed is NULL). */
static unsigned last_tolerated;
static ssize_t decode(const char *b, size_t len, uint64_t *seed, char *out, size_t *out_len,
                      int *err, int *done, unsigned flags)
{
    hb_chunked c;
    hb_chunked_init_ex(&c, flags);
    size_t pos = 0, o = 0;
    while (pos < len && !c.done) {
        size_t piece = len - pos;
        if (seed) {
            size_t r = (size_t)(next_rand(seed) % 9);
            piece = r < piece ? r + 1 : piece;
        }
        size_t end = pos + piece;
        while (pos < end && !c.done) {
            const char *d;
            size_t dl;
            ssize_t r = hb_chunked_feed(&c, b + pos, end - pos, &d, &dl);
            if (r < 0) {
                REQUIRE(r == HB_ERROR && hb_is_protocol_error(c.error));
                *err = c.error;
                *out_len = o;
                return r;
            }
            REQUIRE((size_t)r <= end - pos);
            REQUIRE(r > 0 || c.done);
            if (dl) {
                REQUIRE(d >= b + pos && d + dl <= b + pos + r);
                memcpy(out + o, d, dl);
                o += dl;
            }
            pos += (size_t)r;
        }
    }
    *err = 0;
    *done = c.done;
    *out_len = o;
    last_tolerated = c.tolerated;
    return (ssize_t)pos;
}

static void fuzz_chunked(const char *b, size_t len, uint64_t h)
{
    char *a = malloc(len + 1), *s = malloc(len + 1), *l = malloc(len + 1);
    REQUIRE(a && s && l);
    size_t al, sl, ll;
    int ae, se, le, ad = 0, sd = 0, ld = 0;
    ssize_t ar = decode(b, len, NULL, a, &al, &ae, &ad, 0);
    uint64_t seed = h | 1;
    ssize_t sr = decode(b, len, &seed, s, &sl, &se, &sd, 0);
    REQUIRE(ar == sr && ae == se && ad == sd);
    if (ar >= 0) REQUIRE(al == sl && memcmp(a, s, al) == 0);
    if (ar == HB_ERROR) {
        /* the error is found within the bytes it concerns: decoding up to the
         * whole buffer never gives more body than split decoding did */
        REQUIRE(al == sl && memcmp(a, s, al) == 0);
    }
    /* lenient, split: identical where strict got through without error */
    seed = h | 1;
    ssize_t lr = decode(b, len, &seed, l, &ll, &le, &ld, HB_PARSE_LENIENT_LF);
    unsigned tol = last_tolerated;
    if (ar >= 0) REQUIRE(lr == ar && ld == ad && ll == al && memcmp(l, a, al) == 0 && tol == 0);
    if (lr >= 0 && tol == 0) REQUIRE(ar == lr);
    if (lr >= 0 && tol > 0) REQUIRE(ar == HB_ERROR && ae == HB_PE_BAD_LINE_ENDING);
    if (ar == HB_ERROR && ae != HB_PE_BAD_LINE_ENDING) REQUIRE(lr == HB_ERROR && le == ae);
    free(a);
    free(s);
    free(l);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *b = (const char *)data;
    uint64_t h = hash64(data, size);
    fuzz_response(b, size, h);
    /* a chunked body after a head, in either direction */
    int body = fuzz_request(b, size, h);
    if (body > 0) fuzz_chunked(b + body, size - (size_t)body, h);
    hb_response_head r = {.headers = hdrs, .num_headers = HB_PARSE_DEFAULT_MAX_HEADERS};
    int rc = hb_parse_response_head_ex(b, size, &r, NULL, HB_PARSE_LENIENT_LF);
    if (rc > 0 && hb_response_body_kind(&r, 0) == HB_BODY_CHUNKED)
        fuzz_chunked(b + rc, size - (size_t)rc, h);
    fuzz_chunked(b, size, h);
    return 0;
}
