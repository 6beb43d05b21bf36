/* hb_client.h - one blocking HTTP/1.1 exchange on a pooled connection.
 *
 * The caller serializes the request head (start line, headers, CRLFCRLF);
 * this layer sends it with the body, reads and parses the response head
 * (skipping 1xx interim responses), and delivers the body to a caller-owned
 * sink, framed per RFC 9112 6.3 (Content-Length, chunked, until close, none
 * for HEAD/1xx/204/304). Everything runs against one deadline covering the
 * whole request (connect to last byte, like curl --max-time): every wait is a
 * ppoll() with the time left. No allocation here: the exchange state is
 * caller-owned (stack), buffers belong to the connection or the sink.
 *
 * Usage:
 *   hb_exchange x;
 *   rc = hb_client_begin(pool, &req, &x, err);      // connect/reuse, send, read head
 *   ... look at x.resp / x.head_buf (valid until read_body) ...
 *   rc = hb_client_read_body(&x, &sink, err);         // if x.kind != HB_BODY_NONE
 *   hb_client_end(pool, &x);                          // always, after a successful begin
 *
 * Retry: when a request on a reused connection fails before any response
 * byte arrived (the server closed it while idle: EOF, ECONNRESET or EPIPE)
 * and req.idempotent is set and the body can be replayed, it is sent once
 * more on a new connection. Anything else is reported.
 *
 * The head is parsed as it arrives: bytes that cannot start a status line (an
 * SSH or SMTP banner, binary junk) fail with HB_PE_* as soon as they are read,
 * whatever the deadline. A body is never reserved ahead of the bytes received
 * by more than HB_CLIENT_BODY_STEP, whatever its Content-Length claims, and
 * req.max_body bounds it (HB_E_TOO_LARGE, before a byte of it is read when
 * Content-Length already says so).
 *
 * Errors (begin/read_body): HB_E_TIMEOUT, HB_E_CONNECT / -errno on connect,
 * HB_E_TLS*, HB_PE_* (protocol; detail names the reason), HB_E_TOO_LARGE, HB_E_CLOSED (closed
 * before the head or during the body: a truncated body is never a success),
 * -errno for other socket errors, HB_E_INVALID, HB_E_INTERRUPTED (a signal
 * cut a wait short and the pool has eintr_abort set). After an error from begin
 * there is nothing to end; after an error from read_body call end anyway (it
 * discards the connection).
 */
#ifndef HB_CLIENT_H
#define HB_CLIENT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/hb_common.h"
#include "http/hb_parse.h"
#include "client/hb_pool.h"

#define HB_CLIENT_MAX_HEADERS 128
/* 1xx responses skipped before a final one; more are a flood (a protocol error) */
#define HB_CLIENT_MAX_INTERIM 16
/* Most a memory sink is asked to grow past the body bytes it holds; growth is
 * geometric below that (a doubling of what arrived, at least 64 KiB). */
#define HB_CLIENT_BODY_STEP (16u * 1024 * 1024)
/* Bodies with a Content-Length up to this are reserved whole at once. */
#define HB_CLIENT_BODY_WHOLE (1024u * 1024)

typedef struct hb_request {
    hb_target target;
    const char *head; /* serialized head incl. the final CRLFCRLF */
    size_t head_len;
    const char *body; /* in-memory body (or NULL) */
    size_t body_len;
    /* Streamed body from a file descriptor (body_fd >= 0; `body` unused).
     * body_fd_off >= 0: read with pread from that offset (replayable, and the
     * fd's offset is untouched); -1: read() from the current position.
     * body_fd_len >= 0: exactly that many bytes (the head carries the
     * Content-Length); -1: until EOF, sent chunked (the head carries
     * Transfer-Encoding: chunked). */
    int body_fd;
    off_t body_fd_off;
    int64_t body_fd_len;
    int is_head;                  /* method HEAD: the response has no body */
    int idempotent;               /* may be retried on a fresh connection (see above) */
    unsigned parse_flags;         /* HB_PARSE_LENIENT_LF or 0, for the response head and chunks */
    uint64_t max_body;            /* largest response body accepted; 0: no limit */
    uint64_t start_ns;            /* hb_now_ns at the start of the request */
    uint64_t deadline_ns;         /* absolute; whole request */
    uint64_t connect_deadline_ns; /* absolute; <= deadline_ns */
} hb_request;

/* Where a body goes. Memory: bytes land in buf[len..cap); when more room is
 * needed, grow(s, need) must make cap >= need (may move buf) or return an
 * error code; need is at most HB_CLIENT_BODY_STEP past len (or the whole
 * Content-Length when it is at most HB_CLIENT_BODY_WHOLE), so a grow that
 * gives exactly need keeps the reservation bounded. File: fd >= 0, data is written there; buf/cap
 * (if set) is scratch space for reading (else the connection's buffer is used). */
typedef struct hb_sink {
    char *buf;
    size_t len, cap;
    int fd;
    int (*grow)(struct hb_sink *s, size_t need, char *err);
    void *ctx;
} hb_sink;

typedef struct hb_exchange {
    hb_conn *conn;
    const hb_request *req;
    hb_response_head resp;
    hb_header headers[HB_CLIENT_MAX_HEADERS];
    const char *head_buf; /* the final response's raw head (in the connection's buffer) */
    size_t head_len;
    enum hb_body_kind kind;
    uint64_t remaining; /* HB_BODY_LENGTH: body bytes still to deliver */
    hb_chunked chunk;
    uint64_t body_bytes; /* delivered to the sink so far */
    int keep_alive;      /* reusable once the body is fully read */
    int body_done;
    int reused;         /* sent on a pooled connection */
    int retried;        /* a stale reused connection was replaced */
    int eintr_abort;    /* from the pool's options */
    unsigned interim;   /* 1xx responses skipped (over HB_CLIENT_MAX_INTERIM: an error) */
    unsigned tolerated; /* bare LFs accepted under HB_PARSE_LENIENT_LF (heads, then chunks) */
    /* Phase timestamps (absolute hb_now_ns; connected/tls_done 0 on reuse). */
    uint64_t t_start, t_connected, t_tls_done, t_first_byte, t_done;
} hb_exchange;

int hb_client_begin(hb_pool *p, const hb_request *r, hb_exchange *x, char *err);
/* Body bytes already in the connection's buffer after begin (a body that
 * fits there can be consumed without any syscall). */
size_t hb_client_buffered(const hb_exchange *x);
/* Read the whole body into the sink. Returns 0 or an error (see above). */
int hb_client_read_body(hb_exchange *x, hb_sink *s, char *err);
/* Streaming: the body one piece at a time, instead of read_body. Points
 * *data and *len at the next run of body bytes (chunked framing removed; at most
 * max bytes, max > 0) inside the connection's read buffer, valid until the
 * next call; reads (waiting until x->req->deadline_ns, which the caller may
 * move forward between calls: a per-read timeout) only when nothing is
 * buffered; with may_block 0 it returns HB_AGAIN instead of reading (so a
 * caller can consume buffered bytes before giving up a lock). Returns 1 (a
 * piece), 0 (the body ended: body_done is set and the connection may be
 * kept) or an error as read_body's. */
int hb_client_body_next(hb_exchange *x, const char **data, size_t *len, size_t max, int may_block,
                        char *err);
/* Give the connection back: kept alive only after a complete, clean exchange. */
void hb_client_end(hb_pool *p, hb_exchange *x);

#endif
