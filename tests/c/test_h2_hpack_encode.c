/* test_h2_hpack_encode.c - unit tests of the HPACK encoder (hb_h2_hpack): zero-copy
 * literals, exact encodings, static-table names, round trips, and a differential test
 * against nghttp2's deflater and inflater on random field lists. */
#include <nghttp2/nghttp2.h>

#include "hb_test_hpack.h"

/* Literal strings reach fn straight from the input. */
static const uint8_t *seen_name;
static void on_ptr(void *ud, const char *name, size_t nlen, const char *value, size_t vlen)
{
    (void)ud;
    (void)nlen;
    (void)value;
    (void)vlen;
    seen_name = (const uint8_t *)name;
}

static void test_zero_copy(void)
{
    hb_h2_hpack_dec d;
    char err[HB_ERR_LEN];
    uint8_t blk[] = {0x00, 0x03, 'a', 'b', 'c', 0x01, 'x'};
    uint8_t scratch[64];
    CHECK_EQ_INT(hb_h2_hpack_dec_init(&d, 4096), 0);
    CHECK_EQ_INT(hb_h2_hpack_decode(&d, blk, sizeof blk, scratch, 0, on_ptr, NULL, err), 0);
    CHECK(seen_name == blk + 2);
    hb_h2_hpack_dec_free(&d);
    hb_h2_hpack_dec zero;
    memset(&zero, 0, sizeof zero);
    CHECK_EQ_INT(hb_h2_hpack_decode(&zero, blk, sizeof blk, scratch, 0, on_ptr, NULL, err),
                 HB_E_H2);
    hb_h2_hpack_dec_free(&zero);
}

/* ---- encoder ---- */

#define H(n, v)                                                                                    \
    {                                                                                              \
        n, sizeof(n) - 1, v, sizeof(v) - 1                                                         \
    }

static void test_encode_exact(void)
{
    hb_header f[] = {
        H(":method", "GET"),       H(":scheme", "https"),   H(":path", "/"),
        H(":authority", "x"),      H("user-agent", "hb/1"), H("x-custom", "v"),
        H(":status", "200"),       H(":path", "/a"),        H("accept-encoding", "gzip, deflate"),
        H("www-authenticate", ""),
    };
    uint8_t out[256];
    ssize_t n = hb_h2_hpack_encode(f, 10, out, sizeof out);
    uint8_t want[256];
    size_t wn = unhex("82 87 84 0101 78 0f2b 0468 622f 31 0008 782d 6375 7374 6f6d 0176 88 0402 "
                      "2f61 90 0f2e 00",
                      want);
    CHECK_EQ_INT(n, (ssize_t)wn);
    CHECK(n > 0 && memcmp(out, want, wn) == 0);
    CHECK((size_t)n <= hb_h2_hpack_encode_bound(f, 10));
    /* every cap below the size fails cleanly, the size itself works */
    for (size_t cap = 0; cap < wn; cap++)
        CHECK_EQ_INT(hb_h2_hpack_encode(f, 10, out, cap), HB_E_TOO_LARGE);
    CHECK_EQ_INT(hb_h2_hpack_encode(f, 10, out, wn), (ssize_t)wn);
    CHECK_EQ_INT(hb_h2_hpack_encode(f, 0, out, 0), 0);
    CHECK_EQ_INT(hb_h2_hpack_encode_bound(f, 0), 0);
}

/* Every static name is found at its first index; near misses are not. */
static void test_encode_static_names(void)
{
    hb_h2_hpack_dec d;
    char err[HB_ERR_LEN];
    collect *c = malloc(sizeof *c);
    char names[62][32];
    CHECK_EQ_INT(hb_h2_hpack_dec_init(&d, 4096), 0);
    for (unsigned idx = 1; idx <= 61; idx++) {
        uint8_t blk[1] = {(uint8_t)(0x80 | idx)};
        CHECK_EQ_INT(decode(&d, blk, 1, 0, c, err), 0);
        c->text[c->len] = 0;
        char *sep = strstr(c->text + 1, ": ");
        size_t nl = (size_t)(sep - c->text);
        memcpy(names[idx], c->text, nl);
        names[idx][nl] = 0;
    }
    for (unsigned idx = 1; idx <= 61; idx++) {
        char name[32];
        size_t nl = strlen(names[idx]);
        unsigned first = idx;
        while (first > 1 && strcmp(names[first - 1], names[idx]) == 0)
            first--;
        memcpy(name, names[idx], nl);
        hb_header f = {name, nl, "zz", 2};
        uint8_t out[64];
        ssize_t n = hb_h2_hpack_encode(&f, 1, out, sizeof out);
        if (first < 15) {
            CHECK_EQ_INT(n, 4);
            CHECK_EQ_INT(out[0], first);
        } else {
            CHECK_EQ_INT(n, 5);
            CHECK_EQ_INT(out[0], 0x0f);
            CHECK_EQ_INT(out[1], first - 15);
        }
        /* a one-byte-off name goes out as a new name */
        name[nl - 1] ^= 0x20;
        n = hb_h2_hpack_encode(&f, 1, out, sizeof out);
        CHECK_EQ_INT(n, (ssize_t)(1 + 1 + nl + 1 + 2));
        CHECK_EQ_INT(out[0], 0);
    }
    hb_h2_hpack_dec_free(&d);
    free(c);
}

/* Random fields: encode, decode with our decoder and nghttp2's inflater. */
static void test_encode_roundtrip(void)
{
    static const char *const names[] = {":method", ":path",  ":scheme",         ":authority",
                                        ":status", "accept", "accept-encoding", "user-agent",
                                        "x-a",     "cookie", "content-length",  "via"};
    static const char *const values[] = {"GET", "POST", "/",   "/index.html",   "http", "https",
                                         "200", "204",  "500", "gzip, deflate", "",     "x"};
    hb_h2_hpack_dec d;
    char err[HB_ERR_LEN];
    collect *c = malloc(sizeof *c);
    collect *want = malloc(sizeof *want);
    char *store = malloc(1 << 16);
    uint8_t *out = malloc(1 << 17);
    nghttp2_hd_inflater *inf;
    CHECK_EQ_INT(nghttp2_hd_inflate_new(&inf), 0);
    CHECK_EQ_INT(hb_h2_hpack_dec_init(&d, 4096), 0);
    for (int iter = 0; iter < 500; iter++) {
        hb_header f[40];
        size_t nf = rnd() % 40, sp = 0;
        want->len = 0;
        want->n = 0;
        for (size_t i = 0; i < nf; i++) {
            char *nm = store + sp;
            size_t nl, vl;
            if (rnd() % 3) {
                const char *src = names[rnd() % 12];
                nl = strlen(src);
                memcpy(nm, src, nl);
            } else {
                nl = 1 + rnd() % (rnd() % 8 ? 20 : 300);
                for (size_t k = 0; k < nl; k++)
                    nm[k] = (char)('a' + rnd() % 26);
            }
            sp += nl;
            char *vv = store + sp;
            if (rnd() % 2) {
                const char *src = values[rnd() % 12];
                vl = strlen(src);
                memcpy(vv, src, vl);
            } else {
                vl = rnd() % (rnd() % 8 ? 30 : 1000);
                for (size_t k = 0; k < vl; k++)
                    vv[k] = (char)rnd();
            }
            sp += vl;
            f[i] = (hb_header){nm, nl, vv, vl};
            on_field(want, nm, nl, vv, vl);
        }
        size_t bound = hb_h2_hpack_encode_bound(f, nf);
        ssize_t n = hb_h2_hpack_encode(f, nf, out, bound);
        CHECK(n >= 0 && (size_t)n <= bound);
        if (n < 0) continue;
        CHECK_EQ_INT(decode(&d, out, (size_t)n, 0, c, err), 0);
        CHECK_EQ_INT(c->n, (int)nf);
        CHECK(c->len == want->len && memcmp(c->text, want->text, want->len) == 0);
        CHECK_EQ_INT(d.ent_n, 0); /* nothing is ever indexed */
        /* nghttp2 reads it the same */
        uint8_t *in = out;
        size_t left = (size_t)n;
        c->len = 0;
        c->n = 0;
        for (;;) {
            nghttp2_nv nv;
            int flags = 0;
            ssize_t r = nghttp2_hd_inflate_hd2(inf, &nv, &flags, in, left, 1);
            CHECK(r >= 0);
            if (r < 0) break;
            in += r;
            left -= (size_t)r;
            if (flags & NGHTTP2_HD_INFLATE_EMIT)
                on_field(c, (const char *)nv.name, nv.namelen, (const char *)nv.value, nv.valuelen);
            if (flags & NGHTTP2_HD_INFLATE_FINAL) {
                nghttp2_hd_inflate_end_headers(inf);
                break;
            }
        }
        CHECK(c->len == want->len && memcmp(c->text, want->text, want->len) == 0);
    }
    nghttp2_hd_inflate_del(inf);
    hb_h2_hpack_dec_free(&d);
    free(out);
    free(store);
    free(want);
    free(c);
}

/* Differential: nghttp2's deflater (indexing, Huffman, eviction, size
 * updates) on random response-like field lists; our decoder must return
 * exactly the fields it was given. */
static void test_nghttp2_deflater(void)
{
    static const char *const names[] = {
        ":status",
        "server",
        "date",
        "content-type",
        "content-length",
        "last-modified",
        "etag",
        "accept-ranges",
        "cache-control",
        "set-cookie",
        "x-request-id",
        "vary",
        "content-encoding",
        "location",
        "x-long-header-name",
    };
    static const char *const values[] = {"200",
                                         "404",
                                         "nginx/1.22.1",
                                         "Thu, 03 Dec 2026 22:45:26 GMT",
                                         "text/html",
                                         "615",
                                         "\"6434bbbe-267\"",
                                         "bytes",
                                         "no-cache",
                                         "gzip",
                                         "https://example.com/a?b=c"};
    for (int table = 0; table < 3; table++) {
        static const size_t sizes[3] = {4096, 256, 0};
        hb_h2_hpack_dec d;
        char err[HB_ERR_LEN];
        nghttp2_hd_deflater *def;
        collect *c = malloc(sizeof *c);
        collect *want = malloc(sizeof *want);
        char *store = malloc(1 << 16);
        uint8_t *out = malloc(1 << 17);
        CHECK_EQ_INT(nghttp2_hd_deflate_new(&def, 4096), 0);
        CHECK_EQ_INT(hb_h2_hpack_dec_init(&d, 4096), 0);
        if (sizes[table] != 4096)
            CHECK_EQ_INT(nghttp2_hd_deflate_change_table_size(def, sizes[table]), 0);
        for (int iter = 0; iter < 400; iter++) {
            nghttp2_nv nv[30];
            size_t nf = 1 + rnd() % 30, sp = 0;
            want->len = 0;
            want->n = 0;
            if (iter == 200 && table == 0) /* shrink mid-way: an update at the next block */
                CHECK_EQ_INT(nghttp2_hd_deflate_change_table_size(def, 1000), 0);
            for (size_t i = 0; i < nf; i++) {
                char *nm = store + sp;
                size_t nl, vl;
                if (rnd() % 4) {
                    const char *src = names[rnd() % 15];
                    nl = strlen(src);
                    memcpy(nm, src, nl);
                } else {
                    nl = 1 + rnd() % 24;
                    for (size_t k = 0; k < nl; k++)
                        nm[k] = (char)('a' + rnd() % 26);
                }
                sp += nl;
                char *vv = store + sp;
                unsigned kind = (unsigned)(rnd() % 4);
                if (kind < 2) {
                    const char *src = values[rnd() % 11];
                    vl = strlen(src);
                    memcpy(vv, src, vl);
                } else if (kind == 2) { /* printable: Huffman wins */
                    vl = rnd() % (rnd() % 8 ? 40 : 400);
                    for (size_t k = 0; k < vl; k++)
                        vv[k] = (char)(' ' + rnd() % 95);
                } else { /* any byte: long codes */
                    vl = rnd() % 60;
                    for (size_t k = 0; k < vl; k++)
                        vv[k] = (char)rnd();
                }
                sp += vl;
                uint8_t flags = NGHTTP2_NV_FLAG_NONE;
                if (rnd() % 10 == 0) flags = NGHTTP2_NV_FLAG_NO_INDEX;
                nv[i] = (nghttp2_nv){(uint8_t *)nm, (uint8_t *)vv, nl, vl, flags};
                on_field(want, nm, nl, vv, vl);
            }
            ssize_t n = nghttp2_hd_deflate_hd(def, out, 1 << 17, nv, nf);
            CHECK(n > 0);
            if (n <= 0) break;
            int rc = decode(&d, out, (size_t)n, 0, c, err);
            CHECK_EQ_INT(rc, 0);
            if (rc) fprintf(stderr, "table %zu iter %d: %s\n", sizes[table], iter, err);
            CHECK_EQ_INT(c->n, (int)nf);
            CHECK(c->len == want->len && memcmp(c->text, want->text, want->len) == 0);
            CHECK_EQ_INT(d.size, nghttp2_hd_deflate_get_dynamic_table_size(def));
            CHECK_EQ_INT(d.ent_n, nghttp2_hd_deflate_get_num_table_entries(def) - 61);
            /* the same entries, read back through indexed fields */
            for (uint32_t i = 0; iter % 16 == 0 && i < d.ent_n; i++) {
                const nghttp2_nv *e = nghttp2_hd_deflate_get_table_entry(def, 62 + i);
                uint8_t blk[2] = {0xff, (uint8_t)(62 + i - 127)};
                if (62 + i < 127) blk[0] = (uint8_t)(0x80 | (62 + i));
                CHECK_EQ_INT(decode(&d, blk, 62 + i < 127 ? 1 : 2, 0, c, err), 0);
                CHECK(c->len == e->namelen + e->valuelen + 3 &&
                      memcmp(c->text, e->name, e->namelen) == 0 &&
                      memcmp(c->text + e->namelen + 2, e->value, e->valuelen) == 0);
            }
            if (rc) break;
        }
        nghttp2_hd_deflate_del(def);
        hb_h2_hpack_dec_free(&d);
        free(out);
        free(store);
        free(want);
        free(c);
    }
}

int main(void)
{
    test_zero_copy();
    test_encode_exact();
    test_encode_static_names();
    test_encode_roundtrip();
    test_nghttp2_deflater();
    HB_TEST_MAIN_END();
}
