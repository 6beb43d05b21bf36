/* fuzz_h3_server.c - libFuzzer harness for hb_h3_server: the embedded server's
 * HTTP/3 input path (packet header decoding, the connection-ID table, new
 * connections from client Initials, ngtcp2 + GnuTLS handshakes, timers).
 *
 * Input: byte 0 sets how far the fake clock moves between datagrams (its value
 * mod 6 picks the step). Below 0xF0 the rest is datagrams, each a 2-byte
 * big-endian length and its bytes, all from one peer. From 0xF0 on the input
 * reaches the HTTP/3 layer (the server's keys are random, so fuzzed datagrams
 * never get past the handshake): an in-memory ngtcp2 + GnuTLS client completes
 * a real handshake with the endpoint, opens its control stream with SETTINGS,
 * and the rest is stream writes it protects and delivers, each a 1-byte op
 * (bits 0-2: request stream 0, 4, ... 20, or 6: a second unidirectional stream,
 * 7: the control stream; bit 3: FIN; bit 4: reset the stream instead), a
 * 2-byte length and the stream bytes (QPACK and HTTP/3 frames, raw).
 * After each datagram the output is drained and the timers due are run, the way
 * the server's driver does it. The seeds are real client Initials (libcurl,
 * aioquic), so the handshake path is reached. Beyond "no crash, no sanitizer
 * report, no leak" it checks the contract: every datagram out is 1..1500 bytes
 * and goes to the peer, every datagram in is counted, and once the endpoint is
 * freed every counted stream has exactly one status.
 *
 * build: clang -fsanitize=fuzzer,address,undefined -D_GNU_SOURCE -Icsrc/core \
 *   csrc/fuzz/fuzz_h3_server.c csrc/core/h3server/hb_h3_server*.c \
 *   csrc/core/h3/hb_h3_client_mem.c csrc/core/h3codec/hb_h3_frame.c \
 *   csrc/core/h3codec/hb_qpack.c csrc/core/http/hb_huff.c csrc/core/http/hb_route.c \
 *   csrc/core/http/hb_sse.c csrc/core/base/hb_content.c csrc/core/base/hb_common.c \
 *   csrc/core/http/hb_parse.c csrc/core/net/hb_tls.c $(pkg-config --libs \
 *   libngtcp2_crypto_gnutls libngtcp2 gnutls) -lssl -lcrypto
 */
#include <netinet/in.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "h3server/hb_h3_server.h"
#include "net/hb_tls.h"

#ifndef HB_NO_H3
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <ngtcp2/ngtcp2.h>
#include <ngtcp2/ngtcp2_crypto.h>
#include <ngtcp2/ngtcp2_crypto_gnutls.h>
#endif

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

/* ---- the in-memory client of the stream mode ---- */

typedef struct fclient {
    ngtcp2_conn *q;
    gnutls_session_t tls;
    gnutls_certificate_credentials_t cred;
    ngtcp2_crypto_conn_ref ref;
    int hs_done;
    struct sockaddr_in local, peer; /* the client's address and the server's */
} fclient;

static ngtcp2_conn *fc_get_conn(ngtcp2_crypto_conn_ref *ref)
{
    return ((fclient *)ref->user_data)->q;
}

static void fc_rand(uint8_t *dest, size_t n, const ngtcp2_rand_ctx *ctx)
{
    (void)ctx;
    if (gnutls_rnd(GNUTLS_RND_NONCE, dest, n) != 0) memset(dest, 7, n);
}

static int fc_new_cid(ngtcp2_conn *q, ngtcp2_cid *cid, uint8_t *token, size_t len, void *ud)
{
    (void)q;
    (void)ud;
    fc_rand(cid->data, len, NULL);
    cid->datalen = len;
    fc_rand(token, NGTCP2_STATELESS_RESET_TOKENLEN, NULL);
    return 0;
}

static int fc_hs_done(ngtcp2_conn *q, void *ud)
{
    (void)q;
    ((fclient *)ud)->hs_done = 1;
    return 0;
}

/* the server's responses are consumed at once (credit back), never looked at */
static int fc_recv_stream(ngtcp2_conn *q, uint32_t flags, int64_t id, uint64_t off,
                          const uint8_t *p, size_t n, void *ud, void *sud)
{
    (void)flags;
    (void)off;
    (void)p;
    (void)ud;
    (void)sud;
    (void)ngtcp2_conn_extend_max_stream_offset(q, id, n);
    ngtcp2_conn_extend_max_offset(q, n);
    return 0;
}

static const ngtcp2_callbacks FC_CBS = {
    .client_initial = ngtcp2_crypto_client_initial_cb,
    .recv_crypto_data = ngtcp2_crypto_recv_crypto_data_cb,
    .handshake_completed = fc_hs_done,
    .encrypt = ngtcp2_crypto_encrypt_cb,
    .decrypt = ngtcp2_crypto_decrypt_cb,
    .hp_mask = ngtcp2_crypto_hp_mask_cb,
    .recv_stream_data = fc_recv_stream,
    .recv_retry = ngtcp2_crypto_recv_retry_cb,
    .rand = fc_rand,
    .get_new_connection_id = fc_new_cid,
    .update_key = ngtcp2_crypto_update_key_cb,
    .delete_crypto_aead_ctx = ngtcp2_crypto_delete_crypto_aead_ctx_cb,
    .delete_crypto_cipher_ctx = ngtcp2_crypto_delete_crypto_cipher_ctx_cb,
    .get_path_challenge_data = ngtcp2_crypto_get_path_challenge_data_cb,
    .version_negotiation = ngtcp2_crypto_version_negotiation_cb,
};

static int fc_new(fclient *c, uint64_t now)
{
    memset(c, 0, sizeof *c);
    c->local.sin_family = c->peer.sin_family = AF_INET;
    c->local.sin_port = htons(50000);
    c->peer.sin_port = htons(4433);
    c->local.sin_addr.s_addr = c->peer.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (gnutls_certificate_allocate_credentials(&c->cred) != 0) return -1;
    if (gnutls_init(&c->tls, GNUTLS_CLIENT | GNUTLS_NO_END_OF_EARLY_DATA) != 0) return -1;
    if (gnutls_priority_set_direct(c->tls,
                                   "%DISABLE_TLS13_COMPAT_MODE:NORMAL:-VERS-ALL:+VERS-TLS1.3:"
                                   "-CIPHER-ALL:+AES-128-GCM:-GROUP-ALL:+GROUP-X25519",
                                   NULL) != 0 ||
        ngtcp2_crypto_gnutls_configure_client_session(c->tls) != 0 ||
        gnutls_credentials_set(c->tls, GNUTLS_CRD_CERTIFICATE, c->cred) != 0)
        return -1;
    gnutls_datum_t alpn = {(unsigned char *)"h3", 2};
    if (gnutls_alpn_set_protocols(c->tls, &alpn, 1, 0) != 0) return -1;
    c->ref.get_conn = fc_get_conn;
    c->ref.user_data = c;
    gnutls_session_set_ptr(c->tls, &c->ref);
    ngtcp2_cid dcid, scid;
    dcid.datalen = 18;
    scid.datalen = 8;
    fc_rand(dcid.data, dcid.datalen, NULL);
    fc_rand(scid.data, scid.datalen, NULL);
    ngtcp2_settings st;
    ngtcp2_settings_default(&st);
    st.initial_ts = now;
    ngtcp2_transport_params tp;
    ngtcp2_transport_params_default(&tp);
    tp.initial_max_streams_uni = 3;
    tp.initial_max_stream_data_bidi_local = 1 << 20;
    tp.initial_max_stream_data_uni = 1 << 20;
    tp.initial_max_data = 16 << 20;
    ngtcp2_path path = {{(ngtcp2_sockaddr *)&c->local, sizeof c->local},
                        {(ngtcp2_sockaddr *)&c->peer, sizeof c->peer},
                        NULL};
    if (ngtcp2_conn_client_new(&c->q, &dcid, &scid, &path, NGTCP2_PROTO_VER_V1, &FC_CBS, &st, &tp,
                               NULL, c) != 0) {
        c->q = NULL;
        return -1;
    }
    ngtcp2_conn_set_tls_native_handle(c->q, c->tls);
    return 0;
}

static void fc_free(fclient *c)
{
    if (c->q) ngtcp2_conn_del(c->q);
    if (c->tls) gnutls_deinit(c->tls);
    if (c->cred) gnutls_certificate_free_credentials(c->cred);
}

/* Everything the client has to send (stream sid's bytes first, when given) goes to
 * the server, and what the server answers comes back, until both are quiet. */
static void fc_pump(fclient *c, hb_h3_server *s, uint64_t now, int64_t sid, const uint8_t *p,
                    size_t n, int fin)
{
    static uint8_t buf[HB_H3_MAX_DATAGRAM];
    struct sockaddr_storage to;
    socklen_t tolen;
    ngtcp2_path path = {{(ngtcp2_sockaddr *)&c->local, sizeof c->local},
                        {(ngtcp2_sockaddr *)&c->peer, sizeof c->peer},
                        NULL};
    if (sid >= 0 && n == 0 && !fin) sid = -1;
    for (int round = 0; round < 64; round++) {
        int moved = 0;
        for (int i = 0; i < 64; i++) {
            ngtcp2_vec v = {(uint8_t *)(uintptr_t)p, n};
            ngtcp2_ssize nd = -1;
            ngtcp2_pkt_info pi;
            uint32_t fl = sid >= 0 && fin ? NGTCP2_WRITE_STREAM_FLAG_FIN : 0;
            ngtcp2_ssize w = ngtcp2_conn_writev_stream(c->q, NULL, &pi, buf, 1200, &nd, fl, sid,
                                                       sid >= 0 ? &v : NULL, sid >= 0, now);
            if (w < 0) {
                if (sid < 0) break; /* the connection is done */
                sid = -1;           /* that stream takes no more: the rest is dropped */
                continue;
            }
            if (sid >= 0 && nd >= 0) {
                p += nd;
                n -= (size_t)nd;
                if (n == 0) sid = -1; /* all of it (and the FIN) is out */
            }
            if (w == 0) break;
            hb_h3_server_recv(s, (struct sockaddr *)&c->peer, sizeof c->peer,
                              (struct sockaddr *)&c->local, sizeof c->local, buf, (size_t)w);
            moved = 1;
        }
        for (int i = 0; i < 256; i++) {
            size_t k = hb_h3_server_send(s, buf, sizeof buf, &to, &tolen);
            if (k == 0) break;
            REQUIRE(k <= HB_H3_MAX_DATAGRAM);
            ngtcp2_pkt_info pi = {0};
            (void)ngtcp2_conn_read_pkt(c->q, &path, &pi, buf, k, now);
            moved = 1;
        }
        if (!moved) break;
    }
}

static void fuzz_streams(hb_h3_server *s, uint64_t *now, uint64_t step, const uint8_t *data,
                         size_t size)
{
    fclient c;
    if (fc_new(&c, *now) != 0) {
        fc_free(&c);
        return;
    }
    for (int i = 0; i < 8 && !c.hs_done; i++) {
        fc_pump(&c, s, *now, -1, NULL, 0, 0);
        *now += 1000;
    }
    int64_t ctrl = -1, uni = -1, next_bidi = 0;
    static const uint8_t SETTINGS[] = {0x00, 0x04, 0x00}; /* stream type, empty SETTINGS */
    if (c.hs_done && ngtcp2_conn_open_uni_stream(c.q, &ctrl, NULL) == 0)
        fc_pump(&c, s, *now, ctrl, SETTINGS, sizeof SETTINGS, 0);
    while (c.hs_done && size >= 3) {
        uint8_t op = data[0];
        size_t n = (size_t)data[1] << 8 | data[2];
        data += 3;
        size -= 3;
        if (n > size) n = size;
        int64_t sid = -1;
        unsigned which = op & 7;
        if (which < 6) {
            sid = (int64_t)which * 4;
            int64_t id;
            while (next_bidi <= sid && ngtcp2_conn_open_bidi_stream(c.q, &id, NULL) == 0)
                next_bidi = id + 4; /* the client's request streams up to this one */
            if (next_bidi <= sid) sid = -1;
        } else if (which == 6) {
            if (uni < 0 && ngtcp2_conn_open_uni_stream(c.q, &uni, NULL) != 0) uni = -1;
            sid = uni;
        } else {
            sid = ctrl;
        }
        if (sid >= 0 && (op & 0x10))
            (void)ngtcp2_conn_shutdown_stream(c.q, sid, 0x10c);
        else if (sid >= 0)
            fc_pump(&c, s, *now, sid, data, n, (op & 8) != 0);
        fc_pump(&c, s, *now, -1, NULL, 0, 0);
        data += n;
        size -= n;
        *now += step;
        if (hb_h3_server_deadline(s) <= *now) hb_h3_server_timer(s);
        if (ngtcp2_conn_get_expiry(c.q) <= *now) (void)ngtcp2_conn_handle_expiry(c.q, *now);
    }
    fc_free(&c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    static const uint64_t steps[] = {0, 1000, 50000, 1000000, 30000000, 1000000000};
    uint64_t step = steps[data[0] % 6];
    int streams = data[0] >= 0xF0;
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
    if (streams) {
        fuzz_streams(s, &now, step, data, size);
        size = 0;
        in = st.packets_in;
    }
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
