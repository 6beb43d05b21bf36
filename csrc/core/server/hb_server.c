/* hb_server.c - the embedded test server's workers and public API (see
 * hb_server.h). Each worker runs one hb_loop: its listener, the stop
 * eventfd, its connections (hb_server_conn.c) and their timers, plus a
 * 50 ms timeout sweep that runs while there is something to sweep. */
#include "server/hb_server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <malloc.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sched.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/hb_clock.h"
#include "base/hb_content.h"
#include "server/hb_server_int.h"

#define SWEEP_NS 50000000ull /* timeout sweep period */
#define MAX_EVENTS 256
#define TIMERS_INIT 256 /* the heap doubles past this many armed timers */

#define WORKER_OF(ptr, member) ((hb__worker *)(void *)((char *)(ptr)-offsetof(hb__worker, member)))

/* ---- worker loop ---- */

/* The protocols a TCP connection may switch to besides HTTP/1.1. */
const hb__conn_proto *const hb__conn_protos[] = {&hb__srv_h2, NULL};

/* The worker has no connections left (or stops): pooled memory goes back. */
static void worker_idle(hb__worker *w)
{
    for (const hb__conn_proto *const *p = hb__conn_protos; *p; p++)
        (*p)->worker_idle(w);
}

static void update_date(hb__worker *w)
{
    time_t t = time(NULL);
    if (t == w->date_sec) return;
    w->date_sec = t;
    w->hc.len = 0; /* the cached head has the old Date */
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(w->date, sizeof w->date, "%a, %d %b %Y %H:%M:%S GMT", &tm);
}

/* Every wake-up: the clock for deadlines, and the Date tick. */
static void on_wake(hb_loop *l)
{
    hb__worker *w = WORKER_OF(l, loop);
    w->now = hb_now_ns();
    update_date(w);
}

/* The last connection closed: hand pooled buffers and freed heap pages back
 * to the system, so a burst of connections leaves no resident memory. */
static void give_back(hb__worker *w)
{
    while (w->free) {
        hb__conn *c = w->free;
        w->free = c->next;
        hb__conn_release(w->srv, c);
    }
    w->nfree = 0;
    worker_idle(w);
    (void)malloc_trim(0);
}

/* Arm the sweep unless it is. It is unarmed only while the worker has no
 * connections, hence no connection timers: the heap has room, so this
 * cannot fail. */
static void sweep_arm(hb__worker *w)
{
    if (!hb_timer_armed(&w->sweep)) (void)hb_timer_start(&w->loop, &w->sweep, w->now + SWEEP_NS);
}

static void listen_pause(hb__worker *w, int pause)
{
    if (pause == w->listen_paused) return;
    if (pause) {
        (void)hb_loop_del(&w->loop, &w->listen_io);
        sweep_arm(w); /* the sweep resumes accepting */
    } else if (hb_loop_add(&w->loop, &w->listen_io, w->lfd, EPOLLIN) != 0) {
        return; /* still paused: the next sweep tries again */
    }
    w->listen_paused = pause;
}

static void on_sweep(hb_loop *l, hb_timer *t, uint64_t now)
{
    hb__worker *w = WORKER_OF(t, sweep);
    w->now = now;
    /* re-armed first, into the slot it just left, so it never meets a full heap */
    (void)hb_timer_start(l, t, now + SWEEP_NS);
    hb__conn *next;
    for (hb__conn *c = w->conns; c; c = next) {
        next = c->next;
        hb__conn_sweep(c);
    }
    if (w->listen_paused) listen_pause(w, 0);
    if (!w->conns && !w->listen_paused) {
        hb_timer_stop(l, t); /* idle: sleep until an accept */
        give_back(w);
    }
}

/* Beyond max_connections: a polite refusal, written without waiting (the
 * socket's buffer is empty), then FIN. TLS peers get the FIN alone. */
static void refuse(hb__worker *w, int fd)
{
    static const char busy[] = "HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\n"
                               "Content-Type: text/plain\r\nContent-Length: 21\r\n\r\n"
                               "too many connections\n";
    HB__ADD(w->refused, 1); /* counted before the peer can see the answer */
    if (!w->srv->tls) (void)send(fd, busy, sizeof busy - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    (void)shutdown(fd, SHUT_WR);
    close(fd);
}

static void on_listen(hb_loop *l, hb_io *io, uint32_t events)
{
    hb__worker *w = WORKER_OF(io, listen_io);
    (void)l;
    (void)events;
    for (int i = 0; i < 256; i++) {
        int fd = accept4(w->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO) continue;
            /* out of fds/memory: stop accepting until the next sweep */
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
                listen_pause(w, 1);
            return;
        }
        int max = w->srv->o.max_connections;
        if (max > 0 && w->nconns >= max) {
            refuse(w, fd);
            continue;
        }
        sweep_arm(w);
        if (hb__conn_accept(w, fd) < 0) {
            close(fd);
            listen_pause(w, 1);
            return;
        }
    }
}

static void on_stop(hb_loop *l, hb_io *io, uint32_t events)
{
    (void)l;
    (void)events;
    WORKER_OF(io, stop_io)->stop = 1;
}

static void *worker_main(void *arg)
{
    hb__worker *w = arg;
    if (pthread_getcpuclockid(pthread_self(), &w->cpu_clock) == 0)
        __atomic_store_n(&w->has_cpu_clock, 1, __ATOMIC_RELEASE);
    /* timers (delay/drip/stall) fire within 10 us instead of the default 50 */
    (void)prctl(PR_SET_TIMERSLACK, 10000UL, 0, 0, 0);
    w->now = hb_now_ns();
    update_date(w);
    while (!w->stop && !__atomic_load_n(&w->srv->stopping, __ATOMIC_ACQUIRE)) {
        /* connections whose read budget ran out get their next turn after a
         * poll (no wait) has let the others in */
        if (hb_loop_run_once(&w->loop, w->ready ? 0 : UINT64_MAX) < 0) break;
        if (w->ready) hb__conn_run_ready(w);
    }
    hb__h3_worker_stop(w);
    while (w->conns)
        hb__conn_free(w->conns, 0);
    worker_idle(w);
    w->final_cpu_ns = hb_thread_cpu_ns();
    __atomic_store_n(&w->exited, 1, __ATOMIC_RELEASE);
    return NULL;
}

/* ---- public API ---- */

void hb_server_opts_init(hb_server_opts *o)
{
    memset(o, 0, sizeof *o);
    o->host = "127.0.0.1";
    o->threads = 1;
    o->session_resumption = 1;
    o->request_timeout_ms = 10000;
    o->keepalive_timeout_ms = 30000;
    o->max_head = 16384;
    o->backlog = 4096;
    o->http2 = hb_h2_server_available();
    o->h2_max_concurrent_streams = 100;
    o->h2_initial_window_size = 65535;
    o->h2_max_frame_size = 16384;
    o->http3 = 0;
    o->alt_svc = 1;
    o->h3_early_data = 1;
}

/* reuseport: join the SO_REUSEPORT group (workers > 1); listen=0 makes a
 * bind-only probe. */
static int make_listener(hb_server *s, const struct sockaddr_storage *ss, socklen_t len,
                         int reuseport, int do_listen, char *err)
{
    int fd = socket(ss->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return hb_fail(err, -errno, "socket: %s", strerror(errno));
    int one = 1;
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        (reuseport && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) != 0) ||
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0) {
        int e = errno;
        close(fd);
        return hb_fail(err, -e, "setsockopt: %s", strerror(e));
    }
    if (bind(fd, (const struct sockaddr *)ss, len) != 0) {
        int e = errno;
        close(fd);
        return hb_fail(err, -e, "bind %s:%d: %s", s->host, s->port, strerror(e));
    }
    if (do_listen && listen(fd, s->o.backlog) != 0) {
        int e = errno;
        close(fd);
        return hb_fail(err, -e, "listen: %s", strerror(e));
    }
    return fd;
}

/* The worker's loop with its listener and the stop eventfd registered. */
static int worker_init(hb__worker *w, char *err)
{
    hb_server *s = w->srv;
    int rc = hb_loop_init(&w->loop, MAX_EVENTS, TIMERS_INIT, err);
    if (rc < 0) return rc;
    w->loop_ok = 1;
    w->loop.grow_timers = 1; /* one timer per waiting connection, and no connection limit */
    w->loop.on_wake = on_wake;
    hb_io_init(&w->listen_io, on_listen);
    hb_io_init(&w->stop_io, on_stop);
    hb_timer_init(&w->sweep, on_sweep);
    if ((rc = hb_loop_add(&w->loop, &w->listen_io, w->lfd, EPOLLIN)) != 0 ||
        (rc = hb_loop_add(&w->loop, &w->stop_io, s->stopfd, EPOLLIN)) != 0)
        return hb_fail(err, rc, "epoll_ctl: %s", strerror(-rc));
    return 0;
}

static void server_cleanup(hb_server *s)
{
    for (int i = 0; i < s->nworkers; i++) {
        hb__worker *w = &s->w[i];
        if (w->lfd >= 0) close(w->lfd);
        w->lfd = -1;
        hb__h3_worker_cleanup(w);
        if (w->loop_ok) hb_loop_free(&w->loop);
        w->loop_ok = 0;
        hb__conn *c = w->free;
        while (c) {
            hb__conn *n = c->next;
            hb__conn_release(s, c);
            c = n;
        }
        w->free = NULL;
        w->nfree = 0;
    }
    if (s->stopfd >= 0) close(s->stopfd);
    s->stopfd = -1;
}

int hb_server_start(hb_server **out, const hb_server_opts *o, char *err)
{
    hb_server_opts def;
    if (!o) {
        hb_server_opts_init(&def);
        o = &def;
    }
    *out = NULL;
    if (o->threads < 1 || o->threads > HB_SERVER_MAX_THREADS)
        return hb_fail(err, HB_E_INVALID, "threads must be 1..%d", HB_SERVER_MAX_THREADS);
    if (o->port < 0 || o->port > 65535) return hb_fail(err, HB_E_INVALID, "bad port %d", o->port);
    if (o->request_timeout_ms <= 0 || o->keepalive_timeout_ms <= 0)
        return hb_fail(err, HB_E_INVALID, "timeouts must be > 0");
    if (o->max_head < 256 || o->max_head > (64u << 20))
        return hb_fail(err, HB_E_INVALID, "max_head must be 256 B .. 64 MiB");
    if (o->http2 && !hb_h2_server_available())
        return hb_fail(err, HB_E_UNSUPPORTED, "%s", HB_H2_SERVER_MISSING);
    if (o->http3 && !o->tls)
        return hb_fail(err, HB_E_INVALID,
                       "http3 needs tls: HTTP/3 runs over QUIC, which is always encrypted");
    if (o->http3 && !hb_h3_server_available())
        return hb_fail(err, HB_E_UNSUPPORTED, "%s", HB_H3_SERVER_MISSING);
    if (o->h2_max_concurrent_streams < 1 ||
        (unsigned)o->h2_max_concurrent_streams > HB_H2_MAX_STREAMS_MAX)
        return hb_fail(err, HB_E_INVALID, "h2_max_concurrent_streams must be 1..%u",
                       HB_H2_MAX_STREAMS_MAX);
    if (o->h2_initial_window_size < 0)
        return hb_fail(err, HB_E_INVALID, "h2_initial_window_size must be 0..%u", HB_H2_WINDOW_MAX);
    if ((unsigned)o->h2_max_frame_size < HB_H2_FRAME_MIN ||
        (unsigned)o->h2_max_frame_size > HB_H2_FRAME_MAX)
        return hb_fail(err, HB_E_INVALID, "h2_max_frame_size must be %u..%u", HB_H2_FRAME_MIN,
                       HB_H2_FRAME_MAX);
    hb_server *s = calloc(1, sizeof *s);
    if (!s) return hb_fail(err, HB_E_NOMEM, "out of memory");
    s->o = *o;
    snprintf(s->host, sizeof s->host, "%s", o->host ? o->host : "127.0.0.1");
    s->o.host = s->host;
    if (s->o.backlog <= 0) s->o.backlog = 4096;
    s->rbuf_size = o->max_head < 4096 ? 4096 : o->max_head;
    s->content = hb_content_buf();
    s->stopfd = -1;
    s->nworkers = o->threads;
    s->w = calloc((size_t)s->nworkers, sizeof *s->w);
    if (!s->w) {
        free(s);
        return hb_fail(err, HB_E_NOMEM, "out of memory");
    }
    for (int i = 0; i < s->nworkers; i++)
        s->w[i].lfd = s->w[i].ufd = -1;
    int rc;
    struct sockaddr_storage ss;
    socklen_t slen;
    if ((rc = hb_resolve_host(s->host, o->port, &ss, &slen, err)) < 0) goto fail;
    if (o->tls) {
        hb_tls_server_opts to;
        hb_tls_server_opts_init(&to);
        to.cert_file = o->cert_file;
        to.key_file = o->key_file;
        to.session_resumption = o->session_resumption;
        to.alpn_h2 = o->http2;
        if ((rc = hb_tls_server_ctx_new(&s->tls, &to, err)) < 0) goto fail;
    }
    s->stopfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (s->stopfd < 0) {
        rc = hb_fail(err, -errno, "eventfd: %s", strerror(errno));
        goto fail;
    }
    s->port = o->port;
    int reuseport = s->nworkers > 1;
    if (reuseport && o->port > 0) {
        /* SO_REUSEPORT would silently share a port someone else listens on
         * with SO_REUSEPORT too; a plain bind first says EADDRINUSE. (An
         * ephemeral port is always a fresh one.) */
        if ((rc = make_listener(s, &ss, slen, 0, 0, err)) < 0) goto fail;
        close(rc);
    }
    s->max_streams = (uint32_t)o->h2_max_concurrent_streams;
    for (const hb__conn_proto *const *p = hb__conn_protos; *p; p++)
        if ((*p)->enabled(s)) s->mux = *p;
    for (int i = 0; i < s->nworkers; i++) {
        hb__worker *w = &s->w[i];
        w->srv = s;
        w->idx = i;
        w->req_timeout_ns = (uint64_t)o->request_timeout_ms * HB__SRV_MS;
        for (const hb__conn_proto *const *p = hb__conn_protos; *p; p++)
            (*p)->worker_init(w);
        if ((rc = make_listener(s, &ss, slen, reuseport, 1, err)) < 0) goto fail;
        w->lfd = rc;
        if (i == 0) { /* port 0: every later listener joins the chosen port */
            struct sockaddr_storage bound;
            socklen_t bl = sizeof bound;
            if (getsockname(w->lfd, (struct sockaddr *)&bound, &bl) != 0) {
                rc = hb_fail(err, -errno, "getsockname: %s", strerror(errno));
                goto fail;
            }
            s->port = ntohs(bound.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&bound)->sin6_port
                                                        : ((struct sockaddr_in *)&bound)->sin_port);
            if (ss.ss_family == AF_INET6)
                ((struct sockaddr_in6 *)&ss)->sin6_port = htons((uint16_t)s->port);
            else
                ((struct sockaddr_in *)&ss)->sin_port = htons((uint16_t)s->port);
        }
        if ((rc = worker_init(w, err)) < 0) goto fail;
    }
    /* HTTP/3: UDP sockets at the port the TCP listeners have (chosen by now) */
    if ((rc = hb__h3_server_prepare(s, err)) < 0) goto fail;
    for (int i = 0; i < s->nworkers; i++)
        if ((rc = hb__h3_worker_init(&s->w[i], &ss, slen, err)) < 0) goto fail;
    s->running = 1;
    for (int i = 0; i < s->nworkers; i++) {
        hb__worker *w = &s->w[i];
        int e = pthread_create(&w->thread, NULL, worker_main, w);
        if (e != 0) {
            rc = hb_fail(err, -e, "pthread_create: %s", strerror(e));
            hb_server_stop(s);
            goto fail;
        }
        w->started = 1;
    }
    *out = s;
    return 0;
fail:
    server_cleanup(s);
    hb_tls_ctx_free(s->tls);
    free(s->h3_cert);
    free(s->h3_key);
    free(s->w);
    free(s);
    return rc;
}

void hb_server_stop(hb_server *s)
{
    if (!s || !s->running) return;
    __atomic_store_n(&s->stopping, 1, __ATOMIC_RELEASE);
    uint64_t one = 1;
    if (write(s->stopfd, &one, sizeof one) < 0) {
        /* cannot happen for a fresh eventfd; the flag still stops the loops at
         * their next wake-up (sweeps run every 50 ms while connections exist) */
    }
    for (int i = 0; i < s->nworkers; i++) {
        if (s->w[i].started) pthread_join(s->w[i].thread, NULL);
        s->w[i].started = 0;
    }
    s->running = 0;
    server_cleanup(s);
}

void hb_server_free(hb_server *s)
{
    if (!s) return;
    hb_server_stop(s);
    hb_tls_ctx_free(s->tls);
    free(s->h3_cert);
    free(s->h3_key);
    free(s->w);
    free(s);
}

int hb_server_port(const hb_server *s)
{
    return s->port;
}

int hb_server_running(const hb_server *s)
{
    return s->running;
}

int hb_server_set_cpus(hb_server *s, const int *cpus, int n, char *err)
{
    if (!s->running) return hb_fail(err, -ESRCH, "the server is stopped");
    if (n < 1) return hb_fail(err, -EINVAL, "no CPU given");
    cpu_set_t set;
    CPU_ZERO(&set);
    for (int i = 0; i < n; i++) {
        if (cpus[i] < 0 || cpus[i] >= CPU_SETSIZE)
            return hb_fail(err, -EINVAL, "CPU %d out of range", cpus[i]);
        CPU_SET(cpus[i], &set);
    }
    for (int i = 0; i < s->nworkers; i++) {
        int e = pthread_setaffinity_np(s->w[i].thread, sizeof set, &set);
        if (e != 0) return hb_fail(err, -e, "pthread_setaffinity_np: %s", strerror(e));
    }
    return 0;
}

const char *hb_server_cert_pem(const hb_server *s, size_t *len)
{
    if (!s->tls) {
        if (len) *len = 0;
        return NULL;
    }
    return hb_tls_ctx_cert_pem(s->tls, len);
}
