/* floor_h2loadgen: the cheapest closed-loop HTTP/2 (h2c, prior knowledge)
 * load generator we can write for one workload, to measure the floor of a
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
 * clock read per epoll_wait batch.
 *
 *   floor_h2loadgen HOST PORT PATH CONNS STREAMS SECONDS
 *
 * Prints one JSON object: requests (streams ended with a response), ok
 * (those with status 200), sent (streams opened), seconds, cpu_user_s,
 * cpu_sys_s. Exit 1 on any error (RST_STREAM, GOAWAY, an END_STREAM without
 * HEADERS, a closed connection; message on stderr), so a wrong count is never
 * printed.
 *
 * Build: cc -O2 -o floor_h2loadgen floor_h2loadgen.c
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_CONNS 1024
#define MAX_STREAMS 1024
#define RING 8192 /* stream states by (id / 2) % RING: ids in flight stay within it */
#define RBUF 65536
#define WIN ((1u << 30) - 1)

enum { S_FREE = 0, S_OPEN = 1, S_HEADERS = 2, S_OK = 4 };

typedef struct {
    int fd;
    uint32_t next_id;  /* next stream id */
    uint32_t inflight; /* streams open */
    uint64_t consumed; /* DATA payload bytes since the last connection WINDOW_UPDATE */
    uint8_t fh[9];     /* frame header being read */
    uint32_t fhlen;
    uint32_t left;   /* payload bytes of the current frame still to come */
    uint8_t pre[16]; /* first payload bytes of the current frame */
    uint32_t prelen;
    uint8_t *out; /* bytes to send */
    size_t olen, ocap;
    int want_out;
    uint8_t st[RING];
} conn;

static conn *conns;
static uint8_t rbuf[RBUF];
static uint8_t hframe[9 + 1024]; /* prebuilt HEADERS frame */
static size_t hframe_len;
static uint64_t n_done, n_ok, n_sent, n_open;
static int stopping;
static uint32_t streams;

__attribute__((noreturn)) static void die(const char *what)
{
    fprintf(stderr, "floor_h2loadgen: %s%s%s\n", what, errno ? ": " : "",
            errno ? strerror(errno) : "");
    exit(1);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void put_frame_hdr(uint8_t *p, uint32_t len, uint8_t type, uint8_t flags, uint32_t id)
{
    p[0] = (uint8_t)(len >> 16);
    p[1] = (uint8_t)(len >> 8);
    p[2] = (uint8_t)len;
    p[3] = type;
    p[4] = flags;
    p[5] = (uint8_t)(id >> 24) & 0x7f;
    p[6] = (uint8_t)(id >> 16);
    p[7] = (uint8_t)(id >> 8);
    p[8] = (uint8_t)id;
}

static void out_put(conn *c, const void *p, size_t n)
{
    if (c->olen + n > c->ocap) die("output buffer overflow");
    memcpy(c->out + c->olen, p, n);
    c->olen += n;
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
    size_t o = c->olen;
    out_put(c, hframe, hframe_len);
    c->out[o + 5] = (uint8_t)(id >> 24) & 0x7f;
    c->out[o + 6] = (uint8_t)(id >> 16);
    c->out[o + 7] = (uint8_t)(id >> 8);
    c->out[o + 8] = (uint8_t)id;
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

/* A whole frame (header c->fh, payload prefix c->pre) has been read. */
static void on_frame(conn *c, uint32_t len)
{
    uint8_t type = c->fh[3], flags = c->fh[4];
    uint32_t id = ((uint32_t)(c->fh[5] & 0x7f) << 24) | ((uint32_t)c->fh[6] << 16) |
                  ((uint32_t)c->fh[7] << 8) | c->fh[8];
    switch (type) {
    case 0: /* DATA */
        c->consumed += len;
        if (c->consumed >= WIN / 2) {
            uint8_t f[13];
            put_frame_hdr(f, 4, 8, 0, 0);
            uint32_t inc = (uint32_t)c->consumed;
            f[9] = (uint8_t)(inc >> 24);
            f[10] = (uint8_t)(inc >> 16);
            f[11] = (uint8_t)(inc >> 8);
            f[12] = (uint8_t)inc;
            out_put(c, f, 13);
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
            if (k < c->prelen && c->pre[k] == 0x88) *s |= S_OK;
            *s |= S_HEADERS;
        }
        if (flags & 0x1) stream_end(c, id);
        break;
    }
    case 3:
        die("the server reset a stream (RST_STREAM)");
    case 4: /* SETTINGS */
        if (!(flags & 0x1)) {
            uint8_t f[9];
            put_frame_hdr(f, 0, 4, 0x1, 0);
            out_put(c, f, 9);
        }
        break;
    case 6: /* PING */
        if (!(flags & 0x1)) {
            if (len != 8 || c->prelen < 8) die("bad PING");
            uint8_t f[17];
            put_frame_hdr(f, 8, 6, 0x1, 0);
            memcpy(f + 9, c->pre, 8);
            out_put(c, f, 17);
        }
        break;
    case 7:
        die("the server sent GOAWAY");
    default:
        break; /* WINDOW_UPDATE, PRIORITY, CONTINUATION (END_STREAM is on HEADERS) */
    }
}

static void parse(conn *c, const uint8_t *p, size_t n)
{
    while (n) {
        if (c->fhlen < 9) {
            size_t k = 9 - c->fhlen;
            if (k > n) k = (uint32_t)n;
            memcpy(c->fh + c->fhlen, p, k);
            c->fhlen += (uint32_t)k;
            p += k;
            n -= k;
            if (c->fhlen < 9) return;
            c->left = ((uint32_t)c->fh[0] << 16) | ((uint32_t)c->fh[1] << 8) | c->fh[2];
            c->prelen = 0;
        }
        size_t k = c->left < n ? c->left : n;
        if (c->prelen < sizeof c->pre) {
            size_t q = sizeof c->pre - c->prelen;
            if (q > k) q = k;
            memcpy(c->pre + c->prelen, p, q);
            c->prelen += (uint32_t)q;
        }
        c->left -= (uint32_t)k;
        p += k;
        n -= k;
        if (c->left) return;
        uint32_t len = ((uint32_t)c->fh[0] << 16) | ((uint32_t)c->fh[1] << 8) | c->fh[2];
        on_frame(c, len);
        c->fhlen = 0;
    }
}

static void set_out(int ep, conn *c, int want)
{
    if (want == c->want_out) return;
    struct epoll_event ev = {.events = EPOLLIN | (want ? EPOLLOUT : 0), .data.ptr = c};
    if (epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev) != 0) die("epoll_ctl");
    c->want_out = want;
}

static void flush_out(int ep, conn *c)
{
    size_t o = 0;
    while (o < c->olen) {
        ssize_t w = send(c->fd, c->out + o, c->olen - o, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        if (w <= 0) die("send");
        o += (size_t)w;
    }
    memmove(c->out, c->out + o, c->olen - o);
    c->olen -= o;
    set_out(ep, c, c->olen > 0);
}

int main(int argc, char **argv)
{
    if (argc != 7) {
        fprintf(stderr, "usage: floor_h2loadgen HOST PORT PATH CONNS STREAMS SECONDS\n");
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
    /* :method GET (static 2), :scheme http (6), :authority and :path as literals. */
    size_t b = 9;
    hframe[b++] = 0x82;
    hframe[b++] = 0x86;
    b += hpack_lit(hframe + b, 1, auth, (size_t)al);
    b += hpack_lit(hframe + b, 4, path, pl);
    put_frame_hdr(hframe, (uint32_t)(b - 9), 1, 0x5, 0); /* END_STREAM | END_HEADERS */
    hframe_len = b;

    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (inet_pton(AF_INET, host, &sa.sin_addr) != 1) {
        fprintf(stderr, "floor_h2loadgen: HOST must be an IPv4 address\n");
        return 2;
    }
    int ep = epoll_create1(0);
    if (ep < 0) die("epoll_create1");
    conns = calloc((size_t)nconns, sizeof *conns);
    if (!conns) die("calloc");
    /* preface + SETTINGS(ENABLE_PUSH 0, INITIAL_WINDOW_SIZE 2^30-1) + WINDOW_UPDATE(0) */
    uint8_t start[24 + 9 + 12 + 13];
    memcpy(start, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 24);
    put_frame_hdr(start + 24, 12, 4, 0, 0);
    uint8_t *sp = start + 33;
    sp[0] = 0, sp[1] = 2, sp[2] = sp[3] = sp[4] = sp[5] = 0;
    sp[6] = 0, sp[7] = 4, sp[8] = (uint8_t)(WIN >> 24), sp[9] = (uint8_t)(WIN >> 16),
    sp[10] = (uint8_t)(WIN >> 8), sp[11] = (uint8_t)WIN;
    put_frame_hdr(start + 45, 4, 8, 0, 0);
    uint32_t inc = WIN - 65535;
    start[54] = (uint8_t)(inc >> 24), start[55] = (uint8_t)(inc >> 16);
    start[56] = (uint8_t)(inc >> 8), start[57] = (uint8_t)inc;

    double t0 = now_s();
    for (int i = 0; i < nconns; i++) {
        conn *c = &conns[i];
        c->ocap = sizeof start + (size_t)streams * 2 * hframe_len + 4096;
        c->out = malloc(c->ocap);
        if (!c->out) die("malloc");
        c->fd = socket(AF_INET, SOCK_STREAM, 0);
        if (c->fd < 0) die("socket");
        int one = 1;
        if (setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0) die("setsockopt");
        if (connect(c->fd, (struct sockaddr *)&sa, sizeof sa) != 0) die("connect");
        int fl = fcntl(c->fd, F_GETFL);
        if (fl < 0 || fcntl(c->fd, F_SETFL, fl | O_NONBLOCK) != 0) die("fcntl");
        c->next_id = 1;
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
        if (epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev) != 0) die("epoll_ctl");
        out_put(c, start, sizeof start);
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
                parse(c, rbuf, (size_t)r);
            }
            if (c->olen) flush_out(ep, c);
        }
        t_end = t;
    }
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0) die("getrusage");
    printf("{\"requests\": %llu, \"ok\": %llu, \"sent\": %llu, \"seconds\": %.6f, "
           "\"cpu_user_s\": %.6f, \"cpu_sys_s\": %.6f}\n",
           (unsigned long long)n_done, (unsigned long long)n_ok, (unsigned long long)n_sent,
           t_end - t0, (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6,
           (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6);
    return 0;
}
