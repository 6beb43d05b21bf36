/* hb_h3_server.c - the HTTP/3 endpoint on ngtcp2 + GnuTLS (see hb_h3_server.h).
 *
 * ngtcp2 does QUIC (packets, loss recovery, flow control), GnuTLS the TLS 1.3
 * handshake through ngtcp2_crypto_gnutls, our h3codec/ the HTTP/3 framing and
 * QPACK. This file is the endpoint: it routes datagrams to connections by
 * connection ID, keeps the send list and answers version negotiation;
 * hb_h3_server_conn.c is one QUIC connection, hb_h3_server_h3.c its HTTP/3
 * streams, hb_h3_server_http.c the routes. */
#include "h3server/hb_h3_server_int.h"

#include <malloc.h>
#include <pthread.h>

/* Without the QUIC libraries (HB_NO_H3) hb_h3_server_none.c stands in for this file. */
#ifndef HB_NO_H3

static h3conn TOMB_CONN;
#define TOMB (&TOMB_CONN)

/* The table's hash of a connection ID: 8 bytes at a time (the last 8 overlapping),
 * seeded per endpoint (an Initial's DCID is the client's choice). */
static size_t cid_hash(const hb_h3_server *s, const uint8_t *p, size_t n)
{
    uint64_t h = s->cid_seed ^ ((uint64_t)n * 0x9e3779b97f4a7c15ull), w = 0;
    if (n < 8) {
        for (size_t i = 0; i < n; i++)
            w |= (uint64_t)p[i] << (8 * i);
        h = (h ^ w) * 0xff51afd7ed558ccdull;
    } else {
        for (size_t i = 0; i + 8 <= n; i += 8) {
            memcpy(&w, p + i, 8);
            h = (h ^ w) * 0xff51afd7ed558ccdull;
            h ^= h >> 32;
        }
        if (n % 8) {
            memcpy(&w, p + n - 8, 8);
            h = (h ^ w) * 0xc4ceb9fe1a85ec53ull;
        }
    }
    return (size_t)(h ^ (h >> 29));
}

static cident *cid_slot(hb_h3_server *s, const uint8_t *p, size_t n, int for_insert)
{
    size_t mask = s->tcap - 1;
    cident *tomb = NULL;
    for (size_t i = cid_hash(s, p, n) & mask;; i = (i + 1) & mask) {
        cident *e = &s->tab[i];
        if (!e->c) return for_insert && tomb ? tomb : e;
        if (e->c == TOMB) {
            if (!tomb) tomb = e;
        } else if (e->len == n && memcmp(e->id, p, n) == 0) {
            return e;
        }
    }
}

static h3conn *cid_find(hb_h3_server *s, const uint8_t *p, size_t n)
{
    if (n > NGTCP2_MAX_CIDLEN) return NULL;
    cident *e = cid_slot(s, p, n, 0);
    return e->c && e->c != TOMB ? e->c : NULL;
}

/* Rebuild the table at ncap slots without its tombstones: at the same size when
 * tombstones filled it (connection churn), twice the size only when live entries
 * do, so the table follows the live count, not the history. */
static int cid_rehash(hb_h3_server *s, size_t ncap)
{
    cident *old = s->tab, *t = calloc(ncap, sizeof *t);
    if (!t) return -1;
    size_t ocap = s->tcap;
    s->tab = t;
    s->tcap = ncap;
    s->ttomb = 0;
    for (size_t i = 0; i < ocap; i++) {
        if (!old[i].c || old[i].c == TOMB) continue;
        *cid_slot(s, old[i].id, old[i].len, 1) = old[i];
    }
    free(old);
    ADD(s->st->cid_slots, ncap - ocap);
    return 0;
}

/* c remembers its IDs so freeing it deletes them one by one */
static void conn_cid_note(h3conn *c, const uint8_t *p, size_t n)
{
    for (unsigned i = 0; i < c->ncids && i < CONN_CIDS; i++)
        if (c->cids[i].len == n && memcmp(c->cids[i].id, p, n) == 0) return;
    if (c->ncids >= CONN_CIDS) {
        c->ncids = CONN_CIDS + 1;
        return;
    }
    c->cids[c->ncids].len = (uint8_t)n;
    memcpy(c->cids[c->ncids].id, p, n);
    c->ncids++;
}

static void conn_cid_unnote(h3conn *c, const uint8_t *p, size_t n)
{
    unsigned k = c->ncids < CONN_CIDS ? c->ncids : CONN_CIDS;
    for (unsigned i = 0; i < k; i++)
        if (c->cids[i].len == n && memcmp(c->cids[i].id, p, n) == 0) {
            c->cids[i] = c->cids[k - 1];
            if (c->ncids <= CONN_CIDS) c->ncids--;
            return;
        }
}

int hb__h3_cid_add(hb_h3_server *s, const uint8_t *p, size_t n, h3conn *c)
{
    if (n > NGTCP2_MAX_CIDLEN) return -1;
    /* at most 3/4 full, tombstones included; grow only past half full of live entries */
    if ((s->tlive + s->ttomb + 1) * 4 > s->tcap * 3 &&
        cid_rehash(s, (s->tlive + 1) * 2 > s->tcap ? s->tcap * 2 : s->tcap) < 0)
        return -1;
    cident *e = cid_slot(s, p, n, 1);
    if (e->c && e->c != TOMB) {
        if (e->c != c) conn_cid_unnote(e->c, p, n);
        e->c = c; /* the same ID again: it now names c */
        conn_cid_note(c, p, n);
        return 0;
    }
    if (e->c == TOMB) s->ttomb--;
    s->tlive++;
    e->c = c;
    e->len = (uint8_t)n;
    memcpy(e->id, p, n);
    conn_cid_note(c, p, n);
    return 0;
}

void hb__h3_cid_del(hb_h3_server *s, const uint8_t *p, size_t n, h3conn *c)
{
    if (n > NGTCP2_MAX_CIDLEN) return;
    cident *e = cid_slot(s, p, n, 0);
    if (e->c != c) return;
    e->c = TOMB;
    s->tlive--;
    s->ttomb++;
    conn_cid_unnote(c, p, n);
}

/* ---- send list ---- */

void hb__h3_pend(h3conn *c)
{
    hb_h3_server *s = c->s;
    c->dirty = 1;
    if (c->pending) return;
    c->pending = 1;
    c->pnext = NULL;
    c->pprev = s->ptail;
    if (s->ptail)
        s->ptail->pnext = c;
    else
        s->phead = c;
    s->ptail = c;
}

void hb__h3_unpend(h3conn *c)
{
    hb_h3_server *s = c->s;
    if (!c->pending) return;
    c->pending = 0;
    if (c->pprev)
        c->pprev->pnext = c->pnext;
    else
        s->phead = c->pnext;
    if (c->pnext)
        c->pnext->pprev = c->pprev;
    else
        s->ptail = c->pprev;
    c->pnext = c->pprev = NULL;
}

void hb__h3_cid_forget(hb_h3_server *s, h3conn *c)
{
    if (c->ncids <= CONN_CIDS) {
        while (c->ncids) {
            unsigned i = c->ncids - 1;
            uint8_t id[NGTCP2_MAX_CIDLEN], len = c->cids[i].len;
            memcpy(id, c->cids[i].id, len);
            hb__h3_cid_del(s, id, len, c);
            if (c->ncids > i) c->ncids = (uint8_t)i; /* not in the table: forget it anyway */
        }
        return;
    }
    for (size_t i = 0; i < s->tcap; i++) /* more IDs than noted: the rare full scan */
        if (s->tab[i].c == c) {
            s->tab[i].c = TOMB;
            s->tlive--;
            s->ttomb++;
        }
    c->ncids = 0;
}

/* ---- endpoint ---- */

struct hb_h3_replay {
    pthread_mutex_t mu;
    unsigned next;
    uint64_t seen[ANTI_REPLAY_SLOTS]; /* hashes of 0-RTT ClientHellos inside the window */
};

hb_h3_replay *hb_h3_replay_new(void)
{
    hb_h3_replay *r = calloc(1, sizeof *r);
    if (r && pthread_mutex_init(&r->mu, NULL) != 0) {
        free(r);
        return NULL;
    }
    return r;
}

void hb_h3_replay_free(hb_h3_replay *r)
{
    if (!r) return;
    pthread_mutex_destroy(&r->mu);
    free(r);
}

/* GnuTLS checks the ticket's age against the window itself; this refuses early data
 * to a ClientHello seen before (the same binder again) while it is in the window,
 * by any endpoint sharing the store. */
static int anti_replay_add(void *ptr, time_t exp, const gnutls_datum_t *key,
                           const gnutls_datum_t *data)
{
    (void)exp;
    (void)data;
    hb_h3_server *s = ptr;
    hb_h3_replay *r = s->replay;
    /* GnuTLS prefixes the ClientHello's identity with its own window's start time
     * (12 bytes), which differs between endpoints: the identity alone is compared */
    unsigned from = key->size > 12 ? 12 : 0;
    uint64_t h = 1469598103934665603ull;
    for (unsigned i = from; i < key->size; i++)
        h = (h ^ key->data[i]) * 1099511628211ull;
    h |= 1; /* 0 marks an empty slot */
    int rc = 0;
    pthread_mutex_lock(&r->mu);
    for (unsigned i = 0; i < ANTI_REPLAY_SLOTS; i++)
        if (r->seen[i] == h) rc = GNUTLS_E_DB_ENTRY_EXISTS;
    if (rc == 0) {
        r->seen[r->next] = h;
        r->next = (r->next + 1) % ANTI_REPLAY_SLOTS;
    }
    pthread_mutex_unlock(&r->mu);
    if (rc) ADD(s->st->early_replays, 1);
    return rc;
}

int hb_h3_server_available(void)
{
    return 1;
}

void hb_h3_server_config_init(hb_h3_server_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->max_streams = 100;
    cfg->idle_timeout_ms = 30000;
    cfg->request_timeout_ms = 10000;
    cfg->max_header_list = 16384;
    cfg->retry_after = 64;
    cfg->max_half_open = 1024;
}

int hb_h3_server_new(hb_h3_server **out, const hb_h3_server_config *cfg, char *err)
{
    *out = NULL;
    if (!cfg->stats || !cfg->now || !cfg->cert_pem || !cfg->key_pem)
        return hb_fail(err, HB_E_INVALID,
                       "HTTP/3 server: stats, clock, certificate and key needed");
    if (cfg->max_streams < 1 || cfg->max_streams > 100000)
        return hb_fail(err, HB_E_INVALID, "HTTP/3 max_streams must be 1..100000");
    if (cfg->idle_timeout_ms < 1 || cfg->request_timeout_ms < 1)
        return hb_fail(err, HB_E_INVALID, "HTTP/3 timeouts must be > 0");
    hb_h3_server *s = calloc(1, sizeof *s);
    if (!s) return hb_fail(err, HB_E_NOMEM, "out of memory");
    s->cfg = *cfg;
    s->cfg.cert_pem = s->cfg.key_pem = NULL; /* parsed here, not kept */
    s->cfg.ticket_key = NULL;
    if (cfg->ticket_key) {
        memcpy(s->ticket_key, cfg->ticket_key, sizeof s->ticket_key);
        s->ticket.data = s->ticket_key;
        s->ticket.size = sizeof s->ticket_key;
    }
    s->st = cfg->stats;
    s->tcap = 64;
    s->tab = calloc(s->tcap, sizeof *s->tab);
    int rc;
    if (!s->tab) {
        rc = hb_fail(err, HB_E_NOMEM, "out of memory");
        goto fail;
    }
    ADD(s->st->cid_slots, s->tcap);
    s->mpool = calloc(1, sizeof *s->mpool);
    if (!s->mpool) {
        rc = hb_fail(err, HB_E_NOMEM, "out of memory");
        goto fail;
    }
    if (hb__h3_memstat_init(s->mpool) != 0) {
        rc = hb_fail(err, HB_E_NOMEM, "HB_H3_MEMSTAT: cannot open the file");
        goto fail;
    }
    s->qmem = (ngtcp2_mem){s->mpool, hb__h3_mem_malloc, hb__h3_mem_free, hb__h3_mem_calloc,
                           hb__h3_mem_realloc};
    s->qscratch = malloc(hb_qpack_scratch_need(s->cfg.max_header_list));
    if (!s->qscratch) {
        rc = hb_fail(err, HB_E_NOMEM, "out of memory");
        goto fail;
    }
    hb_qpack_head_cache_init(&s->heads, "httpbench", 9);
    s->replay = cfg->replay;
    if (cfg->early_data && cfg->ticket_key && !s->replay) {
        s->replay = s->own_replay = hb_h3_replay_new();
        if (!s->replay) {
            rc = hb_fail(err, HB_E_NOMEM, "out of memory");
            goto fail;
        }
    }
    if (cfg->early_data && cfg->ticket_key) {
        if (gnutls_anti_replay_init(&s->ar) != 0) {
            s->ar = NULL;
            rc = hb_fail(err, HB_E_NOMEM, "gnutls_anti_replay_init failed");
            goto fail;
        }
        gnutls_anti_replay_set_add_function(s->ar, anti_replay_add);
        gnutls_anti_replay_set_ptr(s->ar, s);
    }
    if (gnutls_rnd(GNUTLS_RND_RANDOM, s->reset_secret, sizeof s->reset_secret) != 0 ||
        gnutls_rnd(GNUTLS_RND_RANDOM, s->token_secret, sizeof s->token_secret) != 0 ||
        gnutls_rnd(GNUTLS_RND_RANDOM, &s->cid_seed, sizeof s->cid_seed) != 0) {
        rc = hb_fail(err, HB_E_TLS, "gnutls_rnd failed");
        goto fail;
    }
    int g = gnutls_certificate_allocate_credentials(&s->cred);
    if (g != 0) {
        s->cred = NULL;
        rc = hb_fail(err, HB_E_NOMEM, "gnutls_certificate_allocate_credentials: %s",
                     gnutls_strerror(g));
        goto fail;
    }
    gnutls_datum_t cd = {(unsigned char *)(uintptr_t)cfg->cert_pem, (unsigned)cfg->cert_len};
    gnutls_datum_t kd = {(unsigned char *)(uintptr_t)cfg->key_pem, (unsigned)cfg->key_len};
    g = gnutls_certificate_set_x509_key_mem2(s->cred, &cd, &kd, GNUTLS_X509_FMT_PEM, NULL, 0);
    if (g < 0) {
        rc = hb_fail(err, HB_E_TLS, "HTTP/3 server certificate: %s", gnutls_strerror(g));
        goto fail;
    }
    g = gnutls_priority_init2(&s->prio,
                              "%DISABLE_TLS13_COMPAT_MODE:NORMAL:-VERS-ALL:+VERS-TLS1.3:"
                              "-CIPHER-ALL:+AES-128-GCM:+AES-256-GCM:+CHACHA20-POLY1305:"
                              "+AES-128-CCM:-GROUP-ALL:+GROUP-X25519:+GROUP-SECP256R1:"
                              "+GROUP-SECP384R1:+GROUP-SECP521R1",
                              NULL, 0);
    if (g != 0) {
        s->prio = NULL;
        rc = hb_fail(err, HB_E_TLS, "gnutls_priority_init2: %s", gnutls_strerror(g));
        goto fail;
    }
    *out = s;
    return 0;
fail:
    hb_h3_server_free(s);
    return rc;
}

void hb_h3_server_free(hb_h3_server *s)
{
    if (!s) return;
    while (s->conns)
        hb__h3_conn_free(s->conns, 0);
    hb__h3_streams_trim(s);
    if (s->prio) gnutls_priority_deinit(s->prio);
    if (s->ar) gnutls_anti_replay_deinit(s->ar);
    if (s->cred) gnutls_certificate_free_credentials(s->cred);
    hb_h3_replay_free(s->own_replay);
    if (s->mpool) {
        hb__h3_mem_trim(s->mpool);
        hb__h3_memstat_free(s->mpool);
    }
    free(s->mpool);
    free(s->qscratch);
    if (s->tab) ADD(s->st->cid_slots, (uint64_t)0 - s->tcap);
    free(s->tab);
    free(s);
}

/* A slot for a stateless packet to peer, or NULL when the ring is full (the
 * packet is then not made: the peer retransmits). */
static uint8_t *stateless_slot(hb_h3_server *s, const struct sockaddr *peer, socklen_t plen)
{
    if (s->sl_n == STATELESS_SLOTS) return NULL;
    unsigned i = (s->sl_head + s->sl_n) % STATELESS_SLOTS;
    memcpy(&s->sl[i].peer, peer, plen);
    s->sl[i].plen = plen;
    s->sl[i].len = 0;
    return s->sl[i].buf;
}

static void stateless_queue(hb_h3_server *s, size_t len)
{
    s->sl[(s->sl_head + s->sl_n) % STATELESS_SLOTS].len = len;
    s->sl_n++;
}

static void version_negotiation(hb_h3_server *s, const ngtcp2_version_cid *vc,
                                const struct sockaddr *peer, socklen_t plen)
{
    ADD(s->st->version_negotiations, 1);
    uint8_t *buf = stateless_slot(s, peer, plen);
    if (!buf) return;
    uint32_t sv[] = {NGTCP2_PROTO_VER_V1};
    uint8_t r = 0;
    if (gnutls_rnd(GNUTLS_RND_NONCE, &r, 1) != 0) r = 0x5a;
    ngtcp2_ssize n = ngtcp2_pkt_write_version_negotiation(
        buf, STATELESS_LEN, r, vc->scid, vc->scidlen, vc->dcid, vc->dcidlen, sv, 1);
    if (n > 0) stateless_queue(s, (size_t)n);
}

/* A Retry for the client Initial hd: its token carries the client's address and
 * first DCID, so the connection is made only when the Initial comes back with it. */
static void send_retry(hb_h3_server *s, const ngtcp2_pkt_hd *hd, const struct sockaddr *peer,
                       socklen_t plen)
{
    uint8_t *buf = stateless_slot(s, peer, plen);
    if (!buf) {
        ADD(s->st->dropped, 1);
        return;
    }
    ngtcp2_cid scid;
    scid.datalen = SCIDLEN;
    uint8_t token[NGTCP2_CRYPTO_MAX_RETRY_TOKENLEN];
    if (gnutls_rnd(GNUTLS_RND_NONCE, scid.data, SCIDLEN) != 0) {
        ADD(s->st->dropped, 1);
        return;
    }
    ngtcp2_ssize tl = ngtcp2_crypto_generate_retry_token(
        token, s->token_secret, sizeof s->token_secret, hd->version, (const ngtcp2_sockaddr *)peer,
        (ngtcp2_socklen)plen, &scid, &hd->dcid, hb__h3_now(s));
    ngtcp2_ssize n = tl < 0 ? -1
                            : ngtcp2_crypto_write_retry(buf, STATELESS_LEN, hd->version, &hd->scid,
                                                        &scid, &hd->dcid, token, (size_t)tl);
    if (n <= 0) {
        ADD(s->st->dropped, 1);
        return;
    }
    stateless_queue(s, (size_t)n);
    ADD(s->st->retries, 1);
}

/* A datagram for no connection: a client Initial opens one, after a Retry when
 * too many are half-open; anything else is dropped. */
static void accept_initial(hb_h3_server *s, const struct sockaddr *local, socklen_t local_len,
                           const struct sockaddr *peer, socklen_t peer_len, const uint8_t *p,
                           size_t n)
{
    ngtcp2_pkt_hd hd;
    if (ngtcp2_accept(&hd, p, n) != 0) {
        ADD(s->st->dropped, 1);
        return;
    }
    ngtcp2_cid odcid;
    int valid = 0;
    if (hd.token.len && hd.token.base[0] == NGTCP2_CRYPTO_TOKEN_MAGIC_RETRY) {
        if (ngtcp2_crypto_verify_retry_token(
                &odcid, hd.token.base, hd.token.len, s->token_secret, sizeof s->token_secret,
                hd.version, (const ngtcp2_sockaddr *)peer, (ngtcp2_socklen)peer_len, &hd.dcid,
                RETRY_TOKEN_NS, hb__h3_now(s)) != 0) {
            ADD(s->st->dropped, 1); /* forged, expired or from another address */
            return;
        }
        valid = 1;
    }
    if (s->half_open >= s->cfg.max_half_open ||
        (s->cfg.max_connections && (uint32_t)s->nconns >= s->cfg.max_connections)) {
        ADD(s->st->refused, 1);
        ADD(s->st->dropped, 1);
        return;
    }
    if (!valid && s->half_open >= s->cfg.retry_after) {
        send_retry(s, &hd, peer, peer_len);
        return;
    }
    h3conn *c = hb__h3_conn_new(s, &hd, valid ? &odcid : NULL, local, local_len, peer, peer_len);
    if (!c) {
        ADD(s->st->dropped, 1);
        return;
    }
    if (!hb__h3_conn_recv(c, peer, peer_len, p, n, 1)) ADD(s->st->dropped, 1);
}

void hb_h3_server_recv(hb_h3_server *s, const struct sockaddr *local, socklen_t local_len,
                       const struct sockaddr *peer, socklen_t peer_len, const uint8_t *p, size_t n)
{
    ADD(s->st->packets_in, 1);
    ADD(s->st->bytes_in, n);
    /* an empty datagram is legal UDP, and an assertion inside ngtcp2's decoder */
    if (n == 0 || local_len > sizeof(struct sockaddr_storage) ||
        peer_len > sizeof(struct sockaddr_storage)) {
        ADD(s->st->dropped, 1);
        return;
    }
    ngtcp2_version_cid vc;
    int rv = ngtcp2_pkt_decode_version_cid(&vc, p, n, SCIDLEN);
    if (rv == NGTCP2_ERR_VERSION_NEGOTIATION) {
        version_negotiation(s, &vc, peer, peer_len);
        return;
    }
    if (rv != 0) {
        ADD(s->st->dropped, 1);
        return;
    }
    h3conn *c = cid_find(s, vc.dcid, vc.dcidlen);
    if (!c) {
        accept_initial(s, local, local_len, peer, peer_len, p, n);
        return;
    }
    (void)hb__h3_conn_recv(c, peer, peer_len, p, n, 0);
}

static void stop_close(h3conn *c);

size_t hb_h3_server_send(hb_h3_server *s, uint8_t *buf, size_t cap, struct sockaddr_storage *peer,
                         socklen_t *peer_len)
{
    if (s->sl_n) {
        unsigned i = s->sl_head;
        size_t n = s->sl[i].len;
        memcpy(buf, s->sl[i].buf, n);
        memcpy(peer, &s->sl[i].peer, s->sl[i].plen);
        *peer_len = s->sl[i].plen;
        s->sl_head = (i + 1) % STATELESS_SLOTS;
        s->sl_n--;
        ADD(s->st->packets_out, 1);
        ADD(s->st->bytes_out, n);
        return n;
    }
    while (s->phead) {
        h3conn *c = s->phead;
        ngtcp2_ssize w = 0;
        if (!c->close_queued && c->state == C_OPEN) {
            if (c->stopping == 2) { /* the GOAWAY went in the last datagram (the control
                                     * stream is written first): now the CONNECTION_CLOSE */
                stop_close(c);
            } else {
                w = hb__h3_conn_write(c, buf, cap);
                if (c->stopping && w == 0) stop_close(c);
                if (c->stopping && w > 0) c->stopping = 2;
            }
        }
        const struct sockaddr_storage *to = &c->peer;
        socklen_t tolen = c->plen;
        if (c->close_queued) { /* queued now or before */
            c->close_queued = 0;
            memcpy(buf, c->closebuf, c->closelen);
            w = (ngtcp2_ssize)c->closelen;
            to = &c->cpeer;
            tolen = c->cplen;
            hb__h3_unpend(c);
        }
        if (w <= 0) {
            hb__h3_unpend(c);
            s->burst = 0;
            continue;
        }
        c->tx_bytes += (uint64_t)w;
        memcpy(peer, to, tolen);
        *peer_len = tolen;
        ADD(s->st->packets_out, 1);
        ADD(s->st->bytes_out, (uint64_t)w);
        /* a download yields to the other connections every GSO-batch worth of datagrams */
        if (++s->burst >= 32 && c->pnext) {
            hb__h3_unpend(c);
            hb__h3_pend(c);
        }
        if (s->burst >= 32) s->burst = 0;
        return (size_t)w;
    }
    return 0;
}

uint64_t hb_h3_server_deadline(hb_h3_server *s)
{
    uint64_t d = UINT64_MAX;
    for (h3conn *c = s->conns; c; c = c->next) {
        uint64_t t = hb__h3_conn_dl(c);
        if (t < d) d = t;
    }
    return d;
}

void hb_h3_server_timer(hb_h3_server *s)
{
    uint64_t now = hb__h3_now(s);
    h3conn *next;
    for (h3conn *c = s->conns; c; c = next) {
        next = c->next;
        if (hb__h3_conn_dl(c) <= now) hb__h3_conn_timer(c);
    }
    /* many connections gone (a flood's half-open ones timing out, a churn): the
     * memory they held goes back to the system, not only to malloc's free lists */
    if ((s->freed >= 64 && (uint32_t)s->nconns * 4 < s->freed && now >= s->trimmed + NS_PER_S) ||
        (s->freed && s->nconns == 0)) { /* at most once a second, and once when empty */
        s->freed = 0;
        s->trimmed = now;
        hb__h3_mem_trim(s->mpool); /* the free blocks; those in use come back later */
        hb__h3_streams_trim(s);
        malloc_trim(0);
    }
}

static void stop_close(h3conn *c)
{
    ngtcp2_connection_close_error e;
    ngtcp2_connection_close_error_set_application_error(&e, HB_H3_NO_ERROR, NULL, 0);
    hb__h3_conn_close(c, &e);
}

void hb_h3_server_shutdown(hb_h3_server *s)
{
    h3conn *next;
    for (h3conn *c = s->conns; c; c = next) {
        next = c->next;
        if (c->state != C_OPEN) continue;
        /* HTTP/3 says which requests were not processed (GOAWAY) before the connection
         * closes; hb_h3_server_send closes it once the GOAWAY is written */
        if (hb__h3_goaway(c) == 0) {
            c->stopping = 1;
            hb__h3_pend(c);
        } else {
            stop_close(c);
        }
    }
}

int hb_h3_server_conns(const hb_h3_server *s)
{
    return s->nconns;
}

#else
/* ISO C wants a translation unit to declare something. */
typedef int hb__h3_server_unused;
#endif
