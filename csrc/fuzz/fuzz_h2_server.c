/* fuzz_h2_server.c - libFuzzer harness for hb_h2_server: the embedded server's
 * HTTP/2 input path (nghttp2 session callbacks, routing, bodies, timers).
 *
 * Input: byte 0 picks the read size the bytes arrive in and how far the fake
 * clock moves between reads (so /delay, /drip and /fault/stall fire); the
 * rest follows a valid client preface. Between reads the output queue is
 * drained the way the server's driver does it, in uneven writes. Beyond "no
 * crash, no sanitizer report, no leak" it checks the contract: the output is
 * a sequence of whole frames starting with the server's SETTINGS, fill never
 * exceeds its batch, and once the session is freed every counted stream has
 * exactly one status (sum(by_route) == sum(by_status)); the event routes'
 * counts stay within their streams' (a stall of 20 ms cuts a stream).
 *
 * build: clang -fsanitize=fuzzer,address,undefined -Icsrc/core \
 *          csrc/fuzz/fuzz_h2_server.c csrc/core/h2/hb_h2_server*.c csrc/core/http/hb_route.c \
 *          csrc/core/http/hb_sse.c \
 *          csrc/core/base/hb_content.c csrc/core/base/hb_common.c \
 *          csrc/core/http/hb_parse.c -lnghttp2
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "h2/hb_h2_server.h"

#define REQUIRE(c)                                                                                 \
    do {                                                                                           \
        if (!(c)) __builtin_trap();                                                                \
    } while (0)

static const char PREFACE[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/* The output framing checker: bytes of the current frame still expected. */
typedef struct {
    uint8_t hdr[9];
    size_t hlen;
    uint64_t left;
    uint64_t frames;
} framer;

static void framer_feed(framer *f, const uint8_t *p, size_t n)
{
    while (n) {
        if (f->left) {
            size_t k = n < f->left ? n : (size_t)f->left;
            f->left -= k;
            p += k;
            n -= k;
            continue;
        }
        f->hdr[f->hlen++] = *p++;
        n--;
        if (f->hlen == 9) {
            uint32_t len = (uint32_t)f->hdr[0] << 16 | (uint32_t)f->hdr[1] << 8 | f->hdr[2];
            if (f->frames == 0) REQUIRE(f->hdr[3] == 4); /* SETTINGS first */
            REQUIRE(f->hdr[3] <= 9);                     /* a type RFC 9113 defines */
            REQUIRE(len <= 16777215);
            f->left = len;
            f->hlen = 0;
            f->frames++;
        }
    }
}

static char *fake_stats(void *arg, size_t *len)
{
    (void)arg;
    static const char doc[] = "{\"requests\": 0}\n";
    char *p = malloc(sizeof doc);
    if (!p) return NULL;
    memcpy(p, doc, sizeof doc);
    *len = sizeof doc - 1;
    return p;
}

static void drain(hb_h2_server *s, framer *f, size_t wsize)
{
    for (int round = 0; round < 64; round++) {
        long q = hb_h2_server_fill(s);
        REQUIRE(q >= -1);
        if (q <= 0) return;
        REQUIRE(q <= 256 * 1024 + 64 * 1024);
        while (!hb_h2_server_idle_out(s)) {
            int niov;
            const struct iovec *v = hb_h2_server_out(s, &niov);
            REQUIRE(niov > 0);
            size_t n = v[0].iov_len < wsize ? v[0].iov_len : wsize; /* a short write */
            framer_feed(f, v[0].iov_base, n);
            hb_h2_server_sent(s, n);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    static const size_t chunks[8] = {1, 7, 9, 64, 1000, 16384, 65536, 1 << 20};
    size_t chunk = chunks[data[0] & 7];
    uint64_t tick = (uint64_t)((data[0] >> 3) & 31) * 1000000ull; /* 0 .. 31 ms per read */
    size_t wsize = (data[0] & 0x80) ? 4096 : (size_t)-1;
    data++;
    size--;

    hb_h2_server_stats st;
    memset(&st, 0, sizeof st);
    hb_stream_stats sm;
    memset(&sm, 0, sizeof sm);
    uint64_t now = 1000000000ull;
    hb_h2_server_config cfg;
    hb_h2_server_config_init(&cfg);
    cfg.max_concurrent_streams = 8;
    cfg.initial_window_size = 1000; /* small: flow control paths get exercised */
    cfg.max_header_list = 4096;
    cfg.stats = &st;
    cfg.now = &now;
    cfg.date = "Thu, 01 Jan 2026 00:00:00 GMT";
    cfg.stats_json = fake_stats;
    cfg.sm = &sm;
    hb_h2_server *s = NULL;
    char err[256];
    REQUIRE(hb_h2_server_new(&s, &cfg, err) == 0);
    framer f;
    memset(&f, 0, sizeof f);
    int dead = hb_h2_server_recv(s, (const uint8_t *)PREFACE, 24) < 0;
    REQUIRE(!dead);
    drain(s, &f, wsize);
    size_t off = 0;
    while (off < size && !dead && !hb_h2_server_done(s)) {
        size_t n = size - off < chunk ? size - off : chunk;
        dead = hb_h2_server_recv(s, data + off, n) < 0;
        off += n;
        drain(s, &f, wsize);
        now += tick;
        uint64_t d = hb_h2_server_deadline(s);
        if (d && d <= now) hb_h2_server_timer(s);
        (void)hb_h2_server_sweep(s, 20000000ull);
        drain(s, &f, wsize);
    }
    /* let every waiting stream run out its timers (bounded: a drip may tick many times) */
    for (int i = 0; i < 256 && !dead; i++) {
        uint64_t d = hb_h2_server_deadline(s);
        if (!d) break;
        now = d > now ? d : now;
        hb_h2_server_timer(s);
        drain(s, &f, wsize);
    }
    REQUIRE(f.hlen == 0 && f.left == 0); /* drained output ends on a frame boundary */
    hb_h2_server_free(s, 1);

    uint64_t routes = 0, statuses = 0;
    for (int i = 0; i < HB_ROUTE_COUNT; i++)
        routes += st.by_route[i];
    for (int i = 0; i < 600; i++)
        statuses += st.by_status[i];
    REQUIRE(routes == statuses);
    REQUIRE(routes <= st.streams);
    REQUIRE(sm.sse_streams <= st.by_route[HB_ROUTE_SSE]);
    REQUIRE(sm.stream_streams <= st.by_route[HB_ROUTE_STREAM]);
    REQUIRE(sm.sse_write_timeouts <= sm.sse_streams);
    REQUIRE(sm.stream_write_timeouts <= sm.stream_streams);
    REQUIRE(st.refused <= st.rst_sent);
    return 0;
}
