/* fuzz_qpack.c - libFuzzer harness for QPACK without a dynamic table (h3codec/hb_qpack).
 *
 * Input: byte 0 picks the field-section cap (bits 0-1: none, 64, 256, 4096);
 * the rest is one encoded field section. Beyond "no crash, no sanitizer
 * report, no leak" it checks the contract:
 *  - the fields passed to fn never exceed the cap (sum of name + value + 32);
 *  - decoded fields, re-encoded with hb_qpack_encode (within its bound) and
 *    decoded again, come back the same;
 *  - an error is always -HB_H3_QPACK_DECOMPRESSION_FAILED with a detail;
 *  - the checks of the peer's QPACK streams, over the same bytes, return 0
 *    or their own error code.
 *
 * build: clang -fsanitize=fuzzer,address,undefined -Icsrc/core csrc/fuzz/fuzz_qpack.c \
 *          csrc/core/h3codec/hb_qpack.c csrc/core/h3codec/hb_h3_frame.c csrc/core/http/hb_huff.c \
 *          csrc/core/base/hb_common.c
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/hb_common.h"
#include "h3codec/hb_qpack.h"

#define REQUIRE(c)                                                                                 \
    do {                                                                                           \
        if (!(c)) __builtin_trap();                                                                \
    } while (0)

#define MAX_FIELDS 8200 /* one per byte, at -max_len=8192 */
typedef struct {
    hb_header f[MAX_FIELDS];
    size_t n;
    size_t list; /* sum of name + value + 32 */
    char *bytes; /* copies of names and values */
    size_t used, cap;
} fields;

static void on_field(void *ud, const char *name, size_t nl, const char *value, size_t vl)
{
    fields *fs = ud;
    REQUIRE(fs->n < MAX_FIELDS && fs->used + nl + vl <= fs->cap);
    char *b = fs->bytes + fs->used;
    memcpy(b, name, nl);
    memcpy(b + nl, value, vl);
    fs->f[fs->n++] = (hb_header){b, nl, b + nl, vl};
    fs->used += nl + vl;
    fs->list += nl + vl + 32;
}

static int same(const fields *a, const fields *b)
{
    if (a->n != b->n) return 0;
    for (size_t i = 0; i < a->n; i++)
        if (a->f[i].name_len != b->f[i].name_len || a->f[i].value_len != b->f[i].value_len ||
            memcmp(a->f[i].name, b->f[i].name, a->f[i].name_len) ||
            memcmp(a->f[i].value, b->f[i].value, a->f[i].value_len))
            return 0;
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    static const size_t caps[4] = {0, 64, 256, 4096};
    size_t cap = caps[data[0] & 3];
    const uint8_t *in = data + 1;
    size_t len = size - 1;
    static fields a, b;
    size_t room = len * 80 + 64; /* a 1-byte line gives up to 76 bytes (static entry 85) */
    uint8_t *scratch = malloc(hb_qpack_scratch_need(len));
    a.bytes = malloc(room);
    b.bytes = malloc(room);
    a.cap = b.cap = room;
    a.n = b.n = a.used = b.used = a.list = b.list = 0;
    char err[HB_ERR_LEN];
    err[0] = 0;
    int rc = hb_qpack_decode(in, len, scratch, cap, on_field, &a, err);
    REQUIRE(rc == 0 || rc == HB_QPACK_TOO_LARGE || rc == -HB_H3_QPACK_DECOMPRESSION_FAILED);
    if (cap) REQUIRE(a.list <= cap);
    if (rc < 0) REQUIRE(err[0] != 0);
    if (rc == 0) {
        size_t bound = hb_qpack_encode_bound(a.f, a.n);
        uint8_t *enc = malloc(bound);
        ssize_t n = hb_qpack_encode(a.f, a.n, enc, bound);
        REQUIRE(n > 0 && (size_t)n <= bound);
        uint8_t *sc2 = malloc(hb_qpack_scratch_need((size_t)n));
        REQUIRE(hb_qpack_decode(enc, (size_t)n, sc2, 0, on_field, &b, err) == 0);
        REQUIRE(same(&a, &b));
        free(sc2);
        free(enc);
    }
    int e = hb_qpack_peer_encoder_stream(in, len, err);
    REQUIRE(e == 0 || e == -HB_H3_QPACK_ENCODER_STREAM_ERROR);
    hb_qpack_dstream st = {0};
    e = hb_qpack_peer_decoder_stream(&st, in, len, err);
    REQUIRE(e == 0 || e == -HB_H3_QPACK_DECODER_STREAM_ERROR);
    free(scratch);
    free(a.bytes);
    free(b.bytes);
    return 0;
}
