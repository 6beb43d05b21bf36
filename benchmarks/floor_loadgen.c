/* floor_loadgen: the cheapest closed-loop HTTP/1.1 load generator we can
 * write for one workload, to measure the floor of a generator's CPU per
 * request on this machine (benchmarks/bench_loadgen.py runs it next to
 * httpbench and wrk).
 *
 * What it does per request, and nothing more: one send() of a prebuilt
 * request, one recv() into a fixed buffer, a byte count against the response
 * length learnt from a first request (so the response must have a fixed
 * length, e.g. a static file), and a status-line check. No parsing, no
 * timestamps per request, no histograms; one clock read per epoll_wait batch.
 * One thread, C keep-alive connections, level-triggered epoll; over TLS,
 * OpenSSL's read-ahead so a response record costs one read().
 *
 *   floor_loadgen HOST PORT PATH CONNS SECONDS [tls]
 *
 * Prints one JSON object: requests, seconds, cpu_user_s, cpu_sys_s,
 * cpu_us_per_req, response_bytes. Exit 1 on any error (with a message on
 * stderr), so a wrong count is never printed.
 *
 * Build: cc -O2 -o floor_loadgen floor_loadgen.c -lssl -lcrypto
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_CONNS 1024
#define BUF_CAP 65536

typedef struct {
    int fd;
    SSL *ssl;
    size_t off; /* bytes of the current response received */
} conn;

static conn conns[MAX_CONNS];
static char buf[BUF_CAP];
static char req[1024];
static size_t req_len;
static size_t resp_len;
static SSL_CTX *ctx;

static void die(const char *what)
{
    fprintf(stderr, "floor_loadgen: %s: %s\n", what, errno ? strerror(errno) : "failed");
    exit(1);
}

static void die_ssl(const char *what)
{
    unsigned long e = ERR_get_error();
    char msg[256];
    ERR_error_string_n(e, msg, sizeof msg);
    fprintf(stderr, "floor_loadgen: %s: %s\n", what, e ? msg : "failed");
    exit(1);
}

static double now_s(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0) die("clock_gettime");
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double cpu_s(int user)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0) die("getrusage");
    struct timeval tv = user ? ru.ru_utime : ru.ru_stime;
    return (double)tv.tv_sec + (double)tv.tv_usec * 1e-6;
}

/* Blocking connect (and TLS handshake) to 127.0.0.1-style numeric HOST. */
static void open_conn(conn *c, const char *host, int port)
{
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)port);
    if (inet_pton(AF_INET, host, &sa.sin_addr) != 1) {
        fprintf(stderr, "floor_loadgen: HOST must be a numeric IPv4 address\n");
        exit(2);
    }
    c->fd = socket(AF_INET, SOCK_STREAM, 0);
    if (c->fd < 0) die("socket");
    if (connect(c->fd, (struct sockaddr *)&sa, sizeof sa) != 0) die("connect");
    int one = 1;
    if (setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0) die("TCP_NODELAY");
    c->ssl = NULL;
    c->off = 0;
    if (ctx) {
        c->ssl = SSL_new(ctx);
        if (!c->ssl || SSL_set_fd(c->ssl, c->fd) != 1) die_ssl("SSL_new");
        if (SSL_connect(c->ssl) != 1) die_ssl("TLS handshake");
    }
}

static void send_req(conn *c)
{
    if (c->ssl) {
        int w = SSL_write(c->ssl, req, (int)req_len);
        if (w != (int)req_len) die_ssl("SSL_write"); /* a tiny write never blocks here */
        return;
    }
    ssize_t w = send(c->fd, req, req_len, MSG_NOSIGNAL);
    if (w != (ssize_t)req_len) die("send");
}

/* Read once; returns bytes (> 0), 0 for "nothing yet". EOF and errors die. */
static ssize_t recv_some(conn *c, int blocking)
{
    if (c->ssl) {
        int r = SSL_read(c->ssl, buf, BUF_CAP);
        if (r > 0) return r;
        int e = SSL_get_error(c->ssl, r);
        if (e == SSL_ERROR_WANT_READ && !blocking) return 0;
        die_ssl("SSL_read");
    }
    ssize_t r = recv(c->fd, buf, BUF_CAP, blocking ? 0 : MSG_DONTWAIT);
    if (r > 0) return r;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && !blocking) return 0;
    if (r == 0) {
        errno = 0;
        die("server closed the connection");
    }
    die("recv");
    return -1;
}

/* First request on c, blocking: learns the (fixed) response length. */
static void learn_length(conn *c)
{
    static char head[BUF_CAP];
    size_t have = 0;
    send_req(c);
    for (;;) {
        ssize_t n = recv_some(c, 1);
        if (have + (size_t)n > sizeof head) {
            fprintf(stderr, "floor_loadgen: first response too large\n");
            exit(1);
        }
        memcpy(head + have, buf, (size_t)n);
        have += (size_t)n;
        char *end = memmem(head, have, "\r\n\r\n", 4);
        if (!end) continue;
        size_t hl = (size_t)(end - head) + 4;
        if (have < 12 || memcmp(head, "HTTP/1.1 200", 12) != 0) {
            fprintf(stderr, "floor_loadgen: first response is not HTTP/1.1 200\n");
            exit(1);
        }
        long cl = -1;
        for (char *p = head; p < end; p++) {
            if (*p == '\n' && strncasecmp(p + 1, "content-length:", 15) == 0) {
                cl = strtol(p + 16, NULL, 10);
                break;
            }
        }
        if (cl < 0) {
            fprintf(stderr, "floor_loadgen: the response needs a Content-Length\n");
            exit(1);
        }
        resp_len = hl + (size_t)cl;
        if (have > resp_len) {
            fprintf(stderr, "floor_loadgen: unsolicited bytes after the first response\n");
            exit(1);
        }
        if (have == resp_len) return;
    }
}

int main(int argc, char **argv)
{
    if (argc < 6 || argc > 7) {
        fprintf(stderr, "usage: floor_loadgen HOST PORT PATH CONNS SECONDS [tls]\n");
        return 2;
    }
    const char *host = argv[1];
    int port = atoi(argv[2]);
    const char *path = argv[3];
    int nconns = atoi(argv[4]);
    double secs = atof(argv[5]);
    int tls = argc == 7 && strcmp(argv[6], "tls") == 0;
    if (port <= 0 || port > 65535 || nconns < 1 || nconns > MAX_CONNS || secs <= 0 ||
        (argc == 7 && !tls)) {
        fprintf(stderr, "floor_loadgen: bad arguments\n");
        return 2;
    }
    int rl = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: %s:%d\r\n\r\n", path, host, port);
    if (rl <= 0 || (size_t)rl >= sizeof req) {
        fprintf(stderr, "floor_loadgen: path too long\n");
        return 2;
    }
    req_len = (size_t)rl;
    if (tls) {
        ctx = SSL_CTX_new(TLS_client_method());
        if (!ctx) die_ssl("SSL_CTX_new");
        SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
        /* One read() per response record instead of header + body reads. */
        SSL_CTX_set_read_ahead(ctx, 1);
        if (SSL_CTX_set_alpn_protos(ctx, (const unsigned char *)"\x08http/1.1", 9) != 0)
            die_ssl("ALPN");
    }

    int ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0) die("epoll_create1");
    for (int i = 0; i < nconns; i++) {
        open_conn(&conns[i], host, port);
        if (i == 0) learn_length(&conns[0]);
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &conns[i]};
        if (epoll_ctl(ep, EPOLL_CTL_ADD, conns[i].fd, &ev) != 0) die("epoll_ctl");
    }

    unsigned long long done = 0;
    double u0 = cpu_s(1), s0 = cpu_s(0), t0 = now_s(), end = t0 + secs, t = t0;
    for (int i = 0; i < nconns; i++)
        send_req(&conns[i]);
    struct epoll_event evs[MAX_CONNS];
    while (t < end) {
        int ms = (int)((end - t) * 1000.0) + 1;
        int k = epoll_wait(ep, evs, MAX_CONNS, ms);
        if (k < 0) {
            if (errno == EINTR) continue;
            die("epoll_wait");
        }
        for (int i = 0; i < k; i++) {
            conn *c = evs[i].data.ptr;
        again:;
            ssize_t n = recv_some(c, 0);
            if (n == 0) continue;
            if (c->off == 0 && (n < 12 || memcmp(buf, "HTTP/1.1 200", 12) != 0)) {
                fprintf(stderr, "floor_loadgen: a response is not HTTP/1.1 200\n");
                return 1;
            }
            c->off += (size_t)n;
            if (c->off > resp_len) {
                fprintf(stderr, "floor_loadgen: response length changed\n");
                return 1;
            }
            if (c->off == resp_len) {
                c->off = 0;
                done++;
                send_req(c);
            } else if (c->ssl && SSL_has_pending(c->ssl)) {
                goto again; /* read ahead: decrypted or buffered bytes epoll cannot see */
            }
        }
        t = now_s();
    }
    double u1 = cpu_s(1), s1 = cpu_s(0);
    double el = t - t0;
    double cpu = (u1 - u0) + (s1 - s0);
    printf("{\"requests\": %llu, \"seconds\": %.6f, \"cpu_user_s\": %.6f, \"cpu_sys_s\": %.6f, "
           "\"cpu_us_per_req\": %.4f, \"response_bytes\": %zu}\n",
           done, el, u1 - u0, s1 - s0, done ? cpu * 1e6 / (double)done : 0.0, resp_len);
    return done ? 0 : 1;
}
