/* test_server.c - hb_server from C: keep-alive + pipelining over one
 * connection, stats sums, a TLS request through hb_sock, stop/restart, the
 * http2 option in builds with and without nghttp2. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/hb_clock.h"
#include "h2/hb_h2_server.h"
#include "server/hb_server.h"
#include "net/hb_sock.h"
#include "hb_test.h"
#include "net/hb_tls.h"

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

/* Read until `want` bytes or EOF/timeout. */
static size_t read_n(int fd, char *buf, size_t want)
{
    size_t got = 0;
    while (got < want) {
        ssize_t r = recv(fd, buf + got, want - got, 0);
        if (r <= 0) break;
        got += (size_t)r;
    }
    return got;
}

static void test_plain_pipelined(void)
{
    hb_server_opts o;
    hb_server_opts_init(&o);
    hb_server *s = NULL;
    char err[HB_ERR_LEN] = "";
    CHECK_EQ_INT(hb_server_start(&s, &o, err), 0);
    if (!s) return;
    int port = hb_server_port(s);
    CHECK(port > 0);
    int fd = connect_to(port);
    CHECK(fd >= 0);
    const char req[] = "GET /bytes/5 HTTP/1.1\r\nHost: x\r\n\r\n"
                       "GET /nope HTTP/1.1\r\nHost: x\r\n\r\n"
                       "POST /sink HTTP/1.1\r\nHost: x\r\nContent-Length: 9\r\n\r\n123456789"
                       "GET /bytes/3 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    CHECK_EQ_INT(send(fd, req, sizeof req - 1, 0), (ssize_t)(sizeof req - 1));
    static char buf[8192];
    size_t n = read_n(fd, buf, sizeof buf - 1);
    buf[n] = 0;
    close(fd);
    const char *p1 = strstr(buf, "HTTP/1.1 200 OK");
    const char *p2 = p1 ? strstr(p1 + 1, "HTTP/1.1 404 Not Found") : NULL;
    const char *p3 = p2 ? strstr(p2 + 1, "{\"bytes\": 9, \"crc32\": \"cbf43926\"}") : NULL;
    const char *p4 = p3 ? strstr(p3 + 1, "Connection: close\r\n\r\n012") : NULL;
    CHECK(p1 && p2 && p3 && p4);
    CHECK(p4 && strcmp(p4 + strlen("Connection: close\r\n\r\n"), "012") == 0);
    CHECK(strstr(buf, "\r\n\r\n01234HTTP/1.1 404") != NULL);

    hb_server_stats st;
    hb_server_stats_read(s, &st);
    CHECK_EQ_INT(st.requests, 4);
    CHECK_EQ_INT(st.by_route[HB_ROUTE_BYTES], 2);
    CHECK_EQ_INT(st.by_route[HB_ROUTE_NOT_FOUND], 1);
    CHECK_EQ_INT(st.by_route[HB_ROUTE_SINK], 1);
    CHECK_EQ_INT(st.by_status[200], 3);
    CHECK_EQ_INT(st.by_status[404], 1);
    CHECK_EQ_INT(st.bytes_in, sizeof req - 1);
    CHECK_EQ_INT(st.bytes_out, n);
    CHECK_EQ_INT(st.connections_accepted, 1);
    CHECK_EQ_INT(st.body_bytes_in, 9);
    CHECK(st.cpu_ns > 0 && st.thread_cpu_ns[0] == st.cpu_ns);

    uint64_t t0 = hb_now_ns();
    hb_server_stop(s);
    CHECK(hb_now_ns() - t0 < 1000000000ull); /* loose: the stop itself is ~ms */
    hb_server_stop(s);
    CHECK_EQ_INT(hb_server_running(s), 0);
    hb_server_stats_read(s, &st); /* still readable */
    CHECK_EQ_INT(st.requests, 4);
    CHECK_EQ_INT(connect_to(port), -1);
    hb_server_free(s);
}

static void test_tls_request(void)
{
    hb_server_opts o;
    hb_server_opts_init(&o);
    o.tls = 1;
    o.threads = 2;
    hb_server *s = NULL;
    char err[HB_ERR_LEN] = "";
    CHECK_EQ_INT(hb_server_start(&s, &o, err), 0);
    if (!s) return;
    size_t pem_len;
    const char *pem = hb_server_cert_pem(s, &pem_len);
    CHECK(pem != NULL && pem_len > 0);
    hb_tls_client_opts co;
    hb_tls_client_opts_init(&co);
    co.ca_pem = pem;
    hb_tls_ctx *cctx = NULL;
    CHECK_EQ_INT(hb_tls_client_ctx_new(&cctx, &co, err), 0);
    struct sockaddr_storage ss;
    socklen_t sl;
    CHECK_EQ_INT(hb_resolve_host("localhost", hb_server_port(s), &ss, &sl, err), 0);
    hb_sock c;
    int rc = hb_sock_connect(&c, (struct sockaddr *)&ss, sl, 0, err);
    CHECK(rc == 0 || rc == HB_AGAIN);
    CHECK_EQ_INT(hb_sock_tls_client(&c, cctx, "localhost", err), 0);
    rc = HB_AGAIN;
    for (int i = 0; i < 500 && rc == HB_AGAIN; i++) {
        struct pollfd p = {c.fd, (short)(c.want == HB_WANT_WRITE ? POLLOUT : POLLIN), 0};
        poll(&p, 1, 10);
        rc = hb_sock_handshake(&c, err);
    }
    CHECK_EQ_INT(rc, 0);
    const char req[] = "GET /chunked/20?chunk=7 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    CHECK_EQ_INT(hb_sock_write(&c, req, sizeof req - 1), (ssize_t)(sizeof req - 1));
    static char buf[4096];
    size_t n = 0;
    for (int i = 0; i < 500; i++) {
        ssize_t r = hb_sock_read(&c, buf + n, sizeof buf - 1 - n);
        if (r == 0) break;
        if (r == HB_AGAIN) {
            struct pollfd p = {c.fd, POLLIN, 0};
            poll(&p, 1, 10);
            continue;
        }
        if (r < 0) break;
        n += (size_t)r;
    }
    buf[n] = 0;
    CHECK(strstr(buf, "Transfer-Encoding: chunked\r\n") != NULL);
    CHECK(strstr(buf, "\r\n\r\n7\r\n0123456\r\n7\r\n789ABCD\r\n6\r\nEFGHIJ\r\n0\r\n\r\n") != NULL);
    hb_sock_close(&c);
    hb_tls_ctx_free(cctx);
    hb_server_stats st;
    hb_server_stats_read(s, &st);
    CHECK_EQ_INT(st.tls_handshakes, 1);
    CHECK_EQ_INT(st.requests, 1);
    CHECK_EQ_INT(st.threads, 2);
    hb_server_free(s);
}

static void test_bad_options(void)
{
    hb_server_opts o;
    hb_server_opts_init(&o);
    hb_server *s = NULL;
    char err[HB_ERR_LEN];
    o.threads = 0;
    CHECK_EQ_INT(hb_server_start(&s, &o, err), HB_E_INVALID);
    hb_server_opts_init(&o);
    o.host = "not-an-address.invalid";
    CHECK(hb_server_start(&s, &o, err) < 0);
    CHECK(s == NULL);
    hb_server_free(NULL);
}

/* http2 defaults to what the build has; asking for it in a build without nghttp2
 * fails before binding, with the message that says how to get it. */
static void test_http2_option(void)
{
    hb_server_opts o;
    hb_server_opts_init(&o);
    CHECK_EQ_INT(o.http2, hb_h2_server_available());
    o.http2 = 1;
    hb_server *s = NULL;
    char err[HB_ERR_LEN] = "";
    int rc = hb_server_start(&s, &o, err);
    if (hb_h2_server_available()) {
        CHECK_EQ_INT(rc, 0);
        CHECK(s != NULL);
        hb_server_free(s);
    } else {
        CHECK_EQ_INT(rc, HB_E_UNSUPPORTED);
        CHECK(s == NULL);
        CHECK(strcmp(err, HB_H2_SERVER_MISSING) == 0);
    }
}

int main(void)
{
    test_plain_pipelined();
    test_tls_request();
    test_bad_options();
    test_http2_option();
    HB_TEST_MAIN_END();
}
