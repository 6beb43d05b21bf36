/* floor_h2loadgen: the cheapest closed-loop HTTP/2 (h2c with prior
 * knowledge, or h2 over TLS with ALPN) load generator we can write for one
 * workload, to measure the floor of a
 * generator's CPU per request on this machine (benchmarks/bench_h2loadgen.py
 * runs it next to httpbench and h2load).
 *
 * What it does, and nothing more: per connection the preface, one SETTINGS
 * frame and one connection WINDOW_UPDATE; per request one prebuilt HEADERS
 * frame (a fixed HPACK block of static-table entries and literals without
 * indexing, so no compression state) with its stream id patched in. Input is
 * parsed by the 9-byte frame headers only: no HPACK decoding. A stream counts
 * as a response when it got a HEADERS frame and then END_STREAM; a response
 * counts as OK when its header block starts with the static-table entry for
 * ":status: 200" (0x88, how nghttp2 and nginx encode it). The peer's SETTINGS
 * and PINGs are acknowledged and the connection window is topped up, so DATA
 * never stalls (streams get a 2^30-1 window). C connections x M streams, one
 * thread, level-triggered epoll, one send per connection per read batch, one
 * clock read per epoll_wait batch. With "tls" (certificate not verified):
 * one recv() per read batch into a memory BIO that OpenSSL decrypts from
 * record by record (no read-ahead buffer to compact), one SSL_write per
 * send.
 *
 *   floor_h2loadgen HOST PORT PATH CONNS STREAMS SECONDS [tls]
 *
 * Prints one JSON object: requests (streams ended with a response), ok
 * (those with status 200), sent (streams opened), seconds, cpu_user_s,
 * cpu_sys_s, wakeups (voluntary context switches). Exit 1 on any error (RST_STREAM, GOAWAY, an
 * END_STREAM without HEADERS, a closed connection; message on stderr), so a wrong count is never
 * printed.
 *
 * Build: cc -O2 -o floor_h2loadgen floor_h2loadgen.c -lssl -lcrypto (floor_h2.h
 * beside it)
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define FLOOR_NAME "floor_h2loadgen"
#define H2_PRE 16 /* a PING's 8 bytes; a HEADERS block's first byte after padding and priority */
#include "floor_h2.h"

#define MAX_CONNS 1024
#define MAX_STREAMS 1024
#define RING 8192 /* stream states by (id / 2) % RING: ids in flight stay within it */
#define RBUF 65536
#define WIN ((1u << 30) - 1)

enum { S_FREE = 0, S_OPEN = 1, S_HEADERS = 2, S_OK = 4 };

typedef struct {
    int fd;
    SSL *ssl;          /* NULL for h2c */
    BIO *rbio;         /* memory BIO: what recv() brought, for OpenSSL to decrypt */
    uint32_t next_id;  /* next stream id */
    uint32_t inflight; /* streams open */
    uint64_t consumed; /* DATA payload bytes since the last connection WINDOW_UPDATE */
    h2_in in;
    h2_out out;
    uint8_t st[RING];
} conn;

static conn *conns;
static uint8_t rbuf[RBUF];
static uint8_t pbuf[RBUF]; /* decrypted */
static SSL_CTX *ctx;
static uint8_t hframe[9 + 1024]; /* prebuilt HEADERS frame */
static size_t hframe_len;
static uint64_t n_done, n_ok, n_sent, n_open;
static int stopping;
static uint32_t streams;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* HPACK integer with an N-bit prefix (RFC 7541 section 5.1). */
static size_t hpack_int(uint8_t *p, uint8_t first, unsigned bits, size_t v)
{
    size_t max = (1u << bits) - 1, n = 0;
    if (v < max) {
        p[n++] = (uint8_t)(first | v);
        return n;
    }
    p[n++] = (uint8_t)(first | max);
    v -= max;
    while (v >= 128) {
        p[n++] = (uint8_t)(v % 128 + 128);
        v /= 128;
    }
    p[n++] = (uint8_t)v;
    return n;
}

/* Literal without indexing, name from the static table (RFC 7541 6.2.2). */
static size_t hpack_lit(uint8_t *p, unsigned name_idx, const char *v, size_t vl)
{
    size_t n = hpack_int(p, 0x00, 4, name_idx);
    n += hpack_int(p + n, 0x00, 7, vl);
    memcpy(p + n, v, vl);
    return n + vl;
}

static void issue(conn *c)
{
    uint32_t id = c->next_id;
    if (id > 0x7ffffff0u) die("stream ids exhausted");
    uint8_t *s = &c->st[(id >> 1) % RING];
    if (*s != S_FREE) die("too many streams outstanding (ring full)");
    *s = S_OPEN;
    c->next_id += 2;
    c->inflight++;
    n_open++;
    n_sent++;
    uint8_t *f = c->out.buf + c->out.len;
    h2_out_put(&c->out, hframe, hframe_len);
    h2_set_id(f, id);
}

static void stream_end(conn *c, uint32_t id)
{
    if (id == 0 || !(id & 1) || id >= c->next_id) die("END_STREAM on a stream we did not open");
    uint8_t *s = &c->st[(id >> 1) % RING];
    if (!(*s & S_OPEN)) die("END_STREAM on a stream not open");
    if (!(*s & S_HEADERS)) die("a stream ended without a HEADERS frame");
    n_done++;
    if (*s & S_OK) n_ok++;
    *s = S_FREE;
    c->inflight--;
    n_open--;
    if (!stopping) issue(c);
}

/* A whole frame (header c->in.fh, payload prefix c->in.pre) has been read. */
static void on_frame(void *arg)
{
    conn *c = arg;
    uint8_t type = c->in.fh[3], flags = c->in.fh[4];
    uint32_t len = h2_len(c->in.fh), id = h2_id(c->in.fh);
    switch (type) {
    case 0: /* DATA */
        c->consumed += len;
        if (c->consumed >= WIN / 2) {
            uint8_t f[13];
            h2_put_hdr(f, 4, 8, 0, 0);
            uint32_t inc = (uint32_t)c->consumed;
            f[9] = (uint8_t)(inc >> 24);
            f[10] = (uint8_t)(inc >> 16);
            f[11] = (uint8_t)(inc >> 8);
            f[12] = (uint8_t)inc;
            h2_out_put(&c->out, f, 13);
            c->consumed = 0;
        }
        if (flags & 0x1) stream_end(c, id);
        break;
    case 1: { /* HEADERS */
        if (id == 0 || !(id & 1) || id >= c->next_id) die("HEADERS on a stream we did not open");
        uint8_t *s = &c->st[(id >> 1) % RING];
        if (!(*s & S_OPEN)) die("HEADERS on a stream not open");
        if (!(*s & S_HEADERS)) {
            /* the block follows the pad length (PADDED) and priority fields */
            uint32_t k = (flags & 0x8 ? 1u : 0u) + (flags & 0x20 ? 5u : 0u);
            if (k < c->in.prelen && c->in.pre[k] == 0x88) *s |= S_OK;
            *s |= S_HEADERS;
        }
        if (flags & 0x1) stream_end(c, id);
        break;
    }
    case 3:
        die("the server reset a stream (RST_STREAM)");
    case 4: /* SETTINGS */
        if (!(flags & 0x1)) h2_ack_settings(&c->out);
        break;
    case 6: /* PING */
        if (!(flags & 0x1)) h2_ack_ping(&c->out, &c->in);
        break;
    case 7:
        die("the server sent GOAWAY");
    default:
        break; /* WINDOW_UPDATE, PRIORITY, CONTINUATION (END_STREAM is on HEADERS) */
    }
}

__attribute__((noreturn)) static void die_ssl(const char *what)
{
    ERR_print_errors_fp(stderr);
    die(what);
}

static void flush_out(int ep, conn *c)
{
    if (!c->ssl) {
        if (h2_out_flush(ep, c->fd, &c->out, c) != 0) die("send");
        return;
    }
    size_t off = 0;
    while (off < c->out.len) {
        int w = SSL_write(c->ssl, c->out.buf + off, (int)(c->out.len - off));
        if (w > 0) {
            off += (size_t)w;
            continue;
        }
        if (SSL_get_error(c->ssl, w) != SSL_ERROR_WANT_WRITE) die_ssl("SSL_write");
        struct pollfd pf = {.fd = c->fd, .events = POLLOUT}; /* rare: the socket is full */
        if (poll(&pf, 1, 1000) < 0 && errno != EINTR) die("poll");
    }
    c->out.len = 0;
}

/* Bring what recv() read into the memory BIO, or the handshake's bytes. */
static void tls_take(conn *c, const uint8_t *p, size_t n)
{
    if (BIO_write(c->rbio, p, (int)n) != (int)n) die_ssl("BIO_write");
}

static void tls_start(conn *c)
{
    c->ssl = SSL_new(ctx);
    c->rbio = BIO_new(BIO_s_mem());
    BIO *wbio = BIO_new_socket(c->fd, BIO_NOCLOSE);
    if (!c->ssl || !c->rbio || !wbio) die_ssl("SSL_new");
    BIO_set_mem_eof_return(c->rbio, -1); /* empty = would block, not EOF */
    SSL_set_bio(c->ssl, c->rbio, wbio);
    SSL_set_connect_state(c->ssl);
    for (;;) { /* the socket is still blocking here */
        int r = SSL_do_handshake(c->ssl);
        if (r == 1) break;
        if (SSL_get_error(c->ssl, r) != SSL_ERROR_WANT_READ) die_ssl("TLS handshake");
        ssize_t k = recv(c->fd, rbuf, sizeof rbuf, 0);
        if (k <= 0) die("recv during the TLS handshake");
        tls_take(c, rbuf, (size_t)k);
    }
    const unsigned char *alpn = NULL;
    unsigned alen = 0;
    SSL_get0_alpn_selected(c->ssl, &alpn, &alen);
    if (alen != 2 || memcmp(alpn, "h2", 2) != 0) die("the server did not select h2 (ALPN)");
}

/* recv() brought n bytes: decrypt every whole record, feed the frames. */
static void tls_input(conn *c, size_t n)
{
    tls_take(c, rbuf, n);
    for (;;) {
        int r = SSL_read(c->ssl, pbuf, sizeof pbuf);
        if (r > 0) {
            h2_in_feed(&c->in, pbuf, (size_t)r, on_frame, c);
            continue;
        }
        int e = SSL_get_error(c->ssl, r);
        if (e == SSL_ERROR_WANT_READ) return;
        if (e == SSL_ERROR_ZERO_RETURN) {
            errno = 0;
            die("the server closed a connection (close_notify)");
        }
        die_ssl("SSL_read");
    }
}

int main(int argc, char **argv)
{
    int tls = argc == 8 && strcmp(argv[7], "tls") == 0;
    if (argc != 7 && !tls) {
        fprintf(stderr, "usage: floor_h2loadgen HOST PORT PATH CONNS STREAMS SECONDS [tls]\n");
        return 2;
    }
    const char *host = argv[1], *path = argv[3];
    int port = atoi(argv[2]);
    int nconns = atoi(argv[4]);
    streams = (uint32_t)atoi(argv[5]);
    double secs = atof(argv[6]);
    size_t pl = strlen(path);
    if (port <= 0 || port > 65535 || nconns < 1 || nconns > MAX_CONNS || streams < 1 ||
        streams > MAX_STREAMS || secs <= 0 || pl > 900 || path[0] != '/') {
        fprintf(stderr, "floor_h2loadgen: bad arguments\n");
        return 2;
    }
    char auth[300];
    int al = snprintf(auth, sizeof auth, "%s:%d", host, port);
    /* :method GET (static 2), :scheme http (6) or https (7), :authority and
     * :path as literals. */
    size_t b = 9;
    hframe[b++] = 0x82;
    hframe[b++] = tls ? 0x87 : 0x86;
    b += hpack_lit(hframe + b, 1, auth, (size_t)al);
    b += hpack_lit(hframe + b, 4, path, pl);
    h2_put_hdr(hframe, (uint32_t)(b - 9), 1, 0x5, 0); /* END_STREAM | END_HEADERS */
    hframe_len = b;

    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (inet_pton(AF_INET, host, &sa.sin_addr) != 1) {
        fprintf(stderr, "floor_h2loadgen: HOST must be an IPv4 address\n");
        return 2;
    }
    if (tls) {
        ctx = SSL_CTX_new(TLS_client_method());
        if (!ctx) die_ssl("SSL_CTX_new");
        SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
        SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
        if (SSL_CTX_set_alpn_protos(ctx, (const unsigned char *)"\x02h2", 3) != 0) die_ssl("ALPN");
    }
    int ep = epoll_create1(0);
    if (ep < 0) die("epoll_create1");
    conns = calloc((size_t)nconns, sizeof *conns);
    if (!conns) die("calloc");
    /* preface + SETTINGS(ENABLE_PUSH 0, INITIAL_WINDOW_SIZE 2^30-1) + WINDOW_UPDATE(0) */
    uint8_t start[24 + 9 + 12 + 13];
    memcpy(start, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 24);
    h2_put_hdr(start + 24, 12, 4, 0, 0);
    uint8_t *sp = start + 33;
    sp[0] = 0, sp[1] = 2, sp[2] = sp[3] = sp[4] = sp[5] = 0;
    sp[6] = 0, sp[7] = 4, sp[8] = (uint8_t)(WIN >> 24), sp[9] = (uint8_t)(WIN >> 16),
    sp[10] = (uint8_t)(WIN >> 8), sp[11] = (uint8_t)WIN;
    h2_put_hdr(start + 45, 4, 8, 0, 0);
    uint32_t inc = WIN - 65535;
    start[54] = (uint8_t)(inc >> 24), start[55] = (uint8_t)(inc >> 16);
    start[56] = (uint8_t)(inc >> 8), start[57] = (uint8_t)inc;

    double t0 = now_s();
    for (int i = 0; i < nconns; i++) {
        conn *c = &conns[i];
        c->out.cap = sizeof start + (size_t)streams * 2 * hframe_len + 4096;
        c->out.buf = malloc(c->out.cap);
        if (!c->out.buf) die("malloc");
        c->fd = socket(AF_INET, SOCK_STREAM, 0);
        if (c->fd < 0) die("socket");
        int one = 1;
        if (setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0) die("setsockopt");
        if (connect(c->fd, (struct sockaddr *)&sa, sizeof sa) != 0) die("connect");
        if (tls) tls_start(c);
        int fl = fcntl(c->fd, F_GETFL);
        if (fl < 0 || fcntl(c->fd, F_SETFL, fl | O_NONBLOCK) != 0) die("fcntl");
        c->next_id = 1;
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
        if (epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev) != 0) die("epoll_ctl");
        h2_out_put(&c->out, start, sizeof start);
        for (uint32_t k = 0; k < streams; k++)
            issue(c);
        flush_out(ep, c);
    }
    double deadline = t0 + secs, t_end = t0, drain_until = 0;
    struct epoll_event evs[256];
    while (n_open) {
        int n = epoll_wait(ep, evs, 256, 100);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) die("epoll_wait");
        double t = now_s();
        if (!stopping && t >= deadline) {
            stopping = 1;
            drain_until = t + 10;
        }
        if (stopping && t > drain_until) die("streams still open 10 s after the end");
        for (int i = 0; i < n; i++) {
            conn *c = evs[i].data.ptr;
            if (evs[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP)) {
                ssize_t r = recv(c->fd, rbuf, sizeof rbuf, 0);
                if (r < 0 && (errno == EAGAIN || errno == EINTR)) continue;
                if (r < 0) die("recv");
                if (r == 0) {
                    errno = 0;
                    die("the server closed a connection");
                }
                if (c->ssl)
                    tls_input(c, (size_t)r);
                else
                    h2_in_feed(&c->in, rbuf, (size_t)r, on_frame, c);
            }
            if (c->out.len) flush_out(ep, c);
        }
        t_end = t;
    }
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0) die("getrusage");
    printf("{\"requests\": %llu, \"ok\": %llu, \"sent\": %llu, \"seconds\": %.6f, "
           "\"cpu_user_s\": %.6f, \"cpu_sys_s\": %.6f, \"wakeups\": %ld}\n",
           (unsigned long long)n_done, (unsigned long long)n_ok, (unsigned long long)n_sent,
           t_end - t0, (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6,
           (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6, ru.ru_nvcsw);
    return 0;
}
