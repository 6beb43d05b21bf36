/* hb_h2_server_stream.c - the HTTP/2 server's streams, responses and routes,
 * and the nghttp2 callbacks that drive them (see hb_h2_server.c). */
#include "h2/hb_h2_server_int.h"
#include "http/hb_route_plan.h"

#ifndef HB_NO_NGHTTP2

static const char CT_OCTET[] = "application/octet-stream";
static const char CT_TEXT[] = "text/plain";
static const char CT_JSON[] = "application/json";

/* ---- streams ---- */

static h2stream *stream_get(hb_h2_server *s, int32_t id)
{
    return nghttp2_session_get_stream_user_data(s->ng, id);
}

static h2stream *stream_new(hb_h2_server *s)
{
    h2stream *st = s->free;
    if (st) {
        s->free = st->next;
    } else {
        st = hb__h2_slab_malloc(sizeof *st,
                                s->slab); /* the pool grows to the peak of live streams */
        if (!st) return NULL;
        st->ebuf = NULL;
        st->ecap = 0;
    }
    char *eb = st->ebuf;
    size_t ec = st->ecap;
    memset(st, 0, offsetof(h2stream, path));
    st->ebuf = eb;
    st->ecap = ec;
    st->req_cl = -1;
    st->prev = NULL;
    st->next = s->live;
    if (s->live) s->live->prev = st;
    s->live = st;
    s->nlive++;
    return st;
}

void hb__h2_stream_release(hb_h2_server *s, h2stream *st)
{
    if (st->prev)
        st->prev->next = st->next;
    else
        s->live = st->next;
    if (st->next) st->next->prev = st->prev;
    s->nlive--;
    free(st->stats_doc);
    st->stats_doc = NULL;
    st->next = s->free;
    s->free = st;
}

static void count_status(hb_h2_server *s, h2stream *st, int status)
{
    st->responded = 1;
    if (!st->counted) return;
    st->status_owed = 0;
    ADD(s->st->by_status[status >= 0 && status < 600 ? status : 0], 1);
}

/* ---- responses ---- */

static ssize_t on_read(nghttp2_session *ng, int32_t id, uint8_t *buf, size_t length,
                       uint32_t *flags, nghttp2_data_source *src, void *user)
{
    (void)ng;
    (void)id;
    (void)buf;
    hb_h2_server *s = user;
    h2stream *st = src->ptr;
    if (st->src == SRC_EVENTS) return hb__h2_events_read(s, st, length, flags);
    if (st->src == SRC_ECHO) {
        size_t have = st->elen - st->erd;
        if (have == 0) {
            if (st->req_done) {
                *flags |= NGHTTP2_DATA_FLAG_EOF;
                return 0;
            }
            st->deferred = 1;
            return NGHTTP2_ERR_DEFERRED;
        }
        size_t n = have < length ? have : length;
        st->erd += n;
        *flags |= NGHTTP2_DATA_FLAG_NO_COPY;
        if (st->req_done && st->erd == st->elen) *flags |= NGHTTP2_DATA_FLAG_EOF;
        return (ssize_t)n;
    }
    if (st->avail == 0) {
        if (st->left == 0) {
            if (st->no_eof) { /* a fault that ends the connection here */
                s->term_pending = 1;
                s->term_code = NGHTTP2_INTERNAL_ERROR;
                st->deferred = 1;
                return NGHTTP2_ERR_DEFERRED;
            }
            *flags |= NGHTTP2_DATA_FLAG_EOF;
            return 0;
        }
        if (st->wait == W_STALL && !st->stall_armed) {
            st->stall_armed = 1;
            st->deadline = *s->cfg.now + st->rq.p.stall.ms * NS_PER_MS;
            s->timers = 1;
        }
        st->deferred = 1;
        return NGHTTP2_ERR_DEFERRED;
    }
    size_t n = st->avail < length ? (size_t)st->avail : length;
    st->avail -= n;
    st->left -= n;
    *flags |= NGHTTP2_DATA_FLAG_NO_COPY;
    if (st->left == 0 && !st->no_eof) *flags |= NGHTTP2_DATA_FLAG_EOF;
    return (ssize_t)n;
}

static int on_send_data(nghttp2_session *ng, nghttp2_frame *frame, const uint8_t *framehd,
                        size_t length, nghttp2_data_source *src, void *user)
{
    hb_h2_server *s = user;
    h2stream *st = src->ptr;
    if (st->src == SRC_EVENTS) return hb__h2_events_send(s, st, framehd, length);
    size_t pad = frame->data.padlen; /* never set by this server; handled for completeness */
    /* small generated payloads are copied behind their frame header, so a burst
     * of small responses is one contiguous buffer, not two iovecs each */
    int small = st->src == SRC_CONTENT && length <= SMALL_BODY;
    int copy = st->src != SRC_CONTENT || small;
    size_t need = 9 + pad + (copy ? length : 0);
    if (!hb__h2_room(s, need, 4 + (int)(length / HB_CONTENT_WIN)) || s->qbytes >= BATCH)
        return NGHTTP2_ERR_WOULDBLOCK;
    hb__h2_q_copy(s, framehd, 9);
    if (pad) {
        uint8_t pl = (uint8_t)(pad - 1);
        hb__h2_q_copy(s, &pl, 1);
    }
    if (small) {
        hb__h2_q_copy(s, hb_content_buf() + st->soff % HB_CONTENT_PERIOD, length);
        st->soff += length;
    } else if (st->src == SRC_CONTENT) {
        const char *content = hb_content_buf();
        size_t n = length;
        while (n) {
            size_t take = n < HB_CONTENT_WIN ? n : HB_CONTENT_WIN;
            hb__h2_q_iov(s, content + st->soff % HB_CONTENT_PERIOD, take);
            st->soff += take;
            n -= take;
        }
    } else if (st->src == SRC_MEM) {
        hb__h2_q_copy(s, st->mem + st->soff, length);
        st->soff += length;
    } else {
        hb__h2_q_copy(s, st->ebuf + st->epos, length);
        st->epos += length;
        (void)nghttp2_session_consume_stream(ng, st->id, length);
    }
    if (pad > 1) {
        memset(s->arena + s->alen, 0, pad - 1);
        hb__h2_q_iov(s, s->arena + s->alen, pad - 1);
        s->alen += pad - 1;
    }
    return 0;
}

#define NV(n, v, vl)                                                                               \
    {                                                                                              \
        (uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, (vl),                                       \
            NGHTTP2_NV_FLAG_NO_COPY_NAME | NGHTTP2_NV_FLAG_NO_COPY_VALUE                           \
    }

void hb__h2_respond(hb_h2_server *s, h2stream *st, int status, const char *ct, int64_t cl, int body)
{
    if (status < 100 || status > 999) status = 500;
    size_t cll = hb_route_head_digits(status, cl, st->stbuf, st->clbuf);
    nghttp2_nv nva[7];
    size_t n = 0;
    nva[n++] = (nghttp2_nv)NV(":status", st->stbuf, 3);
    nva[n++] = (nghttp2_nv)NV("server", "httpbench", 9);
    if (s->cfg.date) nva[n++] = (nghttp2_nv)NV("date", s->cfg.date, 29);
    if (s->cfg.alt_svc)
        nva[n++] = (nghttp2_nv)NV("alt-svc", s->cfg.alt_svc, strlen(s->cfg.alt_svc));
    nva[n++] = (nghttp2_nv)NV("content-type", ct, strlen(ct));
    if (cl >= 0) nva[n++] = (nghttp2_nv)NV("content-length", st->clbuf, cll);
    if (st->ev_sse) nva[n++] = (nghttp2_nv)NV("cache-control", "no-cache", 8);
    nghttp2_data_provider prd;
    prd.source.ptr = st;
    prd.read_callback = on_read;
    int with_body = body && !st->head_only;
    if (nghttp2_submit_response(s->ng, st->id, nva, n, with_body ? &prd : NULL) != 0) {
        (void)nghttp2_submit_rst_stream(s->ng, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_INTERNAL_ERROR);
        count_status(s, st, 0);
        return;
    }
    count_status(s, st, status);
}

static void respond_mem(hb_h2_server *s, h2stream *st, int status, const char *ct, const char *body,
                        size_t len)
{
    int nobody = status == 204 || status == 304;
    st->src = SRC_MEM;
    st->mem = body;
    st->soff = 0;
    st->left = st->avail = nobody ? 0 : len;
    hb__h2_respond(s, st, status, ct, nobody ? -1 : (int64_t)len, !nobody && len > 0);
}

#define RESPOND_LIT(s, st, code, lit)                                                              \
    respond_mem((s), (st), (code), CT_TEXT, (lit), sizeof(lit) - 1)

/* Generated content [0, n): `announce` is the content-length (-1: none). */
void hb__h2_respond_content(hb_h2_server *s, h2stream *st, int64_t announce, uint64_t n,
                            uint64_t avail)
{
    st->src = SRC_CONTENT;
    st->soff = 0;
    st->left = n;
    st->avail = avail;
    hb__h2_respond(s, st, 200, CT_OCTET, announce, n > 0 || st->no_eof);
}

static void respond_stats(hb_h2_server *s, h2stream *st)
{
    size_t len = 0;
    char *doc = s->cfg.stats_json ? s->cfg.stats_json(s->cfg.stats_arg, &len) : NULL;
    if (!doc) {
        RESPOND_LIT(s, st, 503, "stats unavailable\n");
        return;
    }
    st->stats_doc = doc;
    respond_mem(s, st, 200, CT_JSON, doc, len);
}

void hb__h2_stream_resume(hb_h2_server *s, h2stream *st)
{
    if (!st->deferred) return;
    st->deferred = 0;
    (void)nghttp2_session_resume_data(s->ng, st->id);
}

/* Carry out a route's plan with HTTP/2 framing. */
static void execute(hb_h2_server *s, h2stream *st, const hb_route_answer *a)
{
    switch (a->act) {
    case HB_ACT_STATS:
        respond_stats(s, st);
        return;
    case HB_ACT_RESET:
        count_status(s, st, 0);
        (void)nghttp2_submit_rst_stream(s->ng, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_INTERNAL_ERROR);
        return;
    case HB_ACT_DELAY:
        st->wait = W_DELAY;
        st->deadline = *s->cfg.now + a->wait_ms * NS_PER_MS;
        s->timers = 1;
        return;
    default:
        break;
    }
    if (a->src == HB_SRC_MEM) {
        respond_mem(s, st, a->status, a->ct, a->mem, a->n);
        return;
    }
    if (a->src == HB_SRC_EVENTS) {
        hb__h2_events_respond(s, st, a->ct, a->wait_ms);
        return;
    }
    if (a->wait == HB_WAIT_DRIP) {
        st->wait = W_DRIP;
        st->deadline = *s->cfg.now + a->wait_ms * NS_PER_MS;
        s->timers = 1;
    } else if (a->wait == HB_WAIT_STALL) {
        st->wait = W_STALL; /* armed once the first part is out */
    }
    if (a->no_eof) st->no_eof = 1;
    hb__h2_respond_content(s, st, a->cl, a->n, a->avail);
}

/* The request is complete (or, for an early response, its head): answer it
 * (the HTTP/1.1 side's finish_request). */
static void finish(hb_h2_server *s, h2stream *st)
{
    if (st->responded || st->wait == W_DELAY) return;
    hb_route_in in = {.body_bytes = st->body_bytes,
                      .crc = st->crc,
                      .head_only = st->head_only,
                      .jbuf = st->jbuf,
                      .jcap = sizeof st->jbuf,
                      .events_ok = 1};
    hb_route_answer a;
    hb_route_plan(&st->rq, &in, &a);
    execute(s, st, &a);
}

/* The request head is complete: route and count it; answer what answers
 * before the body (echo, early response, an oversized head). */
static void on_request(hb_h2_server *s, h2stream *st)
{
    hb_route_req *rq = &st->rq;
    if (st->too_large || st->bad_method) {
        st->counted = 1;
        st->status_owed = 1;
        ADD(s->st->by_route[HB_ROUTE_BAD_REQUEST], 1);
        if (st->too_large)
            RESPOND_LIT(s, st, 431, "request head too large\n");
        else
            RESPOND_LIT(s, st, 400, "bad request\n");
        return;
    }
    hb_route_parse(st->method, st->mlen, st->path, st->plen, rq);
    st->head_only = (uint8_t)(st->mlen == 4 && memcmp(st->method, "HEAD", 4) == 0);
    if (!rq->stats_page) {
        st->counted = 1;
        st->status_owed = 1;
        ADD(s->st->by_route[rq->route], 1);
    }
    if (rq->status != 200) return;
    if (rq->route == HB_ROUTE_ECHO) {
        st->echo = 1;
        st->src = SRC_ECHO;
        hb__h2_respond(s, st, 200, CT_OCTET, st->req_cl, 1);
    } else if (rq->route == HB_ROUTE_EARLY_RESPONSE) {
        /* answered before the body; nghttp2 then resets the upload with NO_ERROR */
        finish(s, st);
    }
}

/* ---- nghttp2 callbacks ---- */

static int on_begin_headers(nghttp2_session *ng, const nghttp2_frame *frame, void *user)
{
    hb_h2_server *s = user;
    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
    ADD(s->st->streams, 1);
    h2stream *st = s->nlive < s->cfg.max_concurrent_streams + 16u ? stream_new(s) : NULL;
    if (!st) {
        (void)nghttp2_submit_rst_stream(ng, NGHTTP2_FLAG_NONE, frame->hd.stream_id,
                                        NGHTTP2_REFUSED_STREAM);
        return 0;
    }
    st->id = frame->hd.stream_id;
    if (nghttp2_session_set_stream_user_data(ng, st->id, st) != 0) {
        hb__h2_stream_release(s, st);
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    }
    return 0;
}

static int on_header(nghttp2_session *ng, const nghttp2_frame *frame, const uint8_t *name,
                     size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
                     void *user)
{
    (void)flags;
    hb_h2_server *s = user;
    if (frame->hd.type != NGHTTP2_HEADERS) return 0;
    h2stream *st = nghttp2_session_get_stream_user_data(ng, frame->hd.stream_id);
    if (!st) return 0;
    st->hdr_bytes += namelen + valuelen + 32;
    if (st->hdr_bytes > s->cfg.max_header_list) {
        st->too_large = 1;
        if (st->hdr_bytes > (uint64_t)s->cfg.max_header_list * BOMB_FACTOR) {
            s->term_code = NGHTTP2_ENHANCE_YOUR_CALM; /* a header bomb: drop the connection */
            return NGHTTP2_ERR_CALLBACK_FAILURE;
        }
        return 0;
    }
    if (frame->headers.cat != NGHTTP2_HCAT_REQUEST) return 0; /* trailers: ignored */
    if (namelen == 7 && memcmp(name, ":method", 7) == 0) {
        if (valuelen >= sizeof st->method) {
            st->bad_method = 1;
            return 0;
        }
        memcpy(st->method, value, valuelen);
        st->mlen = valuelen;
    } else if (namelen == 5 && memcmp(name, ":path", 5) == 0) {
        if (valuelen > PATH_MAX_LEN) {
            st->too_large = 1;
            return 0;
        }
        memcpy(st->path, value, valuelen);
        st->plen = valuelen;
    } else if (namelen == 14 && memcmp(name, "content-length", 14) == 0) {
        int64_t v = 0;
        for (size_t i = 0; i < valuelen && v < ((int64_t)1 << 50); i++)
            v = v * 10 + (value[i] - '0'); /* nghttp2 checked the digits */
        st->req_cl = v;
    }
    return 0;
}

static void req_end(hb_h2_server *s, h2stream *st)
{
    st->req_done = 1;
    if (st->echo) {
        hb__h2_stream_resume(s, st);
        return;
    }
    finish(s, st);
}

static int on_frame_recv(nghttp2_session *ng, const nghttp2_frame *frame, void *user)
{
    hb_h2_server *s = user;
    h2stream *st = frame->hd.stream_id ? stream_get(s, frame->hd.stream_id) : NULL;
    (void)ng;
    switch (frame->hd.type) {
    case NGHTTP2_HEADERS:
        if (!st) break;
        if (frame->headers.cat == NGHTTP2_HCAT_REQUEST) on_request(s, st);
        if (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) req_end(s, st);
        break;
    case NGHTTP2_DATA:
        if (st && (frame->hd.flags & NGHTTP2_FLAG_END_STREAM)) req_end(s, st);
        break;
    case NGHTTP2_RST_STREAM:
        ADD(s->st->rst_recv, 1);
        if (st) st->peer_reset = 1;
        break;
    default:
        break;
    }
    return 0;
}

static int on_data_chunk(nghttp2_session *ng, uint8_t flags, int32_t id, const uint8_t *data,
                         size_t len, void *user)
{
    (void)flags;
    hb_h2_server *s = user;
    ADD(s->st->body_in, len);
    h2stream *st = stream_get(s, id);
    if (st && st->echo && !st->head_only) {
        if (st->elen + len > st->ecap) {
            if (st->epos) { /* only [epos, elen) is still needed */
                memmove(st->ebuf, st->ebuf + st->epos, st->elen - st->epos);
                st->elen -= st->epos;
                st->erd -= st->epos;
                st->epos = 0;
            }
            if (st->elen + len > st->ecap) {
                size_t cap = st->ecap ? st->ecap : 16384;
                while (cap < st->elen + len)
                    cap *= 2;
                char *nb = realloc(st->ebuf, cap);
                if (!nb) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
                st->ebuf = nb;
                st->ecap = cap;
            }
        }
        memcpy(st->ebuf + st->elen, data, len);
        st->elen += len;
        st->body_bytes += len;
        (void)nghttp2_session_consume_connection(ng, len); /* the stream's: once echoed */
        hb__h2_stream_resume(s, st);
        return 0;
    }
    if (st) {
        st->body_bytes += len;
        if (st->rq.route == HB_ROUTE_SINK) st->crc = hb_crc32(st->crc, data, len);
    }
    (void)nghttp2_session_consume(ng, id, len);
    return 0;
}

static int on_stream_close(nghttp2_session *ng, int32_t id, uint32_t code, void *user)
{
    (void)code;
    hb_h2_server *s = user;
    h2stream *st = stream_get(s, id);
    if (!st) return 0;
    (void)nghttp2_session_set_stream_user_data(ng, id, NULL);
    if (st->status_owed) {
        ADD(s->st->by_status[0], 1);
        if (st->peer_reset) ADD(s->st->client_gone, 1);
        st->status_owed = 0;
    }
    hb__h2_stream_release(s, st);
    return 0;
}

/* Error codes that mean the peer broke the protocol (not our faults or
 * refusals). */
static int peer_fault(uint32_t code)
{
    switch (code) {
    case NGHTTP2_PROTOCOL_ERROR:
    case NGHTTP2_FLOW_CONTROL_ERROR:
    case NGHTTP2_SETTINGS_TIMEOUT:
    case NGHTTP2_STREAM_CLOSED:
    case NGHTTP2_FRAME_SIZE_ERROR:
    case NGHTTP2_COMPRESSION_ERROR:
    case NGHTTP2_ENHANCE_YOUR_CALM:
        return 1;
    default:
        return 0;
    }
}

static int on_frame_send(nghttp2_session *ng, const nghttp2_frame *frame, void *user)
{
    (void)ng;
    hb_h2_server *s = user;
    if (frame->hd.type == NGHTTP2_RST_STREAM) {
        ADD(s->st->rst_sent, 1);
        if (frame->rst_stream.error_code == NGHTTP2_REFUSED_STREAM) ADD(s->st->refused, 1);
        if (peer_fault(frame->rst_stream.error_code)) ADD(s->st->protocol_errors, 1);
    } else if (frame->hd.type == NGHTTP2_GOAWAY) {
        ADD(s->st->goaway_sent, 1);
        if (peer_fault(frame->goaway.error_code) && !s->fatal_counted)
            ADD(s->st->protocol_errors, 1);
    }
    return 0;
}

void hb__h2_set_callbacks(nghttp2_session_callbacks *cb)
{
    nghttp2_session_callbacks_set_on_begin_headers_callback(cb, on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame_recv);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data_chunk);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_stream_close);
    nghttp2_session_callbacks_set_on_frame_send_callback(cb, on_frame_send);
    nghttp2_session_callbacks_set_send_data_callback(cb, on_send_data);
}

#else
typedef int hb__h2_server_stream_unused;
#endif
