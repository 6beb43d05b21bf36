/* hb_huff.c - HPACK/QPACK Huffman decoding and long integers; see hb_huff.h.
 *
 * Reads 12 bits at a time through a 4096-entry table that gives up to two
 * symbols and the bits they use; codes longer than 12 bits (rare: control
 * bytes and bytes >= 0x80) go through canonical decoding. The table is built
 * once from the RFC's code lengths (the code is canonical, so the lengths fix
 * every code).
 */
#include "http/hb_huff.h"

#include <pthread.h>
#include <string.h>

#include "base/hb_common.h"

/* Code lengths per symbol (RFC 7541 Appendix B), 256 = EOS.
 * Printed by tools/gen_hpack_huffman.py, which also checks the code is canonical. */
static const uint8_t HUFF_LEN[257] = {
    13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 30, 28,
    28, 28, 28, 28, 28, 28, 28, 28, 6,  10, 10, 12, 13, 6,  8,  11, 10, 10, 8,  11, 8,  6,  6,  6,
    5,  5,  5,  6,  6,  6,  6,  6,  6,  6,  7,  8,  15, 6,  12, 10, 13, 6,  7,  7,  7,  7,  7,  7,
    7,  7,  7,  7,  7,  7,  7,  7,  7,  7,  7,  7,  7,  7,  7,  7,  8,  7,  8,  13, 19, 13, 14, 6,
    15, 5,  6,  5,  6,  5,  6,  6,  6,  5,  7,  7,  6,  6,  6,  5,  6,  7,  6,  5,  5,  6,  7,  7,
    7,  7,  7,  15, 11, 14, 13, 28, 20, 22, 20, 20, 22, 22, 22, 23, 22, 23, 23, 23, 23, 23, 24, 23,
    24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24, 22, 21, 20, 22, 22, 23, 23, 21,
    23, 22, 22, 24, 21, 22, 23, 23, 21, 21, 22, 21, 23, 22, 23, 23, 20, 22, 22, 22, 23, 22, 22, 23,
    26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25, 19, 21, 26, 27, 27, 26, 27, 24,
    21, 21, 26, 26, 28, 27, 27, 27, 20, 24, 20, 21, 22, 21, 21, 23, 22, 22, 25, 25, 24, 24, 26, 23,
    26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27, 27, 27, 26, 30,
};

#define HUFF_EOS 256u
#define FAST_BITS 12u

/* Canonical decoding state: codes of length l are first[l] .. first[l] + count[l] - 1,
 * their symbols sorted[offset[l] ...] in code order. */
static uint32_t huff_first[31];
static uint16_t huff_count[31];
static uint16_t huff_offset[31];
static uint16_t huff_sorted[257];
/* FAST_BITS-bit window -> up to two symbols, how many, and the bits they use.
 * All zero when the first code is longer than FAST_BITS, so a step on it
 * does nothing. Byte fields: each is one load, no shifting. */
typedef struct {
    uint8_t sym[2];
    uint8_t used;
    uint8_t count;
} huff_entry;
static huff_entry huff_fast[1u << FAST_BITS];
/* acc as it is when the n bits left of a string are valid padding (all ones,
 * n <= 7, zeros after); 1 (never the case: bit 0 is always clear) otherwise. */
static uint64_t huff_pad_end[64];
static pthread_once_t huff_once = PTHREAD_ONCE_INIT;

/* Symbol whose code is a prefix of the `avail` top bits of w (left-aligned in
 * 32 bits), or -1. Sets *len. */
static inline __attribute__((always_inline)) int canon_prefix(uint32_t w, unsigned avail,
                                                              unsigned *len)
{
    for (unsigned l = 5; l <= 30 && l <= avail; l++) {
        uint32_t code = w >> (32 - l);
        if (code - huff_first[l] < huff_count[l]) {
            *len = l;
            return huff_sorted[huff_offset[l] + code - huff_first[l]];
        }
    }
    return -1;
}

static void huff_build(void)
{
    uint32_t code = 0;
    unsigned n = 0;
    for (unsigned l = 1; l <= 30; l++) {
        huff_first[l] = code;
        huff_offset[l] = (uint16_t)n;
        for (unsigned s = 0; s <= HUFF_EOS; s++)
            if (HUFF_LEN[s] == l) huff_sorted[n++] = (uint16_t)s;
        huff_count[l] = (uint16_t)(n - huff_offset[l]);
        code = (code + huff_count[l]) << 1;
    }
    for (unsigned k = 0; k < 64; k++)
        huff_pad_end[k] = k <= 7 ? ~(~(uint64_t)0 >> k) : 1;
    for (uint32_t v = 0; v < (1u << FAST_BITS); v++) {
        uint32_t w = v << (32 - FAST_BITS);
        unsigned l1, l2;
        int s1 = canon_prefix(w, FAST_BITS, &l1);
        huff_entry e = {{0, 0}, 0, 0};
        if (s1 >= 0) {
            e = (huff_entry){{(uint8_t)s1, 0}, (uint8_t)l1, 1};
            int s2 = canon_prefix(w << l1, FAST_BITS - l1, &l2);
            if (s2 >= 0) e = (huff_entry){{(uint8_t)s1, (uint8_t)s2}, (uint8_t)(l1 + l2), 2};
        }
        huff_fast[v] = e;
    }
}

static inline uint64_t load_be64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return v;
}

/* The bit reader over one string: acc holds bits left-aligned, n of them
 * valid; past n it holds the input's next bits, or zeros once the whole
 * string is in (p == end). */
typedef struct {
    uint64_t acc;
    unsigned n;
    const uint8_t *p, *end, *blk_end;
} bitrd;

/* Afterwards n >= 49, or the rest of the string is all in acc (p == end).
 * Loads 8 bytes at a time while the block has them, masking bits past the
 * string. */
static inline void refill(bitrd *r)
{
    if (HB_LIKELY(r->blk_end - r->p >= 8)) {
        r->acc |= load_be64(r->p) >> r->n;
        r->p += (63 - r->n) >> 3;
        r->n |= 56;
        if (r->p >= r->end) {
            r->n -= (unsigned)(r->p - r->end) * 8;
            r->p = r->end;
            r->acc &= ~(~(uint64_t)0 >> r->n);
        }
    } else {
        while (r->n <= 48 && r->p < r->end) {
            r->acc |= (uint64_t)*r->p++ << (56 - r->n);
            r->n += 8;
        }
        if (r->p == r->end) r->acc &= ~(~(uint64_t)0 >> r->n);
    }
}

/* One step: up to two symbols from the next 12 bits (a long code: nothing). */
#define HUFF_STEP(r, e, o)                                                                         \
    do {                                                                                           \
        e = &huff_fast[(r).acc >> (64 - FAST_BITS)];                                               \
        memcpy(o, e->sym, 2);                                                                      \
        o += e->count;                                                                             \
        (r).acc <<= e->used;                                                                       \
        (r).n -= e->used;                                                                          \
    } while (0)

/* A code longer than FAST_BITS in the top n bits of acc: symbol | length << 16,
 * or -1 when none is whole within them. */
static __attribute__((noinline)) int huff_long(uint64_t acc, unsigned n)
{
    unsigned l;
    int sym = canon_prefix((uint32_t)(acc >> 32), n, &l);
    return sym < 0 ? -1 : sym | (int)(l << 16);
}

/* The last n bits of a string hold no whole code and are not valid padding
 * (a prefix of EOS, all ones, shorter than a byte): say why. */
static __attribute__((noinline, cold)) void huff_end(uint64_t acc, unsigned n, const char *who,
                                                     int rc, char *err)
{
    if ((acc >> (64 - n)) != (~(uint64_t)0 >> (64 - n)))
        hb_fail(err, rc,
                n > 7 ? "%s: Huffman string ends inside a code (%u bits left)"
                      : "%s: Huffman padding is not all ones (%u bits)",
                who, n);
    else if (n > 7)
        hb_fail(err, rc, "%s: Huffman padding of %u bits (more than 7)", who, n);
}

uint8_t *hb_huff_decode(const uint8_t *s, size_t slen, const uint8_t *blk_end, uint8_t *out,
                        const char *who, int rc, char *err)
{
    pthread_once(&huff_once, huff_build);
    bitrd r = {0, 0, s, s + slen, blk_end};
    uint8_t *o = out;
    const huff_entry *e;
    for (;;) {
        for (;;) {
            if (r.p < r.end) refill(&r);
            if (r.n < 48) break; /* then the rest of the string is in acc */
            /* each step takes <= 12 of the >= 48 bits; after a long code the
             * remaining steps repeat it and do nothing */
            HUFF_STEP(r, e, o);
            HUFF_STEP(r, e, o);
            HUFF_STEP(r, e, o);
            HUFF_STEP(r, e, o);
            if (HB_UNLIKELY(!e->count)) goto long_code;
        }
        /* The last < 48 bits of the string are in acc, zeros after them. */
        while (r.n >= 24) {
            HUFF_STEP(r, e, o);
            HUFF_STEP(r, e, o);
            if (HB_UNLIKELY(!e->count)) goto long_code;
        }
        for (;;) {
            e = &huff_fast[r.acc >> (64 - FAST_BITS)];
            if ((unsigned)e->used - 1 >= r.n) break; /* a long code, or past the string */
            memcpy(o, e->sym, 2);
            o += e->count;
            r.acc <<= e->used;
            r.n -= e->used;
        }
        if (r.n == 0) break;
        if (e->count) {
            unsigned l1 = HUFF_LEN[e->sym[0]];
            if (l1 > r.n) goto end;
            *o++ = e->sym[0];
            r.acc <<= l1;
            r.n -= l1;
            continue;
        }
    long_code:
        if (r.n < 30 && r.p < r.end) refill(&r);
        int sl = huff_long(r.acc, r.n);
        if (sl < 0) goto end;
        if ((sl & 0xffff) == (int)HUFF_EOS) {
            hb_fail(err, rc, "%s: Huffman EOS symbol inside a string", who);
            return NULL;
        }
        *o++ = (uint8_t)sl;
        r.acc <<= sl >> 16;
        r.n -= (unsigned)sl >> 16;
    }
    return o;
end:
    /* the usual end: 1..7 one bits of padding (zeros follow them in acc) */
    if (HB_LIKELY(r.acc == huff_pad_end[r.n])) return o;
    huff_end(r.acc, r.n, who, rc, err);
    return NULL;
}

void hb_huff_init(void)
{
    pthread_once(&huff_once, huff_build);
}

/* ---- integers ---- */

/* Takes no pointer to the caller's locals, so those stay in registers. */
__attribute__((noinline)) hb_hp_int_res hb_hp_int_decode_long(const uint8_t *p, const uint8_t *end,
                                                              uint32_t v, const hb_hp_ctx *c,
                                                              char *err)
{
    hb_hp_int_res r = {NULL, 0};
    uint64_t m = v;
    for (unsigned shift = 0;; shift += 7) {
        if (p == end) {
            hb_fail(err, c->rc, "%s: %s ends inside an integer", c->who, c->unit);
            return r;
        }
        uint8_t b = *p++;
        m += (uint64_t)(b & 0x7f) << shift;
        if (m > UINT32_MAX || (shift == 28 && (b & 0x80))) {
            hb_fail(err, c->rc, "%s: integer does not fit 32 bits", c->who);
            return r;
        }
        if (!(b & 0x80)) break;
    }
    r.p = p;
    r.v = (uint32_t)m;
    return r;
}
