/* floor_push: the cheapest server-sent events server we can write, to measure
 * the floor of a server's CPU per pushed event on this machine
 * (benchmarks/bench_ws.py runs it next to the embedded server's /sse).
 *
 * One connection: read the request head, write a chunked text/event-stream
 * head, then N copies of one prebuilt event (its chunk line and CRLF
 * included), each with one write() as the embedded server does, then the last
 * chunk, and close. No parsing beyond the blank line, no per-event formatting.
 *
 *   floor_push PORT EVENTS SIZE     (prints the port it listens on, then waits)
 *
 * After the connection: one JSON object, events, cpu_user_s, cpu_sys_s,
 * cpu_us_per_event (the process's CPU from accept to close). Exit 1 on errors.
 *
 * Build: cc -O2 -o floor_push floor_push.c
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

static char ev[70000];

static void die(const char *what)
{
    fprintf(stderr, "floor_push: %s: %s\n", what, errno ? strerror(errno) : "failed");
    exit(1);
}

static double cpu_s(int user)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0) die("getrusage");
    struct timeval tv = user ? ru.ru_utime : ru.ru_stime;
    return (double)tv.tv_sec + (double)tv.tv_usec * 1e-6;
}

static void write_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            die("write");
        }
        p += w;
        n -= (size_t)w;
    }
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: floor_push PORT EVENTS SIZE\n");
        return 2;
    }
    long events = atol(argv[2]), size = atol(argv[3]);
    if (events < 1 || size < 0 || size > 65000) {
        fprintf(stderr, "floor_push: EVENTS >= 1, SIZE 0..65000\n");
        return 2;
    }
    /* one event as the embedded server frames it: "id: 1\nevent: tick\n" + data lines + "\n" */
    char body[69000];
    size_t b = (size_t)snprintf(body, sizeof body, "id: 1\nevent: tick\n");
    static const char line[] = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz01";
    long left = size;
    for (;;) {
        long take = left < 64 ? left : 64;
        memcpy(body + b, "data: ", 6);
        b += 6;
        memcpy(body + b, line, (size_t)take);
        b += (size_t)take;
        body[b++] = '\n';
        if (left < 65) break;
        left -= 65;
    }
    body[b++] = '\n';
    size_t n = (size_t)snprintf(ev, sizeof ev, "%zx\r\n", b);
    memcpy(ev + n, body, b);
    n += b;
    memcpy(ev + n, "\r\n", 2);
    n += 2;

    int ls = socket(AF_INET, SOCK_STREAM, 0);
    if (ls < 0) die("socket");
    int one = 1;
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)atoi(argv[1]));
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(ls, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(ls, 4) != 0) die("bind");
    socklen_t sl = sizeof sa;
    if (getsockname(ls, (struct sockaddr *)&sa, &sl) != 0) die("getsockname");
    printf("%d\n", ntohs(sa.sin_port));
    fflush(stdout);
    int fd = accept(ls, NULL, NULL);
    if (fd < 0) die("accept");
    double u0 = cpu_s(1), s0 = cpu_s(0);
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    char req[16384];
    size_t have = 0;
    while (!memmem(req, have, "\r\n\r\n", 4)) {
        ssize_t r = read(fd, req + have, sizeof req - have);
        if (r <= 0) die("read");
        have += (size_t)r;
    }
    static const char head[] = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                               "Transfer-Encoding: chunked\r\n\r\n";
    write_all(fd, head, sizeof head - 1);
    for (long i = 0; i < events; i++)
        write_all(fd, ev, n);
    write_all(fd, "0\r\n\r\n", 5);
    close(fd);
    double u = cpu_s(1) - u0, s = cpu_s(0) - s0;
    printf("{\"events\": %ld, \"cpu_user_s\": %.6f, \"cpu_sys_s\": %.6f, "
           "\"cpu_us_per_event\": %.4f}\n",
           events, u, s, (u + s) * 1e6 / (double)events);
    return 0;
}
