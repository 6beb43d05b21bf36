/* test_client_h2.c - hb_client_h2 batches against the embedded server over h2c:
 * bodies byte-exact into growing memory sinks, exact h2 counts, one connection
 * reused by the next batch, a batch larger than the server's stream limit,
 * max_body per stream, a session ended while idle replaced once, HB_E_NO_H2
 * from an HTTP/1.1-only peer, a deadline
 * against a silent peer. */
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/hb_clock.h"
#include "base/hb_content.h"
#include "client/hb_client_h2.h"
#include "client/hb_pool.h"
#include "http/hb_request.h"
#include "server/hb_server.h"
#include "hb_test.h"

#define NX 150 /* above the server's default stream limit (100) */

static int grow(hb_sink *s, size_t need, char *err)
{
    (void)err;
    char *p = realloc(s->buf, need);
    if (!p) return HB_E_NOMEM;
    s->buf = p;
    s->cap = need;
    return 0;
}

typedef struct {
    hb_url u;
    hb_header fields[16];
    char fbuf[512];
    char head[1024];
    hb_sink sink;
    char url[128];
} req_t;

static void prep(req_t *r, hb_mx *x, int port, size_t n)
{
    char err[HB_ERR_LEN];
    memset(r, 0, sizeof *r);
    memset(x, 0, sizeof *x);
    snprintf(r->url, sizeof r->url, "http://127.0.0.1:%d/bytes/%zu", port, n);
    CHECK_EQ_INT(hb_url_split(r->url, strlen(r->url), &r->u, err), 0);
    hb_head_spec s = {"GET", 3, &r->u, NULL, 0, HB_REQ_NO_BODY, 1, NULL};
    int nf = hb_build_h2_fields(r->fields, 16, r->fbuf, sizeof r->fbuf, &s, err);
    CHECK(nf > 0);
    r->sink.fd = -1;
    r->sink.grow = grow;
    x->fields = r->fields;
    x->nfields = nf > 0 ? (size_t)nf : 0;
    x->sink = &r->sink;
    x->head = r->head;
    x->head_cap = sizeof r->head;
}

static int body_ok(const hb_sink *s, size_t n)
{
    if (s->len != n) return 0;
    if (n == 0) return 1;
    char *want = malloc(n ? n : 1);
    if (!want) return 0;
    hb_content_fill(want, n, 0);
    int ok = memcmp(want, s->buf, n) == 0;
    free(want);
    return ok;
}

/* The head buffer holds the response's fields as records that end exactly at
 * head_len, lowercase, with the announced content-length equal to n. */
static int fields_ok(const hb_mx *x, size_t n)
{
    char want[32];
    int wl = snprintf(want, sizeof want, "%zu", n);
    size_t off = 0, count = 0;
    int clen = 0;
    hb_header f;
    while (hb_mx_field_next(x->head, x->head_len, &off, &f)) {
        count++;
        for (size_t i = 0; i < f.name_len; i++)
            if (f.name[i] >= 'A' && f.name[i] <= 'Z') return 0;
        if (f.name_len == 14 && memcmp(f.name, "content-length", 14) == 0)
            clen += f.value_len == (size_t)wl && memcmp(f.value, want, (size_t)wl) == 0;
    }
    return off == x->head_len && count >= 2 && clen == 1;
}

static void test_batches(void)
{
    hb_server_opts o;
    hb_server_opts_init(&o);
    hb_server *srv = NULL;
    char err[HB_ERR_LEN] = "";
    CHECK_EQ_INT(hb_server_start(&srv, &o, err), 0);
    if (!srv) return;
    int port = hb_server_port(srv);
    hb_pool pool;
    CHECK_EQ_INT(hb_pool_init(&pool, NULL), 0);
    hb_h2conn hc;
    hb_h2conn_init(&hc);
    static req_t rs[NX];
    static hb_mx xs[NX];
    for (size_t i = 0; i < NX; i++)
        prep(&rs[i], &xs[i], port, i * 997 % 70001);
    hb_target t = {0, rs[0].u.host, rs[0].u.host_len, port};
    hb_server_stats s0, s1, s2;
    hb_server_stats_read(srv, &s0);
    uint64_t dl = hb_now_ns() + 20000000000ull;
    CHECK_EQ_INT(hb_client_h2_run(&pool, &hc, &t, xs, NX, dl, dl, err), 0);
    int good = 0;
    for (size_t i = 0; i < NX; i++)
        good += xs[i].rc == 0 && xs[i].status == 200 && !xs[i].reused &&
                body_ok(&rs[i].sink, i * 997 % 70001) && fields_ok(&xs[i], i * 997 % 70001);
    CHECK_EQ_INT(good, NX);
    hb_server_stats_read(srv, &s1);
    CHECK_EQ_INT(s1.requests_h2 - s0.requests_h2, NX);
    CHECK_EQ_INT(s1.requests - s0.requests, NX);
    CHECK_EQ_INT(pool.stats.connects, 1);

    /* the next batch: the same session; one stream over max_body fails alone */
    xs[1].max_body = 10;
    CHECK_EQ_INT(hb_client_h2_run(&pool, &hc, &t, xs, 3, dl, dl, err), 0);
    CHECK_EQ_INT(xs[0].rc, 0);
    CHECK(xs[0].reused);
    CHECK_EQ_INT(xs[1].rc, HB_E_TOO_LARGE);
    CHECK_EQ_INT(xs[2].rc, 0);
    CHECK(body_ok(&rs[2].sink, 2 * 997));
    CHECK(fields_ok(&xs[2], 2 * 997));
    hb_server_stats_read(srv, &s2);
    CHECK_EQ_INT(s2.requests_h2 - s1.requests_h2, 3);
    CHECK_EQ_INT(pool.stats.connects, 1);

    /* a head buffer too small for the header block fails that stream alone */
    xs[1].max_body = 0;
    xs[1].head_cap = HB_MX_FIELD_HDR + 5;
    CHECK_EQ_INT(hb_client_h2_run(&pool, &hc, &t, xs, 3, dl, dl, err), 0);
    CHECK_EQ_INT(xs[0].rc, 0);
    CHECK_EQ_INT(xs[1].rc, HB_E_TOO_LARGE);
    CHECK(strstr(xs[1].err, "head buffer") != NULL);
    CHECK_EQ_INT(xs[2].rc, 0);
    CHECK(fields_ok(&xs[0], 0));
    xs[1].head_cap = sizeof rs[1].head;
    hb_server_stats_read(srv, &s2);

    /* a session whose connection ended while idle: the batch goes on a new one */
    xs[1].max_body = 0;
    CHECK(hc.live && hc.conn != NULL);
    if (hc.conn) shutdown(hc.conn->sock.fd, SHUT_RD);
    CHECK_EQ_INT(hb_client_h2_run(&pool, &hc, &t, xs, 2, dl, dl, err), 0);
    CHECK_EQ_INT(xs[0].rc, 0);
    CHECK_EQ_INT(xs[1].rc, 0);
    CHECK(body_ok(&rs[1].sink, 997));
    CHECK_EQ_INT(pool.stats.connects, 2);
    hb_server_stats_read(srv, &s1);
    CHECK_EQ_INT(s1.requests_h2 - s2.requests_h2, 2);

    hb_h2conn_close(&pool, &hc);
    for (size_t i = 0; i < NX; i++)
        free(rs[i].sink.buf);
    hb_pool_destroy(&pool);
    hb_server_stop(srv);
    hb_server_free(srv);
}

/* A peer that answers anything with HTTP/1.1 400 (mode 0) or never answers (1). */
typedef struct {
    int lfd, port, mode;
    pthread_t th;
} peer_t;

static void *peer_run(void *arg)
{
    peer_t *p = arg;
    int fd = accept(p->lfd, NULL, NULL);
    if (fd < 0) return NULL;
    char b[256];
    if (recv(fd, b, sizeof b, 0) > 0 && p->mode == 0) {
        static const char r[] = "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n";
        (void)!send(fd, r, sizeof r - 1, MSG_NOSIGNAL);
    }
    if (p->mode == 1) usleep(500000);
    close(fd);
    return NULL;
}

static int peer_start(peer_t *p, int mode)
{
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t al = sizeof a;
    p->mode = mode;
    p->lfd = socket(AF_INET, SOCK_STREAM, 0);
    if (p->lfd < 0 || bind(p->lfd, (struct sockaddr *)&a, sizeof a) < 0 || listen(p->lfd, 4) < 0 ||
        getsockname(p->lfd, (struct sockaddr *)&a, &al) < 0)
        return -1;
    p->port = ntohs(a.sin_port);
    return pthread_create(&p->th, NULL, peer_run, p);
}

static void test_refusals(void)
{
    for (int mode = 0; mode < 2; mode++) {
        peer_t p;
        CHECK_EQ_INT(peer_start(&p, mode), 0);
        hb_pool pool;
        CHECK_EQ_INT(hb_pool_init(&pool, NULL), 0);
        hb_h2conn hc;
        hb_h2conn_init(&hc);
        req_t r;
        hb_mx x;
        prep(&r, &x, p.port, 10);
        hb_target t = {0, r.u.host, r.u.host_len, p.port};
        char err[HB_ERR_LEN] = "";
        uint64_t dl = hb_now_ns() + (mode == 0 ? 5000000000ull : 200000000ull);
        int rc = hb_client_h2_run(&pool, &hc, &t, &x, 1, dl, dl, err);
        CHECK_EQ_INT(rc, mode == 0 ? HB_E_NO_H2 : HB_E_TIMEOUT);
        CHECK_EQ_INT(x.rc, rc);
        CHECK(err[0] != '\0');
        CHECK(!hc.live && hc.conn == NULL);
        free(r.sink.buf);
        hb_pool_destroy(&pool);
        pthread_join(p.th, NULL);
        close(p.lfd);
    }
}

int main(void)
{
    test_batches();
    test_refusals();
    HB_TEST_MAIN_END();
}
