/* fuzz_h2_hpack.c - libFuzzer harness for hb_h2_hpack: the HPACK decoder and the
 * encoder.
 *
 * Input: byte 0 picks the advertised table size (bits 0-1) and the header
 * list cap (bits 2-3); then header blocks, each a 2-byte big-endian length
 * and that many bytes, decoded in order by one decoder. Beyond "no crash, no
 * sanitizer report, no leak" it checks the contract:
 *  - the fields passed to fn never exceed the cap (sum of name + value + 32);
 *  - a failed block leaves the decoder refusing every later block;
 *  - decoded fields, re-encoded with hb_h2_hpack_encode (within its bound) and
 *    decoded by a fresh decoder, come back the same;
 *  - when nghttp2's inflater also accepts a block, it gives the same fields;
 *  - each block's bytes, read as one Huffman string, decode exactly as a
 *    slow bit-by-bit reference decoder says (same bytes, or both refuse).
 *
 * build: clang -fsanitize=fuzzer,address,undefined -Icsrc/core \
 *          csrc/fuzz/fuzz_h2_hpack.c csrc/core/h2/hb_h2_hpack.c csrc/core/http/hb_huff.c \
 *          csrc/core/base/hb_common.c \
 *          csrc/core/http/hb_parse.c -lnghttp2
 */
#include <nghttp2/nghttp2.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "h2/hb_h2_hpack.h"

#define REQUIRE(c)                                                                                 \
    do {                                                                                           \
        if (!(c)) __builtin_trap();                                                                \
    } while (0)

/* RFC 7541 Appendix B codes (right-aligned), for the reference decoder. */
#include "hpack_ref.h"

/* Bit by bit: after each bit, is the code so far one of the 257? Returns the
 * decoded length, or -1 (EOS inside, padding over 7 bits or not all ones). */
static long ref_huffman(const uint8_t *s, size_t len, uint8_t *out)
{
    static uint16_t by_len[31][257], n_len[31];
    if (!n_len[5]) /* symbols grouped by code length, so each bit scans a few */
        for (int sym = 0; sym < 257; sym++)
            by_len[REF_LEN[sym]][n_len[REF_LEN[sym]]++] = (uint16_t)sym;
    uint32_t code = 0;
    unsigned bits = 0;
    long n = 0;
    for (size_t i = 0; i < len * 8; i++) {
        code = code << 1 | (uint32_t)(s[i / 8] >> (7 - i % 8) & 1);
        bits++;
        if (bits > 30) return -1;
        for (unsigned k = 0; k < n_len[bits]; k++) {
            unsigned sym = by_len[bits][k];
            if (REF_CODE[sym] == code) {
                if (sym == 256) return -1;
                out[n++] = (uint8_t)sym;
                code = 0;
                bits = 0;
                break;
            }
        }
    }
    if (bits > 7 || code != (1u << bits) - 1) return -1;
    return n;
}

/* Fields as one byte string: name_len (4 bytes), name, value_len, value. */
typedef struct {
    uint8_t *buf;
    size_t len, cap;
    size_t n;
    size_t list;
    int overflow; /* too much to keep: skip the comparisons */
} fields;

static void put(fields *f, const void *p, size_t n)
{
    if (f->overflow || f->len + n > f->cap) {
        f->overflow = 1;
        return;
    }
    memcpy(f->buf + f->len, p, n);
    f->len += n;
}

static void add_field(fields *f, const uint8_t *name, size_t nlen, const uint8_t *value,
                      size_t vlen)
{
    uint32_t a = (uint32_t)nlen, b = (uint32_t)vlen;
    f->n++;
    f->list += nlen + vlen + 32;
    put(f, &a, 4);
    put(f, name, nlen);
    put(f, &b, 4);
    put(f, value, vlen);
}

static void on_field(void *ud, const char *name, size_t nlen, const char *value, size_t vlen)
{
    add_field(ud, (const uint8_t *)name, nlen, (const uint8_t *)value, vlen);
}

static void fields_reset(fields *f)
{
    f->len = f->n = f->list = 0;
    f->overflow = 0;
}

static int same(const fields *a, const fields *b)
{
    return a->n == b->n && a->len == b->len && memcmp(a->buf, b->buf, a->len) == 0;
}

/* Decode with a scratch of exactly the size the header asks for. */
static int decode(hb_h2_hpack_dec *d, const uint8_t *in, size_t len, size_t max_list, fields *f,
                  char *err)
{
    uint8_t *scratch = malloc(hb_h2_hpack_scratch_need(len));
    REQUIRE(scratch);
    fields_reset(f);
    int rc = hb_h2_hpack_decode(d, in, len, scratch, max_list, on_field, f, err);
    free(scratch);
    return rc;
}

/* Re-encode f and decode that with a fresh decoder: the same fields. */
static void check_reencode(const fields *f)
{
    hb_header *h = malloc((f->n + 1) * sizeof *h);
    REQUIRE(h);
    size_t off = 0;
    for (size_t i = 0; i < f->n; i++) {
        uint32_t a, b;
        memcpy(&a, f->buf + off, 4);
        h[i].name = (const char *)f->buf + off + 4;
        h[i].name_len = a;
        off += 4 + a;
        memcpy(&b, f->buf + off, 4);
        h[i].value = (const char *)f->buf + off + 4;
        h[i].value_len = b;
        off += 4 + b;
    }
    size_t bound = hb_h2_hpack_encode_bound(h, f->n);
    uint8_t *out = malloc(bound + 1);
    REQUIRE(out);
    ssize_t n = hb_h2_hpack_encode(h, f->n, out, bound);
    REQUIRE(n >= 0 && (size_t)n <= bound);
    if (bound)
        REQUIRE(hb_h2_hpack_encode(h, f->n, out, (size_t)n - (n > 0)) == (n ? HB_E_TOO_LARGE : 0));
    hb_h2_hpack_dec d;
    char err[HB_ERR_LEN];
    REQUIRE(hb_h2_hpack_dec_init(&d, 0) == 0); /* the encoder never indexes */
    fields g = {malloc(f->len + 1), 0, f->len + 1, 0, 0, 0};
    REQUIRE(g.buf);
    REQUIRE(decode(&d, out, (size_t)n, 0, &g, err) == 0);
    REQUIRE(same(f, &g));
    free(g.buf);
    hb_h2_hpack_dec_free(&d);
    free(out);
    free(h);
}

/* nghttp2's inflater on the same block; 0 with its fields, or -1. */
static int nghttp2_decode(nghttp2_hd_inflater *inf, const uint8_t *in, size_t len, fields *f)
{
    fields_reset(f);
    for (;;) {
        nghttp2_nv nv;
        int flags = 0;
        ssize_t r = nghttp2_hd_inflate_hd2(inf, &nv, &flags, in, len, 1);
        if (r < 0) return -1;
        in += r;
        len -= (size_t)r;
        if (flags & NGHTTP2_HD_INFLATE_EMIT)
            add_field(f, nv.name, nv.namelen, nv.value, nv.valuelen);
        if (flags & NGHTTP2_HD_INFLATE_FINAL) {
            nghttp2_hd_inflate_end_headers(inf);
            return 0;
        }
        if (!(flags & NGHTTP2_HD_INFLATE_EMIT) && len == 0) return -1;
    }
}

/* The block's bytes as one Huffman name with an empty value. */
static void check_huffman(const uint8_t *s, size_t len)
{
    uint8_t *blk = malloc(len + 16), *ref = malloc(len * 8 / 5 + 1);
    REQUIRE(blk && ref);
    size_t n = 0;
    blk[n++] = 0x00;
    if (len < 127) {
        blk[n++] = (uint8_t)(0x80 | len);
    } else {
        blk[n++] = 0xff;
        size_t v = len - 127;
        for (; v >= 128; v >>= 7)
            blk[n++] = (uint8_t)(v | 0x80);
        blk[n++] = (uint8_t)v;
    }
    memcpy(blk + n, s, len);
    n += len;
    blk[n++] = 0x00;
    long want = ref_huffman(s, len, ref);
    hb_h2_hpack_dec d;
    char err[HB_ERR_LEN];
    REQUIRE(hb_h2_hpack_dec_init(&d, 0) == 0);
    fields f = {malloc(len * 2 + 64), 0, len * 2 + 64, 0, 0, 0};
    REQUIRE(f.buf);
    int rc = decode(&d, blk, n, 0, &f, err);
    if (want < 0) {
        REQUIRE(rc == HB_E_H2);
    } else {
        uint32_t a;
        REQUIRE(rc == 0 && f.n == 1);
        memcpy(&a, f.buf, 4);
        REQUIRE(a == (uint32_t)want && memcmp(f.buf + 4, ref, (size_t)want) == 0);
    }
    free(f.buf);
    hb_h2_hpack_dec_free(&d);
    free(ref);
    free(blk);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const uint32_t tables[4] = {4096, 256, 0, 65536};
    static const size_t caps[4] = {0, 64, 300, 4096};
    if (size < 1) return 0;
    uint32_t table = tables[data[0] & 3];
    size_t cap = caps[data[0] >> 2 & 3];
    data++;
    size--;

    hb_h2_hpack_dec d;
    char err[HB_ERR_LEN];
    REQUIRE(hb_h2_hpack_dec_init(&d, table) == 0);
    nghttp2_hd_inflater *inf;
    REQUIRE(nghttp2_hd_inflate_new(&inf) == 0);
    REQUIRE(nghttp2_hd_inflate_change_table_size(inf, table) == 0);
    int inf_ok = 1, failed = 0;
    fields f = {malloc(1 << 20), 0, 1 << 20, 0, 0, 0};
    fields g = {malloc(1 << 20), 0, 1 << 20, 0, 0, 0};
    REQUIRE(f.buf && g.buf);

    while (size >= 2) {
        size_t len = (size_t)data[0] << 8 | data[1];
        data += 2;
        size -= 2;
        if (len > size) len = size;
        const uint8_t *blk = data;
        data += len;
        size -= len;

        check_huffman(blk, len);
        int rc = decode(&d, blk, len, cap, &f, err);
        if (failed) {
            REQUIRE(rc == HB_E_H2);
            continue;
        }
        if (rc == HB_E_H2) {
            REQUIRE(err[0] != 0);
            failed = 1;
            continue;
        }
        REQUIRE(rc == 0 || rc == HB_H2_HPACK_TOO_LARGE);
        REQUIRE(rc == 0 || cap != 0);
        if (cap) REQUIRE(f.list <= cap);
        REQUIRE(d.size <= d.limit && d.limit <= d.max);
        if (!f.overflow) check_reencode(&f);
        if (inf_ok) {
            /* nghttp2 stays in step only while it accepts every block */
            inf_ok = nghttp2_decode(inf, blk, len, &g) == 0;
            if (inf_ok && rc == 0 && !f.overflow && !g.overflow) REQUIRE(same(&f, &g));
        }
    }
    free(f.buf);
    free(g.buf);
    nghttp2_hd_inflate_del(inf);
    hb_h2_hpack_dec_free(&d);
    return 0;
}
