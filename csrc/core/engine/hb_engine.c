/* hb_engine.c - the load generator: per-thread epoll loops driving
 * connections through connect -> (TLS handshake) -> the protocol's
 * requests and responses, with the run's scheduling and accounting.
 *
 * Per connection state lives in `econn` (inside the protocol's connection
 * type), per thread state (loop, counters, histograms) in `ethread`; the
 * protocols (hb_engine_h1.c, hb_engine_h2.c, hb_engine_h3.c) are reached only through
 * e->proto, see hb_engine_int.h. Nothing on the request path allocates: a
 * request is a slot with timestamps, its bytes come from buffers prepared by
 * hb_engine_new.
 */
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
#include <time.h>
#include <unistd.h>

#include "base/hb_clock.h"
#include "engine/hb_engine_int.h"
#include "net/hb_tls.h"

#define NS_PER_S HB__ENG_NS_PER_S
#define STOP_POLL_NS (20ull * 1000000ull) /* bound on how late a stop is noticed */
#define WARM_DRAIN_NS (10ull * NS_PER_S)  /* n mode, no timeout: wait for warm-up answers */
#define ENGINE_TLS_RBUF (64u * 1024u)     /* TLS input per recv(): many records per syscall */
#define LATE_DEFAULT_NS (10ull * 1000000ull)
#define RETRY_MIN_NS HB__ENG_RETRY_MIN_NS
#define RETRY_MAX_SHIFT HB__ENG_RETRY_MAX_SHIFT
/* Progress latency: 1 significant digit is 16 log-linear buckets per power
 * of two (a bucket spans 1/16 of its lower bound). */
#define PROG_SIGFIGS 1

static const char *const err_names[HB_ENG_NERR] = {"connect", "tls",      "write",   "read",
                                                   "timeout", "protocol", "closed",  "rst_stream",
                                                   "goaway",  "upgrade",  "ws_close"};

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

/* The per-second latency bucket of v ns (see HB_ENG_SEC_SUB). */
static inline uint32_t sec_bucket(uint64_t v)
{
    if (v < HB_ENG_SEC_SUB) return (uint32_t)v;
    uint32_t e = 63u - (uint32_t)__builtin_clzll(v); /* >= 4 */
    uint64_t b = (uint64_t)(e - 3) * HB_ENG_SEC_SUB + ((v >> (e - 4)) & (HB_ENG_SEC_SUB - 1));
    return b < HB_ENG_SEC_BUCKETS ? (uint32_t)b : HB_ENG_SEC_BUCKETS - 1;
}

/* Count a finished request in its second; a response (lat != UINT64_MAX) also
 * records its latency in that second's histogram. */
static inline void sec_count(ethread *th, uint64_t now, int ok, uint64_t lat)
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
    if (lat != UINT64_MAX) r->sec_lat[i * HB_ENG_SEC_BUCKETS + sec_bucket(lat)]++;
}

void hb__eng_note_error(ethread *th, int type, int rc, const char *detail)
{
    if (th->r.first_error[0]) return;
    snprintf(th->r.first_error, sizeof th->r.first_error, "%s: %s", hb_eng_err_name(type),
             (detail && *detail) ? detail : hb_strerror(rc));
}

void hb__eng_account_error(ethread *th, const req_slot *q, int type, uint64_t now)
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
    sec_count(th, now, 0, UINT64_MAX);
    progress_publish(th);
}

/* ---- accounting, for the protocols ---- */

void hb__eng_header(ethread *th, const char *name, size_t nl, const char *value, size_t vl)
{
    if (th->have_server || th->r.server[0] || nl != 6 || strncasecmp(name, "server", 6) != 0)
        return;
    if (vl >= HB_ENG_SERVER_LEN) vl = HB_ENG_SERVER_LEN - 1;
    memcpy(th->r.server, value, vl);
    th->r.server[vl] = 0;
}

void hb__eng_fatal(ethread *th, int rc, const char *detail)
{
    if (!th->r.fatal_rc) {
        th->r.fatal_rc = rc;
        snprintf(th->r.fatal, sizeof th->r.fatal, "%s", detail);
    }
    hb_engine_stop(th->e);
}

/* ---- connection helpers ---- */

static void on_io(hb_loop *l, hb_io *io, uint32_t events);
static void on_timer(hb_loop *l, hb_timer *t, uint64_t now);

void hb__eng_update_interest(econn *c)
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

void hb__eng_defer_fill(econn *c)
{
    /* A refused connect can fail synchronously, again and again. */
    if (hb_timer_start(&c->th->loop, &c->timer, hb_now_ns() + 1) != 0) {
        /* Heap full cannot happen (one timer per connection); ignore. */
    }
}

void hb__eng_conn_close(econn *c)
{
    c->th->e->proto->reset(c);
    if (c->s.fd >= 0) hb_sock_close(&c->s);
    hb_io_forget(&c->io);
    c->io.fn = on_io;
    c->state = C_IDLE;
    c->read_wants_write = c->write_blocked = 0;
    c->et = 0;
    c->closing = 0;
}

void hb__eng_fail_all(econn *c, int type, int rc, const char *detail)
{
    ethread *th = c->th;
    uint64_t now = hb_now_ns();
    /* A protocol with its own transport (open) counts a connection as opened when
     * its handshake completes: any failure before that is a failed attempt. */
    int attempt_failed =
        type == HB_ENG_ERR_CONNECT || (th->e->proto->open && c->state == C_HANDSHAKE);
    hb__eng_note_error(th, type, rc, detail);
    th->e->proto->fail_inflight(c, type, now);
    hb__eng_conn_close(c);
    if (attempt_failed) {
        /* A refusing target must not be hammered: back off before retrying. */
        th->r.connect_failures++;
        if (rc == -EMFILE || rc == -ENFILE) th->r.connect_fd_exhausted++;
        uint32_t sh = c->conn_fails < RETRY_MAX_SHIFT ? c->conn_fails : RETRY_MAX_SHIFT;
        c->conn_fails++;
        c->retry_at = now + (RETRY_MIN_NS << sh);
    }
    hb__eng_defer_fill(c);
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
    if (e->proto->open) {
        int fd = e->proto->open(c, err);
        if (fd < 0) {
            hb__eng_fail_all(c, HB_ENG_ERR_CONNECT, fd, err);
            return;
        }
        c->et = 1;
        c->io.fn = e->proto->on_io;
        int arc = hb_loop_add(&th->loop, &c->io, fd, EPOLLIN | EPOLLET);
        if (arc < 0) {
            hb__eng_fail_all(c, HB_ENG_ERR_CONNECT, arc, "epoll_ctl");
            return;
        }
        c->state = C_HANDSHAKE;
        c->hs_start = c->conn_start;
        return;
    }
    int rc = hb_sock_connect(&c->s, (const struct sockaddr *)&e->cfg.addr, e->cfg.addrlen, 0, err);
    if (rc < 0 && rc != HB_AGAIN) {
        hb__eng_fail_all(c, HB_ENG_ERR_CONNECT, rc, err);
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
        hb__eng_fail_all(c, HB_ENG_ERR_CONNECT, arc, "epoll_ctl");
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
    const hb__eng_proto *pr = c->th->e->proto;
    if (pr->start && pr->start(c) < 0) return;
    /* From now on epoll's reports go straight to the protocol. */
    c->io.fn = pr->on_io;
    hb__eng_update_interest(c);
    hb__eng_fill(c, hb_now_ns());
}

static void count_opened(ethread *th, econn *c)
{
    th->r.connections_opened++;
    /* the caller ends a run that never connects without waiting for its end */
    atomic_store_explicit(&th->p_connected, th->r.connections_opened, memory_order_relaxed);
    c->conn_fails = 0;
    if (c->opened_before && th->e->cfg.keepalive) th->r.reconnects++;
    c->opened_before = 1;
}

void hb__eng_opened(econn *c, uint64_t hs_ns)
{
    ethread *th = c->th;
    count_opened(th, c);
    if (!c->conn_warm) hb_hist_record(&th->r.tls, hs_ns);
    conn_ready(c);
}

static void do_handshake(econn *c)
{
    ethread *th = c->th;
    char err[HB_ERR_LEN];
    err[0] = 0;
    int rc = hb_sock_handshake(&c->s, err);
    if (rc == HB_AGAIN) {
        hb__eng_update_interest(c);
        return;
    }
    if (rc < 0) {
        if (!err[0]) hb_sock_errstr(&c->s, rc, err);
        hb__eng_fail_all(c, HB_ENG_ERR_TLS, rc, err);
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
    count_opened(th, c);
    if (e->cfg.tls) {
        char err[HB_ERR_LEN];
        err[0] = 0;
        int rc = hb_sock_tls_client(&c->s, e->cfg.tls, e->cfg.host, err);
        if (rc < 0) {
            hb__eng_fail_all(c, HB_ENG_ERR_TLS, rc, err);
            return;
        }
        /* One read syscall per batch of records instead of header + body reads. */
        rc = hb_sock_tls_read_buffer(&c->s, ENGINE_TLS_RBUF, err);
        if (rc < 0) {
            hb__eng_fail_all(c, HB_ENG_ERR_TLS, rc, err);
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

static uint64_t slot_time(hb_engine *e, uint64_t s)
{
    return e->start_ns + (uint64_t)((double)s * e->slot_ns);
}

/* Top up c's requests in flight: up to the protocol's cap on an open
 * connection, one to trigger a (re)connect otherwise; then write or connect. */
void hb__eng_fill(econn *c, uint64_t now)
{
    ethread *th = c->th;
    hb_engine *e = th->e;
    if (th->finished_loop) return;
    if (c->state != C_OPEN && c->state != C_IDLE) return; /* connecting: wait */
    if (c->state == C_IDLE && c->retry_at > now) {
        (void)hb_timer_start(&th->loop, &c->timer, c->retry_at);
        return;
    }
    const hb__eng_proto *pr = e->proto;
    uint32_t cap = c->state == C_OPEN ? pr->cap(c) : 1;
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
            pr->issue(c, t, now, s < e->k_warm);
            c->next_slot += e->cfg.connections;
        }
    } else {
        int warm;
        while (c->rcount < cap && may_issue_closed(th, now, &warm)) {
            pr->issue(c, now, now, warm);
            if (!warm) th->issued++;
        }
    }
    if (c->state == C_IDLE) {
        if (c->rcount) start_connect(c);
    } else {
        pr->send(c, c->rcount - before);
    }
}

/* After a write of some bytes: stamp the requests whose first byte went out. */
void hb__eng_account_response(ethread *th, const req_slot *q, int st, uint64_t body,
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
        hb_hist_record_relaxed(&th->prog, now - q->intended);
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
        sec_count(th, now, ok, now - q->intended);
        progress_publish(th);
    }
}

static void on_io(hb_loop *l, hb_io *io, uint32_t events)
{
    econn *c = hb__eng_conn_of(io);
    /* Event bits are hints only (a stale batch entry may belong to a previous
     * socket of this connection): every path asks the socket itself. */
    switch (c->state) {
    case C_CONNECTING: {
        int rc = hb_sock_connect_check(&c->s);
        if (rc == HB_AGAIN) return;
        if (rc < 0) {
            char err[HB_ERR_LEN];
            hb_sock_errstr(&c->s, rc, err);
            hb__eng_fail_all(c, HB_ENG_ERR_CONNECT, rc, err);
            return;
        }
        on_connected(c);
        return;
    }
    case C_HANDSHAKE:
        do_handshake(c);
        return;
    case C_OPEN: /* not reached while io.fn is the protocol's */
        c->th->e->proto->on_io(l, io, events);
        return;
    default:
        return;
    }
}

static void on_timer(hb_loop *l, hb_timer *t, uint64_t now)
{
    (void)l;
    econn *c = (econn *)((char *)t - offsetof(econn, timer));
    hb__eng_fill(c, now);
}

/* Periodic: per-request timeouts (a scan is cheaper than a timer per request). */
static void on_tick(hb_loop *l, hb_timer *t, uint64_t now)
{
    ethread *th = (ethread *)((char *)t - offsetof(ethread, tick));
    hb_engine *e = th->e;
    if (e->cfg.timeout_ns) {
        for (uint32_t i = 0; i < th->nconns; i++) {
            econn *c = hb__eng_conn(th, i);
            if (c->rcount && e->proto->timed_out(c, now, e->cfg.timeout_ns))
                hb__eng_fail_all(c, HB_ENG_ERR_TIMEOUT, HB_E_TIMEOUT, "request timed out");
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
        econn *c = hb__eng_conn(th, i);
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
        hb__eng_fill(hb__eng_conn(th, i), hb_now_ns());
    while (!thread_should_end(th, hb_now_ns())) {
        uint64_t wait = STOP_POLL_NS;
        if (!e->cfg.n) {
            uint64_t t = hb_now_ns();
            if (e->end_ns > t && e->end_ns - t < wait) wait = e->end_ns - t;
        }
        int rc = hb_loop_run_once(&th->loop, wait);
        if (rc < 0) {
            hb__eng_note_error(th, HB_ENG_ERR_READ, rc, "epoll_wait failed");
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
        econn *c = hb__eng_conn(th, i);
        th->r.inflight_at_stop += e->proto->inflight_measured(c);
        c->rcount = 0;
        hb__eng_conn_close(c);
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
    if (cfg->h2 + cfg->h3 + cfg->ws > 1)
        return hb_fail(err, HB_E_INVALID, "h2, h3 and ws are exclusive");
    if (cfg->stream && cfg->ws)
        return hb_fail(err, HB_E_INVALID, "stream mode is HTTP's, not WebSocket's");
    const hb__eng_proto *proto = cfg->h3   ? &hb__eng_h3
                                 : cfg->h2 ? &hb__eng_h2
                                 : cfg->ws ? &hb__eng_ws
                                           : &hb__eng_h1;
    int crc = proto->check(cfg, err);
    if (crc < 0) return crc;
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
    e->proto = proto;
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
    rc = proto->prepare(e, err);
    if (rc < 0) goto fail;

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
        rc = hb_loop_init(&th->loop, 256, (size_t)th->nconns * (1 + proto->timers) + 2, err);
        if (rc < 0) goto fail;
        th->loop_ok = 1;
        hb_timer_init(&th->tick, on_tick);
        rc = hb__eng_result_init(&th->r, nsec, err);
        if (rc < 0) goto fail;
        hb_hist_config pc = {1, HB_HIST_DEFAULT_HIGHEST, PROG_SIGFIGS};
        rc = hb_hist_init(&th->prog, &pc, err);
        if (rc < 0) goto fail;
        if (proto->thread_size) {
            th->proto = calloc(1, proto->thread_size);
            if (!th->proto) goto nomem;
        }
        th->conns = calloc(th->nconns, proto->conn_size);
        if (!th->conns) goto nomem;
        for (uint32_t i = 0; i < th->nconns; i++) {
            econn *cn = hb__eng_conn(th, i);
            cn->th = th;
            cn->gidx = t + i * e->nthreads;
            cn->next_slot = cn->gidx;
            hb_io_init(&cn->io, on_io);
            hb_timer_init(&cn->timer, on_timer);
            cn->timer.precise = c->rate > 0; /* scheduled sends go out on time */
            hb_sock_init(&cn->s);
            rc = proto->conn_init(cn, rcap, err);
            if (rc < 0) goto fail;
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
                uint64_t g = hb__eng_conn(th, i)->gidx;
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

/* p50/p99 from a snapshot of the threads' progress histograms: the lower
 * bound of the bucket where each falls. */
static void prog_percentiles(hb_engine *e, hb_engine_progress *p)
{
    hb_hist sum;
    hb_hist_config pc = {1, HB_HIST_DEFAULT_HIGHEST, PROG_SIGFIGS};
    if (hb_hist_init(&sum, &pc, NULL) < 0) return; /* out of memory: no percentiles */
    for (uint32_t t = 0; t < e->nthreads; t++)
        (void)hb_hist_add_relaxed(&sum, &e->threads[t].prog, NULL);
    uint64_t total = hb_hist_count(&sum);
    uint64_t want50 = (total + 1) / 2, want99 = total - total / 100;
    int have50 = 0;
    hb_hist_iter it;
    hb_hist_iter_init(&it, &sum);
    while (total && hb_hist_iter_next(&it)) {
        if (!have50 && it.cumulative >= want50) {
            p->p50_ns = it.lo;
            have50 = 1;
        }
        if (it.cumulative >= want99) {
            p->p99_ns = it.lo;
            break;
        }
    }
    hb_hist_free(&sum);
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
        p->connected += atomic_load_explicit(&th->p_connected, memory_order_relaxed);
    }
    prog_percentiles(e, p);
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
    int rc = hb__eng_result_init(r, e->nsec, err);
    if (rc < 0) {
        hb_engine_result_free(r);
        return rc;
    }
    r->interrupted = 0;
    r->start_ns = e->measure_ns;
    r->end_ns = e->measure_ns;
    for (uint32_t t = 0; t < e->nthreads; t++) {
        r->interrupted |= e->threads[t].interrupted;
        if (e->threads[t].end_ns > r->end_ns) r->end_ns = e->threads[t].end_ns;
        hb__eng_result_add(r, &e->threads[t].r);
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
                    econn *cn = hb__eng_conn(th, i);
                    if (!cn->th) continue; /* not initialised (hb_engine_new failed) */
                    if (cn->s.fd >= 0) hb_sock_close(&cn->s);
                    e->proto->conn_free(cn);
                }
                free(th->conns);
            }
            if (th->loop_ok) hb_loop_free(&th->loop);
            hb_engine_result_free(&th->r);
            hb_hist_free(&th->prog);
            free(th->proto);
        }
        free(e->threads);
    }
    if (e->body_fd >= 0) close(e->body_fd);
    if (e->proto) e->proto->cleanup(e);
    free(e->host);
    free(e->body);
    pthread_mutex_destroy(&e->mu);
    pthread_cond_destroy(&e->cv);
    free(e);
}
