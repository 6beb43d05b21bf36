/* floor_h2server: the cheapest HTTP/2 (h2c, prior knowledge) server we can
 * write for one workload, to measure the floor of a server's CPU per request
 * on this machine (benchmarks/bench_h2server.py runs it next to the embedded
 * server and nginx under the same h2load load).
 *
 * What it does, and nothing more: checks the connection preface, sends one
 * SETTINGS frame, then reads frames by their 9-byte headers only (no HPACK
 * decoding: every request gets the same answer) and answers each HEADERS
 * frame that ends its stream with a prebuilt HEADERS frame (":status: 200"
 * from the static table, content-length as a literal) and one DATA frame
 * holding the file's bytes with END_STREAM, stream id patched in. SETTINGS
 * and PINGs are acknowledged; the peer's connection and initial stream
 * windows are tracked (exit when a response would not fit). One thread,
 * level-triggered epoll, one send per connection per read.
 *
 *   floor_h2server PORT BODY_FILE
 *
 * SIGUSR1 prints the requests answered so far as one line on stdout; any
 * protocol surprise (a request body, CONTINUATION, a bad preface) exits 1
 * with a message on stderr, so a wrong count is never printed.
 *
 * Build: cc -O2 -o floor_h2server floor_h2server.c (floor_h2.h beside it)
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <unistd.h>

#define FLOOR_NAME "floor_h2server"
#define H2_PRE 64 /* a SETTINGS frame of up to ten settings */
#include "floor_h2.h"

#define RBUF 65536
#define OCAP (1u << 20)
#define MAX_BODY 16384

typedef struct {
    int fd;
    uint32_t preface; /* bytes of the client preface checked */
    h2_in in;
    int64_t conn_win;   /* what we may still send as DATA on the connection */
    int64_t stream_win; /* the peer's initial stream window */
    int closing;
    h2_out out;
} conn;

static const char PREFACE[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
static uint8_t rbuf[RBUF];
static uint8_t resp[9 + 64 + 9 + MAX_BODY]; /* HEADERS + DATA, stream ids patched */
static size_t resp_len, body_len;
static unsigned long long n_req;
static volatile sig_atomic_t want_report;

static void on_usr1(int sig)
{
    (void)sig;
    want_report = 1;
}

static void on_frame(void *arg)
{
    conn *c = arg;
    const uint8_t *pre = c->in.pre;
    uint8_t type = c->in.fh[3], flags = c->in.fh[4];
    uint32_t len = h2_len(c->in.fh), id = h2_id(c->in.fh);
    switch (type) {
    case 0:
        die("a request with a body (DATA)");
    case 1: /* HEADERS */
        if (!(flags & 0x4)) die("a header block continued in CONTINUATION frames");
        if (!(flags & 0x1)) die("a request with a body (HEADERS without END_STREAM)");
        if (!(id & 1)) die("HEADERS on an even stream id");
        if (c->conn_win < (int64_t)body_len || c->stream_win < (int64_t)body_len)
            die("the client's flow-control window is too small for the response");
        c->conn_win -= (int64_t)body_len;
        {
            uint8_t *h = c->out.buf + c->out.len;
            h2_out_put(&c->out, resp, resp_len);
            h2_set_id(h, id);
            h2_set_id(h + (resp_len - 9 - body_len), id);
        }
        n_req++;
        break;
    case 4: /* SETTINGS */
        if (flags & 0x1) break;
        if (len % 6 || len > sizeof c->in.pre) die("bad SETTINGS frame");
        for (uint32_t i = 0; i < len; i += 6)
            if (pre[i] == 0 && pre[i + 1] == 4) /* INITIAL_WINDOW_SIZE */
                c->stream_win = be32(pre + i + 2);
        h2_ack_settings(&c->out);
        break;
    case 6: /* PING */
        if (!(flags & 0x1)) h2_ack_ping(&c->out, &c->in);
        break;
    case 7:
        c->closing = 1;
        break; /* GOAWAY: the client is done */
    case 8:    /* WINDOW_UPDATE: the connection's only matters here */
        if (len != 4) die("bad WINDOW_UPDATE");
        if (id == 0) c->conn_win += be32(pre) & 0x7fffffffu;
        break;
    case 9:
        die("CONTINUATION");
    default:
        break; /* RST_STREAM, PRIORITY: nothing to do */
    }
}

static void parse(conn *c, const uint8_t *p, size_t n)
{
    if (c->preface < 24) {
        size_t k = 24 - c->preface;
        if (k > n) k = n;
        if (memcmp(p, PREFACE + c->preface, k) != 0) die("not an HTTP/2 prior-knowledge preface");
        c->preface += (uint32_t)k;
        p += k;
        n -= k;
    }
    h2_in_feed(&c->in, p, n, on_frame, c);
}

static void close_conn(int ep, conn *c)
{
    (void)epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    free(c->out.buf);
    free(c);
}

/* 0, or -1 when c was closed (the client went away: its requests were
 * already counted). */
static int flush_out(int ep, conn *c)
{
    if (h2_out_flush(ep, c->fd, &c->out, c) == 0) return 0;
    close_conn(ep, c);
    return -1;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: floor_h2server PORT BODY_FILE\n");
        return 2;
    }
    int port = atoi(argv[1]);
    if (port <= 0 || port > 65535) {
        fprintf(stderr, "floor_h2server: bad port\n");
        return 2;
    }
    uint8_t body[MAX_BODY];
    FILE *bf = fopen(argv[2], "rb");
    if (!bf) die("body file");
    body_len = fread(body, 1, sizeof body, bf);
    if (ferror(bf) || !feof(bf)) die("body file (at most 16384 bytes)");
    fclose(bf);
    /* HEADERS: :status 200 (static 8), content-length (static 28) as a literal */
    char cl[16];
    int cll = snprintf(cl, sizeof cl, "%zu", body_len);
    size_t b = 9;
    resp[b++] = 0x88;
    resp[b++] = 0x0f, resp[b++] = 28 - 15; /* literal without indexing, name index 28 */
    resp[b++] = (uint8_t)cll;
    memcpy(resp + b, cl, (size_t)cll);
    b += (size_t)cll;
    h2_put_hdr(resp, (uint32_t)(b - 9), 1, 0x4, 0);      /* END_HEADERS */
    h2_put_hdr(resp + b, (uint32_t)body_len, 0, 0x1, 0); /* DATA, END_STREAM */
    memcpy(resp + b + 9, body, body_len);
    resp_len = b + 9 + body_len;

    struct sigaction sa = {.sa_handler = on_usr1};
    if (sigaction(SIGUSR1, &sa, NULL) != 0) die("sigaction");
    int ls = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    if (ls < 0) die("socket");
    int one = 1;
    if (setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0) die("setsockopt");
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(ls, (struct sockaddr *)&addr, sizeof addr) != 0) die("bind");
    if (listen(ls, 1024) != 0) die("listen");
    int ep = epoll_create1(0);
    if (ep < 0) die("epoll_create1");
    struct epoll_event lev = {.events = EPOLLIN, .data.ptr = NULL};
    if (epoll_ctl(ep, EPOLL_CTL_ADD, ls, &lev) != 0) die("epoll_ctl");
    /* SETTINGS: MAX_CONCURRENT_STREAMS 128 */
    uint8_t settings[15];
    h2_put_hdr(settings, 6, 4, 0, 0);
    settings[9] = 0, settings[10] = 3, settings[11] = 0, settings[12] = 0, settings[13] = 0,
    settings[14] = 128;
    struct epoll_event evs[256];
    for (;;) {
        if (want_report) {
            want_report = 0;
            printf("%llu\n", n_req);
            fflush(stdout);
        }
        int n = epoll_wait(ep, evs, 256, 100);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) die("epoll_wait");
        for (int i = 0; i < n; i++) {
            conn *c = evs[i].data.ptr;
            if (!c) {
                for (;;) {
                    int fd = accept4(ls, NULL, NULL, SOCK_NONBLOCK);
                    if (fd < 0) {
                        if (errno == EAGAIN || errno == EINTR) break;
                        die("accept4");
                    }
                    if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0)
                        die("setsockopt");
                    c = calloc(1, sizeof *c);
                    if (!c || !(c->out.buf = malloc(OCAP))) die("malloc");
                    c->out.cap = OCAP;
                    c->fd = fd;
                    c->conn_win = c->stream_win = 65535;
                    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
                    if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) != 0) die("epoll_ctl");
                    h2_out_put(&c->out, settings, sizeof settings);
                }
                continue;
            }
            if (evs[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP)) {
                ssize_t r = recv(c->fd, rbuf, sizeof rbuf, 0);
                if (r < 0 && (errno == EAGAIN || errno == EINTR)) continue;
                if (r <= 0) {
                    close_conn(ep, c);
                    continue;
                }
                parse(c, rbuf, (size_t)r);
            }
            if (c->out.len && flush_out(ep, c) < 0) continue;
            if (c->closing && !c->out.len) close_conn(ep, c);
        }
    }
}
