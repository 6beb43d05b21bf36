/* fuzz_qpack.c - libFuzzer harness for QPACK without a dynamic table (h3codec/hb_qpack).
 *
 * Input: byte 0 picks the field-section cap (bits 0-1: none, 64, 256, 4096);
 * the rest is one encoded field section. Beyond "no crash, no sanitizer
 * report, no leak" it checks the contract:
 *  - the fields passed to fn never exceed the cap (sum of name + value + 32);
 *  - decoded fields, re-encoded with hb_qpack_encode (within its bound) and
 *    decoded again, come back the same;
 *  - an error is always -HB_H3_QPACK_DECOMPRESSION_FAILED with a detail;
 *  - hb_qpack_decode_some (bit 2 of byte 0: it wants every value of a name of
 *    even length, else none) gives the same result and fields as hb_qpack_decode
 *    whenever that succeeds or says too large, the values it skips as NULL, 0;
 *    when hb_qpack_decode fails, it fails alike or succeeds (a skipped value's
 *    Huffman code is not checked);
 *  - hb_qpack_encode_head (a cache kept across inputs, a shape taken from the
 *    input's first bytes) writes what hb_qpack_encode writes for the same fields;
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
    uint8_t skipped[MAX_FIELDS]; /* hb_qpack_decode_some's: the value was not decoded */
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

static void on_field_some(void *ud, const char *name, size_t nl, const char *value, size_t vl)
{
    fields *fs = ud;
    int skip = value == NULL;
    if (skip) REQUIRE(vl == 0);
    on_field(ud, name, nl, skip ? "" : value, vl);
    fs->skipped[fs->n - 1] = (uint8_t)skip;
}

static int want_even(void *ud, const char *name, size_t nl)
{
    (void)ud;
    (void)name;
    return (nl & 1) == 0;
}

static int want_none(void *ud, const char *name, size_t nl)
{
    (void)ud;
    (void)name;
    (void)nl;
    return 0;
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

/* b (decode_some's) names what a (decode's) has; its values where not skipped */
static int same_some(const fields *a, const fields *b)
{
    if (a->n != b->n) return 0;
    for (size_t i = 0; i < a->n; i++)
        if (a->f[i].name_len != b->f[i].name_len ||
            memcmp(a->f[i].name, b->f[i].name, a->f[i].name_len) ||
            (!b->skipped[i] && (a->f[i].value_len != b->f[i].value_len ||
                                memcmp(a->f[i].value, b->f[i].value, a->f[i].value_len))))
            return 0;
    return 1;
}

static const char *const CTS[4] = {"application/octet-stream", "text/plain", "text/event-stream",
                                   "application/x-a-content-type-long-enough-to-need-a-second-"
                                   "length-byte-and-then-some-more-and-more-and-more-and-more-"
                                   "and-more-and-more-and-more"};

/* hb_qpack_encode_head against hb_qpack_encode, the shape from d[0..4) */
static void check_head(const uint8_t *d, size_t len)
{
    static hb_qpack_head_cache hc;
    static int init;
    if (!init) {
        hb_qpack_head_cache_init(&hc, "httpbench", 9);
        init = 1;
    }
    if (len < 4) return;
    unsigned status = 100 + (unsigned)(d[0] | d[1] << 8) % 900;
    const char *ct = CTS[d[2] & 3];
    unsigned flags = (d[2] >> 2) & HB_QPACK_HEAD_NO_CACHE;
    static const char date1[] = "Sun, 06 Dec 2026 02:12:36 GMT",
                      date2[] = "Thu, 01 Jan 1970 00:00:00 GMT";
    const char *date = (d[2] & 0x10) ? NULL : (d[2] & 0x20) ? date1 : date2;
    char cl[24];
    size_t cll = d[3] % 21; /* 0: none */
    for (size_t i = 0; i < cll; i++)
        cl[i] = (char)('0' + (i + 4 < len ? d[i + 4] : i) % 10);
    char st[3] = {(char)('0' + status / 100), (char)('0' + status / 10 % 10),
                  (char)('0' + status % 10)};
    hb_header f[6];
    size_t n = 0;
    f[n++] = (hb_header){":status", 7, st, 3};
    f[n++] = (hb_header){"server", 6, "httpbench", 9};
    if (date) f[n++] = (hb_header){"date", 4, date, HB_QPACK_DATE_LEN};
    f[n++] = (hb_header){"content-type", 12, ct, strlen(ct)};
    if (flags) f[n++] = (hb_header){"cache-control", 13, "no-cache", 8};
    if (cll) f[n++] = (hb_header){"content-length", 14, cl, cll};
    uint8_t want[512], got[512];
    ssize_t w = hb_qpack_encode(f, n, want, sizeof want);
    size_t cap = (d[3] & 0x80) ? (size_t)w - 1 : sizeof got; /* sometimes one byte short */
    ssize_t g = hb_qpack_encode_head(&hc, status, date, ct, strlen(ct), flags, cl, cll, got, cap);
    REQUIRE(w > 0);
    if (cap < (size_t)w) {
        REQUIRE(g == HB_E_TOO_LARGE);
    } else {
        REQUIRE(g == w && memcmp(got, want, (size_t)w) == 0);
    }
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
    /* the same section with values skipped */
    b.n = b.used = b.list = 0;
    uint8_t *scratch2 = malloc(hb_qpack_scratch_need(len));
    int rs = hb_qpack_decode_some(in, len, scratch2, cap, (data[0] & 4) ? want_even : want_none,
                                  on_field_some, &b, err);
    if (rc >= 0) {
        REQUIRE(rs == rc);
        REQUIRE(same_some(&a, &b));
    } else {
        REQUIRE(rs == rc || rs == 0 || rs == HB_QPACK_TOO_LARGE);
    }
    free(scratch2);
    check_head(in, len);
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
