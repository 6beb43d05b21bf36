/* fuzz_ws.c - libFuzzer harness for hb_ws: the WebSocket frame reader, heads,
 * close payloads and the UTF-8 validator.
 *
 * Input: byte 0 picks the direction (server or client reader), the split step
 * and the limits; the rest is the byte stream. Beyond "no crash, no sanitizer
 * report" it checks the contract: every event's data lies inside the input,
 * consumed counts stay within what was given, the reader's outcome (the log of
 * events and the error) is the same whether fed whole or in pieces, a message
 * never exceeds max_msg, text messages and close reasons are valid UTF-8, every
 * parsed head rebuilds to the same bytes, and a failed reader stays failed.
 *
 * build: clang -fsanitize=fuzzer,address,undefined -Icsrc/core csrc/fuzz/fuzz_ws.c \
 *          csrc/core/ws/hb_ws.c csrc/core/base/hb_common.c csrc/core/http/hb_parse.c -lcrypto
 */
#include <stdint.h>
#include <string.h>

#include "ws/hb_ws.h"

#define REQUIRE(c)                                                                                 \
    do {                                                                                           \
        if (!(c)) __builtin_trap();                                                                \
    } while (0)

#define CAP 65536

static uint8_t buf[CAP + HB_WS_MAX_HEAD + HB_WS_MAX_CONTROL];

/* A running digest of the events, so two feeds can be compared cheaply. */
typedef struct out {
    uint64_t h;
    uint64_t msgs;
    int rc;
} out;

static void mix(out *o, const void *p, size_t n)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++)
        o->h = (o->h ^ b[i]) * 0x100000001b3ull;
}

static void run(const uint8_t *src, size_t n, size_t step, unsigned flags, uint64_t max_msg,
                uint32_t max_frags, out *o)
{
    hb_ws_rx rx;
    hb_ws_rx_init(&rx, flags, max_msg, max_frags);
    memset(o, 0, sizeof *o);
    o->h = 0xcbf29ce484222325ull;
    size_t have = 0, fed = 0;
    uint64_t msg = 0;
    uint32_t utf8 = HB_UTF8_ACCEPT;
    for (;;) {
        size_t add = n - fed < step ? n - fed : step;
        if (add > sizeof buf - have) add = sizeof buf - have;
        memcpy(buf + have, src + fed, add);
        have += add;
        fed += add;
        size_t off = 0;
        for (;;) {
            hb_ws_event ev;
            int rc = hb_ws_rx_next(&rx, buf + off, have - off, &ev);
            if (rc < 0) {
                REQUIRE(hb_is_ws_error(rc));
                REQUIRE(hb_ws_rx_next(&rx, buf, have, &ev) == rc); /* sticky */
                o->rc = rc;
                return;
            }
            REQUIRE((size_t)rc <= have - off);
            if (ev.data_len)
                REQUIRE(ev.data >= buf + off && ev.data + ev.data_len <= buf + off + (size_t)rc);
            off += (size_t)rc;
            if (ev.type == HB_WS_EV_NONE) break;
            int t = ev.type;
            if (ev.type != HB_WS_EV_DATA) mix(o, &t, sizeof t); /* data: one per piece */
            if (ev.type == HB_WS_EV_DATA) {
                if (ev.first) {
                    msg = 0;
                    utf8 = HB_UTF8_ACCEPT;
                    mix(o, "[", 1);
                    mix(o, &ev.opcode, sizeof ev.opcode);
                    mix(o, &ev.compressed, sizeof ev.compressed);
                }
                REQUIRE(!ev.compressed || (flags & HB_WS_DEFLATE));
                msg += ev.data_len;
                mix(o, ev.data, ev.data_len);
                REQUIRE(msg <= max_msg || !max_msg);
                /* compressed text is checked once inflated, by the endpoint */
                int text = ev.opcode == HB_WS_TEXT && !ev.compressed;
                if (text) utf8 = hb_ws_utf8(utf8, ev.data, ev.data_len);
                REQUIRE(utf8 != HB_UTF8_REJECT);
                if (ev.fin) {
                    REQUIRE(!text || utf8 == HB_UTF8_ACCEPT);
                    o->msgs++;
                    mix(o, "]", 1);
                }
            } else if (ev.type == HB_WS_EV_CLOSE) {
                REQUIRE(hb_ws_utf8(HB_UTF8_ACCEPT, ev.data, ev.data_len) == HB_UTF8_ACCEPT);
                REQUIRE(ev.code == 1005 || (ev.code >= 1000 && ev.code <= 4999));
                mix(o, &ev.code, sizeof ev.code);
                mix(o, ev.data, ev.data_len);
            } else {
                REQUIRE(ev.data_len <= HB_WS_MAX_CONTROL);
                mix(o, ev.data, ev.data_len);
            }
        }
        memmove(buf, buf + off, have - off);
        have -= off;
        if (fed == n) break;
    }
}

static void heads(const uint8_t *p, size_t n)
{
    hb_ws_frame f;
    int h = hb_ws_parse_head(p, n, &f, 0);
    if (h > 0) {
        uint8_t b[HB_WS_MAX_HEAD];
        REQUIRE(h >= 2 && h <= HB_WS_MAX_HEAD && (size_t)h <= n);
        int r = hb_ws_build_head(b, sizeof b, f.fin, f.opcode, f.len, f.masked ? f.mask : NULL);
        REQUIRE(r == h && memcmp(b, p, (size_t)h) == 0);
    } else
        REQUIRE(h == HB_AGAIN || hb_is_ws_error(h));
    int code;
    const uint8_t *r;
    size_t rl;
    if (n <= HB_WS_MAX_CONTROL && hb_ws_close_parse(p, n, &code, &r, &rl) == 0 && n >= 2) {
        uint8_t b[HB_WS_MAX_CONTROL];
        REQUIRE(hb_ws_close_build(b, sizeof b, code, (const char *)r, rl) == (int)n);
        REQUIRE(memcmp(b, p, n) == 0);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > CAP) return 0;
    uint8_t c = data[0];
    const uint8_t *p = data + 1;
    size_t n = size - 1;
    heads(p, n);
    unsigned flags = (c & 1 ? HB_WS_SERVER : HB_WS_CLIENT) | (c & 0x80 ? HB_WS_DEFLATE : 0);
    uint64_t max_msg = c & 2 ? 64 : 0;
    uint32_t max_frags = c & 4 ? 3 : 0;
    size_t step = (size_t)(c >> 3 & 15) + 1;
    /* the split must not matter: whole, then in pieces */
    static uint8_t copy[CAP];
    memcpy(copy, p, n);
    out whole, pieces;
    run(copy, n, n ? n : 1, flags, max_msg, max_frags, &whole);
    memcpy(copy, p, n);
    run(copy, n, step, flags, max_msg, max_frags, &pieces);
    /* (after an error the pieces may have delivered a valid prefix of the bad frame) */
    REQUIRE(whole.rc == pieces.rc && whole.msgs == pieces.msgs);
    REQUIRE(whole.rc || whole.h == pieces.h);
    return 0;
}
