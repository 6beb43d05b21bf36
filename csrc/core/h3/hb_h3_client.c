/* hb_h3_client.c - the HTTP/3 client connection of hb_h3_client.h on
 * ngtcp2 0.12 (QUIC, TLS by GnuTLS through ngtcp2_crypto_gnutls) and our
 * own HTTP/3 framing and QPACK (h3codec/hb_h3_frame, h3codec/hb_qpack; the streams in
 * hb_h3_client_cb.c): TLS trust, the client's lifecycle,
 * connect and close. ngtcp2 writes one datagram per call; full-size ones
 * are gathered and go out with one sendmsg (UDP GSO, hb_h3_client_io.c). */
#include "h3/hb_h3_client_int.h"

#ifndef HB_NO_H3

int hb_h3_available(void)
{
    return 1;
}

/* ---- TLS trust ---- */

/* TLS 1.3 only (QUIC's), no middlebox compatibility records (QUIC has none). X25519
 * first: with GNUTLS_KEY_SHARE_TOP the ClientHello carries its key share alone (the
 * cheapest to make and to use); a server without it answers with a HelloRetryRequest
 * for one of the others. */
#define H3_PRIORITY                                                                                \
    "NORMAL:-VERS-ALL:+VERS-TLS1.3:%DISABLE_TLS13_COMPAT_MODE:-GROUP-ALL:+GROUP-X25519:"           \
    "+GROUP-SECP256R1:+GROUP-SECP384R1:+GROUP-SECP521R1:-CIPHER-ALL:+AES-128-GCM:+AES-256-GCM:"    \
    "+CHACHA20-POLY1305:+AES-128-CCM"

/* file_pem: o->ca_file's bytes when the caller read them already (NULL: read it here) */
static int tls_make(hb_h3_tls **out, const hb_h3_tls_opts *o, const char *file_pem, size_t file_len,
                    char *err)
{
    *out = NULL;
    hb_h3_tls *t = calloc(1, sizeof *t);
    if (!t) return hb_fail(err, HB_E_NOMEM, "out of memory");
    t->insecure = o->insecure;
    atomic_init(&t->refs, 1);
    int rv = gnutls_certificate_allocate_credentials(&t->cred);
    if (rv < 0) {
        free(t);
        return hb_fail(err, HB_E_NOMEM, "gnutls credentials: %s", gnutls_strerror(rv));
    }
    rv = gnutls_priority_init2(&t->prio, H3_PRIORITY, NULL, 0);
    if (rv < 0) {
        t->prio = NULL;
        hb_h3_tls_free(t);
        return hb_fail(err, HB_E_TLS, "gnutls priority: %s", gnutls_strerror(rv));
    }
    if (!o->insecure) {
        if (o->ca_file) {
            gnutls_datum_t fd = {(unsigned char *)(uintptr_t)file_pem, (unsigned)file_len};
            rv = file_pem ? gnutls_certificate_set_x509_trust_mem(t->cred, &fd, GNUTLS_X509_FMT_PEM)
                          : gnutls_certificate_set_x509_trust_file(t->cred, o->ca_file,
                                                                   GNUTLS_X509_FMT_PEM);
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

static void tls_destroy(hb_h3_tls *t)
{
    gnutls_certificate_free_credentials(t->cred);
    if (t->prio) gnutls_priority_deinit(t->prio);
    free(t);
}

void hb_h3_tls_free(hb_h3_tls *t)
{
    if (t && atomic_fetch_sub_explicit(&t->refs, 1, memory_order_acq_rel) == 1) tls_destroy(t);
}

/* The process's last verifying trust made from a CA file or the system's CAs: a
 * Client made after it with the same file (the same path holding the same bytes)
 * shares it instead of parsing the PEM again (0.22 M instructions for the test CA;
 * the system's bundle far more). Credentials and priority are read-only once made,
 * so sessions of any thread share them. One entry; PEM text (ca_pem) is not cached,
 * and a change of the system's bundle is seen by the next process only. */
#define CACHE_PEM_MAX (1u << 20)
static struct {
    pthread_mutex_t mu;
    hb_h3_tls *t; /* holds one reference; NULL: empty */
    int system;
    char path[1024];
    char *pem; /* the CA file's bytes when made (malloc) */
    size_t len;
} trust_cache = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* The CA file's bytes (malloc, *len) when o's trust may come from the cache; NULL
 * with *ok 1 for the system's CAs; *ok 0 when it may not (insecure, PEM text, a
 * file unreadable or over CACHE_PEM_MAX: made as ever). */
static char *cache_key(const hb_h3_tls_opts *o, size_t *len, int *ok)
{
    *ok = 0;
    *len = 0;
    if (o->insecure || o->ca_pem) return NULL;
    if (!o->ca_file) {
        *ok = 1;
        return NULL;
    }
    if (strlen(o->ca_file) >= sizeof trust_cache.path) return NULL;
    FILE *f = fopen(o->ca_file, "rb");
    if (!f) return NULL;
    struct stat st;
    char *buf = NULL;
    size_t n = 0;
    int bad = fstat(fileno(f), &st) != 0 || st.st_size < 0 || st.st_size >= CACHE_PEM_MAX ||
              !(buf = malloc((size_t)st.st_size + 1));
    if (!bad) {
        n = fread(buf, 1, (size_t)st.st_size + 1, f); /* + 1: a file that grew is seen */
        bad = ferror(f) || n > (size_t)st.st_size;
    }
    fclose(f);
    if (bad) {
        free(buf);
        return NULL;
    }
    *len = n;
    *ok = 1;
    return buf;
}

int hb_h3_tls_new(hb_h3_tls **out, const hb_h3_tls_opts *o, char *err)
{
    size_t len;
    int ok;
    char *pem = cache_key(o, &len, &ok);
    if (!ok) return tls_make(out, o, NULL, 0, err);
    pthread_mutex_lock(&trust_cache.mu);
    if (trust_cache.t &&
        (o->ca_file ? !trust_cache.system && strcmp(trust_cache.path, o->ca_file) == 0 &&
                          trust_cache.len == len && memcmp(trust_cache.pem, pem, len) == 0
                    : trust_cache.system)) {
        *out = trust_cache.t;
        atomic_fetch_add_explicit(&trust_cache.t->refs, 1, memory_order_relaxed);
        pthread_mutex_unlock(&trust_cache.mu);
        free(pem);
        return 0;
    }
    pthread_mutex_unlock(&trust_cache.mu);
    int rc = tls_make(out, o, pem, len, err); /* the bytes compared are the bytes trusted */
    if (rc < 0) {
        free(pem);
        return rc;
    }
    pthread_mutex_lock(&trust_cache.mu);
    hb_h3_tls *old = trust_cache.t;
    free(trust_cache.pem);
    trust_cache.t = *out;
    atomic_fetch_add_explicit(&(*out)->refs, 1, memory_order_relaxed);
    trust_cache.system = !o->ca_file;
    trust_cache.pem = pem; /* NULL for the system's */
    trust_cache.len = len;
    snprintf(trust_cache.path, sizeof trust_cache.path, "%s", o->ca_file ? o->ca_file : "");
    pthread_mutex_unlock(&trust_cache.mu);
    hb_h3_tls_free(old); /* the cache's reference to the one it replaced */
    return 0;
}

/* ---- lifecycle ---- */

int hb_h3_client_init(hb_h3_client *c, const hb_h3_settings *s, char *err)
{
    memset(c, 0, sizeof *c);
    c->fd = -1;
    c->p = calloc(1, sizeof *c->p);
    if (!c->p) return hb_fail(err, HB_E_NOMEM, "out of memory");
    c->p->rbuf = malloc((size_t)HB_UDP_RX_BATCH * RX_DGRAM);
    c->p->tx = malloc((size_t)TX_BATCH * PKT_MAX);
    if (!c->p->rbuf || !c->p->tx) {
        hb_h3_client_free(c);
        return hb_fail(err, HB_E_NOMEM, "out of memory");
    }
    hb_udp_rx_init(&c->p->rx, c->p->rbuf, RX_DGRAM, 0);
    c->p->gso_ok = 1;
    c->p->qmem = (ngtcp2_mem){&c->p->pool, hb__h3_pool_malloc, hb__h3_pool_free, hb__h3_pool_calloc,
                              hb__h3_pool_realloc};
    c->p->set = *s;
    if (!c->p->set.handshake_timeout_ns) c->p->set.handshake_timeout_ns = DEF_HS_NS;
    if (!c->p->set.idle_timeout_ns) c->p->set.idle_timeout_ns = DEF_IDLE_NS;
    if (!c->p->set.max_streams) c->p->set.max_streams = 1;
    /* a stream keeps its slot until all it sent is acknowledged: room for as many again */
    c->p->nreqs = c->p->set.max_streams * 2 + 2;
    c->p->reqs = calloc(c->p->nreqs, sizeof *c->p->reqs);
    if (!c->p->reqs) {
        hb_h3_client_free(c);
        return hb_fail(err, HB_E_NOMEM, "out of memory");
    }
    for (int i = 0; i < HB_H3_BODIES; i++)
        c->p->bodies[i].sid = -1;
    return 0;
}

void hb_h3_client_free(hb_h3_client *c)
{
    if (!c->p) return;
    hb_h3_client_close(c);
    gnutls_free(c->p->ticket.data);
    hb__h3_pool_destroy(&c->p->pool);
    free(c->p->rbuf);
    free(c->p->tx);
    free(c->p->reqs);
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
    /* GNUTLS_KEY_SHARE_TOP2: X25519's share and P-256's, for a server that lacks the one
     * and cannot ask for another with a HelloRetryRequest */
    int rv =
        gnutls_init(&p->tls, GNUTLS_CLIENT | GNUTLS_NO_END_OF_EARLY_DATA |
                                 (p->wide_shares ? GNUTLS_KEY_SHARE_TOP2 : GNUTLS_KEY_SHARE_TOP));
    if (rv < 0) return hb__h3_fail(c, HB_E_NOMEM, "gnutls_init: %s", gnutls_strerror(rv));
    rv = gnutls_priority_set(p->tls, tls->prio);
    if (rv < 0)
        return hb__h3_fail(c, HB_E_H3_HANDSHAKE, "gnutls priority: %s", gnutls_strerror(rv));
    if (ngtcp2_crypto_gnutls_configure_client_session(p->tls) != 0)
        return hb__h3_fail(c, HB_E_H3_HANDSHAKE, "%s",
                           "ngtcp2_crypto_gnutls_configure_client_session");
    p->ref.get_conn = hb__h3_get_conn;
    p->ref.user_data = c;
    gnutls_session_set_ptr(p->tls, &p->ref);
    rv = gnutls_credentials_set(p->tls, GNUTLS_CRD_CERTIFICATE, tls->cred);
    if (rv < 0)
        return hb__h3_fail(c, HB_E_H3_HANDSHAKE, "gnutls credentials: %s", gnutls_strerror(rv));
    gnutls_datum_t alpn = {(unsigned char *)"h3", 2};
    rv = gnutls_alpn_set_protocols(p->tls, &alpn, 1, GNUTLS_ALPN_MANDATORY);
    if (rv < 0) return hb__h3_fail(c, HB_E_H3_HANDSHAKE, "ALPN: %s", gnutls_strerror(rv));
    if (sni && *sni && !is_ip_literal(sni)) {
        rv = gnutls_server_name_set(p->tls, GNUTLS_NAME_DNS, sni, strlen(sni));
        if (rv < 0) return hb__h3_fail(c, HB_E_H3_HANDSHAKE, "SNI: %s", gnutls_strerror(rv));
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
    c->over = c->handshake_done = c->resumed = c->goaway = c->cert_rejected = 0;
    c->retry_shares = 0;
    c->goaway_id = 0;
    c->p->goaway_owed = 0;
    c->p->next_sid = 0;
    c->nopen = 0;
    c->hs_start = now;
    c->hs_ns = 0;
    p->cb = cb;
    p->ud = ud;
    p->failed = 0;
    p->close_owed = 0;
    p->pending = 0;
    c->blocked = 0;
    p->txlen = p->ntx = 0;
    p->last_pto = 0;
    p->now = now;
    ngtcp2_connection_close_error_default(&p->last);

    c->fd = socket(addr->sa_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c->fd < 0) return hb__h3_fail(c, -errno, "socket: %s", strerror(errno));
    if (connect(c->fd, addr, alen) != 0)
        return hb__h3_fail(c, -errno, "connect: %s", strerror(errno));
    memcpy(&p->remote, addr, alen);
    p->rlen = alen;
    p->llen = sizeof p->local;
    if (getsockname(c->fd, (struct sockaddr *)&p->local, &p->llen) != 0)
        return hb__h3_fail(c, -errno, "getsockname: %s", strerror(errno));

    int rc = tls_session(c, tls, sni);
    if (rc < 0) return rc;

    ngtcp2_path path = {
        {(struct sockaddr *)&p->local, p->llen}, {(struct sockaddr *)&p->remote, p->rlen}, NULL};
    ngtcp2_cid dcid, scid;
    dcid.datalen = NGTCP2_MIN_INITIAL_DCIDLEN;
    scid.datalen = 8;
    if (gnutls_rnd(GNUTLS_RND_RANDOM, dcid.data, dcid.datalen) != 0 ||
        gnutls_rnd(GNUTLS_RND_RANDOM, scid.data, scid.datalen) != 0)
        return hb__h3_fail(c, HB_E_H3, "%s", "no random bytes for the connection IDs");
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
    int rv = ngtcp2_conn_client_new(&p->q, &dcid, &scid, &path, NGTCP2_PROTO_VER_V1, &hb__h3_q_cbs,
                                    &st, &tp, &p->qmem, c);
    if (rv != 0) return hb__h3_fail(c, HB_E_H3, "ngtcp2_conn_client_new: %s", ngtcp2_strerror(rv));
    ngtcp2_conn_set_tls_native_handle(p->q, p->tls);
    rc = hb_h3_client_write(c, now);
    return rc < 0 ? rc : c->fd;
}

void hb_h3_client_close(hb_h3_client *c)
{
    struct hb__h3 *p = c->p;
    if (!p) return;
    if (p->q && c->fd >= 0 && (!c->over || p->close_owed) &&
        !ngtcp2_conn_is_in_closing_period(p->q) && !ngtcp2_conn_is_in_draining_period(p->q)) {
        /* Tell the server now, so it does not keep the connection until its idle (or
         * handshake) timeout: a half-open one would hold one of its handshake slots. */
        ngtcp2_path_storage ps;
        ngtcp2_path_storage_zero(&ps);
        ngtcp2_pkt_info pi;
        ngtcp2_connection_close_error cc;
        if (c->over)
            cc = p->last;
        else
            ngtcp2_connection_close_error_set_application_error(&cc, HB_H3_NO_ERROR, NULL, 0);
        ngtcp2_ssize n = ngtcp2_conn_write_connection_close(p->q, &ps.path, &pi, p->pkt,
                                                            sizeof p->pkt, &cc, p->now);
        if (n > 0 && send(c->fd, p->pkt, (size_t)n, MSG_DONTWAIT) == n) {
            c->st.dgrams_sent++;
            c->st.bytes_sent += (uint64_t)n;
        }
    }
    p->close_owed = 0;
    if (p->q) ngtcp2_conn_del(p->q);
    if (p->tls) gnutls_deinit(p->tls);
    p->h = 0;
    p->q = NULL;
    p->tls = NULL;
    if (c->fd >= 0) close(c->fd);
    c->fd = -1;
    c->nopen = 0;
    p->pending = 0;
    c->blocked = 0;
    p->txlen = p->ntx = 0;
    for (int i = 0; i < HB_H3_BODIES; i++)
        p->bodies[i].sid = -1;
    p->nbodies = 0;
}

#endif /* HB_NO_H3 */
