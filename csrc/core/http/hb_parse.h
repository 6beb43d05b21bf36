/* hb_parse.h - HTTP/1.1 request/response head parser and chunked decoder.
 *
 * Shaped like picohttpparser: the caller owns every buffer; names, values,
 * reason and target are (const char *, len) pairs pointing into the caller's
 * input; nothing is allocated. Head parsers return the number of bytes
 * consumed (> 0), HB_ERROR (-1) with `out->error` set to one of HB_PE_*, or
 * HB_AGAIN (-2) when the head is incomplete (callers feed more and call again
 * with the whole buffer). `num_headers` is the headers array capacity on input
 * and the count on output (on HB_AGAIN / HB_ERROR it keeps the capacity, so
 * the same struct can be passed again); `headers` may be NULL to only count
 * them and derive the framing (then only max_headers bounds the count).
 * Framing follows RFC 9112 section 6.3.
 *
 * Only the first max_head bytes of buf are ever examined: a buffer longer than
 * max_head without a complete head fails at once with HB_PE_HEAD_TOO_LARGE, so
 * memory and time stay bounded whatever the peer sends.
 *
 * Strict by default (RFC 9112; docs/parser.md lists every rule): every line
 * ends in CRLF (a bare LF or bare CR is HB_PE_BAD_LINE_ENDING), the start line
 * has exactly one SP between its parts, and chunk lines and Transfer-Encoding
 * must match their grammar. Empty lines (CRLF) before the start line are
 * skipped (counted in the bytes consumed). HB_PARSE_LENIENT_LF relaxes only
 * the line ends, for responses and chunked bodies a client reads.
 */
#ifndef HB_PARSE_H
#define HB_PARSE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/hb_common.h"

#define HB_PARSE_DEFAULT_MAX_HEAD (64 * 1024)
#define HB_PARSE_DEFAULT_MAX_HEADERS 128

/* The parse error codes (HB_PE_*) and their texts (hb_parse_strerror) are part of
 * the one error scheme: base/hb_common.h. */

/* Flags of the _ex entry points. HB_PARSE_LENIENT_LF accepts a bare LF as a
 * line end (RFC 9112 2.2 lets a recipient do so; a client reading responses
 * may, a server never should) and counts each one in `tolerated`. */
#define HB_PARSE_LENIENT_LF 1u

/* Bounds of the chunked decoder's framing lines (data runs are unbounded). */
#define HB_CHUNK_MAX_LINE 4096            /* one size line incl. extensions, or trailer line */
#define HB_CHUNK_MAX_TRAILERS (64 * 1024) /* all trailer lines together */

typedef struct hb_parse_limits {
    size_t max_head;    /* bytes of head (start line + headers + CRLFCRLF); 0 = default */
    size_t max_headers; /* 0 = default; the headers array capacity also bounds it */
} hb_parse_limits;

typedef struct hb_header {
    const char *name;
    size_t name_len;
    const char *value; /* optional whitespace trimmed */
    size_t value_len;
} hb_header;

/* Framing facts the head parsers derive from the headers. */
typedef struct hb_framing {
    int64_t content_length; /* -1 when absent or overridden by Transfer-Encoding */
    int chunked;            /* Transfer-Encoding with chunked as final coding */
    int connection_close;   /* Connection: close, or HTTP/1.0 without keep-alive; also
                               set for a response carrying both Transfer-Encoding and
                               Content-Length, or Transfer-Encoding in HTTP/1.0 */
    int expect_continue;    /* requests: Expect: 100-continue */
    int transfer_encoding;  /* a Transfer-Encoding header was present (any coding) */
    int transfer_codings;   /* codings listed in it, chunked included: more than one with
                               chunked means a coding this parser does not decode (a
                               server answers 501, RFC 9112 6.1) */
} hb_framing;

typedef struct hb_response_head {
    int minor_version; /* 0 or 1 */
    int status;        /* 100..999 */
    const char *reason;
    size_t reason_len; /* may be 0 */
    hb_header *headers;
    size_t num_headers; /* in: capacity, out: count */
    hb_framing framing;
    int error;          /* HB_PE_* when HB_ERROR is returned */
    unsigned tolerated; /* out: bare LFs accepted (only under HB_PARSE_LENIENT_LF) */
} hb_response_head;

typedef struct hb_request_head {
    const char *method;
    size_t method_len;
    const char *target; /* request-target as sent (path + query) */
    size_t target_len;
    int minor_version;
    hb_header *headers;
    size_t num_headers; /* in: capacity, out: count */
    hb_framing framing;
    int error;
} hb_request_head;

/* limits may be NULL for the defaults. Transfer-Encoding must be a list of
 * codings (token *(";" name "=" value)); "chunked" may appear once, last, and
 * without parameters. Requests are rejected (HB_PE_BAD_TRANSFER_ENCODING) when
 * chunked is not the final coding, and when Transfer-Encoding is combined with
 * Content-Length or sent with HTTP/1.0 (all smuggling vectors). A response
 * whose final coding is a valid non-chunked one is read until close
 * (framing.transfer_encoding set, framing.chunked clear); a caller that wants
 * no such responses treats that pair as a protocol error. */
int hb_parse_response_head(const char *buf, size_t len, hb_response_head *out,
                           const hb_parse_limits *limits);
/* The same with HB_PARSE_* flags (0 = hb_parse_response_head); out->tolerated
 * is always set. */
int hb_parse_response_head_ex(const char *buf, size_t len, hb_response_head *out,
                              const hb_parse_limits *limits, unsigned flags);
int hb_parse_request_head(const char *buf, size_t len, hb_request_head *out,
                          const hb_parse_limits *limits);

/* How the body of a response is delimited (RFC 9112 6.3). */
enum hb_body_kind {
    HB_BODY_NONE = 0, /* 1xx, 204, 304, response to HEAD */
    HB_BODY_LENGTH,   /* Content-Length bytes */
    HB_BODY_CHUNKED,  /* chunked transfer coding */
    HB_BODY_UNTIL_CLOSE,
};
enum hb_body_kind hb_response_body_kind(const hb_response_head *h, int request_was_head);
/* Requests have a body only when chunked or Content-Length says so (never until close). */
enum hb_body_kind hb_request_body_kind(const hb_request_head *h);
/* 1 for interim (1xx other than 101) responses callers must skip. */
int hb_response_is_interim(const hb_response_head *h);

/* Incremental chunked decoder: feed input split anywhere. A size line is
 * 1*HEXDIG, then extensions checked against RFC 9112 7.1.1 and ignored:
 * *(BWS ";" BWS name [BWS "=" BWS (token / quoted-string)]), then CRLF. No
 * whitespace may follow the size unless a ';' comes next. Chunk data and the
 * last chunk end in CRLF; trailer fields are validated and skipped. Errors are
 * sticky: after HB_ERROR every further feed fails the same way. */
typedef struct hb_chunked {
    int state;
    uint64_t remaining; /* data bytes left in the current chunk */
    size_t line_len;    /* bytes of the current size/trailer line seen (bounded) */
    size_t trailer_bytes;
    int done;           /* last chunk and trailers consumed */
    int error;          /* HB_PE_* after HB_ERROR */
    unsigned flags;     /* HB_PARSE_* given to hb_chunked_init_ex */
    unsigned tolerated; /* bare LFs accepted under HB_PARSE_LENIENT_LF */
} hb_chunked;

void hb_chunked_init(hb_chunked *c); /* strict: hb_chunked_init_ex(c, 0) */
void hb_chunked_init_ex(hb_chunked *c, unsigned flags);
/* Consumes a prefix of buf. If body data is found, *data and *data_len point at
 * one run of it inside buf (else *data_len = 0). Returns bytes consumed (>= 0;
 * less than len only when a data run ended or the body is done), or HB_ERROR.
 * Call repeatedly on the rest until all input is consumed or c->done. */
ssize_t hb_chunked_feed(hb_chunked *c, const char *buf, size_t len, const char **data,
                        size_t *data_len);

#endif
