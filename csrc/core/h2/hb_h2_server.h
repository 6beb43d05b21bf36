/* hb_h2_server.h - one HTTP/2 server connection: an nghttp2 server session
 * (framing, HPACK, flow control, the RFC 9113 error handling) answering the
 * embedded server's routes (hb_route.h) with deterministic content
 * (hb_content.h).
 *
 * The session does no I/O and has no clock of its own, so the embedded
 * server drives it from its event loop and the fuzz harness from memory:
 *   - hb_h2_server_recv() takes received bytes (the client preface included);
 *   - hb_h2_server_fill() serializes pending frames into an output queue of
 *     iovecs (hb_h2_server_out / hb_h2_server_sent); DATA payloads of generated
 *     bodies over 1 KiB are iovecs into hb_content_buf(), never copied;
 *   - hb_h2_server_deadline() / hb_h2_server_timer() run /delay, /drip, /fault/stall
 *     and paced /sse and /stream at the owner's clock (cfg->now);
 *     hb_h2_server_sweep() cuts event streams whose client stopped reading.
 * Routes keep their HTTP/1.1 semantics and bytes; faults map onto their h2
 * meaning (reset: RST_STREAM; close-after-headers / close-mid-body: GOAWAY
 * and the connection closes; stall: a stream that sends no DATA for a
 * while). Streams are recycled per session: after warm-up nothing is
 * allocated per request except inside nghttp2.
 *
 * Not thread-safe: one session belongs to one thread, which is also the one
 * writer of cfg->stats.
 */
#ifndef HB_H2_SERVER_H
#define HB_H2_SERVER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "http/hb_route.h"
#include "http/hb_sse.h"

/* SETTINGS ranges accepted by hb_h2_server_new (and the server's options). */
#define HB_H2_MAX_STREAMS_MAX 100000u
#define HB_H2_WINDOW_MAX 2147483647u
#define HB_H2_FRAME_MIN 16384u
#define HB_H2_FRAME_MAX 16777215u

/* Counters written by the session (relaxed atomic stores; readers load
 * relaxed). by_route / by_status count streams exactly like the HTTP/1.1
 * side counts requests. */
typedef struct hb_h2_server_stats {
    uint64_t by_route[HB_ROUTE_COUNT];
    uint64_t by_status[600]; /* [0]: reset, or the stream ended before its response */
    uint64_t streams;        /* request streams opened by the peer */
    uint64_t rst_sent, rst_recv, goaway_sent;
    uint64_t protocol_errors; /* invalid frames / headers and connection errors from the peer */
    uint64_t refused;         /* streams refused (RST_STREAM REFUSED_STREAM) */
    uint64_t body_in;         /* request DATA payload bytes */
    uint64_t client_gone;     /* streams whose peer reset them or left before the response */
    uint64_t floods;          /* sessions ended with GOAWAY(ENHANCE_YOUR_CALM): floods of frames */
} hb_h2_server_stats;

/* Frames that ask nothing of the server (unknown types, PING and SETTINGS
 * without ACK, PRIORITY, empty CONTINUATION, empty DATA not ending a
 * stream) are allowed in a burst of HB_H2_IDLE_FRAMES_BURST, refilled at
 * HB_H2_IDLE_FRAMES_PER_S; beyond that the session ends with
 * GOAWAY(ENHANCE_YOUR_CALM). */
#define HB_H2_IDLE_FRAMES_BURST 10000
#define HB_H2_IDLE_FRAMES_PER_S 1000

/* Output arenas (64 KiB each) a session holds only while it has output
 * queued or streams open. With a pool, they come from and return to it (up
 * to HB_H2_ARENA_POOL_MAX kept; drain it to give them back); zero-initialize. */
#define HB_H2_ARENA_POOL_MAX 64
typedef struct hb_h2_arena_pool {
    void *free;
    int nfree;
} hb_h2_arena_pool;
void hb_h2_arena_pool_drain(hb_h2_arena_pool *p);

typedef struct hb_h2_server_config {
    uint32_t max_concurrent_streams; /* SETTINGS_MAX_CONCURRENT_STREAMS, 1 .. 100000 */
    uint32_t initial_window_size;    /* SETTINGS_INITIAL_WINDOW_SIZE, 0 .. 2^31-1 */
    uint32_t max_frame_size;         /* SETTINGS_MAX_FRAME_SIZE, 16384 .. 2^24-1 */
    uint32_t max_header_list;        /* SETTINGS_MAX_HEADER_LIST_SIZE; beyond it: 431 */
    hb_h2_server_stats *stats;       /* required */
    const uint64_t *now;             /* the owner's clock (ns), required */
    const char *date;                /* 29-char HTTP date kept current by the owner; NULL: none */
    /* The /__stats document (malloc'ed; the session frees it once sent), or
     * NULL (the page then answers 503). NULL function: always 503. */
    char *(*stats_json)(void *arg, size_t *len);
    void *stats_arg;
    hb_h2_arena_pool *arenas; /* NULL: each session mallocs its own arena when it first sends */
    const char *alt_svc;      /* an alt-svc value every response carries (HTTP/3 on); NULL: none */
    hb_stream_stats *sm;      /* /sse and /stream counters (hb_sse.h); NULL: not counted */
} hb_h2_server_config;

typedef struct hb_h2_server hb_h2_server;

/* What a build without nghttp2 says when the HTTP/2 server is asked for. */
#define HB_H2_SERVER_MISSING                                                                       \
    "this build has no HTTP/2 server: install libnghttp2-dev (or the distribution's nghttp2 "      \
    "headers) and reinstall"

/* 1 when this build has the HTTP/2 server (nghttp2), 0 when it was compiled
 * out (HB_NO_NGHTTP2): then hb_h2_server_new fails with HB_E_UNSUPPORTED. */
int hb_h2_server_available(void);

/* Fills cfg's SETTINGS with the defaults (100 streams, 65535 window, 16384
 * frames, 16384 header list); other fields are zeroed. */
void hb_h2_server_config_init(hb_h2_server_config *cfg);

/* A session (SETTINGS queued). cfg is copied; its pointers must outlive the
 * session. 0, HB_E_INVALID (a setting out of range) or HB_E_NOMEM. */
int hb_h2_server_new(hb_h2_server **out, const hb_h2_server_config *cfg, char *err);
/* Ends every open stream (a counted stream without a response becomes
 * status 0; with peer_left also client_gone) and frees. NULL is fine. */
void hb_h2_server_free(hb_h2_server *s, int peer_left);

/* Process received bytes (all of them). 0, or -1 on a connection error:
 * a GOAWAY is queued when one can be sent; flush it, then close. */
int hb_h2_server_recv(hb_h2_server *s, const uint8_t *p, size_t n);
/* Frames received so far (complete headers; the owner's read budget counts them). */
uint64_t hb_h2_server_frames(const hb_h2_server *s);
/* Serialize pending frames into the output queue, up to a batch. Returns
 * the queued byte count (0: nothing to send now) or -1 on a fatal error. */
long hb_h2_server_fill(hb_h2_server *s);
/* The queued output; valid until the next hb_h2_server_* call. */
const struct iovec *hb_h2_server_out(hb_h2_server *s, int *niov);
/* n bytes of the queue were written. */
void hb_h2_server_sent(hb_h2_server *s, size_t n);
/* 1 when nothing is queued. */
int hb_h2_server_idle_out(const hb_h2_server *s);
/* 1 when the session neither reads nor writes any more (GOAWAY done, or
 * both sides finished): close once the queue is written. */
int hb_h2_server_done(const hb_h2_server *s);
/* 1 while streams are open or output is pending (the connection is busy,
 * not idle). */
int hb_h2_server_busy(const hb_h2_server *s);
/* Earliest timer of a waiting stream (absolute ns), 0 when none. */
uint64_t hb_h2_server_deadline(hb_h2_server *s);
/* Run the timers due at now (cfg->now must say the same). */
void hb_h2_server_timer(hb_h2_server *s);
/* Reset (RST_STREAM CANCEL) every /sse or /stream stream that has sent
 * nothing for timeout_ns while not waiting for its next event's time: its
 * client stopped reading (no flow-control window, or a full socket). Counted
 * in cfg->sm's write_timeouts; returns how many (flush the output then). */
int hb_h2_server_sweep(hb_h2_server *s, uint64_t timeout_ns);

#endif
