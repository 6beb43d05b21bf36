/* bench_parse.c - ns per parse of a typical ~150-byte response head (and a
 * request head, and a small chunked body) with hb_parse. Built and run by
 * benchmarks/bench_parse.py; prints one "name ns_per_op" line per case. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "http/hb_parse.h"

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static const char RESP[] = "HTTP/1.1 200 OK\r\n"
                           "Server: httpbench\r\n"
                           "Date: Wed, 02 Dec 2026 15:00:00 GMT\r\n"
                           "Content-Type: text/plain\r\n"
                           "Content-Length: 13\r\n"
                           "Connection: keep-alive\r\n"
                           "\r\n";
static const char REQ[] = "GET /plaintext HTTP/1.1\r\n"
                          "Host: 127.0.0.1:8080\r\n"
                          "User-Agent: httpbench/0.1\r\n"
                          "Accept: */*\r\n"
                          "\r\n";
static const char CHUNKED[] = "d\r\nHello, World!\r\n5;x=y\r\nabcde\r\n0\r\n\r\n";

int main(int argc, char **argv)
{
    long iters = argc > 1 ? atol(argv[1]) : 2000000;
    hb_header h[HB_PARSE_DEFAULT_MAX_HEADERS];
    volatile long sink = 0;
    double t0, t1;

    t0 = now_ns();
    for (long i = 0; i < iters; i++) {
        hb_response_head r = {.headers = h, .num_headers = HB_PARSE_DEFAULT_MAX_HEADERS};
        sink += hb_parse_response_head(RESP, sizeof RESP - 1, &r, NULL);
        sink += r.framing.content_length;
    }
    t1 = now_ns();
    printf("response_head_%zuB %.1f\n", sizeof RESP - 1, (t1 - t0) / (double)iters);

    t0 = now_ns();
    for (long i = 0; i < iters; i++) {
        hb_response_head r = {.headers = NULL};
        sink += hb_parse_response_head(RESP, sizeof RESP - 1, &r, NULL);
    }
    t1 = now_ns();
    printf("response_head_framing_only %.1f\n", (t1 - t0) / (double)iters);

    t0 = now_ns();
    for (long i = 0; i < iters; i++) {
        hb_request_head q = {.headers = h, .num_headers = HB_PARSE_DEFAULT_MAX_HEADERS};
        sink += hb_parse_request_head(REQ, sizeof REQ - 1, &q, NULL);
    }
    t1 = now_ns();
    printf("request_head_%zuB %.1f\n", sizeof REQ - 1, (t1 - t0) / (double)iters);

    t0 = now_ns();
    for (long i = 0; i < iters; i++) {
        hb_chunked c;
        hb_chunked_init(&c);
        size_t pos = 0;
        while (pos < sizeof CHUNKED - 1 && !c.done) {
            const char *d;
            size_t dl;
            ssize_t n = hb_chunked_feed(&c, CHUNKED + pos, sizeof CHUNKED - 1 - pos, &d, &dl);
            if (n < 0) return 1;
            pos += (size_t)n;
            sink += (long)dl;
        }
    }
    t1 = now_ns();
    printf("chunked_body_%zuB %.1f\n", sizeof CHUNKED - 1, (t1 - t0) / (double)iters);
    return sink == 42 ? 2 : 0;
}
