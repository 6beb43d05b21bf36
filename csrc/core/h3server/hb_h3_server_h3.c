/* hb_h3_server_h3.c - HTTP/3 on the server's QUIC streams, on our own framing and
 * QPACK (h3codec/): our control stream (SETTINGS without a dynamic table, GOAWAY on
 * a graceful stop), the peer's control and QPACK streams checked as RFC 9114 and
 * RFC 9204 ask, request streams read frame by frame into their slot (nothing
 * allocated per request), and the send queue of streams whose response bytes wait
 * for QUIC. With our table capacity 0 we open no QPACK streams (RFC 9204 4.2). */
#include "h3server/hb_h3_server_int.h"

#ifndef HB_NO_H3

static int conn_error(h3conn *c, uint64_t code)
{
    if (!c->h3err) c->h3err = code;
    return NGTCP2_ERR_CALLBACK_FAILURE;
}

int hb__h3_setup_h3(h3conn *c)
{
    if (ngtcp2_conn_get_max_local_streams_uni(c->q) < 1) return -1;
    if (ngtcp2_conn_open_uni_stream(c->q, &c->ctrl_sid, NULL) != 0) return -1;
    hb_h3_conn_settings set;
    hb_h3_settings_default(&set);
    set.max_field_section_size = (uint64_t)c->s->cfg.max_header_list * 4u;
    c->ctrl[0] = HB_H3_STREAM_CONTROL;
    ssize_t n = hb_h3_settings_encode(&set, c->ctrl + 1, sizeof c->ctrl - 1 - 10);
    if (n < 0) return -1;
    c->ctrl_len = 1 + (size_t)n;
    c->ctrl_sent = 0;
    c->max_bidi = -4;
    c->goaway_id = -1;
    c->peer_goaway = UINT64_MAX;
    hb_h3_frame_reader_init(&c->crd, c->cbuf, sizeof c->cbuf, 16384);
    c->crd.report_skipped = 1; /* until SETTINGS: no frame of any type may come first */
    c->h = 1;
    return 0;
}

int hb__h3_goaway(h3conn *c)
{
    if (!c->h || c->goaway_id >= 0) return -1;
    /* the requests seen so far are processed, none after them */
    c->goaway_id = c->max_bidi + 4;
    uint8_t *o =
        hb_h3_frame_varint_put(c->ctrl + c->ctrl_len, HB_H3_FRAME_GOAWAY, (uint64_t)c->goaway_id);
    c->ctrl_len = (size_t)(o - c->ctrl);
    return 0;
}

void hb__h3_consumed(h3conn *c, int64_t id, size_t n)
{
    (void)ngtcp2_conn_extend_max_stream_offset(c->q, id, n);
    ngtcp2_conn_extend_max_offset(c->q, n);
}

/* ---- the send queue ---- */

void hb__h3_wq_add(h3conn *c, h3stream *st)
{
    if (st->queued || st->wshut || st->fin_sent || st->fc_blocked || !st->hdr_len) return;
    st->queued = 1;
    st->wnext = NULL;
    st->wprev = c->wq_tail;
    if (c->wq_tail)
        c->wq_tail->wnext = st;
    else
        c->wq = st;
    c->wq_tail = st;
}

void hb__h3_wq_del(h3conn *c, h3stream *st)
{
    if (!st->queued) return;
    st->queued = 0;
    if (st->wprev)
        st->wprev->wnext = st->wnext;
    else
        c->wq = st->wnext;
    if (st->wnext)
        st->wnext->wprev = st->wprev;
    else
        c->wq_tail = st->wprev;
    st->wprev = st->wnext = NULL;
}

size_t hb__h3_next(h3conn *c, int64_t *sid, ngtcp2_vec **v, int *fin, h3stream **out)
{
    *sid = -1;
    *fin = 0;
    *out = NULL;
    if (!c->h) return 0;
    if (c->ctrl_sent < c->ctrl_len && !c->ctrl_blocked) {
        c->cvec.base = c->ctrl + c->ctrl_sent;
        c->cvec.len = c->ctrl_len - c->ctrl_sent;
        *v = &c->cvec;
        *sid = c->ctrl_sid;
        return 1;
    }
    if (!ngtcp2_conn_get_max_data_left(c->q)) return 0;
    while (c->wq) {
        h3stream *st = c->wq;
        hb__h3_fill(c, st);
        if (st->out_n || st->gen_done) {
            *sid = st->id;
            *v = st->out;
            *fin = st->gen_done;
            *out = st;
            return st->out_n;
        }
        hb__h3_wq_del(c, st); /* waiting for a timer or an acknowledgment */
    }
    return 0;
}

void hb__h3_wrote(h3conn *c, h3stream *st, size_t n, int fin)
{
    if (!st) {
        c->ctrl_sent += n;
        return;
    }
    unsigned i = 0;
    while (n && i < st->out_n) {
        if (n >= st->out[i].len) {
            n -= st->out[i].len;
            i++;
        } else {
            st->out[i].base += n;
            st->out[i].len -= n;
            n = 0;
        }
    }
    if (i) {
        memmove(st->out, st->out + i, (st->out_n - i) * sizeof *st->out);
        st->out_n = (uint8_t)(st->out_n - i);
    }
    if (fin && st->out_n == 0 && st->gen_done) {
        st->fin_sent = 1;
        hb__h3_wq_del(c, st);
    }
}

void hb__h3_wblocked(h3conn *c, h3stream *st)
{
    if (!st) {
        c->ctrl_blocked = 1;
        return;
    }
    st->fc_blocked = 1;
    hb__h3_wq_del(c, st);
}

void hb__h3_wshut(h3conn *c, h3stream *st)
{
    if (!st) {
        c->ctrl_sent = c->ctrl_len;
        return;
    }
    st->wshut = 1;
    hb__h3_wq_del(c, st);
}

void hb__h3_unblock(h3conn *c, int64_t id, void *sud)
{
    if (id == c->ctrl_sid) {
        c->ctrl_blocked = 0;
        return;
    }
    h3stream *st = ngtcp2_is_bidi_stream(id) ? sud : NULL;
    if (!st || !st->fc_blocked) return;
    st->fc_blocked = 0;
    hb__h3_wq_add(c, st);
}

void hb__h3_stream_error(h3conn *c, h3stream *st, uint64_t code)
{
    st->rd_off = 1;
    hb__h3_wshut(c, st);
    (void)ngtcp2_conn_shutdown_stream(c->q, st->id, code);
    ADD(c->s->st->rst_sent, 1);
    hb__h3_pend(c);
}

void hb__h3_peer_reset(h3conn *c, int64_t id, void *sud)
{
    ADD(c->s->st->rst_recv, 1);
    if (!ngtcp2_is_bidi_stream(id)) return;
    h3stream *st = sud;
    if (st && !st->zombie) {
        st->peer_reset = 1;
        st->rd_off = 1;
    }
}

void hb__h3_peer_stop(h3conn *c, int64_t id, void *sud)
{
    if (!ngtcp2_is_bidi_stream(id)) return;
    h3stream *st = sud;
    if (!st) return;
    st->rd_off = 1;
    hb__h3_wshut(c, st); /* ngtcp2 resets the stream */
}

/* ---- the peer's unidirectional streams ---- */

static int control_frame(h3conn *c, const hb_h3_frame_ev *ev)
{
    char err[HB_ERR_LEN];
    if (!c->peer_settings && ev->type != HB_H3_FRAME_SETTINGS)
        return conn_error(c, HB_H3_MISSING_SETTINGS);
    int rc = hb_h3_frame_allowed(HB_H3_ON_CONTROL, ev->type);
    if (rc < 0) return conn_error(c, (uint64_t)-rc);
    uint64_t v;
    switch (ev->type) {
    case HB_H3_FRAME_SETTINGS: {
        if (c->peer_settings) return conn_error(c, HB_H3_FRAME_UNEXPECTED);
        hb_h3_conn_settings s;
        if ((rc = hb_h3_settings_decode(ev->payload, ev->len, &s, err)) < 0)
            return conn_error(c, (uint64_t)-rc);
        c->peer_settings = 1;
        c->crd.report_skipped = 0;
        return 0;
    }
    case HB_H3_FRAME_GOAWAY:
        if ((rc = hb_h3_frame_varint_payload(ev->payload, ev->len, &v, err)) < 0)
            return conn_error(c, (uint64_t)-rc);
        if (v > c->peer_goaway) return conn_error(c, HB_H3_ID_ERROR);
        c->peer_goaway = v;
        return 0;
    case HB_H3_FRAME_MAX_PUSH_ID:
    case HB_H3_FRAME_CANCEL_PUSH: /* we never push */
        if ((rc = hb_h3_frame_varint_payload(ev->payload, ev->len, &v, err)) < 0)
            return conn_error(c, (uint64_t)-rc);
        return 0;
    default:
        return 0;
    }
}

static int recv_uni(h3conn *c, int64_t id, void *sud, const uint8_t *p, size_t n, int fin)
{
    struct h3uni *u = sud;
    if (!u) {
        if (c->nuni == UNI_MAX) { /* beyond what the peer may open at once: not ours to read */
            (void)ngtcp2_conn_shutdown_stream_read(c->q, id, HB_H3_STREAM_CREATION_ERROR);
            return 0;
        }
        u = &c->uni[c->nuni++];
        memset(u, 0, sizeof *u);
        u->sid = id;
        if (ngtcp2_conn_set_stream_user_data(c->q, id, u) != 0)
            return conn_error(c, HB_H3_INTERNAL_ERROR);
    }
    if (!u->typed) {
        int done;
        size_t k = hb_h3_varint_feed(&u->vr, p, n, &done);
        p += k;
        n -= k;
        if (!done) return 0;
        u->typed = 1;
        u->type = u->vr.v;
        uint8_t *seen = u->type == HB_H3_STREAM_CONTROL         ? &c->peer_ctrl
                        : u->type == HB_H3_STREAM_QPACK_ENCODER ? &c->peer_enc
                        : u->type == HB_H3_STREAM_QPACK_DECODER ? &c->peer_dec
                                                                : NULL;
        if (seen) {
            if (*seen) return conn_error(c, HB_H3_STREAM_CREATION_ERROR);
            *seen = 1;
        } else if (u->type == HB_H3_STREAM_PUSH) { /* only a server pushes */
            return conn_error(c, HB_H3_STREAM_CREATION_ERROR);
        } else { /* unknown or reserved: ignored, the peer asked to stop (RFC 9114 6.2) */
            (void)ngtcp2_conn_shutdown_stream_read(c->q, id, HB_H3_STREAM_CREATION_ERROR);
            return 0;
        }
    }
    char err[HB_ERR_LEN];
    int rc;
    switch (u->type) {
    case HB_H3_STREAM_CONTROL:
        while (n) {
            hb_h3_frame_ev ev;
            ssize_t k = hb_h3_frame_read(&c->crd, p, n, &ev, err);
            if (k < 0) return conn_error(c, (uint64_t)-k);
            p += k;
            n -= (size_t)k;
            if (ev.kind == HB_H3_EV_NEED_MORE) break;
            if (ev.kind == HB_H3_EV_DATA) return conn_error(c, HB_H3_FRAME_UNEXPECTED);
            if (ev.kind == HB_H3_EV_SKIPPED) { /* an unknown or reserved type before SETTINGS */
                if (!c->peer_settings) return conn_error(c, HB_H3_MISSING_SETTINGS);
                continue;
            }
            if ((rc = control_frame(c, &ev)) != 0) return rc;
        }
        break;
    case HB_H3_STREAM_QPACK_ENCODER:
        if ((rc = hb_qpack_peer_encoder_stream(p, n, err)) < 0) return conn_error(c, (uint64_t)-rc);
        break;
    case HB_H3_STREAM_QPACK_DECODER:
        if ((rc = hb_qpack_peer_decoder_stream(&u->ds, p, n, err)) < 0)
            return conn_error(c, (uint64_t)-rc);
        break;
    default:
        return 0;
    }
    return fin ? conn_error(c, HB_H3_CLOSED_CRITICAL_STREAM) : 0;
}

/* ---- request streams ---- */

typedef struct fctx {
    h3conn *c;
    h3stream *st;
    uint8_t trailers, regular, bad, seen;
} fctx;

enum { SEEN_METHOD = 1, SEEN_PATH = 2, SEEN_SCHEME = 4, SEEN_AUTHORITY = 8 };

static int name_is(const char *n, size_t nl, const char *lit, size_t ll)
{
    return nl == ll && memcmp(n, lit, ll) == 0;
}
#define IS(lit) name_is(name, nl, (lit), sizeof(lit) - 1)

/* One field of the request's head: the pseudo-headers into the slot, the rest
 * checked as RFC 9114 4.2 and 4.3.1 ask (malformed: the stream's error). */
static void on_field(void *ud, const char *name, size_t nl, const char *value, size_t vl)
{
    fctx *f = ud;
    h3stream *st = f->st;
    if (f->bad) return;
    if (nl && name[0] == ':') {
        uint8_t bit = IS(":method")      ? SEEN_METHOD
                      : IS(":path")      ? SEEN_PATH
                      : IS(":scheme")    ? SEEN_SCHEME
                      : IS(":authority") ? SEEN_AUTHORITY
                                         : 0;
        if (f->trailers || f->regular || !bit || (f->seen & bit)) {
            f->bad = 1;
            return;
        }
        f->seen |= bit;
        if (bit == SEEN_METHOD) {
            if (vl >= sizeof st->method) {
                st->too_large = 1;
                return;
            }
            memcpy(st->method, value, vl);
            st->mlen = vl;
        } else if (bit == SEEN_PATH) {
            if (vl > PATH_MAX_LEN) {
                st->too_large = 1;
                return;
            }
            memcpy(st->path, value, vl);
            st->plen = vl;
        }
        return;
    }
    f->regular = 1;
    for (size_t i = 0; i < nl; i++)
        if (name[i] >= 'A' && name[i] <= 'Z') {
            f->bad = 1;
            return;
        }
    if (f->trailers) return;
    if (IS("content-length")) {
        uint64_t v = 0;
        if (vl == 0 || vl > 18) {
            f->bad = 1;
            return;
        }
        for (size_t i = 0; i < vl; i++) {
            if (value[i] < '0' || value[i] > '9') {
                f->bad = 1;
                return;
            }
            v = v * 10 + (uint64_t)(value[i] - '0');
        }
        if (st->clen != UINT64_MAX && st->clen != v) f->bad = 1;
        st->clen = v;
    } else if (IS("connection") || IS("keep-alive") || IS("proxy-connection") ||
               IS("transfer-encoding") || IS("upgrade") ||
               (IS("te") && !(vl == 8 && memcmp(value, "trailers", 8) == 0))) {
        f->bad = 1;
    }
}

/* The values on_field reads: the rest (user-agent, accept, :authority...) are only
 * named, so their Huffman code is skipped, not decoded (no route reads a header). */
static int want_value(void *ud, const char *name, size_t nl)
{
    (void)ud;
    return IS(":method") || IS(":path") || IS("content-length") || IS("te");
}
#undef IS

static h3stream *request_new(h3conn *c, int64_t id)
{
    hb_h3_server *s = c->s;
    ADD(s->st->streams, 1);
    if (id > c->max_bidi) c->max_bidi = id;
    h3stream *st = NULL;
    if (!(c->goaway_id >= 0 && id >= c->goaway_id) && c->nlive < s->cfg.max_streams + 16u)
        st = hb__h3_stream_new(c);
    if (!st) {
        (void)ngtcp2_conn_shutdown_stream(c->q, id, HB_H3_REQUEST_REJECTED);
        return NULL;
    }
    st->id = id;
    st->early = c->rx_early;
    st->clen = UINT64_MAX;
    /* the request's deadline runs from its first byte, whatever the frames it starts */
    st->req_deadline = hb__h3_now(s) + (uint64_t)s->cfg.request_timeout_ms * NS_PER_MS;
    c->timers = 1;
    c->dirty = 1;
    hb_h3_frame_reader_init(&st->rd, st->hbuf, s->cfg.max_header_list, s->cfg.max_header_list);
    if (ngtcp2_conn_set_stream_user_data(c->q, id, st) != 0) {
        hb__h3_stream_release(c, st, 0);
        return NULL;
    }
    return st;
}

/* A malformed request (RFC 9114 4.1.2): the stream ends with H3_MESSAGE_ERROR. */
static void message_error(h3conn *c, h3stream *st)
{
    hb__h3_stream_error(c, st, HB_H3_MESSAGE_ERROR);
}

static int head_frame(h3conn *c, h3stream *st, const hb_h3_frame_ev *ev, int fin)
{
    char err[HB_ERR_LEN];
    fctx f = {c, st, st->phase == 1, 0, 0, 0};
    int rc = hb_qpack_decode_some(ev->payload, ev->len, c->s->qscratch, c->s->cfg.max_header_list,
                                  want_value, on_field, &f, err);
    if (rc < 0) return conn_error(c, (uint64_t)-rc);
    if (f.trailers) {
        st->phase = 2;
        if (f.bad) message_error(c, st);
        return 0;
    }
    st->phase = 1;
    if (rc == HB_QPACK_TOO_LARGE) {
        st->too_large = 1;
    } else if (!st->too_large) {
        int connect = st->mlen == 7 && memcmp(st->method, "CONNECT", 7) == 0;
        int need = connect ? SEEN_METHOD | SEEN_AUTHORITY : SEEN_METHOD | SEEN_PATH | SEEN_SCHEME;
        if (f.bad || (f.seen & need) != need || (connect && (f.seen & (SEEN_PATH | SEEN_SCHEME))) ||
            (!connect && st->plen == 0)) {
            message_error(c, st);
            return 0;
        }
    }
    hb__h3_head(c, st, fin);
    return 0;
}

static int recv_request(h3conn *c, h3stream *st, const uint8_t *p, size_t n, int fin, size_t *held)
{
    char err[HB_ERR_LEN];
    while (n && !st->rd_off) {
        hb_h3_frame_ev ev;
        ssize_t k = hb_h3_frame_read(&st->rd, p, n, &ev, err);
        if (k < 0) {
            if (k == -HB_H3_EXCESSIVE_LOAD && st->rd.type == HB_H3_FRAME_HEADERS && !st->phase) {
                /* a head longer encoded than max_header_list is longer decoded: 431,
                 * and the rest of the stream is not read */
                st->too_large = 1;
                st->phase = 1;
                st->rd_off = 1;
                (void)ngtcp2_conn_shutdown_stream_read(c->q, st->id, HB_H3_NO_ERROR);
                hb__h3_head(c, st, 1);
                return 0;
            }
            return conn_error(c, (uint64_t)-k);
        }
        p += k;
        n -= (size_t)k;
        if (ev.kind == HB_H3_EV_NEED_MORE) break;
        if (ev.kind == HB_H3_EV_DATA) {
            if (st->phase != 1) return conn_error(c, HB_H3_FRAME_UNEXPECTED);
            if (st->clen != UINT64_MAX && st->body_bytes + ev.len > st->clen) {
                message_error(c, st);
                return 0;
            }
            if (ev.len) *held += hb__h3_body(c, st, ev.payload, ev.len);
            continue;
        }
        int rc = hb_h3_frame_allowed(HB_H3_ON_REQUEST, ev.type);
        if (rc < 0) return conn_error(c, (uint64_t)-rc);
        if (ev.type == HB_H3_FRAME_PUSH_PROMISE) return conn_error(c, HB_H3_FRAME_UNEXPECTED);
        if (ev.type != HB_H3_FRAME_HEADERS) continue;
        if (st->phase == 2) return conn_error(c, HB_H3_FRAME_UNEXPECTED);
        if ((rc = head_frame(c, st, &ev, fin && n == 0)) != 0) return rc;
    }
    if (fin && !st->rd_off) {
        if (!hb_h3_frame_reader_idle(&st->rd)) return conn_error(c, HB_H3_FRAME_ERROR);
        if (st->phase == 0) {
            hb__h3_stream_error(c, st, HB_H3_REQUEST_INCOMPLETE);
            return 0;
        }
        if (st->clen != UINT64_MAX && st->body_bytes != st->clen) {
            message_error(c, st);
            return 0;
        }
        st->rd_off = 1;
        st->req_done = 1;
        hb__h3_finish(c, st);
    }
    return 0;
}

int hb__h3_stream_recv(h3conn *c, int64_t id, void *sud, const uint8_t *p, size_t n, int fin)
{
    static const uint8_t none[1];
    if (!p) p = none; /* a FIN alone */
    if (!ngtcp2_is_bidi_stream(id)) {
        int rc = recv_uni(c, id, sud, p, n, fin);
        if (rc == 0) hb__h3_consumed(c, id, n);
        return rc;
    }
    h3stream *st = sud ? sud : request_new(c, id);
    size_t held = 0;
    int rc = 0;
    if (st && !st->zombie) rc = recv_request(c, st, p, n, fin, &held);
    if (rc) return rc;
    /* an echo body is buffered until the request ends: the stream's credit goes back,
     * the connection's is held, so a connection's buffered uploads stay within its
     * flow-control window (CONN_WINDOW) */
    (void)ngtcp2_conn_extend_max_stream_offset(c->q, id, n);
    ngtcp2_conn_extend_max_offset(c->q, n - held);
    return 0;
}

int hb__h3_closed(h3conn *c, int64_t id, void *sud)
{
    if (!c->h) return 0;
    if (!ngtcp2_is_bidi_stream(id)) {
        struct h3uni *u = (id & 1) ? NULL : sud; /* ours (odd IDs) carry no record */
        if (u && u->typed && u->type <= HB_H3_STREAM_QPACK_DECODER)
            return conn_error(c, HB_H3_CLOSED_CRITICAL_STREAM);
        return 0;
    }
    h3stream *st = sud;
    if (st && st->zombie) { /* timed out: released and credited then */
        hb__h3_zombie_free(c, st);
        return 0;
    }
    if (st) hb__h3_stream_release(c, st, st->peer_reset || !st->responded);
    hb__h3_stream_credit(c);
    return 0;
}

#else
typedef int hb__h3_server_h3_unused;
#endif
