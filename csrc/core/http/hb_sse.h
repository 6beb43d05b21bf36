/* hb_sse.h - server-sent events (the WHATWG HTML "event stream" format): the
 * embedded server's deterministic events, and an incremental scanner that
 * finds event dispatches in a stream split anywhere.
 *
 * The server's stream is the preamble, then events 1..N:
 *
 *     ": httpbench\nretry: 1000\n\n"                  (a comment; no event)
 *     "id: <i>\nevent: tick\n" + data lines + "\n"    (event i)
 *
 * An event's data (what a client's parser hands over) is the first `size`
 * bytes of the endless text (64 content bytes + "\n")*, the content bytes
 * being HB_SSE_LINE below: data of 64 bytes or fewer is one line, longer data
 * is multi-line. On the wire each of its lines is "data: <line>\n", so a
 * trailing newline in the data becomes a last empty "data: \n" line.
 *
 * The scanner follows the spec's line rules (CRLF, LF or CR, a CRLF split
 * between two reads is one line end) and field rules (a line is a field when
 * its name, up to ':' or the line's end, is exactly "data", "event", "id" or
 * "retry"; ':' starts a comment): an event is dispatched at a blank line when
 * the block had a "data" field. It allocates nothing and bounds a line's
 * length, so a stream without newlines fails (HB_SSE_E_LINE) instead of
 * growing a buffer.
 */
#ifndef HB_SSE_H
#define HB_SSE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "base/hb_common.h"

/* The 64 bytes of every full data line (content bytes 0..63). */
#define HB_SSE_LINE "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz01"
#define HB_SSE_PREAMBLE ": httpbench\nretry: 1000\n\n"
#define HB_SSE_MAX_SIZE 65536 /* an event's data bytes at most */
#define HB_SSE_MAX_EVENTS 100000000ull
/* iovecs hb_sse_event_iov fills at most */
#define HB_SSE_EVENT_IOV 8
/* scratch bytes it needs */
#define HB_SSE_SCRATCH 48

/* -5550 .. -5559: server-sent events. */
#define HB_SSE_E_LINE (-5550) /* a line longer than the scanner's bound */

/* The streaming routes' counters, one set per server worker whatever the
 * protocol serving them: streams begun, events or chunks sent whole and their
 * bytes (SSE: event bytes; /stream: body bytes; neither counts the protocol's
 * framing), and streams cut because their client stopped reading (no progress
 * within the server's request timeout). */
typedef struct hb_stream_stats {
    uint64_t sse_streams, sse_events, sse_bytes;
    uint64_t stream_streams, stream_chunks, stream_bytes;
    uint64_t sse_write_timeouts, stream_write_timeouts;
} hb_stream_stats;

/* Event `id`'s bytes with `size` data bytes as iovecs (pointing into static
 * buffers and scratch[HB_SSE_SCRATCH], which must outlive the write). Returns
 * the iovec count (<= HB_SSE_EVENT_IOV); *len gets the bytes in all. */
int hb_sse_event_iov(struct iovec *iov, char *scratch, uint64_t id, size_t size, size_t *len);
/* Its length alone. */
size_t hb_sse_event_len(uint64_t id, size_t size);
/* The event's data as a client sees it, into out[0, size). */
void hb_sse_event_data(char *out, size_t size);

/* The scanner's state (zero it, then set max_line; 0 means 1 MiB). */
typedef struct hb_sse_scan {
    uint64_t max_line; /* bytes of one line at most */
    /* state */
    uint64_t line_len; /* bytes of the current line so far */
    uint8_t name[6];   /* the field name's first bytes (names are case-sensitive) */
    uint8_t name_len;  /* its length, saturating at 7 */
    uint8_t after_cr;  /* the previous byte was a CR: a following LF is not a line */
    uint8_t colon;     /* the current line's name is complete (its ':' seen, or too long) */
    uint8_t has_data;  /* the block had a data field */
    int error;         /* sticky */
    /* counts since the start */
    uint64_t events;   /* dispatched */
    uint64_t comments; /* comment lines */
    uint64_t lines;
} hb_sse_scan;

void hb_sse_scan_init(hb_sse_scan *s, uint64_t max_line);
/* Scan buf[0, len): returns the events dispatched in it (s->events grows by
 * as many), or HB_SSE_E_LINE (sticky). *first_end (may be NULL) gets the
 * offset just past the first dispatching line end, or len when none. */
int64_t hb_sse_scan_feed(hb_sse_scan *s, const char *buf, size_t len, size_t *first_end);

#endif
