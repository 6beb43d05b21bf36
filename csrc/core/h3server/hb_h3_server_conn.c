/* hb_h3_server_conn.c - one QUIC connection of the HTTP/3 server: the ngtcp2
 * callbacks, the GnuTLS session, reading and writing packets, closing and the
 * connection's timers. */
#include "h3server/hb_h3_server_int.h"

#ifndef HB_NO_H3

static const uint8_t ALPN_H3[] = "h3";

static int q_recv_stream_data(ngtcp2_conn *q, uint32_t flags, int64_t id, uint64_t off,
                              const uint8_t *p, size_t n, void *ud, void *sud)
{
    (void)q;
    (void)off;
    h3conn *c = ud;
    if (!c->h) return NGTCP2_ERR_CALLBACK_FAILURE;
    c->rx_early = (flags & NGTCP2_STREAM_DATA_FLAG_EARLY) != 0;
    int rv = hb__h3_stream_recv(c, id, sud, p, n, (flags & NGTCP2_STREAM_DATA_FLAG_FIN) != 0);
    c->rx_early = 0;
    return rv;
}

static int q_acked(ngtcp2_conn *q, int64_t id, uint64_t off, uint64_t n, void *ud, void *sud)
{
    (void)q;
    if (sud && ngtcp2_is_bidi_stream(id)) hb__h3_acked(ud, sud, off + n);
    return 0;
}

static int q_stream_close(ngtcp2_conn *q, uint32_t flags, int64_t id, uint64_t code, void *ud,
                          void *sud)
{
    (void)q;
    (void)flags;
    (void)code;
    return hb__h3_closed(ud, id, sud);
}

static int q_stream_reset(ngtcp2_conn *q, int64_t id, uint64_t size, uint64_t code, void *ud,
                          void *sud)
{
    (void)q;
    (void)size;
    (void)code;
    h3conn *c = ud;
    if (c->h) hb__h3_peer_reset(c, id, sud);
    return 0;
}

static int q_stop_sending(ngtcp2_conn *q, int64_t id, uint64_t code, void *ud, void *sud)
{
    (void)q;
    (void)code;
    h3conn *c = ud;
    if (c->h) hb__h3_peer_stop(c, id, sud);
    return 0;
}

static int q_extend_max_stream_data(ngtcp2_conn *q, int64_t id, uint64_t max, void *ud, void *sud)
{
    (void)q;
    (void)max;
    h3conn *c = ud;
    if (c->h) hb__h3_unblock(c, id, sud);
    return 0;
}

static void q_rand(uint8_t *dest, size_t n, const ngtcp2_rand_ctx *ctx)
{
    (void)ctx;
    if (gnutls_rnd(GNUTLS_RND_RANDOM, dest, n) != 0) memset(dest, 0, n);
}

static int q_new_cid(ngtcp2_conn *q, ngtcp2_cid *cid, uint8_t *token, size_t len, void *ud)
{
    (void)q;
    h3conn *c = ud;
    if (gnutls_rnd(GNUTLS_RND_RANDOM, cid->data, len) != 0) return NGTCP2_ERR_CALLBACK_FAILURE;
    cid->datalen = len;
    if (ngtcp2_crypto_generate_stateless_reset_token(token, c->s->reset_secret,
                                                     sizeof c->s->reset_secret, cid) != 0)
        return NGTCP2_ERR_CALLBACK_FAILURE;
    return hb__h3_cid_add(c->s, cid->data, len, c) == 0 ? 0 : NGTCP2_ERR_CALLBACK_FAILURE;
}

static int q_remove_cid(ngtcp2_conn *q, const ngtcp2_cid *cid, void *ud)
{
    (void)q;
    h3conn *c = ud;
    hb__h3_cid_del(c->s, cid->data, cid->datalen, c);
    return 0;
}

/* c's half-open time is over (its handshake completed, its client closed it, or it is
 * freed): counted out once, if it was counted in (accepted). */
static void half_open_end(h3conn *c)
{
    if (c->half_done) return;
    c->half_done = 1;
    if (!c->accepted) return;
    c->s->half_open--;
    ADD(c->s->st->half_open, (uint64_t)-1);
}

static int q_handshake_completed(ngtcp2_conn *q, void *ud)
{
    (void)q;
    h3conn *c = ud;
    c->hs_done = 1;
    c->validated = 1;
    half_open_end(c);
    ADD(c->s->st->handshakes, 1);
    if (gnutls_session_is_resumed(c->tls)) ADD(c->s->st->resumed, 1);
    /* one ticket for the next connection (not sent on its own by GnuTLS under QUIC) */
    if (c->s->ticket.size && gnutls_session_ticket_send(c->tls, 1, 0) != 0)
        return NGTCP2_ERR_CALLBACK_FAILURE;
    return 0;
}

static int q_recv_tx_key(ngtcp2_conn *q, ngtcp2_crypto_level level, void *ud)
{
    (void)q;
    if (level != NGTCP2_CRYPTO_LEVEL_APPLICATION) return 0;
    return hb__h3_setup_h3(ud) == 0 ? 0 : NGTCP2_ERR_CALLBACK_FAILURE;
}

/* CRYPTO data: the TLS session reads it until the handshake is done; after that
 * the session is gone (tls_release) and a client has nothing to say at that level
 * (the server alone sends post-handshake messages), so what comes is ignored */
static int q_recv_crypto_data(ngtcp2_conn *q, ngtcp2_crypto_level level, uint64_t off,
                              const uint8_t *p, size_t n, void *ud)
{
    h3conn *c = ud;
    if (!c->tls) return 0;
    return ngtcp2_crypto_recv_crypto_data_cb(q, level, off, p, n, ud);
}

static int q_hp_mask(uint8_t *dest, const ngtcp2_crypto_cipher *hp,
                     const ngtcp2_crypto_cipher_ctx *ctx, const uint8_t *sample)
{
    return ngtcp2_crypto_hp_mask(dest, hp, ctx, sample);
}

static int q_update_key(ngtcp2_conn *q, uint8_t *rx_secret, uint8_t *tx_secret,
                        ngtcp2_crypto_aead_ctx *rx_aead_ctx, uint8_t *rx_iv,
                        ngtcp2_crypto_aead_ctx *tx_aead_ctx, uint8_t *tx_iv,
                        const uint8_t *current_rx_secret, const uint8_t *current_tx_secret,
                        size_t secretlen, void *ud)
{
    (void)ud;
    return ngtcp2_crypto_update_key_cb(q, rx_secret, tx_secret, rx_aead_ctx, rx_iv, tx_aead_ctx,
                                       tx_iv, current_rx_secret, current_tx_secret, secretlen, ud);
}

static ngtcp2_conn *get_conn(ngtcp2_crypto_conn_ref *ref)
{
    return ((h3conn *)ref->user_data)->q;
}

/* ---- connections ---- */

/* peer_left: the client closed or vanished (its unanswered streams are client_gone). */
void hb__h3_conn_free(h3conn *c, int peer_left)
{
    hb_h3_server *s = c->s;
    if (s->mpool->dbg) hb__h3_memstat_close(s);
    hb__h3_unpend(c);
    if (c->q) {
        size_t n = ngtcp2_conn_get_num_scid(c->q);
        ngtcp2_cid ids[16];
        if (n <= 16) {
            ngtcp2_conn_get_scid(c->q, ids);
            for (size_t i = 0; i < n; i++)
                hb__h3_cid_del(s, ids[i].data, ids[i].datalen, c);
        }
    }
    hb__h3_cid_del(s, c->odcid.data, c->odcid.datalen, c);
    hb__h3_cid_forget(s, c);
    half_open_end(c);
    s->freed++;
    while (c->live)
        hb__h3_stream_release(c, c->live, peer_left);
    while (c->zombies)
        hb__h3_zombie_free(c, c->zombies);
    if (c->q) ngtcp2_conn_del(c->q);
    if (c->tls) gnutls_deinit(c->tls);
    free(c->closebuf);
    if (c->prev)
        c->prev->next = c->next;
    else
        s->conns = c->next;
    if (c->next) c->next->prev = c->prev;
    s->nconns--;
    if (c->accepted) ADD(s->st->closed, 1);
    free(c);
}

static void conn_count_error(h3conn *c)
{
    if (c->counted_error) return;
    c->counted_error = 1;
    ADD(c->s->st->errors, 1);
}

/* Enter the closing period with a CONNECTION_CLOSE carrying ccerr (queued
 * for sending); the connection is freed after 3 PTO. */
void hb__h3_conn_close(h3conn *c, const ngtcp2_connection_close_error *ccerr)
{
    uint64_t now = hb__h3_now(c->s);
    if (c->state != C_OPEN) return;
    c->dirty = 1;
    ngtcp2_path_storage ps;
    ngtcp2_path_storage_zero(&ps);
    ngtcp2_pkt_info pi;
    if (!c->closebuf) c->closebuf = malloc(HB_H3_MAX_DATAGRAM);
    ngtcp2_ssize n = !c->closebuf
                         ? 0
                         : ngtcp2_conn_write_connection_close(c->q, &ps.path, &pi, c->closebuf,
                                                              HB_H3_MAX_DATAGRAM, ccerr, now);
    c->state = C_CLOSING;
    c->close_until = now + 3 * ngtcp2_conn_get_pto(c->q);
    memcpy(&c->cpeer, &c->peer, c->plen);
    c->cplen = c->plen;
    if (n > 0) {
        c->closelen = (size_t)n;
        c->close_queued = 1;
        hb__h3_pend(c);
    }
}

static void conn_fail(h3conn *c, int liberr)
{
    ngtcp2_connection_close_error e;
    if (liberr == NGTCP2_ERR_CRYPTO) {
        if (!c->hs_done) ADD(c->s->st->handshake_errors, 1);
        ngtcp2_connection_close_error_set_transport_error_tls_alert(
            &e, ngtcp2_conn_get_tls_alert(c->q), NULL, 0);
    } else {
        ngtcp2_connection_close_error_set_transport_error_liberr(&e, liberr, NULL, 0);
    }
    conn_count_error(c);
    hb__h3_conn_close(c, &e);
}

static void conn_app_fail(h3conn *c, uint64_t h3err)
{
    ngtcp2_connection_close_error e;
    ngtcp2_connection_close_error_set_application_error(&e, h3err, NULL, 0);
    conn_count_error(c);
    hb__h3_conn_close(c, &e);
}

static const ngtcp2_callbacks Q_CALLBACKS = {
    .recv_client_initial = ngtcp2_crypto_recv_client_initial_cb,
    .recv_crypto_data = q_recv_crypto_data,
    .handshake_completed = q_handshake_completed,
    .encrypt = ngtcp2_crypto_encrypt_cb,
    .decrypt = ngtcp2_crypto_decrypt_cb,
    .hp_mask = q_hp_mask,
    .recv_stream_data = q_recv_stream_data,
    .acked_stream_data_offset = q_acked,
    .stream_close = q_stream_close,
    .rand = q_rand,
    .get_new_connection_id = q_new_cid,
    .remove_connection_id = q_remove_cid,
    .update_key = q_update_key,
    .stream_reset = q_stream_reset,
    .extend_max_stream_data = q_extend_max_stream_data,
    .delete_crypto_aead_ctx = ngtcp2_crypto_delete_crypto_aead_ctx_cb,
    .delete_crypto_cipher_ctx = ngtcp2_crypto_delete_crypto_cipher_ctx_cb,
    .get_path_challenge_data = ngtcp2_crypto_get_path_challenge_data_cb,
    .stream_stop_sending = q_stop_sending,
    .version_negotiation = ngtcp2_crypto_version_negotiation_cb,
    .recv_tx_key = q_recv_tx_key,
};

static int tls_new(h3conn *c)
{
    hb_h3_server *s = c->s;
    unsigned flags = GNUTLS_SERVER | GNUTLS_NO_END_OF_EARLY_DATA | GNUTLS_NO_AUTO_SEND_TICKET;
    if (s->ar) flags |= GNUTLS_ENABLE_EARLY_DATA;
    if (gnutls_init(&c->tls, flags) != 0) {
        c->tls = NULL;
        return -1;
    }
    /* QUIC tickets carry max_early_data_size 0xffffffff (RFC 9001 4.6.1) */
    if (s->ar) {
        gnutls_anti_replay_enable(c->tls, s->ar);
        if (gnutls_record_set_max_early_data_size(c->tls, UINT32_MAX) != 0) return -1;
    }
    if (gnutls_priority_set(c->tls, s->prio) != 0 ||
        ngtcp2_crypto_gnutls_configure_server_session(c->tls) != 0 ||
        gnutls_credentials_set(c->tls, GNUTLS_CRD_CERTIFICATE, s->cred) != 0 ||
        (s->ticket.size && gnutls_session_ticket_enable_server(c->tls, &s->ticket) != 0))
        return -1;
    c->ref.get_conn = get_conn;
    c->ref.user_data = c;
    gnutls_session_set_ptr(c->tls, &c->ref);
    gnutls_datum_t alpn = {(unsigned char *)ALPN_H3, 2};
    if (gnutls_alpn_set_protocols(c->tls, &alpn, 1, GNUTLS_ALPN_MANDATORY) != 0) return -1;
    return 0;
}

h3conn *hb__h3_conn_new(hb_h3_server *s, const ngtcp2_pkt_hd *hd, const ngtcp2_cid *odcid,
                        const struct sockaddr *local, socklen_t llen, const struct sockaddr *peer,
                        socklen_t plen)
{
    h3conn *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->s = s;
    memcpy(&c->local, local, llen);
    memcpy(&c->peer, peer, plen);
    c->llen = llen;
    c->plen = plen;
    c->next = s->conns;
    if (s->conns) s->conns->prev = c;
    s->conns = c;
    s->nconns++;
    ngtcp2_cid scid;
    scid.datalen = SCIDLEN;
    if (gnutls_rnd(GNUTLS_RND_RANDOM, scid.data, SCIDLEN) != 0) goto fail;
    ngtcp2_settings set;
    ngtcp2_settings_default(&set);
    set.initial_ts = hb__h3_now(s);
    set.max_window = 64u << 20;
    set.max_stream_window = 16u << 20;
    /* ACK every ack-eliciting packet at once: a request's ACK then rides in its response,
     * where with 2 every other one went alone after RTT/8 (1.5 datagrams out per GET) */
    set.ack_thresh = 1;
    ngtcp2_transport_params tp;
    ngtcp2_transport_params_default(&tp);
    tp.initial_max_stream_data_bidi_local = STREAM_WINDOW;
    tp.initial_max_stream_data_bidi_remote = STREAM_WINDOW;
    tp.initial_max_stream_data_uni = STREAM_WINDOW;
    tp.initial_max_data = CONN_WINDOW;
    tp.initial_max_streams_bidi = s->cfg.max_streams;
    tp.initial_max_streams_uni = UNI_MAX;
    tp.max_idle_timeout = (uint64_t)s->cfg.idle_timeout_ms * NGTCP2_MILLISECONDS;
    tp.stateless_reset_token_present = 1;
    tp.active_connection_id_limit = 7;
    tp.original_dcid = hd->dcid;
    if (odcid) { /* after a Retry: the first DCID came back in the token */
        tp.original_dcid = *odcid;
        tp.retry_scid = hd->dcid;
        tp.retry_scid_present = 1;
        set.token = hd->token;
        c->validated = 1;
    }
    if (ngtcp2_crypto_generate_stateless_reset_token(tp.stateless_reset_token, s->reset_secret,
                                                     sizeof s->reset_secret, &scid) != 0)
        goto fail;
    ngtcp2_path path = {
        {(ngtcp2_sockaddr *)&c->local, c->llen}, {(ngtcp2_sockaddr *)&c->peer, c->plen}, NULL};
    if (ngtcp2_conn_server_new(&c->q, &hd->scid, &scid, &path, hd->version, &Q_CALLBACKS, &set, &tp,
                               &s->qmem, c) != 0) {
        c->q = NULL;
        goto fail;
    }
    if (tls_new(c) < 0) goto fail;
    ngtcp2_conn_set_tls_native_handle(c->q, c->tls);
    c->odcid = hd->dcid;
    if (hb__h3_cid_add(s, scid.data, scid.datalen, c) < 0 ||
        hb__h3_cid_add(s, hd->dcid.data, hd->dcid.datalen, c) < 0)
        goto fail;
    return c;
fail:
    hb__h3_conn_free(c, 0);
    return NULL;
}

/* The handshake is done and its ticket queued: the TLS session (its handshake
 * state, certificates, key shares: ~9.5 KiB measured) is not needed by an idle connection,
 * since QUIC's packet protection and key updates use ngtcp2's own contexts. */
static void tls_release(h3conn *c)
{
    ngtcp2_conn_set_tls_native_handle(c->q, NULL);
    gnutls_deinit(c->tls);
    c->tls = NULL;
}

/* The closing state answers a datagram with the CONNECTION_CLOSE again, to its
 * source, on the 1st, 2nd, 4th, 8th... datagram only (RFC 9000 10.2.1), and
 * before the address is validated never past 3x the bytes received. */
static void closing_recv(h3conn *c, const struct sockaddr *peer, socklen_t plen)
{
    uint32_t k = ++c->close_rx;
    if (!c->closelen || c->close_queued || (k & (k - 1)) != 0 ||
        (!c->validated && c->tx_bytes + c->closelen > 3 * c->rx_bytes)) {
        ADD(c->s->st->closes_limited, 1);
        return;
    }
    memcpy(&c->cpeer, peer, plen);
    c->cplen = plen;
    c->close_queued = 1;
    hb__h3_pend(c);
}

/* ngtcp2's expired timers handled: 0, or -1 when the connection was freed (idle)
 * or is closing (an error). */
static int conn_expire(h3conn *c, uint64_t now)
{
    int rv = ngtcp2_conn_handle_expiry(c->q, now);
    if (rv == NGTCP2_ERR_IDLE_CLOSE) {
        ADD(c->s->st->idle_timeouts, 1);
        hb__h3_conn_free(c, 1);
        return -1;
    }
    if (rv != 0) {
        conn_fail(c, rv);
        return -1;
    }
    return 0;
}

int hb__h3_conn_recv(h3conn *c, const struct sockaddr *peer, socklen_t plen, const uint8_t *p,
                     size_t n, int fresh)
{
    hb_h3_server *s = c->s;
    c->dirty = 1;
    int was_nopace = c->nopace;
    c->nopace = 0;
    c->rx_bytes += n;
    if (c->state == C_CLOSING) {
        closing_recv(c, peer, plen);
        return 1;
    }
    if (c->state == C_DRAINING) return 1;
    /* the datagram's own source: a client whose address changed (NAT rebinding) is
     * followed once ngtcp2 validated the new path (RFC 9000 9.3) */
    ngtcp2_path path = {
        {(ngtcp2_sockaddr *)&c->local, c->llen}, {(ngtcp2_sockaddr *)(uintptr_t)peer, plen}, NULL};
    ngtcp2_pkt_info pi = {0};
    uint64_t now = hb__h3_now(s);
    int rv = ngtcp2_conn_read_pkt(c->q, &path, &pi, p, n, now);
    if (fresh) {
        if (rv == NGTCP2_ERR_DROP_CONN || rv == NGTCP2_ERR_DISCARD_PKT) {
            hb__h3_conn_free(c, 0); /* not a client's Initial after all (e.g. forged) */
            return 0;
        }
        c->accepted = 1;
        ADD(s->st->connections, 1);
        if (!c->half_done) {
            s->half_open++;
            ADD(s->st->half_open, 1);
        }
    }
    if (rv == 0) {
        if (c->hs_done && c->tls) tls_release(c);
        /* the pacing instant no wake was spent on (see hb__h3_conn_write) stays in
         * ngtcp2's expiry, passed, until handle_expiry: handled here, before the
         * answer to this datagram is written, rather than by a timer just after */
        if (was_nopace && ngtcp2_conn_get_expiry(c->q) <= now && conn_expire(c, now) != 0) return 1;
        hb__h3_pend(c);
        return 1;
    }
    if (rv == NGTCP2_ERR_DRAINING) { /* the peer closed */
        c->state = C_DRAINING;
        c->close_until = hb__h3_now(s) + 3 * ngtcp2_conn_get_pto(c->q);
        hb__h3_unpend(c);
        /* a handshake its client gave up (e.g. on our certificate) holds no slot
         * for a new one while it drains: it counts toward neither the Retry
         * threshold nor the half-open cap */
        half_open_end(c);
        return 1;
    }
    if (rv == NGTCP2_ERR_DROP_CONN) {
        conn_count_error(c);
        hb__h3_conn_free(c, 0);
        return 1;
    }
    if (rv == NGTCP2_ERR_CALLBACK_FAILURE && c->h3err) {
        conn_app_fail(c, c->h3err);
        return 1;
    }
    conn_fail(c, rv);
    return 1;
}

/* None of the connection's own bytes wait to be written. */
static int conn_idle(const h3conn *c)
{
    return !c->wq && (!c->h || c->ctrl_sent >= c->ctrl_len);
}

/* One packet of c into buf: its length, 0 when c has nothing to send now, -1
 * when c was closed instead (the close packet is queued). */
ngtcp2_ssize hb__h3_conn_write(h3conn *c, uint8_t *buf, size_t cap)
{
    uint64_t now = hb__h3_now(c->s);
    c->dirty = 1;
    size_t max = ngtcp2_conn_get_max_tx_udp_payload_size(c->q);
    if (max > cap) max = cap;
    ngtcp2_path_storage ps;
    ngtcp2_path_storage_zero(&ps);
    int no_streams = 0; /* a stream took nothing though the packet had room */
    for (;;) {
        int64_t sid = -1;
        int fin = 0;
        ngtcp2_vec *vec = NULL;
        h3stream *st = NULL;
        size_t nv = no_streams ? 0 : hb__h3_next(c, &sid, &vec, &fin, &st);
        uint32_t flags = NGTCP2_WRITE_STREAM_FLAG_MORE | (fin ? NGTCP2_WRITE_STREAM_FLAG_FIN : 0);
        ngtcp2_ssize ndata = -1;
        ngtcp2_pkt_info pi;
        ngtcp2_ssize w = ngtcp2_conn_writev_stream(c->q, &ps.path, &pi, buf, max, &ndata, flags,
                                                   sid, vec, nv, now);
        if (w < 0) {
            if (w == NGTCP2_ERR_STREAM_DATA_BLOCKED) {
                hb__h3_wblocked(c, st);
                continue;
            }
            if (w == NGTCP2_ERR_STREAM_SHUT_WR) {
                hb__h3_wshut(c, st);
                continue;
            }
            if (w == NGTCP2_ERR_WRITE_MORE) {
                if (ndata > 0 || (ndata == 0 && fin))
                    hb__h3_wrote(c, st, (size_t)ndata, fin);
                else
                    no_streams = 1;
                continue;
            }
            conn_fail(c, (int)w);
            return -1;
        }
        if (ndata >= 0 && sid >= 0) hb__h3_wrote(c, st, (size_t)ndata, fin);
        if (w > 0 && ps.path.remote.addrlen && ps.path.remote.addrlen <= sizeof c->peer &&
            (ps.path.remote.addrlen != c->plen ||
             memcmp(ps.path.remote.addr, &c->peer, c->plen) != 0)) {
            memcpy(&c->peer, ps.path.remote.addr, ps.path.remote.addrlen); /* a new path */
            c->plen = (socklen_t)ps.path.remote.addrlen;
        }
        /* paced only after the handshake: before an RTT sample ngtcp2 paces with
         * its 333 ms initial-RTT guess, holding the first answer ~22 ms */
        if (w == 0 && ngtcp2_conn_get_handshake_completed(c->q)) {
            /* ngtcp2 has nothing more to send (a pacing instant still ahead, which may
             * hold some back, is in its expiry): the instant this sets spaces packets
             * that wait, and when none of ours do, waking for it only finds nothing
             * to send (a wake per response of a sequential client) */
            int idle = conn_idle(c);
            if (idle) c->nopace_dl = ngtcp2_conn_get_expiry(c->q);
            ngtcp2_conn_update_pkt_tx_time(c->q, now);
            c->nopace = (uint8_t)idle;
        }
        return w;
    }
}

static uint64_t conn_deadline(h3conn *c)
{
    if (c->state != C_OPEN) return c->close_until;
    uint64_t d = c->nopace && conn_idle(c) ? c->nopace_dl : ngtcp2_conn_get_expiry(c->q);
    if (c->timers) {
        uint64_t t = hb__h3_stream_deadline(c);
        if (t < d) d = t;
    }
    return d;
}

/* The connection's deadline, recomputed only when it was touched: the endpoint's
 * scan over its connections then costs a compare for each idle one. */
uint64_t hb__h3_conn_dl(h3conn *c)
{
    if (c->dirty) {
        c->dirty = 0;
        c->dl = conn_deadline(c);
    }
    return c->dl;
}

void hb__h3_conn_timer(h3conn *c)
{
    hb_h3_server *s = c->s;
    uint64_t now = hb__h3_now(s);
    c->dirty = 1;
    c->nopace = 0;
    if (c->state != C_OPEN) {
        if (now >= c->close_until) hb__h3_conn_free(c, c->state == C_DRAINING);
        return;
    }
    if (ngtcp2_conn_get_expiry(c->q) <= now) {
        if (conn_expire(c, now) != 0) return;
        hb__h3_pend(c);
    }
    if (c->timers) hb__h3_stream_timers(c);
}

#else
typedef int hb__h3_server_conn_unused;
#endif
