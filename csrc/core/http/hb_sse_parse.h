/* hb_sse_parse.h - an incremental parser of a server-sent event stream (the
 * WHATWG HTML "event stream" interpretation) that hands over each event's
 * fields, for a client that consumes the events (hb_sse.h's scanner only
 * counts them).
 *
 * Rules followed: an optional UTF-8 BOM at the stream's start is skipped;
 * lines end in CRLF, LF or CR (a CRLF split between two feeds is one line
 * end); a line starting with ':' is a comment; a field is "name: value" (one
 * space after the colon dropped) or a bare "name" (empty value); "data"
 * appends the value and a LF to the data buffer, "event" sets the block's type,
 * "id" sets the last event ID (unless the value holds a NUL; it persists
 * across events), "retry" made of ASCII digits sets the reconnection time;
 * other names are ignored. A blank line dispatches the block as an event when
 * it had a "data" field (its final LF removed; type "message" when none was
 * named), else discards it.
 *
 * Memory: the parser's buffers (a line split across feeds, the data, the
 * type, the last id) are the caller's, grown through its grow callback; a
 * line, and an event's data, longer than max_line fail with HB_SSE_E_LINE
 * before any buffer passes that bound, so a stream without newlines costs
 * bounded memory. A line that arrives whole within one feed is parsed in place
 * (no copy), so a steady stream needs no allocation after its first events.
 */
#ifndef HB_SSE_PARSE_H
#define HB_SSE_PARSE_H

#include <stddef.h>
#include <stdint.h>

#include "base/hb_common.h"
#include "http/hb_sse.h"

#define HB_SSE_DEFAULT_MAX_LINE (1024u * 1024)

typedef struct hb_sse_buf {
    char *p;
    size_t len, cap;
} hb_sse_buf;

/* An event as dispatched; its pointers are valid until the next feed. */
typedef struct hb_sse_event {
    const char *type; /* "message" when the block named none */
    size_t type_len;
    const char *data; /* the data lines joined by LF */
    size_t data_len;
    const char *id; /* the last event ID ("" when none was set) */
    size_t id_len;
    int64_t retry; /* the block's retry field (ms), or -1 when it had none */
} hb_sse_event;

typedef struct hb_sse_parser hb_sse_parser;
/* Make b->cap >= need (need <= max_line + 1; may move b->p): 0 or an error. */
typedef int (*hb_sse_grow_fn)(hb_sse_parser *p, hb_sse_buf *b, size_t need);

struct hb_sse_parser {
    uint64_t max_line; /* bytes of a line, and of an event's data, at most */
    hb_sse_grow_fn grow;
    void *ctx; /* the caller's */
    hb_sse_buf line, data, type, id;
    int64_t retry;     /* this block's retry, or -1 */
    int64_t reconnect; /* the stream's reconnection time (ms), or -1 */
    uint8_t after_cr;  /* the last byte fed was a CR */
    uint8_t started;   /* the first line (and its BOM) is behind */
    uint8_t has_data;  /* the block had a data field */
    uint8_t reset;     /* an event was dispatched: clear the block on the next feed */
    int error;         /* sticky */
    uint64_t events;   /* dispatched */
    uint64_t comments; /* comment lines */
};

/* Zero p and set its bound (0: HB_SSE_DEFAULT_MAX_LINE) and grow callback. */
void hb_sse_parser_init(hb_sse_parser *p, uint64_t max_line, hb_sse_grow_fn grow, void *ctx);
/* Parse buf[0, len) up to the first dispatch: returns the bytes consumed (all
 * of them when no event was dispatched); on a dispatch *ev gets the event,
 * *got 1, and the rest of buf is left for the next call. Errors (sticky):
 * HB_SSE_E_LINE, or the grow callback's error. */
int64_t hb_sse_parse(hb_sse_parser *p, const char *buf, size_t len, hb_sse_event *ev, int *got);

#endif
