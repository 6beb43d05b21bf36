/* test_h3_frame.c - unit tests of HTTP/3 framing (h3codec/hb_h3_frame): QUIC varints
 * (RFC 9000 appendix A.1's examples, every length boundary, fed byte by byte),
 * SETTINGS both ways and every SETTINGS error, the one-varint frames, which
 * frames each stream may carry, and the incremental frame reader fed whole,
 * byte by byte and in every two-piece split, with its limits and errors. */
#include <stdlib.h>
#include <string.h>

#include "base/hb_common.h"
#include "h3codec/hb_h3_frame.h"
#include "hb_test.h"

static size_t unhex(const char *hex, uint8_t *out)
{
    size_t n = 0;
    for (const char *h = hex; h[0];) {
        if (h[0] == ' ') {
            h++;
            continue;
        }
        unsigned v;
        sscanf(h, "%2x", &v);
        out[n++] = (uint8_t)v;
        h += 2;
    }
    return n;
}

static void test_varints(void)
{
    static const struct {
        const char *hex;
        uint64_t v;
    } rfc[] = {{"c2197c5eff14e88c", UINT64_C(151288809941952652)},
               {"9d7f3e7d", 494878333},
               {"7bbd", 15293},
               {"25", 37},
               {"4025", 37}};
    for (size_t i = 0; i < sizeof rfc / sizeof rfc[0]; i++) {
        uint8_t b[8];
        size_t n = unhex(rfc[i].hex, b);
        uint64_t v = 0;
        CHECK_EQ_INT(hb_h3_varint_get(b, n, &v), n);
        CHECK(v == rfc[i].v);
        CHECK_EQ_INT(hb_h3_varint_get(b, n - 1, &v), 0); /* one byte short */
        hb_h3_varint_rd rd = {0, 0, 0};
        int done = 0;
        for (size_t k = 0; k < n; k++) {
            CHECK(!done);
            CHECK_EQ_INT(hb_h3_varint_feed(&rd, b + k, 1, &done), 1);
        }
        CHECK(done && rd.v == rfc[i].v);
    }
    static const uint64_t edges[] = {
        0, 63, 64, 16383, 16384, (UINT64_C(1) << 30) - 1, UINT64_C(1) << 30, HB_H3_VARINT_MAX};
    static const size_t lens[] = {1, 1, 2, 2, 4, 4, 8, 8};
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++) {
        uint8_t b[8];
        CHECK_EQ_INT(hb_h3_varint_len(edges[i]), lens[i]);
        CHECK_EQ_INT(hb_h3_varint_put(b, edges[i]) - b, lens[i]);
        uint64_t v = 1;
        CHECK_EQ_INT(hb_h3_varint_get(b, 8, &v), lens[i]);
        CHECK(v == edges[i]);
    }
    CHECK_EQ_INT(hb_h3_varint_len(HB_H3_VARINT_MAX + 1), 0);
    int done = 1;
    hb_h3_varint_rd rd = {0, 0, 0};
    CHECK_EQ_INT(hb_h3_varint_feed(&rd, NULL, 0, &done), 0);
    CHECK(!done);
}

static void test_settings(void)
{
    char err[HB_ERR_LEN];
    hb_h3_conn_settings s, d;
    hb_h3_settings_default(&s);
    s.max_field_section_size = 16384;
    uint8_t f[HB_H3_SETTINGS_FRAME_MAX];
    ssize_t n = hb_h3_settings_encode(&s, f, sizeof f);
    /* type 4, length 9: (1, 0), (7, 0), (6, 16384 = 80 00 40 00) */
    CHECK_MEM(f, (size_t)n, "\x04\x09\x01\x00\x07\x00\x06\x80\x00\x40\x00");
    CHECK_EQ_INT(hb_h3_settings_decode(f + 2, (size_t)n - 2, &d, err), 0);
    CHECK(memcmp(&s, &d, sizeof s) == 0);
    CHECK_EQ_INT(hb_h3_settings_encode(&s, f, (size_t)n - 1), -HB_H3_INTERNAL_ERROR);
    s.enable_connect_protocol = 1;
    s.h3_datagram = 1;
    s.qpack_blocked_streams = 100;
    n = hb_h3_settings_encode(&s, f, sizeof f);
    CHECK(n > 0);
    CHECK_EQ_INT(hb_h3_settings_decode(f + 2, (size_t)n - 2, &d, err), 0);
    CHECK(memcmp(&s, &d, sizeof s) == 0);

    uint8_t b[64];
    /* empty: all defaults; unknown and grease identifiers ignored */
    CHECK_EQ_INT(hb_h3_settings_decode(b, 0, &d, err), 0);
    CHECK(d.max_field_section_size == HB_H3_UNLIMITED && d.qpack_max_table_capacity == 0);
    size_t k = unhex("4021 05 7fff 00 01 8000 1000", b); /* 0x21 grease, 0x3fff, capacity 4096 */
    CHECK_EQ_INT(hb_h3_settings_decode(b, k, &d, err), 0);
    CHECK(d.qpack_max_table_capacity == 4096);
    k = unhex("01 00 01 00", b);
    CHECK_EQ_INT(hb_h3_settings_decode(b, k, &d, err), -HB_H3_SETTINGS_ERROR);
    CHECK(strstr(err, "given twice") != NULL);
    k = unhex("06 10 06 10", b);
    CHECK_EQ_INT(hb_h3_settings_decode(b, k, &d, err), -HB_H3_SETTINGS_ERROR);
    for (unsigned id = 0; id <= 5; id++) {
        if (id == 1) continue;
        b[0] = (uint8_t)id;
        b[1] = 0;
        CHECK_EQ_INT(hb_h3_settings_decode(b, 2, &d, err), -HB_H3_SETTINGS_ERROR);
    }
    k = unhex("33 02", b);
    CHECK_EQ_INT(hb_h3_settings_decode(b, k, &d, err), -HB_H3_SETTINGS_ERROR);
    k = unhex("08 02", b);
    CHECK_EQ_INT(hb_h3_settings_decode(b, k, &d, err), -HB_H3_SETTINGS_ERROR);
    k = unhex("06", b);
    CHECK_EQ_INT(hb_h3_settings_decode(b, k, &d, err), -HB_H3_FRAME_ERROR);
    k = unhex("06 80", b);
    CHECK_EQ_INT(hb_h3_settings_decode(b, k, &d, err), -HB_H3_FRAME_ERROR);
    k = unhex("40", b);
    CHECK_EQ_INT(hb_h3_settings_decode(b, k, &d, err), -HB_H3_FRAME_ERROR);
}

static void test_small_frames(void)
{
    char err[HB_ERR_LEN];
    uint8_t b[16];
    uint8_t *e = hb_h3_frame_varint_put(b, HB_H3_FRAME_GOAWAY, 400);
    CHECK_MEM(b, (size_t)(e - b), "\x07\x02\x41\x90");
    uint64_t v = 0;
    CHECK_EQ_INT(hb_h3_frame_varint_payload(b + 2, 2, &v, err), 0);
    CHECK(v == 400);
    CHECK_EQ_INT(hb_h3_frame_varint_payload(b + 2, 1, &v, err), -HB_H3_FRAME_ERROR);
    CHECK_EQ_INT(hb_h3_frame_varint_payload(b + 2, 3, &v, err), -HB_H3_FRAME_ERROR);
    CHECK_EQ_INT(hb_h3_frame_varint_payload(b, 0, &v, err), -HB_H3_FRAME_ERROR);
    e = hb_h3_frame_header_put(b, 0x21, 70000);
    CHECK_MEM(b, (size_t)(e - b), "\x21\x80\x01\x11\x70");

    CHECK_EQ_INT(hb_h3_frame_allowed(HB_H3_ON_CONTROL, HB_H3_FRAME_SETTINGS), 0);
    CHECK_EQ_INT(hb_h3_frame_allowed(HB_H3_ON_CONTROL, HB_H3_FRAME_GOAWAY), 0);
    CHECK_EQ_INT(hb_h3_frame_allowed(HB_H3_ON_CONTROL, HB_H3_FRAME_DATA), -HB_H3_FRAME_UNEXPECTED);
    CHECK_EQ_INT(hb_h3_frame_allowed(HB_H3_ON_CONTROL, HB_H3_FRAME_HEADERS),
                 -HB_H3_FRAME_UNEXPECTED);
    CHECK_EQ_INT(hb_h3_frame_allowed(HB_H3_ON_REQUEST, HB_H3_FRAME_HEADERS), 0);
    CHECK_EQ_INT(hb_h3_frame_allowed(HB_H3_ON_REQUEST, HB_H3_FRAME_PUSH_PROMISE), 0);
    CHECK_EQ_INT(hb_h3_frame_allowed(HB_H3_ON_PUSH, HB_H3_FRAME_PUSH_PROMISE),
                 -HB_H3_FRAME_UNEXPECTED);
    CHECK_EQ_INT(hb_h3_frame_allowed(HB_H3_ON_REQUEST, HB_H3_FRAME_SETTINGS),
                 -HB_H3_FRAME_UNEXPECTED);
    CHECK_EQ_INT(hb_h3_frame_allowed(HB_H3_ON_REQUEST, HB_H3_FRAME_GOAWAY),
                 -HB_H3_FRAME_UNEXPECTED);
    CHECK_EQ_INT(hb_h3_frame_allowed(HB_H3_ON_REQUEST, 0x09), -HB_H3_FRAME_UNEXPECTED);
    CHECK_EQ_INT(hb_h3_frame_allowed(HB_H3_ON_CONTROL, 0x02), -HB_H3_FRAME_UNEXPECTED);
    CHECK_EQ_INT(hb_h3_frame_allowed(HB_H3_ON_REQUEST, 0x21), 0);
    CHECK(strcmp(hb_h3_error_name(HB_H3_FRAME_ERROR), "H3_FRAME_ERROR") == 0);
    CHECK(strcmp(hb_h3_error_name(HB_H3_VERSION_FALLBACK), "H3_VERSION_FALLBACK") == 0);
    CHECK(strcmp(hb_h3_error_name(HB_H3_QPACK_DECODER_STREAM_ERROR),
                 "QPACK_DECODER_STREAM_ERROR") == 0);
    CHECK(strcmp(hb_h3_error_name(0x111), "unknown") == 0);
}

/* Feed in[0..len) in pieces of `step` bytes (0 = a split at `split`), and
 * print the events: "F<type>:<payload hex>" for whole frames, "D[<hex>]" for
 * DATA pieces, with "<" at a DATA frame's start and ">" at its end. Returns
 * the reader's error, or 0. */
static int report_skipped; /* run_reader's readers announce skipped frames: "S<type>" */

static int run_reader(const uint8_t *in, size_t len, size_t step, size_t split, size_t max,
                      char *out, size_t out_cap)
{
    static uint8_t buf[64];
    hb_h3_frame_reader r;
    hb_h3_frame_reader_init(&r, buf, sizeof buf, max);
    r.report_skipped = (uint8_t)report_skipped;
    char err[HB_ERR_LEN];
    size_t o = 0;
    out[0] = 0;
    /* DATA pieces of one frame are joined, so every split prints the same */
    for (size_t at = 0; at < len;) {
        size_t n = step ? (len - at < step ? len - at : step) : (at < split ? split : len - at);
        const uint8_t *p = in + at;
        size_t left = n;
        for (;;) {
            hb_h3_frame_ev ev;
            ssize_t k = hb_h3_frame_read(&r, p, left, &ev, err);
            if (k < 0) return (int)k;
            CHECK((size_t)k <= left);
            p += k;
            left -= (size_t)k;
            if (ev.kind == HB_H3_EV_NEED_MORE) {
                CHECK(left == 0);
                break;
            }
            if (ev.kind == HB_H3_EV_SKIPPED) {
                CHECK(ev.len == 0);
                o += (size_t)snprintf(out + o, out_cap - o, "S%llx ", (unsigned long long)ev.type);
                continue;
            }
            if (ev.kind == HB_H3_EV_FRAME) {
                o += (size_t)snprintf(out + o, out_cap - o, "F%llx:", (unsigned long long)ev.type);
            } else if (ev.frame_start) {
                o += (size_t)snprintf(out + o, out_cap - o, "D<");
            }
            for (size_t i = 0; i < ev.len; i++)
                o += (size_t)snprintf(out + o, out_cap - o, "%02x", ev.payload[i]);
            if (ev.kind == HB_H3_EV_FRAME || ev.frame_end)
                o += (size_t)snprintf(out + o, out_cap - o, ev.kind == HB_H3_EV_DATA ? "> " : " ");
        }
        at += n;
    }
    return hb_h3_frame_reader_idle(&r) ? 0 : 1;
}

static void test_reader(void)
{
    uint8_t in[256];
    /* SETTINGS (capacity 0), a grease frame 0x21 of 3 bytes, an unknown 2-byte
     * type 0x4041 of 0 bytes, HEADERS of 3, DATA of 5, DATA of 0, GOAWAY 4,
     * DATA of 66 (2-byte length), HEADERS (trailers) of 2 */
    size_t n = unhex("04 02 0100  21 03 aabbcc  4041 00  01 03 000011  00 05 68656c6c6f  00 00"
                     "07 01 04  00 4042"
                     "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"
                     "202122232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f4041"
                     "01 02 0000",
                     in);
    const char *want = "F4:0100 F1:000011 D<68656c6c6f> D<> F7:04 D<"
                       "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"
                       "202122232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f4041"
                       "> F1:0000 ";
    char out[1024];
    CHECK_EQ_INT(run_reader(in, n, n, 0, 64, out, sizeof out), 0);
    CHECK(strcmp(out, want) == 0);
    CHECK_EQ_INT(run_reader(in, n, 1, 0, 64, out, sizeof out), 0);
    CHECK(strcmp(out, want) == 0);
    CHECK_EQ_INT(run_reader(in, n, 3, 0, 64, out, sizeof out), 0);
    CHECK(strcmp(out, want) == 0);
    for (size_t split = 1; split < n; split++) {
        CHECK_EQ_INT(run_reader(in, n, 0, split, 64, out, sizeof out), 0);
        if (strcmp(out, want) != 0) {
            fprintf(stderr, "split %zu: %s\n", split, out);
            CHECK(0);
        }
    }
    /* with report_skipped: the grease frame and the unknown one (type 0x41, a
     * two-byte varint) are announced where they are, in every split; an empty
     * one at the end leaves the reader idle */
    report_skipped = 1;
    const char *want_s = "F4:0100 S21 S41 F1:000011 D<68656c6c6f> D<> F7:04 D<"
                         "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"
                         "202122232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f4041"
                         "> F1:0000 ";
    for (size_t step = 1; step <= n; step++) {
        CHECK_EQ_INT(run_reader(in, n, step, 0, 64, out, sizeof out), 0);
        CHECK(strcmp(out, want_s) == 0);
    }
    for (size_t split = 1; split < n; split++) {
        CHECK_EQ_INT(run_reader(in, n, 0, split, 64, out, sizeof out), 0);
        CHECK(strcmp(out, want_s) == 0);
    }
    uint8_t e[8];
    size_t en = unhex("21 00 4041 00", e);
    CHECK_EQ_INT(run_reader(e, en, en, 0, 64, out, sizeof out), 0);
    CHECK(strcmp(out, "S21 S41 ") == 0);
    report_skipped = 0;
    /* a stream that ends inside a frame: not idle */
    CHECK_EQ_INT(run_reader(in, 5, 1, 0, 64, out, sizeof out), 1);
    CHECK_EQ_INT(run_reader(in, 1, 1, 0, 64, out, sizeof out), 1);

    /* a HEADERS frame over the limit; DATA of any size streams */
    n = unhex("01 05 0000d1d7c1", in);
    CHECK_EQ_INT(run_reader(in, n, n, 0, 4, out, sizeof out), -HB_H3_EXCESSIVE_LOAD);
    CHECK_EQ_INT(run_reader(in, n, n, 0, 5, out, sizeof out), 0);
    n = unhex("00 4100", in);
    memset(in + n, 'x', 256 - n);
    CHECK_EQ_INT(run_reader(in, n + 256 - 2 - 2, 7, 0, 4, out, sizeof out), 1); /* ends inside */
    /* one-varint frames: wrong lengths */
    n = unhex("07 00", in);
    CHECK_EQ_INT(run_reader(in, n, n, 0, 64, out, sizeof out), -HB_H3_FRAME_ERROR);
    n = unhex("0d 09 000000000000000000", in);
    CHECK_EQ_INT(run_reader(in, n, n, 0, 64, out, sizeof out), -HB_H3_FRAME_ERROR);
    /* HTTP/2's types */
    static const char *const h2[] = {"02 00", "06 00", "08 01 00", "09 00"};
    for (size_t i = 0; i < 4; i++) {
        n = unhex(h2[i], in);
        CHECK_EQ_INT(run_reader(in, n, 1, 0, 64, out, sizeof out), -HB_H3_FRAME_UNEXPECTED);
    }
    /* a frame split with no buffer to gather it in */
    hb_h3_frame_reader r;
    hb_h3_frame_reader_init(&r, NULL, 0, 100);
    char err[HB_ERR_LEN];
    hb_h3_frame_ev ev;
    n = unhex("01 03 0000d1", in);
    CHECK_EQ_INT(hb_h3_frame_read(&r, in, n, &ev, err), n);
    CHECK(ev.kind == HB_H3_EV_FRAME && ev.len == 3 && ev.payload == in + 2);
    CHECK_EQ_INT(hb_h3_frame_read(&r, in, 3, &ev, err), -HB_H3_EXCESSIVE_LOAD);
    /* a huge length on an unknown type is skipped, never gathered */
    hb_h3_frame_reader_init(&r, NULL, 0, 0);
    n = unhex("21 c000000100000000 aa", in);
    CHECK_EQ_INT(hb_h3_frame_read(&r, in, n, &ev, err), n);
    CHECK(ev.kind == HB_H3_EV_NEED_MORE && !hb_h3_frame_reader_idle(&r));
}

int main(void)
{
    test_varints();
    test_settings();
    test_small_frames();
    test_reader();
    HB_TEST_MAIN_END();
}
