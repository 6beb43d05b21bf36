/* hb_qpack.h - QPACK (RFC 9204) without a dynamic table, for HTTP/3.
 *
 * We advertise SETTINGS_QPACK_MAX_TABLE_CAPACITY = 0 and
 * SETTINGS_QPACK_BLOCKED_STREAMS = 0 (h3codec/hb_h3_frame.h), so a peer must
 * never reference a dynamic table: field sections use the 99-entry static
 * table and literals only, nothing flows on the QPACK streams except "Set
 * Dynamic Table Capacity 0" from the peer's encoder and "Stream
 * Cancellation" from its decoder, and we never insert into the peer's table
 * (so its capacity needs no tracking).
 *
 * Decoder: stateless; every check RFC 9204 asks of a decoder whose table
 * capacity is 0 (Required Insert Count 0, no dynamic or post-base index,
 * static indexes < 99, integers and strings within the section, Huffman
 * strings valid - the code is shared with HPACK: http/hb_huff.h).
 * Encoder: stateless; a field is an indexed static line when name and value
 * match an entry, else a literal with a static name reference when the name
 * matches, else a literal with a literal name; strings are raw (Huffman
 * coding would cost more instructions per request than the few bytes it
 * saves on a request stream).
 *
 * Errors are negative HTTP/3 error codes (hb_h3_error): the connection must
 * close with the negation. Neither side allocates. Thread-safe.
 */
#ifndef HB_QPACK_H
#define HB_QPACK_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "h3codec/hb_h3_frame.h"
#include "http/hb_parse.h" /* hb_header */

/* Entries in the static table (RFC 9204 Appendix A). */
#define HB_QPACK_STATIC_N 99u

/* Static table entry idx (< HB_QPACK_STATIC_N): name and value. Returns 0,
 * or -1 for an index out of range. */
int hb_qpack_static_entry(unsigned idx, const char **name, size_t *name_len, const char **value,
                          size_t *value_len);

/* Called once per decoded field line, in order. name/value point into the
 * section, the static table or scratch: valid only for the call. */
typedef void (*hb_qpack_field_fn)(void *ud, const char *name, size_t name_len, const char *value,
                                  size_t value_len);

/* Scratch bytes hb_qpack_decode needs for a section of len bytes (the
 * longest Huffman expansion of one field line's strings). */
static inline size_t hb_qpack_scratch_need(size_t len)
{
    return len / 5 * 8 + 16;
}

/* hb_qpack_decode's return when the fields exceed max_list. */
#define HB_QPACK_TOO_LARGE 1

/* Decode one encoded field section (a HEADERS frame's payload). Huffman
 * strings are decoded into scratch (hb_qpack_scratch_need(len) bytes).
 * max_list caps the field section (RFC 9114 section 4.2.2: sum of name +
 * value + 32 per field; 0 = no cap): past it fn is called no more and the
 * result is HB_QPACK_TOO_LARGE (> 0; a stream error, the connection may go
 * on). Returns 0, HB_QPACK_TOO_LARGE or -HB_H3_QPACK_DECOMPRESSION_FAILED
 * (detail in err, HB_ERR_LEN bytes, may be NULL). */
int hb_qpack_decode(const uint8_t *in, size_t len, uint8_t *scratch, size_t max_list,
                    hb_qpack_field_fn fn, void *ud, char *err);

/* Whether the caller needs the value of a field named name (hb_qpack_decode_some). */
typedef int (*hb_qpack_want_fn)(void *ud, const char *name, size_t name_len);

/* hb_qpack_decode, but a Huffman-coded value whose field want() says is not needed
 * is skipped by its length, not decoded: fn gets it as NULL, 0. Such a value counts
 * towards max_list at the most it can decode to (8/5 of its length); only when that
 * would pass max_list is the section so far decoded whole to count it exactly, and
 * the rest of it too: HB_QPACK_TOO_LARGE exactly when hb_qpack_decode says so. The
 * Huffman code of a skipped value is not checked (a malformed one in a field nobody
 * reads is not an error here). */
int hb_qpack_decode_some(const uint8_t *in, size_t len, uint8_t *scratch, size_t max_list,
                         hb_qpack_want_fn want, hb_qpack_field_fn fn, void *ud, char *err);

/* Bytes hb_qpack_encode writes for these fields, at most. */
size_t hb_qpack_encode_bound(const hb_header *fields, size_t n);

/* Encode fields (in the order given: pseudo-headers first is the caller's
 * duty, as are lowercase names) as one field section, prefix included.
 * Returns the bytes written, or HB_E_TOO_LARGE when cap is below what they
 * need. */
ssize_t hb_qpack_encode(const hb_header *fields, size_t n, uint8_t *out, size_t cap);

/* ---- response heads from templates ----
 *
 * A server's response heads differ in few ways: the part of the section before
 * content-length is kept per (status, content type, flags, date or not) in a small
 * cache of templates, and a head is its template, the date's 29 bytes written into
 * it and the content-length line: the bytes hb_qpack_encode writes for
 *   :status, server, date (when given), content-type, cache-control: no-cache
 *   (HB_QPACK_HEAD_NO_CACHE), content-length (when cl_len > 0)
 * in that order. Content types are told apart by address and length: they must be
 * strings that never change (literals), as must server. Not thread-safe per cache. */
#define HB_QPACK_HEAD_SLOTS 8
#define HB_QPACK_HEAD_TPL 160
#define HB_QPACK_HEAD_NO_CACHE 1u
#define HB_QPACK_DATE_LEN 29 /* an IMF-fixdate */

typedef struct {
    const char *ct; /* NULL: free */
    size_t ct_len;
    uint16_t status;
    uint8_t flags;
    uint8_t len;     /* template bytes */
    uint8_t date_at; /* offset of the date's value; 0: no date line */
    uint8_t tpl[HB_QPACK_HEAD_TPL];
} hb_qpack_head_slot;

typedef struct {
    const char *server;
    size_t server_len;
    unsigned next; /* the slot a miss fills next */
    hb_qpack_head_slot slot[HB_QPACK_HEAD_SLOTS];
} hb_qpack_head_cache;

void hb_qpack_head_cache_init(hb_qpack_head_cache *hc, const char *server, size_t server_len);

/* The field section (prefix included) of a response head with status (100..999),
 * date (HB_QPACK_DATE_LEN bytes, or NULL), content type ct, flags and content-length
 * cl[0..cl_len) (digits; cl_len 0: none). Returns the bytes written, or
 * HB_E_TOO_LARGE (cap too small, status out of range). A head too long for a
 * template is encoded whole, uncached. */
ssize_t hb_qpack_encode_head(hb_qpack_head_cache *hc, unsigned status, const char *date,
                             const char *ct, size_t ct_len, unsigned flags, const char *cl,
                             size_t cl_len, uint8_t *out, size_t cap);

/* Bytes arriving on the peer's QPACK encoder stream (after its type): with
 * our capacity 0 the only valid instruction is "Set Dynamic Table Capacity
 * 0" (0x20). Returns 0 or -HB_H3_QPACK_ENCODER_STREAM_ERROR. */
int hb_qpack_peer_encoder_stream(const uint8_t *in, size_t len, char *err);

/* State of the peer's QPACK decoder stream: pieces may split an instruction. */
typedef struct hb_qpack_dstream {
    uint8_t in_int; /* inside a Stream Cancellation's multi-byte integer */
} hb_qpack_dstream;

/* Bytes arriving on the peer's QPACK decoder stream (after its type). Our
 * sections never reference the dynamic table, so only Stream Cancellation is
 * valid there (skipped); Section Acknowledgment and Insert Count Increment
 * are -HB_H3_QPACK_DECODER_STREAM_ERROR (RFC 9204 sections 4.4.1, 4.4.3). */
int hb_qpack_peer_decoder_stream(hb_qpack_dstream *st, const uint8_t *in, size_t len, char *err);

#endif
