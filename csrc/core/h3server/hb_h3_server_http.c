/* hb_h3_server_http.c - the HTTP/3 server's routes on request streams.
 *
 * A response is its HEADERS frame (QPACK, h3codec/hb_qpack.h) and DATA frames whose
 * payload points into the shared content buffer (or at the stream's own text, echo
 * buffer or stats page), all kept until the stream closes, which is after QUIC saw
 * them acknowledged. */
#include "h3server/hb_h3_server_int.h"
#include "http/hb_route_plan.h"

#ifndef HB_NO_H3

#include <sys/mman.h>

static const char CT_OCTET[] = "application/octet-stream";
static const char CT_TEXT[] = "text/plain";
static const char CT_JSON[] = "application/json";

#define ECHO_KEEP (64u << 10) /* an echo buffer up to this is kept for the next request */

/* ---- streams ---- */

/* A slot and its HEADERS buffer are one mapping, resident only where touched: the
 * buffer only when a HEADERS frame arrives in pieces, the SSE ring only for SSE. From
 * malloc's recycled heap a free slot was ~19 KiB resident (7.3 KiB slot, 16 KiB
 * buffer), and the endpoint keeps as many as its streams' peak. */
static size_t slot_bytes(const hb_h3_server *s)
{
    size_t hb = s->cfg.max_header_list ? s->cfg.max_header_list : 1;
    size_t page = 4096;
    return (((sizeof(h3stream) + 15) & ~(size_t)15) + hb + page - 1) / page * page;
}

static void slot_unmap(const hb_h3_server *s, h3stream *st)
{
    free(st->ebuf);
    (void)munmap(st, slot_bytes(s)); /* fails only for a bad address: nothing to do then */
}

h3stream *hb__h3_stream_new(h3conn *c)
{
    hb_h3_server *s = c->s;
    h3stream *st = s->sfree;
    if (st) {
        s->sfree = st->next;
        s->nsfree--;
    } else { /* the pool grows to the peak of live streams */
        void *p =
            mmap(NULL, slot_bytes(s), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) return NULL;
        st = p;
        st->hbuf = (uint8_t *)p + ((sizeof(h3stream) + 15) & ~(size_t)15);
        st->ebuf = NULL;
        st->ecap = 0;
    }
    char *eb = st->ebuf;
    uint8_t *hb = st->hbuf;
    size_t ec = st->ecap;
    memset(st, 0, offsetof(h3stream, out));
    st->ebuf = eb;
    st->hbuf = hb;
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
        slot_unmap(s, st);
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
        slot_unmap(s, st);
    }
    s->nsfree = 0;
}

/* What a stream holds beyond its slot: the stats page, held flow-control credit, an
 * echo buffer grown past ECHO_KEEP (kept across reuse only when small). */
static void stream_drop(h3conn *c, h3stream *st)
{
    hb__h3_wq_del(c, st);
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

static void out_push(h3stream *st, const void *p, size_t n)
{
    st->out[st->out_n].base = (uint8_t *)(uintptr_t)p;
    st->out[st->out_n++].len = n;
    st->qoff += n;
}

/* /sse: the preamble, then each released event as a DATA frame of its own (its
 * scratch and frame header kept until acknowledged); nothing more until the timer
 * releases the next or an acknowledgment frees a slot. */
static void sse_fill(h3conn *c, h3stream *st)
{
    int any = 0;
    if (!st->ev_pre) {
        if (st->out_n + 2 > OUTV) return;
        size_t pl = sizeof HB_SSE_PREAMBLE - 1;
        uint8_t *e = hb_h3_frame_header_put(st->pre_fh, HB_H3_FRAME_DATA, pl);
        out_push(st, st->pre_fh, (size_t)(e - st->pre_fh));
        out_push(st, HB_SSE_PREAMBLE, pl);
        st->ev_pre = 1;
        st->hoff += pl;
        any = 1;
    }
    while (st->out_n + 1 + HB_SSE_EVENT_IOV <= OUTV && st->ev_seq < st->ev_rel &&
           st->ev_n < EV_SLOTS) {
        unsigned slot = (st->ev_head + st->ev_n) % EV_SLOTS;
        size_t len;
        struct iovec iov[HB_SSE_EVENT_IOV];
        int k = hb_sse_event_iov(iov, st->ev_scr[slot], st->ev_seq + 1, st->rq.p.sse.size, &len);
        uint8_t *e = hb_h3_frame_header_put(st->ev_fh[slot], HB_H3_FRAME_DATA, len);
        out_push(st, st->ev_fh[slot], (size_t)(e - st->ev_fh[slot]));
        for (int i = 0; i < k; i++)
            out_push(st, iov[i].iov_base, iov[i].iov_len);
        st->ev_seq++;
        st->hoff += len;
        st->ev_end[slot] = st->qoff;
        st->ev_n++;
        any = 1;
        ADD(c->s->st->sse_events, 1);
        ADD(c->s->st->sse_bytes, len);
    }
    if (any) cut_arm(c, st);
    if (st->ev_seq == st->ev_count) st->gen_done = 1;
}

void hb__h3_fill(h3conn *c, h3stream *st)
{
    if (st->gen_done || st->wshut || !st->hdr_len) return;
    if (!st->hdr_q) {
        if (st->out_n == OUTV) return;
        out_push(st, st->hdr + st->hdr_off, st->hdr_len);
        st->hdr_q = 1;
        if (!st->with_body) {
            st->gen_done = 1;
            return;
        }
    }
    if (st->src == SRC_SSE) {
        sse_fill(c, st);
        return;
    }
    if (!st->dfh_q) { /* one DATA frame: the body's length is known from the start */
        if (st->out_n == OUTV) return;
        uint8_t *e = hb_h3_frame_header_put(st->dfh, HB_H3_FRAME_DATA, st->left);
        out_push(st, st->dfh, (size_t)(e - st->dfh));
        st->dfh_q = 1;
    }
    size_t n = 0;
    while (st->out_n < OUTV && st->avail > 0) {
        size_t take = st->avail < CHUNK ? (size_t)st->avail : CHUNK;
        if (st->src == SRC_CONTENT)
            out_push(st, hb_content_buf() + st->soff % HB_CONTENT_PERIOD, take);
        else
            out_push(st, st->mem + st->soff, take);
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
                c->dirty = 1;
            }
            return;
        }
        st->gen_done = 1;
        return;
    }
    if (st->avail == 0 && st->wait == W_STALL && !st->deadline) {
        st->deadline = hb__h3_now(c->s) + st->rq.p.stall.ms * NS_PER_MS;
        c->timers = 1;
        c->dirty = 1;
    }
}

/* Submit the response head; a body of st->src follows unless body is 0.
 * cl < 0: no content-length. */
static void respond(h3conn *c, h3stream *st, int status, const char *ct, int64_t cl, int body)
{
    hb_h3_server *s = c->s;
    if (status < 100 || status > 999) status = 500;
    size_t cll = hb_route_head_digits(status, cl, st->stbuf, st->clbuf);
    /* the section after room for the largest frame header it can need (3 bytes) */
    ssize_t k = st->hdr_len
                    ? -1
                    : hb_qpack_encode_head(&s->heads, (unsigned)status, s->cfg.date, ct, strlen(ct),
                                           st->ev_kind == EV_SSE ? HB_QPACK_HEAD_NO_CACHE : 0,
                                           st->clbuf, cll, st->hdr + 3, HDR_OUT - 3);
    if (k < 0) {
        count_status(c, st, 0);
        hb__h3_stream_error(c, st, HB_H3_INTERNAL_ERROR);
        return;
    }
    uint8_t fh[HB_H3_FRAME_HEADER_MAX];
    size_t fl = (size_t)(hb_h3_frame_header_put(fh, HB_H3_FRAME_HEADERS, (uint64_t)k) - fh);
    memcpy(st->hdr + 3 - fl, fh, fl);
    st->hdr_off = (uint8_t)(3 - fl);
    st->hdr_len = (uint16_t)(fl + (size_t)k);
    st->with_body = (uint8_t)(body && !st->head_only);
    count_status(c, st, status);
    hb__h3_wq_add(c, st);
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
    hb__h3_stream_error(c, st, HB_H3_INTERNAL_ERROR);
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
void hb__h3_finish(h3conn *c, h3stream *st)
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
    st->rd_off = 1;
    if (st->plen && st->mlen) {
        RESPOND_LIT(c, st, 408, "request timeout\n");
        (void)ngtcp2_conn_shutdown_stream_read(c->q, st->id, HB_H3_NO_ERROR);
    } else {
        count_status(c, st, 408);
        hb__h3_stream_error(c, st, HB_H3_REQUEST_INCOMPLETE);
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
        ngtcp2_connection_close_error_set_application_error(&e, HB_H3_EXCESSIVE_LOAD, NULL, 0);
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
            hb__h3_wq_add(c, st);
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
            hb__h3_wq_add(c, st);
        } else if (st->wait == W_STALL) {
            if (!st->deadline) continue; /* armed once the first half is out */
            st->wait = W_NONE;
            st->deadline = 0;
            st->avail = st->left;
            hb__h3_wq_add(c, st);
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

/* ---- what the HTTP/3 layer reports ---- */

/* Stream bytes acknowledged: a paced stream's SSE scratch slots come free, and its
 * cut timer restarts while bytes are still out. */
void hb__h3_acked(h3conn *c, h3stream *st, uint64_t end)
{
    if (!st || !st->ev_kind) return;
    st->acked = end;
    int freed = 0;
    while (st->ev_n && st->ev_end[st->ev_head] <= st->acked) {
        st->ev_head = (st->ev_head + 1) % EV_SLOTS;
        st->ev_n--;
        freed = 1;
    }
    if (freed && st->src == SRC_SSE) {
        hb__h3_wq_add(c, st);
        hb__h3_pend(c);
    }
    st->cut_at = 0;
    if (st->acked < st->qoff) cut_arm(c, st);
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

size_t hb__h3_body(h3conn *c, h3stream *st, const uint8_t *p, size_t n)
{
    size_t held = 0;
    if (st->echo && !st->too_large) {
        held = n;
        st->held += n;
        ADD(c->s->st->body_buffered, n);
    }
    ADD(c->s->st->body_in, n);
    st->body_bytes += n;
    if (st->rq.route == HB_ROUTE_SINK) {
        st->crc = hb_crc32(st->crc, p, n);
    } else if (st->echo && !st->too_large) {
        if (st->elen + n > ECHO_MAX) {
            st->too_large = 1;
            return held;
        }
        if (st->elen + n > st->ecap) {
            size_t cap = st->ecap ? st->ecap : 4096;
            while (cap < st->elen + n)
                cap *= 2;
            char *b = realloc(st->ebuf, cap);
            if (!b) {
                st->too_large = 1;
                return held;
            }
            st->ebuf = b;
            st->ecap = cap;
        }
        memcpy(st->ebuf + st->elen, p, n);
        st->elen += n;
    }
    return held;
}

/* methods a 0-RTT replay cannot harm */
static int early_safe(const h3stream *st)
{
    return (st->mlen == 3 && memcmp(st->method, "GET", 3) == 0) ||
           (st->mlen == 4 && memcmp(st->method, "HEAD", 4) == 0) ||
           (st->mlen == 7 && memcmp(st->method, "OPTIONS", 7) == 0);
}

/* The client is asked not to send the rest (STOP_SENDING with H3_NO_ERROR, RFC 9114 4.1). */
static void stop_reading(h3conn *c, h3stream *st, int fin)
{
    st->rd_off = 1;
    if (!fin) (void)ngtcp2_conn_shutdown_stream_read(c->q, st->id, HB_H3_NO_ERROR);
}

void hb__h3_head(h3conn *c, h3stream *st, int fin)
{
    hb_route_req *rq = &st->rq;
    if (st->too_large) {
        st->counted = 1;
        st->status_owed = 1;
        ADD(c->s->st->by_route[HB_ROUTE_BAD_REQUEST], 1);
        RESPOND_LIT(c, st, 431, "request head too large\n");
        return;
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
        stop_reading(c, st, fin);
        return;
    }
    if (st->early) ADD(c->s->st->early_data, 1);
    if (rq->status != 200) return;
    if (rq->route == HB_ROUTE_ECHO) {
        st->echo = 1;
        st->elen = 0;
    } else if (rq->route == HB_ROUTE_EARLY_RESPONSE) {
        /* answered before the body, which the client is then asked not to send */
        hb__h3_finish(c, st);
        stop_reading(c, st, fin);
    }
}

#else
typedef int hb__h3_server_http_unused;
#endif
