/* floor_sse: the cheapest server-sent events reader we can write, to measure
 * the floor of a client's CPU per event on this machine
 * (benchmarks/bench_sse_client.py runs it next to the Python clients).
 *
 * Per stream: connect, one send() of a prebuilt GET with Connection: close,
 * then recv() into one 64 KiB buffer until EOF, counting "\n\n" (a split
 * across two reads included). No HTTP parsing, no chunked decoding, no event
 * fields, no objects: only the unavoidable syscalls and one scan of the bytes.
 *
 *   floor_sse PORT PATH STREAMS
 *
 * Prints one JSON object: blocks (the "\n\n" counted, the preamble's included),
 * cpu_ns (the process's CPU over the streams). Exit 1 on errors.
 *
 * Build: cc -O2 -o floor_sse floor_sse.c
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

static char buf[65536];

static long long cpu_ns(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000LL +
           (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000LL;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: floor_sse PORT PATH STREAMS\n");
        return 1;
    }
    int port = atoi(argv[1]), streams = atoi(argv[3]);
    char req[512];
    int rl = snprintf(req, sizeof req,
                      "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n", argv[2]);
    struct sockaddr_in sa = {0};
    sa.sin_family = AF_INET;
    sa.sin_port = htons((unsigned short)port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    long long blocks = 0, c0 = cpu_ns();
    for (int s = 0; s < streams; s++) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
            perror("connect");
            return 1;
        }
        if (send(fd, req, (size_t)rl, 0) != rl) {
            perror("send");
            return 1;
        }
        char last = 0;
        for (;;) {
            ssize_t n = recv(fd, buf, sizeof buf, 0);
            if (n < 0) {
                perror("recv");
                return 1;
            }
            if (n == 0) break;
            if (last == '\n' && buf[0] == '\n') blocks++;
            for (const char *p = buf, *e = buf + n - 1; p < e;) {
                const char *q = memchr(p, '\n', (size_t)(e - p));
                if (!q) break;
                if (q[1] == '\n') blocks++;
                p = q + 1;
            }
            last = buf[n - 1];
        }
        close(fd);
    }
    printf("{\"blocks\": %lld, \"cpu_ns\": %lld}\n", blocks, cpu_ns() - c0);
    return 0;
}
