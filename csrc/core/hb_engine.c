/* hb_engine.c - the load generator: per-thread epoll loops driving
 * connections through connect -> (TLS handshake) -> write -> read -> parse.
 *
 * Per connection state lives in `econn`; per thread state (loop, counters,
 * histograms) in `ethread`. Nothing on the request path allocates: a request
 * is a ring slot with timestamps, its bytes come from the pre-serialized
 * buffer, responses are parsed in place in the connection's read buffer.
 */
#include "hb_engine.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/sendfile.h>
#include <time.h>
#include <unistd.h>

#include "hb_clock.h"
#include "hb_h2_client.h"
#include "hb_loop.h"
#include "hb_parse.h"
#include "hb_sock.h"
#include "hb_tls.h"

#define NS_PER_S 1000000000ull
#define STOP_POLL_NS (20ull * 1000000ull) /* bound on how late a stop is noticed */
#define WARM_DRAIN_NS (10ull * NS_PER_S)  /* n mode, no timeout: wait for warm-up answers */
#define MAX_HEADERS HB_PARSE_DEFAULT_MAX_HEADERS
#define PBUF_MAX (256u * 1024u) /* pipelined copies of the request up to this size */
#define FILE_CHUNK (64u * 1024u)
#define ENGINE_TLS_RBUF (64u * 1024u) /* TLS input per recv(): many records per syscall */
#define SENDFILE_CHUNK (1u << 20)
#define HEAD_CACHE_CAP 1024u /* response heads up to this size are remembered */
#define LATE_DEFAULT_NS (10ull * 1000000ull)
#define RETRY_MIN_NS 1000000ull /* first wait after a failed connect */
#define RETRY_MAX_SHIFT 7       /* doubling stops at 128 ms */

enum cstate { C_IDLE = 0, C_CONNECTING, C_HANDSHAKE, C_OPEN };
enum rstate { R_HEAD = 0, R_BODY_LEN, R_BODY_CHUNKED, R_BODY_CLOSE };

typedef struct req_slot {
    uint64_t intended; /* scheduled send time (rate mode) or = start */
    uint64_t start;    /* issued (connect start when it needed a connection) */
    uint64_t written;  /* first byte handed to the socket; 0 = not yet */
    int warm;
} req_slot;

struct ethread;
struct econn;

/* HTTP/2: one stream slot (a stream in flight, or free). */
typedef struct h2slot {
    req_slot q;
    struct econn *c;
    hb_h2_body body;
    uint64_t first_byte, body_bytes;
    int status; /* 0 until the final response head */
    int used, submitted;
} h2slot;

typedef struct h2conn {
    hb_h2_client cli;
    int live;       /* cli initialised on the current socket */
    h2slot *slots;  /* pipeline of them */
    uint32_t *free; /* stack of free slot indices */
    uint32_t nfree;
    uint32_t pending; /* used slots not yet submitted (waiting for the connection) */
    uint32_t *unw;    /* submitted slots whose HEADERS may not be out yet */
    uint32_t nunw;
    uint64_t now;               /* clock of the read being processed */
    uint64_t seen_in, seen_out; /* cli byte counters already added to the results */
} h2conn;

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
    int et; /* plain socket, edge-triggered: registered once, never modified */
    /* read side */
    char *rbuf;
    size_t rcap, rlen, rpos;
    int rstate;
    uint64_t body_left, resp_body, first_byte;
    int have_first, resp_close, resp_status;
    int closing; /* the last response said Connection: close (or keep-alive is off) */
    hb_chunked ch;
    /* in-flight ring, capacity = pipeline */
    req_slot *ring;
    uint32_t rhead, rcount, nstarted;
    uint64_t wleft; /* bytes of the ring's requests not yet written */
    char *wbuf;     /* TLS + file body: chunk buffer */
    /* rate mode */
    uint64_t next_slot;
    /* failed connects in a row, and no attempt before retry_at */
    uint32_t conn_fails;
    uint64_t retry_at;
    h2conn *h2; /* HTTP/2 state, NULL for HTTP/1.1 connections */
} econn;

/* Progress latency buckets: exact below 16 ns, then 16 per power of two (a
 * bucket spans 1/16 of its lower bound), covering the whole uint64_t range. */
#define PLAT_SUB_BITS 4
#define PLAT_SUB (1u << PLAT_SUB_BITS)
#define PLAT_BUCKETS ((64 - PLAT_SUB_BITS) * PLAT_SUB)

typedef struct ethread {
    struct hb_engine *e;
    uint32_t idx;
    pthread_t tid;
    int started, loop_ok;
    hb_loop loop;
    hb_timer tick;
    econn *conns;
    uint32_t nconns;
    uint64_t quota;         /* n mode: measured requests this thread accounts for */
    uint64_t issued;        /* measured requests issued (closed loop) */
    uint64_t done;          /* measured requests accounted */
    uint64_t warm_inflight; /* warm-up requests issued and not yet accounted */
    int finished_loop, interrupted;
    uint64_t end_ns;
    hb_header hdrs[MAX_HEADERS];
    /* The last final response head parsed and what it said. Servers answer a
     * benchmark's identical requests with byte-identical heads (until the
     * Date header ticks); a head equal byte for byte to this one has the
     * same parse, so it is compared instead of parsed again. */
    size_t hc_len; /* 0: empty */
    int hc_status, hc_close, hc_kind;
    int64_t hc_clen;
    char hc[HEAD_CACHE_CAP];
    hb_engine_result r; /* this thread's counters and histograms */
    int have_server, have_doc;
    /* Progress for other threads: single writer, relaxed stores. */
    _Alignas(64) _Atomic uint64_t p_completed;
    _Atomic uint64_t p_ok, p_errors, p_bytes_in;
    _Atomic uint64_t p_lat[PLAT_BUCKETS]; /* coarse latency counts, see plat_bucket */
    char pad[64];
} ethread;

struct hb_engine {
    hb_engine_config cfg;
    char *head;     /* copy of cfg.head */
    hb_header *h2f; /* copy of cfg.h2_fields (strings in h2buf) */
    char *h2buf;
    char *host;  /* copy of cfg.host */
    char *body;  /* copy of cfg.body (NULL when empty/file) */
    int body_fd; /* dup of cfg.body_fd or -1 */
    char *pbuf;  /* pipeline copies of head+body, NULL if too large */
    size_t pbuf_len;
    uint64_t req_len; /* head + body */
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

static const char *const err_names[HB_ENG_NERR] = {
    "connect", "tls", "write", "read", "timeout", "protocol", "closed", "rst_stream", "goaway"};

const char *hb_eng_err_name(int type)
{
    return (type >= 0 && type < HB_ENG_NERR) ? err_names[type] : "unknown";
}

void hb_engine_config_init(hb_engine_config *c)
{
    memset(c, 0, sizeof *c);
    c->body_fd = -1;
    c->connections = 1;
    c->threads = 1;
    c->pipeline = 1;
    c->keepalive = 1;
    c->duration_ns = 10 * NS_PER_S;
}

/* ---- accounting ---- */

static inline void progress_publish(ethread *th)
{
    atomic_store_explicit(&th->p_completed, th->r.completed, memory_order_relaxed);
    atomic_store_explicit(&th->p_ok, th->r.ok, memory_order_relaxed);
    atomic_store_explicit(&th->p_errors, th->r.errors_total + th->r.non2xx, memory_order_relaxed);
    atomic_store_explicit(&th->p_bytes_in, th->r.bytes_in, memory_order_relaxed);
}

static inline unsigned plat_bucket(uint64_t v)
{
    if (v < PLAT_SUB) return (unsigned)v;
    unsigned msb = 63u - (unsigned)__builtin_clzll(v);
    unsigned sub = (unsigned)(v >> (msb - PLAT_SUB_BITS)) & (PLAT_SUB - 1);
    return (msb - PLAT_SUB_BITS + 1) * PLAT_SUB + sub;
}

static inline uint64_t plat_lower(unsigned i)
{
    if (i < PLAT_SUB) return i;
    unsigned k = i / PLAT_SUB;
    return (uint64_t)(PLAT_SUB + i % PLAT_SUB) << (k - 1);
}

/* Single writer: a relaxed load + store, no locked instruction on the hot path. */
static inline void plat_record(ethread *th, uint64_t v)
{
    _Atomic uint64_t *b = &th->p_lat[plat_bucket(v)];
    atomic_store_explicit(b, atomic_load_explicit(b, memory_order_relaxed) + 1,
                          memory_order_relaxed);
}

static inline void sec_count(ethread *th, uint64_t now, int ok)
{
    hb_engine_result *r = &th->r;
    uint64_t m = th->e->measure_ns;
    if (now < m || r->nseconds == 0) return;
    uint64_t i = (now - m) / NS_PER_S;
    if (i >= r->nseconds) i = r->nseconds - 1; /* clamp long runs into the last slot */
    if (ok)
        r->sec_ok[i]++;
    else
        r->sec_err[i]++;
}

static void note_error(ethread *th, int type, int rc, const char *detail)
{
    if (th->r.first_error[0]) return;
    snprintf(th->r.first_error, sizeof th->r.first_error, "%s: %s", hb_eng_err_name(type),
             (detail && *detail) ? detail : hb_strerror(rc));
}

/* One request ended with an error of `type`. */
static void account_error(ethread *th, const req_slot *q, int type, uint64_t now)
{
    if (q->warm) {
        th->r.warmup_requests++;
        th->warm_inflight--;
        return;
    }
    th->r.errors[type]++;
    th->r.errors_total++;
    th->r.completed++;
    th->done++;
    sec_count(th, now, 0);
    progress_publish(th);
}

/* ---- connection helpers ---- */

static void on_io(hb_loop *l, hb_io *io, uint32_t events);
static void on_timer(hb_loop *l, hb_timer *t, uint64_t now);
static void fill(econn *c, uint64_t now);
static void flush(econn *c);
static void h2_reset(econn *c);
static void h2_fail_streams(econn *c, int type, uint64_t now);
static int h2_start(econn *c);
static void h2_issue(econn *c, uint64_t intended, uint64_t now, int warm);
static uint32_t h2_cap(econn *c);
static void h2_send(econn *c);
static void h2_io(econn *c, uint32_t events);
static int h2_timed_out(econn *c, uint64_t now, uint64_t tmo);

static inline req_slot *ring_at(econn *c, uint32_t i)
{
    uint32_t cap = c->th->e->cfg.pipeline;
    return &c->ring[(c->rhead + i) % cap];
}

static void update_interest(econn *c)
{
    if (c->io.fd < 0 || c->et) return;
    uint32_t ev;
    if (c->state == C_CONNECTING) {
        ev = EPOLLOUT;
    } else if (c->state == C_HANDSHAKE) {
        ev = c->s.want == HB_WANT_WRITE ? EPOLLOUT : EPOLLIN;
    } else {
        ev = EPOLLIN;
        if (c->write_blocked || c->read_wants_write) ev |= EPOLLOUT;
    }
    (void)hb_loop_mod(&c->th->loop, &c->io, ev);
}

static void defer_fill(econn *c)
{
    /* Refill from the timer phase of the loop, never recursively from a
     * failure path (a refused connect can fail synchronously, again and again). */
    if (hb_timer_start(&c->th->loop, &c->timer, hb_now_ns() + 1) != 0) {
        /* Heap full cannot happen (one timer per connection); ignore. */
    }
}

static void conn_close(econn *c)
{
    if (c->h2) h2_reset(c);
    if (c->s.fd >= 0) hb_sock_close(&c->s);
    hb_io_forget(&c->io);
    c->state = C_IDLE;
    c->rlen = c->rpos = 0;
    c->rstate = R_HEAD;
    c->have_first = 0;
    c->read_wants_write = c->write_blocked = 0;
    c->et = 0;
    c->wleft = 0;
    c->nstarted = 0;
    c->closing = 0;
    c->resp_close = 0;
}

/* Fail every request in flight on c with `type`, close c, refill later. */
static void fail_all(econn *c, int type, int rc, const char *detail)
{
    ethread *th = c->th;
    uint64_t now = hb_now_ns();
    note_error(th, type, rc, detail);
    uint32_t cap = th->e->cfg.pipeline;
    if (c->h2) h2_fail_streams(c, type, now);
    while (c->rcount) {
        account_error(th, &c->ring[c->rhead], type, now);
        c->rhead = (c->rhead + 1) % cap;
        c->rcount--;
    }
    conn_close(c);
    if (type == HB_ENG_ERR_CONNECT) {
        /* A refusing target must not be hammered: back off before retrying. */
        th->r.connect_failures++;
        if (rc == -EMFILE || rc == -ENFILE) th->r.connect_fd_exhausted++;
        uint32_t sh = c->conn_fails < RETRY_MAX_SHIFT ? c->conn_fails : RETRY_MAX_SHIFT;
        c->conn_fails++;
        c->retry_at = now + (RETRY_MIN_NS << sh);
    }
    defer_fill(c);
}

/* Stamps its own start: a caller's clock may predate connects started just
 * before this one. */
static void start_connect(econn *c)
{
    ethread *th = c->th;
    hb_engine *e = th->e;
    char err[HB_ERR_LEN];
    err[0] = 0;
    c->conn_start = hb_now_ns();
    c->conn_warm = c->conn_start < e->measure_ns;
    th->r.connect_attempts++;
    int rc = hb_sock_connect(&c->s, (const struct sockaddr *)&e->cfg.addr, e->cfg.addrlen, 0, err);
    if (rc < 0 && rc != HB_AGAIN) {
        fail_all(c, HB_ENG_ERR_CONNECT, rc, err);
        return;
    }
    /* Plain sockets are edge-triggered for both directions from the start, so
     * epoll_ctl runs once per connection, and there is no level-triggered
     * re-poll of every ready socket on each epoll_wait. TLS stays
     * level-triggered (OpenSSL's buffering makes "drained" hard to know). */
    c->et = e->cfg.tls == NULL;
    int arc = hb_loop_add(&th->loop, &c->io, c->s.fd,
                          c->et ? (EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET) : EPOLLOUT);
    if (arc < 0) {
        fail_all(c, HB_ENG_ERR_CONNECT, arc, "epoll_ctl");
        return;
    }
    c->state = C_CONNECTING;
    /* Even when connect() completed at once, let the loop report
     * writability: one code path, and no recursion from here. But stamp the
     * end now: the loop reports it only after the connects started after
     * this one (16 back-to-back loopback connects read ~0.7 ms each
     * otherwise, instead of ~0.03 ms). */
    c->conn_end = (rc == 0 || hb_sock_connect_done(&c->s)) ? hb_now_ns() : 0;
}

static void conn_ready(econn *c)
{
    c->state = C_OPEN;
    if (c->h2 && h2_start(c) < 0) return;
    update_interest(c);
    fill(c, hb_now_ns());
}

static void do_handshake(econn *c)
{
    ethread *th = c->th;
    char err[HB_ERR_LEN];
    err[0] = 0;
    int rc = hb_sock_handshake(&c->s, err);
    if (rc == HB_AGAIN) {
        update_interest(c);
        return;
    }
    if (rc < 0) {
        if (!err[0]) hb_sock_errstr(&c->s, rc, err);
        fail_all(c, HB_ENG_ERR_TLS, rc, err);
        return;
    }
    uint64_t now = hb_now_ns();
    if (!c->conn_warm) hb_hist_record(&th->r.tls, now - c->hs_start);
    if (hb_sock_session_reused(&c->s)) th->r.tls_resumed++;
    if (!th->r.tls_info[0]) hb_sock_describe(&c->s, th->r.tls_info, sizeof th->r.tls_info);
    conn_ready(c);
}

static void on_connected(econn *c)
{
    ethread *th = c->th;
    hb_engine *e = th->e;
    uint64_t now = hb_now_ns();
    if (!c->conn_warm)
        hb_hist_record(&th->r.connect, (c->conn_end ? c->conn_end : now) - c->conn_start);
    th->r.connections_opened++;
    c->conn_fails = 0;
    if (c->opened_before && e->cfg.keepalive) th->r.reconnects++;
    c->opened_before = 1;
    if (e->cfg.tls) {
        char err[HB_ERR_LEN];
        err[0] = 0;
        int rc = hb_sock_tls_client(&c->s, e->cfg.tls, e->cfg.host, err);
        if (rc < 0) {
            fail_all(c, HB_ENG_ERR_TLS, rc, err);
            return;
        }
        /* One read syscall per batch of records instead of header + body reads. */
        rc = hb_sock_tls_read_buffer(&c->s, ENGINE_TLS_RBUF, err);
        if (rc < 0) {
            fail_all(c, HB_ENG_ERR_TLS, rc, err);
            return;
        }
        c->state = C_HANDSHAKE;
        c->hs_start = now;
        do_handshake(c);
        return;
    }
    conn_ready(c);
}

/* Is there another measured (or warm-up) request this thread may start? */
static int may_issue_closed(ethread *th, uint64_t now, int *warm)
{
    hb_engine *e = th->e;
    if (atomic_load_explicit(&e->stop, memory_order_relaxed)) return 0;
    *warm = now < e->measure_ns;
    if (*warm) return 1;
    if (e->cfg.n) return th->issued < th->quota;
    return now < e->end_ns;
}

static void issue(econn *c, uint64_t intended, uint64_t now, int warm)
{
    hb_engine *e = c->th->e;
    req_slot *q = ring_at(c, c->rcount);
    q->intended = intended;
    q->start = now;
    q->written = 0;
    q->warm = warm;
    if (warm) {
        c->th->warm_inflight++;
    } else {
        c->th->r.sends++;
        if (now - intended > e->late_ns) c->th->r.sends_late++;
    }
    c->rcount++;
    c->wleft += e->req_len;
}

static uint64_t slot_time(hb_engine *e, uint64_t s)
{
    return e->start_ns + (uint64_t)((double)s * e->slot_ns);
}

/* Top up c's in-flight requests: up to `pipeline` on an open connection,
 * one to trigger a (re)connect otherwise; then write or connect. */
static void fill(econn *c, uint64_t now)
{
    ethread *th = c->th;
    hb_engine *e = th->e;
    if (th->finished_loop) return;
    if (c->state != C_OPEN && c->state != C_IDLE) return; /* connecting: wait */
    if (c->state == C_IDLE && c->retry_at > now) {
        (void)hb_timer_start(&th->loop, &c->timer, c->retry_at);
        return;
    }
    uint32_t cap = c->state == C_OPEN ? (c->h2 ? h2_cap(c) : e->cfg.pipeline) : 1;
    uint32_t before = c->rcount;
    if (e->cfg.rate > 0) {
        while (c->rcount < cap) {
            if (atomic_load_explicit(&e->stop, memory_order_relaxed)) break;
            uint64_t s = c->next_slot;
            if (e->cfg.n && s >= e->slot_end) break;
            uint64_t t = slot_time(e, s);
            if (!e->cfg.n && t >= e->end_ns) break;
            if (t > now) {
                (void)hb_timer_start(&th->loop, &c->timer, t);
                break;
            }
            if (c->h2)
                h2_issue(c, t, now, s < e->k_warm);
            else
                issue(c, t, now, s < e->k_warm);
            c->next_slot += e->cfg.connections;
        }
    } else {
        int warm;
        while (c->rcount < cap && may_issue_closed(th, now, &warm)) {
            if (c->h2)
                h2_issue(c, now, now, warm);
            else
                issue(c, now, now, warm);
            if (!warm) th->issued++;
        }
    }
    if (c->state == C_IDLE) {
        if (c->rcount) start_connect(c);
    } else if (c->h2) {
        h2_send(c);
    } else if (c->wleft && (c->rcount != before || !c->write_blocked)) {
        flush(c);
    }
}

/* After a write of some bytes: stamp the requests whose first byte went out. */
static void mark_started(econn *c, uint64_t now)
{
    uint64_t L = c->th->e->req_len;
    uint32_t unstarted = (uint32_t)(c->wleft / L);
    uint32_t started = c->rcount - unstarted;
    while (c->nstarted < started) {
        ring_at(c, c->nstarted)->written = now;
        c->nstarted++;
    }
}

/* Write as much of the pending request bytes as the socket takes. */
static void flush(econn *c)
{
    ethread *th = c->th;
    hb_engine *e = th->e;
    uint64_t L = e->req_len;
    size_t hl = e->cfg.head_len;
    while (c->wleft > 0) {
        uint64_t pos = (L - c->wleft % L) % L; /* offset inside the current request */
        ssize_t w;
        /* Requests whose first byte goes out in this write get this stamp. */
        uint64_t now = hb_now_ns();
        if (e->pbuf) {
            uint64_t n = e->pbuf_len - pos;
            if (n > c->wleft) n = c->wleft;
            w = hb_sock_write(&c->s, e->pbuf + pos, (size_t)n);
        } else if (pos < hl) {
            struct iovec iov[2];
            int cnt = 1;
            iov[0].iov_base = e->head + pos;
            iov[0].iov_len = hl - pos;
            if (e->body && e->cfg.body_len) {
                iov[1].iov_base = e->body;
                iov[1].iov_len = e->cfg.body_len;
                cnt = 2;
            }
            w = hb_sock_writev(&c->s, iov, cnt);
        } else {
            uint64_t boff = pos - hl;
            uint64_t left = e->cfg.body_len - boff;
            if (e->body) {
                w = hb_sock_write(&c->s, e->body + boff, (size_t)left);
            } else if (!e->cfg.tls) {
                off_t off = (off_t)boff;
                size_t n = left > SENDFILE_CHUNK ? SENDFILE_CHUNK : (size_t)left;
                w = sendfile(c->s.fd, e->body_fd, &off, n);
                if (w < 0) w = (errno == EAGAIN || errno == EWOULDBLOCK) ? HB_AGAIN : -errno;
                if (w == HB_AGAIN) c->s.want = HB_WANT_WRITE;
            } else {
                size_t n = left > FILE_CHUNK ? FILE_CHUNK : (size_t)left;
                ssize_t rd = pread(e->body_fd, c->wbuf, n, (off_t)boff);
                if (rd <= 0) {
                    fail_all(c, HB_ENG_ERR_WRITE, rd < 0 ? -errno : HB_E_INVALID,
                             "reading the body file failed");
                    return;
                }
                w = hb_sock_write(&c->s, c->wbuf, (size_t)rd);
            }
        }
        if (w == HB_AGAIN) {
            if (c->s.want == HB_WANT_READ) {
                /* TLS renegotiation-style wants: rare; wait for readability. */
                c->write_blocked = 0;
            } else {
                c->write_blocked = 1;
            }
            update_interest(c);
            return;
        }
        if (w < 0) {
            char err[HB_ERR_LEN];
            hb_sock_errstr(&c->s, (int)w, err);
            fail_all(c, HB_ENG_ERR_WRITE, (int)w, err);
            return;
        }
        c->wleft -= (uint64_t)w;
        if (now >= e->measure_ns) th->r.bytes_out += (uint64_t)w;
        mark_started(c, now);
    }
    if (c->write_blocked) {
        c->write_blocked = 0;
        update_interest(c);
    }
}

/* One request got a complete response (status st, body bytes, first response byte at first_byte).
 */
static inline void account_response(ethread *th, const req_slot *q, int st, uint64_t body,
                                    uint64_t first_byte, uint64_t now)
{
    hb_engine *e = th->e;
    hb_engine_result *r = &th->r;
    if (q->warm) {
        r->warmup_requests++;
        th->warm_inflight--;
    } else {
        uint64_t written = q->written ? q->written : q->start;
        hb_hist_record(&r->latency, now - q->intended);
        plat_record(th, now - q->intended);
        if (e->cfg.rate > 0) hb_hist_record(&r->latency_uncorrected, now - q->start);
        hb_hist_record(&r->processing, now - written);
        hb_hist_record(&r->setup, written - q->start);
        hb_hist_record(&r->ttfb, first_byte > written ? first_byte - written : 0);
        r->responses++;
        r->completed++;
        th->done++;
        r->body_bytes += body;
        if (st >= 0 && st < 1000) r->status[st]++;
        int cls = st / 100;
        r->status_class[cls >= 1 && cls <= 5 ? cls : 0]++;
        int ok = st >= 200 && st <= 299;
        if (ok) {
            r->ok++;
            if (!th->have_doc) {
                th->have_doc = 1;
                r->doc_length = (int64_t)body;
            }
        } else {
            r->non2xx++;
        }
        sec_count(th, now, ok);
        progress_publish(th);
    }
}

/* The response at the head of the ring is complete. */
static void complete(econn *c, uint64_t now)
{
    ethread *th = c->th;
    hb_engine *e = th->e;
    req_slot *q = &c->ring[c->rhead];
    c->rhead = (c->rhead + 1) % e->cfg.pipeline;
    c->rcount--;
    if (c->nstarted) c->nstarted--;
    account_response(th, q, c->resp_status, c->resp_body, c->first_byte, now);
    c->rstate = R_HEAD;
    c->have_first = 0;
    c->resp_body = 0;
    if (c->resp_close || !e->cfg.keepalive) c->closing = 1;
}

static void capture_server(ethread *th, const hb_response_head *h)
{
    th->have_server = 1;
    for (size_t i = 0; i < h->num_headers; i++) {
        if (h->headers[i].name_len == 6 && strncasecmp(h->headers[i].name, "server", 6) == 0) {
            size_t n = h->headers[i].value_len;
            if (n >= HB_ENG_SERVER_LEN) n = HB_ENG_SERVER_LEN - 1;
            memcpy(th->r.server, h->headers[i].value, n);
            th->r.server[n] = 0;
            return;
        }
    }
}

/* Parse what is buffered. Returns 0 to go on, -1 when c was closed. */
static int process(econn *c, uint64_t now)
{
    ethread *th = c->th;
    hb_engine *e = th->e;
    while (c->rpos < c->rlen) {
        if (c->rcount == 0 || c->nstarted == 0) {
            /* Bytes nobody asked for: the connection is unusable. */
            note_error(th, HB_ENG_ERR_PROTOCOL, HB_E_PROTOCOL, "unsolicited response data");
            conn_close(c);
            defer_fill(c);
            return -1;
        }
        char *p = c->rbuf + c->rpos;
        size_t avail = c->rlen - c->rpos;
        switch (c->rstate) {
        case R_HEAD: {
            if (!c->have_first) {
                c->have_first = 1;
                c->first_byte = now;
            }
            int status, conn_close, kind;
            int64_t clen;
            if (th->hc_len && avail >= th->hc_len && memcmp(p, th->hc, th->hc_len) == 0) {
                /* The same bytes up to and including the blank line: the
                 * parser would stop at the same place with the same result. */
                c->rpos += th->hc_len;
                status = th->hc_status;
                conn_close = th->hc_close;
                kind = th->hc_kind;
                clen = th->hc_clen;
            } else {
                hb_response_head h;
                memset(&h, 0, sizeof h);
                /* Header pairs are only needed once (the Server header); after
                 * that the parser just counts them and derives the framing. */
                h.headers = th->have_server ? NULL : th->hdrs;
                h.num_headers = MAX_HEADERS;
                hb_parse_limits lim = {c->rcap, MAX_HEADERS};
                int pr = hb_parse_response_head_ex(p, avail, &h, &lim, e->cfg.parse_flags);
                if (pr == HB_AGAIN) {
                    if (avail == c->rcap) {
                        fail_all(c, HB_ENG_ERR_PROTOCOL, HB_PE_HEAD_TOO_LARGE,
                                 "response head larger than the read buffer");
                        return -1;
                    }
                    if (c->rpos > 0) {
                        memmove(c->rbuf, p, avail);
                        c->rpos = 0;
                        c->rlen = avail;
                    }
                    return 0;
                }
                if (pr < 0) {
                    int code = h.error ? h.error : HB_E_PROTOCOL;
                    fail_all(c, HB_ENG_ERR_PROTOCOL, code, hb_parse_strerror(code));
                    return -1;
                }
                c->rpos += (size_t)pr;
                if (hb_response_is_interim(&h)) continue;
                if (!th->have_server) capture_server(th, &h);
                status = h.status;
                conn_close = h.framing.connection_close;
                kind = hb_response_body_kind(&h, e->cfg.method_is_head);
                clen = h.framing.content_length;
                if ((size_t)pr <= HEAD_CACHE_CAP) {
                    memcpy(th->hc, p, (size_t)pr);
                    th->hc_len = (size_t)pr;
                    th->hc_status = status;
                    th->hc_close = conn_close;
                    th->hc_kind = kind;
                    th->hc_clen = clen;
                } else {
                    th->hc_len = 0;
                }
            }
            c->resp_status = status;
            c->resp_close = conn_close;
            c->resp_body = 0;
            switch (kind) {
            case HB_BODY_NONE:
                complete(c, now);
                break;
            case HB_BODY_LENGTH:
                c->body_left = (uint64_t)clen;
                if (c->body_left == 0)
                    complete(c, now);
                else
                    c->rstate = R_BODY_LEN;
                break;
            case HB_BODY_CHUNKED:
                hb_chunked_init_ex(&c->ch, e->cfg.parse_flags);
                c->rstate = R_BODY_CHUNKED;
                break;
            default:
                c->rstate = R_BODY_CLOSE;
                c->resp_close = 1;
                break;
            }
            break;
        }
        case R_BODY_LEN: {
            uint64_t take = avail < c->body_left ? avail : c->body_left;
            c->rpos += (size_t)take;
            c->body_left -= take;
            c->resp_body += take;
            if (c->body_left == 0) complete(c, now);
            break;
        }
        case R_BODY_CHUNKED: {
            const char *d;
            size_t dl = 0;
            ssize_t k = hb_chunked_feed(&c->ch, p, avail, &d, &dl);
            if (k < 0) {
                int code = c->ch.error ? c->ch.error : HB_E_PROTOCOL;
                fail_all(c, HB_ENG_ERR_PROTOCOL, code, hb_parse_strerror(code));
                return -1;
            }
            c->rpos += (size_t)k;
            c->resp_body += dl;
            if (c->ch.done)
                complete(c, now);
            else if (k == 0 && dl == 0)
                return 0; /* needs more input */
            break;
        }
        default: /* R_BODY_CLOSE */
            c->resp_body += avail;
            c->rpos = c->rlen;
            break;
        }
        if (c->closing) break;
    }
    if (c->rpos >= c->rlen) c->rpos = c->rlen = 0;
    return 0;
}

static void on_eof(econn *c, uint64_t now)
{
    if (c->rstate == R_BODY_CLOSE && c->rcount > 0) complete(c, now);
    if (c->rcount > 0) {
        fail_all(c, HB_ENG_ERR_CLOSED, HB_E_CLOSED, "connection closed before the response");
        return;
    }
    conn_close(c);
    fill(c, now);
}

/* events: what epoll reported (0 when called for another reason). */
static void do_read(econn *c, uint32_t events)
{
    ethread *th = c->th;
    hb_engine *e = th->e;
    for (;;) {
        if (c->rlen >= c->rcap) { /* cannot happen: process() compacts or fails */
            fail_all(c, HB_ENG_ERR_PROTOCOL, HB_PE_HEAD_TOO_LARGE, "read buffer full");
            return;
        }
        size_t space = c->rcap - c->rlen;
        ssize_t n = hb_sock_read(&c->s, c->rbuf + c->rlen, space);
        if (n == HB_AGAIN) {
            int want_w = c->s.want == HB_WANT_WRITE;
            if (want_w != c->read_wants_write) {
                c->read_wants_write = want_w;
                update_interest(c);
            }
            return;
        }
        uint64_t now = hb_now_ns();
        if (n == 0) {
            on_eof(c, now);
            return;
        }
        if (n < 0) {
            char err[HB_ERR_LEN];
            hb_sock_errstr(&c->s, (int)n, err);
            if (c->rcount == 0) { /* idle keep-alive connection reset: not a request's error */
                conn_close(c);
                defer_fill(c);
                return;
            }
            fail_all(c, HB_ENG_ERR_READ, (int)n, err);
            return;
        }
        if (c->read_wants_write) {
            c->read_wants_write = 0;
            update_interest(c);
        }
        if (now >= e->measure_ns) th->r.bytes_in += (uint64_t)n;
        c->rlen += (size_t)n;
        if (process(c, now) < 0) return;
        if (c->closing) {
            /* Connection: close (or keep-alive off): what else is in flight is lost. */
            if (c->rcount > 0) {
                fail_all(c, HB_ENG_ERR_CLOSED, HB_E_CLOSED,
                         "server closed the connection with requests in flight");
                return;
            }
            conn_close(c);
            fill(c, now);
            return;
        }
        fill(c, now);
        if (c->state != C_OPEN) return;
        /* Edge-triggered: a short read means the data is drained (TCP hands
         * over everything queued up to len); a full one may have left more.
         * A FIN that came with the data raises no further edge, so when epoll
         * said RDHUP/HUP/ERR keep reading until EOF or EAGAIN. */
        if (c->et) {
            if ((size_t)n < space && !(events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR))) return;
            continue;
        }
        /* OpenSSL or the TLS read buffer may hold bytes epoll cannot see. */
        if (!hb_sock_has_buffered(&c->s)) return;
    }
}

/* ---- HTTP/2 connections ----
 * A connection's requests are stream slots instead of a ring: streams end in
 * any order. c->rcount counts used slots, so fill() and the run's bookkeeping
 * treat them like pipelined requests. hb_h2_client runs the session. */

/* All slots free, session gone (the socket is closed by the caller). */
static void h2_reset(econn *c)
{
    h2conn *h = c->h2;
    uint32_t m = c->th->e->cfg.pipeline;
    if (h->live) hb_h2_client_free(&h->cli);
    h->live = 0;
    for (uint32_t i = 0; i < m; i++) {
        h->slots[i].used = 0;
        h->slots[i].c = c;
        h->free[i] = m - 1 - i;
    }
    h->nfree = m;
    h->pending = h->nunw = 0;
    c->rcount = 0;
}

static void h2_release(econn *c, h2slot *sl)
{
    h2conn *h = c->h2;
    if (!sl->submitted) h->pending--;
    sl->used = 0;
    h->free[h->nfree++] = (uint32_t)(sl - h->slots);
    c->rcount--;
}

static void h2_fail_streams(econn *c, int type, uint64_t now)
{
    h2conn *h = c->h2;
    uint32_t m = c->th->e->cfg.pipeline;
    for (uint32_t i = 0; i < m && c->rcount; i++) {
        h2slot *sl = &h->slots[i];
        if (!sl->used) continue;
        account_error(c->th, &sl->q, type, now);
        h2_release(c, sl);
    }
}

static void h2_count_bytes(econn *c, uint64_t now)
{
    h2conn *h = c->h2;
    if (!h->live) return;
    if (now >= c->th->e->measure_ns) {
        c->th->r.bytes_in += h->cli.bytes_in - h->seen_in;
        c->th->r.bytes_out += h->cli.bytes_out - h->seen_out;
    }
    h->seen_in = h->cli.bytes_in;
    h->seen_out = h->cli.bytes_out;
}

/* A connection-fatal result rc of the session (or its start). */
static void h2_fatal(econn *c, int rc, int type, const char *why)
{
    ethread *th = c->th;
    h2conn *h = c->h2;
    char detail[HB_ERR_LEN - 32]; /* room for note_error's "type: " prefix */
    snprintf(detail, sizeof detail, "%s", why ? why : "");
    int goaway = h->live && h->cli.goaway_recv;
    if (h->live) h2_count_bytes(c, hb_now_ns());
    if (rc == HB_E_NO_H2) {
        /* Asked for HTTP/2, the server does not speak it: the run is invalid. */
        if (!th->r.fatal_rc) {
            th->r.fatal_rc = rc;
            snprintf(th->r.fatal, sizeof th->r.fatal, "%s", detail);
        }
        hb_engine_stop(th->e);
        type = HB_ENG_ERR_PROTOCOL;
    } else if (rc == HB_E_H2) {
        type = goaway ? HB_ENG_ERR_GOAWAY : HB_ENG_ERR_PROTOCOL;
    } else if (rc == HB_E_CLOSED || type == HB_ENG_ERR_READ) {
        if (c->rcount == 0) { /* idle, or drained after a graceful GOAWAY: reconnect */
            conn_close(c);
            defer_fill(c);
            return;
        }
        if (rc == HB_E_CLOSED) type = goaway ? HB_ENG_ERR_GOAWAY : HB_ENG_ERR_CLOSED;
    }
    fail_all(c, type, rc, detail);
}

static const hb_h2_client_callbacks H2_CBS_QUIET;

static void h2_on_header(void *ud, void *sud, const char *n, size_t nl, const char *v, size_t vl)
{
    (void)sud;
    ethread *th = ((econn *)ud)->th;
    if (th->have_server || nl != 6 || memcmp(n, "server", 6) != 0) return;
    if (vl >= HB_ENG_SERVER_LEN) vl = HB_ENG_SERVER_LEN - 1;
    memcpy(th->r.server, v, vl);
    th->r.server[vl] = 0;
}

static void h2_on_response(void *ud, void *sud, int status)
{
    econn *c = ud;
    h2slot *sl = sud;
    if (c->h2->cli.cb != &H2_CBS_QUIET) {
        /* header fields are not needed any more, on any connection */
        c->th->have_server = 1;
        c->h2->cli.cb = &H2_CBS_QUIET;
    }
    if (!sl) return;
    sl->status = status;
    sl->first_byte = c->h2->now;
}

static void h2_on_data(void *ud, void *sud, const uint8_t *d, size_t len)
{
    (void)ud;
    (void)d;
    h2slot *sl = sud;
    if (sl) sl->body_bytes += len;
}

static void h2_on_close(void *ud, void *sud, int end, uint32_t code)
{
    econn *c = ud;
    h2slot *sl = sud;
    ethread *th = c->th;
    uint64_t now = c->h2->now;
    if (!sl || !sl->used) return;
    if (end == HB_H2_END_OK && sl->status) {
        account_response(th, &sl->q, sl->status, sl->body_bytes, sl->first_byte, now);
    } else {
        int type = end == HB_H2_END_RESET    ? HB_ENG_ERR_RST_STREAM
                   : end == HB_H2_END_GOAWAY ? HB_ENG_ERR_GOAWAY
                                             : HB_ENG_ERR_PROTOCOL;
        if (!th->r.first_error[0]) {
            char d[HB_ERR_LEN - 32];
            if (end == HB_H2_END_RESET)
                snprintf(d, sizeof d, "the server reset the stream (RST_STREAM %s)",
                         hb_h2_code_name(code));
            else if (end == HB_H2_END_GOAWAY)
                snprintf(d, sizeof d,
                         "the stream was above the last stream id of the server's GOAWAY");
            else
                snprintf(d, sizeof d, "invalid HTTP/2 response (%s%s%.160s)", hb_h2_code_name(code),
                         c->h2->cli.err[0] ? ": " : "", c->h2->cli.err);
            note_error(th, type, HB_E_H2, d);
        }
        account_error(th, &sl->q, type, now);
    }
    h2_release(c, sl);
    if (!th->e->cfg.keepalive) c->closing = 1;
}

static const hb_h2_client_callbacks H2_CBS = {h2_on_header, h2_on_response, h2_on_data, h2_on_close,
                                              NULL};
static const hb_h2_client_callbacks H2_CBS_QUIET = {NULL, h2_on_response, h2_on_data, h2_on_close,
                                                    NULL};

/* The connection (and TLS) is up: start the session. 0, or -1 when c was failed. */
static int h2_start(econn *c)
{
    h2conn *h = c->h2;
    char err[HB_ERR_LEN];
    err[0] = 0;
    hb_h2_client_settings st = {0};
    st.max_streams = c->th->e->cfg.pipeline;
    st.stable_fields = 1; /* e->h2f lives as long as the engine */
    int rc = hb_h2_client_init(&h->cli, &c->s, &st, c->th->have_server ? &H2_CBS_QUIET : &H2_CBS, c,
                               err);
    if (rc < 0) {
        h2_fatal(c, rc, HB_ENG_ERR_PROTOCOL, err);
        return -1;
    }
    h->live = 1;
    h->seen_in = h->seen_out = 0;
    c->closing = 0;
    return 0;
}

/* Streams c may have in flight now: the open ones plus the session's room. */
static uint32_t h2_cap(econn *c)
{
    h2conn *h = c->h2;
    if (!h->live || c->closing) return c->rcount;
    uint32_t cap = c->rcount - h->pending + hb_h2_client_room(&h->cli);
    uint32_t m = c->th->e->cfg.pipeline;
    return cap < m ? cap : m;
}

static void h2_issue(econn *c, uint64_t intended, uint64_t now, int warm)
{
    h2conn *h = c->h2;
    ethread *th = c->th;
    h2slot *sl = &h->slots[h->free[--h->nfree]];
    sl->q.intended = intended;
    sl->q.start = now;
    sl->q.written = 0;
    sl->q.warm = warm;
    sl->used = 1;
    sl->submitted = 0;
    sl->status = 0;
    sl->body_bytes = 0;
    sl->first_byte = 0;
    if (warm) {
        th->warm_inflight++;
    } else {
        th->r.sends++;
        if (now - intended > th->e->late_ns) th->r.sends_late++;
    }
    c->rcount++;
    h->pending++;
}

/* Submit the slots waiting for the session, then write what is queued. */
static void h2_send(econn *c)
{
    h2conn *h = c->h2;
    hb_engine *e = c->th->e;
    if (!h->live) return;
    uint32_t m = e->cfg.pipeline;
    for (uint32_t i = 0; i < m && h->pending; i++) {
        h2slot *sl = &h->slots[i];
        if (!sl->used || sl->submitted) continue;
        hb_h2_body *b = NULL;
        if (e->cfg.body_len) {
            sl->body.data = e->body;
            sl->body.len = e->cfg.body_len;
            b = &sl->body;
        }
        char err[HB_ERR_LEN];
        int id = hb_h2_client_submit(&h->cli, e->h2f, e->cfg.h2_nfields, b, sl, err);
        if (id == HB_AGAIN || id == HB_E_CLOSED) break; /* closes or GOAWAY come through read */
        if (id < 0) {
            fail_all(c, HB_ENG_ERR_WRITE, id, err);
            return;
        }
        sl->submitted = 1;
        h->pending--;
        if (h->nunw < m) h->unw[h->nunw++] = i; /* stamped after the write */
    }
    if (!hb_h2_client_wants_write(&h->cli)) return;
    uint64_t now = hb_now_ns();
    h->now = now;
    int rc = hb_h2_client_write(&h->cli);
    h2_count_bytes(c, now);
    if (rc == HB_AGAIN) {
        int blocked = c->s.want != HB_WANT_READ;
        if (blocked != c->write_blocked) {
            c->write_blocked = blocked;
            update_interest(c);
        }
        return;
    }
    if (rc < 0) {
        h2_fatal(c, rc, HB_ENG_ERR_WRITE, h->cli.err);
        return;
    }
    for (uint32_t k = 0; k < h->nunw; k++) {
        h2slot *sl = &h->slots[h->unw[k]];
        if (sl->used && !sl->q.written) sl->q.written = now;
    }
    h->nunw = 0;
    if (c->write_blocked) {
        c->write_blocked = 0;
        update_interest(c);
    }
}

static void h2_io(econn *c, uint32_t events)
{
    h2conn *h = c->h2;
    h->now = hb_now_ns();
    const uint32_t rd = EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR;
    if (!(events & rd) && !c->read_wants_write) { /* writable only */
        fill(c, h->now);
        return;
    }
    /* Edge-triggered: a short read drained the socket, unless a FIN came too;
     * TLS is level-triggered: epoll reports what OpenSSL has not read. */
    h->cli.short_read_drains = !c->et || !(events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR));
    int rc = hb_h2_client_read(&h->cli);
    h2_count_bytes(c, h->now);
    if (rc != HB_AGAIN) {
        h2_fatal(c, rc, HB_ENG_ERR_READ, h->cli.err);
        return;
    }
    int rw = c->s.want == HB_WANT_WRITE;
    if (rw != c->read_wants_write) {
        c->read_wants_write = rw;
        update_interest(c);
    }
    if (!h->cli.nopen && !h->cli.goaway_recv && hb_h2_client_peer_max_streams(&h->cli) == 0) {
        /* Nothing can ever be sent on this connection: fail what waits and
         * reconnect later (a new connection's first stream goes out before
         * the SETTINGS, so each attempt accounts a request). */
        static const char why[] =
            "the server allows no streams (SETTINGS_MAX_CONCURRENT_STREAMS 0)";
        if (c->rcount) {
            fail_all(c, HB_ENG_ERR_PROTOCOL, HB_E_H2, why);
        } else {
            note_error(c->th, HB_ENG_ERR_PROTOCOL, HB_E_H2, why);
            conn_close(c);
            defer_fill(c);
        }
        c->retry_at = h->now + (RETRY_MIN_NS << RETRY_MAX_SHIFT);
        return;
    }
    if (c->closing && c->rcount == 0) { /* keep-alive off: one request per connection */
        conn_close(c);
        fill(c, h->now);
        return;
    }
    fill(c, h->now);
}

static int h2_timed_out(econn *c, uint64_t now, uint64_t tmo)
{
    uint32_t m = c->th->e->cfg.pipeline;
    for (uint32_t i = 0; i < m; i++) {
        const h2slot *sl = &c->h2->slots[i];
        if (sl->used && now - sl->q.start > tmo) return 1;
    }
    return 0;
}

static void on_io(hb_loop *l, hb_io *io, uint32_t events)
{
    (void)l;
    econn *c = (econn *)((char *)io - offsetof(econn, io));
    /* Event bits are hints only (a stale batch entry may belong to a previous
     * socket of this connection): every path asks the socket itself. */
    switch (c->state) {
    case C_CONNECTING: {
        int rc = hb_sock_connect_check(&c->s);
        if (rc == HB_AGAIN) return;
        if (rc < 0) {
            char err[HB_ERR_LEN];
            hb_sock_errstr(&c->s, rc, err);
            fail_all(c, HB_ENG_ERR_CONNECT, rc, err);
            return;
        }
        on_connected(c);
        return;
    }
    case C_HANDSHAKE:
        do_handshake(c);
        return;
    case C_OPEN:
        if (c->h2) {
            h2_io(c, events);
            return;
        }
        if (c->wleft) {
            flush(c);
            if (c->state != C_OPEN) return;
        }
        if ((events & (EPOLLIN | EPOLLERR | EPOLLHUP | EPOLLRDHUP)) || c->read_wants_write)
            do_read(c, events);
        return;
    default:
        return;
    }
}

static void on_timer(hb_loop *l, hb_timer *t, uint64_t now)
{
    (void)l;
    econn *c = (econn *)((char *)t - offsetof(econn, timer));
    fill(c, now);
}

/* Periodic: per-request timeouts (a scan is cheaper than a timer per request). */
static void on_tick(hb_loop *l, hb_timer *t, uint64_t now)
{
    ethread *th = (ethread *)((char *)t - offsetof(ethread, tick));
    hb_engine *e = th->e;
    if (e->cfg.timeout_ns) {
        for (uint32_t i = 0; i < th->nconns; i++) {
            econn *c = &th->conns[i];
            if (!c->rcount) continue;
            if (c->h2 ? h2_timed_out(c, now, e->cfg.timeout_ns)
                      : now - c->ring[c->rhead].start > e->cfg.timeout_ns)
                fail_all(c, HB_ENG_ERR_TIMEOUT, HB_E_TIMEOUT, "request timed out");
        }
    }
    uint64_t iv = e->cfg.timeout_ns ? e->cfg.timeout_ns / 20 : STOP_POLL_NS;
    if (iv < 1000000) iv = 1000000;
    if (iv > STOP_POLL_NS) iv = STOP_POLL_NS;
    (void)hb_timer_start(l, t, now + iv);
}

static int thread_should_end(ethread *th, uint64_t now)
{
    hb_engine *e = th->e;
    if (atomic_load_explicit(&e->stop, memory_order_relaxed)) return 1;
    if (e->cfg.n) return th->done >= th->quota;
    return now >= e->end_ns;
}

static uint64_t slots_below(uint64_t g, uint64_t C, uint64_t x);

/* Rate mode, at the end of the loop: the measured slots due before the end
 * that no connection issued (the schedule fell behind or the run stopped). */
static void count_unsent(ethread *th)
{
    hb_engine *e = th->e;
    uint64_t C = e->cfg.connections;
    uint64_t T = th->end_ns > e->start_ns ? th->end_ns - e->start_ns : 0;
    uint64_t K = (uint64_t)((double)T / e->slot_ns); /* first slot at or after the end */
    while (K > 0 && slot_time(e, K - 1) >= th->end_ns)
        K--;
    while (slot_time(e, K) < th->end_ns)
        K++;
    if (e->cfg.n && K > e->slot_end) K = e->slot_end;
    for (uint32_t i = 0; i < th->nconns; i++) {
        econn *c = &th->conns[i];
        uint64_t from = c->next_slot > e->k_warm ? c->next_slot : e->k_warm;
        uint64_t a = slots_below(c->gidx, C, K), b = slots_below(c->gidx, C, from);
        if (a > b) th->r.unsent += a - b;
    }
}

static void *thread_main(void *arg)
{
    ethread *th = arg;
    hb_engine *e = th->e;
    /* Signals belong to the caller's thread (Python handles SIGINT there). */
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    /* The default 50 us timer slack would make every constant-rate send late
     * by that much (and the corrected latency include it). */
    (void)prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);

    uint64_t now = hb_now_ns();
    on_tick(&th->loop, &th->tick, now);
    /* A fresh clock per connection: starting one (connect, first write) takes
     * time that must not count against the next one's first request. */
    for (uint32_t i = 0; i < th->nconns; i++)
        fill(&th->conns[i], hb_now_ns());
    while (!thread_should_end(th, hb_now_ns())) {
        uint64_t wait = STOP_POLL_NS;
        if (!e->cfg.n) {
            uint64_t t = hb_now_ns();
            if (e->end_ns > t && e->end_ns - t < wait) wait = e->end_ns - t;
        }
        int rc = hb_loop_run_once(&th->loop, wait);
        if (rc < 0) {
            note_error(th, HB_ENG_ERR_READ, rc, "epoll_wait failed");
            break;
        }
    }
    th->end_ns = hb_now_ns();
    /* n mode: warm-up requests still in flight (queued behind others on a
     * slow connection) get their answers before the connections close, so the
     * server has seen exactly n + warmup_requests; measured time ended above.
     * The request timeout bounds the wait (without one, WARM_DRAIN_NS). */
    uint64_t drain_end = th->end_ns + (e->cfg.timeout_ns ? e->cfg.timeout_ns : WARM_DRAIN_NS);
    while (e->cfg.n && th->warm_inflight && hb_now_ns() < drain_end &&
           !atomic_load_explicit(&e->stop, memory_order_relaxed))
        if (hb_loop_run_once(&th->loop, STOP_POLL_NS) < 0) break;
    th->finished_loop = 1;
    /* Interrupted = the stop flag ended the run before its natural end. */
    th->interrupted = e->cfg.n ? th->done < th->quota : th->end_ns < e->end_ns;
    if (!e->cfg.n && th->end_ns > e->end_ns &&
        !atomic_load_explicit(&e->stop, memory_order_relaxed))
        th->end_ns = e->end_ns;
    if (e->cfg.rate > 0) count_unsent(th);
    for (uint32_t i = 0; i < th->nconns; i++) {
        econn *c = &th->conns[i];
        if (c->h2) {
            for (uint32_t k = 0; k < e->cfg.pipeline; k++)
                if (c->h2->slots[k].used && !c->h2->slots[k].q.warm) th->r.inflight_at_stop++;
        } else {
            for (uint32_t k = 0; k < c->rcount; k++)
                if (!ring_at(c, k)->warm) th->r.inflight_at_stop++;
        }
        c->rcount = 0;
        conn_close(c);
    }
    struct rusage ru;
    if (getrusage(RUSAGE_THREAD, &ru) == 0) {
        th->r.cpu_user_ns =
            (uint64_t)ru.ru_utime.tv_sec * NS_PER_S + (uint64_t)ru.ru_utime.tv_usec * 1000u;
        th->r.cpu_sys_ns =
            (uint64_t)ru.ru_stime.tv_sec * NS_PER_S + (uint64_t)ru.ru_stime.tv_usec * 1000u;
    }
    progress_publish(th);
    pthread_mutex_lock(&e->mu);
    atomic_fetch_add(&e->nfinished, 1);
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
    return NULL;
}

/* ---- lifecycle ---- */

static int result_init(hb_engine_result *r, uint32_t nsec, char *err)
{
    memset(r, 0, sizeof *r);
    r->doc_length = -1;
    hb_hist_config hc = hb_hist_default_config();
    hb_hist *hs[] = {
        &r->latency, &r->latency_uncorrected, &r->processing, &r->ttfb, &r->connect, &r->tls,
        &r->setup};
    for (size_t i = 0; i < sizeof hs / sizeof hs[0]; i++) {
        int rc = hb_hist_init(hs[i], &hc, err);
        if (rc < 0) return rc;
    }
    r->nseconds = nsec;
    if (nsec) {
        r->sec_ok = calloc(nsec, sizeof *r->sec_ok);
        r->sec_err = calloc(nsec, sizeof *r->sec_err);
        if (!r->sec_ok || !r->sec_err)
            return hb_fail(err, HB_E_NOMEM, "out of memory (per-second series)");
    }
    return 0;
}

void hb_engine_result_free(hb_engine_result *r)
{
    hb_hist_free(&r->latency);
    hb_hist_free(&r->latency_uncorrected);
    hb_hist_free(&r->processing);
    hb_hist_free(&r->ttfb);
    hb_hist_free(&r->connect);
    hb_hist_free(&r->tls);
    hb_hist_free(&r->setup);
    free(r->sec_ok);
    free(r->sec_err);
    r->sec_ok = r->sec_err = NULL;
    r->nseconds = 0;
}

static uint64_t slots_below(uint64_t g, uint64_t C, uint64_t x)
{
    return x <= g ? 0 : (x - g + C - 1) / C;
}

int hb_engine_new(hb_engine **out, const hb_engine_config *cfg, char *err)
{
    *out = NULL;
    if (cfg->connections < 1) return hb_fail(err, HB_E_INVALID, "connections must be >= 1");
    if (cfg->threads < 1) return hb_fail(err, HB_E_INVALID, "threads must be >= 1");
    if (cfg->pipeline < 1 || cfg->pipeline > 1024)
        return hb_fail(err, HB_E_INVALID, "pipeline must be in 1..1024");
    if (cfg->h2 && (!cfg->h2_fields || cfg->h2_nfields < 4))
        return hb_fail(err, HB_E_INVALID, "HTTP/2 needs the request's header fields");
    if (cfg->h2 && cfg->body_fd >= 0)
        return hb_fail(err, HB_E_INVALID, "HTTP/2 sends a body from memory only, not from a file");
    if (!cfg->h2 && (!cfg->head || cfg->head_len < 4))
        return hb_fail(err, HB_E_INVALID, "a serialized request head is required");
    if (cfg->addrlen == 0) return hb_fail(err, HB_E_INVALID, "no target address");
    if (!cfg->n && !cfg->duration_ns)
        return hb_fail(err, HB_E_INVALID, "either n or a duration is required");
    if (cfg->rate < 0 || isnan(cfg->rate) || isinf(cfg->rate))
        return hb_fail(err, HB_E_INVALID, "rate must be a finite number >= 0");
    if (cfg->body && cfg->body_fd >= 0)
        return hb_fail(err, HB_E_INVALID, "body bytes and body file are exclusive");

    hb_engine *e = calloc(1, sizeof *e);
    if (!e) return hb_fail(err, HB_E_NOMEM, "out of memory");
    e->cfg = *cfg;
    e->body_fd = -1;
    pthread_mutex_init(&e->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&e->cv, &ca);
    pthread_condattr_destroy(&ca);
    int rc = 0;
    hb_engine_config *c = &e->cfg;
    if (!c->keepalive) c->pipeline = 1;
    if (c->threads > c->connections) c->threads = c->connections;
    e->nthreads = c->threads;

    if (cfg->host) {
        e->host = strdup(cfg->host);
        if (!e->host) goto nomem;
    }
    c->host = e->host;
    if (c->h2) {
        size_t tot = 0;
        for (size_t i = 0; i < c->h2_nfields; i++)
            tot += cfg->h2_fields[i].name_len + cfg->h2_fields[i].value_len;
        e->h2f = calloc(c->h2_nfields, sizeof *e->h2f);
        e->h2buf = malloc(tot + 1);
        if (!e->h2f || !e->h2buf) goto nomem;
        size_t o = 0;
        for (size_t i = 0; i < c->h2_nfields; i++) {
            const hb_header *f = &cfg->h2_fields[i];
            memcpy(e->h2buf + o, f->name, f->name_len);
            e->h2f[i].name = e->h2buf + o;
            e->h2f[i].name_len = f->name_len;
            o += f->name_len;
            memcpy(e->h2buf + o, f->value, f->value_len);
            e->h2f[i].value = e->h2buf + o;
            e->h2f[i].value_len = f->value_len;
            o += f->value_len;
        }
        c->h2_fields = e->h2f;
        c->head = NULL;
        c->head_len = 0;
    } else {
        e->head = malloc(c->head_len);
        if (!e->head) goto nomem;
        memcpy(e->head, cfg->head, c->head_len);
        c->head = e->head;
    }
    if (cfg->body && cfg->body_len) {
        e->body = malloc(cfg->body_len);
        if (!e->body) goto nomem;
        memcpy(e->body, cfg->body, cfg->body_len);
    } else if (cfg->body_fd >= 0) {
        e->body_fd = fcntl(cfg->body_fd, F_DUPFD_CLOEXEC, 0);
        if (e->body_fd < 0) {
            rc = hb_fail(err, -errno, "dup(body file): %s", strerror(errno));
            goto fail;
        }
    } else {
        c->body_len = 0;
    }
    c->body = e->body;
    e->req_len = c->head_len + c->body_len;
    if (!c->h2 && e->body_fd < 0 && e->req_len * c->pipeline <= PBUF_MAX) {
        e->pbuf_len = (size_t)e->req_len * c->pipeline;
        e->pbuf = malloc(e->pbuf_len);
        if (!e->pbuf) goto nomem;
        for (uint32_t i = 0; i < c->pipeline; i++) {
            memcpy(e->pbuf + i * e->req_len, e->head, c->head_len);
            if (c->body_len) memcpy(e->pbuf + i * e->req_len + c->head_len, e->body, c->body_len);
        }
    }

    size_t rcap = c->rbuf_size;
    if (!rcap) {
        rcap = (64u << 20) / c->connections;
        if (rcap > 64 * 1024) rcap = 64 * 1024;
        if (rcap < 16 * 1024) rcap = 16 * 1024;
    }
    if (rcap < 1024) rcap = 1024;

    uint32_t nsec = c->max_seconds;
    if (!nsec) nsec = c->n ? 3600 : (uint32_t)(c->duration_ns / NS_PER_S) + 2;
    e->nsec = nsec;

    e->threads = calloc(e->nthreads, sizeof *e->threads);
    if (!e->threads) goto nomem;
    for (uint32_t t = 0; t < e->nthreads; t++) {
        ethread *th = &e->threads[t];
        th->e = e;
        th->idx = t;
        th->nconns = c->connections / e->nthreads + (t < c->connections % e->nthreads);
        rc = hb_loop_init(&th->loop, 256, th->nconns + 2, err);
        if (rc < 0) goto fail;
        th->loop_ok = 1;
        hb_timer_init(&th->tick, on_tick);
        rc = result_init(&th->r, nsec, err);
        if (rc < 0) goto fail;
        th->conns = calloc(th->nconns, sizeof *th->conns);
        if (!th->conns) goto nomem;
        for (uint32_t i = 0; i < th->nconns; i++) {
            econn *cn = &th->conns[i];
            cn->th = th;
            cn->gidx = t + i * e->nthreads;
            cn->next_slot = cn->gidx;
            hb_io_init(&cn->io, on_io);
            hb_timer_init(&cn->timer, on_timer);
            cn->timer.precise = c->rate > 0; /* scheduled sends go out on time */
            hb_sock_init(&cn->s);
            cn->ring = calloc(c->pipeline, sizeof *cn->ring);
            if (!cn->ring) goto nomem;
            if (c->h2) {
                /* hb_h2_client buffers the input: no read buffer here. */
                h2conn *h = cn->h2 = calloc(1, sizeof *cn->h2);
                if (!h) goto nomem;
                h->slots = calloc(c->pipeline, sizeof *h->slots);
                h->free = calloc(c->pipeline, sizeof *h->free);
                h->unw = calloc(c->pipeline, sizeof *h->unw);
                if (!h->slots || !h->free || !h->unw) goto nomem;
                h2_reset(cn);
            } else {
                cn->rcap = rcap;
                cn->rbuf = malloc(rcap);
                if (!cn->rbuf) goto nomem;
            }
            if (e->body_fd >= 0 && c->tls) {
                cn->wbuf = malloc(FILE_CHUNK);
                if (!cn->wbuf) goto nomem;
            }
        }
    }
    *out = e;
    return 0;
nomem:
    rc = hb_fail(err, HB_E_NOMEM, "out of memory");
fail:
    hb_engine_free(e);
    return rc;
}

int hb_engine_start(hb_engine *e, char *err)
{
    hb_engine_config *c = &e->cfg;
    if (e->running) return hb_fail(err, HB_E_INVALID, "engine already started");
    e->start_ns = hb_now_ns();
    e->measure_ns = e->start_ns + c->warmup_ns;
    e->end_ns = c->n ? UINT64_MAX : e->measure_ns + c->duration_ns;
    if (c->rate > 0) {
        e->slot_ns = 1e9 / c->rate;
        e->late_ns = c->late_ns ? c->late_ns : LATE_DEFAULT_NS;
        e->k_warm = (uint64_t)ceil((double)c->warmup_ns / e->slot_ns);
        e->slot_end = e->k_warm + c->n;
    }
    /* Split n exactly: closed loop by thread, rate mode by owned slots. */
    for (uint32_t t = 0; t < e->nthreads; t++) {
        ethread *th = &e->threads[t];
        if (!c->n) continue;
        if (c->rate > 0) {
            th->quota = 0;
            for (uint32_t i = 0; i < th->nconns; i++) {
                uint64_t g = th->conns[i].gidx;
                th->quota += slots_below(g, c->connections, e->slot_end) -
                             slots_below(g, c->connections, e->k_warm);
            }
        } else {
            th->quota = c->n / e->nthreads + (t < c->n % e->nthreads);
        }
    }
    e->running = 1;
    for (uint32_t t = 0; t < e->nthreads; t++) {
        int rc = pthread_create(&e->threads[t].tid, NULL, thread_main, &e->threads[t]);
        if (rc != 0) {
            atomic_store(&e->stop, 1);
            /* Threads already running will stop; account the missing ones. */
            for (uint32_t k = t; k < e->nthreads; k++)
                atomic_fetch_add(&e->nfinished, 1);
            return hb_fail(err, -rc, "pthread_create: %s", strerror(rc));
        }
        e->threads[t].started = 1;
    }
    return 0;
}

void hb_engine_stop(hb_engine *e)
{
    atomic_store_explicit(&e->stop, 1, memory_order_relaxed);
}

int hb_engine_done(hb_engine *e)
{
    return atomic_load(&e->nfinished) >= e->nthreads;
}

int hb_engine_wait(hb_engine *e, uint64_t timeout_ns)
{
    if (!e->running) return 1;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t t = (uint64_t)ts.tv_nsec + timeout_ns;
    ts.tv_sec += (time_t)(t / NS_PER_S);
    ts.tv_nsec = (long)(t % NS_PER_S);
    pthread_mutex_lock(&e->mu);
    while (!hb_engine_done(e)) {
        if (pthread_cond_timedwait(&e->cv, &e->mu, &ts) != 0) break;
    }
    pthread_mutex_unlock(&e->mu);
    return hb_engine_done(e);
}

/* p50/p99 from the threads' coarse buckets (each read once, relaxed). */
static void plat_percentiles(hb_engine *e, hb_engine_progress *p)
{
    uint64_t sum[PLAT_BUCKETS] = {0}, total = 0;
    for (uint32_t t = 0; t < e->nthreads; t++)
        for (unsigned i = 0; i < PLAT_BUCKETS; i++) {
            uint64_t c = atomic_load_explicit(&e->threads[t].p_lat[i], memory_order_relaxed);
            sum[i] += c;
            total += c;
        }
    if (!total) return;
    uint64_t want50 = (total + 1) / 2, want99 = total - total / 100, acc = 0;
    int have50 = 0;
    for (unsigned i = 0; i < PLAT_BUCKETS; i++) {
        acc += sum[i];
        if (!have50 && acc >= want50) {
            p->p50_ns = plat_lower(i);
            have50 = 1;
        }
        if (acc >= want99) {
            p->p99_ns = plat_lower(i);
            break;
        }
    }
}

void hb_engine_progress_get(hb_engine *e, hb_engine_progress *p)
{
    memset(p, 0, sizeof *p);
    for (uint32_t t = 0; t < e->nthreads; t++) {
        ethread *th = &e->threads[t];
        p->completed += atomic_load_explicit(&th->p_completed, memory_order_relaxed);
        p->ok += atomic_load_explicit(&th->p_ok, memory_order_relaxed);
        p->errors += atomic_load_explicit(&th->p_errors, memory_order_relaxed);
        p->bytes_in += atomic_load_explicit(&th->p_bytes_in, memory_order_relaxed);
    }
    plat_percentiles(e, p);
    uint64_t now = hb_now_ns();
    if (e->running) {
        p->warming_up = now < e->measure_ns;
        p->elapsed_ns = now > e->measure_ns ? now - e->measure_ns : 0;
    }
}

int hb_engine_join(hb_engine *e, int stop, hb_engine_result *r, char *err)
{
    if (!e->running || e->joined) return hb_fail(err, HB_E_INVALID, "engine not running");
    if (stop) hb_engine_stop(e);
    for (uint32_t t = 0; t < e->nthreads; t++)
        if (e->threads[t].started) pthread_join(e->threads[t].tid, NULL);
    e->joined = 1;
    int rc = result_init(r, e->nsec, err);
    if (rc < 0) {
        hb_engine_result_free(r);
        return rc;
    }
    r->interrupted = 0;
    r->start_ns = e->measure_ns;
    r->end_ns = e->measure_ns;
    for (uint32_t t = 0; t < e->nthreads; t++) {
        hb_engine_result *x = &e->threads[t].r;
        r->interrupted |= e->threads[t].interrupted;
        r->completed += x->completed;
        r->responses += x->responses;
        r->ok += x->ok;
        r->non2xx += x->non2xx;
        for (int i = 0; i < 6; i++)
            r->status_class[i] += x->status_class[i];
        for (int i = 0; i < 1000; i++)
            r->status[i] += x->status[i];
        for (int i = 0; i < HB_ENG_NERR; i++)
            r->errors[i] += x->errors[i];
        r->errors_total += x->errors_total;
        r->bytes_in += x->bytes_in;
        r->bytes_out += x->bytes_out;
        r->body_bytes += x->body_bytes;
        r->connections_opened += x->connections_opened;
        r->reconnects += x->reconnects;
        r->tls_resumed += x->tls_resumed;
        r->inflight_at_stop += x->inflight_at_stop;
        r->warmup_requests += x->warmup_requests;
        r->cpu_user_ns += x->cpu_user_ns;
        r->cpu_sys_ns += x->cpu_sys_ns;
        if (e->threads[t].end_ns > r->end_ns) r->end_ns = e->threads[t].end_ns;
        for (uint32_t s = 0; s < r->nseconds; s++) {
            r->sec_ok[s] += x->sec_ok[s];
            r->sec_err[s] += x->sec_err[s];
        }
        if (!r->server[0] && x->server[0]) memcpy(r->server, x->server, sizeof r->server);
        if (r->doc_length < 0) r->doc_length = x->doc_length;
        if (!r->tls_info[0] && x->tls_info[0]) memcpy(r->tls_info, x->tls_info, sizeof r->tls_info);
        if (!r->first_error[0] && x->first_error[0])
            memcpy(r->first_error, x->first_error, sizeof r->first_error);
        if (!r->fatal_rc && x->fatal_rc) {
            r->fatal_rc = x->fatal_rc;
            memcpy(r->fatal, x->fatal, sizeof r->fatal);
        }
        hb_hist_merge(&r->latency, &x->latency, NULL);
        hb_hist_merge(&r->latency_uncorrected, &x->latency_uncorrected, NULL);
        hb_hist_merge(&r->processing, &x->processing, NULL);
        hb_hist_merge(&r->ttfb, &x->ttfb, NULL);
        hb_hist_merge(&r->connect, &x->connect, NULL);
        hb_hist_merge(&r->tls, &x->tls, NULL);
        hb_hist_merge(&r->setup, &x->setup, NULL);
        r->sends += x->sends;
        r->sends_late += x->sends_late;
        r->unsent += x->unsent;
        r->connect_attempts += x->connect_attempts;
        r->connect_failures += x->connect_failures;
        r->connect_fd_exhausted += x->connect_fd_exhausted;
    }
    /* Closed loop: uncorrected == corrected (both from the actual start). */
    if (e->cfg.rate <= 0) hb_hist_merge(&r->latency_uncorrected, &r->latency, NULL);
    /* Trim the series to the seconds the run covered. */
    uint64_t span = r->end_ns > r->start_ns ? r->end_ns - r->start_ns : 0;
    uint64_t used = (span + NS_PER_S - 1) / NS_PER_S;
    if (used < r->nseconds) r->nseconds = (uint32_t)used;
    return 0;
}

void hb_engine_free(hb_engine *e)
{
    if (!e) return;
    if (e->running && !e->joined) {
        hb_engine_stop(e);
        for (uint32_t t = 0; t < e->nthreads; t++)
            if (e->threads && e->threads[t].started) pthread_join(e->threads[t].tid, NULL);
    }
    if (e->threads) {
        for (uint32_t t = 0; t < e->nthreads; t++) {
            ethread *th = &e->threads[t];
            if (th->conns) {
                for (uint32_t i = 0; i < th->nconns; i++) {
                    econn *cn = &th->conns[i];
                    if (cn->s.fd >= 0) hb_sock_close(&cn->s);
                    free(cn->rbuf);
                    free(cn->ring);
                    free(cn->wbuf);
                    if (cn->h2) {
                        if (cn->h2->live) hb_h2_client_free(&cn->h2->cli);
                        free(cn->h2->slots);
                        free(cn->h2->free);
                        free(cn->h2->unw);
                        free(cn->h2);
                    }
                }
                free(th->conns);
            }
            if (th->loop_ok) hb_loop_free(&th->loop);
            hb_engine_result_free(&th->r);
        }
        free(e->threads);
    }
    if (e->body_fd >= 0) close(e->body_fd);
    free(e->head);
    free(e->h2f);
    free(e->h2buf);
    free(e->host);
    free(e->body);
    free(e->pbuf);
    pthread_mutex_destroy(&e->mu);
    pthread_cond_destroy(&e->cv);
    free(e);
}
