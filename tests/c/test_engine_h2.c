/* The load generator over HTTP/2 against the embedded server in the same
 * process (plain h2c and TLS h2), under the sanitizers: exact counts against
 * the server's stats, typed stream errors, and a server without h2. */
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "engine/hb_engine.h"
#include "http/hb_request.h"
#include "server/hb_server.h"
#include "hb_test.h"
#include "hb_test_engine.h"
#include "net/hb_tls.h"

typedef struct fields {
    hb_header f[16];
    char buf[512];
    int n;
} fields;

static void cfg_h2(hb_engine_config *c, int port, int tls, const char *path, fields *fs)
{
    char err[HB_ERR_LEN], url[256];
    engine_config_loopback(c, port);
    snprintf(url, sizeof url, "%s://127.0.0.1:%d%s", tls ? "https" : "http", port, path);
    static hb_url u; /* the fields point into the URL text: keep both alive */
    static char keep[256];
    memcpy(keep, url, sizeof keep);
    CHECK_EQ_INT(hb_url_split(keep, strlen(keep), &u, err), 0);
    hb_head_spec s = {"GET", 3, &u, NULL, 0, HB_REQ_NO_BODY, 1, NULL};
    fs->n = hb_build_h2_fields(fs->f, 16, fs->buf, sizeof fs->buf, &s, err);
    CHECK(fs->n == 4);
    c->h2 = 1;
    c->fields = fs->f;
    c->nfields = (size_t)fs->n;
    c->host = "127.0.0.1";
}

static hb_server *serve(int tls, int http2)
{
    hb_server_opts o;
    hb_server_opts_init(&o);
    o.tls = tls;
    o.http2 = http2;
    hb_server *s = NULL;
    char err[HB_ERR_LEN];
    CHECK_EQ_INT(hb_server_start(&s, &o, err), 0);
    return s;
}

static void test_exact(int tls)
{
    hb_server *s = serve(tls, 1);
    hb_tls_ctx *ctx = NULL;
    char err[HB_ERR_LEN];
    if (tls) {
        hb_tls_client_opts o;
        hb_tls_client_opts_init(&o);
        o.insecure = 1;
        o.alpn = "h2,http/1.1";
        CHECK_EQ_INT(hb_tls_client_ctx_new(&ctx, &o, err), 0);
    }
    fields fs;
    hb_engine_config c;
    hb_engine_result r;
    cfg_h2(&c, hb_server_port(s), tls, "/bytes/150", &fs);
    c.tls = ctx;
    c.n = 1003;
    c.threads = 2;
    c.connections = 5;
    c.pipeline = 7;
    CHECK_EQ_INT(run_engine(&c, &r), 0);
    CHECK_EQ_INT(r.responses, 1003);
    CHECK_EQ_INT(r.ok, 1003);
    CHECK_EQ_INT(r.errors_total, 0);
    CHECK_EQ_INT(r.body_bytes, 1003 * 150);
    CHECK_EQ_INT(r.fatal_rc, 0);
    hb_server_stats st;
    hb_server_stats_read(s, &st);
    CHECK_EQ_INT(st.requests_h2, 1003);
    CHECK_EQ_INT(st.connections_h2, 5);
    hb_engine_result_free(&r);

    /* Constant rate: every slot sent once, per stream slot. */
    c.n = 120;
    c.rate = 2000;
    c.threads = 1;
    c.connections = 2;
    c.pipeline = 3;
    CHECK_EQ_INT(run_engine(&c, &r), 0);
    CHECK_EQ_INT(r.responses, 120);
    CHECK_EQ_INT(r.sends, 120);
    CHECK_EQ_INT(r.unsent, 0);
    hb_server_stats_read(s, &st);
    CHECK_EQ_INT(st.requests_h2, 1123);
    hb_engine_result_free(&r);

    /* A reset route: every stream an rst_stream error. */
    cfg_h2(&c, hb_server_port(s), tls, "/fault/reset", &fs);
    c.tls = ctx;
    c.n = 6;
    c.pipeline = 2;
    CHECK_EQ_INT(run_engine(&c, &r), 0);
    CHECK_EQ_INT(r.responses, 0);
    CHECK_EQ_INT(r.errors[HB_ENG_ERR_RST_STREAM], 6);
    CHECK_EQ_INT(r.errors_total, 6);
    hb_engine_result_free(&r);
    hb_server_free(s);
    hb_tls_ctx_free(ctx);
}

static void test_no_h2(void)
{
    hb_server *s = serve(0, 0);
    fields fs;
    hb_engine_config c;
    hb_engine_result r;
    cfg_h2(&c, hb_server_port(s), 0, "/bytes/10", &fs);
    c.n = 50;
    c.connections = 3;
    CHECK_EQ_INT(run_engine(&c, &r), 0);
    CHECK_EQ_INT(r.fatal_rc, HB_E_NO_H2);
    CHECK(strstr(r.fatal, "HTTP/1.1 400") != NULL);
    CHECK_EQ_INT(r.responses, 0);
    hb_engine_result_free(&r);
    hb_server_free(s);

    /* Invalid: HTTP/2 without fields, or with a body file. */
    hb_engine *e = NULL;
    char err[HB_ERR_LEN];
    hb_engine_config_init(&c);
    c.addrlen = sizeof(struct sockaddr_in);
    c.h2 = 1;
    CHECK_EQ_INT(hb_engine_new(&e, &c, err), HB_E_INVALID);
    cfg_h2(&c, 9, 0, "/", &fs);
    c.body_fd = 0;
    CHECK_EQ_INT(hb_engine_new(&e, &c, err), HB_E_INVALID);
    CHECK(strstr(err, "from memory") != NULL);
}

int main(void)
{
    test_exact(0);
    test_exact(1);
    test_no_h2();
    HB_TEST_MAIN_END();
}
