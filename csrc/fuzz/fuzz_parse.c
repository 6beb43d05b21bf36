/* fuzz_parse.c - libFuzzer harness for hb_parse: response heads, request heads
 * and the chunked decoder, each input through all three.
 *
 * Beyond "no crash, no sanitizer report" it checks the contract: results
 * point inside the input, a complete head is incomplete one byte earlier and
 * parses identically from exactly its own bytes, tighter limits either fail
 * with the matching code or agree, and the chunked decoder gives the same
 * body, consumption and error however the input is split.
 *
 * build: clang -fsanitize=fuzzer,address,undefined -Icsrc/core \
 *          csrc/fuzz/fuzz_parse.c csrc/core/hb_parse.c csrc/core/hb_common.c
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hb_parse.h"

#define REQUIRE(c)                                                                                 \
    do {                                                                                           \
        if (!(c)) __builtin_trap();                                                                \
    } while (0)

static uint64_t hash64(const uint8_t *d, size_t n)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (size_t i = 0; i < n; i++) h = (h ^ d[i]) * 1099511628211ULL;
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
    if (rc > 0) REQUIRE((size_t)rc <= len && err == HB_PE_NONE);
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
            REQUIRE(rc2 == HB_ERROR && (r.error == HB_PE_HEAD_TOO_LARGE ||
                                        r.error == HB_PE_TOO_MANY_HEADERS));
    } else if (rc == HB_AGAIN) {
        for (size_t k = 0; k < len; k += 1 + len / 8)
            REQUIRE(response(b, k, NULL, &r, HB_PARSE_DEFAULT_MAX_HEADERS) == HB_AGAIN);
    }
}

static int request(const char *b, size_t len, hb_request_head *q)
{
    memset(q, 0, sizeof *q);
    q->headers = hdrs;
    q->num_headers = HB_PARSE_DEFAULT_MAX_HEADERS;
    int rc = hb_parse_request_head(b, len, q, NULL);
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

static void fuzz_request(const char *b, size_t len)
{
    hb_request_head q;
    int rc = request(b, len, &q);
    if (rc > 0) {
        REQUIRE(request(b, (size_t)rc, &q) == rc);
        REQUIRE(request(b, (size_t)rc - 1, &q) == HB_AGAIN);
    }
}

/* Decodes b in pieces (sizes from *seed, or whole when seed is NULL). */
static ssize_t decode(const char *b, size_t len, uint64_t *seed, char *out, size_t *out_len,
                      int *err, int *done)
{
    hb_chunked c;
    hb_chunked_init(&c);
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
    return (ssize_t)pos;
}

static void fuzz_chunked(const char *b, size_t len, uint64_t h)
{
    char *a = malloc(len + 1), *s = malloc(len + 1);
    REQUIRE(a && s);
    size_t al, sl;
    int ae, se, ad = 0, sd = 0;
    ssize_t ar = decode(b, len, NULL, a, &al, &ae, &ad);
    uint64_t seed = h | 1;
    ssize_t sr = decode(b, len, &seed, s, &sl, &se, &sd);
    REQUIRE(ar == sr && ae == se && ad == sd);
    if (ar >= 0) REQUIRE(al == sl && memcmp(a, s, al) == 0);
    if (ar == HB_ERROR) {
        /* the error is found within the bytes it concerns: decoding up to the
         * whole buffer never gives more body than split decoding did */
        REQUIRE(al == sl && memcmp(a, s, al) == 0);
    }
    free(a);
    free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *b = (const char *)data;
    uint64_t h = hash64(data, size);
    fuzz_response(b, size, h);
    fuzz_request(b, size);
    fuzz_chunked(b, size, h);
    return 0;
}
