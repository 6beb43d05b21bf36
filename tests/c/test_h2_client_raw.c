/* hb_h2_client against hand-built server frames: what a client must check
 * (RFC 9113 sections 4-8) and what it must answer. Header blocks are built
 * by hand with raw HPACK (indexed :status, literals without Huffman). */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "h2/hb_h2_client.h"
#include "hb_test.h"

typedef struct rec {
    int status, responses, closes, end;
    uint32_t code;
    char data[256];
    size_t dlen;
} rec;

static void on_response(void *ud, void *sud, int status)
{
    (void)ud;
    rec *r = sud;
    r->status = status;
    r->responses++;
}
static void on_data(void *ud, void *sud, const uint8_t *d, size_t n)
{
    (void)ud;
    rec *r = sud;
    if (r->dlen + n <= sizeof r->data) memcpy(r->data + r->dlen, d, n);
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
static const hb_h2_client_callbacks CBS = {NULL, on_response, on_data, on_close, NULL};

static const hb_header GET[] = {{":method", 7, "GET", 3},
                                {":scheme", 7, "http", 4},
                                {":authority", 10, "h", 1},
                                {":path", 5, "/", 1}};
static const hb_header HEAD[] = {{":method", 7, "HEAD", 4},
                                 {":scheme", 7, "http", 4},
                                 {":authority", 10, "h", 1},
                                 {":path", 5, "/", 1}};

/* ---- frame building ---- */

typedef struct buf {
    uint8_t b[8192];
    size_t n;
} buf;

static void frame(buf *o, uint8_t type, uint8_t flags, uint32_t sid, const void *pl, size_t len)
{
    uint8_t *p = o->b + o->n;
    p[0] = (uint8_t)(len >> 16), p[1] = (uint8_t)(len >> 8), p[2] = (uint8_t)len;
    p[3] = type, p[4] = flags;
    p[5] = (uint8_t)(sid >> 24), p[6] = (uint8_t)(sid >> 16), p[7] = (uint8_t)(sid >> 8);
    p[8] = (uint8_t)sid;
    if (len) memcpy(p + 9, pl, len);
    o->n += 9 + len;
}

/* literal field without indexing, new name, raw strings (< 127 bytes) */
static size_t lit(uint8_t *p, const char *n, const char *v)
{
    size_t nl = strlen(n), vl = strlen(v);
    p[0] = 0x00;
    p[1] = (uint8_t)nl;
    memcpy(p + 2, n, nl);
    p[2 + nl] = (uint8_t)vl;
    memcpy(p + 3 + nl, v, vl);
    return 3 + nl + vl;
}

/* HEADERS with :status 200 (static index 8) and extra fields "name", "value", ... */
static void headers(buf *o, uint32_t sid, uint8_t flags, const char *const *kv, int nkv)
{
    uint8_t blk[1024];
    size_t n = 0;
    blk[n++] = 0x88;
    for (int i = 0; i + 1 < nkv; i += 2)
        n += lit(blk + n, kv[i], kv[i + 1]);
    frame(o, 1, flags | 0x4, sid, blk, n);
}

static void settings(buf *o)
{
    static const uint8_t mcs[6] = {0, 3, 0, 0, 0, 100};
    frame(o, 4, 0, 0, mcs, 6);
}

/* ---- a session on a socketpair ---- */

typedef struct sess {
    int fds[2];
    hb_sock s;
    hb_h2_client c;
    buf out; /* what the client wrote */
} sess;

static void start(sess *x)
{
    memset(x, 0, sizeof *x);
    CHECK_EQ_INT(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, x->fds), 0);
    hb_sock_init(&x->s);
    x->s.fd = x->fds[0];
    char err[HB_ERR_LEN];
    CHECK_EQ_INT(hb_h2_client_init(&x->c, &x->s, NULL, &CBS, NULL, err), 0);
}

/* Flush the client, collect its bytes (frames after the preface). */
static void pull(sess *x)
{
    while (hb_h2_client_wants_write(&x->c))
        if (hb_h2_client_write(&x->c) != 0) break;
    ssize_t n;
    while ((n = read(x->fds[1], x->out.b + x->out.n, sizeof x->out.b - x->out.n)) > 0)
        x->out.n += (size_t)n;
}

/* Feed server bytes, return hb_h2_client_read's result. */
static int push(sess *x, const buf *in)
{
    CHECK(write(x->fds[1], in->b, in->n) == (ssize_t)in->n);
    return hb_h2_client_read(&x->c);
}

/* Did the client send a frame of this type (and error code, for RST/GOAWAY)? */
static int sent(const sess *x, uint8_t type, int code)
{
    size_t off = 24; /* preface */
    while (off + 9 <= x->out.n) {
        const uint8_t *p = x->out.b + off;
        size_t len = (size_t)p[0] << 16 | (size_t)p[1] << 8 | p[2];
        if (p[3] == type) {
            if (code < 0) return 1;
            const uint8_t *c = p + 9 + (type == 7 ? 4 : 0);
            int got = c[0] << 24 | c[1] << 16 | c[2] << 8 | c[3];
            if (got == code) return 1;
        }
        off += 9 + len;
    }
    return 0;
}

static void stop(sess *x)
{
    hb_h2_client_free(&x->c);
    close(x->fds[0]);
    close(x->fds[1]);
}

static int submit(sess *x, const hb_header *f, rec *r, hb_h2_body *body)
{
    char err[HB_ERR_LEN];
    return hb_h2_client_submit(&x->c, f, 4, body, r, err);
}

/* ---- cases ---- */

static void test_ok_split_everywhere(void)
{
    /* A response fed one byte at a time: every frame boundary case. */
    buf in = {0};
    settings(&in);
    const char *kv[] = {"content-length", "5", "server", "t"};
    headers(&in, 1, 0, kv, 4);
    frame(&in, 0, 0x1, 1, "hello", 5);
    sess x;
    start(&x);
    rec r = {0};
    CHECK_EQ_INT(submit(&x, GET, &r, NULL), 1);
    pull(&x);
    for (size_t i = 0; i < in.n; i++) {
        CHECK(write(x.fds[1], in.b + i, 1) == 1);
        CHECK_EQ_INT(hb_h2_client_read(&x.c), HB_AGAIN);
    }
    CHECK_EQ_INT(r.status, 200);
    CHECK_MEM(r.data, r.dlen, "hello");
    CHECK_EQ_INT(r.closes, 1);
    CHECK_EQ_INT(r.end, HB_H2_END_OK);
    CHECK_EQ_INT(hb_h2_client_peer_max_streams(&x.c), 100);
    pull(&x);
    CHECK(sent(&x, 4, -1)); /* SETTINGS ACK among what was sent */
    stop(&x);
}

/* One malformed response: the stream is reset (PROTOCOL_ERROR), the session lives on. */
static void expect_stream_error(const char *what, void (*build)(buf *), const hb_header *f)
{
    buf in = {0};
    settings(&in);
    build(&in);
    sess x;
    start(&x);
    rec r = {0};
    CHECK_EQ_INT(submit(&x, f, &r, NULL), 1);
    pull(&x);
    int rc = push(&x, &in);
    if (rc != HB_AGAIN || r.end != HB_H2_END_PROTOCOL || r.closes != 1)
        fprintf(stderr, "case %s: rc %d end %d closes %d err '%s'\n", what, rc, r.end, r.closes,
                x.c.err);
    CHECK_EQ_INT(rc, HB_AGAIN);
    CHECK_EQ_INT(r.closes, 1);
    CHECK_EQ_INT(r.end, HB_H2_END_PROTOCOL);
    pull(&x);
    CHECK(sent(&x, 3, 1)); /* RST_STREAM(PROTOCOL_ERROR) */
    /* and the connection still serves a good response */
    buf ok = {0};
    headers(&ok, 3, 0x1, NULL, 0);
    rec r2 = {0};
    CHECK_EQ_INT(submit(&x, GET, &r2, NULL), 3);
    pull(&x);
    CHECK_EQ_INT(push(&x, &ok), HB_AGAIN);
    CHECK_EQ_INT(r2.end, HB_H2_END_OK);
    CHECK_EQ_INT(r2.status, 200);
    stop(&x);
}

static void b_cl_short(buf *o)
{
    const char *kv[] = {"content-length", "9"};
    headers(o, 1, 0, kv, 2);
    frame(o, 0, 0x1, 1, "hello", 5);
}
static void b_cl_long(buf *o)
{
    const char *kv[] = {"content-length", "2"};
    headers(o, 1, 0, kv, 2);
    frame(o, 0, 0x1, 1, "hello", 5);
}
static void b_conn_field(buf *o)
{
    const char *kv[] = {"connection", "close"};
    headers(o, 1, 0x1, kv, 2);
}
static void b_upper(buf *o)
{
    const char *kv[] = {"Server", "x"};
    headers(o, 1, 0x1, kv, 2);
}
static void b_bad_value(buf *o)
{
    const char *kv[] = {"x-a", "a\rb"};
    headers(o, 1, 0x1, kv, 2);
}
static void b_no_status(buf *o)
{
    uint8_t blk[64];
    size_t n = lit(blk, "server", "x");
    frame(o, 1, 0x5, 1, blk, n);
}
static void b_pseudo_late(buf *o)
{
    uint8_t blk[64];
    size_t n = lit(blk, "server", "x");
    blk[n++] = 0x88;
    frame(o, 1, 0x5, 1, blk, n);
}
static void b_path_in_resp(buf *o)
{
    const char *kv[] = {":path", "/"};
    headers(o, 1, 0x1, kv, 2);
}
static void b_data_first(buf *o)
{
    frame(o, 0, 0x1, 1, "x", 1);
}
static void b_trailers_no_end(buf *o)
{
    headers(o, 1, 0, NULL, 0);
    const char *kv[] = {"x-t", "1"};
    uint8_t blk[64];
    size_t n = lit(blk, kv[0], kv[1]);
    frame(o, 1, 0x4, 1, blk, n); /* trailers without END_STREAM */
    frame(o, 0, 0x1, 1, "", 0);
}
static void b_head_body(buf *o)
{
    headers(o, 1, 0, NULL, 0);
    frame(o, 0, 0x1, 1, "x", 1);
}
static void b_empty_name(buf *o)
{
    static const uint8_t blk[] = {0x88, 0x00, 0x00, 0x01, 'x'}; /* "" : "x" */
    frame(o, 1, 0x5, 1, blk, sizeof blk);
}
static void b_status_101(buf *o)
{
    uint8_t blk[16] = {0x08, 0x03, '1', '0', '1'}; /* :status (index 8 name) literal 101 */
    frame(o, 1, 0x5, 1, blk, 5);
}

/* A connection error: HB_E_H2 from read, GOAWAY(code) sent. */
static void expect_conn_error(const char *what, const buf *tail, int code)
{
    buf in = {0};
    settings(&in);
    memcpy(in.b + in.n, tail->b, tail->n);
    in.n += tail->n;
    sess x;
    start(&x);
    rec r = {0};
    CHECK_EQ_INT(submit(&x, GET, &r, NULL), 1);
    pull(&x);
    int rc = push(&x, &in);
    if (rc != HB_E_H2) fprintf(stderr, "case %s: rc %d err '%s'\n", what, rc, x.c.err);
    CHECK_EQ_INT(rc, HB_E_H2);
    CHECK(strstr(x.c.err, "GOAWAY") != NULL);
    pull(&x);
    CHECK(sent(&x, 7, code));
    CHECK_EQ_INT(hb_h2_client_room(&x.c), 0);
    stop(&x);
}

static void test_conn_errors(void)
{
    buf t;
    uint8_t z[16] = {0};
    t.n = 0;
    frame(&t, 5, 0x4, 1, z, 8); /* PUSH_PROMISE */
    expect_conn_error("push", &t, 1);
    t.n = 0;
    frame(&t, 0, 0, 0, "x", 1); /* DATA on stream 0 */
    expect_conn_error("data0", &t, 1);
    t.n = 0;
    frame(&t, 1, 0x5, 5, "\x88", 1); /* HEADERS on idle stream 5 */
    expect_conn_error("idle", &t, 1);
    t.n = 0;
    frame(&t, 6, 0, 0, z, 7); /* PING of 7 bytes */
    expect_conn_error("ping7", &t, 6);
    t.n = 0;
    static const uint8_t over[9] = {0, 0x40, 0x01, 0, 0, 0, 0, 0, 1}; /* DATA of 16385 bytes */
    memcpy(t.b, over, 9); /* only the header is needed: the size is checked first */
    t.n = 9;
    expect_conn_error("frame size", &t, 6);
    t.n = 0;
    frame(&t, 1, 0, 1, "\x88", 1); /* HEADERS without END_HEADERS, then not CONTINUATION */
    frame(&t, 6, 0, 0, z, 8);
    expect_conn_error("interleaved", &t, 1);
    t.n = 0;
    frame(&t, 9, 0x4, 1, "\x88", 1); /* CONTINUATION with no HEADERS */
    expect_conn_error("continuation", &t, 1);
    t.n = 0;
    frame(&t, 1, 0x5, 1, "\xff\xff\xff\xff\x0f", 5); /* HPACK index overflow */
    expect_conn_error("hpack", &t, 9);
    t.n = 0;
    uint8_t wu[4] = {0x7f, 0xff, 0xff, 0xff};
    frame(&t, 8, 0, 0, wu, 4); /* connection send window over 2^31-1 */
    expect_conn_error("window", &t, 3);
    t.n = 0;
    frame(&t, 8, 0, 0, z, 4); /* WINDOW_UPDATE of 0 */
    expect_conn_error("wu0", &t, 1);
    t.n = 0;
    uint8_t push1[6] = {0, 2, 0, 0, 0, 1};
    frame(&t, 4, 0, 0, push1, 6); /* SETTINGS_ENABLE_PUSH 1 from a server */
    expect_conn_error("enable push", &t, 1);
    t.n = 0;
    uint8_t mfs[6] = {0, 5, 0, 0, 0x10, 0};
    frame(&t, 4, 0, 0, mfs, 6); /* MAX_FRAME_SIZE 4096 */
    expect_conn_error("max frame", &t, 1);
    t.n = 0;
    frame(&t, 3, 0, 1, z, 3); /* RST_STREAM of 3 bytes */
    expect_conn_error("rst3", &t, 6);
}

static void test_not_settings_first(void)
{
    sess x;
    start(&x);
    rec r = {0};
    CHECK_EQ_INT(submit(&x, GET, &r, NULL), 1);
    pull(&x);
    buf in = {0};
    headers(&in, 1, 0x1, NULL, 0);
    CHECK_EQ_INT(push(&x, &in), HB_E_H2);
    CHECK(strstr(x.c.err, "SETTINGS") != NULL);
    stop(&x);
}

static void test_ping_goaway_rst(void)
{
    sess x;
    start(&x);
    rec a = {0}, b = {0}, c = {0};
    buf in = {0};
    settings(&in);
    frame(&in, 6, 0, 0, "abcdefgh", 8);
    CHECK_EQ_INT(push(&x, &in), HB_AGAIN);
    CHECK_EQ_INT(submit(&x, GET, &a, NULL), 1);
    CHECK_EQ_INT(submit(&x, GET, &b, NULL), 3);
    CHECK_EQ_INT(submit(&x, GET, &c, NULL), 5);
    pull(&x);
    CHECK(sent(&x, 6, -1)); /* PING ACK */
    in.n = 0;
    uint8_t rst[4] = {0, 0, 0, 8};
    frame(&in, 3, 0, 1, rst, 4);
    uint8_t ga[8] = {0, 0, 0, 3, 0, 0, 0, 0};
    frame(&in, 7, 0, 0, ga, 8);
    CHECK_EQ_INT(push(&x, &in), HB_AGAIN);
    CHECK_EQ_INT(a.end, HB_H2_END_RESET);
    CHECK_EQ_INT(a.code, 8);
    CHECK_EQ_INT(c.end, HB_H2_END_GOAWAY);
    CHECK_EQ_INT(c.closes, 1);
    CHECK_EQ_INT(b.closes, 0);
    CHECK_EQ_INT(x.c.goaway_recv, 1);
    CHECK_EQ_INT(submit(&x, GET, &a, NULL), HB_E_CLOSED);
    in.n = 0;
    headers(&in, 3, 0x1, NULL, 0);
    CHECK_EQ_INT(push(&x, &in), HB_E_CLOSED); /* last stream done after GOAWAY */
    CHECK_EQ_INT(b.end, HB_H2_END_OK);
    CHECK(hb_h2_client_done(&x.c));
    stop(&x);
}

static void test_body_flow_control(void)
{
    /* A 100,000-byte body against the default 65,535-byte windows: the rest
     * waits for WINDOW_UPDATE. */
    static char data[100000];
    for (size_t i = 0; i < sizeof data; i++)
        data[i] = (char)('a' + i % 26);
    sess x;
    start(&x);
    buf in = {0};
    frame(&in, 4, 0, 0, NULL, 0);
    CHECK_EQ_INT(hb_h2_client_peer_max_streams(&x.c), 1); /* until the SETTINGS */
    CHECK_EQ_INT(push(&x, &in), HB_AGAIN);
    /* SETTINGS without MAX_CONCURRENT_STREAMS: no limit but ours (256 by default) */
    CHECK_EQ_INT(hb_h2_client_peer_max_streams(&x.c), UINT32_MAX);
    CHECK_EQ_INT(hb_h2_client_room(&x.c), 256);
    rec r = {0};
    hb_h2_body body = {data, sizeof data, 0};
    static const hb_header POST[] = {{":method", 7, "POST", 4},
                                     {":scheme", 7, "http", 4},
                                     {":authority", 10, "h", 1},
                                     {":path", 5, "/", 1}};
    CHECK_EQ_INT(submit(&x, POST, &r, &body), 1);
    pull(&x);
    CHECK_EQ_INT(body.sent, 65535);
    CHECK(!hb_h2_client_wants_write(&x.c));
    in.n = 0;
    uint8_t inc[4] = {0, 1, 0, 0}; /* 65536 */
    frame(&in, 8, 0, 0, inc, 4);
    frame(&in, 8, 0, 1, inc, 4);
    CHECK_EQ_INT(push(&x, &in), HB_AGAIN);
    pull(&x);
    CHECK_EQ_INT(body.sent, sizeof data);
    /* the server's answer ends the stream */
    in.n = 0;
    headers(&in, 1, 0x1, NULL, 0);
    CHECK_EQ_INT(push(&x, &in), HB_AGAIN);
    CHECK_EQ_INT(r.end, HB_H2_END_OK);
    stop(&x);
}

static void test_head_and_1xx(void)
{
    sess x;
    start(&x);
    buf in = {0};
    settings(&in);
    CHECK_EQ_INT(push(&x, &in), HB_AGAIN);
    rec h = {0}, g = {0};
    CHECK_EQ_INT(submit(&x, HEAD, &h, NULL), 1);
    CHECK_EQ_INT(submit(&x, GET, &g, NULL), 3);
    in.n = 0;
    const char *cl[] = {"content-length", "1000"};
    headers(&in, 1, 0x1, cl, 2); /* HEAD: content-length, no body */
    uint8_t c100[8] = {0x08, 0x03, '1', '0', '3'};
    frame(&in, 1, 0x4, 3, c100, 5); /* 103 Early Hints, then the final response */
    headers(&in, 3, 0, NULL, 0);
    frame(&in, 0, 0x8 | 0x1, 3, "\x02okpp", 5); /* padded DATA */
    CHECK_EQ_INT(push(&x, &in), HB_AGAIN);
    CHECK_EQ_INT(h.end, HB_H2_END_OK);
    CHECK_EQ_INT(h.dlen, 0);
    CHECK_EQ_INT(g.end, HB_H2_END_OK);
    CHECK_EQ_INT(g.responses, 1);
    CHECK_MEM(g.data, g.dlen, "ok");
    stop(&x);
}

static void test_long_lived_stream(void)
{
    /* Stream 1 stays open while 3, 5, 7, ... come and go: later ids land on
     * its index cell and must still be found, and so must it. */
    sess x;
    memset(&x, 0, sizeof x);
    CHECK_EQ_INT(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, x.fds), 0);
    hb_sock_init(&x.s);
    x.s.fd = x.fds[0];
    char err[HB_ERR_LEN];
    hb_h2_client_settings st = {0};
    st.max_streams = 2;
    CHECK_EQ_INT(hb_h2_client_init(&x.c, &x.s, &st, &CBS, NULL, err), 0);
    buf in = {0};
    settings(&in);
    CHECK_EQ_INT(push(&x, &in), HB_AGAIN);
    rec first = {0}, r[12];
    memset(r, 0, sizeof r);
    CHECK_EQ_INT(submit(&x, GET, &first, NULL), 1);
    for (int i = 0; i < 12; i++) {
        CHECK_EQ_INT(submit(&x, GET, &r[i], NULL), 3 + 2 * i);
        CHECK_EQ_INT(hb_h2_client_room(&x.c), 0);
        in.n = 0;
        headers(&in, (uint32_t)(3 + 2 * i), 0x1, NULL, 0);
        CHECK_EQ_INT(push(&x, &in), HB_AGAIN);
        CHECK_EQ_INT(r[i].end, HB_H2_END_OK);
        CHECK_EQ_INT(r[i].closes, 1);
    }
    in.n = 0;
    headers(&in, 1, 0x1, NULL, 0);
    CHECK_EQ_INT(push(&x, &in), HB_AGAIN);
    CHECK_EQ_INT(first.end, HB_H2_END_OK);
    CHECK_EQ_INT(hb_h2_client_open_streams(&x.c), 0);
    stop(&x);
}

int main(void)
{
    test_long_lived_stream();
    test_ok_split_everywhere();
    expect_stream_error("cl short", b_cl_short, GET);
    expect_stream_error("cl long", b_cl_long, GET);
    expect_stream_error("connection", b_conn_field, GET);
    expect_stream_error("uppercase", b_upper, GET);
    expect_stream_error("bad value", b_bad_value, GET);
    expect_stream_error("no status", b_no_status, GET);
    expect_stream_error("pseudo late", b_pseudo_late, GET);
    expect_stream_error(":path", b_path_in_resp, GET);
    expect_stream_error("data first", b_data_first, GET);
    expect_stream_error("trailers", b_trailers_no_end, GET);
    expect_stream_error("head body", b_head_body, HEAD);
    expect_stream_error("101", b_status_101, GET);
    expect_stream_error("empty name", b_empty_name, GET);
    test_conn_errors();
    test_not_settings_first();
    test_ping_goaway_rst();
    test_body_flow_control();
    test_head_and_1xx();
    HB_TEST_MAIN_END();
}
