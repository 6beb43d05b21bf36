/* test_ws.c - WebSocket framing: RFC 6455's own examples (5.7, 1.3), every
 * head error (reserved bits and opcodes, 2^63, non-minimal lengths, masking
 * by direction, control frames), the reader fed byte by byte, fragmentation
 * and interleaved control frames, UTF-8 across fragments (1007), the size and
 * fragment bounds (1009), close payloads and the handshake key. */
#include <string.h>

#include "hb_test.h"
#include "ws/hb_ws.h"

static const uint8_t MASK[4] = {0x37, 0xfa, 0x21, 0x3d};

static void test_rfc_examples(void)
{
    hb_ws_frame f;
    static const uint8_t hello[] = {0x81, 0x05, 'H', 'e', 'l', 'l', 'o'};
    CHECK_EQ_INT(hb_ws_parse_head(hello, sizeof hello, &f, HB_WS_CLIENT), 2);
    CHECK(f.fin && f.opcode == HB_WS_TEXT && !f.masked && f.len == 5);
    CHECK_EQ_INT(hb_ws_parse_head(hello, sizeof hello, &f, HB_WS_SERVER), HB_WS_E_MASK);

    static const uint8_t masked[] = {0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d,
                                     0x7f, 0x9f, 0x4d, 0x51, 0x58};
    CHECK_EQ_INT(hb_ws_parse_head(masked, sizeof masked, &f, HB_WS_SERVER), 6);
    CHECK(f.masked && memcmp(f.mask, MASK, 4) == 0 && f.len == 5);
    CHECK_EQ_INT(hb_ws_parse_head(masked, sizeof masked, &f, HB_WS_CLIENT), HB_WS_E_MASK);
    uint8_t p[5];
    memcpy(p, masked + 6, 5);
    hb_ws_mask(p, 5, MASK, 0);
    CHECK(memcmp(p, "Hello", 5) == 0);

    /* built heads equal the RFC's bytes */
    uint8_t h[HB_WS_MAX_HEAD];
    CHECK_EQ_INT(hb_ws_build_head(h, sizeof h, 1, HB_WS_TEXT, 5, NULL), 2);
    CHECK(memcmp(h, hello, 2) == 0);
    CHECK_EQ_INT(hb_ws_build_head(h, sizeof h, 1, HB_WS_TEXT, 5, MASK), 6);
    CHECK(memcmp(h, masked, 6) == 0);
    static const uint8_t b256[] = {0x82, 0x7e, 0x01, 0x00};
    CHECK_EQ_INT(hb_ws_build_head(h, sizeof h, 1, HB_WS_BINARY, 256, NULL), 4);
    CHECK(memcmp(h, b256, 4) == 0);
    static const uint8_t b64k[] = {0x82, 0x7f, 0, 0, 0, 0, 0, 1, 0, 0};
    CHECK_EQ_INT(hb_ws_build_head(h, sizeof h, 1, HB_WS_BINARY, 65536, NULL), 10);
    CHECK(memcmp(h, b64k, 10) == 0);
    CHECK_EQ_INT(hb_ws_parse_head(b64k, sizeof b64k, &f, 0), 10);
    CHECK(f.len == 65536);
    CHECK_EQ_INT(hb_ws_build_head(h, 9, 1, HB_WS_BINARY, 65536, NULL), HB_ERROR);
    CHECK_EQ_INT(hb_ws_build_head(h, sizeof h, 1, HB_WS_PING, 126, NULL), HB_ERROR);
    CHECK_EQ_INT(hb_ws_build_head(h, sizeof h, 0, HB_WS_CLOSE, 2, NULL), HB_ERROR);
    CHECK_EQ_INT(hb_ws_build_head(h, sizeof h, 1, HB_WS_BINARY, (uint64_t)1 << 63, NULL), HB_ERROR);
    CHECK_EQ_INT(hb_ws_build_head(h, sizeof h, 1, HB_WS_BINARY, 125, MASK), 6);
    CHECK_EQ_INT(h[1], 0x80 | 125);

    char acc[29];
    CHECK(hb_ws_key_ok("dGhlIHNhbXBsZSBub25jZQ==", 24));
    CHECK_EQ_INT(hb_ws_accept("dGhlIHNhbXBsZSBub25jZQ==", 24, acc), 28);
    CHECK(strcmp(acc, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=") == 0);
    CHECK(!hb_ws_key_ok("dGhlIHNhbXBsZSBub25jZQ=", 23));
    CHECK(!hb_ws_key_ok("dGhlIHNhbXBsZSBub25jZR==", 24)); /* padding bits set */
    CHECK(!hb_ws_key_ok("dGhlIHNhbXBsZSBub25j*Q==", 24));
    const uint8_t nonce[16] = {'t', 'h', 'e', ' ', 's', 'a', 'm', 'p',
                               'l', 'e', ' ', 'n', 'o', 'n', 'c', 'e'};
    char key[25];
    hb_ws_make_key(nonce, key);
    CHECK(strcmp(key, "dGhlIHNhbXBsZSBub25jZQ==") == 0);
}

static void test_head_errors(void)
{
    hb_ws_frame f;
    static const uint8_t rsv[] = {0xc1, 0x00};
    CHECK_EQ_INT(hb_ws_parse_head(rsv, 2, &f, 0), HB_WS_E_PROTOCOL);
    static const uint8_t op3[] = {0x83, 0x00};
    CHECK_EQ_INT(hb_ws_parse_head(op3, 2, &f, 0), HB_WS_E_PROTOCOL);
    static const uint8_t opb[] = {0x8b, 0x00};
    CHECK_EQ_INT(hb_ws_parse_head(opb, 2, &f, 0), HB_WS_E_PROTOCOL);
    /* 2^63: the top bit of the 64-bit length */
    static const uint8_t huge[] = {0x82, 0x7f, 0x80, 0, 0, 0, 0, 0, 0, 0};
    CHECK_EQ_INT(hb_ws_parse_head(huge, sizeof huge, &f, 0), HB_WS_E_LENGTH);
    static const uint8_t max[] = {0x82, 0x7f, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    CHECK_EQ_INT(hb_ws_parse_head(max, sizeof max, &f, 0), 10);
    CHECK(f.len == 0x7fffffffffffffffull);
    static const uint8_t short16[] = {0x82, 0x7e, 0x00, 0x7d};
    CHECK_EQ_INT(hb_ws_parse_head(short16, 4, &f, 0), HB_WS_E_LENGTH);
    static const uint8_t short64[] = {0x82, 0x7f, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    CHECK_EQ_INT(hb_ws_parse_head(short64, sizeof short64, &f, 0), HB_WS_E_LENGTH);
    static const uint8_t bigping[] = {0x89, 0x7e, 0x00, 0x7e};
    CHECK_EQ_INT(hb_ws_parse_head(bigping, 4, &f, 0), HB_WS_E_CONTROL);
    static const uint8_t fragping[] = {0x09, 0x00};
    CHECK_EQ_INT(hb_ws_parse_head(fragping, 2, &f, 0), HB_WS_E_CONTROL);
    /* every strict prefix of a complete head is "incomplete" */
    static const uint8_t full[] = {0x82, 0xff, 0, 0, 0, 0, 0, 1, 0, 0, 1, 2, 3, 4};
    for (size_t n = 0; n < sizeof full; n++)
        CHECK_EQ_INT(hb_ws_parse_head(full, n, &f, HB_WS_SERVER), HB_AGAIN);
    CHECK_EQ_INT(hb_ws_parse_head(full, sizeof full, &f, HB_WS_SERVER), 14);
}

static void test_utf8(void)
{
    static const struct {
        const char *s;
        int ok;
    } cases[] = {
        {"hello", 1},
        {"\xce\xba\xe1\xbd\xb9\xcf\x83\xce\xbc\xce\xb5", 1}, /* Autobahn 6.2 */
        {"\xf4\x8f\xbf\xbf", 1},                             /* U+10FFFF */
        {"\xf4\x90\x80\x80", 0},                             /* U+110000 */
        {"\xed\xa0\x80", 0},                                 /* surrogate */
        {"\xed\x9f\xbf", 1},                                 /* U+D7FF */
        {"\xc0\xaf", 0},                                     /* overlong / */
        {"\xe0\x80\xaf", 0},
        {"\xf0\x80\x80\xaf", 0},
        {"\x80", 0},
        {"\xff", 0},
        {"abcdefgh\xc3\xa9", 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const uint8_t *p = (const uint8_t *)cases[i].s;
        size_t n = strlen(cases[i].s);
        CHECK_EQ_INT(hb_ws_utf8(HB_UTF8_ACCEPT, p, n) == HB_UTF8_ACCEPT, cases[i].ok);
        /* byte by byte gives the same verdict */
        uint32_t st = HB_UTF8_ACCEPT;
        for (size_t j = 0; j < n; j++)
            st = hb_ws_utf8(st, p + j, 1);
        CHECK_EQ_INT(st == HB_UTF8_ACCEPT, cases[i].ok);
    }
    /* incomplete is neither accept nor reject */
    uint32_t st = hb_ws_utf8(HB_UTF8_ACCEPT, (const uint8_t *)"\xe2\x82", 2);
    CHECK(st != HB_UTF8_ACCEPT && st != HB_UTF8_REJECT);
    CHECK_EQ_INT(hb_ws_utf8(st, (const uint8_t *)"\xac", 1), HB_UTF8_ACCEPT);
}

static void test_close(void)
{
    int code;
    const uint8_t *r;
    size_t rl;
    CHECK_EQ_INT(hb_ws_close_parse((const uint8_t *)"", 0, &code, &r, &rl), 0);
    CHECK_EQ_INT(code, 1005);
    CHECK_EQ_INT(hb_ws_close_parse((const uint8_t *)"\x03", 1, &code, &r, &rl), HB_WS_E_CLOSE);
    CHECK_EQ_INT(hb_ws_close_parse((const uint8_t *)"\x03\xe8ok", 4, &code, &r, &rl), 0);
    CHECK_EQ_INT(code, 1000);
    CHECK_MEM(r, rl, "ok");
    CHECK_EQ_INT(hb_ws_close_parse((const uint8_t *)"\x03\xed", 2, &code, &r, &rl),
                 HB_WS_E_CLOSE); /* 1005 is never sent */
    CHECK_EQ_INT(hb_ws_close_parse((const uint8_t *)"\x03\xe7", 2, &code, &r, &rl),
                 HB_WS_E_CLOSE);                                                        /* 999 */
    CHECK_EQ_INT(hb_ws_close_parse((const uint8_t *)"\x0f\xa0", 2, &code, &r, &rl), 0); /* 4000 */
    CHECK_EQ_INT(hb_ws_close_parse((const uint8_t *)"\x03\xe8\xff", 3, &code, &r, &rl),
                 HB_WS_E_UTF8);
    uint8_t out[HB_WS_MAX_CONTROL];
    CHECK_EQ_INT(hb_ws_close_build(out, sizeof out, 1007, "bad", 3), 5);
    CHECK(memcmp(out,
                 "\x03\xef"
                 "bad",
                 5) == 0);
    CHECK_EQ_INT(hb_ws_close_build(out, sizeof out, 999, "", 0), HB_ERROR);
    CHECK_EQ_INT(hb_ws_close_code(HB_WS_E_UTF8), 1007);
    CHECK_EQ_INT(hb_ws_close_code(HB_WS_E_TOO_BIG), 1009);
    CHECK_EQ_INT(hb_ws_close_code(HB_WS_E_LENGTH), 1002);
}

/* Append a masked frame to buf at *n. */
static void frame(uint8_t *buf, size_t *n, int fin, int op, const char *payload, size_t len)
{
    int h = hb_ws_build_head(buf + *n, HB_WS_MAX_HEAD, fin, op, len, MASK);
    CHECK(h > 0);
    *n += (size_t)h;
    memcpy(buf + *n, payload, len);
    hb_ws_mask(buf + *n, len, MASK, 0);
    *n += len;
}

static size_t put(char *log, size_t at, size_t cap, const void *p, size_t n)
{
    if (at + n < cap) memcpy(log + at, p, n);
    return at + n < cap ? at + n : at;
}

/* Feed src to a server-side reader `step` bytes at a time (the caller keeps
 * the unconsumed tail, as a connection's buffer does) and log the events:
 * data bytes as they come, "[t"/"[b" before a message, "]" after it, control
 * frames as <...>. The log is the same for every split. Returns the bytes
 * left unconsumed or the reader's error. */
static int feed(hb_ws_rx *rx, const uint8_t *src, size_t n, size_t step, char *log, size_t cap)
{
    static uint8_t buf[4096];
    size_t have = 0, fed = 0, at = 0;
    for (;;) {
        size_t add = n - fed < step ? n - fed : step;
        memcpy(buf + have, src + fed, add);
        have += add;
        fed += add;
        size_t off = 0;
        for (;;) {
            hb_ws_event ev;
            int rc = hb_ws_rx_next(rx, buf + off, have - off, &ev);
            if (rc < 0) return rc;
            off += (size_t)rc;
            if (ev.type == HB_WS_EV_NONE) break;
            char tag[64];
            if (ev.type == HB_WS_EV_DATA) {
                if (ev.first) at = put(log, at, cap, ev.opcode == HB_WS_TEXT ? "[t" : "[b", 2);
                at = put(log, at, cap, ev.data, ev.data_len);
                if (ev.fin) at = put(log, at, cap, "]", 1);
                continue;
            }
            int w = snprintf(tag, sizeof tag, "<%s %d ",
                             ev.type == HB_WS_EV_PING   ? "ping"
                             : ev.type == HB_WS_EV_PONG ? "pong"
                                                        : "close",
                             ev.type == HB_WS_EV_CLOSE ? ev.code : 0);
            at = put(log, at, cap, tag, (size_t)w);
            at = put(log, at, cap, ev.data, ev.data_len);
            at = put(log, at, cap, ">", 1);
        }
        memmove(buf, buf + off, have - off);
        have -= off;
        if (fed == n) break;
    }
    log[at] = 0;
    return (int)have;
}

static void test_reader(void)
{
    uint8_t in[1024];
    size_t n = 0;
    frame(in, &n, 0, HB_WS_TEXT, "Hel", 3);
    frame(in, &n, 1, HB_WS_PING, "p1", 2); /* control frames may interleave */
    frame(in, &n, 0, HB_WS_CONT, "", 0);
    frame(in, &n, 1, HB_WS_CONT, "lo \xe2\x82\xac", 6); /* the euro sign */
    frame(in, &n, 1, HB_WS_BINARY, "\x00\xff", 2);
    frame(in, &n, 1, HB_WS_TEXT, "", 0);
    frame(in, &n, 1, HB_WS_PONG, "", 0);
    frame(in, &n, 1, HB_WS_CLOSE,
          "\x03\xe8"
          "bye",
          5);
    static const char want[] = "[tHel<ping 0 p1>lo \xe2\x82\xac][b\x00\xff][t]<pong 0 >"
                               "<close 1000 bye>";
    for (size_t step = 1; step <= n; step++) {
        hb_ws_rx rx;
        char log[512];
        hb_ws_rx_init(&rx, HB_WS_SERVER, 1024, 16);
        CHECK_EQ_INT(feed(&rx, in, n, step, log, sizeof log), 0);
        CHECK(memcmp(log, want, sizeof want) == 0);
        CHECK_EQ_INT(rx.frames, 8);
    }
}

static int run(const uint8_t *in, size_t n, uint64_t max_msg, uint32_t max_frags)
{
    char log[4096];
    hb_ws_rx rx;
    hb_ws_rx_init(&rx, HB_WS_SERVER, max_msg, max_frags);
    int rc = feed(&rx, in, n, 7, log, sizeof log);
    if (rc >= 0) return rc;
    /* sticky */
    hb_ws_event ev;
    uint8_t x[2] = {0x81, 0x80};
    CHECK_EQ_INT(hb_ws_rx_next(&rx, x, 2, &ev), rc);
    return rc;
}

static void test_reader_errors(void)
{
    uint8_t in[2048];
    size_t n = 0;
    frame(in, &n, 1, HB_WS_CONT, "x", 1); /* continuation of nothing */
    CHECK_EQ_INT(run(in, n, 0, 0), HB_WS_E_PROTOCOL);
    n = 0;
    frame(in, &n, 0, HB_WS_TEXT, "a", 1);
    frame(in, &n, 1, HB_WS_TEXT, "b", 1); /* new message inside a fragmented one */
    CHECK_EQ_INT(run(in, n, 0, 0), HB_WS_E_PROTOCOL);
    n = 0;
    frame(in, &n, 0, HB_WS_TEXT, "\xe2\x82", 2);
    frame(in, &n, 1, HB_WS_CONT, "\xac", 1); /* split code point: fine */
    CHECK_EQ_INT(run(in, n, 0, 0), 0);
    n = 0;
    frame(in, &n, 1, HB_WS_TEXT, "ok\xe2\x82", 4); /* truncated at the end */
    CHECK_EQ_INT(run(in, n, 0, 0), HB_WS_E_UTF8);
    CHECK_EQ_INT(hb_ws_close_code(HB_WS_E_UTF8), 1007);
    n = 0;
    frame(in, &n, 0, HB_WS_TEXT, "\xc0", 1); /* invalid at once, before the end */
    CHECK_EQ_INT(run(in, n, 0, 0), HB_WS_E_UTF8);
    n = 0;
    frame(in, &n, 1, HB_WS_BINARY, "\xc0\xff", 2); /* binary is not checked */
    CHECK_EQ_INT(run(in, n, 0, 0), 0);
    n = 0;
    frame(in, &n, 1, HB_WS_BINARY, "0123456789", 10);
    CHECK_EQ_INT(run(in, n, 9, 0), HB_WS_E_TOO_BIG);
    CHECK_EQ_INT(run(in, n, 10, 0), 0);
    n = 0;
    for (int i = 0; i < 5; i++)
        frame(in, &n, 0, i ? HB_WS_CONT : HB_WS_BINARY, "", 0);
    CHECK_EQ_INT(run(in, n, 0, 4), HB_WS_E_TOO_BIG); /* fragments forever */
    CHECK(run(in, n, 0, 5) >= 0);
    n = 0;
    frame(in, &n, 1, HB_WS_CLOSE, "\x03", 1);
    CHECK_EQ_INT(run(in, n, 0, 0), HB_WS_E_CLOSE);
    /* an unmasked frame to a server */
    static const uint8_t plain[] = {0x81, 0x01, 'x'};
    CHECK_EQ_INT(run(plain, sizeof plain, 0, 0), HB_WS_E_MASK);
    /* 2^63 */
    static const uint8_t huge[] = {0x82, 0xff, 0x80, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4};
    CHECK_EQ_INT(run(huge, sizeof huge, 0, 0), HB_WS_E_LENGTH);
    /* a large claimed length is bounded by max_msg before any payload arrives */
    static const uint8_t big[] = {0x82, 0xff, 0x7f, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4};
    CHECK_EQ_INT(run(big, sizeof big, 1 << 20, 0), HB_WS_E_TOO_BIG);
}

static void test_mask_offsets(void)
{
    uint8_t a[37], b[37];
    for (size_t i = 0; i < sizeof a; i++)
        a[i] = b[i] = (uint8_t)(i * 7);
    hb_ws_mask(a, sizeof a, MASK, 0);
    /* in pieces at odd offsets: the same bytes */
    hb_ws_mask(b, 3, MASK, 0);
    hb_ws_mask(b + 3, 10, MASK, 3);
    hb_ws_mask(b + 13, 24, MASK, 13);
    CHECK(memcmp(a, b, sizeof a) == 0);
    for (size_t i = 0; i < sizeof a; i++)
        CHECK_EQ_INT(a[i], (uint8_t)(i * 7) ^ MASK[i & 3]);
}

static void test_rsv1(void)
{
    /* RSV1 only with HB_WS_DEFLATE, only on a message's first (text/binary) frame */
    static const uint8_t text[] = {0xc1, 0x80, 1, 2, 3, 4};
    static const uint8_t cont[] = {0xc0, 0x80, 1, 2, 3, 4};
    static const uint8_t ping[] = {0xc9, 0x80, 1, 2, 3, 4};
    static const uint8_t rsv2[] = {0xa1, 0x80, 1, 2, 3, 4};
    hb_ws_frame f;
    CHECK_EQ_INT(hb_ws_parse_head(text, sizeof text, &f, HB_WS_SERVER), HB_WS_E_PROTOCOL);
    CHECK_EQ_INT(hb_ws_parse_head(text, sizeof text, &f, HB_WS_SERVER | HB_WS_DEFLATE), 6);
    CHECK(f.rsv1 && f.opcode == HB_WS_TEXT);
    CHECK_EQ_INT(hb_ws_parse_head(cont, sizeof cont, &f, HB_WS_SERVER | HB_WS_DEFLATE),
                 HB_WS_E_PROTOCOL);
    CHECK_EQ_INT(hb_ws_parse_head(ping, sizeof ping, &f, HB_WS_SERVER | HB_WS_DEFLATE),
                 HB_WS_E_PROTOCOL);
    CHECK_EQ_INT(hb_ws_parse_head(rsv2, sizeof rsv2, &f, HB_WS_SERVER | HB_WS_DEFLATE),
                 HB_WS_E_PROTOCOL);
    /* a compressed text message's bytes are not UTF-8-checked by the reader */
    uint8_t msg[] = {0xc1, 0x82, 0, 0, 0, 0, 0xff, 0xfe};
    hb_ws_rx rx;
    hb_ws_event ev;
    hb_ws_rx_init(&rx, HB_WS_SERVER | HB_WS_DEFLATE, 0, 0);
    CHECK_EQ_INT(hb_ws_rx_next(&rx, msg, sizeof msg, &ev), (int)sizeof msg);
    CHECK(ev.type == HB_WS_EV_DATA && ev.compressed && ev.fin && ev.data_len == 2);
}

static void test_mask_copy(void)
{
    /* every length around the 32-byte blocks, at every key phase: as hb_ws_mask */
    uint8_t src[100], want[100], got[101];
    for (size_t i = 0; i < sizeof src; i++)
        src[i] = (uint8_t)(i * 13 + 5);
    for (size_t n = 0; n <= sizeof src; n++)
        for (uint64_t off = 0; off < 4; off++) {
            memcpy(want, src, n);
            hb_ws_mask(want, n, MASK, off);
            got[n] = 0xa5;
            hb_ws_mask_copy(got, src, n, MASK, off);
            CHECK(memcmp(got, want, n) == 0);
            CHECK_EQ_INT(got[n], 0xa5); /* nothing written past n */
        }
}

int main(void)
{
    test_rfc_examples();
    test_head_errors();
    test_utf8();
    test_close();
    test_reader();
    test_reader_errors();
    test_mask_offsets();
    test_mask_copy();
    test_rsv1();
    HB_TEST_MAIN_END();
}
