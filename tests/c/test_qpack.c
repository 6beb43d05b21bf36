/* test_qpack.c - unit tests of QPACK without a dynamic table (h3codec/hb_qpack): the
 * RFC 9204 appendix B.1 section, every static entry both ways, Huffman strings
 * (RFC 7541 C.4's), every decoder error, the field-section cap, the encoder
 * byte for byte and round trips, the peer's QPACK stream checks, and that
 * HPACK still decodes Huffman through the shared unit (http/hb_huff). */
#include <stdlib.h>
#include <string.h>

#include "base/hb_common.h"
#include "h2/hb_h2_hpack.h"
#include "h3codec/hb_qpack.h"
#include "hb_test.h"

typedef struct {
    char text[4096];
    size_t n;
    int fields;
} collect;

static void on_field(void *ud, const char *name, size_t nlen, const char *value, size_t vlen)
{
    collect *c = ud;
    c->n += (size_t)snprintf(c->text + c->n, sizeof c->text - c->n, "%.*s: %.*s\n", (int)nlen, name,
                             (int)vlen, value);
    c->fields++;
}

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

static uint8_t in[4096], scratch[8192];

/* Decode a hex section; the fields go to c (reset first). */
static int decode_hex(const char *hex, size_t max_list, collect *c, char *err)
{
    memset(c, 0, sizeof *c);
    size_t n = unhex(hex, in);
    err[0] = 0;
    return hb_qpack_decode(in, n, scratch, max_list, on_field, c, err);
}

static void expect(const char *hex, const char *text)
{
    collect c;
    char err[HB_ERR_LEN];
    int rc = decode_hex(hex, 0, &c, err);
    CHECK_EQ_INT(rc, 0);
    if (rc || strcmp(c.text, text) != 0) {
        fprintf(stderr, "%s -> %s (%s), expected %s\n", hex, c.text, err, text);
        CHECK(0);
    }
}

static void expect_error(const char *hex, const char *msg)
{
    collect c;
    char err[HB_ERR_LEN];
    CHECK_EQ_INT(decode_hex(hex, 0, &c, err), -HB_H3_QPACK_DECOMPRESSION_FAILED);
    if (!strstr(err, msg)) {
        fprintf(stderr, "%s: error '%s', expected '%s'\n", hex, err, msg);
        CHECK(0);
    }
}

static void test_decode(void)
{
    /* RFC 9204 B.1 */
    expect("0000 510b 2f69 6e64 6578 2e68 746d 6c", ":path: /index.html\n");
    expect("0000 d1d7 c1", ":method: GET\n:scheme: https\n:path: /\n");
    expect("0000", "");
    /* Delta Base is meaningless without references: accepted */
    expect("0005 d9", ":status: 200\n");
    /* index 98 (two-byte index), Huffman :authority, Huffman literal name */
    expect("0000 ff23", "x-frame-options: sameorigin\n");
    expect("0000 508c f1e3 c2e5 f23a 6ba0 ab90 f4ff", ":authority: www.example.com\n");
    expect("0000 2f01 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf", "custom-key: custom-value\n");
    expect("0000 2378 2d61 0162 2000", "x-a: b\n: \n");
    /* N (never index) bits are accepted and change nothing */
    expect("0000 7104 2f61 6263 3378 2d61 00", ":path: /abc\nx-a: \n");
    /* integers in their long forms */
    expect("0000 5f50 0268 62", "user-agent: hb\n");

    expect_error("00", "no prefix");
    expect_error("0100", "Required Insert Count 1");
    expect_error("ff01 00", "Required Insert Count 256");
    expect_error("0080", "negative Base");
    expect_error("00ff", "inside an integer");
    expect_error("0000 80", "indexed line into the dynamic table");
    expect_error("0000 ff24", "static index 99");
    expect_error("0000 4000", "name reference into the dynamic table");
    expect_error("0000 5f54 00", "static name index 99");
    expect_error("0000 10", "post-base");
    expect_error("0000 00", "post-base");
    expect_error("0000 5105 2f", "string of 5 bytes but 1 left");
    expect_error("0000 51", "ends before a string");
    expect_error("0000 27", "ends inside an integer");
    expect_error("0000 51ff ffff ffff 0f", "does not fit 32 bits");
    expect_error("0000 5184 ffff ffff", "Huffman EOS symbol inside a string");
    expect_error("0000 5182 1fff", "Huffman padding of 11 bits");
    expect_error("0000 5181 00", "Huffman");
}

static void test_static_table(void)
{
    /* every entry: indexed decodes to it, the encoder finds it (one byte or two) */
    for (unsigned i = 0; i < HB_QPACK_STATIC_N; i++) {
        const char *name, *value;
        size_t nl, vl;
        CHECK_EQ_INT(hb_qpack_static_entry(i, &name, &nl, &value, &vl), 0);
        hb_header h = {name, nl, value, vl};
        uint8_t out[16];
        ssize_t n = hb_qpack_encode(&h, 1, out, sizeof out);
        CHECK_EQ_INT(n, i < 63 ? 3 : 4);
        CHECK_EQ_INT(out[2], i < 63 ? 0xc0 | i : 0xff);
        collect c;
        char err[HB_ERR_LEN];
        memset(&c, 0, sizeof c);
        CHECK_EQ_INT(hb_qpack_decode(out, (size_t)n, scratch, 0, on_field, &c, err), 0);
        char want[256];
        snprintf(want, sizeof want, "%s: %s\n", name, value);
        CHECK(strcmp(c.text, want) == 0);
    }
    const char *name, *value;
    size_t nl, vl;
    CHECK_EQ_INT(hb_qpack_static_entry(HB_QPACK_STATIC_N, &name, &nl, &value, &vl), -1);
    CHECK_EQ_INT(hb_qpack_static_entry(17, &name, &nl, &value, &vl), 0);
    CHECK(strcmp(name, ":method") == 0 && strcmp(value, "GET") == 0);
    CHECK_EQ_INT(hb_qpack_static_entry(85, &name, &nl, &value, &vl), 0);
    CHECK(strcmp(name, "content-security-policy") == 0 && vl == 53);
}

#define H(n, v)                                                                                    \
    {                                                                                              \
        n, sizeof(n) - 1, v, sizeof(v) - 1                                                         \
    }

static void test_encode(void)
{
    const hb_header req[] = {H(":method", "GET"),   H(":scheme", "https"),
                             H(":authority", "ex"), H(":path", "/x"),
                             H("user-agent", "hb"), H("x-custom", "v"),
                             H(":status", "777"),   H("content-type", "text/plain")};
    uint8_t out[128];
    size_t bound = hb_qpack_encode_bound(req, 8);
    ssize_t n = hb_qpack_encode(req, 8, out, sizeof out);
    CHECK(n > 0 && (size_t)n <= bound);
    CHECK_MEM(out, (size_t)n,
              "\x00\x00\xd1\xd7\x50\x02"
              "ex\x51\x02/x\x5f\x50\x02hb\x27\x01x-custom\x01v\x5f\x09\x03"
              "777\xf5");
    collect c;
    char err[HB_ERR_LEN];
    memset(&c, 0, sizeof c);
    CHECK_EQ_INT(hb_qpack_decode(out, (size_t)n, scratch, 0, on_field, &c, err), 0);
    CHECK(strcmp(c.text,
                 ":method: GET\n:scheme: https\n:authority: ex\n:path: /x\n"
                 "user-agent: hb\nx-custom: v\n:status: 777\ncontent-type: text/plain\n") == 0);
    /* every cap below the size fails cleanly, never writes past cap */
    for (size_t cap = 0; cap < (size_t)n; cap++) {
        memset(out, 0xee, sizeof out);
        CHECK_EQ_INT(hb_qpack_encode(req, 8, out, cap), HB_E_TOO_LARGE);
        CHECK(out[cap] == 0xee);
    }
    /* long names and values: multi-byte lengths, bound holds */
    static char big[3000];
    memset(big, 'a', sizeof big);
    hb_header lg[] = {{big, 200, big, 3000}, {"cookie", 6, big, 130}, {big, 7, "", 0}};
    static uint8_t o2[4096];
    bound = hb_qpack_encode_bound(lg, 3);
    n = hb_qpack_encode(lg, 3, o2, sizeof o2);
    CHECK(n > 3330 && (size_t)n <= bound);
    memset(&c, 0, sizeof c);
    CHECK_EQ_INT(hb_qpack_decode(o2, (size_t)n, scratch, 0, on_field, &c, err), 0);
    CHECK_EQ_INT(c.fields, 3);
    CHECK_EQ_INT(c.n, 200 + 2 + 3000 + 1 + 6 + 2 + 130 + 1 + 7 + 2 + 1);
}

static void test_max_list(void)
{
    collect c;
    char err[HB_ERR_LEN];
    /* :method GET = 7 + 3 + 32 = 42, :scheme https = 44 */
    CHECK_EQ_INT(decode_hex("0000 d1d7", 86, &c, err), 0);
    CHECK_EQ_INT(c.fields, 2);
    CHECK_EQ_INT(decode_hex("0000 d1d7", 85, &c, err), HB_QPACK_TOO_LARGE);
    CHECK_EQ_INT(c.fields, 1);
    CHECK_EQ_INT(decode_hex("0000 d1d7", 41, &c, err), HB_QPACK_TOO_LARGE);
    CHECK_EQ_INT(c.fields, 0);
}

static void test_peer_streams(void)
{
    char err[HB_ERR_LEN];
    CHECK_EQ_INT(hb_qpack_peer_encoder_stream((const uint8_t *)"", 0, err), 0);
    CHECK_EQ_INT(hb_qpack_peer_encoder_stream((const uint8_t *)"\x20\x20", 2, err), 0);
    CHECK_EQ_INT(hb_qpack_peer_encoder_stream((const uint8_t *)"\x20\x21", 2, err),
                 -HB_H3_QPACK_ENCODER_STREAM_ERROR);
    CHECK_EQ_INT(hb_qpack_peer_encoder_stream((const uint8_t *)"\xc1\x01x", 3, err),
                 -HB_H3_QPACK_ENCODER_STREAM_ERROR);
    CHECK_EQ_INT(hb_qpack_peer_encoder_stream((const uint8_t *)"\x3f\xe1\x1f", 3, err),
                 -HB_H3_QPACK_ENCODER_STREAM_ERROR);
    hb_qpack_dstream st = {0};
    /* Stream Cancellation of 4 and of 300 (0x7f 0xed 0x01), split mid-integer */
    CHECK_EQ_INT(hb_qpack_peer_decoder_stream(&st, (const uint8_t *)"\x44\x7f\xed", 3, err), 0);
    CHECK_EQ_INT(hb_qpack_peer_decoder_stream(&st, (const uint8_t *)"\x01\x40", 2, err), 0);
    /* then a byte that looks like an acknowledgment but continues the integer */
    CHECK_EQ_INT(hb_qpack_peer_decoder_stream(&st, (const uint8_t *)"\x7f\x80\x80\x01", 4, err), 0);
    CHECK_EQ_INT(hb_qpack_peer_decoder_stream(&st, (const uint8_t *)"\x84", 1, err),
                 -HB_H3_QPACK_DECODER_STREAM_ERROR);
    CHECK(strstr(err, "Section Acknowledgment") != NULL);
    st.in_int = 0;
    CHECK_EQ_INT(hb_qpack_peer_decoder_stream(&st, (const uint8_t *)"\x01", 1, err),
                 -HB_H3_QPACK_DECODER_STREAM_ERROR);
    CHECK(strstr(err, "Insert Count Increment") != NULL);
}

/* ---- hb_qpack_decode_some ---- */

static void on_field_some(void *ud, const char *name, size_t nlen, const char *value, size_t vlen)
{
    if (!value) { /* skipped: named only */
        on_field(ud, name, nlen, "(skipped)", 9);
        CHECK_EQ_INT(vlen, 0);
        return;
    }
    on_field(ud, name, nlen, value, vlen);
}

static int want_path(void *ud, const char *name, size_t nlen)
{
    (void)ud;
    return nlen == 5 && memcmp(name, ":path", 5) == 0;
}

static int decode_some_hex(const char *hex, size_t max_list, collect *c, char *err)
{
    memset(c, 0, sizeof *c);
    size_t n = unhex(hex, in);
    err[0] = 0;
    return hb_qpack_decode_some(in, n, scratch, max_list, want_path, on_field_some, c, err);
}

/* :method GET; :authority and user-agent "www.example.com" Huffman-coded (RFC 7541
 * C.4.1's string); :path "/x" raw; x-a: www.example.com Huffman-coded, literal name */
#define WWW "8cf1e3c2e5f23a6ba0ab90f4ff"
#define SOME_SECTION "0000 d1 50" WWW " 5f50" WWW " 5102 2f78 2378 2d61" WWW

static void test_decode_some(void)
{
    collect c, full;
    char err[HB_ERR_LEN];
    CHECK_EQ_INT(decode_some_hex(SOME_SECTION, 0, &c, err), 0);
    CHECK(strcmp(c.text, ":method: GET\n:authority: (skipped)\nuser-agent: (skipped)\n"
                         ":path: /x\nx-a: (skipped)\n") == 0);
    CHECK_EQ_INT(decode_hex(SOME_SECTION, 0, &full, err), 0);
    CHECK(strstr(full.text, "user-agent: www.example.com\n") != NULL);
    /* a wanted value is decoded: :path Huffman-coded */
    CHECK_EQ_INT(decode_some_hex("0000 51" WWW, 0, &c, err), 0);
    CHECK(strcmp(c.text, ":path: www.example.com\n") == 0);
    /* a malformed Huffman value (EOS inside): an error where it is read, skipped where not */
    CHECK_EQ_INT(decode_some_hex("0000 5f50 84ffffffff", 0, &c, err), 0);
    CHECK_EQ_INT(c.fields, 1);
    CHECK_EQ_INT(decode_some_hex("0000 51 84ffffffff", 0, &c, err),
                 -HB_H3_QPACK_DECOMPRESSION_FAILED);
    CHECK_EQ_INT(decode_hex("0000 5f50 84ffffffff", 0, &c, err), -HB_H3_QPACK_DECOMPRESSION_FAILED);
    /* a skipped string longer than what is left is still an error */
    CHECK_EQ_INT(decode_some_hex("0000 5f50 8cf1e3", 0, &c, err),
                 -HB_H3_QPACK_DECOMPRESSION_FAILED);
    CHECK(strstr(err, "left in the section") != NULL);
    /* the cap: at every max_list the same verdict and the same fields before it as the
     * full decoder (skipped values counted at their most, then exactly near the cap) */
    size_t total = 42 + (10 + 15 + 32) + (10 + 15 + 32) + (5 + 2 + 32) + (3 + 15 + 32);
    for (size_t max = 1; max <= total + 40; max++) {
        int a = decode_some_hex(SOME_SECTION, max, &c, err);
        int b = decode_hex(SOME_SECTION, max, &full, err);
        CHECK_EQ_INT(a, b);
        CHECK_EQ_INT(c.fields, full.fields);
        CHECK_EQ_INT(a, max >= total ? 0 : HB_QPACK_TOO_LARGE);
    }
    /* near the cap the skipped values are decoded to be counted: a malformed one is
     * then an error, as for the full decoder */
    CHECK_EQ_INT(decode_some_hex("0000 5f50 84ffffffff d1", 50, &c, err),
                 -HB_H3_QPACK_DECOMPRESSION_FAILED);
}

/* ---- hb_qpack_encode_head ---- */

static const char CT_A[] = "application/octet-stream", CT_B[] = "text/plain",
                  CT_C[] = "text/event-stream";

static void head_case(hb_qpack_head_cache *hc, unsigned status, const char *date, const char *ct,
                      unsigned flags, const char *cl)
{
    uint8_t a[512], b[512];
    char st[4];
    snprintf(st, sizeof st, "%03u", status);
    hb_header f[6];
    size_t n = 0;
    f[n++] = (hb_header){":status", 7, st, 3};
    f[n++] = (hb_header){"server", 6, "httpbench", 9};
    if (date) f[n++] = (hb_header){"date", 4, date, HB_QPACK_DATE_LEN};
    f[n++] = (hb_header){"content-type", 12, ct, strlen(ct)};
    if (flags & HB_QPACK_HEAD_NO_CACHE) f[n++] = (hb_header){"cache-control", 13, "no-cache", 8};
    if (cl) f[n++] = (hb_header){"content-length", 14, cl, strlen(cl)};
    ssize_t want = hb_qpack_encode(f, n, a, sizeof a);
    ssize_t got = hb_qpack_encode_head(hc, status, date, ct, strlen(ct), flags, cl,
                                       cl ? strlen(cl) : 0, b, sizeof b);
    CHECK(want > 0);
    CHECK_EQ_INT(got, want);
    CHECK(got == want && memcmp(a, b, (size_t)want) == 0);
    /* and it decodes to exactly those fields */
    collect c;
    char err[HB_ERR_LEN];
    memset(&c, 0, sizeof c);
    CHECK_EQ_INT(hb_qpack_decode(b, (size_t)got, scratch, 0, on_field, &c, err), 0);
    CHECK_EQ_INT(c.fields, (int)n);
    char line[128];
    snprintf(line, sizeof line, "content-type: %s\n", ct);
    CHECK(strstr(c.text, line) != NULL);
    if (cl) {
        snprintf(line, sizeof line, "content-length: %s\n", cl);
        CHECK(strstr(c.text, line) != NULL);
    } else {
        CHECK(strstr(c.text, "content-length") == NULL);
    }
    /* every cap below the size fails cleanly */
    for (size_t cap = 0; cap < (size_t)got; cap++)
        CHECK_EQ_INT(hb_qpack_encode_head(hc, status, date, ct, strlen(ct), flags, cl,
                                          cl ? strlen(cl) : 0, b, cap),
                     HB_E_TOO_LARGE);
}

static void test_encode_head(void)
{
    hb_qpack_head_cache hc;
    hb_qpack_head_cache_init(&hc, "httpbench", 9);
    const char *dates[] = {NULL, "Sun, 06 Dec 2026 02:12:36 GMT", "Mon, 07 Dec 2026 23:59:59 GMT"};
    const char *cts[] = {CT_A, CT_B, CT_C};
    const char *cls[] = {NULL, "0", "150", "9", "1234567890123456789"};
    const unsigned statuses[] = {200, 404, 431, 777, 103, 500, 200};
    /* more shapes than slots, each twice in a row and again later: hits, misses,
     * evictions, and a template reused with another date and length */
    for (int round = 0; round < 2; round++)
        for (size_t s = 0; s < sizeof statuses / sizeof *statuses; s++)
            for (size_t t = 0; t < 3; t++)
                for (unsigned fl = 0; fl < 2; fl++)
                    for (size_t d = 0; d < 3; d++)
                        for (size_t l = 0; l < 5; l++)
                            head_case(&hc, statuses[s], dates[d], cts[t], fl, cls[l]);
    /* a content type too long for a template: encoded whole, the same bytes */
    static char longct[200];
    memset(longct, 'x', sizeof longct - 1);
    head_case(&hc, 200, dates[1], longct, 0, "150");
    /* the status range */
    uint8_t b[256];
    CHECK_EQ_INT(hb_qpack_encode_head(&hc, 99, NULL, CT_A, strlen(CT_A), 0, NULL, 0, b, sizeof b),
                 HB_E_TOO_LARGE);
    CHECK_EQ_INT(hb_qpack_encode_head(&hc, 1000, NULL, CT_A, strlen(CT_A), 0, NULL, 0, b, sizeof b),
                 HB_E_TOO_LARGE);
}

/* HPACK decodes Huffman through the shared unit: RFC 7541 C.4.1. */
static void test_hpack_shares_huffman(void)
{
    hb_h2_hpack_dec d;
    char err[HB_ERR_LEN];
    CHECK_EQ_INT(hb_h2_hpack_dec_init(&d, 4096), 0);
    size_t n = unhex("8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff", in);
    collect c;
    memset(&c, 0, sizeof c);
    CHECK_EQ_INT(hb_h2_hpack_decode(&d, in, n, scratch, 0, on_field, &c, err), 0);
    CHECK(strcmp(c.text, ":method: GET\n:scheme: http\n:path: /\n:authority: www.example.com\n") ==
          0);
    n = unhex("0084 ffff ffff", in); /* an HPACK error still names HPACK */
    CHECK_EQ_INT(hb_h2_hpack_decode(&d, in, n, scratch, 0, on_field, &c, err), HB_E_H2);
    CHECK(strncmp(err, "hpack: Huffman", 14) == 0);
    hb_h2_hpack_dec_free(&d);
}

int main(void)
{
    test_decode();
    test_static_table();
    test_encode();
    test_max_list();
    test_decode_some();
    test_encode_head();
    test_peer_streams();
    test_hpack_shares_huffman();
    HB_TEST_MAIN_END();
}
