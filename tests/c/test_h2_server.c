/* test_h2_server.c - hb_h2_server in memory (routes, bodies byte for byte, timers on
 * a fake clock, the stats invariant when a session ends with streams open,
 * SETTINGS validation) and the embedded server over h2c and over TLS with
 * ALPN h2, all under ASan/UBSan. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/hb_content.h"
#include "h2/hb_h2_server.h"
#include "server/hb_server.h"
#include "net/hb_sock.h"
#include "hb_test.h"
#include "net/hb_tls.h"

static const char PREFACE[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/* ---- a tiny client-side frame builder ---- */

typedef struct {
    unsigned char b[16384];
    size_t n;
} wbuf;

static void put_frame(wbuf *w, int type, int flags, uint32_t stream, const void *p, size_t len)
{
    unsigned char h[9] = {
        (unsigned char)(len >> 16),    (unsigned char)(len >> 8),    (unsigned char)len,
        (unsigned char)type,           (unsigned char)flags,         (unsigned char)(stream >> 24),
        (unsigned char)(stream >> 16), (unsigned char)(stream >> 8), (unsigned char)stream};
    memcpy(w->b + w->n, h, 9);
    memcpy(w->b + w->n + 9, p, len);
    w->n += 9 + len;
}

/* HPACK literal without indexing, new name, lengths < 127. */
static size_t lit(unsigned char *p, const char *name, const char *value)
{
    size_t nl = strlen(name), vl = strlen(value), k = 0;
    p[k++] = 0;
    p[k++] = (unsigned char)nl;
    memcpy(p + k, name, nl);
    k += nl;
    p[k++] = (unsigned char)vl;
    memcpy(p + k, value, vl);
    return k + vl;
}

static void put_request(wbuf *w, uint32_t stream, const char *method, const char *path,
                        int end_stream)
{
    unsigned char blk[512];
    size_t k = lit(blk, ":method", method);
    k += lit(blk + k, ":scheme", "http");
    k += lit(blk + k, ":path", path);
    k += lit(blk + k, ":authority", "x");
    put_frame(w, 1, 0x4 | (end_stream ? 0x1 : 0), stream, blk, k);
}

static void put_window(wbuf *w, uint32_t stream, uint32_t inc)
{
    unsigned char p[4] = {(unsigned char)(inc >> 24), (unsigned char)(inc >> 16),
                          (unsigned char)(inc >> 8), (unsigned char)inc};
    put_frame(w, 8, 0, stream, p, 4);
}

/* ---- reading the server's frames ---- */

#define NSTREAMS 16
typedef struct {
    unsigned char hdr[9];
    size_t hlen, left;
    int type, flags;
    uint32_t stream;
    size_t data[NSTREAMS]; /* DATA payload bytes per stream id */
    int ended[NSTREAMS], headers[NSTREAMS], rst[NSTREAMS], goaway;
    int data_ok; /* every DATA byte of the streams in `content` matched */
    int content[NSTREAMS];
    uint32_t rst_code[NSTREAMS];
    unsigned char rst_buf[4];
    size_t rst_got;
    char text[NSTREAMS][128]; /* the first bytes of non-content bodies */
} reader;

static void reader_feed(reader *r, const unsigned char *p, size_t n)
{
    while (n) {
        if (r->hlen < 9) {
            r->hdr[r->hlen++] = *p++;
            n--;
            if (r->hlen == 9) {
                r->left = (size_t)r->hdr[0] << 16 | (size_t)r->hdr[1] << 8 | r->hdr[2];
                r->type = r->hdr[3];
                r->flags = r->hdr[4];
                r->stream = ((uint32_t)r->hdr[5] << 24 | (uint32_t)r->hdr[6] << 16 |
                             (uint32_t)r->hdr[7] << 8 | r->hdr[8]) &
                            0x7fffffffu;
                r->rst_got = 0;
                if (r->stream < NSTREAMS) {
                    if (r->type == 1) r->headers[r->stream]++;
                    if ((r->type == 0 || r->type == 1) && (r->flags & 1)) r->ended[r->stream] = 1;
                    if (r->type == 3) r->rst[r->stream]++;
                }
                if (r->type == 7) r->goaway++;
                if (r->left == 0) r->hlen = 0;
            }
            continue;
        }
        size_t k = n < r->left ? n : r->left;
        if (r->type == 0 && r->stream < NSTREAMS) {
            size_t off = r->data[r->stream];
            if (r->content[r->stream]) {
                unsigned char *want = malloc(k);
                hb_content_fill(want, k, off);
                if (memcmp(want, p, k) != 0) r->data_ok = 0;
                free(want);
            } else if (off < sizeof r->text[0] - 1) {
                size_t c = k < sizeof r->text[0] - 1 - off ? k : sizeof r->text[0] - 1 - off;
                memcpy(r->text[r->stream] + off, p, c);
            }
            r->data[r->stream] += k;
        }
        if (r->type == 3 && r->stream < NSTREAMS) {
            for (size_t i = 0; i < k && r->rst_got < 4; i++)
                r->rst_buf[r->rst_got++] = p[i];
            if (r->rst_got == 4)
                r->rst_code[r->stream] = (uint32_t)r->rst_buf[0] << 24 |
                                         (uint32_t)r->rst_buf[1] << 16 |
                                         (uint32_t)r->rst_buf[2] << 8 | r->rst_buf[3];
        }
        p += k;
        n -= k;
        r->left -= k;
        if (r->left == 0) r->hlen = 0;
    }
}

static void drain(hb_h2_server *s, reader *r)
{
    for (;;) {
        long q = hb_h2_server_fill(s);
        CHECK(q >= 0);
        if (q <= 0) return;
        int niov;
        const struct iovec *v = hb_h2_server_out(s, &niov);
        size_t total = 0;
        for (int i = 0; i < niov; i++) {
            reader_feed(r, v[i].iov_base, v[i].iov_len);
            total += v[i].iov_len;
        }
        CHECK_EQ_INT(total, (size_t)q);
        hb_h2_server_sent(s, total);
        CHECK(hb_h2_server_idle_out(s));
    }
}

static void session_new(hb_h2_server **s, hb_h2_server_stats *st, uint64_t *now)
{
    memset(st, 0, sizeof *st);
    hb_h2_server_config cfg;
    hb_h2_server_config_init(&cfg);
    cfg.stats = st;
    cfg.now = now;
    cfg.date = "Thu, 01 Jan 2026 00:00:00 GMT";
    char err[256];
    CHECK_EQ_INT(hb_h2_server_new(s, &cfg, err), 0);
}

static void test_session_routes(void)
{
    uint64_t now = 5000000000ull;
    hb_h2_server_stats st;
    hb_h2_server *s = NULL;
    session_new(&s, &st, &now);
    if (!s) return;
    static wbuf w;
    w.n = 0;
    memcpy(w.b, PREFACE, 24);
    w.n = 24;
    put_frame(&w, 4, 0, 0, "", 0); /* SETTINGS */
    put_window(&w, 0, 1u << 20);
    put_request(&w, 1, "GET", "/bytes/100000", 1);
    put_window(&w, 1, 1u << 20);
    put_request(&w, 3, "POST", "/sink", 0);
    put_frame(&w, 0, 0x1, 3, "123456789", 9);
    put_request(&w, 5, "GET", "/fault/reset", 1);
    put_request(&w, 7, "GET", "/delay/10?bytes=5", 1);
    put_request(&w, 9, "GET", "/chunked/3000?chunk=7", 1);
    put_request(&w, 11, "HEAD", "/bytes/10", 1);
    static reader r;
    memset(&r, 0, sizeof r);
    r.data_ok = 1;
    r.content[1] = r.content[7] = r.content[9] = 1;
    CHECK_EQ_INT(hb_h2_server_recv(s, w.b, w.n), 0);
    drain(s, &r);
    CHECK_EQ_INT(r.data[1], 100000);
    CHECK(r.ended[1]);
    CHECK(strcmp(r.text[3], "{\"bytes\": 9, \"crc32\": \"cbf43926\"}") == 0);
    CHECK_EQ_INT(r.rst[5], 1);
    CHECK_EQ_INT(r.rst_code[5], 2); /* INTERNAL_ERROR */
    CHECK_EQ_INT(r.headers[7], 0);  /* still waiting */
    CHECK_EQ_INT(r.data[9], 3000);
    CHECK(r.ended[9]);
    CHECK(r.headers[11] == 1 && r.ended[11] && r.data[11] == 0);
    uint64_t d = hb_h2_server_deadline(s);
    CHECK_EQ_INT(d, now + 10000000ull);
    now = d;
    hb_h2_server_timer(s);
    drain(s, &r);
    CHECK_EQ_INT(r.headers[7], 1);
    CHECK_EQ_INT(r.data[7], 5);
    CHECK(r.ended[7]);
    CHECK(r.data_ok);
    CHECK_EQ_INT(hb_h2_server_deadline(s), 0);
    CHECK_EQ_INT(hb_h2_server_busy(s), 0);
    CHECK_EQ_INT(st.streams, 6);
    CHECK_EQ_INT(st.by_route[HB_ROUTE_BYTES], 2);
    CHECK_EQ_INT(st.by_route[HB_ROUTE_SINK], 1);
    CHECK_EQ_INT(st.by_route[HB_ROUTE_RESET], 1);
    CHECK_EQ_INT(st.by_route[HB_ROUTE_DELAY], 1);
    CHECK_EQ_INT(st.by_route[HB_ROUTE_CHUNKED], 1);
    CHECK_EQ_INT(st.by_status[200], 5);
    CHECK_EQ_INT(st.by_status[0], 1);
    CHECK_EQ_INT(st.rst_sent, 1);
    CHECK_EQ_INT(st.body_in, 9);
    CHECK_EQ_INT(st.protocol_errors, 0);
    hb_h2_server_free(s, 0);
}

static void test_drip_stall_and_free(void)
{
    uint64_t now = 1000000000ull;
    hb_h2_server_stats st;
    hb_h2_server *s = NULL;
    session_new(&s, &st, &now);
    if (!s) return;
    static wbuf w;
    memcpy(w.b, PREFACE, 24);
    w.n = 24;
    put_frame(&w, 4, 0, 0, "", 0);
    put_request(&w, 1, "GET", "/drip/5?interval_ms=2&chunk=2", 1);
    put_request(&w, 3, "GET", "/fault/stall/50?bytes=10", 1);
    put_request(&w, 5, "GET", "/delay/1000", 1);
    static reader r;
    memset(&r, 0, sizeof r);
    r.data_ok = 1;
    r.content[1] = r.content[3] = 1;
    CHECK_EQ_INT(hb_h2_server_recv(s, w.b, w.n), 0);
    drain(s, &r);
    CHECK(r.headers[1] == 1 && r.data[1] == 0);
    CHECK(r.headers[3] == 1 && r.data[3] == 5 && !r.ended[3]);
    for (int i = 0; i < 20 && !(r.ended[1] && r.ended[3]); i++) {
        uint64_t d = hb_h2_server_deadline(s);
        CHECK(d > 0);
        now = d;
        hb_h2_server_timer(s);
        drain(s, &r);
    }
    CHECK(r.ended[1] && r.data[1] == 5);
    CHECK(r.ended[3] && r.data[3] == 10);
    CHECK(r.data_ok);
    CHECK_EQ_INT(hb_h2_server_busy(s), 1); /* /delay/1000 still waits */
    hb_h2_server_free(s, 1);               /* the peer left: status 0, client_gone */
    CHECK_EQ_INT(st.by_status[200], 2);
    CHECK_EQ_INT(st.by_status[0], 1);
    CHECK_EQ_INT(st.client_gone, 1);
}

static void test_bad_input_goaway(void)
{
    uint64_t now = 1;
    hb_h2_server_stats st;
    hb_h2_server *s = NULL;
    session_new(&s, &st, &now);
    if (!s) return;
    static wbuf w;
    memcpy(w.b, PREFACE, 24);
    w.n = 24;
    put_frame(&w, 0, 0, 0, "x", 1); /* DATA on stream 0 */
    static reader r;
    memset(&r, 0, sizeof r);
    hb_h2_server_recv(s, w.b, w.n);
    drain(s, &r);
    CHECK_EQ_INT(r.goaway, 1);
    CHECK(hb_h2_server_done(s));
    CHECK_EQ_INT(st.goaway_sent, 1);
    CHECK_EQ_INT(st.protocol_errors, 1);
    hb_h2_server_free(s, 0);

    session_new(&s, &st, &now);
    if (!s) return;
    memset(&r, 0, sizeof r);
    CHECK_EQ_INT(hb_h2_server_recv(s, (const uint8_t *)"GET / HTTP/1.1\r\n\r\n", 18), -1);
    drain(s, &r);
    CHECK_EQ_INT(st.protocol_errors, 1);
    CHECK(hb_h2_server_done(s));
    hb_h2_server_free(s, 0);
}

static void test_config_ranges(void)
{
    hb_h2_server_stats st;
    uint64_t now = 0;
    hb_h2_server_config cfg;
    hb_h2_server_config_init(&cfg);
    cfg.stats = &st;
    cfg.now = &now;
    hb_h2_server *s = NULL;
    char err[256];
    cfg.max_concurrent_streams = 0;
    CHECK_EQ_INT(hb_h2_server_new(&s, &cfg, err), HB_E_INVALID);
    CHECK(strstr(err, "max concurrent streams") != NULL);
    cfg.max_concurrent_streams = 100;
    cfg.max_frame_size = 16383;
    CHECK_EQ_INT(hb_h2_server_new(&s, &cfg, err), HB_E_INVALID);
    cfg.max_frame_size = 16384;
    cfg.initial_window_size = 0x80000000u;
    CHECK_EQ_INT(hb_h2_server_new(&s, &cfg, err), HB_E_INVALID);
    CHECK(s == NULL);
    hb_server_opts o;
    hb_server_opts_init(&o);
    hb_server *srv = NULL;
    o.h2_max_frame_size = 1 << 24;
    CHECK_EQ_INT(hb_server_start(&srv, &o, err), HB_E_INVALID);
    CHECK(strstr(err, "h2_max_frame_size") != NULL);
}

/* ---- through the embedded server ---- */

static int read_stream_end(hb_sock *c, reader *r, uint32_t stream)
{
    static unsigned char buf[65536];
    for (int i = 0; i < 500 && !r->ended[stream]; i++) {
        ssize_t n = hb_sock_read(c, buf, sizeof buf);
        if (n == HB_AGAIN) {
            struct pollfd p = {c->fd, (short)(c->want == HB_WANT_WRITE ? POLLOUT : POLLIN), 0};
            poll(&p, 1, 10);
            continue;
        }
        if (n <= 0) return -1;
        reader_feed(r, buf, (size_t)n);
    }
    return r->ended[stream] ? 0 : -1;
}

static void server_request(int tls)
{
    hb_server_opts o;
    hb_server_opts_init(&o);
    o.tls = tls;
    hb_server *s = NULL;
    char err[HB_ERR_LEN] = "";
    CHECK_EQ_INT(hb_server_start(&s, &o, err), 0);
    if (!s) return;
    struct sockaddr_storage ss;
    socklen_t sl;
    CHECK_EQ_INT(hb_resolve_host("localhost", hb_server_port(s), &ss, &sl, err), 0);
    hb_sock c;
    int rc = hb_sock_connect(&c, (struct sockaddr *)&ss, sl, 0, err);
    CHECK(rc == 0 || rc == HB_AGAIN);
    struct pollfd pw = {c.fd, POLLOUT, 0};
    poll(&pw, 1, 1000);
    hb_tls_ctx *cctx = NULL;
    if (tls) {
        hb_tls_client_opts co;
        hb_tls_client_opts_init(&co);
        co.ca_pem = hb_server_cert_pem(s, NULL);
        co.alpn = "h2";
        CHECK_EQ_INT(hb_tls_client_ctx_new(&cctx, &co, err), 0);
        CHECK_EQ_INT(hb_sock_tls_client(&c, cctx, "localhost", err), 0);
        rc = HB_AGAIN;
        for (int i = 0; i < 500 && rc == HB_AGAIN; i++) {
            struct pollfd p = {c.fd, (short)(c.want == HB_WANT_WRITE ? POLLOUT : POLLIN), 0};
            poll(&p, 1, 10);
            rc = hb_sock_handshake(&c, err);
        }
        CHECK_EQ_INT(rc, 0);
        size_t al = 0;
        const char *alpn = hb_sock_alpn(&c, &al);
        CHECK(alpn && al == 2 && memcmp(alpn, "h2", 2) == 0);
    }
    static wbuf w;
    memcpy(w.b, PREFACE, 24);
    w.n = 24;
    put_frame(&w, 4, 0, 0, "", 0);
    put_request(&w, 1, "GET", "/bytes/20000", 1);
    put_request(&w, 3, "GET", "/__stats", 1);
    CHECK_EQ_INT(hb_sock_write(&c, w.b, w.n), (ssize_t)w.n);
    static reader r;
    memset(&r, 0, sizeof r);
    r.data_ok = 1;
    r.content[1] = 1;
    CHECK_EQ_INT(read_stream_end(&c, &r, 1), 0);
    CHECK_EQ_INT(read_stream_end(&c, &r, 3), 0);
    CHECK_EQ_INT(r.data[1], 20000);
    CHECK(r.data_ok);
    CHECK(strncmp(r.text[3], "{\"requests\": 1,", 15) == 0);
    hb_sock_close(&c);
    hb_tls_ctx_free(cctx);
    hb_server_stats st;
    for (int i = 0; i < 100; i++) { /* the worker sees the close a moment later */
        hb_server_stats_read(s, &st);
        if (st.connections_closed == 1) break;
        usleep(10000);
    }
    CHECK_EQ_INT(st.requests, 1);
    CHECK_EQ_INT(st.requests_h2, 1);
    CHECK_EQ_INT(st.connections_h2, 1);
    CHECK_EQ_INT(st.connections_h1, 0);
    CHECK_EQ_INT(st.h2_streams, 2);
    CHECK_EQ_INT(st.by_status[200], 1);
    CHECK_EQ_INT(st.connections_closed, 1);
    hb_server_free(s);
}

int main(void)
{
    test_session_routes();
    test_drip_stall_and_free();
    test_bad_input_goaway();
    test_config_ranges();
    server_request(0);
    server_request(1);
    HB_TEST_MAIN_END();
}
