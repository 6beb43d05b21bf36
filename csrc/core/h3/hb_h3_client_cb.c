/* hb_h3_client_cb.c - the ngtcp2 callbacks of an hb_h3_client (see
 * hb_h3_client_int.h) and HTTP/3 on our own framing and QPACK
 * (h3codec/hb_h3_frame, h3codec/hb_qpack): our control stream with SETTINGS
 * (QPACK table capacity 0, so no QPACK streams are opened and nothing would
 * flow on them), the server's control and QPACK streams read and checked,
 * request streams written from per-request slots and their responses read
 * frame by frame. No allocation per request: the slots come with the client. */
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

/* ---- HTTP/3 on our own framing and QPACK ---- */

/* The largest response field section we accept (what we advertise). */
#define MAX_FIELD_SECTION 65536u

static void consume(hb_h3_client *c, int64_t sid, size_t n)
{
    ngtcp2_conn_extend_max_stream_offset(c->p->q, sid, n);
    ngtcp2_conn_extend_max_offset(c->p->q, n);
}

int hb__h3_setup(hb_h3_client *c)
{
    struct hb__h3 *p = c->p;
    if (ngtcp2_conn_get_max_local_streams_uni(p->q) < 1) {
        snprintf(c->err, sizeof c->err, "the server allows no unidirectional stream");
        return HB_E_H3;
    }
    int rv = ngtcp2_conn_open_uni_stream(p->q, &p->ctrl_sid, NULL);
    if (rv != 0) {
        snprintf(c->err, sizeof c->err, "opening the HTTP/3 control stream: %s",
                 ngtcp2_strerror(rv));
        return HB_E_H3;
    }
    hb_h3_conn_settings s;
    hb_h3_settings_default(&s);
    s.max_field_section_size = MAX_FIELD_SECTION;
    p->ctrl[0] = HB_H3_STREAM_CONTROL;
    ssize_t n = hb_h3_settings_encode(&s, p->ctrl + 1, sizeof p->ctrl - 1);
    if (n < 0) return hb__h3_fail(c, HB_E_H3, "encoding SETTINGS%s", "");
    p->ctrl_len = 1 + (size_t)n;
    p->ctrl_sent = 0;
    p->peer_settings = p->have_peer_ctrl = 0;
    p->nuni = 0;
    p->txq = p->txq_tail = NULL;
    p->free_req = NULL;
    for (uint32_t i = p->nreqs; i-- > 0;) {
        p->reqs[i].sid = -1;
        p->reqs[i].sud = NULL;
        p->reqs[i].next = p->free_req;
        p->free_req = &p->reqs[i];
    }
    p->h = 1;
    return 0;
}

int hb__h3_conn_fail(hb_h3_client *c, uint64_t code, const char *detail)
{
    struct hb__h3 *p = c->p;
    if (!p->failed) {
        p->failed = 1;
        p->fail_rc = HB_E_H3;
        snprintf(c->err, sizeof c->err, "HTTP/3: %s (%s)", detail, hb_h3_error_name(code));
    }
    ngtcp2_connection_close_error_set_application_error(&p->last, code, NULL, 0);
    return NGTCP2_ERR_CALLBACK_FAILURE;
}

/* ---- sending ---- */

static void enqueue(struct hb__h3 *p, h3_req *r)
{
    if (r->queued) return;
    r->queued = 1;
    r->next = NULL;
    if (p->txq_tail)
        p->txq_tail->next = r;
    else
        p->txq = r;
    p->txq_tail = r;
}

static void dequeue_head(struct hb__h3 *p)
{
    h3_req *r = p->txq;
    p->txq = r->next;
    if (!p->txq) p->txq_tail = NULL;
    r->next = NULL;
    r->queued = 0;
}

/* The HEADERS frame of fields at o (room for REQ_HDR_MAX bytes): its length, or < 0. */
static ssize_t headers_frame(hb_h3_client *c, uint8_t *o, const hb_header *fields, size_t n)
{
    size_t room = REQ_HDR_MAX - 2 * HB_H3_FRAME_HEADER_MAX;
    /* the section goes after the largest frame header it may need, then moves down */
    ssize_t k = hb_qpack_encode(fields, n, o + HB_H3_FRAME_HEADER_MAX, room);
    if (k < 0)
        return hb__h3_fail(c, HB_E_INVALID, "the request's fields exceed %s bytes encoded", "4064");
    uint8_t fh[HB_H3_FRAME_HEADER_MAX];
    size_t fl = (size_t)(hb_h3_frame_header_put(fh, HB_H3_FRAME_HEADERS, (uint64_t)k) - fh);
    memmove(o + fl, o + HB_H3_FRAME_HEADER_MAX, (size_t)k);
    memcpy(o, fh, fl);
    return (ssize_t)fl + k;
}

static int is_head(const hb_header *fields, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (fields[i].name_len == 7 && memcmp(fields[i].name, ":method", 7) == 0)
            return fields[i].value_len == 4 && memcmp(fields[i].value, "HEAD", 4) == 0;
    return 0;
}

int hb__h3_request(hb_h3_client *c, h3_req *r, int64_t sid, const hb_header *fields, size_t n,
                   const void *body, size_t body_len, void *sud)
{
    struct hb__h3 *p = c->p;
    uint8_t *o = r->hdr;
    if (p->set.stable_fields && fields == p->tmpl_fields && n == p->tmpl_n) {
        memcpy(o, p->tmpl, p->tmpl_len);
        o += p->tmpl_len;
        r->no_body = (uint8_t)p->tmpl_no_body;
    } else {
        ssize_t k = headers_frame(c, o, fields, n);
        if (k < 0) return (int)k;
        r->no_body = (uint8_t)is_head(fields, n);
        if (p->set.stable_fields) {
            memcpy(p->tmpl, o, (size_t)k);
            p->tmpl_len = (size_t)k;
            p->tmpl_fields = fields;
            p->tmpl_n = n;
            p->tmpl_no_body = r->no_body;
        }
        o += k;
    }
    if (body_len) o = hb_h3_frame_header_put(o, HB_H3_FRAME_DATA, body_len);
    r->hdr_len = (size_t)(o - r->hdr);
    r->body = body;
    r->body_len = body_len;
    r->sent = 0;
    r->sid = sid;
    r->sud = sud;
    r->clen = UINT64_MAX;
    r->got = 0;
    r->phase = 0;
    r->fin_sent = 0;
    r->bad = 0;
    r->status = 0;
    hb_h3_frame_reader_init(&r->rd, r->rbuf, sizeof r->rbuf, sizeof r->rbuf);
    r->queued = 0;
    enqueue(c->p, r);
    return 0;
}

int hb__h3_next_tx(hb_h3_client *c, int64_t *sid, ngtcp2_vec *v, size_t *nv, int *fin, h3_req **rr)
{
    struct hb__h3 *p = c->p;
    if (p->ctrl_sent < p->ctrl_len) {
        *sid = p->ctrl_sid;
        v[0].base = p->ctrl + p->ctrl_sent;
        v[0].len = p->ctrl_len - p->ctrl_sent;
        *nv = 1;
        *fin = 0;
        *rr = NULL;
        return 1;
    }
    h3_req *r = p->txq;
    if (!r) return 0;
    *sid = r->sid;
    *rr = r;
    *nv = 0;
    if (r->sent < r->hdr_len) {
        v[0].base = r->hdr + r->sent;
        v[0].len = r->hdr_len - r->sent;
        *nv = 1;
    }
    size_t boff = r->sent > r->hdr_len ? r->sent - r->hdr_len : 0;
    if (boff < r->body_len) {
        v[*nv].base = (uint8_t *)r->body + boff;
        v[*nv].len = r->body_len - boff;
        (*nv)++;
    }
    *fin = 1;
    return 1;
}

void hb__h3_sent(hb_h3_client *c, h3_req *r, size_t n)
{
    struct hb__h3 *p = c->p;
    if (!r) {
        p->ctrl_sent += n;
        return;
    }
    r->sent += n;
    if (r->sent == r->hdr_len + r->body_len) { /* all of it, and the FIN with it */
        r->fin_sent = 1;
        if (p->txq == r) dequeue_head(p);
    }
}

void hb__h3_tx_block(hb_h3_client *c, h3_req *r)
{
    struct hb__h3 *p = c->p;
    if (!r) {
        p->ctrl_sent = p->ctrl_len; /* the control stream cannot be blocked by 20 bytes */
        return;
    }
    if (p->txq == r) dequeue_head(p);
}

void hb__h3_tx_unblock(hb_h3_client *c, h3_req *r)
{
    if (r && !r->fin_sent && r->sid >= 0) enqueue(c->p, r);
}

/* ---- the response ---- */

typedef struct {
    hb_h3_client *c;
    h3_req *r;
    int trailers;
} field_ctx;

static void on_field(void *ud, const char *name, size_t nl, const char *value, size_t vl)
{
    field_ctx *f = ud;
    h3_req *r = f->r;
    struct hb__h3 *p = f->c->p;
    if (r->bad) return;
    if (nl && name[0] == ':') {
        if (f->trailers || nl != 7 || memcmp(name, ":status", 7) != 0 || r->status) {
            r->bad = 1;
            return;
        }
        int st = 0;
        for (size_t i = 0; i < vl; i++) {
            if (value[i] < '0' || value[i] > '9') {
                r->bad = 1;
                return;
            }
            st = st * 10 + (value[i] - '0');
        }
        if (vl != 3 || st < 100) {
            r->bad = 1;
            return;
        }
        r->status = st;
        /* interim responses (1xx) are not the answer */
        if (st >= 200 && r->sud && p->cb->on_response) p->cb->on_response(p->ud, r->sud, st);
        return;
    }
    if (!r->status && !f->trailers) { /* a field before :status */
        r->bad = 1;
        return;
    }
    if (f->trailers) return;
    if (nl == 14 && memcmp(name, "content-length", 14) == 0) {
        uint64_t v = 0;
        if (vl == 0 || vl > 18) {
            r->bad = 1;
            return;
        }
        for (size_t i = 0; i < vl; i++) {
            if (value[i] < '0' || value[i] > '9') {
                r->bad = 1;
                return;
            }
            v = v * 10 + (uint64_t)(value[i] - '0');
        }
        if (r->no_body || r->status == 204 || r->status == 304) goto report;
        if (r->clen != UINT64_MAX && r->clen != v) {
            r->bad = 1;
            return;
        }
        r->clen = v;
    }
report:
    if (r->sud && p->cb->on_header) p->cb->on_header(p->ud, r->sud, name, nl, value, vl);
}

/* Tell the caller the request ended (once). */
static void finish(hb_h3_client *c, h3_req *r, int end, uint64_t code)
{
    struct hb__h3 *p = c->p;
    void *sud = r->sud;
    if (!sud) return;
    r->sud = NULL;
    if (p->nbodies) hb__h3_body_release(p, r->sid);
    c->nopen--;
    p->cb->on_close(p->ud, sud, end, code);
}

/* A malformed response: the stream ends with H3_MESSAGE_ERROR (RFC 9114 4.1.2). */
static void message_error(hb_h3_client *c, h3_req *r)
{
    (void)ngtcp2_conn_shutdown_stream(c->p->q, r->sid, HB_H3_MESSAGE_ERROR);
    finish(c, r, HB_H3_END_ERROR, HB_H3_MESSAGE_ERROR);
    r->bad = 1;
}

static int recv_request(hb_h3_client *c, h3_req *r, const uint8_t *data, size_t len, int fin)
{
    struct hb__h3 *p = c->p;
    char err[HB_ERR_LEN];
    while (len && !r->bad) {
        hb_h3_frame_ev ev;
        ssize_t k = hb_h3_frame_read(&r->rd, data, len, &ev, err);
        if (k < 0) return hb__h3_conn_fail(c, (uint64_t)-k, err);
        data += k;
        len -= (size_t)k;
        if (ev.kind == HB_H3_EV_NEED_MORE) break;
        if (ev.kind == HB_H3_EV_DATA) {
            if (r->phase != 1)
                return hb__h3_conn_fail(c, HB_H3_FRAME_UNEXPECTED,
                                        r->phase ? "DATA after the trailers"
                                                 : "DATA before the response's HEADERS");
            r->got += ev.len;
            if ((r->clen != UINT64_MAX && r->got > r->clen) || (r->no_body && r->got)) {
                message_error(c, r);
                break;
            }
            if (ev.len && r->sud && p->cb->on_data)
                p->cb->on_data(p->ud, r->sud, ev.payload, ev.len);
            continue;
        }
        int rc = hb_h3_frame_allowed(HB_H3_ON_REQUEST, ev.type);
        if (rc < 0)
            return hb__h3_conn_fail(c, (uint64_t)-rc, "a control frame on a request stream");
        if (ev.type == HB_H3_FRAME_PUSH_PROMISE)
            return hb__h3_conn_fail(c, HB_H3_ID_ERROR, "PUSH_PROMISE without MAX_PUSH_ID");
        if (ev.type != HB_H3_FRAME_HEADERS) continue;
        if (r->phase == 2)
            return hb__h3_conn_fail(c, HB_H3_FRAME_UNEXPECTED, "HEADERS after trailers");
        field_ctx f = {c, r, r->phase == 1};
        if (!f.trailers) r->status = 0;
        rc = hb_qpack_decode(ev.payload, ev.len, p->scratch, MAX_FIELD_SECTION, on_field, &f, err);
        if (rc < 0) return hb__h3_conn_fail(c, (uint64_t)-rc, err);
        if (rc > 0 || r->bad || (!f.trailers && !r->status)) {
            r->bad = 0;
            message_error(c, r);
            break;
        }
        if (f.trailers)
            r->phase = 2;
        else if (r->status >= 200)
            r->phase = 1;
    }
    if (fin && !r->bad) {
        if (!hb_h3_frame_reader_idle(&r->rd))
            return hb__h3_conn_fail(c, HB_H3_FRAME_ERROR,
                                    "the response stream ends inside a frame");
        if (r->phase == 0 || (r->clen != UINT64_MAX && r->got != r->clen))
            message_error(c, r);
        else
            finish(c, r, HB_H3_END_OK, 0);
    }
    return 0;
}

/* ---- the server's unidirectional streams ---- */

static h3_uni *uni_of(struct hb__h3 *p, int64_t sid)
{
    for (unsigned i = 0; i < p->nuni; i++)
        if (p->uni[i].sid == sid) return &p->uni[i];
    if (p->nuni == UNI_MAX) return NULL;
    h3_uni *u = &p->uni[p->nuni++];
    memset(u, 0, sizeof *u);
    u->sid = sid;
    return u;
}

static int control_frame(hb_h3_client *c, const hb_h3_frame_ev *ev)
{
    struct hb__h3 *p = c->p;
    char err[HB_ERR_LEN];
    if (!p->peer_settings && ev->type != HB_H3_FRAME_SETTINGS)
        return hb__h3_conn_fail(c, HB_H3_MISSING_SETTINGS,
                                "the control stream starts without SETTINGS");
    int rc = hb_h3_frame_allowed(HB_H3_ON_CONTROL, ev->type);
    if (rc < 0) return hb__h3_conn_fail(c, (uint64_t)-rc, "a request frame on the control stream");
    uint64_t v;
    switch (ev->type) {
    case HB_H3_FRAME_SETTINGS: {
        if (p->peer_settings)
            return hb__h3_conn_fail(c, HB_H3_FRAME_UNEXPECTED, "a second SETTINGS");
        hb_h3_conn_settings s;
        if ((rc = hb_h3_settings_decode(ev->payload, ev->len, &s, err)) < 0)
            return hb__h3_conn_fail(c, (uint64_t)-rc, err);
        p->peer_settings = 1;
        return 0;
    }
    case HB_H3_FRAME_GOAWAY:
        if ((rc = hb_h3_frame_varint_payload(ev->payload, ev->len, &v, err)) < 0)
            return hb__h3_conn_fail(c, (uint64_t)-rc, err);
        if (v % 4 != 0 || (c->goaway && (int64_t)v > c->goaway_id))
            return hb__h3_conn_fail(c, HB_H3_ID_ERROR, "GOAWAY with a stream ID it may not have");
        /* the streams below v go on, no new one; those from v on were not processed */
        c->goaway_id = (int64_t)v;
        c->goaway = 1;
        p->goaway_owed = 1;
        return 0;
    case HB_H3_FRAME_MAX_PUSH_ID:
        return hb__h3_conn_fail(c, HB_H3_FRAME_UNEXPECTED, "MAX_PUSH_ID from a server");
    case HB_H3_FRAME_CANCEL_PUSH:
        return hb__h3_conn_fail(c, HB_H3_ID_ERROR, "CANCEL_PUSH without MAX_PUSH_ID");
    default:
        return 0;
    }
}

static int recv_uni(hb_h3_client *c, int64_t sid, const uint8_t *data, size_t len, int fin)
{
    struct hb__h3 *p = c->p;
    h3_uni *u = uni_of(p, sid);
    if (!u) return 0; /* beyond what we track: read and dropped */
    if (!u->typed) {
        int done;
        size_t k = hb_h3_varint_feed(&u->vr, data, len, &done);
        data += k;
        len -= k;
        if (!done) return 0;
        u->typed = 1;
        u->type = u->vr.v;
        if (u->type == HB_H3_STREAM_CONTROL) {
            if (p->have_peer_ctrl)
                return hb__h3_conn_fail(c, HB_H3_STREAM_CREATION_ERROR, "a second control stream");
            p->have_peer_ctrl = 1;
            hb_h3_frame_reader_init(&u->rd, u->buf, sizeof u->buf, sizeof u->buf);
            u->rd.report_skipped = 1; /* until SETTINGS: no frame of any type may come first */
        } else if (u->type == HB_H3_STREAM_PUSH) {
            return hb__h3_conn_fail(c, HB_H3_ID_ERROR, "a push stream without MAX_PUSH_ID");
        }
    }
    char err[HB_ERR_LEN];
    switch (u->type) {
    case HB_H3_STREAM_CONTROL:
        while (len) {
            hb_h3_frame_ev ev;
            ssize_t k = hb_h3_frame_read(&u->rd, data, len, &ev, err);
            if (k < 0) return hb__h3_conn_fail(c, (uint64_t)-k, err);
            data += k;
            len -= (size_t)k;
            if (ev.kind == HB_H3_EV_NEED_MORE) break;
            if (ev.kind == HB_H3_EV_DATA)
                return hb__h3_conn_fail(c, HB_H3_FRAME_UNEXPECTED, "DATA on the control stream");
            if (ev.kind == HB_H3_EV_SKIPPED) { /* an unknown or reserved type */
                if (!p->peer_settings)
                    return hb__h3_conn_fail(c, HB_H3_MISSING_SETTINGS,
                                            "the control stream starts without SETTINGS");
                continue;
            }
            int rc = control_frame(c, &ev);
            if (rc) return rc;
            if (p->peer_settings) u->rd.report_skipped = 0;
        }
        if (fin)
            return hb__h3_conn_fail(c, HB_H3_CLOSED_CRITICAL_STREAM, "the control stream ended");
        return 0;
    case HB_H3_STREAM_QPACK_ENCODER: {
        int rc = hb_qpack_peer_encoder_stream(data, len, err);
        if (rc < 0) return hb__h3_conn_fail(c, (uint64_t)-rc, err);
        if (fin)
            return hb__h3_conn_fail(c, HB_H3_CLOSED_CRITICAL_STREAM,
                                    "the QPACK encoder stream ended");
        return 0;
    }
    case HB_H3_STREAM_QPACK_DECODER: {
        int rc = hb_qpack_peer_decoder_stream(&u->ds, data, len, err);
        if (rc < 0) return hb__h3_conn_fail(c, (uint64_t)-rc, err);
        if (fin)
            return hb__h3_conn_fail(c, HB_H3_CLOSED_CRITICAL_STREAM,
                                    "the QPACK decoder stream ended");
        return 0;
    }
    default: /* unknown and reserved types: ignored */
        return 0;
    }
}

int hb__h3_recv(hb_h3_client *c, int64_t sid, h3_req *r, const uint8_t *data, size_t len, int fin)
{
    int rc;
    if (r)
        rc = recv_request(c, r, data, len, fin);
    else if ((sid & 3) == 3)
        rc = recv_uni(c, sid, data, len, fin);
    else
        rc = 0; /* our own streams carry nothing inbound */
    if (rc == 0) consume(c, sid, len);
    return rc;
}

int hb__h3_stream_close(hb_h3_client *c, int64_t sid, h3_req *r, uint64_t code)
{
    struct hb__h3 *p = c->p;
    if ((sid & 3) == 3) {
        h3_uni *u = NULL;
        for (unsigned i = 0; i < p->nuni; i++)
            if (p->uni[i].sid == sid) u = &p->uni[i];
        if (u && u->typed && u->type <= HB_H3_STREAM_QPACK_DECODER && u->type != HB_H3_STREAM_PUSH)
            return hb__h3_conn_fail(c, HB_H3_CLOSED_CRITICAL_STREAM, "a critical stream closed");
        return 0;
    }
    if (!r) return 0;
    finish(c, r, c->goaway && sid >= c->goaway_id ? HB_H3_END_GOAWAY : HB_H3_END_RESET, code);
    if (r->queued) { /* out of the send queue */
        h3_req **pp = &p->txq, *prev = NULL;
        while (*pp && *pp != r) {
            prev = *pp;
            pp = &(*pp)->next;
        }
        if (*pp) {
            *pp = r->next;
            if (p->txq_tail == r) p->txq_tail = prev;
        }
        r->queued = 0;
    }
    r->sid = -1;
    r->next = p->free_req;
    p->free_req = r;
    return 0;
}

/* The server's GOAWAY: the streams from its ID on were not processed; end them. */
void hb__h3_goaway_cancel(hb_h3_client *c)
{
    struct hb__h3 *p = c->p;
    p->goaway_owed = 0;
    for (uint32_t i = 0; i < p->nreqs; i++) {
        h3_req *r = &p->reqs[i];
        if (r->sid < 0 || r->sid < c->goaway_id || !r->sud) continue;
        finish(c, r, HB_H3_END_GOAWAY, HB_H3_REQUEST_CANCELLED);
        (void)ngtcp2_conn_shutdown_stream(p->q, r->sid, HB_H3_REQUEST_CANCELLED);
    }
}

#endif /* HB_NO_H3 */
