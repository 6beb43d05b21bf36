/* fuzz_request.c - libFuzzer harness for hb_request: the URL splitter and the
 * request-head builder.
 *
 * Input: line 1 is the URL, line 2 the method, further lines "name:value"
 * headers; the last byte picks keep-alive and the body length. Beyond "no
 * crash, no sanitizer report" it checks the contract: URL parts point inside
 * the URL, the port is valid, the Basic credentials fit their stated length
 * and are base64; a head that builds fits its bound, fails for every smaller
 * buffer, and parses back (hb_parse) as exactly one request with the same
 * method, target and headers.
 *
 * build: clang -fsanitize=fuzzer,address,undefined -Icsrc/core \
 *          csrc/fuzz/fuzz_request.c csrc/core/http/hb_request.c csrc/core/http/hb_parse.c \
 *          csrc/core/base/hb_common.c
 */
#include <stdint.h>
#include <string.h>
#include <strings.h>

#include "http/hb_parse.h"
#include "http/hb_request.h"

#define REQUIRE(c)                                                                                 \
    do {                                                                                           \
        if (!(c)) __builtin_trap();                                                                \
    } while (0)

#define MAX_HEADERS 64
#define BUF_CAP (64 * 1024)

static char head[BUF_CAP];
static char small[BUF_CAP];
static char auth[BUF_CAP];
static hb_header in_hdrs[MAX_HEADERS];
static hb_header out_hdrs[MAX_HEADERS + 8];

static int inside(const char *base, size_t len, const char *p, size_t n)
{
    return n == 0 || (p >= base && n <= len && (size_t)(p - base) <= len - n);
}

static int is_b64(char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' ||
           c == '/' || c == '=';
}

static void check_url(const char *url, size_t len, const hb_url *u)
{
    REQUIRE(u->host_len > 0 && inside(url, len, u->host, u->host_len));
    REQUIRE(u->port >= 1 && u->port <= 65535);
    REQUIRE(inside(url, len, u->host_header, u->host_header_len));
    REQUIRE(u->host_header_len >= u->host_len);
    REQUIRE(inside(url, len, u->target, u->target_len));
    REQUIRE(!memchr(u->target, '#', u->target_len));
    REQUIRE(u->target_slash == (u->target_len == 0 || u->target[0] == '?'));
    REQUIRE(u->target_slash || u->target[0] == '/');
    REQUIRE(!u->user || inside(url, len, u->user, u->user_len));
    REQUIRE(!u->pass || (u->user && inside(url, len, u->pass, u->pass_len)));
    for (size_t i = 0; i < len; i++)
        REQUIRE((unsigned char)url[i] > 0x20 && (unsigned char)url[i] < 0x7f);

    char t[BUF_CAP];
    size_t tl = hb_url_target_len(u);
    if (tl + 1 <= sizeof t) {
        REQUIRE(hb_url_target(u, t, sizeof t, NULL) == (int)tl && t[0] == '/' && t[tl] == '\0');
        REQUIRE(hb_url_target(u, t, tl, NULL) == HB_E_INVALID);
    }
    size_t need = hb_url_basic_auth_len(u);
    REQUIRE((need == 0) == (u->user == NULL));
    if (need && need <= sizeof auth) {
        int n = hb_url_basic_auth(u, auth, need, NULL);
        REQUIRE(n > 6 && (size_t)n < need && auth[n] == '\0' && (n - 6) % 4 == 0);
        REQUIRE(memcmp(auth, "Basic ", 6) == 0);
        for (int i = 6; i < n; i++)
            REQUIRE(is_b64(auth[i]));
        REQUIRE(hb_url_basic_auth(u, auth, need - 1, NULL) == HB_E_INVALID);
    }
}

static const char *line(const char **p, const char *end, size_t *n)
{
    const char *s = *p;
    const char *nl = memchr(s, '\n', (size_t)(end - s));
    const char *e = nl ? nl : end;
    *n = (size_t)(e - s);
    *p = nl ? nl + 1 : end;
    return s;
}

static int is_ows(char c)
{
    return c == ' ' || c == '\t';
}

static void check_head(const hb_head_spec *s, const char *h, size_t n)
{
    hb_request_head r;
    memset(&r, 0, sizeof r);
    r.headers = out_hdrs;
    r.num_headers = MAX_HEADERS + 8;
    hb_parse_limits lim = {BUF_CAP, MAX_HEADERS + 8};
    int rc = hb_parse_request_head(h, n, &r, &lim);
    REQUIRE(rc == (int)n);
    REQUIRE(r.method_len == s->method_len && memcmp(r.method, s->method, r.method_len) == 0);
    const hb_url *u = s->url;
    REQUIRE(r.target_len == hb_url_target_len(u));
    REQUIRE(memcmp(r.target + u->target_slash, u->target, u->target_len) == 0);
    REQUIRE(r.minor_version == 1);
    /* The caller's headers come through in order after Host (when ours is sent). */
    size_t first = 1;
    for (size_t i = 0; i < s->num_headers; i++)
        if (s->headers[i].name_len == 4 && strncasecmp(s->headers[i].name, "host", 4) == 0)
            first = 0;
    REQUIRE(r.num_headers >= first + s->num_headers);
    for (size_t i = 0; i < s->num_headers; i++) {
        const hb_header *a = &s->headers[i], *b = &out_hdrs[first + i];
        REQUIRE(a->name_len == b->name_len && memcmp(a->name, b->name, a->name_len) == 0);
        /* The parser trims optional whitespace around values. */
        const char *v = a->value;
        size_t vl = a->value_len;
        while (vl && is_ows(v[0]))
            v++, vl--;
        while (vl && is_ows(v[vl - 1]))
            vl--;
        REQUIRE(b->value_len == vl && memcmp(b->value, v, vl) == 0);
    }
    if (s->body_len >= 0) REQUIRE(r.framing.content_length == s->body_len);
    if (s->body_len == HB_REQ_CHUNKED) REQUIRE(r.framing.chunked);
    if (!s->keepalive) REQUIRE(r.framing.connection_close);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0) return 0;
    const char *p = (const char *)data, *end = p + size - 1;
    uint8_t knobs = data[size - 1];
    size_t ulen, mlen;
    const char *url = line(&p, end, &ulen);
    const char *method = line(&p, end, &mlen);
    size_t nh = 0;
    while (p < end && nh < MAX_HEADERS) {
        size_t n;
        const char *l = line(&p, end, &n);
        const char *colon = memchr(l, ':', n);
        hb_header *h = &in_hdrs[nh++];
        h->name = l;
        h->name_len = colon ? (size_t)(colon - l) : n;
        h->value = colon ? colon + 1 : l + n;
        h->value_len = colon ? n - h->name_len - 1 : 0;
    }

    hb_url u;
    char err[HB_ERR_LEN];
    err[0] = '\0';
    int rc = hb_url_split(url, ulen, &u, err);
    REQUIRE(rc == 0 || (rc == HB_E_INVALID && err[0] && strlen(err) < HB_ERR_LEN));
    if (rc < 0) return 0;
    check_url(url, ulen, &u);

    static const int64_t lens[4] = {HB_REQ_NO_BODY, HB_REQ_CHUNKED, 0, 12345};
    hb_head_spec s = {.method = method,
                      .method_len = mlen,
                      .url = &u,
                      .headers = in_hdrs,
                      .num_headers = nh,
                      .body_len = lens[knobs & 3],
                      .keepalive = !(knobs & 4),
                      .user_agent = (knobs & 8) ? "fuzz/1" : NULL};
    size_t bound = hb_build_head_bound(&s);
    if (bound > BUF_CAP) return 0;
    err[0] = '\0';
    int n = hb_build_head(head, bound, &s, err);
    REQUIRE(n > 0 || (n == HB_E_INVALID && err[0]));
    if (n < 0) return 0;
    REQUIRE((size_t)n < bound && head[n] == '\0');
    REQUIRE(n >= 4 && memcmp(head + n - 4, "\r\n\r\n", 4) == 0);
    /* One byte short (and, every so often, much shorter) must fail cleanly. */
    REQUIRE(hb_build_head(small, (size_t)n, &s, NULL) == HB_E_INVALID);
    REQUIRE(hb_build_head(small, (size_t)n / 2, &s, NULL) == HB_E_INVALID);
    check_head(&s, head, (size_t)n);
    return 0;
}
