/* test_sse.c - server-sent events: the server's events byte for byte (one
 * line, multi-line, a trailing newline in the data, empty data), and the
 * scanner: the server's stream split at every offset, CR / LF / CRLF line
 * ends (a CRLF split between reads), comments, fields without a colon, names
 * that only start like "data", blocks without data, and the line bound. */
#include <stdlib.h>
#include <string.h>

#include "hb_test.h"
#include "http/hb_sse.h"

/* Event bytes from the iovecs. */
static size_t event(char *out, uint64_t id, size_t size)
{
    struct iovec iov[HB_SSE_EVENT_IOV];
    char scratch[HB_SSE_SCRATCH];
    size_t len, at = 0;
    int n = hb_sse_event_iov(iov, scratch, id, size, &len);
    CHECK(n > 0 && n <= HB_SSE_EVENT_IOV);
    for (int i = 0; i < n; i++) {
        memcpy(out + at, iov[i].iov_base, iov[i].iov_len);
        at += iov[i].iov_len;
    }
    CHECK_EQ_INT(at, len);
    CHECK_EQ_INT(hb_sse_event_len(id, size), len);
    return len;
}

static void test_events(void)
{
    static char buf[80000];
    size_t n = event(buf, 7, 3);
    CHECK_MEM(buf, n, "id: 7\nevent: tick\ndata: 012\n\n");
    n = event(buf, 12345, 0);
    CHECK_MEM(buf, n, "id: 12345\nevent: tick\ndata: \n\n");
    n = event(buf, 1, 64);
    CHECK_MEM(buf, n, "id: 1\nevent: tick\ndata: " HB_SSE_LINE "\n\n");
    n = event(buf, 1, 65); /* the data ends in a newline: a last empty data line */
    CHECK_MEM(buf, n, "id: 1\nevent: tick\ndata: " HB_SSE_LINE "\ndata: \n\n");
    n = event(buf, 2, 67);
    CHECK_MEM(buf, n, "id: 2\nevent: tick\ndata: " HB_SSE_LINE "\ndata: 01\n\n");
    char data[200];
    hb_sse_event_data(data, 132);
    CHECK(memcmp(data, HB_SSE_LINE "\n" HB_SSE_LINE "\n01", 132) == 0);
    /* the largest: one iovec for the full lines */
    n = event(buf, 1, HB_SSE_MAX_SIZE);
    CHECK_EQ_INT(n, 18 + HB_SSE_MAX_SIZE / 65 * 71 + 6 + HB_SSE_MAX_SIZE % 65 + 2);
}

/* Scan `s` split at every pair of offsets; each must find `events` events. */
static void scan_all_splits(const char *s, size_t n, int64_t events, uint64_t comments)
{
    for (size_t a = 0; a <= n; a++)
        for (size_t b = a; b <= n; b += (n > 200 ? 37 : 1)) {
            hb_sse_scan sc;
            hb_sse_scan_init(&sc, 0);
            int64_t got = hb_sse_scan_feed(&sc, s, a, NULL);
            got += hb_sse_scan_feed(&sc, s + a, b - a, NULL);
            got += hb_sse_scan_feed(&sc, s + b, n - b, NULL);
            CHECK_EQ_INT(got, events);
            CHECK_EQ_INT(sc.events, events);
            CHECK_EQ_INT(sc.comments, comments);
        }
}

#define SCAN(lit, ev, com) scan_all_splits((lit), sizeof(lit) - 1, (ev), (com))

static void test_scanner(void)
{
    SCAN("data: a\n\n", 1, 0);
    SCAN("data: a\r\n\r\n", 1, 0);
    SCAN("data: a\r\rdata: b\r\r", 2, 0);
    SCAN("data: a\r\n\rdata:b\n\r\n", 2, 0); /* mixed ends */
    SCAN("data\n\n", 1, 0);                  /* no colon: empty data, still an event */
    SCAN("data:\n\n", 1, 0);
    SCAN("datum: a\n\ndata2: b\n\nDATA: c\n\n", 0, 0); /* not the data field */
    SCAN(": comment\n\n: another\ndata: x\n\n", 1, 2); /* a comment block dispatches nothing */
    SCAN("event: a\nid: 3\nretry: 10\n\n", 0, 0);      /* fields without data: nothing */
    SCAN("\n\n\ndata: a\n", 0, 0);                     /* no blank line after: not yet */
    SCAN("data: a\ndata: b\n\n\n\n", 1, 0);            /* blank lines beyond one dispatch nothing */
    SCAN("verylongname: x\ndata: a\n\n", 1, 0);

    /* the server's own stream: the preamble and 20 events of every shape */
    static char stream[40000];
    size_t at = sizeof HB_SSE_PREAMBLE - 1;
    memcpy(stream, HB_SSE_PREAMBLE, at);
    static const size_t sizes[] = {0, 1, 64, 65, 66, 129, 130, 200};
    for (uint64_t i = 1; i <= 20; i++)
        at += event(stream + at, i, sizes[i % 8]);
    scan_all_splits(stream, at, 20, 1);

    /* first_end: just past the dispatching blank line */
    hb_sse_scan sc;
    hb_sse_scan_init(&sc, 0);
    size_t fe;
    CHECK_EQ_INT(hb_sse_scan_feed(&sc, "data: a\n\ndata: b\n\n", 18, &fe), 2);
    CHECK_EQ_INT(fe, 9);
    CHECK_EQ_INT(hb_sse_scan_feed(&sc, "data: a\n", 8, &fe), 0);
    CHECK_EQ_INT(fe, 8);
}

static void test_line_bound(void)
{
    hb_sse_scan sc;
    hb_sse_scan_init(&sc, 100);
    char line[64];
    memset(line, 'x', sizeof line);
    CHECK_EQ_INT(hb_sse_scan_feed(&sc, "data: ", 6, NULL), 0);
    CHECK_EQ_INT(hb_sse_scan_feed(&sc, line, 64, NULL), 0);
    CHECK_EQ_INT(hb_sse_scan_feed(&sc, line, 64, NULL), HB_SSE_E_LINE);
    CHECK_EQ_INT(hb_sse_scan_feed(&sc, "\n\n", 2, NULL), HB_SSE_E_LINE); /* sticky */
    /* 100 bytes exactly is fine */
    hb_sse_scan_init(&sc, 100);
    char l100[102];
    memset(l100, 'x', 100);
    memcpy(l100, "data:", 5);
    l100[100] = '\n';
    l100[101] = '\n';
    CHECK_EQ_INT(hb_sse_scan_feed(&sc, l100, 102, NULL), 1);
}

int main(void)
{
    test_events();
    test_scanner();
    test_line_bound();
    HB_TEST_MAIN_END();
}
