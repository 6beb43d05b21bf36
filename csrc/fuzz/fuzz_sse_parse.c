/* fuzz_sse_parse.c - libFuzzer harness for hb_sse_parse (the event stream
 * parser a client consumes events with).
 *
 * Input: bytes 0 and 1 pick two split offsets and the bound; the rest is the
 * stream. Checks: the events (type, data, id, retry, in order) and the error
 * are the same whether the stream comes whole or in three pieces; every call
 * consumes bytes or dispatches; no buffer grows past the bound (+1); and
 * without a BOM and an error the events counted equal hb_sse's scanner's.
 *
 * build: clang -fsanitize=fuzzer,address,undefined -Icsrc/core csrc/fuzz/fuzz_sse_parse.c \
 *          csrc/core/http/hb_sse_parse.c csrc/core/http/hb_sse.c
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "http/hb_sse.h"
#include "http/hb_sse_parse.h"

#define REQUIRE(c)                                                                                 \
    do {                                                                                           \
        if (!(c)) __builtin_trap();                                                                \
    } while (0)

static int grow(hb_sse_parser *p, hb_sse_buf *b, size_t need)
{
    REQUIRE(need <= p->max_line + 1);
    char *n = realloc(b->p, need);
    if (!n) return HB_E_NOMEM;
    b->p = n;
    b->cap = need;
    return 0;
}

static uint64_t mix(uint64_t h, const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        h = (h ^ (uint8_t)p[i]) * 1099511628211ull;
    return (h ^ 0xff) * 1099511628211ull; /* a field separator */
}

/* The events of s cut at cuts[0..ncut]: a hash of every field, the count, the error. */
static uint64_t run(const char *s, const size_t *cuts, int ncut, uint64_t bound, int64_t *events,
                    int *error)
{
    hb_sse_parser p;
    hb_sse_parser_init(&p, bound, grow, NULL);
    uint64_t h = 14695981039346656037ull;
    *events = 0;
    *error = 0;
    for (int k = 0; k < ncut && !*error; k++) {
        const char *b = s + cuts[k];
        size_t left = cuts[k + 1] - cuts[k];
        while (left) {
            hb_sse_event ev;
            int got;
            int64_t c = hb_sse_parse(&p, b, left, &ev, &got);
            if (c < 0) {
                *error = (int)c;
                break;
            }
            REQUIRE((size_t)c <= left && (c > 0 || got));
            b += c;
            left -= (size_t)c;
            if (got) {
                (*events)++;
                h = mix(h, ev.type, ev.type_len);
                h = mix(h, ev.data, ev.data_len);
                h = mix(h, ev.id, ev.id_len);
                h = mix(h, (const char *)&ev.retry, sizeof ev.retry);
            }
        }
    }
    free(p.line.p);
    free(p.data.p);
    free(p.type.p);
    free(p.id.p);
    return h;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2) return 0;
    const char *s = (const char *)data + 2;
    size_t n = size - 2;
    size_t a = n ? data[0] % (n + 1) : 0;
    size_t b = a + (n - a ? data[1] % (n - a + 1) : 0);
    uint64_t bound = data[1] & 1 ? 0 : (uint64_t)(data[0] & 63) + 1;
    const size_t whole[2] = {0, n}, split[4] = {0, a, b, n};
    int64_t e1, e2;
    int err1, err2;
    uint64_t h1 = run(s, whole, 1, bound, &e1, &err1);
    uint64_t h2 = run(s, split, 3, bound, &e2, &err2);
    REQUIRE(err1 == err2);
    if (!err1) REQUIRE(e1 == e2 && h1 == h2);
    if (!err1 && bound == 0 && !(n >= 3 && memcmp(s, "\xef\xbb\xbf", 3) == 0)) {
        hb_sse_scan sc;
        hb_sse_scan_init(&sc, 0);
        REQUIRE(hb_sse_scan_feed(&sc, s, n, NULL) == e1);
    }
    return 0;
}
