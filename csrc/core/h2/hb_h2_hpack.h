/* hb_h2_hpack.h - HPACK (RFC 7541) for the HTTP/2 client session (hb_h2_client).
 *
 * Decoder: one per connection, with its dynamic table (one allocation at
 * init, never grown), Huffman decoding and every check RFC 7541 asks of a
 * decoder (indexes in range, size updates at the start of a block and within
 * the advertised limit, integer overflow, Huffman padding and EOS). A failed
 * decode leaves the table unusable: the connection must end with
 * COMPRESSION_ERROR.
 *
 * Encoder: stateless. Fields are written as "indexed" when name and value
 * match a static-table entry, else as "literal without indexing" (static
 * name index when the name is in the static table), raw strings (no
 * Huffman): nothing is ever inserted into the peer's dynamic table, so the
 * peer's SETTINGS_HEADER_TABLE_SIZE needs no tracking.
 *
 * Neither allocates per block or per field. Not thread-safe per decoder.
 */
#ifndef HB_H2_HPACK_H
#define HB_H2_HPACK_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/hb_common.h"
#include "http/hb_parse.h" /* hb_header */

/* Default SETTINGS_HEADER_TABLE_SIZE (RFC 9113 section 6.5.2). */
#define HB_H2_HPACK_DEFAULT_TABLE 4096u

typedef struct hb_h2_hpack_dec {
    uint8_t *buf;      /* entry bytes (names and values): 2 * max, allocated at init with ent */
    uint32_t *ent;     /* ring of entries (offset, lengths): decoder-private layout */
    uint32_t buf_cap;  /* bytes of buf */
    uint32_t ent_mask; /* slots in ent - 1 (a power of two) */
    uint32_t ent_head; /* slot of the oldest entry */
    uint32_t ent_n;    /* entries in the table */
    uint32_t base;     /* virtual offset of buf[0] (entries store virtual offsets) */
    uint32_t tail;     /* virtual offset just past the newest entry's bytes */
    uint32_t size;     /* RFC 7541 size: sum of name + value + 32 per entry */
    uint32_t limit;    /* current maximum, from the last size update */
    uint32_t max;      /* SETTINGS_HEADER_TABLE_SIZE we advertised: limit <= max */
    uint32_t failed;   /* a decode failed: the table is out of step, refuse further blocks */
} hb_h2_hpack_dec;

/* Allocate a decoder whose dynamic table holds up to max_table bytes (what
 * we advertise as SETTINGS_HEADER_TABLE_SIZE; 0..65536). Returns 0,
 * HB_E_INVALID or HB_E_NOMEM (nothing to free then). */
int hb_h2_hpack_dec_init(hb_h2_hpack_dec *d, uint32_t max_table);
/* Free the table. Safe on a zeroed or failed-init struct and twice. */
void hb_h2_hpack_dec_free(hb_h2_hpack_dec *d);

/* Called once per decoded field, in order. name/value point into the
 * decoder's table, the input block or scratch: valid only for the call. */
typedef void (*hb_h2_hpack_field_fn)(void *ud, const char *name, size_t name_len, const char *value,
                                     size_t value_len);

/* Decode one complete header block (HEADERS + CONTINUATION fragments,
 * padding removed, concatenated). Huffman-coded strings are decoded into
 * scratch, which must hold at least hb_h2_hpack_scratch_need(len) bytes.
 *
 * max_list caps the header list (RFC 9113: sum of name + value + 32 per
 * field; 0 = no cap): past it the decoder keeps decoding, so the dynamic
 * table stays in step with the peer's, but calls fn no more and returns
 * HB_H2_HPACK_TOO_LARGE (> 0) at the end - a stream error, not a connection
 * error.
 *
 * Returns 0, HB_H2_HPACK_TOO_LARGE, or HB_E_H2 on a compression error (detail
 * in err, HB_ERR_LEN bytes; the connection must end with COMPRESSION_ERROR). */
#define HB_H2_HPACK_TOO_LARGE 1
int hb_h2_hpack_decode(hb_h2_hpack_dec *d, const uint8_t *in, size_t len, uint8_t *scratch,
                       size_t max_list, hb_h2_hpack_field_fn fn, void *ud, char *err);

/* Scratch bytes hb_h2_hpack_decode needs for a block of len bytes (the
 * longest Huffman expansion of one field's strings: 5-bit codes). */
static inline size_t hb_h2_hpack_scratch_need(size_t len)
{
    return len / 5 * 8 + 16;
}

/* Bytes hb_h2_hpack_encode writes for these fields, at most. */
size_t hb_h2_hpack_encode_bound(const hb_header *fields, size_t n);
/* Encode fields (pseudo-headers first, as given) into out. Returns the
 * bytes written, or HB_E_TOO_LARGE when cap is below what they need. */
ssize_t hb_h2_hpack_encode(const hb_header *fields, size_t n, uint8_t *out, size_t cap);

#endif
