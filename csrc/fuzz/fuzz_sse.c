/* fuzz_sse.c - libFuzzer harness for hb_sse's scanner (and its events).
 *
 * Input: byte 0 and 1 pick two split offsets and the line bound; the rest is
 * the stream. Checks: the events, comments and lines found equal a plain
 * reference reading of the spec's rules over the whole input; the split does
 * not matter; the bound fails exactly when some line (or the unfinished tail)
 * exceeds it; first_end lies just past a line end. And the server's event for
 * a size from the input scans as exactly one event.
 *
 * build: clang -fsanitize=fuzzer,address,undefined -Icsrc/core csrc/fuzz/fuzz_sse.c \
 *          csrc/core/http/hb_sse.c
 */
#include <stdint.h>
#include <string.h>

#include "http/hb_sse.h"

#define REQUIRE(c)                                                                                 \
    do {                                                                                           \
        if (!(c)) __builtin_trap();                                                                \
    } while (0)

typedef struct ref {
    int64_t events;
    uint64_t comments, lines, longest;
} ref;

/* The spec's rules, the obvious way: split on CRLF / LF / CR, classify each line. */
static void reference(const uint8_t *p, size_t n, ref *r)
{
    memset(r, 0, sizeof *r);
    int has_data = 0;
    size_t i = 0, start = 0;
    while (i <= n) {
        if (i == n) {
            if (i - start > r->longest) r->longest = i - start; /* unfinished tail */
            break;
        }
        if (p[i] != '\r' && p[i] != '\n') {
            i++;
            continue;
        }
        size_t len = i - start;
        if (len > r->longest) r->longest = len;
        r->lines++;
        const uint8_t *l = p + start;
        const uint8_t *colon = memchr(l, ':', len);
        size_t name = colon ? (size_t)(colon - l) : len;
        if (len == 0) {
            if (has_data) r->events++;
            has_data = 0;
        } else if (name == 0) {
            r->comments++;
        } else if (name == 4 && memcmp(l, "data", 4) == 0) {
            has_data = 1;
        }
        i += (p[i] == '\r' && i + 1 < n && p[i + 1] == '\n') ? 2 : 1;
        start = i;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2) return 0;
    const char *s = (const char *)data + 2;
    size_t n = size - 2;
    size_t a = n ? data[0] % (n + 1) : 0;
    size_t b = a + (n - a ? data[1] % (n - a + 1) : 0);
    uint64_t bound = data[1] & 1 ? 0 : (uint64_t)(data[0] & 63) + 1;
    ref r;
    reference((const uint8_t *)s, n, &r);

    hb_sse_scan sc;
    hb_sse_scan_init(&sc, bound);
    int failed = 0;
    int64_t got = 0;
    const size_t cuts[4] = {0, a, b, n};
    for (int k = 0; k < 3; k++) {
        size_t fe;
        int64_t rc = hb_sse_scan_feed(&sc, s + cuts[k], cuts[k + 1] - cuts[k], &fe);
        if (rc < 0) {
            REQUIRE(rc == HB_SSE_E_LINE);
            failed = 1;
            break;
        }
        got += rc;
        size_t len = cuts[k + 1] - cuts[k];
        REQUIRE(fe <= len);
        if (rc > 0)
            REQUIRE(fe > 0 && (s[cuts[k] + fe - 1] == '\n' || s[cuts[k] + fe - 1] == '\r'));
        else
            REQUIRE(fe == len);
    }
    uint64_t limit = bound ? bound : 1024 * 1024;
    REQUIRE(failed == (r.longest > limit));
    if (!failed) {
        REQUIRE(got == r.events && sc.events == (uint64_t)r.events);
        REQUIRE(sc.comments == r.comments && sc.lines == r.lines);
    }

    /* one of the server's events scans as one event */
    static char ev[HB_SSE_MAX_SIZE + 4096];
    struct iovec iov[HB_SSE_EVENT_IOV];
    char scratch[HB_SSE_SCRATCH];
    size_t len, at = 0, esize = (size_t)(data[0] | data[1] << 8) % 4000;
    int cnt = hb_sse_event_iov(iov, scratch, (uint64_t)n * 1000003u, esize, &len);
    for (int i = 0; i < cnt; i++) {
        memcpy(ev + at, iov[i].iov_base, iov[i].iov_len);
        at += iov[i].iov_len;
    }
    REQUIRE(at == len && len == hb_sse_event_len((uint64_t)n * 1000003u, esize));
    hb_sse_scan_init(&sc, 0);
    REQUIRE(hb_sse_scan_feed(&sc, ev, len, NULL) == 1);
    return 0;
}
