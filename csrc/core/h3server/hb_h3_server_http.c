/* hb_h3_server_http.c - the HTTP/3 server's streams and routes on nghttp3.
 *
 * Bodies go out through one nghttp3 read_data callback that points nghttp3 at
 * the shared content buffer (or at the stream's own text, echo buffer or stats
 * page, which live until the stream closes). */
#include "h3server/hb_h3_server_int.h"
#include "http/hb_route_plan.h"

#ifndef HB_NO_H3

static const char CT_OCTET[] = "application/octet-stream";
static const char CT_TEXT[] = "text/plain";
static const char CT_JSON[] = "application/json";

#define ECHO_KEEP (64u << 10) /* an echo buffer up to this is kept for the next request */

/* ---- streams ---- */

static h3stream *stream_new(h3conn *c)
{
    hb_h3_server *s = c->s;
    h3stream *st = s->sfree;
    if (st) {
        s->sfree = st->next;
        s->nsfree--;
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

/* A slot back to the endpoint's free list (an idle connection holds none). */
static void stream_put(h3conn *c, h3stream *st)
{
    hb_h3_server *s = c->s;
    if (s->nsfree >= SFREE_MAX) {
        free(st->ebuf);
        free(st);
        return;
    }
    st->prev = NULL;
    st->next = s->sfree;
    s->sfree = st;
    s->nsfree++;
}

void hb__h3_streams_trim(hb_h3_server *s)
{
    while (s->sfree) {
        h3stream *st = s->sfree;
        s->sfree = st->next;
        free(st->ebuf);
        free(st);
    }
    s->nsfree = 0;
}

/* What a stream holds beyond its slot: the stats page, held flow-control credit, an
 * echo buffer grown past ECHO_KEEP (kept across reuse only when small). */
static void stream_drop(h3conn *c, h3stream *st)
{
    free(st->stats_doc);
    st->stats_doc = NULL;
    if (st->held) {
        ngtcp2_conn_extend_max_offset(c->q, st->held);
        ADD(c->s->st->body_buffered, (uint64_t)0 - st->held);
        st->held = 0;
    }
    if (st->ecap > ECHO_KEEP) {
        free(st->ebuf);
        st->ebuf = NULL;
        st->ecap = 0;
    }
}

void hb__h3_stream_release(h3conn *c, h3stream *st, int peer_left)
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
    stream_drop(c, st);
    stream_put(c, st);
}

/* ---- responses ---- */

/* Bytes are out: with none acknowledged for request_timeout the client is not
 * reading (or gone) and a paced stream is cut. */
static void cut_arm(h3conn *c, h3stream *st)
{
    if (!st->ev_kind || st->cut_at) return;
    st->cut_at = hb__h3_now(c->s) + (uint64_t)c->s->cfg.request_timeout_ms * NS_PER_MS;
    c->timers = 1;
    c->dirty = 1;
}

/* /stream/N: the chunks whose bytes are all handed out (the last may be short). */
static void stream_count(h3conn *c, h3stream *st)
{
    uint64_t k = st->rq.p.stream.chunk;
    uint64_t done = st->soff / k + (st->left == 0 && st->soff % k ? 1 : 0);
    if (done > st->chunks_counted) {
        ADD(c->s->st->stream_chunks, done - st->chunks_counted);
        st->chunks_counted = done;
    }
    if (st->soff > st->hoff) {
        ADD(c->s->st->stream_bytes, st->soff - st->hoff);
        st->hoff = st->soff;
    }
}

/* /sse: the preamble, then each released event as it fits (its scratch kept until
 * acknowledged); WOULDBLOCK until the timer releases the next or an ack frees a slot. */
static nghttp3_ssize sse_read(h3conn *c, h3stream *st, nghttp3_vec *vec, size_t veccnt,
                              uint32_t *flags)
{
    size_t n = 0;
    if (!st->ev_pre && veccnt) {
        vec[n].base = (uint8_t *)(uintptr_t)HB_SSE_PREAMBLE;
        vec[n++].len = sizeof HB_SSE_PREAMBLE - 1;
        st->ev_pre = 1;
        st->hoff += sizeof HB_SSE_PREAMBLE - 1;
    }
    while (n < veccnt) {
        if (st->piov_i < st->piov_n) {
            vec[n].base = st->piov[st->piov_i].iov_base;
            vec[n++].len = st->piov[st->piov_i++].iov_len;
            continue;
        }
        if (st->ev_seq >= st->ev_rel || st->ev_n == EV_SLOTS) break;
        unsigned slot = (st->ev_head + st->ev_n) % EV_SLOTS;
        size_t len;
        int k =
            hb_sse_event_iov(st->piov, st->ev_scr[slot], st->ev_seq + 1, st->rq.p.sse.size, &len);
        st->piov_n = (uint8_t)k;
        st->piov_i = 0;
        st->ev_seq++;
        st->hoff += len;
        st->ev_end[slot] = st->hoff;
        st->ev_n++;
        ADD(c->s->st->sse_events, 1);
        ADD(c->s->st->sse_bytes, len);
    }
    if (n) cut_arm(c, st);
    if (st->ev_seq == st->ev_count && st->piov_i == st->piov_n) {
        *flags |= NGHTTP3_DATA_FLAG_EOF;
        return (nghttp3_ssize)n;
    }
    if (n == 0) {
        st->blocked = 1;
        return NGHTTP3_ERR_WOULDBLOCK;
    }
    return (nghttp3_ssize)n;
}

static nghttp3_ssize on_read_data(nghttp3_conn *h, int64_t id, nghttp3_vec *vec, size_t veccnt,
                                  uint32_t *flags, void *cud, void *sud)
{
    (void)h;
    (void)id;
    h3conn *c = cud;
    h3stream *st = sud;
    if (!st) return NGHTTP3_ERR_CALLBACK_FAILURE;
    if (st->src == SRC_SSE) return sse_read(c, st, vec, veccnt, flags);
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
    if (st->ev_kind == EV_STREAM) stream_count(c, st);
    if (n) cut_arm(c, st);
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
            st->deadline = hb__h3_now(c->s) + st->rq.p.stall.ms * NS_PER_MS;
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
    size_t cll = hb_route_head_digits(status, cl, st->stbuf, st->clbuf);
    nghttp3_nv nva[6];
    size_t n = 0;
    /* NO_COPY: names and content types are static, status and length live in st until
     * the stream closes, and the date is rewritten only by this thread (always a valid
     * date); nghttp3 then skips copying every header per response */
#define NV(nm, v, vl)                                                                              \
    (nghttp3_nv){(uint8_t *)(nm), (uint8_t *)(v), sizeof(nm) - 1, (vl),                            \
                 NGHTTP3_NV_FLAG_NO_COPY_NAME | NGHTTP3_NV_FLAG_NO_COPY_VALUE}
    nva[n++] = NV(":status", st->stbuf, 3);
    nva[n++] = NV("server", "httpbench", 9);
    if (s->cfg.date) nva[n++] = NV("date", s->cfg.date, 29);
    nva[n++] = NV("content-type", ct, strlen(ct));
    if (st->ev_kind == EV_SSE) nva[n++] = NV("cache-control", "no-cache", 8);
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
    hb__h3_pend(c);
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
    hb__h3_pend(c);
}

/* Carry out a route's plan with HTTP/3 framing. */
static void execute(h3conn *c, h3stream *st, const hb_route_answer *a)
{
    switch (a->act) {
    case HB_ACT_STATS: {
        size_t len = 0;
        char *doc = c->s->cfg.stats_json ? c->s->cfg.stats_json(c->s->cfg.stats_arg, &len) : NULL;
        if (!doc) {
            RESPOND_LIT(c, st, 503, "stats unavailable\n");
            return;
        }
        st->stats_doc = doc;
        respond_mem(c, st, 200, CT_JSON, doc, len);
        return;
    }
    case HB_ACT_RESET:
        reset_stream(c, st);
        return;
    case HB_ACT_DELAY:
        st->wait = W_DELAY;
        st->deadline = hb__h3_now(c->s) + a->wait_ms * NS_PER_MS;
        c->timers = 1;
        return;
    default:
        break;
    }
    if (a->src == HB_SRC_MEM) {
        respond_mem(c, st, a->status, a->ct, a->mem, a->n);
        return;
    }
    if (a->wait == HB_WAIT_DRIP) {
        st->wait = W_DRIP;
        st->deadline = hb__h3_now(c->s) + a->wait_ms * NS_PER_MS;
        c->timers = 1;
    } else if (a->wait == HB_WAIT_STALL) {
        st->wait = W_STALL; /* armed once the first part is out */
    }
    if (a->no_eof) st->no_eof = 1;
    respond_content(c, st, a->cl, a->n, a->avail);
}

/* /sse and /stream/N: the first event (chunk) at once, each next one an interval
 * later (all at once with interval 0), the bytes the same as over HTTP/1.1 without
 * its chunked framing. */
static void ev_respond(h3conn *c, h3stream *st)
{
    const hb_route_req *rq = &st->rq;
    int sse = rq->route == HB_ROUTE_SSE;
    uint64_t interval = sse ? rq->p.sse.interval_ms : rq->p.stream.interval_ms;
    st->ev_kind = sse ? EV_SSE : EV_STREAM;
    if (sse) {
        st->ev_count = rq->p.sse.events;
        st->src = SRC_SSE;
        if (!st->head_only) ADD(c->s->st->sse_streams, 1);
    } else {
        uint64_t k = rq->p.stream.chunk;
        st->ev_count = (rq->p.stream.n + k - 1) / k;
        if (!st->head_only) ADD(c->s->st->stream_streams, 1);
    }
    st->ev_interval = interval * NS_PER_MS;
    st->ev_rel = interval && st->ev_count ? 1 : st->ev_count;
    if (st->ev_rel < st->ev_count) {
        st->wait = W_PACE;
        st->deadline = hb__h3_now(c->s) + st->ev_interval;
        c->timers = 1;
    }
    if (sse) {
        respond(c, st, 200, "text/event-stream", -1, 1);
    } else {
        uint64_t n = rq->p.stream.n, k = rq->p.stream.chunk;
        uint64_t rel = st->ev_rel * k < n ? st->ev_rel * k : n;
        respond_content(c, st, -1, n, rel);
    }
    if (st->head_only) {
        st->wait = W_NONE;
        st->ev_kind = EV_NONE;
    }
}

/* The request is complete (or, for an early response, its head): answer it. */
static void finish(h3conn *c, h3stream *st)
{
    if (st->responded || st->wait == W_DELAY) return;
    if (st->rq.status == 200 && (st->rq.route == HB_ROUTE_SSE || st->rq.route == HB_ROUTE_STREAM)) {
        ev_respond(c, st);
        return;
    }
    hb_route_in in = {.body_bytes = st->body_bytes,
                      .crc = st->crc,
                      .head_only = st->head_only,
                      .echo = st->ebuf,
                      .echo_len = st->elen,
                      .echo_too_large = st->too_large,
                      .jbuf = st->jbuf,
                      .jcap = sizeof st->jbuf};
    hb_route_answer a;
    hb_route_plan(&st->rq, &in, &a);
    execute(c, st, &a);
}

/* The request did not come in within request_timeout of its first byte: 408 when
 * its head came, else the stream is reset; the client is asked to stop sending.
 * Either way its slot goes back to the client now (MAX_STREAMS), whether or not
 * the client ever ends its side: the stream waits as a zombie, bounded in number. */
static void req_timeout(h3conn *c, h3stream *st)
{
    st->req_deadline = 0;
    ADD(c->s->st->stream_timeouts, 1);
    if (!st->counted && !st->rq.stats_page) { /* the head never completed */
        st->counted = 1;
        st->status_owed = 1;
        ADD(c->s->st->by_route[HB_ROUTE_TIMEOUT], 1);
    }
    st->src = SRC_NONE;
    st->wait = W_NONE;
    if (st->plen && st->mlen) {
        RESPOND_LIT(c, st, 408, "request timeout\n");
        (void)nghttp3_conn_shutdown_stream_read(c->h, st->id);
        (void)ngtcp2_conn_shutdown_stream_read(c->q, st->id, NGHTTP3_H3_NO_ERROR);
    } else {
        count_status(c, st, 408);
        (void)nghttp3_conn_shutdown_stream_read(c->h, st->id);
        (void)ngtcp2_conn_shutdown_stream(c->q, st->id, NGHTTP3_H3_REQUEST_INCOMPLETE);
        ADD(c->s->st->rst_sent, 1);
        hb__h3_pend(c);
    }
    /* out of the live list, its credit given back; freed when the QUIC stream closes */
    if (st->prev)
        st->prev->next = st->next;
    else
        c->live = st->next;
    if (st->next) st->next->prev = st->prev;
    c->nlive--;
    st->prev = NULL;
    st->next = c->zombies;
    if (c->zombies) c->zombies->prev = st;
    c->zombies = st;
    st->zombie = 1;
    c->nzombie++;
    if (st->held) {
        ngtcp2_conn_extend_max_offset(c->q, st->held);
        ADD(c->s->st->body_buffered, (uint64_t)0 - st->held);
        st->held = 0;
    }
    hb__h3_stream_credit(c);
    if (c->nzombie > c->s->cfg.max_streams) { /* a client that never ends what it starts */
        ngtcp2_connection_close_error e;
        ngtcp2_connection_close_error_set_application_error(&e, NGHTTP3_H3_EXCESSIVE_LOAD, NULL, 0);
        hb__h3_conn_close(c, &e);
    }
}

/* A zombie's QUIC stream closed (or its connection goes): back to the pool. */
void hb__h3_zombie_free(h3conn *c, h3stream *st)
{
    if (st->prev)
        st->prev->next = st->next;
    else
        c->zombies = st->next;
    if (st->next) st->next->prev = st->prev;
    st->zombie = 0;
    c->nzombie--;
    stream_drop(c, st);
    stream_put(c, st);
}

/* The first bytes of a request stream: its slot and deadline exist from now,
 * before (or whether or not) a HEADERS frame is recognised. */
void hb__h3_stream_first(h3conn *c, int64_t id)
{
    if (c->live && c->live->id == id) return; /* HEADERS came whole in these bytes */
    for (h3stream *x = c->live; x; x = x->next)
        if (x->id == id) return;
    if (c->nlive >= c->s->cfg.max_streams + 16u) return;
    h3stream *st = stream_new(c);
    if (!st) return;
    st->id = id;
    st->early = c->rx_early;
    st->req_deadline = hb__h3_now(c->s) + (uint64_t)c->s->cfg.request_timeout_ms * NS_PER_MS;
    c->timers = 1;
    c->dirty = 1;
    if (nghttp3_conn_set_stream_user_data(c->h, id, st) != 0) hb__h3_stream_release(c, st, 0);
}

/* Run the stream timers due at now. */
void hb__h3_stream_timers(h3conn *c)
{
    uint64_t now = hb__h3_now(c->s);
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
        if (st->cut_at) {
            if (st->cut_at <= now) { /* nothing acknowledged for request_timeout */
                st->cut_at = 0;
                st->wait = W_NONE;
                st->ev_kind = EV_NONE;
                ADD(c->s->st->streams_cut, 1);
                reset_stream(c, st);
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
        } else if (st->wait == W_PACE) {
            st->ev_rel++;
            if (st->src == SRC_CONTENT) {
                uint64_t k = st->rq.p.stream.chunk, n = st->rq.p.stream.n;
                uint64_t rel = st->ev_rel * k < n ? st->ev_rel * k : n;
                st->avail = rel - st->soff;
            }
            if (st->ev_rel >= st->ev_count) {
                st->wait = W_NONE;
                st->deadline = 0;
            } else {
                st->deadline += st->ev_interval;
                if (st->deadline < now) st->deadline = now;
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
        hb__h3_pend(c);
    }
    c->timers = (uint8_t)any;
}

uint64_t hb__h3_stream_deadline(h3conn *c)
{
    uint64_t d = UINT64_MAX;
    for (h3stream *st = c->live; st; st = st->next) {
        if (st->reset_owed) return hb__h3_now(c->s);
        if (st->req_deadline && !st->req_done && !st->responded && st->req_deadline < d)
            d = st->req_deadline;
        if (st->wait && st->deadline && st->deadline < d) d = st->deadline;
        if (st->cut_at && st->cut_at < d) d = st->cut_at;
    }
    return d;
}

/* ---- nghttp3 callbacks ---- */

/* Body bytes acknowledged: a paced stream's SSE scratch slots come free, and its
 * cut timer restarts while bytes are still out. */
static int h_acked(nghttp3_conn *h, int64_t id, uint64_t n, void *cud, void *sud)
{
    (void)h;
    h3conn *c = cud;
    h3stream *st = sud;
    if (!st || !st->ev_kind) return 0;
    st->acked += n;
    int freed = 0;
    while (st->ev_n && st->ev_end[st->ev_head] <= st->acked) {
        st->ev_head = (st->ev_head + 1) % EV_SLOTS;
        st->ev_n--;
        freed = 1;
    }
    if (freed && st->src == SRC_SSE) {
        (void)nghttp3_conn_resume_stream(c->h, id);
        hb__h3_pend(c);
    }
    st->cut_at = 0;
    if (st->acked < st->hoff) cut_arm(c, st);
    return 0;
}

/* A request stream closed: its credit goes back in batches of half the limit, since
 * ngtcp2 queues a MAX_STREAMS frame (ack-eliciting) whenever the credit grows: one
 * per request otherwise, often in a packet of its own. */
void hb__h3_stream_credit(h3conn *c)
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
    if (st && st->zombie) { /* timed out: released and credited then */
        hb__h3_zombie_free(c, st);
        return 0;
    }
    if (st) hb__h3_stream_release(c, st, st->peer_reset || !st->responded);
    if (ngtcp2_is_bidi_stream(id)) hb__h3_stream_credit(c);
    return 0;
}

void hb__h3_consumed(h3conn *c, int64_t id, size_t n)
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
    if (!st || st->zombie || !st->echo || st->too_large) {
        hb__h3_consumed(c, id, n);
    } else {
        /* buffered until the request ends: the stream's credit goes back, the
         * connection's is held, so a connection's buffered uploads stay within
         * its flow-control window (CONN_WINDOW) */
        (void)ngtcp2_conn_extend_max_stream_offset(c->q, id, n);
        st->held += n;
        ADD(c->s->st->body_buffered, n);
    }
    if (!st || st->zombie) return 0;
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
    hb__h3_consumed(cud, id, n);
    return 0;
}

static int h_begin_headers(nghttp3_conn *h, int64_t id, void *cud, void *sud)
{
    (void)sud;
    h3conn *c = cud;
    ADD(c->s->st->streams, 1);
    if (sud) return 0; /* made at its first byte */
    h3stream *st = c->nlive < c->s->cfg.max_streams + 16u ? stream_new(c) : NULL;
    if (!st) {
        (void)ngtcp2_conn_shutdown_stream(c->q, id, NGHTTP3_H3_REQUEST_REJECTED);
        return 0;
    }
    st->id = id;
    st->early = c->rx_early;
    st->req_deadline = hb__h3_now(c->s) + (uint64_t)c->s->cfg.request_timeout_ms * NS_PER_MS;
    c->timers = 1;
    if (nghttp3_conn_set_stream_user_data(h, id, st) != 0) {
        hb__h3_stream_release(c, st, 0);
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

/* methods a 0-RTT replay cannot harm */
static int early_safe(const h3stream *st)
{
    return (st->mlen == 3 && memcmp(st->method, "GET", 3) == 0) ||
           (st->mlen == 4 && memcmp(st->method, "HEAD", 4) == 0) ||
           (st->mlen == 7 && memcmp(st->method, "OPTIONS", 7) == 0);
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
    if (st->early && !early_safe(st)) { /* a replay could repeat its effect (RFC 8470 5.2) */
        ADD(c->s->st->early_rejected, 1);
        RESPOND_LIT(c, st, 425, "too early\n");
        if (!fin) {
            (void)nghttp3_conn_shutdown_stream_read(h, id);
            (void)ngtcp2_conn_shutdown_stream_read(c->q, id, NGHTTP3_H3_NO_ERROR);
        }
        return 0;
    }
    if (st->early) ADD(c->s->st->early_data, 1);
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
int hb__h3_setup_h3(h3conn *c)
{
    if (ngtcp2_conn_get_max_local_streams_uni(c->q) < 3) return -1;
    nghttp3_settings set;
    nghttp3_settings_default(&set);
    set.max_field_section_size = c->s->cfg.max_header_list * 4u;
    if (nghttp3_conn_server_new(&c->h, &H3_CALLBACKS, &set, &c->s->hmem, c) != 0) return -1;
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

#else
typedef int hb__h3_server_http_unused;
#endif
