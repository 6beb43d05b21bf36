/* hb_h3_frame.h - HTTP/3 framing (RFC 9114 section 7) and QUIC variable-length
 * integers (RFC 9000 section 16), independent of any QUIC library.
 *
 * Used by the HTTP/3 client (h3/hb_h3_client*) and server (h3server/hb_h3_server*):
 *  - varints: length, write, read (whole or fed in pieces);
 *  - frame headers: write; an incremental frame reader for one stream that
 *    takes bytes in arbitrary pieces, streams DATA payloads without copying,
 *    hands every other known frame over whole (from the input when it is all
 *    there, else from a caller-owned buffer), skips unknown and reserved
 *    (grease) types, and refuses a buffered frame over the caller's limit
 *    (never allocates);
 *  - unidirectional stream types, SETTINGS encode/decode, the one-varint
 *    frames (GOAWAY, MAX_PUSH_ID, CANCEL_PUSH), and the error codes of
 *    RFC 9114 section 8.1 and RFC 9204 section 6.
 *
 * Errors: functions that can fail return a negative value whose negation is
 * the HTTP/3 error code the connection (or stream) must close with, e.g.
 * -HB_H3_FRAME_ERROR, and write a detail into err (HB_ERR_LEN bytes; NULL =
 * no detail). Which frames a stream may carry (SETTINGS first and once on
 * the control stream, DATA/HEADERS only on request streams, ...) is the
 * caller's to check: hb_h3_frame_allowed() gives the RFC's table.
 *
 * No allocation anywhere; not thread-safe per reader.
 */
#ifndef HB_H3_FRAME_H
#define HB_H3_FRAME_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* ---- error codes (RFC 9114 section 8.1; QPACK's: RFC 9204 section 6) ---- */
typedef enum hb_h3_error {
    HB_H3_NO_ERROR = 0x100,
    HB_H3_GENERAL_PROTOCOL_ERROR = 0x101,
    HB_H3_INTERNAL_ERROR = 0x102,
    HB_H3_STREAM_CREATION_ERROR = 0x103,
    HB_H3_CLOSED_CRITICAL_STREAM = 0x104,
    HB_H3_FRAME_UNEXPECTED = 0x105,
    HB_H3_FRAME_ERROR = 0x106,
    HB_H3_EXCESSIVE_LOAD = 0x107,
    HB_H3_ID_ERROR = 0x108,
    HB_H3_SETTINGS_ERROR = 0x109,
    HB_H3_MISSING_SETTINGS = 0x10a,
    HB_H3_REQUEST_REJECTED = 0x10b,
    HB_H3_REQUEST_CANCELLED = 0x10c,
    HB_H3_REQUEST_INCOMPLETE = 0x10d,
    HB_H3_MESSAGE_ERROR = 0x10e,
    HB_H3_CONNECT_ERROR = 0x10f,
    HB_H3_VERSION_FALLBACK = 0x110,
    HB_H3_QPACK_DECOMPRESSION_FAILED = 0x200,
    HB_H3_QPACK_ENCODER_STREAM_ERROR = 0x201,
    HB_H3_QPACK_DECODER_STREAM_ERROR = 0x202,
} hb_h3_error;

/* Name of an HTTP/3 or QPACK error code ("H3_FRAME_ERROR"), "unknown" otherwise. */
const char *hb_h3_error_name(uint64_t code);

/* ---- frame types (RFC 9114 section 7.2) and stream types (section 6.2) ---- */
enum {
    HB_H3_FRAME_DATA = 0x00,
    HB_H3_FRAME_HEADERS = 0x01,
    HB_H3_FRAME_CANCEL_PUSH = 0x03,
    HB_H3_FRAME_SETTINGS = 0x04,
    HB_H3_FRAME_PUSH_PROMISE = 0x05,
    HB_H3_FRAME_GOAWAY = 0x07,
    HB_H3_FRAME_MAX_PUSH_ID = 0x0d,
};

enum {
    HB_H3_STREAM_CONTROL = 0x00,
    HB_H3_STREAM_PUSH = 0x01,
    HB_H3_STREAM_QPACK_ENCODER = 0x02,
    HB_H3_STREAM_QPACK_DECODER = 0x03,
};

/* Where a frame arrived: the control stream, a request stream, a push stream. */
typedef enum { HB_H3_ON_CONTROL, HB_H3_ON_REQUEST, HB_H3_ON_PUSH } hb_h3_stream_kind;

/* 0 when a frame of this type may arrive on this kind of stream (unknown
 * types may arrive anywhere and are to be ignored), else -HB_H3_FRAME_UNEXPECTED
 * (RFC 9114 section 7.2: also HTTP/2's types 0x02, 0x06, 0x08, 0x09). The
 * order (SETTINGS first on the control stream, HEADERS before DATA) is not
 * checked here. */
int hb_h3_frame_allowed(hb_h3_stream_kind on, uint64_t type);

/* ---- QUIC variable-length integers ---- */
#define HB_H3_VARINT_MAX ((UINT64_C(1) << 62) - 1)

/* Bytes v takes (1, 2, 4 or 8); 0 when v > HB_H3_VARINT_MAX. */
static inline size_t hb_h3_varint_len(uint64_t v)
{
    return v < 64 ? 1 : v < 16384 ? 2 : v < (UINT64_C(1) << 30) ? 4 : v <= HB_H3_VARINT_MAX ? 8 : 0;
}

/* Write v (<= HB_H3_VARINT_MAX) in its shortest form at o, which has room
 * for hb_h3_varint_len(v) bytes. Returns o past it. */
uint8_t *hb_h3_varint_put(uint8_t *o, uint64_t v);

/* Read a varint from p[0..len). Returns its length (1..8), or 0 when len is
 * shorter than the varint (the first byte says how long it is). */
size_t hb_h3_varint_get(const uint8_t *p, size_t len, uint64_t *v);

/* A varint fed in pieces (a unidirectional stream's type, a frame header). */
typedef struct hb_h3_varint_rd {
    uint64_t v;
    uint8_t need; /* bytes of the varint, 0 before its first byte */
    uint8_t have;
} hb_h3_varint_rd;

/* Consume bytes of in[0..len) into the varint. Returns the bytes consumed;
 * *done is 1 when the varint is complete (value in rd->v; reset rd with
 * {0} before the next). */
size_t hb_h3_varint_feed(hb_h3_varint_rd *rd, const uint8_t *in, size_t len, int *done);

/* ---- frame writing ---- */
/* Bytes of a frame header, at most (type and length, 8 bytes each). */
#define HB_H3_FRAME_HEADER_MAX 16u

/* Write a frame header (type, payload length) at o (room for
 * HB_H3_FRAME_HEADER_MAX bytes). Returns o past it. */
uint8_t *hb_h3_frame_header_put(uint8_t *o, uint64_t type, uint64_t len);

/* A frame whose payload is one varint (GOAWAY, MAX_PUSH_ID, CANCEL_PUSH):
 * up to 2 + 8 bytes at o. Returns o past it. */
uint8_t *hb_h3_frame_varint_put(uint8_t *o, uint64_t type, uint64_t v);

/* The one varint that is the whole payload of a GOAWAY, MAX_PUSH_ID or
 * CANCEL_PUSH frame: 0, or -HB_H3_FRAME_ERROR when the payload is anything else. */
int hb_h3_frame_varint_payload(const uint8_t *p, size_t len, uint64_t *v, char *err);

/* ---- SETTINGS (RFC 9114 section 7.2.4, RFC 9204 section 5) ---- */
enum {
    HB_H3_SETTINGS_QPACK_MAX_TABLE_CAPACITY = 0x01,
    HB_H3_SETTINGS_MAX_FIELD_SECTION_SIZE = 0x06,
    HB_H3_SETTINGS_QPACK_BLOCKED_STREAMS = 0x07,
    HB_H3_SETTINGS_ENABLE_CONNECT_PROTOCOL = 0x08, /* RFC 9220 */
    HB_H3_SETTINGS_H3_DATAGRAM = 0x33,             /* RFC 9297 */
};

/* "Not given" for max_field_section_size: no limit (the RFC's default). */
#define HB_H3_UNLIMITED UINT64_MAX

typedef struct hb_h3_conn_settings {
    uint64_t qpack_max_table_capacity; /* default 0 */
    uint64_t qpack_blocked_streams;    /* default 0 */
    uint64_t max_field_section_size;   /* default HB_H3_UNLIMITED */
    uint64_t enable_connect_protocol;  /* default 0 */
    uint64_t h3_datagram;              /* default 0 */
} hb_h3_conn_settings;

/* The defaults a peer's settings have before its SETTINGS frame. */
void hb_h3_settings_default(hb_h3_conn_settings *s);

/* Bytes hb_h3_settings_encode writes at most (header + 5 settings). */
#define HB_H3_SETTINGS_FRAME_MAX (HB_H3_FRAME_HEADER_MAX + 5u * 16u)

/* Write a whole SETTINGS frame (header and payload): QPACK_MAX_TABLE_CAPACITY
 * and QPACK_BLOCKED_STREAMS always (0 is how we say "no dynamic table"),
 * MAX_FIELD_SECTION_SIZE unless unlimited, the other two when non-zero.
 * Returns the bytes written, or -HB_H3_INTERNAL_ERROR when cap is too small
 * or a value exceeds HB_H3_VARINT_MAX. */
ssize_t hb_h3_settings_encode(const hb_h3_conn_settings *s, uint8_t *out, size_t cap);

/* Decode a SETTINGS payload into s (first set to the defaults). Unknown
 * identifiers are ignored. Returns 0, -HB_H3_SETTINGS_ERROR (an identifier
 * twice, HTTP/2's reserved 0x00/0x02..0x05, a boolean setting other than 0/1)
 * or -HB_H3_FRAME_ERROR (the payload ends inside a varint). */
int hb_h3_settings_decode(const uint8_t *p, size_t len, hb_h3_conn_settings *s, char *err);

/* ---- the incremental frame reader of one stream ---- */

typedef enum {
    HB_H3_EV_NEED_MORE, /* every byte given was consumed: feed the next piece */
    HB_H3_EV_DATA,      /* a piece of a DATA frame's payload (maybe empty) */
    HB_H3_EV_FRAME,     /* a whole frame of any other known type */
    HB_H3_EV_SKIPPED,   /* with report_skipped: the header of a frame the reader skips */
} hb_h3_ev_kind;

typedef struct hb_h3_frame_ev {
    hb_h3_ev_kind kind;
    uint64_t type;          /* HB_H3_EV_DATA / _FRAME: the frame's type */
    const uint8_t *payload; /* into the input or the reader's buffer: valid until the next call */
    size_t len;             /* bytes at payload */
    int frame_end;          /* HB_H3_EV_DATA: this piece ends the DATA frame */
    int frame_start;        /* HB_H3_EV_DATA: this piece begins the DATA frame */
} hb_h3_frame_ev;

typedef struct hb_h3_frame_reader {
    uint8_t *buf;       /* caller-owned: a frame's payload when it arrives in pieces */
    size_t buf_cap;     /* bytes at buf */
    size_t max_payload; /* a buffered frame longer than this is refused */
    size_t buf_n;       /* payload bytes buffered so far */
    uint64_t type;      /* the current frame's */
    uint64_t left;      /* payload bytes still to come */
    hb_h3_varint_rd vr; /* the header's varint being read */
    uint8_t state;      /* reader-private */
    uint8_t started;    /* reader-private: a DATA frame's first piece not yet given */
    /* 0 after init; set to 1 to hear of each skipped frame (HB_H3_EV_SKIPPED, its
     * type, no payload) before its payload is skipped: a control stream's first
     * frame must be SETTINGS, whatever its type (RFC 9114 6.2.1) */
    uint8_t report_skipped;
} hb_h3_frame_reader;

/* Set up a reader. Frames other than DATA, unknown types (neither is ever
 * buffered) and the one-varint frames with a payload over max_payload are
 * refused with -HB_H3_EXCESSIVE_LOAD. A frame wholly inside one piece is
 * handed over from the piece; one that arrives in pieces is gathered in
 * buf[0..cap), and -HB_H3_EXCESSIVE_LOAD when it does not fit there (so
 * cap >= max_payload reads every frame the limit allows; buf may be NULL
 * with cap 0). */
void hb_h3_frame_reader_init(hb_h3_frame_reader *r, uint8_t *buf, size_t cap, size_t max_payload);

/* Read from in[0..len): returns the bytes consumed (>= 0) and sets *ev, or
 * a negative error (-HB_H3_EXCESSIVE_LOAD; -HB_H3_FRAME_ERROR for a GOAWAY,
 * MAX_PUSH_ID or CANCEL_PUSH whose length cannot be one varint). Call again
 * with the rest until it says HB_H3_EV_NEED_MORE (then all of in was
 * consumed). Unknown types and reserved (grease) ones are skipped, silently
 * unless report_skipped is set. */
ssize_t hb_h3_frame_read(hb_h3_frame_reader *r, const uint8_t *in, size_t len, hb_h3_frame_ev *ev,
                         char *err);

/* 1 when the reader is between frames (a stream may end there), else 0:
 * a stream that ends inside a frame is -HB_H3_FRAME_ERROR (RFC 9114 7.1). */
int hb_h3_frame_reader_idle(const hb_h3_frame_reader *r);

#endif
