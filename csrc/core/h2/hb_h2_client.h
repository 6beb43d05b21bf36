/* hb_h2_client.h - an HTTP/2 client session over one hb_sock.
 *
 * Framing, flow control and the checks RFC 9113 asks of a client are done
 * here, HPACK by hb_h2_hpack; I/O goes through hb_sock (plain = h2c with prior
 * knowledge, TLS = after ALPN "h2"). It is shared by the load generator (many
 * streams, non-blocking, epoll) and the native blocking client (poll on
 * sock->fd per sock->want, then read/write). The client side needs no
 * general-purpose HTTP/2 library: it only opens streams, so it is written
 * for what a load generator spends per request (one recv and one send per
 * batch, header blocks decoded in place, no allocation per stream).
 *
 * Usage (one thread per session; sessions are independent):
 *
 *   hb_h2_client c;                        // caller-owned, may be embedded
 *   hb_h2_client_init(&c, &sock, NULL, &cbs, ud, err);   // sock connected (+ TLS done)
 *   id = hb_h2_client_submit(&c, fields, n, body, stream_ud, err);
 *   loop:
 *     while (hb_h2_client_wants_write(&c)) rc = hb_h2_client_write(&c);  // HB_AGAIN: wait for
 * sock->want rc = hb_h2_client_read(&c);          // HB_AGAIN: drained, wait for readability
 *   hb_h2_client_free(&c);                 // then close the socket (hb_sock is not owned)
 *
 * Return codes follow hb_common.h. Connection-fatal results of read/write:
 *   HB_E_CLOSED  the peer closed the TCP connection (EOF) or the session is
 *                over (GOAWAY handled and no stream left: hb_h2_client_done)
 *   HB_E_H2      an HTTP/2 connection error: ours (the peer broke the
 *                protocol; a GOAWAY was queued) or the peer's GOAWAY with an
 *                error code; detail in c->err
 *   HB_E_NO_H2   the peer does not speak HTTP/2 (it answered the h2c
 *                preface with HTTP/1.x; or, from init, ALPN did not pick h2)
 *   -errno, HB_E_TLS  from the socket
 * After one of these the session is unusable: the caller fails the streams
 * it still has open (their on_close is NOT called), frees the session and
 * closes the socket.
 *
 * Callbacks run only inside hb_h2_client_read and hb_h2_client_write (never from
 * submit or free). They may call hb_h2_client_submit, never read/write/free.
 * For each stream submitted, in order:
 *   on_header*   header fields of the final response (names lowercase,
 *                pseudo-headers and 1xx responses and trailers excluded);
 *                optional (NULL: not called)
 *   on_response  once, the final status (>= 200) after its header block
 *   on_data*     response body bytes as they arrive (pointer valid for the
 *                call only; data_end says whether they end their DATA frame)
 *   on_close     exactly once per submitted stream while the session lives:
 *                how the stream ended (HB_H2_END_*) and the HTTP/2 error code
 *                (RFC 9113 section 7; 0 = NO_ERROR). END_OK without an earlier
 *                on_response cannot happen (such a stream is reset:
 *                HB_H2_END_PROTOCOL).
 *   on_goaway    once per GOAWAY received: last stream id the peer will
 *                process and its error code; streams above it are then closed
 *                with HB_H2_END_GOAWAY; no new stream may be submitted.
 *
 * A response that breaks HTTP/2 or HTTP semantics (RFC 9113 section 8: a
 * missing or bad :status, pseudo-headers out of place, connection-specific
 * fields, bad field names or values, content-length not matching the DATA)
 * gets RST_STREAM(PROTOCOL_ERROR) and ends HB_H2_END_PROTOCOL; a connection
 * error of the peer's (bad frames, flow control, HPACK) sends GOAWAY and
 * ends the session with HB_E_H2.
 *
 * Allocation: at init, the stream table (settings.max_streams slots, 256
 * when 0), the read and write buffers and the HPACK table; the write buffer,
 * the header-block buffer and the Huffman scratch grow to the largest block
 * seen and are then reused. Nothing is allocated per stream.
 */
#ifndef HB_H2_CLIENT_H
#define HB_H2_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "base/hb_common.h"
#include "http/hb_parse.h"
#include "http/hb_request.h"
#include "net/hb_sock.h"

#include "h2/hb_h2_hpack.h"

/* How a stream ended (on_close). */
enum hb_h2_end {
    HB_H2_END_OK = 0,   /* complete response (END_STREAM both ways) */
    HB_H2_END_RESET,    /* the peer sent RST_STREAM(code) */
    HB_H2_END_GOAWAY,   /* above the last stream id of the peer's GOAWAY: not processed */
    HB_H2_END_PROTOCOL, /* we reset it: the response broke HTTP/2 or HTTP semantics */
};
/* "ok", "rst_stream", "goaway", "protocol". */
const char *hb_h2_end_name(int end);
/* RFC 9113 error code name: "NO_ERROR", "PROTOCOL_ERROR", ..., "unknown". */
const char *hb_h2_code_name(uint32_t code);

typedef struct hb_h2_client_callbacks {
    void (*on_header)(void *ud, void *stream_ud, const char *name, size_t name_len,
                      const char *value, size_t value_len);
    void (*on_response)(void *ud, void *stream_ud, int status);
    void (*on_data)(void *ud, void *stream_ud, const uint8_t *data, size_t len);
    void (*on_close)(void *ud, void *stream_ud, int end, uint32_t code);
    void (*on_goaway)(void *ud, int32_t last_stream_id, uint32_t code);
} hb_h2_client_callbacks;

/* Our SETTINGS (0 = default). Server push is always disabled. */
typedef struct hb_h2_client_settings {
    uint32_t window_bits;      /* stream receive window 2^bits - 1, 1..30; default 30 (h2load's) */
    uint32_t conn_window_bits; /* connection receive window, 16..30; default 30 */
    uint32_t max_frame_size;   /* SETTINGS_MAX_FRAME_SIZE we accept; default 16384 */
    uint32_t max_streams;      /* our cap on concurrent streams; default: the peer's */
    int stable_fields;         /* 1: submit's field strings outlive the session (not copied) */
} hb_h2_client_settings;

/* A request body sent as DATA frames: caller-owned, must stay valid (and
 * unchanged) until the stream's on_close; `sent` is the library's cursor. */
typedef hb_body_src hb_h2_body;

#define HB_H2_CLIENT_RBUF (32u * 1024u)
/* Bytes hb_h2_client_read takes per call before it returns to the caller's
 * loop (whose timers and end of run then get their turn). */
#define HB_H2_CLIENT_READ_BUDGET (8u * HB_H2_CLIENT_RBUF)
#define HB_H2_CLIENT_WBUF (32u * 1024u)

struct hb_h2stream; /* hb_h2_client.c */

typedef struct hb_h2_client {
    hb_sock *sock;                    /* not owned */
    const hb_h2_client_callbacks *cb; /* may be replaced between calls (e.g. to drop on_header) */
    void *ud;
    /* 1: hb_h2_client_read stops once the input known to be there is read - after
     * a read shorter than the buffer on a plain socket (TCP hands over all it
     * holds, so an edge-triggered socket is drained), when OpenSSL holds no
     * more on a TLS one (level-triggered epoll reports the rest) - instead of
     * reading until HB_AGAIN, which costs a syscall. Set before each read. */
    int short_read_drains;
    /* 1: the last hb_h2_client_read stopped at its budget, not at the end of
     * the input: read again soon without waiting for readiness (an
     * edge-triggered socket or OpenSSL may hold input no wait announces). */
    int more_input;
    int live;             /* initialised and not freed */
    uint32_t max_streams; /* our cap (settings.max_streams or the table size) */
    uint32_t nopen;       /* submitted streams not yet closed */
    int preface_checked;  /* first bytes from the peer looked at */
    int goaway_recv;      /* a GOAWAY arrived: no new streams */
    int32_t goaway_last;  /* its last stream id */
    uint32_t goaway_code;
    int goaway_sent; /* ours is queued: no new streams */
    int fatal;       /* a connection error was seen (code in fatal_rc) */
    int fatal_rc;
    uint64_t bytes_in, bytes_out; /* HTTP/2 bytes (after TLS) */

    /* peer's settings and our send windows */
    int peer_settings; /* its first SETTINGS arrived */
    uint32_t peer_max_streams;
    uint32_t peer_init_window;
    uint32_t peer_max_frame;
    int64_t conn_send_window;
    /* our receive side */
    uint32_t stream_window; /* what we advertised per stream */
    uint32_t conn_window;   /* and for the connection */
    uint64_t conn_unacked;  /* DATA bytes not yet given back by WINDOW_UPDATE */
    uint32_t max_frame;     /* largest frame we accept */

    /* streams: slots (stable addresses) and an id index (open addressing) */
    struct hb_h2stream *slots;
    uint32_t *free_slots;
    uint32_t nfree;
    int32_t *index; /* slot + 1 per cell, 0 empty */
    uint32_t index_mask;
    uint32_t noverflow; /* streams not in their index cell */
    int32_t next_id;
    uint32_t nbody; /* streams whose request body is not all sent */

    /* frame parser (input may split anywhere) */
    uint8_t fh[9]; /* frame header being read */
    uint8_t fh_have;
    uint8_t ftype, fflags;
    int32_t fsid;
    uint32_t flen;    /* payload length */
    uint32_t fdone;   /* payload bytes consumed */
    uint32_t fpad;    /* padding at the end of the payload */
    uint32_t fskip;   /* leading bytes (pad length, priority) */
    uint8_t data_end; /* during on_data: its bytes end their DATA frame's content */
    int fstate;       /* private */
    uint8_t ctl[64];  /* control frame payload (first bytes) */
    uint8_t setting[6];
    uint8_t setting_have;
    int32_t hb_sid;    /* stream of the header block being gathered (0: none) */
    int hb_end_stream; /* its HEADERS had END_STREAM */
    uint32_t hb_conts; /* CONTINUATION frames in it so far */
    uint8_t *hblock;   /* gathered header block */
    size_t hblock_len, hblock_cap;
    uint8_t *scratch; /* Huffman output */
    size_t scratch_cap;
    hb_h2_hpack_dec hpack;

    /* output */
    uint8_t *rbuf;
    uint8_t *wbuf;
    size_t wlen, wpos, wcap;     /* wbuf[wpos..wlen) not yet written */
    const hb_header *enc_fields; /* stable fields whose block is cached */
    size_t enc_nfields;
    int enc_head; /* the cached block is a HEAD request */
    uint8_t *enc_block;
    size_t enc_len, enc_cap;
    int stable_fields;
    char err[HB_ERR_LEN]; /* detail of the last fatal result or stream reset */
} hb_h2_client;

/* Start a session on a connected socket (a TLS socket must have finished its
 * handshake: ALPN must have selected "h2", else HB_E_NO_H2 with the
 * protocol named in err). Queues the connection preface and our SETTINGS
 * (call hb_h2_client_write). settings may be NULL (defaults). cb and ud must
 * outlive the session. Returns 0, HB_E_NO_H2, HB_E_INVALID or HB_E_NOMEM;
 * on error nothing needs freeing (hb_h2_client_free is still safe). */
int hb_h2_client_init(hb_h2_client *c, hb_sock *sock, const hb_h2_client_settings *settings,
                      const hb_h2_client_callbacks *cb, void *ud, char *err);

/* Submit a request: fields from hb_build_h2_fields (hb_request.h), pseudo
 * headers first; body NULL for none (END_STREAM on HEADERS). Returns the
 * stream id (> 0), HB_AGAIN when the concurrency limit (the peer's
 * SETTINGS_MAX_CONCURRENT_STREAMS or settings.max_streams) is reached -
 * retry after an on_close - HB_E_CLOSED after a GOAWAY or a fatal error
 * (open a new connection), HB_E_INVALID (detail in err) or HB_E_NOMEM. The
 * frames go out on the next hb_h2_client_write. */
int hb_h2_client_submit(hb_h2_client *c, const hb_header *fields, size_t nfields, hb_h2_body *body,
                        void *stream_ud, char *err);

/* Read what the socket has and process it (callbacks run here), until
 * the socket would block or HB_H2_CLIENT_READ_BUDGET bytes were read (then
 * more_input is set): returns HB_AGAIN (the normal result; wait per
 * sock->want, which can be WRITE under TLS) or a fatal code (see above).
 * A server that makes us work without progress hits a limit: over 128
 * CONTINUATION frames in one header block, or a SETTINGS flood whose ACKs it
 * does not read, is a connection error (GOAWAY(ENHANCE_YOUR_CALM), HB_E_H2);
 * over 16 informational responses on a stream resets it (END_PROTOCOL).
 * Replies (SETTINGS ACK, WINDOW_UPDATE, PING ACK, RST_STREAM) are queued:
 * check hb_h2_client_wants_write afterwards. On a protocol error of the peer's
 * the GOAWAY is written at once (best effort) and HB_E_H2 returned. */
int hb_h2_client_read(hb_h2_client *c);

/* Send queued frames until none are left (0) or the socket would block
 * (HB_AGAIN, sock->want set), or a fatal code. */
int hb_h2_client_write(hb_h2_client *c);

/* 1 when frames are queued (call hb_h2_client_write). */
int hb_h2_client_wants_write(hb_h2_client *c);
/* Submitted streams not yet closed. */
static inline uint32_t hb_h2_client_open_streams(const hb_h2_client *c)
{
    return c->nopen;
}
/* Streams that may still be submitted now (0 after a GOAWAY or error).
 * Until the peer's SETTINGS arrive this allows one stream in all, so a burst
 * never exceeds a server limit it has not heard yet. */
uint32_t hb_h2_client_room(hb_h2_client *c);
/* 1 when the session has nothing more to do: GOAWAY received (or a fatal
 * error) and no stream left open. */
int hb_h2_client_done(hb_h2_client *c);
/* The peer's SETTINGS_MAX_CONCURRENT_STREAMS (1 before its SETTINGS arrive). */
uint32_t hb_h2_client_peer_max_streams(hb_h2_client *c);

/* Queue a GOAWAY(NO_ERROR) so the peer can close cleanly; flush it with
 * hb_h2_client_write if wanted. Safe at any time after init. */
void hb_h2_client_goaway(hb_h2_client *c);

/* Free the session's tables and buffers (no callbacks run). Safe on a zeroed
 * or failed-init struct and twice. The socket is left to the caller. */
void hb_h2_client_free(hb_h2_client *c);

#endif
