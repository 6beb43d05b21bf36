/* Unit tests for hb_h2_client: a client session against an nghttp2 server
 * session on the other end of a socketpair, driven step by step. */
#include <nghttp2/nghttp2.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "h2/hb_h2_client.h"
#include "http/hb_request.h"
#include "hb_test.h"

/* ---- a tiny scripted server ---- */

typedef struct srv {
    int fd;
    nghttp2_session *ng;
    const char *body;
    size_t body_len, body_off;
} srv;

static ssize_t srv_body(nghttp2_session *s, int32_t id, uint8_t *buf, size_t len, uint32_t *fl,
                        nghttp2_data_source *src, void *ud)
{
    (void)s, (void)id, (void)src;
    srv *v = ud;
    size_t n = v->body_len - v->body_off;
    if (n > len) n = len;
    memcpy(buf, v->body + v->body_off, n);
    v->body_off += n;
    if (v->body_off == v->body_len) *fl |= NGHTTP2_DATA_FLAG_EOF;
    return (ssize_t)n;
}

static char last_path[64];

static int srv_header(nghttp2_session *s, const nghttp2_frame *f, const uint8_t *n, size_t nl,
                      const uint8_t *v, size_t vl, uint8_t flags, void *ud)
{
    (void)s, (void)f, (void)flags, (void)ud;
    if (nl == 5 && memcmp(n, ":path", 5) == 0)
        snprintf(last_path, sizeof last_path, "%.*s", (int)vl, v);
    return 0;
}

static int srv_frame(nghttp2_session *s, const nghttp2_frame *f, void *ud)
{
    srv *v = ud;
    if (f->hd.type != NGHTTP2_HEADERS || !(f->hd.flags & NGHTTP2_FLAG_END_STREAM)) return 0;
    int32_t id = f->hd.stream_id;
    if (strcmp(last_path, "/rst") == 0)
        return nghttp2_submit_rst_stream(s, 0, id, NGHTTP2_INTERNAL_ERROR);
    if (strcmp(last_path, "/goaway") == 0)
        return nghttp2_submit_goaway(s, 0, id - 2, NGHTTP2_NO_ERROR, NULL, 0);
    if (strcmp(last_path, "/hold") == 0) return 0; /* never answered */
    if (strcmp(last_path, "/big") == 0) {          /* header blocks that grow nghttp2's buffers */
        static uint8_t big[20000];
        memset(big, 'b', sizeof big);
        nghttp2_nv bh[] = {{(uint8_t *)":status", (uint8_t *)"200", 7, 3, 0},
                           {(uint8_t *)"server", (uint8_t *)"t", 6, 1, 0},
                           {(uint8_t *)"x-big", big, 5, sizeof big, 0},
                           {(uint8_t *)"x-big2", big, 6, sizeof big / 2, 0}};
        nghttp2_data_provider p = {.source.ptr = NULL, .read_callback = srv_body};
        v->body_off = 0;
        return nghttp2_submit_response(s, id, bh, 4, &p);
    }
    nghttp2_nv hd[] = {{(uint8_t *)":status", (uint8_t *)"200", 7, 3, 0},
                       {(uint8_t *)"server", (uint8_t *)"t", 6, 1, 0}};
    nghttp2_data_provider p = {.source.ptr = NULL, .read_callback = srv_body};
    v->body_off = 0;
    return nghttp2_submit_response(s, id, hd, 2, &p);
}

static void srv_init(srv *v, int fd, uint32_t max_streams)
{
    memset(v, 0, sizeof *v);
    v->fd = fd;
    v->body = "hello";
    v->body_len = 5;
    nghttp2_session_callbacks *cb;
    nghttp2_session_callbacks_new(&cb);
    nghttp2_session_callbacks_set_on_header_callback(cb, srv_header);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, srv_frame);
    nghttp2_session_server_new(&v->ng, cb, v);
    nghttp2_session_callbacks_del(cb);
    nghttp2_settings_entry iv = {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, max_streams};
    nghttp2_submit_settings(v->ng, 0, &iv, 1);
}

/* Move bytes through the server once. */
static void srv_pump(srv *v)
{
    uint8_t buf[65536];
    ssize_t n;
    while ((n = read(v->fd, buf, sizeof buf)) > 0)
        nghttp2_session_mem_recv(v->ng, buf, (size_t)n);
    const uint8_t *p;
    while ((n = nghttp2_session_mem_send(v->ng, &p)) > 0)
        CHECK(write(v->fd, p, (size_t)n) == n);
}

/* ---- the client side ---- */

typedef struct rec {
    int status, closes, end, headers;
    uint32_t code;
    char data[64];
    size_t dlen;
    int32_t goaway_last;
} rec;

static void on_header(void *ud, void *sud, const char *n, size_t nl, const char *v, size_t vl)
{
    (void)ud;
    rec *r = sud;
    if (nl == 6 && memcmp(n, "server", 6) == 0) r->headers++;
    if (nl == 5 && memcmp(n, "x-big", 5) == 0 && vl == 20000 && v[0] == 'b' && v[vl - 1] == 'b')
        r->headers += 10;
}
static void on_response(void *ud, void *sud, int status)
{
    (void)ud;
    ((rec *)sud)->status = status;
}
static void on_data(void *ud, void *sud, const uint8_t *d, size_t n)
{
    (void)ud;
    rec *r = sud;
    memcpy(r->data + r->dlen, d, n);
    r->dlen += n;
}
static void on_close(void *ud, void *sud, int end, uint32_t code)
{
    (void)ud;
    rec *r = sud;
    r->closes++;
    r->end = end;
    r->code = code;
}
static void on_goaway(void *ud, int32_t last, uint32_t code)
{
    (void)code;
    ((rec *)ud)->goaway_last = last;
}
static const hb_h2_client_callbacks CBS = {on_header, on_response, on_data, on_close, on_goaway};

static int submit(hb_h2_client *c, const char *url, rec *r)
{
    char err[HB_ERR_LEN];
    hb_url u;
    CHECK_EQ_INT(hb_url_split(url, strlen(url), &u, err), 0);
    hb_head_spec s = {"GET", 3, &u, NULL, 0, HB_REQ_NO_BODY, 1, NULL};
    hb_header f[16];
    char buf[256];
    int n = hb_build_h2_fields(f, 16, buf, sizeof buf, &s, err);
    CHECK(n == 4);
    return hb_h2_client_submit(c, f, (size_t)n, NULL, r, err);
}

/* Alternate client writes, server turns and client reads; last read result. */
static int run(hb_h2_client *c, srv *v, int rounds)
{
    int rc = HB_AGAIN;
    for (int i = 0; i < rounds; i++) {
        if (hb_h2_client_wants_write(c)) {
            int w = hb_h2_client_write(c);
            if (w < 0 && w != HB_AGAIN) return w;
        }
        srv_pump(v);
        rc = hb_h2_client_read(c);
        if (rc != HB_AGAIN) return rc;
    }
    return rc;
}

static void pair(int fds[2], hb_sock *s)
{
    CHECK_EQ_INT(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds), 0);
    hb_sock_init(s);
    s->fd = fds[0];
}

static void test_exchange(void)
{
    int fds[2];
    hb_sock s;
    pair(fds, &s);
    srv v;
    srv_init(&v, fds[1], 2);
    hb_h2_client c;
    char err[HB_ERR_LEN];
    rec top = {0}, a = {0}, b = {0}, d = {0}, e = {0};
    CHECK_EQ_INT(hb_h2_client_init(&c, &s, NULL, &CBS, &top, err), 0);
    CHECK_EQ_INT(hb_h2_client_room(&c), 1); /* one stream until the server's SETTINGS */
    CHECK_EQ_INT(run(&c, &v, 3), HB_AGAIN); /* preface + SETTINGS both ways */
    CHECK_EQ_INT(hb_h2_client_peer_max_streams(&c), 2);
    CHECK_EQ_INT(submit(&c, "http://h/", &a), 1);
    CHECK_EQ_INT(submit(&c, "http://h/rst", &b), 3);
    /* The peer's SETTINGS_MAX_CONCURRENT_STREAMS is 2: no room for a third. */
    CHECK_EQ_INT(hb_h2_client_room(&c), 0);
    CHECK_EQ_INT(submit(&c, "http://h/", &d), HB_AGAIN);
    CHECK_EQ_INT(hb_h2_client_open_streams(&c), 2);
    CHECK_EQ_INT(run(&c, &v, 4), HB_AGAIN);
    CHECK_EQ_INT(a.status, 200);
    CHECK_EQ_INT(a.headers, 1);
    CHECK_MEM(a.data, a.dlen, "hello");
    CHECK_EQ_INT(a.closes, 1);
    CHECK_EQ_INT(a.end, HB_H2_END_OK);
    CHECK_EQ_INT(b.status, 0);
    CHECK_EQ_INT(b.closes, 1);
    CHECK_EQ_INT(b.end, HB_H2_END_RESET);
    CHECK_EQ_INT(b.code, NGHTTP2_INTERNAL_ERROR);
    CHECK_EQ_INT(hb_h2_client_open_streams(&c), 0);
    /* Large header fields, twice: the HPACK buffers grow (realloc) and are reused. */
    for (int k = 0; k < 2; k++) {
        rec g = {0};
        CHECK(submit(&c, "http://h/big", &g) > 0);
        CHECK_EQ_INT(run(&c, &v, 4), HB_AGAIN);
        CHECK_EQ_INT(g.status, 200);
        CHECK_EQ_INT(g.headers, 11);
        CHECK_EQ_INT(g.end, HB_H2_END_OK);
    }
    /* GOAWAY naming stream 9 as the last: 11 (submitted after) is not processed. */
    CHECK_EQ_INT(submit(&c, "http://h/hold", &d), 9);
    CHECK_EQ_INT(submit(&c, "http://h/goaway", &e), 11);
    int rc = run(&c, &v, 4);
    CHECK_EQ_INT(rc, HB_AGAIN); /* stream 5 still open */
    CHECK_EQ_INT(top.goaway_last, 9);
    CHECK_EQ_INT(e.closes, 1);
    CHECK_EQ_INT(e.end, HB_H2_END_GOAWAY);
    CHECK_EQ_INT(d.closes, 0);
    CHECK_EQ_INT(submit(&c, "http://h/", &a), HB_E_CLOSED);
    CHECK_EQ_INT(hb_h2_client_done(&c), 0);
    hb_h2_client_free(&c);
    CHECK_EQ_INT(d.closes, 0); /* free runs no callbacks */
    hb_h2_client_free(&c);
    nghttp2_session_del(v.ng);
    close(fds[0]);
    close(fds[1]);
}

static void test_not_h2(void)
{
    int fds[2];
    hb_sock s;
    pair(fds, &s);
    hb_h2_client c;
    char err[HB_ERR_LEN];
    rec top = {0};
    CHECK_EQ_INT(hb_h2_client_init(&c, &s, NULL, &CBS, &top, err), 0);
    CHECK_EQ_INT(hb_h2_client_write(&c), 0);
    const char *h1 = "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n";
    CHECK(write(fds[1], h1, strlen(h1)) > 0);
    CHECK_EQ_INT(hb_h2_client_read(&c), HB_E_NO_H2);
    CHECK(strstr(c.err, "HTTP/1.1 400") != NULL);
    hb_h2_client_free(&c);
    close(fds[0]);
    close(fds[1]);
}

static void test_bad_frame_and_eof(void)
{
    int fds[2];
    hb_sock s;
    pair(fds, &s);
    hb_h2_client c;
    char err[HB_ERR_LEN];
    rec top = {0};
    CHECK_EQ_INT(hb_h2_client_init(&c, &s, NULL, &CBS, &top, err), 0);
    CHECK_EQ_INT(hb_h2_client_write(&c), 0);
    /* A DATA frame on stream 0 instead of SETTINGS: a connection error. */
    const uint8_t bad[9] = {0, 0, 0, 0, 0, 0, 0, 0, 0};
    CHECK(write(fds[1], bad, 9) == 9);
    int rc = hb_h2_client_read(&c);
    if (rc == HB_AGAIN) rc = hb_h2_client_write(&c);
    CHECK_EQ_INT(rc, HB_E_H2);
    CHECK(strstr(c.err, "GOAWAY(PROTOCOL_ERROR)") != NULL);
    CHECK_EQ_INT(hb_h2_client_room(&c), 0);
    hb_h2_client_free(&c);
    close(fds[0]);
    close(fds[1]);

    pair(fds, &s);
    CHECK_EQ_INT(hb_h2_client_init(&c, &s, NULL, &CBS, &top, err), 0);
    close(fds[1]);
    CHECK_EQ_INT(hb_h2_client_read(&c), HB_E_CLOSED);
    hb_h2_client_free(&c);
    close(fds[0]);
}

static void test_invalid(void)
{
    hb_sock s;
    hb_sock_init(&s);
    hb_h2_client c;
    char err[HB_ERR_LEN];
    hb_h2_client_callbacks none = {0};
    CHECK_EQ_INT(hb_h2_client_init(&c, &s, NULL, &none, NULL, err), HB_E_INVALID);
    hb_h2_client_settings st = {.window_bits = 31};
    CHECK_EQ_INT(hb_h2_client_init(&c, &s, &st, &CBS, NULL, err), HB_E_INVALID);
    hb_h2_client_free(&c);
    CHECK(strcmp(hb_h2_end_name(HB_H2_END_RESET), "rst_stream") == 0);
    CHECK(strcmp(hb_h2_code_name(7), "REFUSED_STREAM") == 0);
    CHECK(strcmp(hb_h2_code_name(99), "unknown") == 0);
}

int main(void)
{
    test_exchange();
    test_not_h2();
    test_bad_frame_and_eof();
    test_invalid();
    HB_TEST_MAIN_END();
}
