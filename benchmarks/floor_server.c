/* floor_server: the cheapest keep-alive HTTP/1.1 server we can write for one
 * workload, to measure the floor of a server's CPU per request on this
 * machine (benchmarks/bench_server.py runs it next to the embedded server
 * and nginx under the same wrk load).
 *
 * Per request it does nothing but find the blank line that ends a request
 * head and write the same prebuilt response the embedded server sends for
 * /bytes/N (same status line, headers and length; the Date is fixed). No
 * parsing, no routing, no timers, no stats. One thread, edge-triggered epoll,
 * one read() per readiness (a short read means drained) and one send() per
 * batch of pipelined requests (up to 256 responses or 1 MiB).
 *
 *   floor_server PORT [BODY_BYTES]      (127.0.0.1; default 150; exits on SIGTERM)
 *
 * Build: cc -O2 -std=c11 -Wall -Wextra -Werror -o floor_server floor_server.c
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAX_FD 65536
#define RBUF 16384
#define MAX_EVENTS 256

typedef struct {
    int open;
    int tail;           /* how many of "\r\n\r\n" the previous read ended with */
    size_t wpos;        /* offset into the current response of a blocked write */
    unsigned long owed; /* responses not yet written (blocked) */
} conn;

static conn *conns;
static char *resp;      /* reps copies of the response, back to back */
static size_t resp_len; /* one response */
static unsigned long reps;
static volatile sig_atomic_t stop;

static void on_term(int sig)
{
    (void)sig;
    stop = 1;
}

static void die(const char *what)
{
    fprintf(stderr, "floor_server: %s: %s\n", what, strerror(errno));
    exit(1);
}

static void drop(int ep, int fd)
{
    (void)epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL);
    if (close(fd) != 0 && errno != EINTR) die("close");
    conns[fd].open = 0;
}

/* Write what c owes: all owed responses in one send() (resp holds reps
 * copies back to back), so a batch of pipelined requests gets one write.
 * 0 when done or blocked, -1 when the peer is gone. */
static int pay(int fd, conn *c)
{
    while (c->owed) {
        unsigned long k = c->owed < reps ? c->owed : reps;
        size_t len = k * resp_len - c->wpos;
        ssize_t w = send(fd, resp + c->wpos, len, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
            return -1;
        }
        size_t done = c->wpos + (size_t)w; /* bytes of the owed stream written */
        c->owed -= done / resp_len;
        c->wpos = done % resp_len;
        if ((size_t)w < len) return 0; /* short write: the send buffer is full */
    }
    return 0;
}

/* Count request heads ending in buf (the terminator may span reads). */
static unsigned long count_heads(conn *c, const char *buf, size_t n)
{
    static const char term[4] = {'\r', '\n', '\r', '\n'};
    unsigned long k = 0;
    int t = c->tail;
    for (size_t i = 0; i < n; i++) {
        if (buf[i] == term[t]) {
            if (++t == 4) {
                k++;
                t = 0;
            }
        } else {
            t = buf[i] == '\r' ? 1 : 0;
        }
    }
    c->tail = t;
    return k;
}

int main(int argc, char **argv)
{
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: floor_server PORT [BODY_BYTES]\n");
        return 2;
    }
    int port = atoi(argv[1]);
    long body = argc == 3 ? atol(argv[2]) : 150;
    if (port <= 0 || port > 65535 || body < 0 || body > (64L << 20)) {
        fprintf(stderr, "floor_server: bad arguments\n");
        return 2;
    }
    static const char alphabet[] = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    char head[256];
    int hl =
        snprintf(head, sizeof head,
                 "HTTP/1.1 200 OK\r\nServer: httpbench\r\nDate: Wed, 02 Dec 2026 00:00:00 "
                 "GMT\r\nContent-Type: application/octet-stream\r\nContent-Length: %ld\r\n\r\n",
                 body);
    if (hl <= 0 || (size_t)hl >= sizeof head) return 1;
    resp_len = (size_t)hl + (size_t)body;
    reps = (unsigned long)((1u << 20) / resp_len); /* up to 1 MiB of copies */
    if (reps < 1) reps = 1;
    if (reps > 256) reps = 256;
    resp = malloc(reps * resp_len);
    conns = calloc(MAX_FD, sizeof *conns);
    if (!resp || !conns) die("malloc");
    memcpy(resp, head, (size_t)hl);
    for (long i = 0; i < body; i++)
        resp[hl + i] = alphabet[i % 62];
    for (unsigned long r = 1; r < reps; r++)
        memcpy(resp + r * resp_len, resp, resp_len);

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_term;
    if (sigaction(SIGTERM, &sa, NULL) != 0 || sigaction(SIGINT, &sa, NULL) != 0) die("sigaction");
    if (signal(SIGPIPE, SIG_IGN) == SIG_ERR) die("signal");

    int ls = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (ls < 0) die("socket");
    int one = 1;
    if (setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0) die("SO_REUSEADDR");
    struct sockaddr_in addr;
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_port = htons((uint16_t)port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(ls, (struct sockaddr *)&addr, sizeof addr) != 0) die("bind");
    if (listen(ls, 1024) != 0) die("listen");
    int ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0) die("epoll_create1");
    struct epoll_event lev = {.events = EPOLLIN, .data.fd = ls};
    if (epoll_ctl(ep, EPOLL_CTL_ADD, ls, &lev) != 0) die("epoll_ctl");

    static char buf[RBUF];
    struct epoll_event evs[MAX_EVENTS];
    while (!stop) {
        int k = epoll_wait(ep, evs, MAX_EVENTS, -1);
        if (k < 0) {
            if (errno == EINTR) continue;
            die("epoll_wait");
        }
        for (int i = 0; i < k; i++) {
            int fd = evs[i].data.fd;
            if (fd == ls) {
                for (;;) {
                    int cfd = accept4(ls, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
                    if (cfd < 0) {
                        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) break;
                        if (errno == ECONNABORTED || errno == EMFILE || errno == ENFILE) break;
                        die("accept4");
                    }
                    if (cfd >= MAX_FD) {
                        if (close(cfd) != 0 && errno != EINTR) die("close");
                        continue;
                    }
                    if (setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0)
                        die("TCP_NODELAY");
                    conns[cfd] = (conn){.open = 1};
                    struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLET | EPOLLRDHUP,
                                             .data.fd = cfd};
                    if (epoll_ctl(ep, EPOLL_CTL_ADD, cfd, &ev) != 0) die("epoll_ctl");
                }
                continue;
            }
            conn *c = &conns[fd];
            if (!c->open) continue;
            if (c->owed && pay(fd, c) < 0) {
                drop(ep, fd);
                continue;
            }
            if (!(evs[i].events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))) continue;
            for (;;) {
                ssize_t n = recv(fd, buf, sizeof buf, 0);
                if (n < 0) {
                    if (errno == EINTR) continue;
                    if (errno == EAGAIN || errno == EWOULDBLOCK) break;
                    drop(ep, fd); /* reset by the peer */
                    break;
                }
                if (n == 0) {
                    drop(ep, fd);
                    break;
                }
                unsigned long heads = count_heads(c, buf, (size_t)n);
                if (heads) {
                    int was_owing = c->owed != 0;
                    c->owed += heads;
                    if (!was_owing && pay(fd, c) < 0) {
                        drop(ep, fd);
                        break;
                    }
                }
                /* Edge-triggered: a short read drained the socket, unless a
                 * FIN came with it (RDHUP): then read on to see the EOF. */
                if ((size_t)n < sizeof buf && !(evs[i].events & (EPOLLRDHUP | EPOLLHUP))) break;
            }
        }
    }
    return 0;
}
