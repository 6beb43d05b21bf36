/* test_client.c - hb_pool + hb_client against a scripted in-test server
 * thread: keep-alive reuse, chunked decoded in place into a growing sink,
 * stale connection retry (and none for POST), deadline, truncation, protocol
 * errors, a download to a file; hostile peers: a banner fails at once, a huge
 * Content-Length reserves nothing, max_body, bare LFs strict and lenient. */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "client/hb_client.h"
#include "base/hb_clock.h"
#include "client/hb_pool.h"
#include "hb_test.h"

enum {
    M_KEEPALIVE,
    M_CHUNKED,
    M_ONE_THEN_CLOSE,
    M_SILENT,
    M_TRUNC,
    M_BAD,
    M_BIG,
    M_BANNER,      /* an SSH banner on connect, then silence */
    M_ONE_BYTE,    /* a single junk byte, then silence */
    M_HUGE_CL,     /* Content-Length 10^12, three bytes, close */
    M_BARE_LF,     /* a chunked response with bare LF line ends only */
    M_CHUNKED_BIG, /* a chunked body of 3000 bytes */
};

#define BIG_N 1000000

typedef struct {
    int lfd, port, mode;
    atomic_int stop;
    atomic_int accepted;
    pthread_t th;
} srv_t;

static int read_head(int fd)
{
    char b[4096];
    size_t n = 0;
    while (n < sizeof b) {
        ssize_t r = recv(fd, b + n, sizeof b - n, 0);
        if (r <= 0) return -1;
        n += (size_t)r;
        b[n < sizeof b ? n : sizeof b - 1] = '\0';
        if (strstr(b, "\r\n\r\n")) return 0;
    }
    return -1;
}

static void send_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w <= 0) return;
        p += w;
        n -= (size_t)w;
    }
}
#define SEND(fd, lit) send_all((fd), (lit), sizeof(lit) - 1)

static char big_body[BIG_N];

static void serve_conn(srv_t *s, int fd)
{
    if (s->mode == M_BANNER || s->mode == M_ONE_BYTE) { /* before any request */
        if (s->mode == M_BANNER)
            SEND(fd, "SSH-2.0-OpenSSH_9.6\r\n");
        else
            SEND(fd, "\x16");
        for (int i = 0; i < 100 && !atomic_load(&s->stop); i++)
            usleep(20000);
        return;
    }
    while (read_head(fd) == 0) {
        switch (s->mode) {
        case M_KEEPALIVE:
            SEND(fd, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello");
            break;
        case M_CHUNKED: {
            static const char head[] = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
            for (size_t i = 0; i < sizeof head - 1; i++)
                send_all(fd, head + i, 1);
            SEND(fd, "5;ext=1\r\nhello\r\n");
            SEND(fd, "6\r\n world\r\n0\r\nX-T: 1\r\n\r\n");
            break;
        }
        case M_ONE_THEN_CLOSE:
            SEND(fd, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
            usleep(20000);
            return;
        case M_SILENT:
            usleep(500000);
            return;
        case M_TRUNC:
            SEND(fd, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc");
            return;
        case M_BAD:
            SEND(fd, "HTTP/1.1 2x0 OK\r\nContent-Length: 0\r\n\r\n");
            return;
        case M_HUGE_CL:
            SEND(fd, "HTTP/1.1 200 OK\r\nContent-Length: 1000000000000\r\n\r\nabc");
            return;
        case M_BARE_LF:
            SEND(fd, "HTTP/1.1 200 OK\nTransfer-Encoding: chunked\n\n5\nhello\n0\n\n");
            break;
        case M_CHUNKED_BIG:
            SEND(fd, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n");
            for (int i = 0; i < 3; i++) {
                SEND(fd, "3e8\r\n");
                send_all(fd, big_body, 1000);
                SEND(fd, "\r\n");
            }
            SEND(fd, "0\r\n\r\n");
            break;
        case M_BIG: {
            char h[80];
            int k = snprintf(h, sizeof h, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n", BIG_N);
            send_all(fd, h, (size_t)k);
            send_all(fd, big_body, BIG_N);
            break;
        }
        }
    }
}

static void *srv_main(void *arg)
{
    srv_t *s = arg;
    while (!atomic_load(&s->stop)) {
        struct pollfd p = {s->lfd, POLLIN, 0};
        if (poll(&p, 1, 50) <= 0) continue;
        int fd = accept(s->lfd, NULL, NULL);
        if (fd < 0) continue;
        atomic_fetch_add(&s->accepted, 1);
        serve_conn(s, fd);
        close(fd);
    }
    return NULL;
}

static void srv_start(srv_t *s, int mode)
{
    memset(s, 0, sizeof *s);
    s->mode = mode;
    s->lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    CHECK(bind(s->lfd, (struct sockaddr *)&a, sizeof a) == 0);
    CHECK(listen(s->lfd, 16) == 0);
    CHECK(getsockname(s->lfd, (struct sockaddr *)&a, &al) == 0);
    s->port = ntohs(a.sin_port);
    pthread_create(&s->th, NULL, srv_main, s);
}

static void srv_stop(srv_t *s)
{
    atomic_store(&s->stop, 1);
    pthread_join(s->th, NULL);
    close(s->lfd);
}

static hb_request mkreq(const srv_t *s, const char *head, double timeout_s)
{
    hb_request r;
    memset(&r, 0, sizeof r);
    r.target.host = "127.0.0.1";
    r.target.host_len = 9;
    r.target.port = s->port;
    r.head = head;
    r.head_len = strlen(head);
    r.body_fd = -1;
    r.body_fd_off = -1;
    r.body_fd_len = -1;
    r.idempotent = strncmp(head, "GET ", 4) == 0;
    r.start_ns = hb_now_ns();
    r.deadline_ns = r.start_ns + (uint64_t)(timeout_s * 1e9);
    r.connect_deadline_ns = r.deadline_ns;
    return r;
}

static const char GET[] = "GET / HTTP/1.1\r\nHost: t\r\n\r\n";

/* begin + read_body + end; returns the first error (0 when all went well). */
static int exchange(hb_pool *p, hb_request *r, hb_sink *s, hb_exchange *x, char *err)
{
    int rc = hb_client_begin(p, r, x, err);
    if (rc < 0) return rc;
    rc = hb_client_read_body(x, s, err);
    hb_client_end(p, x);
    return rc;
}

static void test_keepalive_reuse(void)
{
    srv_t s;
    srv_start(&s, M_KEEPALIVE);
    hb_pool p;
    CHECK_EQ_INT(hb_pool_init(&p, NULL), 0);
    char err[HB_ERR_LEN], buf[16];
    for (int i = 0; i < 3; i++) {
        hb_request r = mkreq(&s, GET, 5);
        hb_sink sk = {buf, 0, sizeof buf, -1, NULL, NULL};
        hb_exchange x;
        CHECK_EQ_INT(exchange(&p, &r, &sk, &x, err), 0);
        CHECK_MEM(buf, sk.len, "hello");
        CHECK_EQ_INT(x.resp.status, 200);
        CHECK_EQ_INT(x.reused, i > 0);
    }
    hb_pool_stats st;
    hb_pool_get_stats(&p, &st);
    CHECK_EQ_INT(st.connects, 1);
    CHECK_EQ_INT(st.reuses, 2);
    CHECK_EQ_INT(st.idle, 1);
    hb_pool_destroy(&p);
    srv_stop(&s);
}

static int grow_heap(hb_sink *s, size_t need, char *err)
{
    size_t nc = s->cap ? s->cap * 2 : 8;
    while (nc < need)
        nc *= 2;
    char *nb = realloc(s->buf, nc);
    if (!nb) return hb_fail(err, HB_E_NOMEM, "oom");
    s->buf = nb;
    s->cap = nc;
    return 0;
}

static void test_chunked_in_place(void)
{
    srv_t s;
    srv_start(&s, M_CHUNKED);
    hb_pool p;
    CHECK_EQ_INT(hb_pool_init(&p, NULL), 0);
    char err[HB_ERR_LEN];
    for (int i = 0; i < 2; i++) {
        hb_request r = mkreq(&s, GET, 5);
        hb_sink sk = {NULL, 0, 0, -1, grow_heap, NULL};
        hb_exchange x;
        CHECK_EQ_INT(exchange(&p, &r, &sk, &x, err), 0);
        CHECK_MEM(sk.buf, sk.len, "hello world");
        CHECK_EQ_INT(x.kind, HB_BODY_CHUNKED);
        free(sk.buf);
    }
    CHECK_EQ_INT(atomic_load(&s.accepted), 1);
    hb_pool_destroy(&p);
    srv_stop(&s);
}

static void test_stale_retry_and_post(void)
{
    srv_t s;
    srv_start(&s, M_ONE_THEN_CLOSE);
    hb_pool_opts o = {0};
    o.stale_check = 0;
    hb_pool p;
    CHECK_EQ_INT(hb_pool_init(&p, &o), 0);
    char err[HB_ERR_LEN], buf[8];
    hb_request r = mkreq(&s, GET, 5);
    hb_sink sk = {buf, 0, sizeof buf, -1, NULL, NULL};
    hb_exchange x;
    CHECK_EQ_INT(exchange(&p, &r, &sk, &x, err), 0);
    usleep(100000); /* the server has closed the idle connection */
    r = mkreq(&s, GET, 5);
    sk.len = 0;
    CHECK_EQ_INT(exchange(&p, &r, &sk, &x, err), 0);
    CHECK_EQ_INT(x.retried, 1);
    CHECK_MEM(buf, sk.len, "ok");
    usleep(100000);
    r = mkreq(&s, "POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n", 5);
    CHECK_EQ_INT(hb_client_begin(&p, &r, &x, err), HB_E_CLOSED);
    CHECK_EQ_INT(atomic_load(&s.accepted), 2);
    hb_pool_destroy(&p);
    srv_stop(&s);
}

static void test_errors(void)
{
    hb_pool p;
    char err[HB_ERR_LEN], buf[16];
    hb_exchange x;
    srv_t s;

    srv_start(&s, M_SILENT);
    CHECK_EQ_INT(hb_pool_init(&p, NULL), 0);
    hb_request r = mkreq(&s, GET, 0.15);
    uint64_t t0 = hb_now_ns();
    CHECK_EQ_INT(hb_client_begin(&p, &r, &x, err), HB_E_TIMEOUT);
    CHECK(hb_now_ns() - t0 >= 150000000ull);
    CHECK(strstr(err, "timed out") != NULL);
    hb_pool_destroy(&p);
    srv_stop(&s);

    srv_start(&s, M_TRUNC);
    CHECK_EQ_INT(hb_pool_init(&p, NULL), 0);
    r = mkreq(&s, GET, 5);
    hb_sink sk = {buf, 0, sizeof buf, -1, NULL, NULL};
    CHECK_EQ_INT(exchange(&p, &r, &sk, &x, err), HB_E_CLOSED);
    CHECK(strstr(err, "3 of 10") != NULL);
    hb_pool_destroy(&p);
    srv_stop(&s);

    srv_start(&s, M_BAD);
    CHECK_EQ_INT(hb_pool_init(&p, NULL), 0);
    r = mkreq(&s, GET, 5);
    CHECK_EQ_INT(hb_client_begin(&p, &r, &x, err), HB_PE_BAD_STATUS);
    hb_pool_destroy(&p);
    srv_stop(&s);
}

static void test_download_to_file(void)
{
    for (int i = 0; i < BIG_N; i++)
        big_body[i] = (char)('a' + (i * 7) % 26);
    srv_t s;
    srv_start(&s, M_BIG);
    hb_pool p;
    CHECK_EQ_INT(hb_pool_init(&p, NULL), 0);
    char path[] = "/tmp/hb_test_client_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    char err[HB_ERR_LEN];
    hb_request r = mkreq(&s, GET, 10);
    hb_sink sk = {NULL, 0, 0, fd, NULL, NULL};
    hb_exchange x;
    CHECK_EQ_INT(exchange(&p, &r, &sk, &x, err), 0);
    CHECK_EQ_INT(x.body_bytes, BIG_N);
    char *back = malloc(BIG_N + 1);
    CHECK(pread(fd, back, BIG_N + 1, 0) == BIG_N);
    CHECK(memcmp(back, big_body, BIG_N) == 0);
    free(back);
    close(fd);
    unlink(path);
    /* The connection ended exactly at the body: reusable. */
    hb_pool_stats st;
    hb_pool_get_stats(&p, &st);
    CHECK_EQ_INT(st.idle, 1);
    hb_pool_destroy(&p);
    srv_stop(&s);
}

/* A peer that is not speaking HTTP fails on its first bytes, long before the
 * deadline (here 30 s). */
static void test_banner_fails_at_once(void)
{
    int modes[2] = {M_BANNER, M_ONE_BYTE};
    for (int i = 0; i < 2; i++) {
        srv_t s;
        srv_start(&s, modes[i]);
        hb_pool p;
        CHECK_EQ_INT(hb_pool_init(&p, NULL), 0);
        char err[HB_ERR_LEN];
        hb_request r = mkreq(&s, GET, 30);
        hb_exchange x;
        uint64_t t0 = hb_now_ns();
        CHECK_EQ_INT(hb_client_begin(&p, &r, &x, err), HB_PE_BAD_VERSION);
        CHECK(hb_now_ns() - t0 < 1000000000ull);
        CHECK(strstr(err, i == 0 ? "SSH-2.0" : "\\x16") != NULL);
        hb_pool_destroy(&p);
        srv_stop(&s);
    }
}

/* Content-Length 10^12: over max_body before a byte is read; without a limit
 * the sink is grown with what arrives, never to the claimed size. */
static void test_huge_content_length(void)
{
    srv_t s;
    srv_start(&s, M_HUGE_CL);
    hb_pool p;
    CHECK_EQ_INT(hb_pool_init(&p, NULL), 0);
    char err[HB_ERR_LEN];
    hb_exchange x;
    hb_request r = mkreq(&s, GET, 5);
    r.max_body = 1 << 20;
    hb_sink sk = {NULL, 0, 0, -1, grow_heap, NULL};
    CHECK_EQ_INT(exchange(&p, &r, &sk, &x, err), HB_E_TOO_LARGE);
    CHECK(strstr(err, "1000000000000") != NULL);
    CHECK_EQ_INT(sk.cap, 0);
    r = mkreq(&s, GET, 5);
    CHECK_EQ_INT(exchange(&p, &r, &sk, &x, err), HB_E_CLOSED);
    CHECK_EQ_INT(x.body_bytes, 3);
    CHECK(sk.cap <= 2 * 64 * 1024); /* grow_heap doubles: at most twice the step asked */
    free(sk.buf);
    hb_pool_destroy(&p);
    srv_stop(&s);
}

static void test_max_body_chunked(void)
{
    srv_t s;
    srv_start(&s, M_CHUNKED_BIG);
    hb_pool p;
    CHECK_EQ_INT(hb_pool_init(&p, NULL), 0);
    char err[HB_ERR_LEN];
    hb_exchange x;
    uint64_t limits[3] = {2999, 3000, 0};
    int want[3] = {HB_E_TOO_LARGE, 0, 0};
    for (int i = 0; i < 3; i++) {
        hb_request r = mkreq(&s, GET, 5);
        r.max_body = limits[i];
        hb_sink sk = {NULL, 0, 0, -1, grow_heap, NULL};
        CHECK_EQ_INT(exchange(&p, &r, &sk, &x, err), want[i]);
        if (want[i] == 0) {
            CHECK_EQ_INT(sk.len, 3000);
            CHECK(memcmp(sk.buf, big_body, 1000) == 0);
        }
        free(sk.buf);
    }
    hb_pool_destroy(&p);
    srv_stop(&s);
}

static void test_bare_lf_strict_and_lenient(void)
{
    srv_t s;
    srv_start(&s, M_BARE_LF);
    hb_pool p;
    CHECK_EQ_INT(hb_pool_init(&p, NULL), 0);
    char err[HB_ERR_LEN];
    hb_exchange x;
    hb_request r = mkreq(&s, GET, 5);
    CHECK_EQ_INT(hb_client_begin(&p, &r, &x, err), HB_PE_BAD_LINE_ENDING);
    r = mkreq(&s, GET, 5);
    r.parse_flags = HB_PARSE_LENIENT_LF;
    hb_sink sk = {NULL, 0, 0, -1, grow_heap, NULL};
    CHECK_EQ_INT(exchange(&p, &r, &sk, &x, err), 0);
    CHECK_MEM(sk.buf, sk.len, "hello");
    /* head: 3 line ends; chunks: size, data, last chunk, end */
    CHECK_EQ_INT(x.tolerated, 7);
    free(sk.buf);
    hb_pool_destroy(&p);
    srv_stop(&s);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    test_keepalive_reuse();
    test_chunked_in_place();
    test_stale_retry_and_post();
    test_errors();
    test_download_to_file();
    test_banner_fails_at_once();
    test_huge_content_length();
    test_max_body_chunked();
    test_bare_lf_strict_and_lenient();
    HB_TEST_MAIN_END();
}
