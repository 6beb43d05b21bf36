/* hb_server_int.h - hb__ internals of the embedded server, shared by
 * server/'s files and nothing else: no public header includes this one, and
 * the bindings never call these.
 */
#ifndef HB_SERVER_INT_H
#define HB_SERVER_INT_H

#include <stddef.h>
#include <stdint.h>

/* The embedded server (hb_server.h) is these files sharing these:
 *   hb_server.c       workers on hb_loop, accept, timeout sweep, public API
 *   hb_server_conn.c  connection lifecycle and I/O: the state machine driver
 *   hb_server_req.c   request handling: head, body, the response per route
 *   hb_server_out.c   output queue, response heads, streamed bodies
 *   hb_server_stats.c the workers' counters summed, the /__stats document
 *   hb_server_h2.c    HTTP/2 behind the connection protocol table (hb__conn_proto):
 *                     ALPN or the preface switch a connection to it; an h2
 *                     connection's frames, streams and buffers are its
 *                     hb_h2_server session's (only the read buffer is shared)
 *   hb_server_h3.c    HTTP/3: each worker's UDP socket (SO_REUSEPORT, the TCP
 *                     port's number) driving its hb_h3_server endpoint
 *   hb_server_stream.c  /sse and /stream: one event or chunk queued at a time
 *   hb_server_ws.c    WebSocket: the upgrade of /ws, then echo, push, ping, close
 *                     (frames by ws/hb_ws.h, read in place in the read buffer)
 *   hb_server_wsz.c   permessage-deflate on /ws (zlib): negotiation, compressed echo
 * Per connection: one read buffer (max_head bytes), one small output buffer
 * for response heads, and an iovec queue whose entries point into that
 * buffer, into the read buffer (echo) or into hb_content_buf(). Input is only
 * read (and the read buffer only compacted) when the output queue is empty,
 * so iovecs into the read buffer stay valid; that is also the back-pressure
 * that keeps pipelined responses in order. */
#include <pthread.h>
#include <sys/uio.h>
#include <time.h>

#include "h2/hb_h2_server.h"
#include "h3server/hb_h3_server.h"
#include "net/hb_loop.h"
#include "http/hb_parse.h"
#include "http/hb_route.h"
#include "server/hb_server.h"
#include "net/hb_sock.h"
#include "net/hb_tls.h"
#include "http/hb_sse.h"
#include "ws/hb_ws.h"

#define HB__SRV_NIOV 64
#define HB__SRV_OBUF 12288
#define HB__SRV_HEAD_CACHE 256 /* longest response head hb__out_head caches */
#define HB__SRV_MS 1000000ull
/* Idle connection structs a worker keeps for reuse; more are unmapped, so
 * memory returns to the system after a burst of connections. */
#define HB__SRV_FREE_MAX 64
/* Bytes a connection may read per loop turn before the other ready
 * connections get theirs (an h2 frame costs HB__SRV_FRAME_COST more): one
 * flooding or uploading peer cannot freeze the worker. */
#ifndef HB_SERVER_UNFAIR
#define HB__SRV_READ_BUDGET (64 * 1024)
#else /* a build to prove the fairness tests catch a server without budgets: never build it */
#define HB__SRV_READ_BUDGET ((int64_t)1 << 60)
#endif
#define HB__SRV_FRAME_COST 128
/* Upper bound of the /__stats JSON: every status code with a 20-digit
 * count, every route and worker, and the fixed fields. */
#define HB__SRV_STATS_MAX (600 * 32 + HB_ROUTE_COUNT * 64 + HB_SERVER_MAX_THREADS * 24 + 8192)

enum { HB__PROTO_NONE, HB__PROTO_H1, HB__PROTO_H2, HB__PROTO_WS };
enum hb__phase { HB__PH_HANDSHAKE, HB__PH_HEAD, HB__PH_BODY, HB__PH_WAIT, HB__PH_LINGER };
enum hb__body_mode { HB__BM_DISCARD, HB__BM_SINK, HB__BM_ECHO };
/* What the connection does once its queued output is written. */
enum hb__after { HB__AF_NONE, HB__AF_CLOSE, HB__AF_RESET, HB__AF_STALL };
/* What a PH_WAIT connection's timer continues. */
enum hb__wait { HB__W_NONE, HB__W_DELAY, HB__W_DRIP, HB__W_STALL, HB__W_EVENTS };
/* What a streaming route's events are (hb_server_stream.c). */
enum hb__ev_kind { HB__EV_SSE = 1, HB__EV_STREAM };
/* A WebSocket connection's state (hb_server_ws.c). */
struct hb__wsz;
typedef struct hb__ws {
    hb_ws_rx rx;
    struct hb__wsz *z; /* permessage-deflate, when negotiated (hb_server_wsz.c) */
    uint8_t echo_open; /* an echoed message's first frame is out, its last not yet */
    uint8_t close_sent, close_recv, done, push_text;
    uint64_t push_left, push_size, push_interval, push_due, pushed;
    uint64_t close_deadline, last_in;
} hb__ws;

/* Counters have one writer (their worker); readers use relaxed loads. */
typedef struct hb__wstats {
    uint64_t by_route[HB_ROUTE_COUNT];
    uint64_t by_status[600];
    uint64_t bytes_in, bytes_out, accepted, closed, hs, hs_resumed, hs_err, idle_timeouts, body_in,
        client_gone;
    uint64_t conns_h1, conns_h2; /* connections once their protocol is decided */
    hb_h2_server_stats h2;       /* h2 streams (by_route/by_status add to the totals) */
    hb_h3_server_stats h3;       /* h3 streams and QUIC connections (likewise) */
    hb_server_stream_stats sm;   /* /sse and /stream */
    hb_server_ws_stats ws;       /* /ws */
} hb__wstats;

#define HB__ADD(field, n) __atomic_store_n(&(field), (field) + (n), __ATOMIC_RELAXED)
#define HB__LOAD(field) __atomic_load_n(&(field), __ATOMIC_RELAXED)

struct hb__worker;
struct hb__conn;

/* A protocol a TCP connection may switch to besides HTTP/1.1 (HTTP/2:
 * hb_server_h2.c), so the generic connection code names none. */
typedef struct hb__conn_proto {
    int (*enabled)(const struct hb_server *srv); /* the server's options ask for it */
    /* Every worker at its start (enabled or not) / with no connections left,
     * or stopping: give pooled memory back. */
    void (*worker_init)(struct hb__worker *w);
    void (*worker_idle)(struct hb__worker *w);
    /* After the TLS handshake: 1 when ALPN chose it (the connection switched
     * and has run, or is freed), else 0 (HTTP/1.1 counted when ALPN said so). */
    int (*alpn)(struct hb__conn *c);
    /* An undecided connection with buffered input: 1 it switched (and has
     * run, or is freed), 0 a partial match (read more), -1 not this one. */
    int (*sniff)(struct hb__conn *c);
    /* A switched connection: drive it as far as it goes without blocking; its
     * timer fired; the write / idle timeouts at w->now; free its session (the
     * connection is being freed; peer_left: the peer closed or reset). */
    void (*run)(struct hb__conn *c);
    void (*timer)(struct hb__conn *c);
    void (*sweep)(struct hb__conn *c);
    void (*end)(struct hb__conn *c, int peer_left);
} hb__conn_proto;

/* The protocols a TCP connection may switch to, NULL-terminated (hb_server.c). */
extern const hb__conn_proto *const hb__conn_protos[];

typedef struct hb__conn {
    hb_sock sock;
    struct hb__worker *w;
    struct hb__conn *prev, *next; /* worker's active list / free list (next only) */
    hb_io io;                     /* edge-triggered, with EPOLLRDHUP */
    hb_timer timer;               /* delay / drip / stall */
    uint64_t req_deadline;        /* 0 = no request in progress */
    uint64_t idle_since;
    uint64_t wr_deadline;
    uint64_t linger_until;
    uint8_t phase, rd_ready, wr_ready, peer_eof;
    uint8_t rdhup; /* epoll said RDHUP/HUP/ERR: the FIN may already be queued behind data */
    uint8_t close_after, ka10, head_only, uncounted;
    uint8_t status_owed; /* route counted, status not yet: hb__conn_free counts it as 0 */
    uint8_t peer_left;   /* the peer closed or reset: an owed status is also client_gone */
    uint8_t body_mode, body_chunked, echo_chunked, after, wait_kind, responded, send_continue;
    int minor;
    hb_route_req rq;    /* the current request's route, status and parameters */
    uint64_t body_left; /* Content-Length bytes still to consume */
    hb_chunked chunked;
    uint64_t body_bytes;
    uint32_t crc;
    /* streamed body: st_left content bytes from offset st_off; chunked when
     * st_chunk > 0 (st_chunk_left bytes left in the current chunk) */
    uint64_t st_off, st_left;
    uint32_t st_chunk, st_chunk_left;
    uint8_t st_active, st_final; /* st_final: emit the last chunk at the end */
    size_t rpos, rlen;
    size_t olen;
    int iov_first, niov;
    char *stats_body;                /* a queued /__stats document (malloc), freed once written */
    const struct hb__conn_proto *mp; /* the protocol it switched to (then the fields above rest) */
    void *sess;                      /* that protocol's session */
    uint8_t proto;                   /* HB__PROTO_*: 0 until the first bytes or ALPN decide */
    uint8_t queued;                  /* on the worker's ready queue (its read budget ran out) */
    int64_t budget;                  /* read budget left in this turn (HB__SRV_READ_BUDGET) */
    struct hb__conn *rq_prev, *rq_next; /* the worker's ready queue */
    /* a streaming route's events (hb_server_stream.c): ev_seq of ev_count queued so
     * far, the next due at ev_due; ev_unsent: the bytes of the one queued, not yet
     * counted as written */
    uint8_t ev_active, ev_kind;
    uint64_t ev_seq, ev_count, ev_interval, ev_due, ev_unsent;
    char ev_scratch[HB_SSE_SCRATCH];
    hb__ws ws; /* proto HB__PROTO_WS */
    /* everything from here on needs no clearing when a conn is recycled */
    char *obuf; /* HB__SRV_OBUF bytes after rbuf: an h2 or idle connection never touches them */
    struct iovec iov[HB__SRV_NIOV];
    char rbuf[]; /* server's rbuf_size; its first bytes share the struct's last page */
} hb__conn;

typedef struct hb__worker {
    struct hb_server *srv;
    int idx;
    pthread_t thread;
    int started, exited;
    clockid_t cpu_clock;
    int has_cpu_clock;
    uint64_t final_cpu_ns;
    int lfd;
    int loop_ok;
    hb_loop loop;
    hb_io listen_io; /* level-triggered; unregistered while accepting is paused */
    hb_io stop_io;   /* the server's stop eventfd, level-triggered, never drained */
    hb_timer sweep;  /* timeouts; armed while connections exist or listening is paused */
    int listen_paused, stop;
    hb__conn *conns;
    hb__conn *free;
    hb__conn *ready, *ready_tail; /* connections with input left over from their turn */
    int nconns;                   /* open connections, at most the server's max_connections */
    uint64_t refused;             /* connections closed at accept beyond max_connections */
    int nfree;                    /* structs on the free list, at most HB__SRV_FREE_MAX */
    uint64_t now;                 /* hb_now_ns() at the latest wake-up or timer */
    uint64_t req_timeout_ns;
    time_t date_sec;
    char date[40];
    /* the last head hb__out_head built, reused while its inputs (and the
     * Date) are the same: keep-alive benchmarks ask for one response over
     * and over */
    struct {
        const char *extra;
        int64_t cl;
        int status;
        uint16_t len; /* 0 = empty */
        uint8_t chunked, close_after, ka10;
        char buf[HB__SRV_HEAD_CACHE];
    } hc;
    hb__wstats st;
    hb_h2_server_config h2cfg; /* every h2 session of this worker */
    hb_h2_arena_pool h2arenas; /* their output arenas */
    /* HTTP/3 (http3 on): the worker's UDP socket, endpoint and its timer */
    int ufd;
    hb_io udp_io;      /* level-triggered; EPOLLOUT only while a datagram waits */
    hb_timer h3_timer; /* the endpoint's earliest deadline */
    hb_h3_server *h3;
    struct sockaddr_storage ulocal; /* the socket's bound address: every path's local side */
    socklen_t ulocal_len;
    struct hb__h3_io *h3io; /* receive batch and the datagram a full socket left waiting */
} hb__worker;

struct hb_server {
    hb_server_opts o;
    char host[64];
    int port;
    int stopfd;
    int stopping;
    int running;
    hb_tls_ctx *tls;
    size_t rbuf_size;
    int nworkers;
    hb__worker *w;
    const char *content;    /* hb_content_buf() */
    char *h3_cert, *h3_key; /* http3: the TLS certificate chain and key as PEM, for GnuTLS */
    size_t h3_cert_len, h3_key_len;
    char alt_svc[48]; /* http3: the Alt-Svc header line every TLS response carries */
    size_t alt_svc_len;
    char alt_svc_value[24];    /* its value alone (h3=":port"), for framings of their own */
    uint32_t max_streams;      /* concurrent streams per connection, every multiplexed protocol */
    const hb__conn_proto *mux; /* the enabled protocol of hb__conn_protos, or NULL */
    uint8_t h3_ticket_key[HB_H3_TICKET_KEY_LEN]; /* session tickets, shared by the workers */
    hb_h3_replay *h3_replay; /* 0-RTT anti-replay, shared by the workers like the ticket key */
};

/* hb_server_out.c: the output queue and responses. */
static inline int hb__has_output(const hb__conn *c)
{
    return c->niov > 0;
}
/* Room for one more response head or stats body (4 KiB) and a few iovecs. */
static inline int hb__out_room(const hb__conn *c)
{
    return c->iov_first + c->niov + 8 <= HB__SRV_NIOV && c->olen + 4096 <= HB__SRV_OBUF;
}
size_t hb__xtoa(char *p, uint64_t v);
void hb__out_iov(hb__conn *c, const void *p, size_t n);
void hb__out_bytes(hb__conn *c, const void *p, size_t n);
#define HB__OUT_LIT(c, s) hb__out_bytes((c), (s), sizeof(s) - 1)
/* Content bytes [off, off+n) as iovecs into the shared content buffer. */
void hb__out_content(hb__conn *c, uint64_t off, size_t n);
void hb__count_status(hb__conn *c, int status);
/* Queue a response head. `extra` (complete header lines) must be a string
 * constant: the worker's head cache tells extras apart by address. cl < 0:
 * no Content-Length. */
void hb__out_head(hb__conn *c, int status, const char *extra, size_t extra_len, int64_t cl,
                  int chunked);
/* A complete response with a small text body (queued by reference: static
 * or living until written). */
void hb__respond_text(hb__conn *c, int status, const char *body, size_t len);
#define HB__RESPOND_LIT(c, st, s) hb__respond_text((c), (st), (s), sizeof(s) - 1)
/* A body of n content bytes from offset 0, queued or streamed. */
void hb__out_body(hb__conn *c, uint64_t n);
void hb__stream_start(hb__conn *c, uint64_t off, uint64_t n, uint32_t chunk, int final);
/* Queue the next batch of the active stream. */
void hb__stream_refill(hb__conn *c);

#define HB__CT_OCTET "Content-Type: application/octet-stream\r\n"
#define HB__CT_TEXT "Content-Type: text/plain\r\n"
#define HB__CT_JSON "Content-Type: application/json\r\n"

/* hb_server_stream.c: /sse and /stream over HTTP/1.1. */
void hb__sse_respond(hb__conn *c);
void hb__stream_respond(hb__conn *c);
/* The connection's output is written: queue the next event or chunk, or end
 * the stream. 1 when something was queued (or the stream ended), 0 waiting. */
int hb__ev_step(hb__conn *c);

/* hb_server_ws.c: WebSocket. */
/* GET /ws's head: answer the upgrade (101, then c is a WebSocket
 * connection) or refuse it (400 / 426, closing). 0 upgraded, -1 refused. */
int hb__ws_upgrade(hb__conn *c, const hb_request_head *h);
/* The connection protocol an upgraded connection runs on (not in hb__conn_protos:
 * no ALPN or preface chooses it). */
extern const hb__conn_proto hb__srv_ws;
/* hb_server_wsz.c: permessage-deflate (RFC 7692) on /ws. */
/* The client's Sec-WebSocket-Extensions values: 1 with *z set (allocated) and the
 * answer's header line in hdr (with its CRLF, NUL-ended) when an offer is
 * accepted, 0 when none is (or zlib is absent), -1 when out of memory. */
int hb__wsz_negotiate(const hb_request_head *h, struct hb__wsz **z, char *hdr, size_t cap);
void hb__wsz_free(struct hb__wsz *z);
/* A compressed message's next bytes from the reader (first: a new message of
 * opcode op; fin: its last bytes). */
void hb__wsz_input(struct hb__wsz *z, const uint8_t *p, size_t n, int first, int fin, int op);
/* Inflate, check and re-deflate what is pending, queuing echo frames while the
 * output has room and the turn's budget lasts (inflated bytes cost it). 0 when
 * all is done, 1 when it waits for output room or its next turn, 2 when an
 * echoed message was finished (3: a pushed one), else the close code (1007, 1009). */
int hb__wsz_pump(hb__conn *c, struct hb__wsz *z);
int hb__wsz_busy(const struct hb__wsz *z);
/* Queue a pushed message of `size` content bytes, compressed (its frames come
 * from hb__wsz_pump, which then returns 3); only when no message is active. */
void hb__wsz_push(struct hb__wsz *z, const char *content, uint64_t size, int op);
int hb__wsz_active(const struct hb__wsz *z);

/* The stats document's "ws" member (and a ", ") at body + *at, *at moved on. */
void hb__ws_stats_json(const hb_server_ws_stats *w, char *body, size_t cap, size_t *at);

/* hb_server_req.c: request handling. */
/* The request is answered: back to reading heads. */
void hb__request_done(hb__conn *c);
/* Parse and answer buffered input. 1 progress, 0 needs more input, -1 stop. */
int hb__process_input(hb__conn *c);
/* An error response that closes the connection; route < 0: already counted. */
void hb__respond_error_close(hb__conn *c, int route, int status, const char *msg);
/* The timer of a PH_WAIT connection fired: continue its route. */
void hb__req_timer(hb__conn *c);

/* hb_server_stats.c: the /__stats JSON document (malloc'ed, *len bytes); NULL
 * when out of memory. arg is the hb_server. */
char *hb__stats_json(void *arg, size_t *len);

/* hb_server_h2.c: HTTP/2 connections, behind the protocol table. */
extern const hb__conn_proto hb__srv_h2;

/* hb_server_h3.c: HTTP/3. */
/* The server's certificate as PEM and its Alt-Svc line (once, before the workers). */
int hb__h3_server_prepare(hb_server *srv, char *err);
/* The worker's UDP socket bound at addr (the TCP port's number) and its
 * endpoint, registered in its loop. 0 or an error with detail in err. */
int hb__h3_worker_init(hb__worker *w, const struct sockaddr_storage *addr, socklen_t len,
                       char *err);
/* The worker stops: CONNECTION_CLOSE to every connection (sent without
 * waiting), then the endpoint is freed. */
void hb__h3_worker_stop(hb__worker *w);
/* Close the socket and free what hb__h3_worker_init made (idempotent). */
void hb__h3_worker_cleanup(hb__worker *w);

/* hb_server_conn.c: connection lifecycle and I/O. */
/* The connection's protocol is decided (HB__PROTO_*): counted. */
void hb__conn_set_proto(hb__conn *c, int proto);
/* FIN now, then discard input until EOF or the linger time (then free). */
void hb__conn_linger(hb__conn *c);
/* One write of v[0..cnt) (cnt <= IOV_MAX), HTTP/1.1 and h2 alike: the bytes
 * written (counted, the write deadline moved on), HB_AGAIN when the socket
 * would block (wr_ready cleared), or a negative error. */
ssize_t hb__conn_write(hb__conn *c, const struct iovec *v, int cnt);
/* Adopt an accepted socket; 0, or -1 when out of connection structs. */
int hb__conn_accept(hb__worker *w, int fd);
/* abort_it: RST instead of FIN. The struct goes to the free list, or back to
 * the system when the list is full. */
void hb__conn_free(hb__conn *c, int abort_it);
/* Release a struct for good (a full free list, or server stop). */
void hb__conn_release(hb_server *srv, hb__conn *c);
/* Drive the connection as far as it goes without blocking (or until its
 * read budget runs out: then it waits on the ready queue for its next turn). */
void hb__conn_run(hb__conn *c);
/* The read budget ran out with input possibly left: queue c for a turn
 * after the ready connections the loop reports next. */
void hb__conn_defer(hb__conn *c);
/* Give every queued connection one turn (a fresh budget). */
void hb__conn_run_ready(hb__worker *w);
/* Arm the connection's timer; -1 when the timer heap cannot grow. */
int hb__conn_timer(hb__conn *c, uint64_t at);
/* Apply the request / write / idle / linger timeouts at w->now. */
void hb__conn_sweep(hb__conn *c);

#endif
