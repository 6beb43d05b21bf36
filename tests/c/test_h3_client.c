/* test_h3_client.c - hb_h3_client and the engine's HTTP/3 protocol without a
 * server: the Initial datagram on the wire, a closed UDP port (ECONNREFUSED),
 * a silent one (the handshake timeout), trust errors, no room before the
 * handshake, the engine's configuration checks and its exact accounting of
 * failed connects. A build without the libraries (HB_NO_H3) refuses clearly. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/hb_clock.h"
#include "engine/hb_engine.h"
#include "h3/hb_h3_client.h"
#include "hb_test.h"
#include "hb_test_engine.h"

/* A UDP socket on 127.0.0.1 (port in *port). */
static int udp_socket(int *port)
{
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t l = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &l) != 0)
        return -1;
    *port = ntohs(a.sin_port);
    return fd;
}

static struct sockaddr_in loopback(int port)
{
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return a;
}

#ifndef HB_NO_H3

static const hb_h3_callbacks NO_CBS;

/* Drive c (reads and timers) until it reports an error or limit_ns passes. */
static int drive(hb_h3_client *c, uint64_t limit_ns)
{
    uint64_t end = hb_now_ns() + limit_ns;
    while (hb_now_ns() < end) {
        struct pollfd p = {c->fd, POLLIN, 0};
        uint64_t now = hb_now_ns(), exp = hb_h3_client_next_expiry(c);
        int ms = exp == UINT64_MAX ? 50 : exp <= now ? 0 : (int)((exp - now) / 1000000 + 1);
        if (ms > 50) ms = 50;
        (void)poll(&p, 1, ms);
        int rc = hb_h3_client_read(c, hb_now_ns());
        if (rc == 0) rc = hb_h3_client_write(c, hb_now_ns());
        if (rc < 0) return rc;
        if (hb_h3_client_next_expiry(c) <= hb_now_ns()) {
            rc = hb_h3_client_expiry(c, hb_now_ns());
            if (rc < 0) return rc;
        }
    }
    return 0;
}

static void test_initial_then_handshake_timeout(hb_h3_tls *tls)
{
    int port, peer = udp_socket(&port);
    CHECK(peer >= 0);
    hb_h3_client c;
    hb_h3_settings s = {0};
    s.max_streams = 4;
    s.handshake_timeout_ns = 200000000ull;
    char err[HB_ERR_LEN];
    CHECK_EQ_INT(hb_h3_client_init(&c, &s, err), 0);
    struct sockaddr_in a = loopback(port);
    int fd = hb_h3_client_connect(&c, tls, (struct sockaddr *)&a, sizeof a, "localhost", &NO_CBS,
                                  NULL, hb_now_ns());
    CHECK(fd >= 0 && fd == c.fd);
    /* the client's first flight: one padded Initial (long header) of >= 1200 bytes */
    unsigned char buf[2048];
    ssize_t n = recv(peer, buf, sizeof buf, 0);
    CHECK(n >= 1200);
    CHECK((buf[0] & 0xc0) == 0xc0);
    CHECK(buf[1] == 0 && buf[2] == 0 && buf[3] == 0 && buf[4] == 1); /* QUIC v1 */
    CHECK_EQ_INT(c.st.dgrams_sent, 1);
    CHECK_EQ_INT(c.st.bytes_sent, n);
    /* no streams before the handshake */
    CHECK_EQ_INT(hb_h3_client_room(&c), 0);
    hb_header f[4] = {{":method", 7, "GET", 3},
                      {":scheme", 7, "https", 5},
                      {":authority", 10, "x", 1},
                      {":path", 5, "/", 1}};
    CHECK_EQ_INT(hb_h3_client_submit(&c, f, 4, 0, NULL), HB_AGAIN);
    /* nobody answers: the handshake timeout ends it, in bounded time */
    uint64_t t0 = hb_now_ns();
    int rc = drive(&c, 3000000000ull);
    CHECK_EQ_INT(rc, HB_E_H3_TIMEOUT);
    CHECK(hb_now_ns() - t0 < 1500000000ull);
    CHECK(c.over && strstr(c.err, "handshake timeout") != NULL);
    /* the first probe timeout (3 x the 333 ms initial RTT) comes after 200 ms */
    CHECK_EQ_INT(c.st.pto, 0);
    hb_h3_client_free(&c);
    CHECK(c.p == NULL);
    close(peer);
}

static void test_closed_port(hb_h3_tls *tls)
{
    int port, peer = udp_socket(&port);
    close(peer); /* nothing listens there now */
    hb_h3_client c;
    hb_h3_settings s = {0};
    char err[HB_ERR_LEN];
    CHECK_EQ_INT(hb_h3_client_init(&c, &s, err), 0);
    struct sockaddr_in a = loopback(port);
    CHECK(hb_h3_client_connect(&c, tls, (struct sockaddr *)&a, sizeof a, "localhost", &NO_CBS, NULL,
                               hb_now_ns()) >= 0);
    int rc = drive(&c, 2000000000ull);
    CHECK_EQ_INT(rc, -ECONNREFUSED);
    CHECK(strstr(c.err, "no QUIC listener") != NULL);
    hb_h3_client_close(&c);
    CHECK_EQ_INT(c.fd, -1);
    hb_h3_client_free(&c);
}

static void test_trust_errors(void)
{
    hb_h3_tls *t = NULL;
    char err[HB_ERR_LEN] = "";
    hb_h3_tls_opts o = {"/nonexistent/ca.pem", NULL, 0};
    CHECK(hb_is_tls_error(hb_h3_tls_new(&t, &o, err)));
    CHECK(t == NULL && strstr(err, "/nonexistent/ca.pem") != NULL);
    hb_h3_tls_opts bad = {NULL, "not a certificate", 0};
    CHECK(hb_is_tls_error(hb_h3_tls_new(&t, &bad, err)));
    hb_h3_tls_opts ins = {"/nonexistent/ca.pem", NULL, 1}; /* insecure: no trust to load */
    CHECK_EQ_INT(hb_h3_tls_new(&t, &ins, err), 0);
    hb_h3_tls_free(t);
}

static hb_header FIELDS[4] = {{":method", 7, "GET", 3},
                              {":scheme", 7, "https", 5},
                              {":authority", 10, "localhost", 9},
                              {":path", 5, "/", 1}};

static void test_engine_checks_and_refused_accounting(hb_h3_tls *tls)
{
    int port, peer = udp_socket(&port);
    close(peer);
    hb_engine_config cfg;
    engine_config_loopback(&cfg, port);
    cfg.h3 = 1;
    cfg.fields = FIELDS;
    cfg.nfields = 4;
    cfg.host = "localhost";
    hb_engine *e = NULL;
    char err[HB_ERR_LEN];
    cfg.h2 = 1;
    CHECK_EQ_INT(hb_engine_new(&e, &cfg, err), HB_E_INVALID);
    cfg.h2 = 0;
    CHECK_EQ_INT(hb_engine_new(&e, &cfg, err), HB_E_INVALID); /* no trust */
    CHECK(strstr(err, "h3_tls") != NULL);
    cfg.h3_tls = tls;
    cfg.body_fd = 0;
    cfg.body_len = 1;
    CHECK_EQ_INT(hb_engine_new(&e, &cfg, err), HB_E_INVALID);
    cfg.body_fd = -1;
    cfg.body_len = 0;
    /* every one of n requests ends once, as a connect error */
    cfg.n = 5;
    cfg.connections = 2;
    cfg.pipeline = 3;
    hb_engine_result r;
    CHECK_EQ_INT(run_engine(&cfg, &r), 0);
    CHECK_EQ_INT(r.completed, 5);
    CHECK_EQ_INT(r.errors[HB_ENG_ERR_CONNECT], 5);
    CHECK_EQ_INT(r.responses, 0);
    CHECK_EQ_INT(r.connections_opened, 0);
    CHECK(r.connect_failures >= 5 && r.connect_attempts >= r.connect_failures);
    CHECK(strstr(r.first_error, "connect: ") == r.first_error);
    hb_engine_result_free(&r);
}

int main(void)
{
    CHECK(hb_h3_available());
    hb_h3_tls *tls = NULL;
    char err[HB_ERR_LEN];
    hb_h3_tls_opts o = {NULL, NULL, 1};
    CHECK_EQ_INT(hb_h3_tls_new(&tls, &o, err), 0);
    test_initial_then_handshake_timeout(tls);
    test_closed_port(tls);
    test_trust_errors();
    test_engine_checks_and_refused_accounting(tls);
    hb_h3_tls_free(tls);
    HB_TEST_MAIN_END();
}

#else /* HB_NO_H3 */

int main(void)
{
    CHECK(!hb_h3_available());
    hb_h3_tls *t = (hb_h3_tls *)1;
    char err[HB_ERR_LEN] = "";
    hb_h3_tls_opts o = {NULL, NULL, 1};
    CHECK_EQ_INT(hb_h3_tls_new(&t, &o, err), HB_E_UNSUPPORTED);
    CHECK(t == NULL && strstr(err, "no HTTP/3 client") != NULL);
    hb_h3_client c;
    hb_h3_settings s = {0};
    CHECK_EQ_INT(hb_h3_client_init(&c, &s, err), HB_E_UNSUPPORTED);
    hb_h3_client_free(&c);
    int port = 0;
    (void)udp_socket;
    (void)loopback;
    (void)port;
    hb_engine_config cfg;
    engine_config_loopback(&cfg, 1);
    cfg.h3 = 1;
    hb_engine *e = NULL;
    CHECK_EQ_INT(hb_engine_new(&e, &cfg, err), HB_E_UNSUPPORTED);
    HB_TEST_MAIN_END();
}

#endif
