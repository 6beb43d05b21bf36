/* hb_engine_int.h - the load generator's internals, shared by its files.
 *
 *   hb_engine.c     threads, scheduling (closed loop, constant rate, n / duration),
 *                   connection lifecycle (connect, TLS, back-off, timeouts) and
 *                   accounting (results, histograms, progress); protocol-free
 *   hb_engine_h1.c  HTTP/1.1: pipelined writes from the pre-serialized request,
 *                   responses parsed in place in a read buffer
 *   hb_engine_mux.c the stream slots of the multiplexed protocols (h2, h3)
 *                   and their request fields: one table for both
 *   hb_engine_h2.c  HTTP/2: stream slots on an hb_h2_client session
 *   hb_engine_h3.c  HTTP/3: stream slots on an hb_h3_client connection (QUIC)
 *   hb_engine_ws.c  WebSocket: an upgraded connection per econn, a message echo per request
 *   hb_engine_events.c  stream mode (every HTTP version): events timed as they arrive
 *   hb_engine_result.c  a thread's results and their merge
 *
 * The shared code reaches a protocol only through the engine's hb__eng_proto
 * table. A protocol's connection embeds econn as its first member (the
 * per-thread array is laid out with the protocol's conn_size), so a protocol
 * function casts the econn it is given to its own type.
 */
#ifndef HB_ENGINE_INT_H
#define HB_ENGINE_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>

#include "engine/hb_engine.h"
#include "base/hb_hist.h"
#include "net/hb_loop.h"
#include "net/hb_sock.h"
#include "http/hb_sse.h"

#define HB__ENG_NS_PER_S 1000000000ull
#define HB__ENG_RETRY_MIN_NS 1000000ull /* first wait after a failed connect */
#define HB__ENG_RETRY_MAX_SHIFT 7       /* doubling stops at 128 ms */

enum hb__eng_cstate { C_IDLE = 0, C_CONNECTING, C_HANDSHAKE, C_OPEN };

/* One request in flight (a pipelined HTTP/1.1 request or an HTTP/2 stream). */
typedef struct req_slot {
    uint64_t intended; /* scheduled send time (rate mode) or = start */
    uint64_t start;    /* issued (connect start when it needed a connection) */
    uint64_t written;  /* first byte handed to the socket; 0 = not yet */
    int warm;
} req_slot;

struct ethread;

/* The protocol-free part of a connection. */
typedef struct econn {
    hb_io io;
    hb_timer timer; /* rate schedule and deferred refills */
    struct ethread *th;
    hb_sock s;
    int state;
    uint32_t gidx;
    int opened_before;
    uint64_t conn_start, hs_start;
    uint64_t conn_end; /* when connect() was seen complete at once, else 0 */
    int conn_warm;     /* connection opened during warm-up: do not record its times */
    int read_wants_write, write_blocked;
    int et;          /* plain socket, edge-triggered: registered once, never modified */
    int closing;     /* no new request on this connection (Connection: close, keep-alive off) */
    uint32_t rcount; /* requests in flight (issued, not yet accounted) */
    /* rate mode */
    uint64_t next_slot;
    /* failed connects in a row, and no attempt before retry_at */
    uint32_t conn_fails;
    uint64_t retry_at;
} econn;

typedef struct ethread {
    struct hb_engine *e;
    uint32_t idx;
    pthread_t tid;
    int started, loop_ok;
    hb_loop loop;
    hb_timer tick;
    char *conns; /* nconns protocol connections of conn_size bytes: use hb__eng_conn */
    uint32_t nconns;
    uint64_t quota;         /* n mode: measured requests this thread accounts for */
    uint64_t issued;        /* measured requests issued (closed loop) */
    uint64_t done;          /* measured requests accounted */
    uint64_t warm_inflight; /* warm-up requests issued and not yet accounted */
    int finished_loop, interrupted;
    uint64_t end_ns;
    void *proto;        /* the protocol's per-thread state (thread_size bytes), or NULL */
    hb_engine_result r; /* this thread's counters and histograms */
    int have_server, have_doc;
    int stream_sse; /* stream mode: the run's responses are text/event-stream */
    /* Progress for other threads: single writer, relaxed stores; `prog` is a
     * coarse copy of the latency histogram (hb_hist_record_relaxed). */
    _Alignas(64) _Atomic uint64_t p_completed;
    _Atomic uint64_t p_ok, p_errors, p_bytes_in, p_connected;
    hb_hist prog;
    char pad[64];
} ethread;

/* A protocol behind the engine. Functions given an econn get one of their
 * own connections. */
typedef struct hb__eng_proto {
    size_t conn_size;   /* sizeof the protocol's connection (econn first) */
    size_t thread_size; /* per-thread state (ethread.proto, zeroed), 0 for none */
    /* Configuration checks, at the place of hb_engine_new's other checks. */
    int (*check)(const hb_engine_config *cfg, char *err);
    /* Copy what the run sends into e (once, in hb_engine_new) / free it. */
    int (*prepare)(struct hb_engine *e, char *err);
    void (*cleanup)(struct hb_engine *e);
    /* Allocate / free a connection's buffers (rcap: read buffer bytes). */
    int (*conn_init)(econn *c, size_t rcap, char *err);
    void (*conn_free)(econn *c);
    /* The socket (and TLS) is up: 0, or -1 when c was failed. NULL: nothing to do. */
    int (*start)(econn *c);
    /* Requests an open connection may have in flight now. */
    uint32_t (*cap)(econn *c);
    /* Take one more request (c->rcount grows by one; hb__eng_issue_slot stamps it). */
    void (*issue)(econn *c, uint64_t intended, uint64_t now, int warm);
    /* After fill() issued `more` requests (maybe 0) on an open connection: write. */
    void (*send)(econn *c, uint32_t more);
    /* An open connection's readiness (events: what epoll said, hints only):
     * c->io's callback while c is open (hb__eng_conn_of finds c). */
    hb_io_fn on_io;
    /* 1 when a request in flight on c started more than tmo ns before now. */
    int (*timed_out)(const econn *c, uint64_t now, uint64_t tmo);
    /* Account every request in flight on c as an error of `type` (rcount -> 0). */
    void (*fail_inflight)(econn *c, int type, uint64_t now);
    /* Measured (not warm-up) requests in flight, when the run stops. */
    uint64_t (*inflight_measured)(const econn *c);
    /* The socket is about to close: forget the protocol's connection state. */
    void (*reset)(econn *c);
    /* NULL: connections are TCP (hb_sock, TLS by cfg.tls). Else the protocol
     * opens its own transport: returns the socket's fd (registered for EPOLLIN
     * | EPOLLET, c->io.fn = on_io from then on; the protocol adds EPOLLOUT
     * while a write is blocked) or an error (err), and calls hb__eng_opened
     * when its handshake completes. */
    int (*open)(econn *c, char *err);
    uint32_t timers; /* timers per connection beside econn's own */
} hb__eng_proto;

extern const hb__eng_proto hb__eng_h1;
extern const hb__eng_proto hb__eng_h2;
extern const hb__eng_proto hb__eng_h3;
extern const hb__eng_proto hb__eng_ws;

/* ---- hb_engine_events.c: stream mode (cfg.stream), used by hb_engine_h1.c and
 * (through hb__eng_mux_data) the multiplexed protocols ---- */

/* A response's events so far. */
typedef struct hb__eng_events {
    hb_sse_scan scan;
    uint64_t events, last;
} hb__eng_events;

/* A header of the run's first response (Content-Type decides SSE or chunks). */
void hb__eng_events_header(ethread *th, const char *name, size_t nl, const char *value, size_t vl);
/* A response's body begins. */
void hb__eng_events_begin(ethread *th, hb__eng_events *s);
/* Body bytes of q's response at now: chunk_end 1 when they end a chunk, 0
 * when not, -1 for a body that is not chunked (each read is an event). 0, or
 * HB_SSE_E_LINE for an SSE line over the bound. */
int hb__eng_events_data(ethread *th, const req_slot *q, hb__eng_events *s, const char *p, size_t n,
                        int chunk_end, uint64_t now);

struct hb_engine {
    hb_engine_config cfg;
    const hb__eng_proto *proto;
    char *host;  /* copy of cfg.host */
    char *body;  /* copy of cfg.body (NULL when empty/file) */
    int body_fd; /* dup of cfg.body_fd or -1 */
    /* The request as the protocol sends it (its prepare/cleanup). */
    char *head; /* HTTP/1.1: copy of cfg.head */
    char *pbuf; /* HTTP/1.1: pipeline copies of head+body, NULL if too large */
    size_t pbuf_len;
    uint64_t req_len;         /* HTTP/1.1: head + body; WebSocket: one message frame */
    size_t ws_head_len;       /* WebSocket: the upgrade request (head) */
    char ws_accept[29];       /* WebSocket: the Sec-WebSocket-Accept the server must send */
    uint64_t ws_payload;      /* WebSocket: a message's bytes (its echo must have as many) */
    struct hb_header *fields; /* HTTP/2 and HTTP/3: copy of cfg.fields (strings in fbuf) */
    char *fbuf;
    uint32_t nthreads;
    ethread *threads;
    uint64_t start_ns, measure_ns, end_ns; /* end_ns: duration mode */
    uint64_t k_warm;                       /* rate mode: first measured slot */
    uint64_t slot_end;                     /* rate + n mode: k_warm + n */
    double slot_ns;                        /* rate mode: ns between global slots */
    uint64_t late_ns;                      /* rate mode: lateness threshold */
    uint32_t nsec;
    _Atomic int stop;
    _Atomic uint32_t nfinished;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int running, joined;
};

static inline econn *hb__eng_conn(ethread *th, uint32_t i)
{
    return (econn *)(th->conns + (size_t)i * th->e->proto->conn_size);
}

static inline econn *hb__eng_conn_of(hb_io *io)
{
    return (econn *)((char *)io - offsetof(econn, io));
}

/* Stamp q as a request issued now for `intended` and count the send (inline:
 * once per request). */
static inline void hb__eng_issue_slot(ethread *th, req_slot *q, uint64_t intended, uint64_t now,
                                      int warm)
{
    q->intended = intended;
    q->start = now;
    q->written = 0;
    q->warm = warm;
    if (warm) {
        th->warm_inflight++;
    } else {
        th->r.sends++;
        if (now - intended > th->e->late_ns) th->r.sends_late++;
    }
}

/* ---- hb_engine_mux.c: stream slots of a multiplexed protocol ---- */
/* A connection's requests are stream slots instead of a ring, since streams
 * end in any order; c->rcount counts used slots, so the engine's scheduling
 * and bookkeeping treat them like pipelined requests. */

/* One stream slot (a stream in flight, or free). */
typedef struct hb__eng_stream {
    req_slot q;
    uint64_t first_byte, body_bytes;
    int status; /* 0 until the final response head */
    int used, submitted;
    int ev_err;        /* stream mode: an SSE line over the bound (ends as a protocol error) */
    hb__eng_events ev; /* stream mode: the response's events */
} hb__eng_stream;

/* A connection's cfg.pipeline slots and the stack of free ones. */
typedef struct hb__eng_streams {
    hb__eng_stream *slots;
    uint32_t *free; /* stack of free slot indices */
    uint32_t nfree;
    uint32_t pending; /* used slots not yet submitted (waiting for the connection or room) */
    uint32_t m;       /* slots (cfg.pipeline) */
} hb__eng_streams;

/* A multiplexed protocol's connection starts with this (its econn first). */
typedef struct hb__eng_mconn {
    econn base;
    hb__eng_streams st;
} hb__eng_mconn;

/* m slots, all free. 0 or HB_E_NOMEM (err). */
int hb__eng_streams_init(hb__eng_streams *t, uint32_t m, char *err);
void hb__eng_streams_free(hb__eng_streams *t);
/* The connection is gone: every slot free (c->rcount = 0), or, when keep_unsent
 * and every used slot is unsubmitted, those stay for the next connection. */
void hb__eng_streams_reset(hb__eng_streams *t, econn *c, int keep_unsent);
/* Account every used slot as an error of `type` and free it. */
void hb__eng_streams_fail(hb__eng_streams *t, econn *c, int type, uint64_t now);
/* 1 when a used slot started more than tmo ns before now. */
int hb__eng_streams_timed_out(const hb__eng_streams *t, uint64_t now, uint64_t tmo);
/* Used slots of measured (not warm-up) requests. */
uint64_t hb__eng_streams_measured(const hb__eng_streams *t);
/* Protocol table entries for an hb__eng_mconn: issue, timed_out,
 * fail_inflight, inflight_measured; check (proto: "HTTP/2" / "HTTP/3" in the
 * messages). */
void hb__eng_mux_issue(econn *c, uint64_t intended, uint64_t now, int warm);
void hb__eng_mux_fail(econn *c, int type, uint64_t now);
int hb__eng_mux_timed_out(const econn *c, uint64_t now, uint64_t tmo);
uint64_t hb__eng_mux_measured(const econn *c);
int hb__eng_mux_check(const hb_engine_config *cfg, const char *proto, char *err);
/* The protocols' response header callback (ud: the econn): the run's Server
 * header. */
void hb__eng_mux_on_header(void *ud, void *sud, const char *n, size_t nl, const char *v, size_t vl);
/* Response body bytes of slot sl arriving at now, h2 and h3 alike: counted
 * and, in stream mode, timed as events. chunk_end: 1 they end a DATA frame,
 * 0 not, -1 the protocol does not say (each delivery is then an event). An
 * SSE line over the bound stops the stream's events; it ends as a protocol
 * error. Callable from the protocols' data callbacks. */
void hb__eng_mux_events(econn *c, hb__eng_stream *sl, const uint8_t *d, size_t len, int chunk_end,
                        uint64_t now);
static inline void hb__eng_mux_data(econn *c, hb__eng_stream *sl, const uint8_t *d, size_t len,
                                    int chunk_end, uint64_t now)
{
    sl->body_bytes += len; /* inline: every DATA frame of every run */
    if (c->th->e->cfg.stream) hb__eng_mux_events(c, sl, d, len, chunk_end, now);
}
/* The request's header fields copied into e (prepare) / freed (cleanup). */
int hb__eng_fields_prepare(struct hb_engine *e, char *err);
void hb__eng_fields_cleanup(struct hb_engine *e);

/* Take a free slot for a request issued now for `intended` (c->rcount grows). */
static inline hb__eng_stream *hb__eng_stream_issue(hb__eng_streams *t, econn *c, uint64_t intended,
                                                   uint64_t now, int warm)
{
    hb__eng_stream *sl = &t->slots[t->free[--t->nfree]];
    hb__eng_issue_slot(c->th, &sl->q, intended, now, warm);
    sl->used = 1;
    sl->submitted = 0;
    sl->status = 0;
    sl->body_bytes = 0;
    sl->first_byte = 0;
    if (c->th->e->cfg.stream) {
        sl->ev_err = 0;
        hb__eng_events_begin(c->th, &sl->ev);
    }
    c->rcount++;
    t->pending++;
    return sl;
}

/* The next used, unsubmitted slot from *i on (*i moves past it), or NULL. */
static inline hb__eng_stream *hb__eng_stream_unsent(hb__eng_streams *t, uint32_t *i)
{
    for (; *i < t->m && t->pending; (*i)++) {
        hb__eng_stream *sl = &t->slots[*i];
        if (sl->used && !sl->submitted) return &t->slots[(*i)++];
    }
    return NULL;
}

static inline void hb__eng_stream_submitted(hb__eng_streams *t, hb__eng_stream *sl)
{
    sl->submitted = 1;
    t->pending--;
}

/* Requests c may have in flight now: the open streams plus `room`, the
 * session's; only those in flight when it has no room (closing, not ready). */
static inline uint32_t hb__eng_streams_cap(const hb__eng_streams *t, const econn *c, int ready,
                                           uint32_t room)
{
    if (!ready || c->closing) return c->rcount;
    uint32_t cap = c->rcount - t->pending + room;
    return cap < t->m ? cap : t->m;
}

/* ---- hb_engine_result.c ---- */

/* Zero r and allocate its histograms and nsec-long per-second series. */
int hb__eng_result_init(hb_engine_result *r, uint32_t nsec, char *err);
/* r += x (counts, series, histograms; first seen strings and fatal kept). */
void hb__eng_result_add(hb_engine_result *r, hb_engine_result *x);

/* ---- hb_engine.c, for the protocols ---- */

/* q got a complete response: status st, body bytes, first response byte at first_byte. */
void hb__eng_account_response(ethread *th, const req_slot *q, int st, uint64_t body,
                              uint64_t first_byte, uint64_t now);
/* q ended with an error of `type`. */
void hb__eng_account_error(ethread *th, const req_slot *q, int type, uint64_t now);
/* Keep the detail of the thread's first error. */
void hb__eng_note_error(ethread *th, int type, int rc, const char *detail);
/* A response header field: the run's Server header is the first one seen. */
void hb__eng_header(ethread *th, const char *name, size_t nl, const char *value, size_t vl);
/* A condition that makes the whole run invalid (fatal_rc): stop every thread. */
void hb__eng_fatal(ethread *th, int rc, const char *detail);
/* Fail every request in flight on c with `type`, close c, refill later. */
void hb__eng_fail_all(econn *c, int type, int rc, const char *detail);
/* Close c's socket (its requests must have been accounted). */
void hb__eng_conn_close(econn *c);
/* Refill c from the loop's timer phase (never recursively from a failure path). */
void hb__eng_defer_fill(econn *c);
/* Top up c's requests in flight and write or connect. */
void hb__eng_fill(econn *c, uint64_t now);
/* A protocol with its own transport (open) finished its handshake of hs_ns:
 * count the connection, then the protocol's start and the first requests. */
void hb__eng_opened(econn *c, uint64_t hs_ns);
/* Level-triggered sockets: make epoll's interest follow c's state. */
void hb__eng_update_interest(econn *c);

/* A multiplexed protocol's stream sl ended: a response (status set) when
 * type < 0, else an error of `type` (its detail noted by the caller); the slot
 * is freed. Inline: once per request. */
static inline void hb__eng_stream_end(hb__eng_streams *t, econn *c, hb__eng_stream *sl, int type,
                                      uint64_t now)
{
    ethread *th = c->th;
    if (sl->ev_err) type = HB_ENG_ERR_PROTOCOL; /* set in stream mode only */
    if (type < 0)
        hb__eng_account_response(th, &sl->q, sl->status, sl->body_bytes, sl->first_byte, now);
    else
        hb__eng_account_error(th, &sl->q, type, now);
    if (!sl->submitted) t->pending--;
    sl->used = 0;
    t->free[t->nfree++] = (uint32_t)(sl - t->slots);
    c->rcount--;
    if (!th->e->cfg.keepalive) c->closing = 1;
}

#endif
