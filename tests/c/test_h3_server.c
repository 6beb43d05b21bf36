/* test_h3_server.c - hb_h3_server in memory (configuration checks, datagrams that
 * are not QUIC or open nothing: counted and dropped, version negotiation byte for
 * byte, no timers while idle) and the embedded server's UDP side (http3 needs TLS;
 * a datagram to the TCP port's number reaches the worker's endpoint), under
 * ASan/UBSan. Whole HTTP/3 exchanges are tested from Python against libcurl and
 * aioquic. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/hb_clock.h"
#include "base/hb_common.h"
#include "h3server/hb_h3_server.h"
#include "server/hb_server.h"
#include "hb_test.h"
#include "net/hb_tls.h"

static char *g_cert, *g_key;
static size_t g_cert_len, g_key_len;

static void make_pems(void)
{
    char err[HB_ERR_LEN];
    hb_tls_ctx *t = NULL;
    CHECK_EQ_INT(hb_tls_server_ctx_new(&t, NULL, err), 0);
    CHECK_EQ_INT(hb_tls_server_pems(t, &g_cert, &g_cert_len, &g_key, &g_key_len, err), 0);
    CHECK(g_cert && strstr(g_cert, "-----BEGIN CERTIFICATE-----") == g_cert);
    CHECK(g_key && strstr(g_key, "PRIVATE KEY-----") != NULL);
    hb_tls_ctx_free(t);
}

static void test_config(void)
{
    char err[HB_ERR_LEN];
    hb_h3_server_stats st;
    uint64_t now = 1;
    hb_h3_server_config cfg;
    hb_h3_server *s = (hb_h3_server *)1;
    hb_h3_server_config_init(&cfg);
    CHECK_EQ_INT(cfg.max_streams, 100);
    CHECK_EQ_INT(cfg.idle_timeout_ms, 30000);
    CHECK_EQ_INT(hb_h3_server_new(&s, &cfg, err), HB_E_INVALID); /* no stats, clock, cert */
    CHECK(s == NULL);
    cfg.stats = &st;
    cfg.now = &now;
    cfg.cert_pem = "not a certificate";
    cfg.cert_len = strlen(cfg.cert_pem);
    cfg.key_pem = "nor a key";
    cfg.key_len = strlen(cfg.key_pem);
    CHECK_EQ_INT(hb_h3_server_new(&s, &cfg, err), HB_E_TLS);
    CHECK(strstr(err, "HTTP/3 server certificate") != NULL);
    cfg.cert_pem = g_cert;
    cfg.cert_len = g_cert_len;
    cfg.key_pem = g_key;
    cfg.key_len = g_key_len;
    cfg.max_streams = 0;
    CHECK_EQ_INT(hb_h3_server_new(&s, &cfg, err), HB_E_INVALID);
    cfg.max_streams = 100;
    CHECK_EQ_INT(hb_h3_server_new(&s, &cfg, err), 0);
    hb_h3_server_free(s);
    hb_h3_server_free(NULL);
}

static void test_datagrams(void)
{
    char err[HB_ERR_LEN];
    hb_h3_server_stats st;
    memset(&st, 0, sizeof st);
    uint64_t now = hb_now_ns();
    hb_h3_server_config cfg;
    hb_h3_server_config_init(&cfg);
    cfg.stats = &st;
    cfg.now = &now;
    cfg.cert_pem = g_cert;
    cfg.cert_len = g_cert_len;
    cfg.key_pem = g_key;
    cfg.key_len = g_key_len;
    hb_h3_server *s = NULL;
    CHECK_EQ_INT(hb_h3_server_new(&s, &cfg, err), 0);
    if (!s) return;
    struct sockaddr_in local = {.sin_family = AF_INET, .sin_port = htons(4433)};
    struct sockaddr_in peer = {.sin_family = AF_INET, .sin_port = htons(50000)};
    local.sin_addr.s_addr = peer.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    const struct sockaddr *l = (const struct sockaddr *)&local, *p = (const struct sockaddr *)&peer;
    uint8_t buf[HB_H3_MAX_DATAGRAM];
    struct sockaddr_storage to;
    socklen_t tolen = 0;

    CHECK_EQ_INT(hb_h3_server_deadline(s), UINT64_MAX);
    /* not QUIC: empty, one byte, a short header for no connection, random bytes */
    hb_h3_server_recv(s, l, sizeof local, p, sizeof peer, buf, 0);
    uint8_t one = 0x40;
    hb_h3_server_recv(s, l, sizeof local, p, sizeof peer, &one, 1);
    uint8_t shorthdr[64];
    memset(shorthdr, 0x5a, sizeof shorthdr);
    shorthdr[0] = 0x41; /* short header, fixed bit */
    hb_h3_server_recv(s, l, sizeof local, p, sizeof peer, shorthdr, sizeof shorthdr);
    srand(7);
    for (int i = 0; i < 200; i++) {
        size_t n = (size_t)(rand() % (int)sizeof buf);
        for (size_t k = 0; k < n; k++)
            buf[k] = (uint8_t)rand();
        buf[0] &= 0x7f; /* short headers only: a long one may ask for version negotiation */
        hb_h3_server_recv(s, l, sizeof local, p, sizeof peer, buf, n);
    }
    /* an Initial (v1) whose DCID is shorter than the 8 bytes a client must use */
    uint8_t init[1200];
    memset(init, 0, sizeof init);
    uint8_t hdr[] = {0xc0, 0, 0, 0, 1, 4, 1, 2, 3, 4, 0, 0, 0x44, 0xa0};
    memcpy(init, hdr, sizeof hdr);
    hb_h3_server_recv(s, l, sizeof local, p, sizeof peer, init, sizeof init);
    CHECK_EQ_INT(st.packets_in, 204);
    CHECK_EQ_INT(st.dropped, 204);
    CHECK_EQ_INT(st.connections, 0);
    CHECK_EQ_INT(hb_h3_server_conns(s), 0);
    CHECK_EQ_INT(hb_h3_server_send(s, buf, sizeof buf, &to, &tolen), 0);
    CHECK_EQ_INT(st.packets_out, 0);

    /* an unknown version: one Version Negotiation packet listing QUIC v1, CIDs swapped */
    uint8_t vn[1200];
    memset(vn, 0, sizeof vn);
    uint8_t vh[] = {0xc0, 0x1a, 0x2a, 0x3a, 0x4a, 8, 1, 2, 3, 4, 5, 6, 7, 8, 3, 9, 9, 9};
    memcpy(vn, vh, sizeof vh);
    hb_h3_server_recv(s, l, sizeof local, p, sizeof peer, vn, sizeof vn);
    CHECK_EQ_INT(st.version_negotiations, 1);
    size_t n = hb_h3_server_send(s, buf, sizeof buf, &to, &tolen);
    CHECK_EQ_INT(n, 1 + 4 + 1 + 3 + 1 + 8 + 4);
    CHECK((buf[0] & 0x80) != 0);
    static const uint8_t want[] = {0, 0, 0, 0, 3, 9, 9, 9, 8, 1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0, 1};
    CHECK(n == 1 + sizeof want && memcmp(buf + 1, want, sizeof want) == 0);
    CHECK_EQ_INT(tolen, sizeof peer);
    CHECK(memcmp(&to, &peer, sizeof peer) == 0);
    CHECK_EQ_INT(hb_h3_server_send(s, buf, sizeof buf, &to, &tolen), 0);
    CHECK_EQ_INT(st.packets_out, 1);
    CHECK_EQ_INT(st.bytes_out, n);
    hb_h3_server_shutdown(s); /* no connection: nothing to say */
    CHECK_EQ_INT(hb_h3_server_send(s, buf, sizeof buf, &to, &tolen), 0);
    hb_h3_server_free(s);
}

static void test_embedded_udp_side(void)
{
    char err[HB_ERR_LEN];
    hb_server_opts o;
    hb_server_opts_init(&o);
    CHECK_EQ_INT(o.http3, 0);
    o.http3 = 1;
    hb_server *srv = NULL;
    CHECK_EQ_INT(hb_server_start(&srv, &o, err), HB_E_INVALID); /* http3 needs tls */
    CHECK(strstr(err, "http3 needs tls") != NULL);
    o.tls = 1;
    o.threads = 2;
    CHECK_EQ_INT(hb_server_start(&srv, &o, err), 0);
    if (!srv) return;
    int port = hb_server_port(srv);
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    const char junk[] = "GET / HTTP/1.1\r\n\r\n"; /* not QUIC */
    CHECK(sendto(fd, junk, sizeof junk - 1, 0, (struct sockaddr *)&to, sizeof to) > 0);
    hb_server_stats st;
    for (int i = 0; i < 200; i++) { /* up to 2 s */
        hb_server_stats_read(srv, &st);
        if (st.h3_dropped) break;
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
    }
    CHECK_EQ_INT(st.http3, 1);
    CHECK_EQ_INT(st.h3_packets_in, 1);
    CHECK_EQ_INT(st.h3_dropped, 1);
    CHECK_EQ_INT(st.h3_bytes_in, sizeof junk - 1);
    CHECK_EQ_INT(st.requests, 0);
    close(fd);
    hb_server_free(srv);
}

int main(void)
{
    make_pems();
    test_config();
    test_datagrams();
    test_embedded_udp_side();
    free(g_cert);
    free(g_key);
    HB_TEST_MAIN_END();
}
