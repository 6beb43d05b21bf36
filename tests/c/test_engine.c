/* test_engine.c - hb_loop timers and the hb_engine accounting against a tiny
 * in-test HTTP server (one thread, epoll) whose routes provoke each outcome. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/hb_clock.h"
#include "engine/hb_engine.h"
#include "net/hb_loop.h"
#include "http/hb_request.h"
#include "hb_test.h"
#include "hb_test_engine.h"

/* ---- hb_loop ---- */

static int fired[8];
static int fire_order[8], nfire;

static void tcb(hb_loop *l, hb_timer *t, uint64_t now)
{
    (void)l;
    (void)now;
    int id = (int)(t->deadline % 8);
    fired[id]++;
    fire_order[nfire++] = id;
}

static void test_loop_timers(void)
{
    hb_loop l;
    char err[HB_ERR_LEN];
    CHECK_EQ_INT(hb_loop_init(&l, 8, 4, err), 0);
    hb_timer t[5];
    uint64_t base = hb_now_ns() / 8 * 8;
    for (int i = 0; i < 5; i++)
        hb_timer_init(&t[i], tcb);
    /* deadlines encode the id in the low bits; all in the past -> fire in order */
    CHECK_EQ_INT(hb_timer_start(&l, &t[0], base - 800 + 3), 0);
    CHECK_EQ_INT(hb_timer_start(&l, &t[1], base - 1600 + 1), 0);
    CHECK_EQ_INT(hb_timer_start(&l, &t[2], base - 2400 + 2), 0);
    CHECK_EQ_INT(hb_timer_start(&l, &t[3], base + 8000000000ull + 4), 0);
    CHECK_EQ_INT(hb_timer_start(&l, &t[4], base), HB_E_NOMEM); /* capacity 4 */
    hb_timer_stop(&l, &t[1]);
    CHECK(!hb_timer_armed(&t[1]));
    CHECK_EQ_INT(hb_timer_start(&l, &t[1], base - 3200 + 5), 0);
    nfire = 0;
    CHECK(hb_loop_run_once(&l, 1000000) >= 0);
    CHECK_EQ_INT(nfire, 3);
    CHECK_EQ_INT(fire_order[0], 5);
    CHECK_EQ_INT(fire_order[1], 2);
    CHECK_EQ_INT(fire_order[2], 3);
    CHECK(hb_timer_armed(&t[3]));
    CHECK_EQ_INT(fired[4], 0);
    /* re-arm earlier than the others */
    CHECK_EQ_INT(hb_timer_start(&l, &t[3], base - 8 + 4), 0);
    CHECK(hb_loop_run_once(&l, 1000000) >= 0);
    CHECK_EQ_INT(fired[4], 1);
    CHECK_EQ_INT(l.heap_len, 0);
    /* a future timer bounds the wait */
    hb_timer_init(&t[0], tcb);
    uint64_t t0 = hb_now_ns();
    CHECK_EQ_INT(hb_timer_start(&l, &t[0], (t0 + 5000000) / 8 * 8 + 6), 0);
    while (hb_timer_armed(&t[0]) && hb_now_ns() - t0 < 1000000000ull)
        hb_loop_run_once(&l, 100000000);
    CHECK(!hb_timer_armed(&t[0]));
    CHECK(hb_now_ns() - t0 >= 4000000);
    CHECK(hb_now_ns() - t0 < 500000000);
    hb_loop_free(&l);
}

/* Far deadlines go on the timerfd (the wait itself has no timeout): a timer
 * fires at its deadline, never early, and one armed sooner than the timerfd's
 * current deadline still fires first (the timerfd is re-armed earlier). */
static uint64_t fired_at[2];

static void fcb(hb_loop *l, hb_timer *t, uint64_t now)
{
    (void)l;
    fired_at[t->deadline & 1] = now;
}

static void drain_cb(hb_loop *l, hb_io *io, uint32_t events)
{
    (void)l;
    (void)events;
    char b;
    CHECK_EQ_INT(read(io->fd, &b, 1), 1);
}

static void test_loop_timerfd(void)
{
    hb_loop l;
    char err[HB_ERR_LEN];
    CHECK_EQ_INT(hb_loop_init(&l, 4, 4, err), 0);
    CHECK(l.waiter.tfd >= 0);
    hb_timer far, near;
    hb_timer_init(&far, fcb);
    hb_timer_init(&near, fcb);
    fired_at[0] = fired_at[1] = 0;
    uint64_t t0 = hb_now_ns();
    uint64_t dfar = ((t0 + 400000000ull) | 1), dnear = ((t0 + 30000000ull) & ~1ull);
    CHECK_EQ_INT(hb_timer_start(&l, &far, dfar), 0);
    /* A 10 ms bound arms the timerfd 10 ms out: the wait ends there, nothing fires. */
    CHECK_EQ_INT(hb_loop_run_once(&l, 10000000), 0);
    CHECK(hb_now_ns() - t0 >= 10000000);
    CHECK(fired_at[0] == 0 && fired_at[1] == 0);
    /* Unbounded, with a byte ready on a pipe: the timerfd is armed at the far
     * deadline and the wait returns at once for the pipe. */
    int pfd[2];
    CHECK_EQ_INT(pipe(pfd), 0);
    CHECK_EQ_INT(write(pfd[1], "x", 1), 1);
    hb_io pio;
    hb_io_init(&pio, drain_cb);
    CHECK_EQ_INT(hb_loop_add(&l, &pio, pfd[0], EPOLLIN), 0);
    CHECK_EQ_INT(hb_loop_run_once(&l, UINT64_MAX), 1);
    CHECK_EQ_INT((long long)l.waiter.armed, (long long)dfar);
    /* near is sooner than the armed timerfd: it must still fire first, on time. */
    CHECK_EQ_INT(hb_timer_start(&l, &near, dnear), 0);
    int waits = 0;
    while (!fired_at[0] && waits++ < 100)
        CHECK(hb_loop_run_once(&l, UINT64_MAX) >= 0);
    CHECK(fired_at[0] >= dnear);
    CHECK(fired_at[1] == 0);
    CHECK(hb_timer_armed(&far));
    while (!fired_at[1] && waits++ < 100)
        CHECK(hb_loop_run_once(&l, UINT64_MAX) >= 0);
    CHECK(fired_at[1] >= dfar);
    CHECK_EQ_INT(l.heap_len, 0);
    CHECK(waits < 10); /* one wait per deadline, not a poll loop */
    hb_loop_free(&l);
    close(pfd[0]);
    close(pfd[1]);
    CHECK_EQ_INT(l.waiter.tfd, -1);
}

/* A precise timer never fires before its deadline, the loop polls (returns
 * without sleeping) in its last early_ns, and early_ns stays in range. */
static uint64_t pfired;

static void pcb(hb_loop *l, hb_timer *t, uint64_t now)
{
    (void)l;
    (void)t;
    pfired = now;
}

/* Arm a precise timer in_ns from now and run the loop until it fires:
 * never before its deadline. Returns how many loop calls it took. */
static int run_precise(hb_loop *l, uint64_t in_ns)
{
    hb_timer t;
    hb_timer_init(&t, pcb);
    t.precise = 1;
    pfired = 0;
    uint64_t d = hb_now_ns() + in_ns;
    CHECK_EQ_INT(hb_timer_start(l, &t, d), 0);
    int calls = 0;
    while (!pfired && calls < 100000000) {
        CHECK(hb_loop_run_once(l, UINT64_MAX) >= 0);
        calls++;
    }
    CHECK(pfired >= d);
    return calls;
}

static void test_loop_precise_timer(void)
{
    hb_loop l;
    char err[HB_ERR_LEN];
    CHECK_EQ_INT(hb_loop_init(&l, 4, 4, err), 0);
    for (int k = 0; k < 20; k++) {
        CHECK(run_precise(&l, 3000000ull) >= 1);
        CHECK(l.early_ns <= HB_LOOP_EARLY_MAX_NS);
    }
    /* Within early_ns of a precise deadline the loop polls instead of
     * sleeping: with early_ns (1 s) beyond the deadline (100 ms) no call
     * sleeps, so it takes many calls. (How often the adaptive early_ns of
     * the loop above makes it poll depends on this machine's wake-up
     * lateness, so that is not asserted.) */
    l.early_ns = 1000000000ull;
    CHECK(run_precise(&l, 100000000ull) > 1);
    CHECK(l.early_ns == 1000000000ull); /* zero-timeout polls do not adapt it */
    hb_loop_free(&l);
}

/* Random start/re-arm/stop against a reference: the heap always yields the
 * earliest armed deadline and fires each armed timer exactly once. */
static int heap_fired[64];

static void hcb(hb_loop *l, hb_timer *t, uint64_t now)
{
    (void)l;
    (void)now;
    heap_fired[t->deadline % 64]++;
}

static void test_loop_heap_random(void)
{
    hb_loop l;
    char err[HB_ERR_LEN];
    CHECK_EQ_INT(hb_loop_init(&l, 4, 64, err), 0);
    hb_timer t[64];
    uint64_t ref[64]; /* 0 = not armed, else deadline */
    for (int i = 0; i < 64; i++) {
        hb_timer_init(&t[i], hcb);
        ref[i] = 0;
    }
    unsigned seed = 12345;
    int bad = 0;
    for (int step = 0; step < 20000; step++) {
        seed = seed * 1103515245u + 12345u;
        int i = (int)((seed >> 8) % 64);
        int op = (int)((seed >> 20) % 3);
        if (op < 2) {
            /* deadline encodes the index in its low 6 bits */
            uint64_t d = ((uint64_t)((seed >> 4) % 100000) + 1) * 64 + (uint64_t)i;
            if (hb_timer_start(&l, &t[i], d) != 0) bad++;
            ref[i] = d;
        } else {
            hb_timer_stop(&l, &t[i]);
            ref[i] = 0;
        }
        uint64_t min = UINT64_MAX;
        size_t armed = 0;
        for (int k = 0; k < 64; k++) {
            if (ref[k] && ref[k] < min) min = ref[k];
            if (ref[k]) armed++;
            if (!!ref[k] != hb_timer_armed(&t[k])) bad++;
        }
        if (hb_loop_next_deadline(&l) != min || l.heap_len != armed) bad++;
    }
    CHECK_EQ_INT(bad, 0);
    /* all deadlines are in the past (tiny numbers): one run fires each once */
    memset(heap_fired, 0, sizeof heap_fired);
    size_t armed = l.heap_len;
    CHECK(hb_loop_run_once(&l, 0) >= 0);
    int total = 0;
    for (int k = 0; k < 64; k++) {
        total += heap_fired[k];
        if (heap_fired[k] != (ref[k] ? 1 : 0)) bad++;
    }
    CHECK_EQ_INT(total, (long long)armed);
    CHECK_EQ_INT(bad, 0);
    CHECK_EQ_INT(l.heap_len, 0);
    hb_loop_free(&l);
}

/* ---- a tiny server ---- */

typedef struct mini {
    int lfd, port, ep;
    pthread_t tid;
    _Atomic int stop;
    _Atomic long requests, accepted, bytes_in;
    struct mconn *all;
} mini;

#define MAXC 256
typedef struct mconn {
    struct mconn *next; /* every connection ever accepted, freed at stop */
    int fd;
    char buf[8192];
    size_t len;
} mconn;

static const char OK_RESP[] = "HTTP/1.1 200 OK\r\nServer: mini\r\nContent-Length: 5\r\n\r\nhello";
static const char CHUNK_RESP[] =
    "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n";
static const char NF_RESP[] = "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n";
static const char CLOSE_RESP[] =
    "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok";

static void mclose(mini *m, mconn *c, int rst)
{
    if (rst) {
        struct linger lg = {1, 0};
        setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    }
    epoll_ctl(m->ep, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    c->fd = -1;
}

static void wr(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w <= 0) return;
        p += w;
        n -= (size_t)w;
    }
}

/* returns 1 when the connection was closed */
static int mserve(mini *m, mconn *c)
{
    for (;;) {
        char *end = memmem(c->buf, c->len, "\r\n\r\n", 4);
        if (!end) return 0;
        size_t hl = (size_t)(end - c->buf) + 4;
        atomic_fetch_add(&m->requests, 1);
        int close_req = memmem(c->buf, hl, "Connection: close", 17) != NULL;
        const char *path =
            c->buf + (strchr(c->buf, ' ') ? (size_t)(strchr(c->buf, ' ') - c->buf) + 1 : 0);
        if (!strncmp(path, "/chunked ", 9)) {
            wr(c->fd, CHUNK_RESP, sizeof CHUNK_RESP - 1);
        } else if (!strncmp(path, "/404 ", 5)) {
            wr(c->fd, NF_RESP, sizeof NF_RESP - 1);
        } else if (!strncmp(path, "/close ", 7)) {
            wr(c->fd, CLOSE_RESP, sizeof CLOSE_RESP - 1);
            mclose(m, c, 0);
            return 1;
        } else if (!strncmp(path, "/partial ", 9)) {
            /* head + part of the body + FIN in one go: EOF must still be seen */
            static const char P[] = "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc";
            wr(c->fd, P, sizeof P - 1);
            mclose(m, c, 0);
            return 1;
        } else if (!strncmp(path, "/eof ", 5)) {
            mclose(m, c, 0);
            return 1;
        } else if (!strncmp(path, "/reset ", 7)) {
            mclose(m, c, 1);
            return 1;
        } else if (!strncmp(path, "/garbage ", 9)) {
            wr(c->fd, "garbage\r\n\r\n", 11);
        } else if (!strncmp(path, "/stall ", 7)) {
            /* never answer */
        } else {
            wr(c->fd, OK_RESP, sizeof OK_RESP - 1);
        }
        memmove(c->buf, c->buf + hl, c->len - hl);
        c->len -= hl;
        if (close_req) {
            mclose(m, c, 0);
            return 1;
        }
    }
}

static void *mini_main(void *arg)
{
    mini *m = arg;
    struct epoll_event ev, evs[64];
    ev.events = EPOLLIN;
    ev.data.ptr = NULL;
    epoll_ctl(m->ep, EPOLL_CTL_ADD, m->lfd, &ev);
    while (!atomic_load(&m->stop)) {
        int n = epoll_wait(m->ep, evs, 64, 20);
        for (int i = 0; i < n; i++) {
            if (evs[i].data.ptr == NULL) {
                int fd;
                while ((fd = accept4(m->lfd, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
                    atomic_fetch_add(&m->accepted, 1);
                    mconn *c = calloc(1, sizeof *c);
                    c->fd = fd;
                    c->next = m->all;
                    m->all = c;
                    ev.events = EPOLLIN;
                    ev.data.ptr = c;
                    epoll_ctl(m->ep, EPOLL_CTL_ADD, fd, &ev);
                }
                continue;
            }
            mconn *c = evs[i].data.ptr;
            if (c->fd < 0) continue;
            ssize_t r = read(c->fd, c->buf + c->len, sizeof c->buf - c->len);
            if (r <= 0) {
                if (r == 0 || errno != EAGAIN) mclose(m, c, 0);
                continue;
            }
            atomic_fetch_add(&m->bytes_in, r);
            c->len += (size_t)r;
            mserve(m, c);
        }
    }
    return NULL;
}

static void mini_start(mini *m)
{
    memset(m, 0, sizeof *m);
    m->lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    bind(m->lfd, (struct sockaddr *)&a, sizeof a);
    listen(m->lfd, 512);
    socklen_t l = sizeof a;
    getsockname(m->lfd, (struct sockaddr *)&a, &l);
    m->port = ntohs(a.sin_port);
    m->ep = epoll_create1(0);
    pthread_create(&m->tid, NULL, mini_main, m);
}

static void mini_stop(mini *m)
{
    atomic_store(&m->stop, 1);
    pthread_join(m->tid, NULL);
    close(m->lfd);
    close(m->ep);
    while (m->all) {
        mconn *c = m->all;
        m->all = c->next;
        if (c->fd >= 0) close(c->fd);
        free(c);
    }
}

static void cfg_for(hb_engine_config *c, int port, char *head, size_t cap, const char *path,
                    int keepalive)
{
    char err[HB_ERR_LEN];
    engine_config_loopback(c, port);
    char url[256];
    snprintf(url, sizeof url, "http://127.0.0.1%s", path);
    hb_url u;
    CHECK_EQ_INT(hb_url_split(url, strlen(url), &u, err), 0);
    hb_header extra = {"X-Test", 6, "1", 1};
    hb_head_spec s = {"GET", 3, &u, &extra, 1, HB_REQ_NO_BODY, keepalive, NULL};
    int n = hb_build_head(head, cap, &s, err);
    CHECK(n > 0);
    c->head = head;
    c->head_len = (size_t)n;
    c->keepalive = keepalive;
}

static void test_exact_n(void)
{
    mini m;
    mini_start(&m);
    char head[512];
    hb_engine_config c;
    hb_engine_result r;
    /* closed loop, 2 threads, 5 connections, pipelining 3: exactly 1003 requests */
    cfg_for(&c, m.port, head, sizeof head, "/", 1);
    c.n = 1003;
    c.connections = 5;
    c.threads = 2;
    c.pipeline = 3;
    CHECK_EQ_INT(run_engine(&c, &r), 0);
    CHECK_EQ_INT(r.completed, 1003);
    CHECK_EQ_INT(r.ok, 1003);
    CHECK_EQ_INT(r.status[200], 1003);
    CHECK_EQ_INT(r.status_class[2], 1003);
    CHECK_EQ_INT(r.errors_total, 0);
    CHECK_EQ_INT(r.connections_opened, 5);
    CHECK_EQ_INT(r.inflight_at_stop, 0);
    CHECK_EQ_INT(hb_hist_count(&r.latency), 1003);
    CHECK_EQ_INT(hb_hist_count(&r.connect), 5);
    CHECK_EQ_INT(r.bytes_out, 1003 * c.head_len);
    CHECK_EQ_INT(r.bytes_in, 1003 * (sizeof OK_RESP - 1));
    CHECK_EQ_INT(r.body_bytes, 1003 * 5);
    CHECK_EQ_INT(r.doc_length, 5);
    CHECK(strcmp(r.server, "mini") == 0);
    CHECK_EQ_INT(atomic_load(&m.requests), 1003);
    CHECK_EQ_INT(atomic_load(&m.accepted), 5);
    uint64_t secsum = 0;
    for (uint32_t i = 0; i < r.nseconds; i++)
        secsum += r.sec_ok[i];
    CHECK_EQ_INT(secsum, 1003);
    hb_engine_result_free(&r);

    /* keep-alive off: one connection per request */
    long acc0 = atomic_load(&m.accepted);
    cfg_for(&c, m.port, head, sizeof head, "/", 0);
    c.n = 57;
    c.connections = 4;
    CHECK_EQ_INT(run_engine(&c, &r), 0);
    CHECK_EQ_INT(r.ok, 57);
    CHECK_EQ_INT(r.connections_opened, 57);
    CHECK_EQ_INT(r.reconnects, 0);
    CHECK_EQ_INT(hb_hist_count(&r.connect), 57);
    CHECK_EQ_INT(atomic_load(&m.accepted) - acc0, 57);
    hb_engine_result_free(&r);

    /* chunked and 404 */
    cfg_for(&c, m.port, head, sizeof head, "/chunked", 1);
    c.n = 10;
    CHECK_EQ_INT(run_engine(&c, &r), 0);
    CHECK_EQ_INT(r.ok, 10);
    CHECK_EQ_INT(r.body_bytes, 50);
    hb_engine_result_free(&r);
    cfg_for(&c, m.port, head, sizeof head, "/404", 1);
    c.n = 10;
    c.pipeline = 4;
    CHECK_EQ_INT(run_engine(&c, &r), 0);
    CHECK_EQ_INT(r.ok, 0);
    CHECK_EQ_INT(r.non2xx, 10);
    CHECK_EQ_INT(r.status[404], 10);
    CHECK_EQ_INT(r.status_class[4], 10);
    CHECK_EQ_INT(r.completed, 10);
    hb_engine_result_free(&r);
    /* server closes after each response: reconnects counted */
    cfg_for(&c, m.port, head, sizeof head, "/close", 1);
    c.n = 6;
    CHECK_EQ_INT(run_engine(&c, &r), 0);
    CHECK_EQ_INT(r.ok, 6);
    CHECK_EQ_INT(r.connections_opened, 6);
    CHECK_EQ_INT(r.reconnects, 5);
    hb_engine_result_free(&r);
    mini_stop(&m);
}

/* The progress counters and percentiles after a run: the counts are the
 * result's, and p50/p99 are the lower bounds of the coarse (1/16) buckets that
 * hold the result's own p50/p99. */
static void test_progress(void)
{
    mini m;
    mini_start(&m);
    char head[512], err[HB_ERR_LEN];
    hb_engine_config c;
    hb_engine_result r;
    hb_engine *e;
    cfg_for(&c, m.port, head, sizeof head, "/", 1);
    c.n = 1001;
    c.connections = 3;
    c.threads = 2;
    CHECK_EQ_INT(hb_engine_new(&e, &c, err), 0);
    hb_engine_progress p;
    hb_engine_progress_get(e, &p);
    CHECK_EQ_INT(p.completed, 0);
    CHECK_EQ_INT(p.p50_ns, 0);
    CHECK_EQ_INT(hb_engine_start(e, err), 0);
    for (int spins = 0; !hb_engine_wait(e, 100000000ull) && spins < 100; spins++) {
    }
    hb_engine_progress_get(e, &p);
    CHECK_EQ_INT(hb_engine_join(e, 1, &r, err), 0);
    CHECK_EQ_INT(p.completed, 1001);
    CHECK_EQ_INT(p.ok, 1001);
    CHECK_EQ_INT(p.errors, 0);
    CHECK_EQ_INT(p.bytes_in, r.bytes_in);
    uint64_t r50 = hb_hist_value_at_percentile(&r.latency, 50);
    uint64_t r99 = hb_hist_value_at_percentile(&r.latency, 99);
    CHECK(p.p50_ns > 0 && p.p50_ns <= r50 && r50 < p.p50_ns + p.p50_ns / 16 + 1);
    CHECK(p.p99_ns >= p.p50_ns && p.p99_ns <= r99 && r99 < p.p99_ns + p.p99_ns / 16 + 1);
    hb_engine_result_free(&r);
    hb_engine_free(e);
    mini_stop(&m);
}

static void test_errors(void)
{
    mini m;
    mini_start(&m);
    char head[512];
    hb_engine_config c;
    hb_engine_result r;
    struct {
        const char *path;
        int type;
    } cases[] = {{"/eof", HB_ENG_ERR_CLOSED},
                 {"/partial", HB_ENG_ERR_CLOSED},
                 {"/reset", HB_ENG_ERR_READ},
                 {"/garbage", HB_ENG_ERR_PROTOCOL},
                 {"/stall", HB_ENG_ERR_TIMEOUT}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cfg_for(&c, m.port, head, sizeof head, cases[i].path, 1);
        c.n = 7;
        c.connections = 2;
        c.timeout_ns = 30000000ull;
        CHECK_EQ_INT(run_engine(&c, &r), 0);
        CHECK_EQ_INT(r.completed, 7);
        CHECK_EQ_INT(r.errors_total, 7);
        CHECK_EQ_INT(r.errors[cases[i].type], 7);
        CHECK_EQ_INT(r.ok, 0);
        if (r.errors[cases[i].type] != 7)
            fprintf(stderr, "case %s: %s\n", cases[i].path, r.first_error);
        hb_engine_result_free(&r);
    }
    /* connect refused: a port nobody listens on */
    int port = m.port;
    mini_stop(&m);
    cfg_for(&c, port, head, sizeof head, "/", 1);
    c.n = 9;
    c.connections = 3;
    CHECK_EQ_INT(run_engine(&c, &r), 0);
    CHECK_EQ_INT(r.errors[HB_ENG_ERR_CONNECT], 9);
    CHECK_EQ_INT(r.completed, 9);
    CHECK(strstr(r.first_error, "connect") != NULL);
    hb_engine_result_free(&r);
}

static void test_rate_and_duration(void)
{
    mini m;
    mini_start(&m);
    char head[512];
    hb_engine_config c;
    hb_engine_result r;
    /* 200 req/s for n=40 over 4 connections: exactly 40, taking ~0.2 s */
    cfg_for(&c, m.port, head, sizeof head, "/", 1);
    c.n = 40;
    c.rate = 200;
    c.connections = 4;
    c.threads = 2;
    uint64_t t0 = hb_now_ns();
    CHECK_EQ_INT(run_engine(&c, &r), 0);
    uint64_t el = hb_now_ns() - t0;
    CHECK_EQ_INT(r.ok, 40);
    CHECK_EQ_INT(hb_hist_count(&r.latency_uncorrected), 40);
    CHECK(el >= 150000000ull); /* the schedule spans 39/200 s */
    hb_engine_result_free(&r);
    /* duration with stop: ends, nothing lost */
    cfg_for(&c, m.port, head, sizeof head, "/", 1);
    c.duration_ns = 200000000ull;
    c.connections = 2;
    CHECK_EQ_INT(run_engine(&c, &r), 0);
    CHECK(r.ok > 0);
    CHECK_EQ_INT(r.completed, r.ok);
    CHECK(!r.interrupted);
    CHECK(r.end_ns - r.start_ns >= 190000000ull);
    hb_engine_result_free(&r);
    mini_stop(&m);
}

int main(void)
{
    test_loop_timers();
    test_loop_heap_random();
    test_loop_timerfd();
    test_loop_precise_timer();
    test_exact_n();
    test_progress();
    test_errors();
    test_rate_and_duration();
    HB_TEST_MAIN_END();
}
