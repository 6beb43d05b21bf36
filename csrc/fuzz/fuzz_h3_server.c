/* fuzz_h3_server.c - libFuzzer harness for hb_h3_server: the embedded server's
 * HTTP/3 input path (packet header decoding, the connection-ID table, new
 * connections from client Initials, ngtcp2 + GnuTLS handshakes, timers).
 *
 * Input: byte 0 sets how far the fake clock moves between datagrams; the rest is
 * datagrams, each a 2-byte big-endian length and its bytes, all from one peer.
 * After each datagram the output is drained and the timers due are run, the way
 * the server's driver does it. The seeds are real client Initials (libcurl,
 * aioquic), so the handshake path is reached. Beyond "no crash, no sanitizer
 * report, no leak" it checks the contract: every datagram out is 1..1500 bytes
 * and goes to the peer, every datagram in is counted, and once the endpoint is
 * freed every counted stream has exactly one status.
 *
 * build: clang -fsanitize=fuzzer,address,undefined -D_GNU_SOURCE -Icsrc/core \
 *          csrc/fuzz/fuzz_h3_server.c csrc/core/h3/hb_h3_server*.c csrc/core/http/hb_route.c \
 *          csrc/core/base/hb_content.c csrc/core/base/hb_common.c csrc/core/http/hb_parse.c \
 *          csrc/core/net/hb_tls.c $(pkg-config --libs libngtcp2_crypto_gnutls libngtcp2 \
 *          libnghttp3 gnutls) -lssl -lcrypto
 */
#include <netinet/in.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "h3/hb_h3_server.h"
#include "net/hb_tls.h"

#define REQUIRE(c)                                                                                 \
    do {                                                                                           \
        if (!(c)) __builtin_trap();                                                                \
    } while (0)

static char *g_cert, *g_key;
static size_t g_cert_len, g_key_len;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    char err[HB_ERR_LEN];
    hb_tls_ctx *t = NULL;
    REQUIRE(hb_tls_server_ctx_new(&t, NULL, err) == 0);
    REQUIRE(hb_tls_server_pems(t, &g_cert, &g_cert_len, &g_key, &g_key_len, err) == 0);
    hb_tls_ctx_free(t);
    return 0;
}

static uint64_t sum(const uint64_t *v, size_t n)
{
    uint64_t s = 0;
    for (size_t i = 0; i < n; i++)
        s += v[i];
    return s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    static const uint64_t steps[] = {0, 1000, 50000, 1000000, 30000000, 1000000000};
    uint64_t step = steps[data[0] % 6];
    data++;
    size--;
    char err[HB_ERR_LEN];
    hb_h3_server_stats st;
    memset(&st, 0, sizeof st);
    uint64_t now = 1000000000ull;
    hb_h3_server_config cfg;
    hb_h3_server_config_init(&cfg);
    cfg.stats = &st;
    cfg.now = &now;
    cfg.cert_pem = g_cert;
    cfg.cert_len = g_cert_len;
    cfg.key_pem = g_key;
    cfg.key_len = g_key_len;
    cfg.idle_timeout_ms = 2000;
    hb_h3_server *s = NULL;
    REQUIRE(hb_h3_server_new(&s, &cfg, err) == 0);
    struct sockaddr_in local = {.sin_family = AF_INET, .sin_port = htons(4433)};
    struct sockaddr_in peer = {.sin_family = AF_INET, .sin_port = htons(50000)};
    local.sin_addr.s_addr = peer.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    static uint8_t out[HB_H3_MAX_DATAGRAM];
    struct sockaddr_storage to;
    socklen_t tolen;
    uint64_t in = 0;
    while (size >= 2) {
        size_t n = (size_t)data[0] << 8 | data[1];
        data += 2;
        size -= 2;
        if (n > size) n = size;
        hb_h3_server_recv(s, (struct sockaddr *)&local, sizeof local, (struct sockaddr *)&peer,
                          sizeof peer, data, n);
        in++;
        data += n;
        size -= n;
        for (int i = 0; i < 4096; i++) {
            size_t k = hb_h3_server_send(s, out, sizeof out, &to, &tolen);
            if (k == 0) break;
            REQUIRE(k <= HB_H3_MAX_DATAGRAM);
            REQUIRE(tolen == sizeof peer && memcmp(&to, &peer, sizeof peer) == 0);
        }
        now += step;
        if (hb_h3_server_deadline(s) <= now) hb_h3_server_timer(s);
        REQUIRE(st.packets_in == in && st.dropped <= in);
    }
    hb_h3_server_shutdown(s);
    while (hb_h3_server_send(s, out, sizeof out, &to, &tolen) > 0) {
    }
    hb_h3_server_free(s);
    REQUIRE(st.closed == st.connections);
    REQUIRE(sum(st.by_route, HB_ROUTE_COUNT) == sum(st.by_status, 600));
    return 0;
}
