/* hb_h3_client_cb.c - the ngtcp2 and nghttp3 callbacks of an hb_h3_client
 * (see hb_h3_client_int.h): stream events to the caller's callbacks, flow
 * control credit, HTTP/3's streams once the handshake is done. */
#include "h3/hb_h3_client_int.h"

#ifndef HB_NO_H3

/* ---- helpers ---- */

int hb__h3_fail(hb_h3_client *c, int rc, const char *fmt, const char *detail)
{
    if (!c->err[0]) snprintf(c->err, sizeof c->err, fmt, detail);
    c->over = 1;
    return rc;
}

/* A callback's failure: ngtcp2 returns NGTCP2_ERR_CALLBACK_FAILURE, read or
 * write reports the code kept here. */
int hb__h3_cb_fail(hb_h3_client *c, int rc, const char *what, int liberr)
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

ngtcp2_conn *hb__h3_get_conn(ngtcp2_crypto_conn_ref *ref)
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
    hb_h3_client *c = ud;
    consume(c, sid, len);
    if (sud && c->p->cb->on_data) c->p->cb->on_data(c->p->ud, sud, data, len);
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
void hb__h3_body_release(struct hb__h3 *p, int64_t sid)
{
    for (unsigned i = 0; p->nbodies && i < HB_H3_BODIES; i++)
        if (p->bodies[i].sid == sid) {
            p->bodies[i].sid = -1;
            p->nbodies--;
        }
}

static int h_end_stream(nghttp3_conn *h, int64_t sid, void *ud, void *sud)
{
    hb_h3_client *c = ud;
    if (!sud) return 0;
    if (c->p->nbodies) hb__h3_body_release(c->p, sid);
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
    if (c->p->nbodies) hb__h3_body_release(c->p, sid);
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

nghttp3_ssize hb__h3_read_body(nghttp3_conn *h, int64_t sid, nghttp3_vec *vec, size_t veccnt,
                               uint32_t *pflags, void *ud, void *sud)
{
    (void)h;
    (void)veccnt;
    (void)sud;
    hb_h3_client *c = ud;
    vec[0].base = (uint8_t *)c->p->set.body;
    vec[0].len = c->p->set.body_len;
    for (unsigned i = 0; c->p->nbodies && i < HB_H3_BODIES; i++)
        if (c->p->bodies[i].sid == sid) {
            vec[0].base = (uint8_t *)c->p->bodies[i].data;
            vec[0].len = c->p->bodies[i].len;
        }
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
    c->idle_ns = p->set.idle_timeout_ns;
    const ngtcp2_transport_params *rp = ngtcp2_conn_get_remote_transport_params(q);
    if (rp && rp->max_idle_timeout && rp->max_idle_timeout < c->idle_ns)
        c->idle_ns = rp->max_idle_timeout;
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
    if (n < 0) return hb__h3_cb_fail(c, HB_E_H3, "HTTP/3", (int)n);
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
    return rv ? hb__h3_cb_fail(c, HB_E_H3, "HTTP/3 ack", rv) : 0;
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
        return hb__h3_cb_fail(c, HB_E_H3, "HTTP/3 stream close", rv);
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
    return rv ? hb__h3_cb_fail(c, HB_E_H3, "HTTP/3 stream reset", rv) : 0;
}

static int q_extend_max_stream_data(ngtcp2_conn *q, int64_t sid, uint64_t max, void *ud, void *sud)
{
    (void)q;
    (void)max;
    (void)sud;
    hb_h3_client *c = ud;
    if (!c->p->h) return 0;
    int rv = nghttp3_conn_unblock_stream(c->p->h, sid);
    return rv ? hb__h3_cb_fail(c, HB_E_H3, "HTTP/3 unblock", rv) : 0;
}

const ngtcp2_callbacks hb__h3_q_cbs = {
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

#endif /* HB_NO_H3 */
