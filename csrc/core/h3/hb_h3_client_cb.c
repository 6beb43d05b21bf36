/* hb_h3_client_cb.c - the ngtcp2 callbacks of an hb_h3_client (see
 * hb_h3_client_int.h): stream events to HTTP/3 (hb_h3_client_h3.c), HTTP/3's
 * set-up once the handshake is done. */
#include "h3/hb_h3_client_int.h"

#ifndef HB_NO_H3

/* ---- helpers ---- */

int hb__h3_fail(hb_h3_client *c, int rc, const char *fmt, const char *detail)
{
    if (!c->err[0]) snprintf(c->err, sizeof c->err, fmt, detail);
    c->over = 1;
    return rc;
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

/* Forget the per-request body of stream sid. */
void hb__h3_body_release(struct hb__h3 *p, int64_t sid)
{
    for (unsigned i = 0; p->nbodies && i < HB_H3_BODIES; i++)
        if (p->bodies[i].sid == sid) {
            p->bodies[i].sid = -1;
            p->nbodies--;
        }
}

/* ---- ngtcp2 callbacks (ud: the client) ---- */

static int q_handshake_completed(ngtcp2_conn *q, void *ud)
{
    hb_h3_client *c = ud;
    struct hb__h3 *p = c->p;
    int rc = hb__h3_setup(c);
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
    hb_h3_client *c = ud;
    if (!c->p->h) return 0;
    return hb__h3_recv(c, sid, sud, data, len, (flags & NGTCP2_STREAM_DATA_FLAG_FIN) != 0);
}

static int q_stream_close(ngtcp2_conn *q, uint32_t flags, int64_t sid, uint64_t code, void *ud,
                          void *sud)
{
    (void)q;
    hb_h3_client *c = ud;
    if (!c->p->h) return 0;
    if (!(flags & NGTCP2_STREAM_CLOSE_FLAG_APP_ERROR_CODE_SET)) code = HB_H3_NO_ERROR;
    return hb__h3_stream_close(c, sid, sud, code);
}

static int q_extend_max_stream_data(ngtcp2_conn *q, int64_t sid, uint64_t max, void *ud, void *sud)
{
    (void)q;
    (void)max;
    (void)sid;
    hb_h3_client *c = ud;
    if (c->p->h) hb__h3_tx_unblock(c, sud);
    return 0;
}

const ngtcp2_callbacks hb__h3_q_cbs = {
    .client_initial = ngtcp2_crypto_client_initial_cb,
    .recv_crypto_data = ngtcp2_crypto_recv_crypto_data_cb,
    .handshake_completed = q_handshake_completed,
    .encrypt = ngtcp2_crypto_encrypt_cb,
    .decrypt = ngtcp2_crypto_decrypt_cb,
    .hp_mask = ngtcp2_crypto_hp_mask_cb,
    .recv_stream_data = q_recv_stream_data,
    .stream_close = q_stream_close,
    .recv_retry = ngtcp2_crypto_recv_retry_cb,
    .rand = rand_cb,
    .get_new_connection_id = new_cid_cb,
    .update_key = ngtcp2_crypto_update_key_cb,
    .extend_max_stream_data = q_extend_max_stream_data,
    .delete_crypto_aead_ctx = ngtcp2_crypto_delete_crypto_aead_ctx_cb,
    .delete_crypto_cipher_ctx = ngtcp2_crypto_delete_crypto_cipher_ctx_cb,
    .get_path_challenge_data = ngtcp2_crypto_get_path_challenge_data_cb,
    .version_negotiation = ngtcp2_crypto_version_negotiation_cb,
};

#endif /* HB_NO_H3 */
