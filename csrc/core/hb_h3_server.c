/* hb_h3_server.c - the HTTP/3 endpoint on ngtcp2 + nghttp3 + GnuTLS (see
 * hb_h3_server.h).
 *
 * ngtcp2 does QUIC (packets, loss recovery, flow control), GnuTLS the TLS 1.3
 * handshake through ngtcp2_crypto_gnutls, nghttp3 the HTTP/3 framing and
 * QPACK; this file keeps the connection table and answers the routes. Bodies
 * go out through one nghttp3 read_data callback that points nghttp3 at the
 * shared content buffer (or at the stream's own text, echo buffer or stats
 * page, which live until the stream closes). */
#include "hb_h3_server.h"

/* Without the QUIC libraries (HB_NO_H3) hb_h3_server_none.c stands in for this file. */
#ifndef HB_NO_H3

#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <nghttp3/nghttp3.h>
#include <ngtcp2/ngtcp2.h>
#include <ngtcp2/ngtcp2_crypto.h>
#include <ngtcp2/ngtcp2_crypto_gnutls.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hb_common.h"
#include "hb_content.h"

#define SCIDLEN 18
#define PATH_MAX_LEN 4096
#define NS_PER_MS 1000000ull
#define ECHO_MAX (16u << 20) /* an /echo body beyond this is answered 413 */
#define NVEC 16
#define CHUNK (16 * 1024) /* bytes of generated content per vector handed to nghttp3 */
#define STREAM_WINDOW (1u << 20)
#define CONN_WINDOW (16u << 20)

#define ADD(field, n) __atomic_store_n(&(field), (field) + (n), __ATOMIC_RELAXED)

enum src { SRC_NONE, SRC_CONTENT, SRC_MEM };
enum wait { W_NONE, W_DELAY, W_DRIP, W_STALL };
enum cstate { C_OPEN, C_CLOSING, C_DRAINING };

typedef struct h3stream {
    struct h3stream *prev, *next; /* live list / free list (next only) */
    int64_t id;
    uint8_t counted, status_owed, responded, head_only, src, wait, echo, too_large;
    uint8_t no_eof, reset_owed, blocked, peer_reset, early, req_done;
    hb_route_req rq;
    uint64_t deadline;
    uint64_t req_deadline; /* the request must be complete by then (until req_done) */
    uint64_t soff;        /* content offset (SRC_CONTENT) or byte index (SRC_MEM) handed out next */
    uint64_t left, avail; /* body bytes still to hand out / that may be handed out now */
    const char *mem;
    uint64_t body_bytes;
    uint32_t crc;
    uint64_t hdr_bytes;
    char *stats_doc;
    char *ebuf; /* echo: the request body (kept across reuse) */
    size_t ecap, elen;
    size_t mlen, plen;
    char method[16];
    char stbuf[4];
    char clbuf[24];
    char jbuf[96];
    char path[PATH_MAX_LEN];
} h3stream;

typedef struct h3conn {
    struct h3conn *prev, *next;   /* the endpoint's connections */
    struct h3conn *pnext, *pprev; /* the send list: connections that may have packets to write */
    uint8_t pending, state, hs_done, timers, close_queued, counted_error;
    int h3err;       /* the nghttp3 error that failed a callback, for the CONNECTION_CLOSE */
    uint32_t credit; /* request streams closed whose MAX_STREAMS credit is not yet given back */
    uint8_t dirty;   /* touched since dl was computed: the endpoint's deadline scan recomputes it */
    uint64_t dl;     /* the connection's earliest timer, as of its last touch */
    hb_h3_server *s;
    ngtcp2_conn *q;
    nghttp3_conn *h;
    gnutls_session_t tls;
    ngtcp2_crypto_conn_ref ref;
    struct sockaddr_storage local, peer;
    socklen_t llen, plen;
    ngtcp2_cid odcid; /* the client's first DCID (also in the table while the conn lives) */
    uint64_t close_until;
    size_t closelen;
    h3stream *live, *free;
    uint32_t nlive;
    uint8_t closebuf[HB_H3_MAX_DATAGRAM];
} h3conn;

typedef struct cident {
    h3conn *c; /* NULL: empty; TOMB: deleted */
    uint8_t len;
    uint8_t id[NGTCP2_MAX_CIDLEN];
} cident;

struct hb_h3_server {
    hb_h3_server_config cfg;
    hb_h3_server_stats *st;
    gnutls_certificate_credentials_t cred;
    gnutls_priority_t prio;
    uint8_t reset_secret[32];
    uint8_t ticket_key[HB_H3_TICKET_KEY_LEN];
    gnutls_datum_t ticket; /* .size 0: no session tickets */
    h3conn *conns;
    h3conn *phead, *ptail;
    int burst; /* datagrams the head of the send list wrote in a row */
    int nconns;
    cident *tab;
    size_t tcap, tused; /* used counts tombstones too */
    /* one stateless packet (version negotiation) waiting to be sent */
    size_t vnlen;
    struct sockaddr_storage vnpeer;
    socklen_t vnplen;
    uint8_t vnbuf[256];
};

static h3conn TOMB_CONN;
#define TOMB (&TOMB_CONN)

static const char CT_OCTET[] = "application/octet-stream";
static const char CT_TEXT[] = "text/plain";
static const char CT_JSON[] = "application/json";
static const uint8_t ALPN_H3[] = "h3";

static uint64_t now_of(const hb_h3_server *s)
{
    return *s->cfg.now;
}

/* ---- connection ID table (open addressing) ---- */

static size_t cid_hash(const uint8_t *p, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 1099511628211ull;
    return (size_t)(h ^ (h >> 29));
}

static cident *cid_slot(hb_h3_server *s, const uint8_t *p, size_t n, int for_insert)
{
    size_t mask = s->tcap - 1;
    cident *tomb = NULL;
    for (size_t i = cid_hash(p, n) & mask;; i = (i + 1) & mask) {
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

static int cid_grow(hb_h3_server *s)
{
    size_t ncap = s->tcap * 2;
    cident *old = s->tab, *t = calloc(ncap, sizeof *t);
    if (!t) return -1;
    size_t ocap = s->tcap;
    s->tab = t;
    s->tcap = ncap;
    s->tused = 0;
    for (size_t i = 0; i < ocap; i++) {
        if (!old[i].c || old[i].c == TOMB) continue;
        *cid_slot(s, old[i].id, old[i].len, 1) = old[i];
        s->tused++;
    }
    free(old);
    return 0;
}

static int cid_add(hb_h3_server *s, const uint8_t *p, size_t n, h3conn *c)
{
    if ((s->tused + 1) * 2 > s->tcap && cid_grow(s) < 0) return -1;
    cident *e = cid_slot(s, p, n, 1);
    if (e->c && e->c != TOMB) {
        e->c = c; /* the same ID again: it now names c */
        return 0;
    }
    if (!e->c) s->tused++;
    e->c = c;
    e->len = (uint8_t)n;
    memcpy(e->id, p, n);
    return 0;
}

static void cid_del(hb_h3_server *s, const uint8_t *p, size_t n, const h3conn *c)
{
    if (n > NGTCP2_MAX_CIDLEN) return;
    cident *e = cid_slot(s, p, n, 0);
    if (e->c == c) e->c = TOMB;
}

/* ---- send list ---- */

static void pend(h3conn *c)
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

static void unpend(h3conn *c)
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

/* ---- streams ---- */

static h3stream *stream_new(h3conn *c)
{
    h3stream *st = c->free;
    if (st) {
        c->free = st->next;
    } else {
        st = malloc(sizeof *st); /* the pool grows to the peak of live streams */
        if (!st) return NULL;
        st->ebuf = NULL;
        st->ecap = 0;
    }
    char *eb = st->ebuf;
    size_t ec = st->ecap;
    memset(st, 0, offsetof(h3stream, path));
    st->ebuf = eb;
    st->ecap = ec;
    st->prev = NULL;
    st->next = c->live;
    if (c->live) c->live->prev = st;
    c->live = st;
    c->nlive++;
    return st;
}

static void count_status(h3conn *c, h3stream *st, int status)
{
    st->responded = 1;
    if (!st->counted || !st->status_owed) return;
    st->status_owed = 0;
    ADD(c->s->st->by_status[status >= 0 && status < 600 ? status : 0], 1);
}

static void stream_release(h3conn *c, h3stream *st, int peer_left)
{
    if (st->status_owed) {
        count_status(c, st, 0);
        if (peer_left) ADD(c->s->st->client_gone, 1);
    }
    if (st->prev)
        st->prev->next = st->next;
    else
        c->live = st->next;
    if (st->next) st->next->prev = st->prev;
    c->nlive--;
    free(st->stats_doc);
    st->stats_doc = NULL;
    st->next = c->free;
    c->free = st;
}

/* ---- responses ---- */

static nghttp3_ssize on_read_data(nghttp3_conn *h, int64_t id, nghttp3_vec *vec, size_t veccnt,
                                  uint32_t *flags, void *cud, void *sud)
{
    (void)h;
    (void)id;
    h3conn *c = cud;
    h3stream *st = sud;
    if (!st) return NGHTTP3_ERR_CALLBACK_FAILURE;
    size_t n = 0;
    while (n < veccnt && st->avail > 0) {
        size_t take = st->avail < CHUNK ? (size_t)st->avail : CHUNK;
        if (st->src == SRC_CONTENT)
            vec[n].base = (uint8_t *)(hb_content_buf() + st->soff % HB_CONTENT_PERIOD);
        else
            vec[n].base = (uint8_t *)(st->mem + st->soff);
        vec[n].len = take;
        st->soff += take;
        st->avail -= take;
        st->left -= take;
        n++;
    }
    if (st->left == 0) {
        if (st->no_eof) { /* a fault: the stream is reset once this much is out */
            if (!st->reset_owed) {
                st->reset_owed = 1;
                c->timers = 1;
            }
            if (n == 0) return NGHTTP3_ERR_WOULDBLOCK;
            return (nghttp3_ssize)n;
        }
        *flags |= NGHTTP3_DATA_FLAG_EOF;
        return (nghttp3_ssize)n;
    }
    if (n == 0) {
        if (st->wait == W_STALL && !st->deadline) {
            st->deadline = now_of(c->s) + st->rq.p.stall.ms * NS_PER_MS;
            c->timers = 1;
        }
        st->blocked = 1;
        return NGHTTP3_ERR_WOULDBLOCK;
    }
    return (nghttp3_ssize)n;
}

/* Submit the response head; a body of st->src follows unless body is 0.
 * cl < 0: no content-length. */
static void respond(h3conn *c, h3stream *st, int status, const char *ct, int64_t cl, int body)
{
    hb_h3_server *s = c->s;
    if (status < 100 || status > 999) status = 500;
    st->stbuf[0] = (char)('0' + status / 100);
    st->stbuf[1] = (char)('0' + status / 10 % 10);
    st->stbuf[2] = (char)('0' + status % 10);
    size_t cll = 0;
    if (cl >= 0) {
        char tmp[24];
        uint64_t v = (uint64_t)cl;
        do {
            tmp[cll++] = (char)('0' + v % 10);
            v /= 10;
        } while (v);
        for (size_t i = 0; i < cll; i++)
            st->clbuf[i] = tmp[cll - 1 - i];
    }
    nghttp3_nv nva[5];
    size_t n = 0;
#define NV(nm, v, vl) (nghttp3_nv){(uint8_t *)(nm), (uint8_t *)(v), sizeof(nm) - 1, (vl), 0}
    nva[n++] = NV(":status", st->stbuf, 3);
    nva[n++] = NV("server", "httpbench", 9);
    if (s->cfg.date) nva[n++] = NV("date", s->cfg.date, 29);
    nva[n++] = NV("content-type", ct, strlen(ct));
    if (cl >= 0) nva[n++] = NV("content-length", st->clbuf, cll);
#undef NV
    nghttp3_data_reader dr = {on_read_data};
    int with_body = body && !st->head_only;
    if (nghttp3_conn_submit_response(c->h, st->id, nva, n, with_body ? &dr : NULL) != 0) {
        count_status(c, st, 0);
        (void)ngtcp2_conn_shutdown_stream(c->q, st->id, NGHTTP3_H3_INTERNAL_ERROR);
        ADD(s->st->rst_sent, 1);
        return;
    }
    count_status(c, st, status);
    pend(c);
}

static void respond_mem(h3conn *c, h3stream *st, int status, const char *ct, const char *body,
                        size_t len)
{
    int nobody = status == 204 || status == 304;
    st->src = SRC_MEM;
    st->mem = body;
    st->soff = 0;
    st->left = st->avail = nobody ? 0 : len;
    respond(c, st, status, ct, nobody ? -1 : (int64_t)len, !nobody && len > 0);
}

#define RESPOND_LIT(c, st, code, lit)                                                              \
    respond_mem((c), (st), (code), CT_TEXT, (lit), sizeof(lit) - 1)

static void respond_content(h3conn *c, h3stream *st, int64_t announce, uint64_t n, uint64_t avail)
{
    st->src = SRC_CONTENT;
    st->soff = 0;
    st->left = n;
    st->avail = avail;
    respond(c, st, 200, CT_OCTET, announce, n > 0 || st->no_eof);
}

static void reset_stream(h3conn *c, h3stream *st)
{
    count_status(c, st, 0);
    (void)ngtcp2_conn_shutdown_stream(c->q, st->id, NGHTTP3_H3_INTERNAL_ERROR);
    ADD(c->s->st->rst_sent, 1);
    pend(c);
}

/* The request is complete (or, for echo-like routes, its head): answer it. */
static void finish(h3conn *c, h3stream *st)
{
    const hb_route_req *rq = &st->rq;
    uint64_t now = now_of(c->s);
    if (st->responded || st->wait == W_DELAY) return;
    if (rq->stats_page) {
        size_t len = 0;
        char *doc = rq->status == 200 && c->s->cfg.stats_json
                        ? c->s->cfg.stats_json(c->s->cfg.stats_arg, &len)
                        : NULL;
        if (rq->status != 200)
            RESPOND_LIT(c, st, 405, "method not allowed\n");
        else if (!doc)
            RESPOND_LIT(c, st, 503, "stats unavailable\n");
        else {
            st->stats_doc = doc;
            respond_mem(c, st, 200, CT_JSON, doc, len);
        }
        return;
    }
    switch (rq->status) {
    case 400:
        RESPOND_LIT(c, st, 400, "bad parameter\n");
        return;
    case 404:
        RESPOND_LIT(c, st, 404, "not found\n");
        return;
    case 405:
        RESPOND_LIT(c, st, 405, "method not allowed\n");
        return;
    default:
        break;
    }
    switch (rq->route) {
    case HB_ROUTE_ROOT:
        RESPOND_LIT(c, st, 200, "httpbench test server\n");
        break;
    case HB_ROUTE_BYTES:
        respond_content(c, st, (int64_t)rq->p.bytes.n, rq->p.bytes.n, rq->p.bytes.n);
        break;
    case HB_ROUTE_CHUNKED: /* HTTP/3 has no chunked coding: plain DATA, no content-length */
        respond_content(c, st, -1, rq->p.chunked.n, rq->p.chunked.n);
        break;
    case HB_ROUTE_SINK: {
        int n = snprintf(st->jbuf, sizeof st->jbuf, "{\"bytes\": %llu, \"crc32\": \"%08x\"}",
                         (unsigned long long)st->body_bytes, st->crc);
        respond_mem(c, st, 200, CT_JSON, st->jbuf, (size_t)n);
        break;
    }
    case HB_ROUTE_ECHO:
        if (st->too_large)
            RESPOND_LIT(c, st, 413, "request body too large\n");
        else
            respond_mem(c, st, 200, CT_OCTET, st->ebuf, st->elen);
        break;
    case HB_ROUTE_DELAY:
        if (rq->p.delay.ms == 0) {
            respond_content(c, st, (int64_t)rq->p.delay.bytes, rq->p.delay.bytes,
                            rq->p.delay.bytes);
            break;
        }
        st->wait = W_DELAY;
        st->deadline = now + rq->p.delay.ms * NS_PER_MS;
        c->timers = 1;
        break;
    case HB_ROUTE_STATUS:
        respond_mem(c, st, rq->p.status.code, CT_TEXT, "", 0);
        break;
    case HB_ROUTE_DRIP:
        if (rq->p.drip.n && !st->head_only) {
            st->wait = W_DRIP;
            st->deadline = now + rq->p.drip.interval_ms * NS_PER_MS;
            c->timers = 1;
        }
        respond_content(c, st, (int64_t)rq->p.drip.n, rq->p.drip.n, 0);
        break;
    case HB_ROUTE_CLOSE_AFTER_HEADERS:
        st->no_eof = 1;
        respond_content(c, st, (int64_t)rq->p.fault.bytes, 0, 0);
        break;
    case HB_ROUTE_CLOSE_MID_BODY:
        st->no_eof = 1;
        respond_content(c, st, (int64_t)rq->p.fault.bytes, rq->p.fault.bytes / 2,
                        rq->p.fault.bytes / 2);
        break;
    case HB_ROUTE_RESET:
        reset_stream(c, st);
        break;
    case HB_ROUTE_STALL:
        st->wait = W_STALL;
        respond_content(c, st, (int64_t)rq->p.stall.bytes, rq->p.stall.bytes,
                        rq->p.stall.bytes / 2);
        break;
    case HB_ROUTE_EARLY_RESPONSE:
        respond_mem(c, st, rq->p.early.status, CT_TEXT, "early response\n", 15);
        break;
    default:
        RESPOND_LIT(c, st, 404, "not found\n");
        break;
    }
}

/* The request did not come in within request_timeout: 408, and the client is
 * asked to stop sending (HTTP/1.1 closes the connection instead). */
static void req_timeout(h3conn *c, h3stream *st)
{
    st->req_deadline = 0;
    if (!st->counted && !st->rq.stats_page) { /* the head never completed */
        st->counted = 1;
        st->status_owed = 1;
        ADD(c->s->st->by_route[HB_ROUTE_TIMEOUT], 1);
    }
    st->src = SRC_NONE;
    st->wait = W_NONE;
    RESPOND_LIT(c, st, 408, "request timeout\n");
    (void)nghttp3_conn_shutdown_stream_read(c->h, st->id);
    (void)ngtcp2_conn_shutdown_stream_read(c->q, st->id, NGHTTP3_H3_NO_ERROR);
}

/* Run the stream timers due at now. */
static void stream_timers(h3conn *c)
{
    uint64_t now = now_of(c->s);
    int any = 0;
    h3stream *next;
    for (h3stream *st = c->live; st; st = next) {
        next = st->next;
        if (st->reset_owed) {
            st->reset_owed = 0;
            st->no_eof = 0;
            reset_stream(c, st);
            continue;
        }
        if (st->req_deadline && !st->req_done && !st->responded) {
            if (st->req_deadline <= now) {
                req_timeout(c, st);
                continue;
            }
            any = 1;
        }
        if (!st->wait) continue;
        if (st->deadline > now) {
            any = 1;
            continue;
        }
        if (st->wait == W_DELAY) {
            st->wait = W_NONE;
            st->deadline = 0;
            respond_content(c, st, (int64_t)st->rq.p.delay.bytes, st->rq.p.delay.bytes,
                            st->rq.p.delay.bytes);
        } else if (st->wait == W_DRIP) {
            uint64_t k = st->rq.p.drip.chunk;
            uint64_t room = st->left - st->avail;
            st->avail += k < room ? k : room;
            if (st->avail == st->left) {
                st->wait = W_NONE;
                st->deadline = 0;
            } else {
                st->deadline = now + st->rq.p.drip.interval_ms * NS_PER_MS;
                any = 1;
            }
            (void)nghttp3_conn_resume_stream(c->h, st->id);
        } else if (st->wait == W_STALL) {
            if (!st->deadline) continue; /* armed once the first half is out */
            st->wait = W_NONE;
            st->deadline = 0;
            st->avail = st->left;
            (void)nghttp3_conn_resume_stream(c->h, st->id);
        }
        pend(c);
    }
    c->timers = (uint8_t)any;
}

static uint64_t stream_deadline(h3conn *c)
{
    uint64_t d = UINT64_MAX;
    for (h3stream *st = c->live; st; st = st->next) {
        if (st->reset_owed) return now_of(c->s);
        if (st->req_deadline && !st->req_done && !st->responded && st->req_deadline < d)
            d = st->req_deadline;
        if (st->wait && st->deadline && st->deadline < d) d = st->deadline;
    }
    return d;
}

/* ---- nghttp3 callbacks ---- */

static int h_acked(nghttp3_conn *h, int64_t id, uint64_t n, void *cud, void *sud)
{
    (void)h;
    (void)id;
    (void)n;
    (void)cud;
    (void)sud;
    return 0;
}

/* A request stream closed: its credit goes back in batches of half the limit, since
 * ngtcp2 queues a MAX_STREAMS frame (ack-eliciting) whenever the credit grows: one
 * per request otherwise, often in a packet of its own. */
static void stream_credit(h3conn *c)
{
    uint32_t batch = c->s->cfg.max_streams / 2;
    if (++c->credit < (batch ? batch : 1)) return;
    ngtcp2_conn_extend_max_streams_bidi(c->q, c->credit);
    c->credit = 0;
}

static int h_stream_close(nghttp3_conn *h, int64_t id, uint64_t code, void *cud, void *sud)
{
    (void)h;
    (void)code;
    h3conn *c = cud;
    h3stream *st = sud;
    if (st) stream_release(c, st, st->peer_reset || !st->responded);
    if (ngtcp2_is_bidi_stream(id)) stream_credit(c);
    return 0;
}

static void consumed(h3conn *c, int64_t id, size_t n)
{
    (void)ngtcp2_conn_extend_max_stream_offset(c->q, id, n);
    ngtcp2_conn_extend_max_offset(c->q, n);
}

static int h_recv_data(nghttp3_conn *h, int64_t id, const uint8_t *p, size_t n, void *cud,
                       void *sud)
{
    (void)h;
    h3conn *c = cud;
    h3stream *st = sud;
    consumed(c, id, n);
    if (!st) return 0;
    ADD(c->s->st->body_in, n);
    st->body_bytes += n;
    if (st->rq.route == HB_ROUTE_SINK) {
        st->crc = hb_crc32(st->crc, p, n);
    } else if (st->echo && !st->too_large) {
        if (st->elen + n > ECHO_MAX) {
            st->too_large = 1;
            return 0;
        }
        if (st->elen + n > st->ecap) {
            size_t cap = st->ecap ? st->ecap : 4096;
            while (cap < st->elen + n)
                cap *= 2;
            char *b = realloc(st->ebuf, cap);
            if (!b) {
                st->too_large = 1;
                return 0;
            }
            st->ebuf = b;
            st->ecap = cap;
        }
        memcpy(st->ebuf + st->elen, p, n);
        st->elen += n;
    }
    return 0;
}

static int h_deferred_consume(nghttp3_conn *h, int64_t id, size_t n, void *cud, void *sud)
{
    (void)h;
    (void)sud;
    consumed(cud, id, n);
    return 0;
}

static int h_begin_headers(nghttp3_conn *h, int64_t id, void *cud, void *sud)
{
    (void)sud;
    h3conn *c = cud;
    ADD(c->s->st->streams, 1);
    h3stream *st = c->nlive < c->s->cfg.max_streams + 16u ? stream_new(c) : NULL;
    if (!st) {
        (void)ngtcp2_conn_shutdown_stream(c->q, id, NGHTTP3_H3_REQUEST_REJECTED);
        return 0;
    }
    st->id = id;
    st->req_deadline = now_of(c->s) + (uint64_t)c->s->cfg.request_timeout_ms * NS_PER_MS;
    c->timers = 1;
    if (nghttp3_conn_set_stream_user_data(h, id, st) != 0) {
        stream_release(c, st, 0);
        return NGHTTP3_ERR_CALLBACK_FAILURE;
    }
    return 0;
}

static int h_recv_header(nghttp3_conn *h, int64_t id, int32_t token, nghttp3_rcbuf *name,
                         nghttp3_rcbuf *value, uint8_t flags, void *cud, void *sud)
{
    (void)h;
    (void)id;
    (void)flags;
    h3conn *c = cud;
    h3stream *st = sud;
    if (!st) return 0;
    nghttp3_vec nv = nghttp3_rcbuf_get_buf(name), vv = nghttp3_rcbuf_get_buf(value);
    st->hdr_bytes += nv.len + vv.len + 32;
    if (st->hdr_bytes > c->s->cfg.max_header_list) {
        st->too_large = 1;
        return 0;
    }
    (void)token;
    if (nv.len == 7 && memcmp(nv.base, ":method", 7) == 0) {
        if (vv.len >= sizeof st->method) {
            st->too_large = 1;
            return 0;
        }
        memcpy(st->method, vv.base, vv.len);
        st->mlen = vv.len;
    } else if (nv.len == 5 && memcmp(nv.base, ":path", 5) == 0) {
        if (vv.len > PATH_MAX_LEN) {
            st->too_large = 1;
            return 0;
        }
        memcpy(st->path, vv.base, vv.len);
        st->plen = vv.len;
    }
    return 0;
}

static int h_end_headers(nghttp3_conn *h, int64_t id, int fin, void *cud, void *sud)
{
    h3conn *c = cud;
    h3stream *st = sud;
    if (!st) return 0;
    hb_route_req *rq = &st->rq;
    if (st->too_large) {
        st->counted = 1;
        st->status_owed = 1;
        ADD(c->s->st->by_route[HB_ROUTE_BAD_REQUEST], 1);
        RESPOND_LIT(c, st, 431, "request head too large\n");
        return 0;
    }
    hb_route_parse(st->method, st->mlen, st->path, st->plen, rq);
    st->head_only = (uint8_t)(st->mlen == 4 && memcmp(st->method, "HEAD", 4) == 0);
    if (!rq->stats_page) {
        st->counted = 1;
        st->status_owed = 1;
        ADD(c->s->st->by_route[rq->route], 1);
    }
    if (rq->status != 200) return 0;
    if (rq->route == HB_ROUTE_ECHO) {
        st->echo = 1;
        st->elen = 0;
    } else if (rq->route == HB_ROUTE_EARLY_RESPONSE) {
        /* answered before the body, which the client is then asked not to send
         * (STOP_SENDING with H3_NO_ERROR, RFC 9114 4.1) */
        finish(c, st);
        if (!fin) {
            (void)nghttp3_conn_shutdown_stream_read(h, id);
            (void)ngtcp2_conn_shutdown_stream_read(c->q, id, NGHTTP3_H3_NO_ERROR);
        }
    }
    return 0;
}

static int h_end_stream(nghttp3_conn *h, int64_t id, void *cud, void *sud)
{
    (void)h;
    (void)id;
    h3stream *st = sud;
    if (!st) return 0;
    st->req_done = 1;
    finish(cud, st);
    return 0;
}

static int h_stop_sending(nghttp3_conn *h, int64_t id, uint64_t code, void *cud, void *sud)
{
    (void)h;
    (void)sud;
    h3conn *c = cud;
    (void)ngtcp2_conn_shutdown_stream_read(c->q, id, code);
    return 0;
}

static int h_reset_stream(nghttp3_conn *h, int64_t id, uint64_t code, void *cud, void *sud)
{
    (void)h;
    (void)sud;
    h3conn *c = cud;
    (void)ngtcp2_conn_shutdown_stream_write(c->q, id, code);
    return 0;
}

static const nghttp3_callbacks H3_CALLBACKS = {
    h_acked,
    h_stream_close,
    h_recv_data,
    h_deferred_consume,
    h_begin_headers,
    h_recv_header,
    h_end_headers,
    NULL,
    NULL,
    NULL,
    h_stop_sending,
    h_end_stream,
    h_reset_stream,
    NULL,
};

/* The application keys are in: the HTTP/3 session and its three unidirectional streams. */
static int setup_h3(h3conn *c)
{
    if (ngtcp2_conn_get_max_local_streams_uni(c->q) < 3) return -1;
    nghttp3_settings set;
    nghttp3_settings_default(&set);
    set.max_field_section_size = c->s->cfg.max_header_list * 4u;
    if (nghttp3_conn_server_new(&c->h, &H3_CALLBACKS, &set, NULL, c) != 0) return -1;
    nghttp3_conn_set_max_client_streams_bidi(c->h, c->s->cfg.max_streams);
    int64_t ctrl, enc, dec;
    if (ngtcp2_conn_open_uni_stream(c->q, &ctrl, NULL) != 0 ||
        nghttp3_conn_bind_control_stream(c->h, ctrl) != 0 ||
        ngtcp2_conn_open_uni_stream(c->q, &enc, NULL) != 0 ||
        ngtcp2_conn_open_uni_stream(c->q, &dec, NULL) != 0 ||
        nghttp3_conn_bind_qpack_streams(c->h, enc, dec) != 0)
        return -1;
    return 0;
}

/* ---- ngtcp2 callbacks ---- */

static int q_recv_stream_data(ngtcp2_conn *q, uint32_t flags, int64_t id, uint64_t off,
                              const uint8_t *p, size_t n, void *ud, void *sud)
{
    (void)q;
    (void)off;
    (void)sud;
    h3conn *c = ud;
    if (!c->h) return NGTCP2_ERR_CALLBACK_FAILURE;
    nghttp3_ssize k =
        nghttp3_conn_read_stream(c->h, id, p, n, (flags & NGTCP2_STREAM_DATA_FLAG_FIN) != 0);
    if (k < 0) {
        c->h3err = (int)k;
        return NGTCP2_ERR_CALLBACK_FAILURE;
    }
    consumed(c, id, (size_t)k);
    return 0;
}

static int q_acked(ngtcp2_conn *q, int64_t id, uint64_t off, uint64_t n, void *ud, void *sud)
{
    (void)q;
    (void)off;
    (void)sud;
    h3conn *c = ud;
    if (c->h && nghttp3_conn_add_ack_offset(c->h, id, n) != 0) return NGTCP2_ERR_CALLBACK_FAILURE;
    return 0;
}

static int q_stream_close(ngtcp2_conn *q, uint32_t flags, int64_t id, uint64_t code, void *ud,
                          void *sud)
{
    (void)q;
    (void)sud;
    h3conn *c = ud;
    if (!(flags & NGTCP2_STREAM_CLOSE_FLAG_APP_ERROR_CODE_SET)) code = NGHTTP3_H3_NO_ERROR;
    if (!c->h) return 0;
    int rv = nghttp3_conn_close_stream(c->h, id, code);
    if (rv == NGHTTP3_ERR_STREAM_NOT_FOUND) {
        if (ngtcp2_is_bidi_stream(id)) stream_credit(c);
        return 0;
    }
    return rv == 0 ? 0 : NGTCP2_ERR_CALLBACK_FAILURE;
}

static int q_stream_reset(ngtcp2_conn *q, int64_t id, uint64_t size, uint64_t code, void *ud,
                          void *sud)
{
    (void)q;
    (void)size;
    (void)code;
    (void)sud;
    h3conn *c = ud;
    if (!c->h) return 0;
    h3stream *st = NULL;
    for (h3stream *x = c->live; x; x = x->next)
        if (x->id == id) st = x;
    if (st) st->peer_reset = 1;
    ADD(c->s->st->rst_recv, 1);
    return nghttp3_conn_shutdown_stream_read(c->h, id) == 0 ? 0 : NGTCP2_ERR_CALLBACK_FAILURE;
}

static int q_stop_sending(ngtcp2_conn *q, int64_t id, uint64_t code, void *ud, void *sud)
{
    (void)q;
    (void)code;
    (void)sud;
    h3conn *c = ud;
    if (!c->h) return 0;
    return nghttp3_conn_shutdown_stream_read(c->h, id) == 0 ? 0 : NGTCP2_ERR_CALLBACK_FAILURE;
}

static int q_extend_max_stream_data(ngtcp2_conn *q, int64_t id, uint64_t max, void *ud, void *sud)
{
    (void)q;
    (void)max;
    (void)sud;
    h3conn *c = ud;
    if (c->h && nghttp3_conn_unblock_stream(c->h, id) != 0) return NGTCP2_ERR_CALLBACK_FAILURE;
    return 0;
}

static int q_extend_max_remote_streams_bidi(ngtcp2_conn *q, uint64_t max, void *ud)
{
    (void)q;
    h3conn *c = ud;
    if (c->h) nghttp3_conn_set_max_client_streams_bidi(c->h, max);
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
    return cid_add(c->s, cid->data, len, c) == 0 ? 0 : NGTCP2_ERR_CALLBACK_FAILURE;
}

static int q_remove_cid(ngtcp2_conn *q, const ngtcp2_cid *cid, void *ud)
{
    (void)q;
    h3conn *c = ud;
    cid_del(c->s, cid->data, cid->datalen, c);
    return 0;
}

static int q_handshake_completed(ngtcp2_conn *q, void *ud)
{
    (void)q;
    h3conn *c = ud;
    c->hs_done = 1;
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
    return setup_h3(ud) == 0 ? 0 : NGTCP2_ERR_CALLBACK_FAILURE;
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
static void conn_free(h3conn *c, int peer_left)
{
    hb_h3_server *s = c->s;
    unpend(c);
    if (c->q) {
        size_t n = ngtcp2_conn_get_num_scid(c->q);
        ngtcp2_cid ids[16];
        if (n <= 16) {
            ngtcp2_conn_get_scid(c->q, ids);
            for (size_t i = 0; i < n; i++)
                cid_del(s, ids[i].data, ids[i].datalen, c);
        }
    }
    cid_del(s, c->odcid.data, c->odcid.datalen, c);
    /* any table entry left behind would dangle */
    for (size_t i = 0; i < s->tcap; i++)
        if (s->tab[i].c == c) s->tab[i].c = TOMB;
    while (c->live)
        stream_release(c, c->live, peer_left);
    while (c->free) {
        h3stream *st = c->free;
        c->free = st->next;
        free(st->ebuf);
        free(st);
    }
    if (c->h) nghttp3_conn_del(c->h);
    if (c->q) ngtcp2_conn_del(c->q);
    if (c->tls) gnutls_deinit(c->tls);
    if (c->prev)
        c->prev->next = c->next;
    else
        s->conns = c->next;
    if (c->next) c->next->prev = c->prev;
    s->nconns--;
    ADD(s->st->closed, 1);
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
static void conn_close(h3conn *c, const ngtcp2_connection_close_error *ccerr)
{
    uint64_t now = now_of(c->s);
    if (c->state != C_OPEN) return;
    c->dirty = 1;
    ngtcp2_path_storage ps;
    ngtcp2_path_storage_zero(&ps);
    ngtcp2_pkt_info pi;
    ngtcp2_ssize n = ngtcp2_conn_write_connection_close(c->q, &ps.path, &pi, c->closebuf,
                                                        sizeof c->closebuf, ccerr, now);
    c->state = C_CLOSING;
    c->close_until = now + 3 * ngtcp2_conn_get_pto(c->q);
    if (n > 0) {
        c->closelen = (size_t)n;
        c->close_queued = 1;
        pend(c);
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
    conn_close(c, &e);
}

static void conn_app_fail(h3conn *c, int h3err)
{
    ngtcp2_connection_close_error e;
    ngtcp2_connection_close_error_set_application_error(
        &e, nghttp3_err_infer_quic_app_error_code(h3err), NULL, 0);
    conn_count_error(c);
    conn_close(c, &e);
}

static const ngtcp2_callbacks Q_CALLBACKS = {
    .recv_client_initial = ngtcp2_crypto_recv_client_initial_cb,
    .recv_crypto_data = ngtcp2_crypto_recv_crypto_data_cb,
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
    .extend_max_remote_streams_bidi = q_extend_max_remote_streams_bidi,
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
    if (gnutls_init(&c->tls, GNUTLS_SERVER | GNUTLS_NO_END_OF_EARLY_DATA |
                                 GNUTLS_NO_AUTO_SEND_TICKET) != 0) {
        c->tls = NULL;
        return -1;
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

static h3conn *conn_new(hb_h3_server *s, const ngtcp2_pkt_hd *hd, const struct sockaddr *local,
                        socklen_t llen, const struct sockaddr *peer, socklen_t plen)
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
    set.initial_ts = now_of(s);
    set.max_window = 64u << 20;
    set.max_stream_window = 16u << 20;
    ngtcp2_transport_params tp;
    ngtcp2_transport_params_default(&tp);
    tp.initial_max_stream_data_bidi_local = STREAM_WINDOW;
    tp.initial_max_stream_data_bidi_remote = STREAM_WINDOW;
    tp.initial_max_stream_data_uni = STREAM_WINDOW;
    tp.initial_max_data = CONN_WINDOW;
    tp.initial_max_streams_bidi = s->cfg.max_streams;
    tp.initial_max_streams_uni = 3;
    tp.max_idle_timeout = (uint64_t)s->cfg.idle_timeout_ms * NGTCP2_MILLISECONDS;
    tp.stateless_reset_token_present = 1;
    tp.active_connection_id_limit = 7;
    tp.original_dcid = hd->dcid;
    if (ngtcp2_crypto_generate_stateless_reset_token(tp.stateless_reset_token, s->reset_secret,
                                                     sizeof s->reset_secret, &scid) != 0)
        goto fail;
    ngtcp2_path path = {
        {(ngtcp2_sockaddr *)&c->local, c->llen}, {(ngtcp2_sockaddr *)&c->peer, c->plen}, NULL};
    if (ngtcp2_conn_server_new(&c->q, &hd->scid, &scid, &path, hd->version, &Q_CALLBACKS, &set, &tp,
                               NULL, c) != 0) {
        c->q = NULL;
        goto fail;
    }
    if (tls_new(c) < 0) goto fail;
    ngtcp2_conn_set_tls_native_handle(c->q, c->tls);
    c->odcid = hd->dcid;
    if (cid_add(s, scid.data, scid.datalen, c) < 0 ||
        cid_add(s, hd->dcid.data, hd->dcid.datalen, c) < 0)
        goto fail;
    ADD(s->st->connections, 1);
    return c;
fail:
    ADD(s->st->connections, 1); /* counted as accepted, then closed */
    conn_free(c, 0);
    return NULL;
}

static void conn_recv(h3conn *c, const uint8_t *p, size_t n)
{
    hb_h3_server *s = c->s;
    c->dirty = 1;
    if (c->state == C_CLOSING) { /* answer with the CONNECTION_CLOSE again */
        if (c->closelen) {
            c->close_queued = 1;
            pend(c);
        }
        return;
    }
    if (c->state == C_DRAINING) return;
    ngtcp2_path path = {
        {(ngtcp2_sockaddr *)&c->local, c->llen}, {(ngtcp2_sockaddr *)&c->peer, c->plen}, NULL};
    ngtcp2_pkt_info pi = {0};
    int rv = ngtcp2_conn_read_pkt(c->q, &path, &pi, p, n, now_of(s));
    if (rv == 0) {
        pend(c);
        return;
    }
    if (rv == NGTCP2_ERR_DRAINING) { /* the peer closed */
        c->state = C_DRAINING;
        c->close_until = now_of(s) + 3 * ngtcp2_conn_get_pto(c->q);
        unpend(c);
        return;
    }
    if (rv == NGTCP2_ERR_DROP_CONN) {
        conn_count_error(c);
        conn_free(c, 0);
        return;
    }
    if (rv == NGTCP2_ERR_CALLBACK_FAILURE && c->h3err) {
        conn_app_fail(c, c->h3err);
        return;
    }
    conn_fail(c, rv);
}

/* One packet of c into buf: its length, 0 when c has nothing to send now, -1
 * when c was closed instead (the close packet is queued). */
static ngtcp2_ssize conn_write(h3conn *c, uint8_t *buf, size_t cap)
{
    uint64_t now = now_of(c->s);
    c->dirty = 1;
    size_t max = ngtcp2_conn_get_max_tx_udp_payload_size(c->q);
    if (max > cap) max = cap;
    for (;;) {
        int64_t sid = -1;
        int fin = 0;
        nghttp3_vec vec[NVEC];
        nghttp3_ssize nv = 0;
        if (c->h && ngtcp2_conn_get_max_data_left(c->q)) {
            nv = nghttp3_conn_writev_stream(c->h, &sid, &fin, vec, NVEC);
            if (nv < 0) {
                conn_app_fail(c, (int)nv);
                return -1;
            }
        }
        uint32_t flags = NGTCP2_WRITE_STREAM_FLAG_MORE | (fin ? NGTCP2_WRITE_STREAM_FLAG_FIN : 0);
        ngtcp2_ssize ndata = -1;
        ngtcp2_pkt_info pi;
        ngtcp2_ssize w = ngtcp2_conn_writev_stream(c->q, NULL, &pi, buf, max, &ndata, flags, sid,
                                                   (const ngtcp2_vec *)vec, (size_t)nv, now);
        if (w < 0) {
            if (w == NGTCP2_ERR_STREAM_DATA_BLOCKED) {
                nghttp3_conn_block_stream(c->h, sid);
                continue;
            }
            if (w == NGTCP2_ERR_STREAM_SHUT_WR) {
                nghttp3_conn_shutdown_stream_write(c->h, sid);
                continue;
            }
            if (w == NGTCP2_ERR_WRITE_MORE) {
                if (nghttp3_conn_add_write_offset(c->h, sid, (size_t)ndata) != 0) {
                    conn_app_fail(c, NGHTTP3_ERR_CALLBACK_FAILURE);
                    return -1;
                }
                continue;
            }
            conn_fail(c, (int)w);
            return -1;
        }
        if (ndata >= 0 && nghttp3_conn_add_write_offset(c->h, sid, (size_t)ndata) != 0) {
            conn_app_fail(c, NGHTTP3_ERR_CALLBACK_FAILURE);
            return -1;
        }
        if (w == 0) ngtcp2_conn_update_pkt_tx_time(c->q, now);
        return w;
    }
}

static uint64_t conn_deadline(h3conn *c)
{
    if (c->state != C_OPEN) return c->close_until;
    uint64_t d = ngtcp2_conn_get_expiry(c->q);
    if (c->timers) {
        uint64_t t = stream_deadline(c);
        if (t < d) d = t;
    }
    return d;
}

/* The connection's deadline, recomputed only when it was touched: the endpoint's
 * scan over its connections then costs a compare for each idle one. */
static uint64_t conn_dl(h3conn *c)
{
    if (c->dirty) {
        c->dirty = 0;
        c->dl = conn_deadline(c);
    }
    return c->dl;
}

static void conn_timer(h3conn *c)
{
    hb_h3_server *s = c->s;
    uint64_t now = now_of(s);
    c->dirty = 1;
    if (c->state != C_OPEN) {
        if (now >= c->close_until) conn_free(c, c->state == C_DRAINING);
        return;
    }
    if (ngtcp2_conn_get_expiry(c->q) <= now) {
        int rv = ngtcp2_conn_handle_expiry(c->q, now);
        if (rv == NGTCP2_ERR_IDLE_CLOSE) {
            ADD(s->st->idle_timeouts, 1);
            conn_free(c, 1);
            return;
        }
        if (rv != 0) {
            conn_fail(c, rv);
            return;
        }
        pend(c);
    }
    if (c->timers) stream_timers(c);
}

/* ---- endpoint ---- */

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
    if (gnutls_rnd(GNUTLS_RND_RANDOM, s->reset_secret, sizeof s->reset_secret) != 0) {
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
        conn_free(s->conns, 0);
    if (s->prio) gnutls_priority_deinit(s->prio);
    if (s->cred) gnutls_certificate_free_credentials(s->cred);
    free(s->tab);
    free(s);
}

static void version_negotiation(hb_h3_server *s, const ngtcp2_version_cid *vc,
                                const struct sockaddr *peer, socklen_t plen)
{
    ADD(s->st->version_negotiations, 1);
    if (s->vnlen) return; /* one waits already: this one is dropped */
    uint32_t sv[] = {NGTCP2_PROTO_VER_V1};
    uint8_t r = 0;
    if (gnutls_rnd(GNUTLS_RND_NONCE, &r, 1) != 0) r = 0x5a;
    ngtcp2_ssize n = ngtcp2_pkt_write_version_negotiation(
        s->vnbuf, sizeof s->vnbuf, r, vc->scid, vc->scidlen, vc->dcid, vc->dcidlen, sv, 1);
    if (n <= 0) return;
    s->vnlen = (size_t)n;
    memcpy(&s->vnpeer, peer, plen);
    s->vnplen = plen;
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
        ngtcp2_pkt_hd hd;
        if (ngtcp2_accept(&hd, p, n) != 0) {
            ADD(s->st->dropped, 1);
            return;
        }
        if (s->cfg.max_connections && (uint32_t)s->nconns >= s->cfg.max_connections) {
            ADD(s->st->refused, 1);
            ADD(s->st->dropped, 1);
            return;
        }
        c = conn_new(s, &hd, local, local_len, peer, peer_len);
        if (!c) {
            ADD(s->st->dropped, 1);
            return;
        }
    }
    conn_recv(c, p, n);
}

size_t hb_h3_server_send(hb_h3_server *s, uint8_t *buf, size_t cap, struct sockaddr_storage *peer,
                         socklen_t *peer_len)
{
    if (s->vnlen) {
        size_t n = s->vnlen;
        memcpy(buf, s->vnbuf, n);
        memcpy(peer, &s->vnpeer, s->vnplen);
        *peer_len = s->vnplen;
        s->vnlen = 0;
        ADD(s->st->packets_out, 1);
        ADD(s->st->bytes_out, n);
        return n;
    }
    while (s->phead) {
        h3conn *c = s->phead;
        ngtcp2_ssize w = 0;
        if (!c->close_queued && c->state == C_OPEN) w = conn_write(c, buf, cap);
        if (c->close_queued) { /* queued now or before */
            c->close_queued = 0;
            memcpy(buf, c->closebuf, c->closelen);
            w = (ngtcp2_ssize)c->closelen;
            unpend(c);
        }
        if (w <= 0) {
            unpend(c);
            s->burst = 0;
            continue;
        }
        memcpy(peer, &c->peer, c->plen);
        *peer_len = c->plen;
        ADD(s->st->packets_out, 1);
        ADD(s->st->bytes_out, (uint64_t)w);
        /* a download yields to the other connections every GSO-batch worth of datagrams */
        if (++s->burst >= 32 && c->pnext) {
            unpend(c);
            pend(c);
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
        uint64_t t = conn_dl(c);
        if (t < d) d = t;
    }
    return d;
}

void hb_h3_server_timer(hb_h3_server *s)
{
    uint64_t now = now_of(s);
    h3conn *next;
    for (h3conn *c = s->conns; c; c = next) {
        next = c->next;
        if (conn_dl(c) <= now) conn_timer(c);
    }
}

void hb_h3_server_shutdown(hb_h3_server *s)
{
    ngtcp2_connection_close_error e;
    ngtcp2_connection_close_error_set_application_error(&e, NGHTTP3_H3_NO_ERROR, NULL, 0);
    h3conn *next;
    for (h3conn *c = s->conns; c; c = next) {
        next = c->next;
        if (c->state == C_OPEN) conn_close(c, &e);
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
