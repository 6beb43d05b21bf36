/* floor_ws: the cheapest closed-loop WebSocket echo client we can write, to
 * measure the floor of a generator's CPU per echoed message on this machine
 * (benchmarks/bench_ws.py runs it next to httpbench's WebSocket mode).
 *
 * Per message, and nothing more: one send() of a prebuilt masked frame and
 * recv()s into a fixed buffer until the echo's known length arrived. No frame
 * parsing, no per-message clock, no histograms; one clock read per epoll_wait
 * batch. One thread, C connections upgraded once (blocking), level-triggered
 * epoll.
 *
 *   floor_ws HOST PORT PATH CONNS SECONDS SIZE
 *
 * Prints one JSON object: messages, seconds, cpu_user_s, cpu_sys_s,
 * cpu_us_per_msg. Exit 1 on any error (with a message on stderr).
 *
 * Build: cc -O2 -o floor_ws floor_ws.c
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
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
#define BUF_CAP 65536

static int fds[MAX_CONNS];
static size_t got[MAX_CONNS];
static char buf[BUF_CAP];
static unsigned char frame[BUF_CAP + 14];
static size_t frame_len, echo_len;

static void die(const char *what)
{
    fprintf(stderr, "floor_ws: %s: %s\n", what, errno ? strerror(errno) : "failed");
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

/* Connect and upgrade (blocking): the 101 must be the whole first answer. */
static int open_ws(const char *host, int port, const char *path)
{
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)port);
    if (inet_pton(AF_INET, host, &sa.sin_addr) != 1) {
        fprintf(stderr, "floor_ws: HOST must be a numeric IPv4 address\n");
        exit(2);
    }
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) die("socket");
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) die("connect");
    int one = 1;
    if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0) die("TCP_NODELAY");
    char req[1024];
    int n = snprintf(req, sizeof req,
                     "GET %s HTTP/1.1\r\nHost: %s:%d\r\nUpgrade: websocket\r\n"
                     "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                     "Sec-WebSocket-Version: 13\r\n\r\n",
                     path, host, port);
    if (send(fd, req, (size_t)n, MSG_NOSIGNAL) != n) die("send upgrade");
    size_t have = 0;
    while (!memmem(buf, have, "\r\n\r\n", 4)) {
        ssize_t r = recv(fd, buf + have, sizeof buf - have, 0);
        if (r <= 0) die("upgrade answer");
        have += (size_t)r;
    }
    if (have < 12 || memcmp(buf, "HTTP/1.1 101", 12) != 0) {
        fprintf(stderr, "floor_ws: the upgrade was refused\n");
        exit(1);
    }
    if ((size_t)((char *)memmem(buf, have, "\r\n\r\n", 4) - buf) + 4 != have) {
        fprintf(stderr, "floor_ws: unsolicited bytes after the 101\n");
        exit(1);
    }
    return fd;
}

int main(int argc, char **argv)
{
    if (argc != 7) {
        fprintf(stderr, "usage: floor_ws HOST PORT PATH CONNS SECONDS SIZE\n");
        return 2;
    }
    int port = atoi(argv[2]), nc = atoi(argv[4]);
    double secs = atof(argv[5]);
    long size = atol(argv[6]);
    if (nc < 1 || nc > MAX_CONNS || size < 0 || size > 65535 - 14) {
        fprintf(stderr, "floor_ws: CONNS 1..1024, SIZE 0..65521\n");
        return 2;
    }
    /* the masked frame (mask 0: the payload goes as is) and the echo's length */
    size_t h = 0;
    frame[h++] = 0x82;
    if (size < 126) {
        frame[h++] = (unsigned char)(0x80 | size);
    } else {
        frame[h++] = 0x80 | 126;
        frame[h++] = (unsigned char)(size >> 8);
        frame[h++] = (unsigned char)size;
    }
    memset(frame + h, 0, 4);
    h += 4;
    memset(frame + h, 'x', (size_t)size);
    frame_len = h + (size_t)size;
    echo_len = frame_len - 4;

    int ep = epoll_create1(0);
    if (ep < 0) die("epoll_create1");
    for (int i = 0; i < nc; i++) {
        fds[i] = open_ws(argv[1], port, argv[3]);
        struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)i};
        if (epoll_ctl(ep, EPOLL_CTL_ADD, fds[i], &ev) != 0) die("epoll_ctl");
    }
    double u0 = cpu_s(1), s0 = cpu_s(0), t0 = now_s(), end = t0 + secs, t = t0;
    unsigned long long msgs = 0;
    for (int i = 0; i < nc; i++)
        if (send(fds[i], frame, frame_len, MSG_NOSIGNAL) != (ssize_t)frame_len) die("send");
    struct epoll_event evs[MAX_CONNS];
    while (t < end) {
        int n = epoll_wait(ep, evs, MAX_CONNS, 100);
        if (n < 0 && errno != EINTR) die("epoll_wait");
        for (int k = 0; k < n; k++) {
            int i = (int)evs[k].data.u32;
            ssize_t r = recv(fds[i], buf, sizeof buf, MSG_DONTWAIT);
            if (r == 0) {
                errno = 0;
                die("server closed the connection");
            }
            if (r < 0) {
                if (errno == EAGAIN) continue;
                die("recv");
            }
            got[i] += (size_t)r;
            if (got[i] > echo_len) {
                fprintf(stderr, "floor_ws: more bytes than the echo\n");
                return 1;
            }
            if (got[i] == echo_len) {
                got[i] = 0;
                msgs++;
                if (send(fds[i], frame, frame_len, MSG_NOSIGNAL) != (ssize_t)frame_len) die("send");
            }
        }
        t = now_s();
    }
    double u = cpu_s(1) - u0, s = cpu_s(0) - s0, el = now_s() - t0;
    printf("{\"messages\": %llu, \"seconds\": %.6f, \"cpu_user_s\": %.6f, \"cpu_sys_s\": %.6f, "
           "\"cpu_us_per_msg\": %.4f}\n",
           msgs, el, u, s, msgs ? (u + s) * 1e6 / (double)msgs : 0.0);
    return 0;
}
