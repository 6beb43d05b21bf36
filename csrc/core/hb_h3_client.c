/* hb_h3_client.c - the HTTP/3 client connection of hb_h3_client.h on
 * ngtcp2 0.12 (QUIC, TLS by GnuTLS through ngtcp2_crypto_gnutls) and
 * nghttp3 0.8 (HTTP/3 framing, QPACK). ngtcp2 writes one datagram per call;
 * full-size ones are gathered and go out with one sendmsg (UDP GSO). */
#include "hb_h3_client.h"

#ifndef HB_NO_H3

#include <errno.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <nghttp3/nghttp3.h>
#include <ngtcp2/ngtcp2.h>
#include <ngtcp2/ngtcp2_crypto.h>
#include <ngtcp2/ngtcp2_crypto_gnutls.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define PKT_MAX 1452  /* a datagram ngtcp2 may fill (Ethernet MTU minus IPv6/UDP) */
#define RX_BATCH 16   /* datagrams per recvmmsg() */
#define RX_DGRAM 1500 /* the largest datagram we accept (max_udp_payload_size) */
#define TX_BATCH 16   /* full-size datagrams per sendmsg (UDP GSO) */
#define NV_MAX 128    /* request fields per stream */
#define DEF_HS_NS 3000000000ull
#define DEF_IDLE_NS 30000000000ull

struct hb_h3_tls {
    gnutls_certificate_credentials_t cred;
    int insecure;
};

/* The libraries' allocations come from a free list per power-of-two size
 * class, kept for the client's life: a stream's frames and QPACK state reuse
 * the blocks of the streams before it, so steady-state requests call no
 * malloc (over 16 KiB goes to malloc directly). One client, one thread. */
#define POOL_MIN_SHIFT 5
#define POOL_MAX_SHIFT 14
#define POOL_CLASSES (POOL_MAX_SHIFT - POOL_MIN_SHIFT + 1)

typedef union blk {
    struct {
        size_t cap; /* usable bytes after the header */
        union blk *next;
    } h;
    max_align_t align;
} blk;

typedef struct pool {
    blk *free[POOL_CLASSES];
} pool;

static void *pool_malloc(size_t size, void *ud)
{
    pool *pl = ud;
    size_t need = size + sizeof(blk);
    if (need < size) return NULL;
    unsigned k = POOL_MIN_SHIFT;
    while (k <= POOL_MAX_SHIFT && ((size_t)1 << k) < need)
        k++;
    blk *b;
    if (k > POOL_MAX_SHIFT) {
        b = malloc(need);
        if (!b) return NULL;
        b->h.cap = size;
    } else if ((b = pl->free[k - POOL_MIN_SHIFT]) != NULL) {
        pl->free[k - POOL_MIN_SHIFT] = b->h.next;
    } else {
        b = malloc((size_t)1 << k);
        if (!b) return NULL;
        b->h.cap = ((size_t)1 << k) - sizeof(blk);
    }
    return b + 1;
}

static void pool_free(void *ptr, void *ud)
{
    pool *pl = ud;
    if (!ptr) return;
    blk *b = (blk *)ptr - 1;
    size_t whole = b->h.cap + sizeof(blk);
    if (whole > ((size_t)1 << POOL_MAX_SHIFT)) {
        free(b);
        return;
    }
    unsigned k = POOL_MIN_SHIFT;
    while (((size_t)1 << k) < whole)
        k++;
    b->h.next = pl->free[k - POOL_MIN_SHIFT];
    pl->free[k - POOL_MIN_SHIFT] = b;
}

static void *pool_calloc(size_t n, size_t size, void *ud)
{
    if (size && n > SIZE_MAX / size) return NULL;
    void *p = pool_malloc(n * size, ud);
    if (p) memset(p, 0, n * size);
    return p;
}

static void *pool_realloc(void *ptr, size_t size, void *ud)
{
    if (!ptr) return pool_malloc(size, ud);
    blk *b = (blk *)ptr - 1;
    if (size <= b->h.cap) return ptr;
    void *n = pool_malloc(size, ud);
    if (!n) return NULL;
    memcpy(n, ptr, b->h.cap);
    pool_free(ptr, ud);
    return n;
}

static void pool_destroy(pool *pl)
{
    for (int i = 0; i < POOL_CLASSES; i++) {
        while (pl->free[i]) {
            blk *b = pl->free[i];
            pl->free[i] = b->h.next;
            free(b);
        }
    }
}

struct hb__h3 {
    pool pool; /* behind qmem and hmem */
    ngtcp2_mem qmem;
    nghttp3_mem hmem;
    ngtcp2_conn *q;
    nghttp3_conn *h;
    gnutls_session_t tls;
    ngtcp2_crypto_conn_ref ref;
    const hb_h3_callbacks *cb;
    void *ud;
    hb_h3_settings set;
    struct sockaddr_storage local, remote;
    socklen_t llen, rlen;
    ngtcp2_connection_close_error last; /* what CONNECTION_CLOSE says */
    size_t last_pto;
    uint64_t now;  /* clock of the call in progress */
    uint8_t *rbuf; /* RX_BATCH datagrams of RX_DGRAM bytes */
    struct mmsghdr rmsg[RX_BATCH];
    struct iovec riov[RX_BATCH];
    uint8_t pkt[PKT_MAX]; /* CONNECTION_CLOSE */
    uint8_t *tx;          /* TX_BATCH datagrams back to back, all gso bytes but the last */
    size_t txlen, gso;
    uint32_t ntx;
    int pending; /* the batch in tx waits for the socket */
    int no_gso;  /* the kernel refused UDP_SEGMENT: one send() per datagram */
    int failed;  /* a callback failed: its code in fail_rc */
    int fail_rc;
    nghttp3_nv nv[NV_MAX]; /* one request's fields, converted (nghttp3 copies them) */
    gnutls_datum_t ticket; /* the last session ticket (GnuTLS's allocation), for resumption */
};

int hb_h3_available(void)
{
    return 1;
}

/* ---- TLS trust ---- */

int hb_h3_tls_new(hb_h3_tls **out, const hb_h3_tls_opts *o, char *err)
{
    *out = NULL;
    hb_h3_tls *t = calloc(1, sizeof *t);
    if (!t) return hb_fail(err, HB_E_NOMEM, "out of memory");
    t->insecure = o->insecure;
    int rv = gnutls_certificate_allocate_credentials(&t->cred);
    if (rv < 0) {
        free(t);
        return hb_fail(err, HB_E_NOMEM, "gnutls credentials: %s", gnutls_strerror(rv));
    }
    if (!o->insecure) {
        if (o->ca_file) {
            rv = gnutls_certificate_set_x509_trust_file(t->cred, o->ca_file, GNUTLS_X509_FMT_PEM);
            if (rv <= 0) {
                hb_h3_tls_free(t);
                return hb_fail(err, HB_E_TLS, "CA file %s: %s", o->ca_file,
                               rv == 0 ? "no certificate in it" : gnutls_strerror(rv));
            }
        }
        if (o->ca_pem) {
            gnutls_datum_t d = {(unsigned char *)o->ca_pem, (unsigned)strlen(o->ca_pem)};
            rv = gnutls_certificate_set_x509_trust_mem(t->cred, &d, GNUTLS_X509_FMT_PEM);
            if (rv <= 0) {
                hb_h3_tls_free(t);
                return hb_fail(err, HB_E_TLS, "CA PEM: %s",
                               rv == 0 ? "no certificate in it" : gnutls_strerror(rv));
            }
        }
        if (!o->ca_file && !o->ca_pem) {
            rv = gnutls_certificate_set_x509_system_trust(t->cred);
            if (rv < 0) {
                hb_h3_tls_free(t);
                return hb_fail(err, HB_E_TLS, "system trust: %s", gnutls_strerror(rv));
            }
        }
    }
    *out = t;
    return 0;
}

void hb_h3_tls_free(hb_h3_tls *t)
{
    if (!t) return;
    gnutls_certificate_free_credentials(t->cred);
    free(t);
}

/* ---- helpers ---- */

static int fail(hb_h3_client *c, int rc, const char *fmt, const char *detail)
{
    if (!c->err[0]) snprintf(c->err, sizeof c->err, fmt, detail);
    c->over = 1;
    return rc;
}

/* A callback's failure: ngtcp2 returns NGTCP2_ERR_CALLBACK_FAILURE, read or
 * write reports the code kept here. */
static int cb_fail(hb_h3_client *c, int rc, const char *what, int liberr)
{
    struct hb__h3 *p = c->p;
    if (!p->failed) {
        p->failed = 1;
        p->fail_rc = rc;
        snprintf(c->err, sizeof c->err, "%s: %s", what, nghttp3_strerror(liberr));
    }
    ngtcp2_connection_close_error_set_application_error(
        &p->last, nghttp3_err_infer_quic_app_error_code(liberr), NULL, 0);
    return NGTCP2_ERR_CALLBACK_FAILURE;
}

static void rand_cb(uint8_t *dest, size_t len, const ngtcp2_rand_ctx *rctx)
{
    (void)rctx;
    if (gnutls_rnd(GNUTLS_RND_RANDOM, dest, len) != 0) memset(dest, 0, len);
}

static int new_cid_cb(ngtcp2_conn *q, ngtcp2_cid *cid, uint8_t *token, size_t cidlen, void *ud)
{
    (void)q;
    (void)ud;
    if (gnutls_rnd(GNUTLS_RND_RANDOM, cid->data, cidlen) != 0 ||
        gnutls_rnd(GNUTLS_RND_RANDOM, token, NGTCP2_STATELESS_RESET_TOKENLEN) != 0)
        return NGTCP2_ERR_CALLBACK_FAILURE;
    cid->datalen = cidlen;
    return 0;
}

static ngtcp2_conn *get_conn(ngtcp2_crypto_conn_ref *ref)
{
    hb_h3_client *c = ref->user_data;
    return c->p->q;
}

/* ---- nghttp3 callbacks (ud: the client, sud: the caller's stream pointer) ---- */

static void consume(hb_h3_client *c, int64_t sid, size_t n)
{
    ngtcp2_conn_extend_max_stream_offset(c->p->q, sid, n);
    ngtcp2_conn_extend_max_offset(c->p->q, n);
}

static int h_recv_header(nghttp3_conn *h, int64_t sid, int32_t token, nghttp3_rcbuf *name,
                         nghttp3_rcbuf *value, uint8_t flags, void *ud, void *sud)
{
    (void)h;
    (void)sid;
    (void)flags;
    hb_h3_client *c = ud;
    if (!sud) return 0;
    nghttp3_vec v = nghttp3_rcbuf_get_buf(value);
    if (token == NGHTTP3_QPACK_TOKEN__STATUS) {
        int st = 0;
        for (size_t i = 0; i < v.len && i < 4; i++) {
            if (v.base[i] < '0' || v.base[i] > '9') return NGHTTP3_ERR_CALLBACK_FAILURE;
            st = st * 10 + (v.base[i] - '0');
        }
        if (v.len != 3 || st < 100 || st > 999) return NGHTTP3_ERR_CALLBACK_FAILURE;
        /* interim responses (1xx) are not the answer */
        if (st >= 200 && c->p->cb->on_response) c->p->cb->on_response(c->p->ud, sud, st);
        return 0;
    }
    if (c->p->cb->on_header) {
        nghttp3_vec n = nghttp3_rcbuf_get_buf(name);
        c->p->cb->on_header(c->p->ud, sud, (const char *)n.base, n.len, (const char *)v.base,
                            v.len);
    }
    return 0;
}

static int h_recv_data(nghttp3_conn *h, int64_t sid, const uint8_t *data, size_t len, void *ud,
                       void *sud)
{
    (void)h;
    (void)data;
    hb_h3_client *c = ud;
    consume(c, sid, len);
    if (sud && c->p->cb->on_data) c->p->cb->on_data(c->p->ud, sud, len);
    return 0;
}

static int h_deferred_consume(nghttp3_conn *h, int64_t sid, size_t n, void *ud, void *sud)
{
    (void)h;
    (void)sud;
    consume(ud, sid, n);
    return 0;
}

/* The response ended (FIN after a complete message): the request is done. */
static int h_end_stream(nghttp3_conn *h, int64_t sid, void *ud, void *sud)
{
    hb_h3_client *c = ud;
    if (!sud) return 0;
    nghttp3_conn_set_stream_user_data(h, sid, NULL); /* the caller may reuse sud */
    c->nopen--;
    c->p->cb->on_close(c->p->ud, sud, HB_H3_END_OK, 0);
    return 0;
}

static int h_stream_close(nghttp3_conn *h, int64_t sid, uint64_t code, void *ud, void *sud)
{
    (void)h;
    (void)sid;
    hb_h3_client *c = ud;
    if (!sud) return 0;
    c->nopen--;
    c->p->cb->on_close(c->p->ud, sud, HB_H3_END_RESET, code);
    return 0;
}

static int h_reset_stream(nghttp3_conn *h, int64_t sid, uint64_t code, void *ud, void *sud)
{
    (void)h;
    (void)code;
    (void)sud;
    hb_h3_client *c = ud;
    int rv = ngtcp2_conn_shutdown_stream_write(c->p->q, sid, code);
    return rv ? NGHTTP3_ERR_CALLBACK_FAILURE : 0;
}

static int h_stop_sending(nghttp3_conn *h, int64_t sid, uint64_t code, void *ud, void *sud)
{
    (void)h;
    (void)sud;
    hb_h3_client *c = ud;
    int rv = ngtcp2_conn_shutdown_stream_read(c->p->q, sid, code);
    return rv ? NGHTTP3_ERR_CALLBACK_FAILURE : 0;
}

static nghttp3_ssize h_read_body(nghttp3_conn *h, int64_t sid, nghttp3_vec *vec, size_t veccnt,
                                 uint32_t *pflags, void *ud, void *sud)
{
    (void)h;
    (void)sid;
    (void)veccnt;
    (void)sud;
    hb_h3_client *c = ud;
    vec[0].base = (uint8_t *)c->p->set.body;
    vec[0].len = c->p->set.body_len;
    *pflags |= NGHTTP3_DATA_FLAG_EOF;
    return 1;
}

/* The server's GOAWAY: the streams already open go on, no new one. */
static int h_shutdown(nghttp3_conn *h, int64_t id, void *ud)
{
    (void)h;
    (void)id;
    ((hb_h3_client *)ud)->goaway = 1;
    return 0;
}

static const nghttp3_callbacks H3_CBS = {
    .shutdown = h_shutdown,
    .stream_close = h_stream_close,
    .recv_data = h_recv_data,
    .deferred_consume = h_deferred_consume,
    .recv_header = h_recv_header,
    .stop_sending = h_stop_sending,
    .end_stream = h_end_stream,
    .reset_stream = h_reset_stream,
};

/* The handshake is done: HTTP/3 starts with its three unidirectional streams. */
static int setup_h3(hb_h3_client *c)
{
    struct hb__h3 *p = c->p;
    if (ngtcp2_conn_get_max_local_streams_uni(p->q) < 3) {
        snprintf(c->err, sizeof c->err, "the server allows fewer than 3 unidirectional streams");
        return HB_E_H3;
    }
    nghttp3_settings s;
    nghttp3_settings_default(&s);
    int rv = nghttp3_conn_client_new(&p->h, &H3_CBS, &s, &p->hmem, c);
    if (rv != 0) {
        snprintf(c->err, sizeof c->err, "nghttp3_conn_client_new: %s", nghttp3_strerror(rv));
        return HB_E_NOMEM;
    }
    int64_t ctrl, enc, dec;
    if ((rv = ngtcp2_conn_open_uni_stream(p->q, &ctrl, NULL)) != 0 ||
        (rv = ngtcp2_conn_open_uni_stream(p->q, &enc, NULL)) != 0 ||
        (rv = ngtcp2_conn_open_uni_stream(p->q, &dec, NULL)) != 0) {
        snprintf(c->err, sizeof c->err, "opening the HTTP/3 streams: %s", ngtcp2_strerror(rv));
        return HB_E_H3;
    }
    if ((rv = nghttp3_conn_bind_control_stream(p->h, ctrl)) != 0 ||
        (rv = nghttp3_conn_bind_qpack_streams(p->h, enc, dec)) != 0) {
        snprintf(c->err, sizeof c->err, "binding the HTTP/3 streams: %s", nghttp3_strerror(rv));
        return HB_E_H3;
    }
    return 0;
}

/* ---- ngtcp2 callbacks (ud: the client) ---- */

static int q_handshake_completed(ngtcp2_conn *q, void *ud)
{
    (void)q;
    hb_h3_client *c = ud;
    struct hb__h3 *p = c->p;
    int rc = setup_h3(c);
    if (rc < 0) {
        p->failed = 1;
        p->fail_rc = rc;
        return NGTCP2_ERR_CALLBACK_FAILURE;
    }
    c->handshake_done = 1;
    c->hs_ns = p->now > c->hs_start ? p->now - c->hs_start : 0;
    c->resumed = gnutls_session_is_resumed(p->tls) != 0;
    if (p->cb->on_handshake) p->cb->on_handshake(p->ud);
    return 0;
}

static int q_recv_stream_data(ngtcp2_conn *q, uint32_t flags, int64_t sid, uint64_t off,
                              const uint8_t *data, size_t len, void *ud, void *sud)
{
    (void)q;
    (void)off;
    (void)sud;
    hb_h3_client *c = ud;
    if (!c->p->h) return 0;
    nghttp3_ssize n =
        nghttp3_conn_read_stream(c->p->h, sid, data, len, flags & NGTCP2_STREAM_DATA_FLAG_FIN);
    if (n < 0) return cb_fail(c, HB_E_H3, "HTTP/3", (int)n);
    consume(c, sid, (size_t)n);
    return 0;
}

static int q_acked(ngtcp2_conn *q, int64_t sid, uint64_t off, uint64_t len, void *ud, void *sud)
{
    (void)q;
    (void)off;
    (void)sud;
    hb_h3_client *c = ud;
    if (!c->p->h) return 0;
    int rv = nghttp3_conn_add_ack_offset(c->p->h, sid, len);
    return rv ? cb_fail(c, HB_E_H3, "HTTP/3 ack", rv) : 0;
}

static int q_stream_close(ngtcp2_conn *q, uint32_t flags, int64_t sid, uint64_t code, void *ud,
                          void *sud)
{
    (void)q;
    (void)sud;
    hb_h3_client *c = ud;
    if (!c->p->h) return 0;
    if (!(flags & NGTCP2_STREAM_CLOSE_FLAG_APP_ERROR_CODE_SET)) code = NGHTTP3_H3_NO_ERROR;
    int rv = nghttp3_conn_close_stream(c->p->h, sid, code);
    if (rv != 0 && rv != NGHTTP3_ERR_STREAM_NOT_FOUND)
        return cb_fail(c, HB_E_H3, "HTTP/3 stream close", rv);
    return 0;
}

static int q_stream_reset(ngtcp2_conn *q, int64_t sid, uint64_t final, uint64_t code, void *ud,
                          void *sud)
{
    (void)q;
    (void) final;
    (void)code;
    (void)sud;
    hb_h3_client *c = ud;
    if (!c->p->h) return 0;
    int rv = nghttp3_conn_shutdown_stream_read(c->p->h, sid);
    return rv ? cb_fail(c, HB_E_H3, "HTTP/3 stream reset", rv) : 0;
}

static int q_extend_max_stream_data(ngtcp2_conn *q, int64_t sid, uint64_t max, void *ud, void *sud)
{
    (void)q;
    (void)max;
    (void)sud;
    hb_h3_client *c = ud;
    if (!c->p->h) return 0;
    int rv = nghttp3_conn_unblock_stream(c->p->h, sid);
    return rv ? cb_fail(c, HB_E_H3, "HTTP/3 unblock", rv) : 0;
}

static const ngtcp2_callbacks Q_CBS = {
    .client_initial = ngtcp2_crypto_client_initial_cb,
    .recv_crypto_data = ngtcp2_crypto_recv_crypto_data_cb,
    .handshake_completed = q_handshake_completed,
    .encrypt = ngtcp2_crypto_encrypt_cb,
    .decrypt = ngtcp2_crypto_decrypt_cb,
    .hp_mask = ngtcp2_crypto_hp_mask_cb,
    .recv_stream_data = q_recv_stream_data,
    .acked_stream_data_offset = q_acked,
    .stream_close = q_stream_close,
    .recv_retry = ngtcp2_crypto_recv_retry_cb,
    .rand = rand_cb,
    .get_new_connection_id = new_cid_cb,
    .update_key = ngtcp2_crypto_update_key_cb,
    .stream_reset = q_stream_reset,
    .extend_max_stream_data = q_extend_max_stream_data,
    .delete_crypto_aead_ctx = ngtcp2_crypto_delete_crypto_aead_ctx_cb,
    .delete_crypto_cipher_ctx = ngtcp2_crypto_delete_crypto_cipher_ctx_cb,
    .get_path_challenge_data = ngtcp2_crypto_get_path_challenge_data_cb,
    .version_negotiation = ngtcp2_crypto_version_negotiation_cb,
};

/* ---- lifecycle ---- */

int hb_h3_client_init(hb_h3_client *c, const hb_h3_settings *s, char *err)
{
    memset(c, 0, sizeof *c);
    c->fd = -1;
    c->p = calloc(1, sizeof *c->p);
    if (!c->p) return hb_fail(err, HB_E_NOMEM, "out of memory");
    c->p->rbuf = malloc((size_t)RX_BATCH * RX_DGRAM);
    c->p->tx = malloc((size_t)TX_BATCH * PKT_MAX);
    if (!c->p->rbuf || !c->p->tx) {
        hb_h3_client_free(c);
        return hb_fail(err, HB_E_NOMEM, "out of memory");
    }
    for (int i = 0; i < RX_BATCH; i++) {
        c->p->riov[i].iov_base = c->p->rbuf + (size_t)i * RX_DGRAM;
        c->p->riov[i].iov_len = RX_DGRAM;
        c->p->rmsg[i].msg_hdr.msg_iov = &c->p->riov[i];
        c->p->rmsg[i].msg_hdr.msg_iovlen = 1;
    }
    c->p->qmem = (ngtcp2_mem){&c->p->pool, pool_malloc, pool_free, pool_calloc, pool_realloc};
    c->p->hmem = (nghttp3_mem){&c->p->pool, pool_malloc, pool_free, pool_calloc, pool_realloc};
    c->p->set = *s;
    if (!c->p->set.handshake_timeout_ns) c->p->set.handshake_timeout_ns = DEF_HS_NS;
    if (!c->p->set.idle_timeout_ns) c->p->set.idle_timeout_ns = DEF_IDLE_NS;
    if (!c->p->set.max_streams) c->p->set.max_streams = 1;
    return 0;
}

void hb_h3_client_free(hb_h3_client *c)
{
    if (!c->p) return;
    hb_h3_client_close(c);
    gnutls_free(c->p->ticket.data);
    pool_destroy(&c->p->pool);
    free(c->p->rbuf);
    free(c->p->tx);
    free(c->p);
    c->p = NULL;
}

static int is_ip_literal(const char *h)
{
    unsigned char buf[16];
    return inet_pton(AF_INET, h, buf) == 1 || inet_pton(AF_INET6, h, buf) == 1;
}

/* The server sent a session ticket: keep it for this client's next connection. */
static int ticket_hook(gnutls_session_t s, unsigned htype, unsigned when, unsigned incoming,
                       const gnutls_datum_t *msg)
{
    (void)htype;
    (void)when;
    (void)incoming;
    (void)msg;
    ngtcp2_crypto_conn_ref *ref = gnutls_session_get_ptr(s);
    hb_h3_client *c = ref->user_data;
    gnutls_datum_t d = {NULL, 0};
    if (gnutls_session_get_data2(s, &d) < 0) return 0; /* no resumption then, not an error */
    gnutls_free(c->p->ticket.data);
    c->p->ticket = d;
    return 0;
}

static int tls_session(hb_h3_client *c, const hb_h3_tls *tls, const char *sni)
{
    struct hb__h3 *p = c->p;
    int rv = gnutls_init(&p->tls, GNUTLS_CLIENT | GNUTLS_NO_END_OF_EARLY_DATA);
    if (rv < 0) return fail(c, HB_E_NOMEM, "gnutls_init: %s", gnutls_strerror(rv));
    rv = gnutls_priority_set_direct(
        p->tls, "NORMAL:-VERS-ALL:+VERS-TLS1.3:%DISABLE_TLS13_COMPAT_MODE", NULL);
    if (rv < 0) return fail(c, HB_E_H3_HANDSHAKE, "gnutls priority: %s", gnutls_strerror(rv));
    if (ngtcp2_crypto_gnutls_configure_client_session(p->tls) != 0)
        return fail(c, HB_E_H3_HANDSHAKE, "%s", "ngtcp2_crypto_gnutls_configure_client_session");
    p->ref.get_conn = get_conn;
    p->ref.user_data = c;
    gnutls_session_set_ptr(p->tls, &p->ref);
    rv = gnutls_credentials_set(p->tls, GNUTLS_CRD_CERTIFICATE, tls->cred);
    if (rv < 0) return fail(c, HB_E_H3_HANDSHAKE, "gnutls credentials: %s", gnutls_strerror(rv));
    gnutls_datum_t alpn = {(unsigned char *)"h3", 2};
    rv = gnutls_alpn_set_protocols(p->tls, &alpn, 1, GNUTLS_ALPN_MANDATORY);
    if (rv < 0) return fail(c, HB_E_H3_HANDSHAKE, "ALPN: %s", gnutls_strerror(rv));
    if (sni && *sni && !is_ip_literal(sni)) {
        rv = gnutls_server_name_set(p->tls, GNUTLS_NAME_DNS, sni, strlen(sni));
        if (rv < 0) return fail(c, HB_E_H3_HANDSHAKE, "SNI: %s", gnutls_strerror(rv));
    }
    if (!tls->insecure) gnutls_session_set_verify_cert(p->tls, sni && *sni ? sni : NULL, 0);
    if (p->set.resume) {
        gnutls_handshake_set_hook_function(p->tls, GNUTLS_HANDSHAKE_NEW_SESSION_TICKET,
                                           GNUTLS_HOOK_POST, ticket_hook);
        /* a stale or refused ticket just means a full handshake */
        if (p->ticket.data) (void)gnutls_session_set_data(p->tls, p->ticket.data, p->ticket.size);
    }
    return 0;
}

int hb_h3_client_connect(hb_h3_client *c, const hb_h3_tls *tls, const struct sockaddr *addr,
                         socklen_t alen, const char *sni, const hb_h3_callbacks *cb, void *ud,
                         uint64_t now)
{
    struct hb__h3 *p = c->p;
    if (!p) return HB_E_INVALID;
    hb_h3_client_close(c);
    c->err[0] = 0;
    c->over = c->handshake_done = c->resumed = c->goaway = 0;
    c->nopen = 0;
    c->hs_start = now;
    c->hs_ns = 0;
    p->cb = cb;
    p->ud = ud;
    p->failed = 0;
    p->pending = 0;
    c->blocked = 0;
    p->txlen = p->ntx = 0;
    p->last_pto = 0;
    p->now = now;
    ngtcp2_connection_close_error_default(&p->last);

    c->fd = socket(addr->sa_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c->fd < 0) return fail(c, -errno, "socket: %s", strerror(errno));
    if (connect(c->fd, addr, alen) != 0) return fail(c, -errno, "connect: %s", strerror(errno));
    memcpy(&p->remote, addr, alen);
    p->rlen = alen;
    p->llen = sizeof p->local;
    if (getsockname(c->fd, (struct sockaddr *)&p->local, &p->llen) != 0)
        return fail(c, -errno, "getsockname: %s", strerror(errno));

    int rc = tls_session(c, tls, sni);
    if (rc < 0) return rc;

    ngtcp2_path path = {
        {(struct sockaddr *)&p->local, p->llen}, {(struct sockaddr *)&p->remote, p->rlen}, NULL};
    ngtcp2_cid dcid, scid;
    dcid.datalen = NGTCP2_MIN_INITIAL_DCIDLEN;
    scid.datalen = 8;
    if (gnutls_rnd(GNUTLS_RND_RANDOM, dcid.data, dcid.datalen) != 0 ||
        gnutls_rnd(GNUTLS_RND_RANDOM, scid.data, scid.datalen) != 0)
        return fail(c, HB_E_H3, "%s", "no random bytes for the connection IDs");
    ngtcp2_settings st;
    ngtcp2_settings_default(&st);
    st.initial_ts = now;
    st.handshake_timeout = p->set.handshake_timeout_ns;
    st.max_tx_udp_payload_size = PKT_MAX;
    /* acknowledge every response at once: the ACK then rides in the datagram of
     * the next request instead of following it alone a few microseconds later
     * (ngtcp2 delays an ACK by min(max_ack_delay, RTT/8) below the threshold) */
    st.ack_thresh = 1;
    ngtcp2_transport_params tp;
    ngtcp2_transport_params_default(&tp);
    tp.initial_max_streams_uni = 3;
    tp.initial_max_stream_data_bidi_local = 1024 * 1024;
    tp.initial_max_stream_data_uni = 256 * 1024;
    tp.initial_max_data = 16 * 1024 * 1024;
    tp.max_idle_timeout = p->set.idle_timeout_ns;
    tp.max_udp_payload_size = RX_DGRAM;
    int rv = ngtcp2_conn_client_new(&p->q, &dcid, &scid, &path, NGTCP2_PROTO_VER_V1, &Q_CBS, &st,
                                    &tp, &p->qmem, c);
    if (rv != 0) return fail(c, HB_E_H3, "ngtcp2_conn_client_new: %s", ngtcp2_strerror(rv));
    ngtcp2_conn_set_tls_native_handle(p->q, p->tls);
    rc = hb_h3_client_write(c, now);
    return rc < 0 ? rc : c->fd;
}

void hb_h3_client_close(hb_h3_client *c)
{
    struct hb__h3 *p = c->p;
    if (!p) return;
    if (p->q && c->fd >= 0 && !c->over && !ngtcp2_conn_is_in_closing_period(p->q) &&
        !ngtcp2_conn_is_in_draining_period(p->q)) {
        /* Tell the server now, so it does not keep the connection until its idle timeout. */
        ngtcp2_path_storage ps;
        ngtcp2_path_storage_zero(&ps);
        ngtcp2_pkt_info pi;
        ngtcp2_connection_close_error cc;
        ngtcp2_connection_close_error_set_application_error(&cc, NGHTTP3_H3_NO_ERROR, NULL, 0);
        ngtcp2_ssize n = ngtcp2_conn_write_connection_close(p->q, &ps.path, &pi, p->pkt,
                                                            sizeof p->pkt, &cc, p->now);
        if (n > 0 && send(c->fd, p->pkt, (size_t)n, MSG_DONTWAIT) == n) {
            c->st.dgrams_sent++;
            c->st.bytes_sent += (uint64_t)n;
        }
    }
    if (p->h) nghttp3_conn_del(p->h);
    if (p->q) ngtcp2_conn_del(p->q);
    if (p->tls) gnutls_deinit(p->tls);
    p->h = NULL;
    p->q = NULL;
    p->tls = NULL;
    if (c->fd >= 0) close(c->fd);
    c->fd = -1;
    c->nopen = 0;
    p->pending = 0;
    c->blocked = 0;
    p->txlen = p->ntx = 0;
}

/* ---- I/O ---- */

/* The error ngtcp2 gave (rv), as one of ours. */
static int quic_error(hb_h3_client *c, int rv, const char *where)
{
    struct hb__h3 *p = c->p;
    if (p->failed) {
        c->over = 1;
        return p->fail_rc;
    }
    if (rv == NGTCP2_ERR_DRAINING || rv == NGTCP2_ERR_CLOSING) {
        ngtcp2_connection_close_error cc;
        ngtcp2_conn_get_connection_close_error(p->q, &cc);
        char d[96];
        snprintf(d, sizeof d, "%s error 0x%llx",
                 cc.type == NGTCP2_CONNECTION_CLOSE_ERROR_CODE_TYPE_APPLICATION ? "application"
                                                                                : "transport",
                 (unsigned long long)cc.error_code);
        return fail(c, HB_E_H3_CLOSED, "the server closed the QUIC connection (%s)", d);
    }
    if (rv == NGTCP2_ERR_HANDSHAKE_TIMEOUT)
        return fail(c, HB_E_H3_TIMEOUT, "no QUIC handshake within the handshake timeout%s", "");
    if (rv == NGTCP2_ERR_IDLE_CLOSE)
        return fail(c, HB_E_H3_TIMEOUT, "the QUIC connection idled out%s", "");
    if (rv == NGTCP2_ERR_CRYPTO ||
        (!c->handshake_done && p->tls && rv == NGTCP2_ERR_CALLBACK_FAILURE)) {
        char d[HB_ERR_LEN - 64];
        unsigned status = gnutls_session_get_verify_cert_status(p->tls);
        gnutls_datum_t out = {NULL, 0};
        if (status &&
            gnutls_certificate_verification_status_print(status, GNUTLS_CRT_X509, &out, 0) == 0) {
            snprintf(d, sizeof d, "certificate verification failed: %s", (char *)out.data);
            gnutls_free(out.data);
        } else {
            uint8_t alert = ngtcp2_conn_get_tls_alert(p->q);
            snprintf(d, sizeof d, "TLS alert %u (%s)", alert,
                     gnutls_alert_get_strname((gnutls_alert_description_t)alert)
                         ? gnutls_alert_get_strname((gnutls_alert_description_t)alert)
                         : "?");
        }
        return fail(c, HB_E_H3_HANDSHAKE, "QUIC handshake failed: %s", d);
    }
    char d[128];
    snprintf(d, sizeof d, "%s: %s", where, ngtcp2_strerror(rv));
    return fail(c, HB_E_H3, "%s", d);
}

/* One datagram per send(), from the batch's head; what is left moves to the
 * front when the socket blocks. */
static int send_each(hb_h3_client *c)
{
    struct hb__h3 *p = c->p;
    size_t off = 0;
    while (off < p->txlen) {
        size_t n = p->txlen - off < p->gso ? p->txlen - off : p->gso;
        ssize_t w = send(c->fd, p->tx + off, n, 0);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) {
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                return fail(c, -errno, "send: %s", strerror(errno));
            memmove(p->tx, p->tx + off, p->txlen - off);
            p->txlen -= off;
            p->ntx = (uint32_t)((p->txlen + p->gso - 1) / p->gso);
            p->pending = c->blocked = 1;
            return HB_AGAIN;
        }
        c->st.dgrams_sent++;
        c->st.bytes_sent += n;
        off += n;
    }
    p->txlen = p->ntx = 0;
    p->pending = c->blocked = 0;
    return 0;
}

/* Send the batch: one sendmsg, the kernel cutting it into gso-byte datagrams. */
static int send_batch(hb_h3_client *c)
{
    struct hb__h3 *p = c->p;
    if (!p->ntx) return 0;
    if (p->ntx == 1 || p->no_gso) return send_each(c);
    struct iovec iov = {p->tx, p->txlen};
    union {
        char buf[CMSG_SPACE(sizeof(uint16_t))];
        struct cmsghdr align;
    } cm;
    memset(&cm, 0, sizeof cm);
    struct msghdr mh = {0};
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    mh.msg_control = cm.buf;
    mh.msg_controllen = sizeof cm.buf;
    struct cmsghdr *ch = CMSG_FIRSTHDR(&mh);
    ch->cmsg_level = SOL_UDP;
    ch->cmsg_type = UDP_SEGMENT;
    ch->cmsg_len = CMSG_LEN(sizeof(uint16_t));
    uint16_t seg = (uint16_t)p->gso;
    memcpy(CMSG_DATA(ch), &seg, sizeof seg);
    ssize_t w;
    do {
        w = sendmsg(c->fd, &mh, 0);
    } while (w < 0 && errno == EINTR);
    if (w < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            p->pending = c->blocked = 1;
            return HB_AGAIN;
        }
        if (errno == EIO || errno == EINVAL || errno == EOPNOTSUPP) { /* no GSO here */
            p->no_gso = 1;
            return send_each(c);
        }
        return fail(c, -errno, "sendmsg: %s", strerror(errno));
    }
    c->st.dgrams_sent += p->ntx;
    c->st.bytes_sent += p->txlen;
    p->txlen = p->ntx = 0;
    p->pending = c->blocked = 0;
    return 0;
}

int hb_h3_client_write(hb_h3_client *c, uint64_t now)
{
    struct hb__h3 *p = c->p;
    if (c->over || !p->q) return c->over ? HB_E_H3 : 0;
    if (p->pending) return 0; /* blocked: hb_h3_client_writable goes on */
    p->now = now;
    nghttp3_vec vec[16];
    ngtcp2_path_storage ps;
    ngtcp2_path_storage_zero(&ps);
    for (;;) {
        int64_t sid = -1;
        int fin = 0;
        nghttp3_ssize nv = 0;
        if (p->h && ngtcp2_conn_get_max_data_left(p->q)) {
            nv = nghttp3_conn_writev_stream(p->h, &sid, &fin, vec, 16);
            if (nv < 0) {
                cb_fail(c, HB_E_H3, "HTTP/3 write", (int)nv);
                return quic_error(c, NGTCP2_ERR_CALLBACK_FAILURE, "write");
            }
        }
        uint32_t flags = NGTCP2_WRITE_STREAM_FLAG_MORE | (fin ? NGTCP2_WRITE_STREAM_FLAG_FIN : 0);
        ngtcp2_ssize ndata = -1;
        ngtcp2_pkt_info pi;
        /* a batch continues only with full-size datagrams; the first shorter one ends it */
        size_t room = p->ntx ? p->gso : PKT_MAX;
        ngtcp2_ssize n =
            ngtcp2_conn_writev_stream(p->q, &ps.path, &pi, p->tx + p->txlen, room, &ndata, flags,
                                      sid, (const ngtcp2_vec *)vec, (size_t)nv, now);
        if (n < 0) {
            if (n == NGTCP2_ERR_STREAM_DATA_BLOCKED) {
                nghttp3_conn_block_stream(p->h, sid);
                continue;
            }
            if (n == NGTCP2_ERR_STREAM_SHUT_WR) {
                nghttp3_conn_shutdown_stream_write(p->h, sid);
                continue;
            }
            if (n == NGTCP2_ERR_WRITE_MORE) {
                int rv = nghttp3_conn_add_write_offset(p->h, sid, (size_t)ndata);
                if (rv != 0) {
                    cb_fail(c, HB_E_H3, "HTTP/3 write offset", rv);
                    return quic_error(c, NGTCP2_ERR_CALLBACK_FAILURE, "write");
                }
                continue;
            }
            return quic_error(c, (int)n, "write");
        }
        if (ndata >= 0 && sid >= 0) {
            int rv = nghttp3_conn_add_write_offset(p->h, sid, (size_t)ndata);
            if (rv != 0) {
                cb_fail(c, HB_E_H3, "HTTP/3 write offset", rv);
                return quic_error(c, NGTCP2_ERR_CALLBACK_FAILURE, "write");
            }
        }
        if (n == 0) { /* nothing more, or congestion-limited */
            int rc = send_batch(c);
            ngtcp2_conn_update_pkt_tx_time(p->q, now);
            return rc == HB_AGAIN ? 0 : rc;
        }
        if (!p->ntx) p->gso = (size_t)n;
        p->txlen += (size_t)n;
        p->ntx++;
        if ((size_t)n < p->gso || (size_t)n < ngtcp2_conn_get_path_max_tx_udp_payload_size(p->q) ||
            p->ntx == TX_BATCH) {
            int rc = send_batch(c);
            if (rc == HB_AGAIN) {
                ngtcp2_conn_update_pkt_tx_time(p->q, now);
                return 0;
            }
            if (rc < 0) return rc;
        }
    }
}

int hb_h3_client_writable(hb_h3_client *c, uint64_t now)
{
    struct hb__h3 *p = c->p;
    if (c->over || !p->q) return 0;
    if (p->pending) {
        int rc = send_batch(c);
        if (rc == HB_AGAIN) return 0;
        if (rc < 0) return rc;
    }
    return hb_h3_client_write(c, now);
}

int hb_h3_client_read(hb_h3_client *c, uint64_t now)
{
    struct hb__h3 *p = c->p;
    if (c->over || !p->q) return c->over ? HB_E_H3 : 0;
    p->now = now;
    ngtcp2_path path = {
        {(struct sockaddr *)&p->local, p->llen}, {(struct sockaddr *)&p->remote, p->rlen}, NULL};
    ngtcp2_pkt_info pi = {0};
    for (;;) {
        /* a batch per syscall; a short batch means the queue was empty (a
         * datagram arriving later is a new edge for the caller's epoll) */
        int n = recvmmsg(c->fd, p->rmsg, RX_BATCH, 0, NULL);
        if (n < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) break;
            /* ICMP port unreachable on a connected socket: nobody listens there */
            int e = errno;
            char d[96];
            snprintf(d, sizeof d, "%s%s", strerror(e),
                     e == ECONNREFUSED ? " (no QUIC listener on that UDP port)" : "");
            return fail(c, -e, "recv: %s", d);
        }
        for (int i = 0; i < n; i++) {
            size_t len = p->rmsg[i].msg_len;
            c->st.dgrams_recv++;
            c->st.bytes_recv += len;
            if (p->rmsg[i].msg_hdr.msg_flags & MSG_TRUNC) continue; /* over our limit: lost */
            int rv = ngtcp2_conn_read_pkt(p->q, &path, &pi, p->riov[i].iov_base, len, now);
            if (rv != 0) return quic_error(c, rv, "read");
        }
        if (n < RX_BATCH) break;
    }
    return 0;
}

int hb_h3_client_expiry(hb_h3_client *c, uint64_t now)
{
    struct hb__h3 *p = c->p;
    if (c->over || !p->q) return c->over ? HB_E_H3 : 0;
    p->now = now;
    int rv = ngtcp2_conn_handle_expiry(p->q, now);
    if (rv != 0) return quic_error(c, rv, "timer");
    ngtcp2_conn_stat cs;
    ngtcp2_conn_get_conn_stat(p->q, &cs);
    if (cs.pto_count > p->last_pto) c->st.pto += cs.pto_count - p->last_pto;
    p->last_pto = cs.pto_count;
    return hb_h3_client_write(c, now);
}

uint64_t hb_h3_client_next_expiry(const hb_h3_client *c)
{
    if (!c->p || !c->p->q || c->over) return UINT64_MAX;
    return ngtcp2_conn_get_expiry(c->p->q);
}

void hb_h3_client_describe(const hb_h3_client *c, char *buf, size_t len)
{
    const char *suite = c->p && c->p->tls ? gnutls_ciphersuite_get(c->p->tls) : NULL;
    snprintf(buf, len, "QUIC v1,TLSv1.3,%s,h3", suite ? suite : "?");
}

uint32_t hb_h3_client_room(const hb_h3_client *c)
{
    if (!c->p || !c->p->h || c->over || !c->handshake_done || c->goaway) return 0;
    uint64_t left = ngtcp2_conn_get_streams_bidi_left(c->p->q);
    uint32_t m = c->p->set.max_streams > c->nopen ? c->p->set.max_streams - c->nopen : 0;
    return left < m ? (uint32_t)left : m;
}

int64_t hb_h3_client_submit(hb_h3_client *c, const hb_header *fields, size_t nfields, int with_body,
                            void *sud)
{
    struct hb__h3 *p = c->p;
    if (hb_h3_client_room(c) == 0) return HB_AGAIN;
    if (nfields > NV_MAX) return fail(c, HB_E_INVALID, "more than %s request fields", "128");
    int64_t sid;
    int rv = ngtcp2_conn_open_bidi_stream(p->q, &sid, NULL);
    if (rv == NGTCP2_ERR_STREAM_ID_BLOCKED) return HB_AGAIN;
    if (rv != 0) return quic_error(c, rv, "open stream");
    for (size_t i = 0; i < nfields; i++) {
        p->nv[i].name = (uint8_t *)fields[i].name;
        p->nv[i].namelen = fields[i].name_len;
        p->nv[i].value = (uint8_t *)fields[i].value;
        p->nv[i].valuelen = fields[i].value_len;
        p->nv[i].flags = NGHTTP3_NV_FLAG_NO_COPY_NAME | NGHTTP3_NV_FLAG_NO_COPY_VALUE;
    }
    static const nghttp3_data_reader body_reader = {h_read_body};
    rv = nghttp3_conn_submit_request(p->h, sid, p->nv, nfields,
                                     with_body && p->set.body_len ? &body_reader : NULL, sud);
    if (rv != 0) {
        cb_fail(c, HB_E_H3, "HTTP/3 request", rv);
        return quic_error(c, NGTCP2_ERR_CALLBACK_FAILURE, "submit");
    }
    c->nopen++;
    return sid;
}

#else /* HB_NO_H3 */

#include <string.h>

int hb_h3_available(void)
{
    return 0;
}

int hb_h3_tls_new(hb_h3_tls **out, const hb_h3_tls_opts *o, char *err)
{
    (void)o;
    *out = NULL;
    return hb_fail(err, HB_E_UNSUPPORTED, "%s", HB_H3_MISSING);
}

void hb_h3_tls_free(hb_h3_tls *t)
{
    (void)t;
}

int hb_h3_client_init(hb_h3_client *c, const hb_h3_settings *s, char *err)
{
    (void)s;
    memset(c, 0, sizeof *c);
    c->fd = -1;
    return hb_fail(err, HB_E_UNSUPPORTED, "%s", HB_H3_MISSING);
}

void hb_h3_client_free(hb_h3_client *c)
{
    (void)c;
}

int hb_h3_client_connect(hb_h3_client *c, const hb_h3_tls *tls, const struct sockaddr *addr,
                         socklen_t alen, const char *sni, const hb_h3_callbacks *cb, void *ud,
                         uint64_t now)
{
    (void)tls;
    (void)addr;
    (void)alen;
    (void)sni;
    (void)cb;
    (void)ud;
    (void)now;
    return hb_fail(c->err, HB_E_UNSUPPORTED, "%s", HB_H3_MISSING);
}

void hb_h3_client_close(hb_h3_client *c)
{
    (void)c;
}

int hb_h3_client_read(hb_h3_client *c, uint64_t now)
{
    (void)c;
    (void)now;
    return HB_E_UNSUPPORTED;
}

int hb_h3_client_write(hb_h3_client *c, uint64_t now)
{
    (void)c;
    (void)now;
    return HB_E_UNSUPPORTED;
}

int hb_h3_client_writable(hb_h3_client *c, uint64_t now)
{
    (void)c;
    (void)now;
    return HB_E_UNSUPPORTED;
}

int hb_h3_client_expiry(hb_h3_client *c, uint64_t now)
{
    (void)c;
    (void)now;
    return HB_E_UNSUPPORTED;
}

uint64_t hb_h3_client_next_expiry(const hb_h3_client *c)
{
    (void)c;
    return UINT64_MAX;
}

void hb_h3_client_describe(const hb_h3_client *c, char *buf, size_t len)
{
    (void)c;
    if (len) buf[0] = 0;
}

uint32_t hb_h3_client_room(const hb_h3_client *c)
{
    (void)c;
    return 0;
}

int64_t hb_h3_client_submit(hb_h3_client *c, const hb_header *fields, size_t nfields, int with_body,
                            void *sud)
{
    (void)c;
    (void)fields;
    (void)nfields;
    (void)with_body;
    (void)sud;
    return HB_E_UNSUPPORTED;
}

#endif
