/* hb_huff.h - the primitive coding HPACK (RFC 7541) and QPACK (RFC 9204) share:
 * prefixed integers (RFC 7541 section 5.1), string literals (section 5.2) and
 * the Huffman code (Appendix B), of which decoding only.
 *
 * HPACK (h2/hb_h2_hpack) and QPACK (h3codec/hb_qpack) both use it: RFC 9204
 * section 4.1 takes the integers, strings and code from RFC 7541 unchanged
 * (QPACK only puts prefixes and the Huffman flag at other bit positions, which
 * are parameters here). Decoding checks what RFC 7541 asks of a decoder:
 * integers that overflow (here: more than 32 bits), strings longer than what
 * is left, no EOS symbol inside a Huffman string, padding of at most 7 bits,
 * all ones.
 *
 * The decoding tables are built once per process (thread-safe); no allocation.
 * The integer and string coders are inline: the common forms (a value within
 * its prefix, one continuation byte) cost what hand-written code would.
 */
#ifndef HB_HUFF_H
#define HB_HUFF_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "base/hb_common.h"

/* Branch hints, for the inline coders here and the codecs that use them. */
#ifndef HB_LIKELY
#define HB_LIKELY(x) __builtin_expect(!!(x), 1)
#define HB_UNLIKELY(x) __builtin_expect(!!(x), 0)
#endif

/* Build the decoding tables now (hb_huff_decode does it on first use too). */
void hb_huff_init(void);

/* Output bytes hb_huff_decode may write for a string of slen bytes (the
 * shortest code is 5 bits; steps store two bytes at a time). */
static inline size_t hb_huff_out_need(size_t slen)
{
    return slen * 8 / 5 + 2;
}

/* Decode the Huffman string s[0..slen) into out (room for hb_huff_out_need(slen)
 * bytes). blk_end >= s + slen bounds reads (bytes up to it may be read, never
 * used, so reads can go 8 bytes at a time). Returns the end of the output, or
 * NULL with err (HB_ERR_LEN bytes, may be NULL) set to "<who>: Huffman ..."
 * and the code rc (what hb_fail would return) dropped: the caller returns it. */
uint8_t *hb_huff_decode(const uint8_t *s, size_t slen, const uint8_t *blk_end, uint8_t *out,
                        const char *who, int rc, char *err);

/* ---- integers and string literals ---- */

/* Who decodes, for its errors: they read "<who>: <unit> ends inside an
 * integer" and so on, and the decoders return rc (nonzero). */
typedef struct {
    const char *who;  /* "hpack", "qpack" */
    const char *unit; /* what holds the fields: "block", "section" */
    int rc;
} hb_hp_ctx;

/* A static-table entry (RFC 7541 Appendix A, RFC 9204 Appendix A), written
 * HB_HP_ENTRY("name", "value"). */
typedef struct {
    const char *name;
    const char *value;
    uint8_t name_len;
    uint8_t value_len;
} hb_hp_entry;
#define HB_HP_ENTRY(n, v)                                                                          \
    {                                                                                              \
        n, v, sizeof(n) - 1, sizeof(v) - 1                                                         \
    }

/* Bytes of v coded with a prefix of prefix bits (1..8). */
static inline size_t hb_hp_int_len(size_t v, unsigned prefix)
{
    size_t mask = ((size_t)1 << prefix) - 1;
    if (v < mask) return 1;
    size_t n = 2;
    for (v -= mask; v >= 128; v >>= 7)
        n++;
    return n;
}

/* Write v with a prefix of prefix bits at o; first holds the bits above the
 * prefix. o has room for hb_hp_int_len(v, prefix) bytes. Returns the end. */
static inline uint8_t *hb_hp_int_put(uint8_t *o, uint8_t first, size_t v, unsigned prefix)
{
    size_t mask = ((size_t)1 << prefix) - 1;
    if (v < mask) {
        *o++ = (uint8_t)(first | v);
        return o;
    }
    *o++ = (uint8_t)(first | mask);
    for (v -= mask; v >= 128; v >>= 7)
        *o++ = (uint8_t)(v | 0x80);
    *o++ = (uint8_t)v;
    return o;
}

/* Write the raw (not Huffman-coded) string literal s[0..len) at o: its length
 * with a prefix of prefix bits under first (the Huffman flag clear), then the
 * bytes. Room: hb_hp_int_len(len, prefix) + len. Returns the end. */
static inline uint8_t *hb_hp_str_put(uint8_t *o, uint8_t first, unsigned prefix, const char *s,
                                     size_t len)
{
    o = hb_hp_int_put(o, first, len, prefix);
    if (len) memcpy(o, s, len);
    return o + len;
}

typedef struct {
    const uint8_t *p; /* past the integer; NULL on error */
    uint32_t v;
} hb_hp_int_res;

/* hb_hp_int_decode's rare form, out of line: two or more continuation bytes
 * at p, v the prefix's value. */
hb_hp_int_res hb_hp_int_decode_long(const uint8_t *p, const uint8_t *end, uint32_t v,
                                    const hb_hp_ctx *c, char *err);

/* Decode the integer whose prefix is the mask bits (2^N - 1) of **pp (the
 * caller knows *pp < end) into *out, advancing *pp. Values must fit 32 bits
 * (every length and index of HPACK and QPACK does here). Returns 0, or c->rc
 * with err (HB_ERR_LEN bytes, may be NULL) set. */
static inline __attribute__((always_inline)) int hb_hp_int_decode(const uint8_t **pp,
                                                                  const uint8_t *end, uint32_t mask,
                                                                  uint32_t *out, const hb_hp_ctx *c,
                                                                  char *err)
{
    const uint8_t *p = *pp;
    uint32_t v = *p++ & mask;
    if (HB_LIKELY(v < mask)) {
        *pp = p;
        *out = v;
        return 0;
    }
    if (HB_LIKELY(p < end && !(*p & 0x80))) { /* one continuation byte */
        *pp = p + 1;
        *out = v + *p;
        return 0;
    }
    hb_hp_int_res r = hb_hp_int_decode_long(p, end, v, c, err);
    if (!r.p) return c->rc;
    *pp = r.p;
    *out = r.v;
    return 0;
}

/* Decode the string literal at *pp (< end or not): its length has a prefix of
 * mask bits, its Huffman flag is the bit hbit of the first byte. A raw string
 * points into the input; a Huffman one is decoded to *scratch (room for
 * hb_huff_out_need of its length), which advances past it. Sets *s and *slen,
 * advances *pp. Returns 0, or c->rc with err set. */
static inline __attribute__((always_inline)) int
hb_hp_str_decode(const uint8_t **pp, const uint8_t *end, uint32_t mask, uint8_t hbit,
                 uint8_t **scratch, const char **s, size_t *slen, const hb_hp_ctx *c, char *err)
{
    const uint8_t *p = *pp;
    if (HB_UNLIKELY(p == end))
        return hb_fail(err, c->rc, "%s: %s ends before a string", c->who, c->unit);
    int huff = *p & hbit;
    uint32_t len;
    if (hb_hp_int_decode(&p, end, mask, &len, c, err)) return c->rc;
    if (HB_UNLIKELY(len > (size_t)(end - p)))
        return hb_fail(err, c->rc, "%s: string of %u bytes but %zu left in the %s", c->who, len,
                       (size_t)(end - p), c->unit);
    if (huff) {
        uint8_t *o = hb_huff_decode(p, len, end, *scratch, c->who, c->rc, err);
        if (HB_UNLIKELY(!o)) return c->rc;
        *s = (const char *)*scratch;
        *slen = (size_t)(o - *scratch);
        *scratch = o;
    } else {
        *s = (const char *)p;
        *slen = len;
    }
    *pp = p + len;
    return 0;
}

#endif
