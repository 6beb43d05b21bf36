/* floor_exchange: the kernel part of a sequential request/response exchange
 * and nothing else, to measure what the embedded HTTP/3 (and HTTP/1.1) server's
 * CPU per request cannot go below on this machine (benchmarks/bench_h3server.py
 * runs it next to the real server, on the same CPU placement).
 *
 * UDP, the embedded h3 server's datagram pattern for one sequential GET of
 * /bytes/150 as its stats and strace show it with pycurl: the client sends a
 * request datagram, the server reads it (epoll_wait + recvmmsg) and sends one
 * 264-byte reply with sendmsg; the client then sends an ACK-only datagram,
 * which the server reads with the next request (about 2 datagrams in and 1
 * out per request). No crypto, no QUIC, no HTTP/3.
 *
 * TCP: the client sends a fixed request, the server reads it and answers with
 * one writev of a fixed head + 150-byte body (plain TCP: no TLS).
 *
 *   floor_exchange serve                 prints "UDP_PORT TCP_PORT"; exits on SIGTERM
 *   floor_exchange drive udp|tcp PORT UDP_PORT N [TOUCH_KIB]
 *       N sequential exchanges after 50 warm-up ones; prints one JSON line:
 *       {"requests": server's count, "server_cpu_ns": its CPU, "client_cpu_ns": ours}
 *       (the server's figures are read over UDP_PORT before and after).
 *       TOUCH_KIB (default 0): between exchanges the client writes one byte in
 *       every 64-byte line of a TOUCH_KIB buffer, the working set of a real
 *       client sharing the server's CPU (pycurl runs ~24 us of its own code per
 *       request there); a control for how much of a server's CPU per request
 *       is the caches a co-located client leaves it, not its own work.
 *
 * Build: cc -O2 -std=c11 -Wall -Wextra -Werror -o floor_exchange floor_exchange.c
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
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define RX_BATCH 16
#define RX_BUF 2048
#define REPLY_LEN 264 /* the h3 server's datagram answering a GET of /bytes/150 */
#define ACK_LEN 45    /* the client's ACK-only datagram */
#define REQ_DGRAM 190 /* the client's request datagram (pycurl's: about 238 bytes in per GET) */
#define WARMUP 50

static const char TCP_REQ[] = "GET /bytes/150 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
static const char TCP_HEAD[] = "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
                               "Content-Length: 150\r\n\r\n";
#define TCP_REQ_LEN (sizeof TCP_REQ - 1)
#define TCP_RESP_LEN (sizeof TCP_HEAD - 1 + 150)

static volatile sig_atomic_t stop;

static void on_term(int sig)
{
    (void)sig;
    stop = 1;
}

static void die(const char *what)
{
    fprintf(stderr, "floor_exchange: %s: %s\n", what, strerror(errno));
    exit(1);
}

static unsigned long long cpu_ns(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) != 0) die("clock_gettime");
    return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

static int bound(int type, struct sockaddr_in *a)
{
    int fd = socket(AF_INET, type | SOCK_CLOEXEC, 0);
    if (fd < 0) die("socket");
    socklen_t len = sizeof *a;
    if (bind(fd, (struct sockaddr *)a, len) != 0) die("bind");
    if (getsockname(fd, (struct sockaddr *)a, &len) != 0) die("getsockname");
    return fd;
}

static void send_to(int fd, const void *p, size_t n, struct sockaddr *to, socklen_t tolen)
{
    struct iovec iov = {(void *)p, n};
    struct msghdr m = {.msg_name = to, .msg_namelen = tolen, .msg_iov = &iov, .msg_iovlen = 1};
    if (sendmsg(fd, &m, MSG_DONTWAIT | MSG_NOSIGNAL) < 0 && errno != EAGAIN) die("sendmsg");
}

static int serve(void)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int ufd = bound(SOCK_DGRAM | SOCK_NONBLOCK, &a);
    a.sin_port = 0;
    int lfd = bound(SOCK_STREAM | SOCK_NONBLOCK, &a);
    if (listen(lfd, 16) != 0) die("listen");
    struct sockaddr_in ua;
    socklen_t ualen = sizeof ua;
    if (getsockname(ufd, (struct sockaddr *)&ua, &ualen) != 0) die("getsockname");
    printf("%d %d\n", ntohs(ua.sin_port), ntohs(a.sin_port));
    fflush(stdout);
    signal(SIGTERM, on_term);
    int ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0) die("epoll_create1");
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = ufd};
    if (epoll_ctl(ep, EPOLL_CTL_ADD, ufd, &ev) != 0) die("epoll_ctl");
    ev.data.fd = lfd;
    if (epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev) != 0) die("epoll_ctl");

    static char reply[REPLY_LEN], body[150], rx[RX_BATCH][RX_BUF];
    memset(reply, 'r', sizeof reply);
    memset(body, 'b', sizeof body);
    struct mmsghdr msg[RX_BATCH];
    struct iovec iov[RX_BATCH];
    struct sockaddr_storage from[RX_BATCH];
    unsigned long requests = 0;
    size_t tcp_pending = 0; /* bytes of a request read so far */
    while (!stop) {
        struct epoll_event got[4];
        int ne = epoll_wait(ep, got, 4, -1);
        if (ne < 0) {
            if (errno == EINTR) continue;
            die("epoll_wait");
        }
        for (int e = 0; e < ne; e++) {
            int fd = got[e].data.fd;
            if (fd == ufd) {
                for (int i = 0; i < RX_BATCH; i++) {
                    iov[i] = (struct iovec){rx[i], RX_BUF};
                    msg[i].msg_hdr = (struct msghdr){.msg_name = &from[i],
                                                     .msg_namelen = sizeof from[i],
                                                     .msg_iov = &iov[i],
                                                     .msg_iovlen = 1};
                }
                int n = recvmmsg(ufd, msg, RX_BATCH, MSG_DONTWAIT, NULL);
                if (n < 0) {
                    if (errno == EAGAIN || errno == EINTR) continue;
                    die("recvmmsg");
                }
                for (int i = 0; i < n; i++) {
                    struct sockaddr *to = (struct sockaddr *)&from[i];
                    socklen_t tolen = msg[i].msg_hdr.msg_namelen;
                    if (msg[i].msg_len == 0) continue;
                    if (rx[i][0] == 'R') {
                        requests++;
                        send_to(ufd, reply, sizeof reply, to, tolen);
                    } else if (rx[i][0] == 'S') {
                        char s[64];
                        int k = snprintf(s, sizeof s, "S %lu %llu", requests, cpu_ns());
                        send_to(ufd, s, (size_t)k, to, tolen);
                    }
                }
            } else if (fd == lfd) {
                int c = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
                if (c < 0) {
                    if (errno == EAGAIN || errno == ECONNABORTED) continue;
                    die("accept4");
                }
                int one = 1;
                if (setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0)
                    die("setsockopt");
                ev.data.fd = c;
                if (epoll_ctl(ep, EPOLL_CTL_ADD, c, &ev) != 0) die("epoll_ctl");
                tcp_pending = 0;
            } else {
                ssize_t k = read(fd, rx[0], RX_BUF);
                if (k <= 0) {
                    if (k < 0 && (errno == EAGAIN || errno == EINTR)) continue;
                    close(fd); /* also leaves the epoll set */
                    continue;
                }
                tcp_pending += (size_t)k;
                for (; tcp_pending >= TCP_REQ_LEN; tcp_pending -= TCP_REQ_LEN) {
                    requests++;
                    struct iovec out[2] = {{(void *)TCP_HEAD, sizeof TCP_HEAD - 1},
                                           {body, sizeof body}};
                    if (writev(fd, out, 2) < 0 && errno != EAGAIN) die("writev");
                }
            }
        }
    }
    return 0;
}

/* the server's request count and CPU, asked over UDP (other datagrams still in flight are skipped)
 */
static void server_stats(int ufd, unsigned long *req, unsigned long long *cpu)
{
    if (send(ufd, "S", 1, 0) != 1) die("send");
    char b[RX_BUF];
    for (;;) {
        ssize_t k = recv(ufd, b, sizeof b - 1, 0);
        if (k < 0) die("recv (stats)");
        b[k] = 0;
        if (b[0] == 'S' && sscanf(b, "S %lu %llu", req, cpu) == 2) return;
    }
}

static int connected(int type, int port)
{
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int fd = socket(AF_INET, type | SOCK_CLOEXEC, 0);
    if (fd < 0) die("socket");
    struct timeval tv = {5, 0}; /* a lost datagram fails the run instead of hanging it */
    if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) != 0) die("setsockopt");
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) die("connect");
    if (type == SOCK_STREAM) {
        int one = 1;
        if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0) die("setsockopt");
    }
    return fd;
}

static void udp_exchange(int fd)
{
    static char req[REQ_DGRAM], ack[ACK_LEN];
    req[0] = 'R';
    ack[0] = 'A';
    if (send(fd, req, sizeof req, 0) != (ssize_t)sizeof req) die("send");
    char b[RX_BUF];
    ssize_t k = recv(fd, b, sizeof b, 0);
    if (k != REPLY_LEN) die("recv");
    if (send(fd, ack, sizeof ack, 0) != (ssize_t)sizeof ack) die("send");
}

static void tcp_exchange(int fd)
{
    if (send(fd, TCP_REQ, TCP_REQ_LEN, MSG_NOSIGNAL) != (ssize_t)TCP_REQ_LEN) die("send");
    char b[RX_BUF];
    for (size_t got = 0; got < TCP_RESP_LEN;) {
        ssize_t k = recv(fd, b, sizeof b, 0);
        if (k <= 0) die("recv");
        got += (size_t)k;
    }
}

static volatile unsigned char *touch_buf;
static size_t touch_len;

static void touch(void)
{
    for (size_t i = 0; i < touch_len; i += 64)
        touch_buf[i]++;
}

static int drive(int tcp, int port, int uport, unsigned long n)
{
    int ufd = connected(SOCK_DGRAM, uport);
    int fd = tcp ? connected(SOCK_STREAM, port) : ufd;
    for (unsigned long i = 0; i < WARMUP; i++) {
        tcp ? tcp_exchange(fd) : udp_exchange(fd);
        touch();
    }
    unsigned long r0, r1;
    unsigned long long s0, s1;
    server_stats(ufd, &r0, &s0);
    unsigned long long c0 = cpu_ns();
    for (unsigned long i = 0; i < n; i++) {
        tcp ? tcp_exchange(fd) : udp_exchange(fd);
        touch();
    }
    unsigned long long c1 = cpu_ns();
    server_stats(ufd, &r1, &s1);
    printf("{\"requests\": %lu, \"server_cpu_ns\": %llu, \"client_cpu_ns\": %llu}\n", r1 - r0,
           s1 - s0, c1 - c0);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "serve") == 0) return serve();
    if ((argc == 6 || argc == 7) && strcmp(argv[1], "drive") == 0 &&
        (strcmp(argv[2], "udp") == 0 || strcmp(argv[2], "tcp") == 0)) {
        unsigned long n = strtoul(argv[5], NULL, 10);
        unsigned long kib = argc == 7 ? strtoul(argv[6], NULL, 10) : 0;
        if (kib > 0 && kib <= (1ul << 20)) {
            touch_len = kib * 1024;
            touch_buf = calloc(1, touch_len);
            if (!touch_buf) die("calloc");
        }
        if (n > 0 && kib <= (1ul << 20))
            return drive(argv[2][0] == 't', atoi(argv[3]), atoi(argv[4]), n);
    }
    fprintf(stderr, "usage: floor_exchange serve | drive udp|tcp PORT UDP_PORT N [TOUCH_KIB]\n");
    return 2;
}
