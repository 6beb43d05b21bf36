/* bench_hpack.c - cost of decoding one response header block with hb_h2_hpack
 * and with nghttp2's inflater, in two cases:
 *  nginx:   a typical nginx response (:status 200 indexed; server, date,
 *           content-type, content-length, last-modified, etag, accept-ranges as
 *           literals without indexing, static name index, Huffman values; 101
 *           bytes);
 *  indexed: a response from nghttp2's deflater once its fields are in the
 *           dynamic table (4 one-byte indexes and content-length, which it
 *           never indexes, as a raw literal: 9 bytes).
 * Meant to run under callgrind, which counts instructions per block exactly
 * (benchmarks/bench_hpack.py does that):
 *
 *   bench_hpack ours|nghttp2 nginx|indexed [blocks]
 *
 * Without callgrind it prints ns per block. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <nghttp2/nghttp2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "h2/hb_h2_hpack.h"

static const char BLOCK_HEX[] =
    "880f2789aa6355e580ae212e1f0f1296df3dbf4a01952f948a080271410ae34ddc138a62d1bf0f1087497ca589"
    "d34d1f0f0d83702dff0f1d96df697e94085486bb141004ca800dc69bb8cb4a62d1bf0f138cfe5c6996a38e32ac"
    "271dfe7f0f03848fd24a8f";

static size_t sink;

static void on_field(void *ud, const char *name, size_t nlen, const char *value, size_t vlen)
{
    (void)ud;
    sink += nlen + vlen + (size_t)(unsigned char)name[0] + (vlen ? (unsigned char)value[0] : 0);
}

/* One block through hb_h2_hpack (noinline: callgrind reports it per call). */
__attribute__((noinline)) static int ours_block(hb_h2_hpack_dec *d, const uint8_t *in, size_t len,
                                                uint8_t *scratch, char *err)
{
    return hb_h2_hpack_decode(d, in, len, scratch, 0, on_field, NULL, err);
}

/* One block through nghttp2's inflater, the way a session drives it. */
__attribute__((noinline)) static int nghttp2_block(nghttp2_hd_inflater *inf, const uint8_t *in,
                                                   size_t len)
{
    for (;;) {
        nghttp2_nv nv;
        int flags = 0;
        ssize_t r = nghttp2_hd_inflate_hd2(inf, &nv, &flags, in, len, 1);
        if (r < 0) return -1;
        in += r;
        len -= (size_t)r;
        if (flags & NGHTTP2_HD_INFLATE_EMIT)
            on_field(NULL, (const char *)nv.name, nv.namelen, (const char *)nv.value, nv.valuelen);
        if (flags & NGHTTP2_HD_INFLATE_FINAL) {
            nghttp2_hd_inflate_end_headers(inf);
            return 0;
        }
    }
}

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* The "indexed" case: what nghttp2's deflater (the embedded server's, with
 * incremental indexing) sends for a response once the fields are in the
 * table: block 1 primes the table, block 2 (all indexes) is the one timed. */
static const nghttp2_nv INDEXED_NV[] = {
#define NV(n, v)                                                                                   \
    {                                                                                              \
        (uint8_t *)n, (uint8_t *)v, sizeof(n) - 1, sizeof(v) - 1, NGHTTP2_NV_FLAG_NONE             \
    }
    NV(":status", "200"),
    NV("server", "httpbench"),
    NV("date", "Thu, 03 Dec 2026 22:45:26 GMT"),
    NV("content-type", "text/plain"),
    NV("content-length", "13"),
#undef NV
};

static int make_indexed(uint8_t *prime, size_t *prime_len, uint8_t *in, size_t *len)
{
    nghttp2_hd_deflater *def;
    if (nghttp2_hd_deflate_new(&def, HB_H2_HPACK_DEFAULT_TABLE)) return -1;
    ssize_t a = nghttp2_hd_deflate_hd(def, prime, 256, INDEXED_NV, 5);
    ssize_t b = nghttp2_hd_deflate_hd(def, in, 256, INDEXED_NV, 5);
    nghttp2_hd_deflate_del(def);
    if (a <= 0 || b <= 0) return -1;
    *prime_len = (size_t)a;
    *len = (size_t)b;
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 3 || (strcmp(argv[1], "ours") && strcmp(argv[1], "nghttp2")) ||
        (strcmp(argv[2], "nginx") && strcmp(argv[2], "indexed"))) {
        fprintf(stderr, "usage: %s ours|nghttp2 nginx|indexed [blocks]\n", argv[0]);
        return 2;
    }
    long blocks = argc > 3 ? atol(argv[3]) : 1000000;
    uint8_t in[256], prime[256];
    size_t len = 0, prime_len = 0;
    if (strcmp(argv[2], "nginx") == 0) {
        for (size_t i = 0; BLOCK_HEX[i] && BLOCK_HEX[i + 1]; i += 2) {
            unsigned v;
            sscanf(BLOCK_HEX + i, "%2x", &v);
            in[len++] = (uint8_t)v;
        }
    } else if (make_indexed(prime, &prime_len, in, &len)) {
        fprintf(stderr, "nghttp2 deflate failed\n");
        return 1;
    }
    uint8_t scratch[512];
    char err[HB_ERR_LEN];
    double t0 = 0;
    if (strcmp(argv[1], "ours") == 0) {
        hb_h2_hpack_dec d;
        if (hb_h2_hpack_dec_init(&d, HB_H2_HPACK_DEFAULT_TABLE) ||
            hb_h2_hpack_scratch_need(len) > 512 ||
            (prime_len && ours_block(&d, prime, prime_len, scratch, err)))
            return 1;
        t0 = now_ns();
        for (long i = 0; i < blocks; i++)
            if (ours_block(&d, in, len, scratch, err)) {
                fprintf(stderr, "decode failed: %s\n", err);
                return 1;
            }
        hb_h2_hpack_dec_free(&d);
    } else {
        nghttp2_hd_inflater *inf;
        if (nghttp2_hd_inflate_new(&inf) || (prime_len && nghttp2_block(inf, prime, prime_len)))
            return 1;
        t0 = now_ns();
        for (long i = 0; i < blocks; i++)
            if (nghttp2_block(inf, in, len)) {
                fprintf(stderr, "nghttp2 inflate failed\n");
                return 1;
            }
        nghttp2_hd_inflate_del(inf);
    }
    double t1 = now_ns();
    printf("%s %.1f ns/block (%zu bytes, sink %zu)\n", argv[1], (t1 - t0) / (double)blocks, len,
           sink);
    return 0;
}
