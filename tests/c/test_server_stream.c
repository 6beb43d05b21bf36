/* test_server_stream.c - the embedded server's streaming routes from C, under the
 * sanitizers: an SSE stream byte for byte, a paced /stream, a WebSocket upgrade
 * with echoes of every size class (one frame, fragmented, larger than the read
 * buffer), ping/pong, push, the close handshake, a protocol error's close code,
 * and the stats counting every frame and message. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/hb_content.h"
#include "hb_test.h"
#include "http/hb_sse.h"
#include "server/hb_server.h"
#include "ws/hb_ws.h"

static int connect_to(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    struct timeval tv = {5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Read until EOF (or the timeout); returns the bytes. */
static size_t read_all(int fd, char *buf, size_t cap)
{
    size_t got = 0;
    while (got < cap) {
        ssize_t r = recv(fd, buf + got, cap - got, 0);
        if (r <= 0) break;
        got += (size_t)r;
    }
    return got;
}

static char buf[1 << 21];

static void test_sse(int port)
{
    int fd = connect_to(port);
    const char req[] = "GET /sse?events=3&size=70 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    CHECK_EQ_INT(send(fd, req, sizeof req - 1, 0), (ssize_t)(sizeof req - 1));
    size_t n = read_all(fd, buf, sizeof buf);
    close(fd);
    char *body = memmem(buf, n, "\r\n\r\n", 4);
    CHECK(body != NULL);
    if (!body) return;
    body += 4;
    /* the expected chunks: the preamble, then each event */
    static char want[8192];
    size_t w = 0;
    w += (size_t)snprintf(want + w, sizeof want - w, "19\r\n" HB_SSE_PREAMBLE "\r\n");
    for (uint64_t i = 1; i <= 3; i++) {
        struct iovec iov[HB_SSE_EVENT_IOV];
        char scratch[HB_SSE_SCRATCH];
        size_t len;
        int k = hb_sse_event_iov(iov, scratch, i, 70, &len);
        w += (size_t)snprintf(want + w, sizeof want - w, "%zx\r\n", len);
        for (int j = 0; j < k; j++) {
            memcpy(want + w, iov[j].iov_base, iov[j].iov_len);
            w += iov[j].iov_len;
        }
        memcpy(want + w, "\r\n", 2);
        w += 2;
    }
    memcpy(want + w, "0\r\n\r\n", 5);
    w += 5;
    CHECK_EQ_INT((size_t)(buf + n - body), w);
    CHECK(memcmp(body, want, w) == 0);
}

static void test_paced_stream(int port)
{
    int fd = connect_to(port);
    const char req[] = "GET /stream/25?chunk=10&interval=5 HTTP/1.1\r\nHost: x\r\n"
                       "Connection: close\r\n\r\n";
    CHECK_EQ_INT(send(fd, req, sizeof req - 1, 0), (ssize_t)(sizeof req - 1));
    size_t n = read_all(fd, buf, sizeof buf);
    close(fd);
    char c[25];
    hb_content_fill(c, 25, 0);
    char want[128];
    int w = snprintf(want, sizeof want, "a\r\n%.10s\r\na\r\n%.10s\r\n5\r\n%.5s\r\n0\r\n\r\n", c,
                     c + 10, c + 20);
    char *body = memmem(buf, n, "\r\n\r\n", 4);
    CHECK(body && (size_t)(buf + n - body - 4) == (size_t)w &&
          memcmp(body + 4, want, (size_t)w) == 0);
}

static const uint8_t MASK[4] = {1, 2, 3, 4};

static void send_frame(int fd, int fin, int op, const void *p, size_t n)
{
    uint8_t *f = malloc(n + HB_WS_MAX_HEAD);
    int h = hb_ws_build_head(f, HB_WS_MAX_HEAD, fin, op, n, MASK);
    memcpy(f + h, p, n);
    hb_ws_mask(f + h, n, MASK, 0);
    CHECK_EQ_INT(send(fd, f, (size_t)h + n, 0), (ssize_t)((size_t)h + n));
    free(f);
}

/* The next whole message from the server (frames reassembled); its opcode, or a
 * control frame's. */
typedef struct reader {
    int fd;
    uint8_t in[1 << 21];
    size_t have;
    uint8_t msg[1 << 20]; /* the message being assembled (control frames may cut in) */
    size_t mlen;
    hb_ws_rx rx;
} reader;

static int next_message(reader *r, uint8_t *out, size_t *len, int *code)
{
    *len = 0;
    for (;;) {
        hb_ws_event ev;
        int rc = hb_ws_rx_next(&r->rx, r->in, r->have, &ev);
        if (rc < 0) return rc;
        int ret = 0; /* the event's data points into r->in: take it before moving on */
        if (ev.type == HB_WS_EV_DATA) {
            memcpy(r->msg + r->mlen, ev.data, ev.data_len);
            r->mlen += ev.data_len;
            if (ev.fin) {
                memcpy(out, r->msg, r->mlen);
                *len = r->mlen;
                r->mlen = 0;
                ret = ev.opcode;
            }
        } else if (ev.type == HB_WS_EV_CLOSE) {
            *code = ev.code;
            ret = HB_WS_CLOSE;
        } else if (ev.type == HB_WS_EV_PONG) {
            memcpy(out, ev.data, ev.data_len);
            *len = ev.data_len;
            ret = HB_WS_PONG;
        }
        memmove(r->in, r->in + rc, r->have - (size_t)rc);
        r->have -= (size_t)rc;
        if (ret) return ret;
        if (ev.type != HB_WS_EV_NONE) continue;
        ssize_t n = recv(r->fd, r->in + r->have, sizeof r->in - r->have, 0);
        if (n <= 0) return -1;
        r->have += (size_t)n;
    }
}

static int upgrade(int port, const char *target)
{
    int fd = connect_to(port);
    char req[512];
    int n = snprintf(req, sizeof req,
                     "GET %s HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                     "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                     "Sec-WebSocket-Version: 13\r\n\r\n",
                     target);
    CHECK_EQ_INT(send(fd, req, (size_t)n, 0), n);
    char head[512];
    size_t got = 0;
    while (got < sizeof head - 1 && !memmem(head, got, "\r\n\r\n", 4)) {
        ssize_t r = recv(fd, head + got, 1, 0); /* byte by byte: no frame bytes eaten */
        if (r <= 0) break;
        got += (size_t)r;
    }
    head[got] = 0;
    CHECK(strncmp(head, "HTTP/1.1 101 ", 13) == 0);
    CHECK(strstr(head, "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n") != NULL);
    return fd;
}

static uint8_t msg[600000], got[600000];

static void test_ws(int port)
{
    static reader r;
    r.fd = upgrade(port, "/ws");
    r.have = r.mlen = 0;
    hb_ws_rx_init(&r.rx, HB_WS_CLIENT, 0, 0);
    size_t len;
    int code = 0;
    static const size_t sizes[] = {0, 1, 125, 126, 65535, 65536, 100000, 600000};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        hb_content_fill(msg, sizes[i], i);
        send_frame(r.fd, 1, HB_WS_BINARY, msg, sizes[i]);
        CHECK_EQ_INT(next_message(&r, got, &len, &code), HB_WS_BINARY);
        CHECK(len == sizes[i] && memcmp(got, msg, len) == 0);
    }
    /* a fragmented text message with a ping between its frames */
    send_frame(r.fd, 0, HB_WS_TEXT, "he", 2);
    send_frame(r.fd, 1, HB_WS_PING, "pp", 2);
    send_frame(r.fd, 1, HB_WS_CONT, "llo", 3);
    CHECK_EQ_INT(next_message(&r, got, &len, &code), HB_WS_PONG);
    CHECK_MEM(got, len, "pp");
    CHECK_EQ_INT(next_message(&r, got, &len, &code), HB_WS_TEXT);
    CHECK_MEM(got, len, "hello");
    send_frame(r.fd, 1, HB_WS_CLOSE, "\x03\xe8", 2);
    CHECK_EQ_INT(next_message(&r, got, &len, &code), HB_WS_CLOSE);
    CHECK_EQ_INT(code, 1000);
    CHECK_EQ_INT(recv(r.fd, got, 1, 0), 0); /* then the server closes */
    close(r.fd);

    /* push, then the server's close */
    r.fd = upgrade(port, "/ws?push=3&size=70000");
    r.have = r.mlen = 0;
    hb_ws_rx_init(&r.rx, HB_WS_CLIENT, 0, 0);
    hb_content_fill(msg, 70000, 0);
    for (int i = 0; i < 3; i++) {
        CHECK_EQ_INT(next_message(&r, got, &len, &code), HB_WS_BINARY);
        CHECK(len == 70000 && memcmp(got, msg, len) == 0);
    }
    CHECK_EQ_INT(next_message(&r, got, &len, &code), HB_WS_CLOSE);
    CHECK_EQ_INT(code, 1000);
    send_frame(r.fd, 1, HB_WS_CLOSE, "\x03\xe8", 2);
    close(r.fd);

    /* invalid UTF-8: 1007 */
    r.fd = upgrade(port, "/ws");
    r.have = r.mlen = 0;
    hb_ws_rx_init(&r.rx, HB_WS_CLIENT, 0, 0);
    send_frame(r.fd, 1, HB_WS_TEXT, "\xed\xa0\x80", 3);
    CHECK_EQ_INT(next_message(&r, got, &len, &code), HB_WS_CLOSE);
    CHECK_EQ_INT(code, 1007);
    close(r.fd);
}

int main(void)
{
    hb_server_opts o;
    hb_server_opts_init(&o);
    hb_server *s = NULL;
    char err[HB_ERR_LEN] = "";
    CHECK_EQ_INT(hb_server_start(&s, &o, err), 0);
    if (!s) HB_TEST_MAIN_END();
    int port = hb_server_port(s);
    test_sse(port);
    test_paced_stream(port);
    test_ws(port);
    usleep(200000); /* the last close reaches the server */
    hb_server_stats st;
    hb_server_stats_read(s, &st);
    CHECK_EQ_INT(st.sm.sse_events, 3);
    CHECK_EQ_INT(st.sm.stream_chunks, 3);
    CHECK_EQ_INT(st.ws.upgrades, 3);
    CHECK_EQ_INT(st.ws.messages_in, 9);
    CHECK_EQ_INT(st.ws.messages_out, 9 + 3);
    CHECK_EQ_INT(st.ws.pushed, 3);
    CHECK_EQ_INT(st.ws.pings, 1);
    CHECK_EQ_INT(st.ws.errors, 1);
    CHECK_EQ_INT(st.ws.close_sent[0], 2);
    CHECK_EQ_INT(st.ws.close_sent[7], 1);
    CHECK_EQ_INT(st.ws.close_received[0], 2);
    hb_server_free(s);
    HB_TEST_MAIN_END();
}
