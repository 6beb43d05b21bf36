/* fuzz_h3_frame.c - libFuzzer harness for the HTTP/3 frame reader (h3codec/hb_h3_frame)
 * and what reads the frames' payloads (SETTINGS, the one-varint frames, QPACK).
 *
 * Input: byte 0 picks the piece size (bits 0-3: 1..16, 0 = the whole input)
 * and the frame limit (bits 4-5: 0, 8, 64, 1024); the rest is one stream's
 * bytes. Beyond "no crash, no sanitizer report, no leak" it checks the
 * contract:
 *  - the reader consumes no more than it is given, and all of it when it
 *    says HB_H3_EV_NEED_MORE;
 *  - a whole frame never exceeds the limit (but for one-varint frames);
 *  - fed whole and fed in pieces, it gives the same frames, the same DATA
 *    bytes with the same frame boundaries, and the same error (if any);
 *  - varints re-encode to bytes that read back the same.
 *
 * build: clang -fsanitize=fuzzer,address,undefined -Icsrc/core csrc/fuzz/fuzz_h3_frame.c \
 *          csrc/core/h3codec/hb_h3_frame.c csrc/core/h3codec/hb_qpack.c csrc/core/http/hb_huff.c \
 *          csrc/core/base/hb_common.c
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/hb_common.h"
#include "h3codec/hb_h3_frame.h"
#include "h3codec/hb_qpack.h"

#define REQUIRE(c)                                                                                 \
    do {                                                                                           \
        if (!(c)) __builtin_trap();                                                                \
    } while (0)

static uint64_t mix(uint64_t h, uint64_t v)
{
    return (h ^ v) * 0x100000001b3ull;
}

static void on_field(void *ud, const char *n, size_t nl, const char *v, size_t vl)
{
    uint64_t *h = ud;
    for (size_t i = 0; i < nl; i++)
        *h = mix(*h, (uint8_t)n[i]);
    for (size_t i = 0; i < vl; i++)
        *h = mix(*h, (uint8_t)v[i] + 256u);
}

/* Read the stream in pieces of `step` bytes (0 = whole); returns a hash of the
 * events and sets *err_code (0 or the negative error). */
static uint64_t run(const uint8_t *in, size_t len, size_t step, size_t max, int *err_code)
{
    static uint8_t buf[1024];
    static uint8_t scratch[1024 / 5 * 8 + 16];
    hb_h3_frame_reader r;
    hb_h3_frame_reader_init(&r, buf, sizeof buf, max);
    char err[HB_ERR_LEN];
    uint64_t h = 0xcbf29ce484222325ull;
    *err_code = 0;
    for (size_t at = 0; at < len;) {
        size_t n = step && len - at > step ? step : len - at;
        const uint8_t *p = in + at;
        size_t left = n;
        for (;;) {
            hb_h3_frame_ev ev;
            ssize_t k = hb_h3_frame_read(&r, p, left, &ev, err);
            if (k < 0) {
                *err_code = (int)k;
                return h;
            }
            REQUIRE((size_t)k <= left);
            p += k;
            left -= (size_t)k;
            if (ev.kind == HB_H3_EV_NEED_MORE) {
                REQUIRE(left == 0);
                break;
            }
            if (ev.kind == HB_H3_EV_DATA) {
                if (ev.frame_start) h = mix(h, 0x1000);
                for (size_t i = 0; i < ev.len; i++)
                    h = mix(h, ev.payload[i]);
                if (ev.frame_end) h = mix(h, 0x2000);
                continue;
            }
            REQUIRE(ev.kind == HB_H3_EV_FRAME);
            REQUIRE(ev.len <= max || ev.len <= 8);
            h = mix(h, 0x3000 + ev.type);
            for (size_t i = 0; i < ev.len; i++)
                h = mix(h, ev.payload[i]);
            uint64_t v;
            hb_h3_conn_settings s;
            if (ev.type == HB_H3_FRAME_SETTINGS) {
                h = mix(h, (uint64_t)hb_h3_settings_decode(ev.payload, ev.len, &s, err));
            } else if (ev.type == HB_H3_FRAME_HEADERS) {
                REQUIRE(hb_qpack_scratch_need(ev.len) <= sizeof scratch);
                h = mix(h, (uint64_t)hb_qpack_decode(ev.payload, ev.len, scratch, 4096, on_field,
                                                     &h, err));
            } else if (hb_h3_frame_varint_payload(ev.payload, ev.len, &v, err) == 0) {
                uint8_t b[8];
                REQUIRE(hb_h3_varint_put(b, v) - b == (ptrdiff_t)hb_h3_varint_len(v));
                uint64_t w;
                REQUIRE(hb_h3_varint_get(b, 8, &w) == hb_h3_varint_len(v) && w == v);
            }
        }
        at += n;
    }
    return mix(h, (uint64_t)hb_h3_frame_reader_idle(&r));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    static const size_t limits[4] = {0, 8, 64, 1024};
    size_t step = data[0] & 15;
    size_t max = limits[(data[0] >> 4) & 3];
    int e1, e2;
    uint64_t whole = run(data + 1, size - 1, 0, max, &e1);
    uint64_t pieces = run(data + 1, size - 1, step ? step : 1, max, &e2);
    REQUIRE(e1 == e2);
    if (!e1) REQUIRE(whole == pieces);
    return 0;
}
