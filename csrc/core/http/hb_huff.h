/* hb_huff.h - the Huffman code of HPACK (RFC 7541 Appendix B), decoding only.
 *
 * HPACK (h2/hb_h2_hpack) and QPACK (h3codec/hb_qpack) share it: RFC 9204 uses the
 * same code. Decoding checks what RFC 7541 section 5.2 asks of a decoder: no
 * EOS symbol inside a string, padding of at most 7 bits, all ones.
 *
 * The tables are built once per process (thread-safe); no allocation.
 */
#ifndef HB_HUFF_H
#define HB_HUFF_H

#include <stddef.h>
#include <stdint.h>

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

#endif
