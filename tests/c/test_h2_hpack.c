/* test_h2_hpack.c - unit tests of the HPACK decoder (hb_h2_hpack): the RFC 7541
 * Appendix C examples byte for byte, every decoder error, the header-list cap and
 * Huffman over every symbol (the encoder: test_h2_hpack_encode.c). */
#include <stdlib.h>
#include <string.h>

#include "hb_test_hpack.h"

static void test_rfc_c2(void)
{
    hb_h2_hpack_dec d;
    char err[HB_ERR_LEN];
    collect *c = malloc(sizeof *c);

    CHECK_EQ_INT(hb_h2_hpack_dec_init(&d, 4096), 0);
    CHECK_EQ_INT(
        decode_hex(&d, "400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572", c, err),
        0);
    CHECK_TEXT(c, "custom-key: custom-header\n");
    check_table(&d, 55, "[1] custom-key: custom-header\n");
    hb_h2_hpack_dec_free(&d);

    CHECK_EQ_INT(hb_h2_hpack_dec_init(&d, 4096), 0);
    CHECK_EQ_INT(decode_hex(&d, "040c 2f73 616d 706c 652f 7061 7468", c, err), 0);
    CHECK_TEXT(c, ":path: /sample/path\n");
    check_table(&d, 0, "");
    CHECK_EQ_INT(decode_hex(&d, "1008 7061 7373 776f 7264 0673 6563 7265 74", c, err), 0);
    CHECK_TEXT(c, "password: secret\n");
    check_table(&d, 0, "");
    CHECK_EQ_INT(decode_hex(&d, "82", c, err), 0);
    CHECK_TEXT(c, ":method: GET\n");
    check_table(&d, 0, "");
    hb_h2_hpack_dec_free(&d);
    hb_h2_hpack_dec_free(&d); /* twice is fine */
    free(c);
}

/* C.3 (raw) and C.4 (Huffman) carry the same requests. */
static void requests(const char *const blocks[3])
{
    hb_h2_hpack_dec d;
    char err[HB_ERR_LEN];
    collect *c = malloc(sizeof *c);
    CHECK_EQ_INT(hb_h2_hpack_dec_init(&d, 4096), 0);

    CHECK_EQ_INT(decode_hex(&d, blocks[0], c, err), 0);
    CHECK_TEXT(c, ":method: GET\n:scheme: http\n:path: /\n:authority: www.example.com\n");
    check_table(&d, 57, "[1] :authority: www.example.com\n");

    CHECK_EQ_INT(decode_hex(&d, blocks[1], c, err), 0);
    CHECK_TEXT(c, ":method: GET\n:scheme: http\n:path: /\n:authority: www.example.com\n"
                  "cache-control: no-cache\n");
    check_table(&d, 110, "[1] cache-control: no-cache\n[2] :authority: www.example.com\n");

    CHECK_EQ_INT(decode_hex(&d, blocks[2], c, err), 0);
    CHECK_TEXT(c, ":method: GET\n:scheme: https\n:path: /index.html\n"
                  ":authority: www.example.com\ncustom-key: custom-value\n");
    check_table(&d, 164,
                "[1] custom-key: custom-value\n[2] cache-control: no-cache\n"
                "[3] :authority: www.example.com\n");
    hb_h2_hpack_dec_free(&d);
    free(c);
}

static void test_rfc_c3_c4(void)
{
    static const char *const c3[3] = {
        "8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d",
        "8286 84be 5808 6e6f 2d63 6163 6865",
        "8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65",
    };
    static const char *const c4[3] = {
        "8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff",
        "8286 84be 5886 a8eb 1064 9cbf",
        "8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf",
    };
    requests(c3);
    requests(c4);
}

/* C.5 (raw) and C.6 (Huffman): responses with a 256-byte table, evicting. */
static void responses(const char *const blocks[3])
{
    hb_h2_hpack_dec d;
    char err[HB_ERR_LEN];
    collect *c = malloc(sizeof *c);
    CHECK_EQ_INT(hb_h2_hpack_dec_init(&d, 256), 0);

    CHECK_EQ_INT(decode_hex(&d, blocks[0], c, err), 0);
    CHECK_TEXT(c, ":status: 302\ncache-control: private\ndate: Mon, 21 Oct 2013 20:13:21 GMT\n"
                  "location: https://www.example.com\n");
    check_table(&d, 222,
                "[1] location: https://www.example.com\n"
                "[2] date: Mon, 21 Oct 2013 20:13:21 GMT\n"
                "[3] cache-control: private\n"
                "[4] :status: 302\n");

    CHECK_EQ_INT(decode_hex(&d, blocks[1], c, err), 0);
    CHECK_TEXT(c, ":status: 307\ncache-control: private\ndate: Mon, 21 Oct 2013 20:13:21 GMT\n"
                  "location: https://www.example.com\n");
    check_table(&d, 222,
                "[1] :status: 307\n"
                "[2] location: https://www.example.com\n"
                "[3] date: Mon, 21 Oct 2013 20:13:21 GMT\n"
                "[4] cache-control: private\n");

    CHECK_EQ_INT(decode_hex(&d, blocks[2], c, err), 0);
    CHECK_TEXT(c, ":status: 200\ncache-control: private\ndate: Mon, 21 Oct 2013 20:13:22 GMT\n"
                  "location: https://www.example.com\ncontent-encoding: gzip\n"
                  "set-cookie: foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1\n");
    check_table(&d, 215,
                "[1] set-cookie: foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1\n"
                "[2] content-encoding: gzip\n"
                "[3] date: Mon, 21 Oct 2013 20:13:22 GMT\n");
    hb_h2_hpack_dec_free(&d);
    free(c);
}

static void test_rfc_c5_c6(void)
{
    static const char *const c5[3] = {
        "4803 3330 3258 0770 7269 7661 7465 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 "
        "2032 303a 3133 3a32 3120 474d 546e 1768 7474 7073 3a2f 2f77 7777 2e65 7861 6d70 "
        "6c65 2e63 6f6d",
        "4803 3330 37c1 c0bf",
        "88c1 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3220 474d "
        "54c0 5a04 677a 6970 7738 666f 6f3d 4153 444a 4b48 514b 425a 584f 5157 454f 5049 "
        "5541 5851 5745 4f49 553b 206d 6178 2d61 6765 3d33 3630 303b 2076 6572 7369 6f6e "
        "3d31",
    };
    static const char *const c6[3] = {
        "4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6 "
        "2d1b ff6e 919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3",
        "4883 640e ffc1 c0bf",
        "88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b d9ab "
        "77ad 94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f "
        "9587 3160 65c0 03ed 4ee5 b106 3d50 07",
    };
    responses(c5);
    responses(c6);
}

/* Each malformed block fails with HB_E_H2 and the expected message, and the
 * decoder refuses any further block. */
static void expect_error(uint32_t max, const char *prefix_hex, const char *hex, const char *msg)
{
    hb_h2_hpack_dec d;
    char err[HB_ERR_LEN];
    collect *c = malloc(sizeof *c);
    CHECK_EQ_INT(hb_h2_hpack_dec_init(&d, max), 0);
    if (prefix_hex) CHECK_EQ_INT(decode_hex(&d, prefix_hex, c, err), 0);
    CHECK_EQ_INT(decode_hex(&d, hex, c, err), HB_E_H2);
    CHECK(strstr(err, msg) != NULL);
    if (!strstr(err, msg)) fprintf(stderr, "block %s: got \"%s\", want \"%s\"\n", hex, err, msg);
    CHECK_EQ_INT(decode_hex(&d, "82", c, err), HB_E_H2);
    CHECK(strstr(err, "unusable") != NULL);
    hb_h2_hpack_dec_free(&d);
    free(c);
}

static void test_errors(void)
{
    /* indexes */
    expect_error(4096, NULL, "80", "hpack: index 0 in an indexed field");
    expect_error(4096, NULL, "c6", "hpack: index 70 beyond the table (61 static + 0 dynamic)");
    expect_error(4096, "400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572", "c0",
                 "hpack: index 64 beyond the table (61 static + 1 dynamic)");
    expect_error(4096, NULL, "0f30 0161", "index 63 beyond the table");   /* literal name */
    expect_error(4096, NULL, "7f01 0161", "index 64 beyond the table");   /* indexing, name */
    expect_error(4096, NULL, "ff80 8080 8001", "index 268435583 beyond"); /* big but fits */
    /* integers */
    expect_error(4096, NULL, "ff", "block ends inside an integer");
    expect_error(4096, NULL, "ff80 80", "block ends inside an integer");
    expect_error(4096, NULL, "ffff ffff ff0f", "integer does not fit 32 bits");
    expect_error(4096, NULL, "ff80 8080 8080 00", "integer does not fit 32 bits");
    expect_error(4096, NULL, "0f80 8080 8010", "integer does not fit 32 bits");
    /* strings */
    expect_error(4096, NULL, "04", "block ends before a string");
    expect_error(4096, NULL, "0405 6162", "string of 5 bytes but 2 left in the block");
    expect_error(4096, NULL, "007f ffff ffff 0f", "integer does not fit 32 bits");
    expect_error(4096, NULL, "0003 6162 63", "block ends before a string");
    /* table size updates */
    expect_error(4096, NULL, "3fe2 1f", "table size update to 4097 above the advertised 4096");
    expect_error(256, NULL, "3fe2 01", "table size update to 257 above the advertised 256");
    expect_error(4096, NULL, "8220", "table size update after a header field");
    expect_error(0, NULL, "21", "table size update to 1 above the advertised 0");
    /* Huffman: EOS, padding over 7 bits, padding not ones, a code cut short */
    expect_error(4096, NULL, "0484 ffff ffff", "Huffman EOS symbol inside a string");
    expect_error(4096, NULL, "0485 1fff ffff ffff", "Huffman EOS symbol inside a string");
    expect_error(4096, NULL, "0482 1fff", "Huffman padding of 11 bits (more than 7)");
    expect_error(4096, NULL, "0481 ff", "Huffman padding of 8 bits (more than 7)");
    expect_error(4096, NULL, "0481 18", "Huffman padding is not all ones (3 bits)");
    expect_error(4096, NULL, "0481 1e", "Huffman padding is not all ones (3 bits)");
    expect_error(4096, NULL, "0482 fffe", "Huffman string ends inside a code (16 bits left)");
    expect_error(4096, NULL, "0081 1803 6162 63", "Huffman padding is not all ones");
    /* every 9-byte window beginning with 0xff bytes and a zero hits EOS or a long code */
    expect_error(4096, NULL, "0489 ffff fffc 0000 0000 00", "Huffman EOS symbol inside a string");
}

static void test_size_updates(void)
{
    hb_h2_hpack_dec d;
    char err[HB_ERR_LEN];
    collect *c = malloc(sizeof *c);
    CHECK_EQ_INT(hb_h2_hpack_dec_init(&d, 4096), 0);
    CHECK_EQ_INT(decode_hex(&d, "418c f1e3 c2e5 f23a 6ba0 ab90 f4ff", c, err), 0);
    CHECK_TEXT(c, ":authority: www.example.com\n");
    check_table(&d, 57, "[1] :authority: www.example.com\n");
    /* two updates at the start: to 0 (empties the table) and back up */
    CHECK_EQ_INT(decode_hex(&d, "203f e11f 82", c, err), 0);
    CHECK_TEXT(c, ":method: GET\n");
    check_table(&d, 0, "");
    CHECK_EQ_INT(d.limit, 4096);
    /* an entry bigger than the table empties it and is not added */
    CHECK_EQ_INT(decode_hex(&d,
                            "3f11 400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 "
                            "6164 6572",
                            c, err),
                 0); /* limit 48 < 55 */
    CHECK_TEXT(c, "custom-key: custom-header\n");
    check_table(&d, 0, "");
    CHECK_EQ_INT(decode_hex(&d, "3f18 4001 6101 62", c, err), 0); /* limit 55: a: b fits */
    check_table(&d, 34, "[1] a: b\n");
    CHECK_EQ_INT(decode_hex(&d, "3f18 4001 6301 64", c, err), 0); /* c: d evicts a: b */
    check_table(&d, 34, "[1] c: d\n");
    /* a size update alone is a valid block */
    CHECK_EQ_INT(decode_hex(&d, "20", c, err), 0);
    CHECK_EQ_INT(c->n, 0);
    check_table(&d, 0, "");
    /* an empty block too */
    CHECK_EQ_INT(decode(&d, (const uint8_t *)"", 0, 0, c, err), 0);
    hb_h2_hpack_dec_free(&d);

    /* a table of 0 never holds anything; init bounds */
    CHECK_EQ_INT(hb_h2_hpack_dec_init(&d, 0), 0);
    CHECK_EQ_INT(decode_hex(&d, "4001 6101 62", c, err), 0);
    CHECK_TEXT(c, "a: b\n");
    check_table(&d, 0, "");
    hb_h2_hpack_dec_free(&d);
    CHECK_EQ_INT(hb_h2_hpack_dec_init(&d, 65537), HB_E_INVALID);
    hb_h2_hpack_dec_free(&d);
    CHECK_EQ_INT(hb_h2_hpack_dec_init(&d, 65536), 0);
    hb_h2_hpack_dec_free(&d);
    free(c);
}

/* A new entry may name an entry that its own insertion evicts; and entries
 * keep their bytes through the buffer's compaction. */
static void test_evicted_name_and_compaction(void)
{
    hb_h2_hpack_dec d;
    char err[HB_ERR_LEN];
    collect *c = malloc(sizeof *c);
    uint8_t blk[300];
    CHECK_EQ_INT(hb_h2_hpack_dec_init(&d, 100), 0);
    /* "nnnnnnnnnnnnnnnnnnnn: v" (20 + 1 + 32 = 53) */
    size_t n = 0;
    blk[n++] = 0x40;
    blk[n++] = 20;
    memset(blk + n, 'n', 20);
    n += 20;
    blk[n++] = 1;
    blk[n++] = 'v';
    CHECK_EQ_INT(decode(&d, blk, n, 0, c, err), 0);
    /* name by index 62 with a 40-byte value: 93 > 100 - 53, so 62 is evicted first */
    for (int round = 0; round < 20; round++) {
        n = 0;
        blk[n++] = 0x7e; /* 0x40 | 62 */
        blk[n++] = 40;
        for (int i = 0; i < 40; i++)
            blk[n++] = (uint8_t)('a' + (round + i) % 26);
        CHECK_EQ_INT(decode(&d, blk, n, 0, c, err), 0);
        CHECK_EQ_INT(d.ent_n, 1);
        CHECK_EQ_INT(d.size, 92);
        CHECK(c->len == 63 && memcmp(c->text, "nnnnnnnnnnnnnnnnnnnn: ", 22) == 0 &&
              memcmp(c->text + 22, blk + 2, 40) == 0);
        CHECK_EQ_INT(decode_hex(&d, "be", c, err), 0);
        CHECK(c->len == 63 && memcmp(c->text, "nnnnnnnnnnnnnnnnnnnn: ", 22) == 0 &&
              memcmp(c->text + 22, blk + 2, 40) == 0);
    }
    hb_h2_hpack_dec_free(&d);

    /* many small entries cycling through a 4096 table; check the newest few */
    CHECK_EQ_INT(hb_h2_hpack_dec_init(&d, 4096), 0);
    for (int i = 0; i < 2000; i++) {
        char name[16], value[64];
        int nl = snprintf(name, sizeof name, "x-%d", i);
        int vl = snprintf(value, sizeof value, "%0*d", 1 + i % 50, i);
        n = 0;
        blk[n++] = 0x40;
        blk[n++] = (uint8_t)nl;
        memcpy(blk + n, name, (size_t)nl);
        n += (size_t)nl;
        blk[n++] = (uint8_t)vl;
        memcpy(blk + n, value, (size_t)vl);
        n += (size_t)vl;
        if (i) blk[n++] = 0xbf; /* index 63: the previous entry, after this insertion */
        CHECK_EQ_INT(decode(&d, blk, n, 0, c, err), 0);
        if (i == 0) continue;
        char want[160];
        int wl = snprintf(want, sizeof want, "%s: %s\nx-%d: %0*d\n", name, value, i - 1,
                          1 + (i - 1) % 50, i - 1);
        CHECK(c->len == (size_t)wl && memcmp(c->text, want, (size_t)wl) == 0);
        CHECK(d.size <= 4096);
    }
    hb_h2_hpack_dec_free(&d);
    free(c);
}

static void test_max_list(void)
{
    hb_h2_hpack_dec d;
    char err[HB_ERR_LEN];
    collect *c = malloc(sizeof *c);
    uint8_t blk[64];
    CHECK_EQ_INT(hb_h2_hpack_dec_init(&d, 4096), 0);
    size_t n = unhex("8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d", blk);
    /* :method GET = 42, :scheme http = 43: a cap of 84 stops after the first */
    CHECK_EQ_INT(decode(&d, blk, n, 84, c, err), HB_H2_HPACK_TOO_LARGE);
    CHECK_EQ_INT(c->n, 1);
    CHECK_TEXT(c, ":method: GET\n");
    check_table(&d, 57, "[1] :authority: www.example.com\n");
    /* the table stayed in step: the next block decodes right */
    CHECK_EQ_INT(decode_hex(&d, "8286 84be 5808 6e6f 2d63 6163 6865", c, err), 0);
    CHECK_TEXT(c, ":method: GET\n:scheme: http\n:path: /\n:authority: www.example.com\n"
                  "cache-control: no-cache\n");
    /* exactly at the cap is fine: 42 + 43 + 38 + 57 + 53 */
    n = unhex("8286 84bf be", blk);
    CHECK_EQ_INT(decode(&d, blk, n, 42 + 43 + 38 + 57 + 53, c, err), 0);
    CHECK_EQ_INT(c->n, 5);
    CHECK_EQ_INT(decode(&d, blk, n, 42 + 43 + 38 + 57 + 52, c, err), HB_H2_HPACK_TOO_LARGE);
    CHECK_EQ_INT(c->n, 4);
    /* a cap below the first field: nothing emitted */
    CHECK_EQ_INT(decode(&d, blk, n, 10, c, err), HB_H2_HPACK_TOO_LARGE);
    CHECK_EQ_INT(c->n, 0);
    hb_h2_hpack_dec_free(&d);
    free(c);
}

/* Bits writer for hand-made Huffman strings. */
typedef struct {
    uint8_t *out;
    size_t bits;
} bitw;

static void put_bits(bitw *w, uint32_t code, unsigned len)
{
    for (unsigned i = len; i-- > 0;) {
        if (code >> i & 1)
            w->out[w->bits >> 3] |= (uint8_t)(0x80 >> (w->bits & 7));
        else
            w->out[w->bits >> 3] &= (uint8_t) ~(0x80 >> (w->bits & 7));
        w->bits++;
    }
}

static size_t pad_bits(bitw *w)
{
    while (w->bits & 7)
        put_bits(w, 1, 1);
    return w->bits >> 3;
}

/* The scratch bound holds for the densest strings: two of 5-bit codes only. */
static void test_scratch_bound(void)
{
    static const char five[] = "012aceiost"; /* the ten 5-bit codes, 00000..01001 */
    hb_h2_hpack_dec d;
    char err[HB_ERR_LEN];
    collect *c = malloc(sizeof *c);
    uint8_t *blk = malloc(4096);
    CHECK_EQ_INT(hb_h2_hpack_dec_init(&d, 4096), 0);
    for (size_t L = 0; L < 600; L += (L < 40 ? 1 : 37)) {
        size_t n = 0;
        char want[2000];
        size_t wl = 0;
        blk[n++] = 0x10; /* never indexed, new name */
        for (int s = 0; s < 2; s++) {
            size_t syms = L * 8 / 5;
            /* length prefix */
            if (L < 127) {
                blk[n++] = (uint8_t)(0x80 | L);
            } else {
                blk[n++] = 0xff;
                size_t v = L - 127;
                while (v >= 128) {
                    blk[n++] = (uint8_t)(v | 0x80);
                    v >>= 7;
                }
                blk[n++] = (uint8_t)v;
            }
            bitw w = {blk + n, 0};
            for (size_t i = 0; i < syms; i++) {
                unsigned k = (unsigned)((i * 7 + s) % 10);
                put_bits(&w, k, 5);
                want[wl++] = five[k];
            }
            CHECK_EQ_INT(pad_bits(&w), L);
            n += L;
            if (s == 0) {
                want[wl++] = ':';
                want[wl++] = ' ';
            }
        }
        want[wl++] = '\n';
        CHECK_EQ_INT(decode(&d, blk, n, 0, c, err), 0);
        CHECK(c->len == wl && memcmp(c->text, want, wl) == 0);
    }
    hb_h2_hpack_dec_free(&d);
    free(blk);
    free(c);
}

/* RFC 7541 Appendix B: code (right-aligned) and length per symbol, for
 * building Huffman strings here independently of the decoder. */
#include "../../csrc/fuzz/hpack_ref.h"

/* Huffman-encode s into w (padding with ones); returns the bytes written. */
static size_t huff_encode(const uint8_t *s, size_t n, uint8_t *out)
{
    bitw w = {out, 0};
    for (size_t i = 0; i < n; i++)
        put_bits(&w, REF_CODE[s[i]], REF_LEN[s[i]]);
    return pad_bits(&w);
}

/* Every byte value, in every position of a string (the decoder's 4-step,
 * 2-step and checked paths, at the start, middle and end), round-trips. */
static void test_huffman_all_symbols(void)
{
    hb_h2_hpack_dec d;
    char err[HB_ERR_LEN];
    collect *c = malloc(sizeof *c);
    uint8_t *str = malloc(512), *blk = malloc(4096);
    CHECK_EQ_INT(hb_h2_hpack_dec_init(&d, 4096), 0);
    for (int iter = 0; iter < 3000; iter++) {
        size_t n = iter < 256 ? 1 + (size_t)iter % 40 : rnd() % 300;
        for (size_t i = 0; i < n; i++) {
            unsigned k = (unsigned)rnd() % 4;
            /* mostly text, some bytes with 13..30-bit codes */
            str[i] = (uint8_t)(k == 0 ? rnd() : k == 1 ? 'a' + rnd() % 26 : '0' + rnd() % 10);
        }
        if (iter < 256) str[rnd() % n] = (uint8_t)iter;
        size_t bn = 0;
        blk[bn++] = 0x04; /* :path, Huffman value */
        uint8_t enc[2048];
        size_t en = huff_encode(str, n, enc);
        if (en < 127) {
            blk[bn++] = (uint8_t)(0x80 | en);
        } else {
            blk[bn++] = 0xff;
            size_t v = en - 127;
            for (; v >= 128; v >>= 7)
                blk[bn++] = (uint8_t)(v | 0x80);
            blk[bn++] = (uint8_t)v;
        }
        memcpy(blk + bn, enc, en);
        bn += en;
        /* with and without 8 readable bytes after the string */
        size_t tail = iter % 2 ? 0 : 9;
        if (tail) {
            memcpy(blk + bn, "\x82\x82\x82\x82\x82\x82\x82\x82\x82", 9);
            bn += 9;
        }
        int rc = decode(&d, blk, bn, 0, c, err);
        CHECK_EQ_INT(rc, 0);
        CHECK_EQ_INT(c->n, 1 + (int)tail);
        CHECK(c->len >= 7 + n + 1 && memcmp(c->text, ":path: ", 7) == 0 &&
              memcmp(c->text + 7, str, n) == 0 && c->text[7 + n] == '\n');
        if (rc) {
            fprintf(stderr, "iter %d: %s\n", iter, err);
            break;
        }
    }
    hb_h2_hpack_dec_free(&d);
    free(blk);
    free(str);
    free(c);
}

int main(void)
{
    test_rfc_c2();
    test_rfc_c3_c4();
    test_rfc_c5_c6();
    test_errors();
    test_size_updates();
    test_evicted_name_and_compaction();
    test_max_list();
    test_scratch_bound();
    test_huffman_all_symbols();
    HB_TEST_MAIN_END();
}
