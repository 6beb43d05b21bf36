/* hb_h2_server_events.c - the HTTP/2 server's event routes: /sse (the
 * preamble, then events 1..N as hb_sse builds them) and /stream/{n} (chunks of
 * ?chunk= content bytes), the same bytes as over HTTP/1.1 without its chunk
 * framing.
 *
 * A body is a sequence of pieces, each handed to nghttp2 on its own: a DATA
 * frame never carries bytes of two pieces (a piece larger than a frame, or
 * than the flow-control window, spans several). A piece is prepared only when
 * nghttp2 asks for the stream's next frame, so a client that stops reading
 * (no window) holds at most one piece on the server and nothing is buffered
 * beyond the output queue. Paced pieces wait on the session's timers like
 * /drip: the next one is due `interval` after the previous one was prepared.
 * A stream that makes no progress for the owner's request timeout (its client
 * stopped reading) is reset by hb_h2_server_sweep and counted. Nothing is
 * allocated per piece: an event's bytes are iovecs into hb_sse's static lines
 * and the stream's scratch, copied into the output queue when small. */
#include "h2/hb_h2_server_int.h"

#ifndef HB_NO_NGHTTP2

#define COPY_PIECE 256 /* an event's segments up to this are copied, not referenced */

void hb__h2_events_respond(hb_h2_server *s, h2stream *st, const char *ct, uint64_t interval_ms)
{
    const hb_route_req *rq = &st->rq;
    int sse = rq->route == HB_ROUTE_SSE;
    st->src = SRC_EVENTS;
    st->ev_sse = (uint8_t)sse;
    st->ev_seq = 0;
    if (sse) {
        st->ev_count = rq->p.sse.events + 1; /* piece 0: the preamble */
    } else {
        uint64_t k = rq->p.stream.chunk;
        st->ev_count = (rq->p.stream.n + k - 1) / k;
    }
    st->ev_interval = interval_ms * NS_PER_MS;
    st->ev_len = st->ev_rd = st->ev_wr = 0;
    st->ev_progress = *s->cfg.now;
    hb__h2_respond(s, st, 200, ct, -1, 1);
    if (st->head_only || !s->cfg.sm) return;
    if (sse)
        ADD(s->cfg.sm->sse_streams, 1);
    else
        ADD(s->cfg.sm->stream_streams, 1);
}

/* Make piece ev_seq the current one. */
static void next_piece(h2stream *st)
{
    uint64_t i = st->ev_seq++;
    size_t len;
    if (st->ev_sse) {
        if (i == 0) {
            st->ev_iov[0].iov_base = (void *)HB_SSE_PREAMBLE;
            st->ev_iov[0].iov_len = len = sizeof HB_SSE_PREAMBLE - 1;
            st->ev_niov = 1;
        } else {
            st->ev_niov = hb_sse_event_iov(st->ev_iov, st->ev_scratch, i, st->rq.p.sse.size, &len);
        }
    } else {
        uint64_t k = st->rq.p.stream.chunk, off = i * k, left = st->rq.p.stream.n - off;
        len = (size_t)(left < k ? left : k);
        st->soff = off;
    }
    st->ev_len = len;
    st->ev_rd = st->ev_wr = 0;
}

ssize_t hb__h2_events_read(hb_h2_server *s, h2stream *st, size_t length, uint32_t *flags)
{
    if (st->ev_rd == st->ev_len) {
        if (st->ev_seq == st->ev_count) {
            *flags |= NGHTTP2_DATA_FLAG_EOF;
            return 0;
        }
        uint64_t now = *s->cfg.now;
        /* the first event goes at once (after the preamble), each next one an
         * interval after the previous */
        if (st->ev_interval && st->ev_seq >= 1u + st->ev_sse && now < st->ev_due) {
            st->wait = W_EVENTS;
            st->deadline = st->ev_due;
            s->timers = 1;
            st->deferred = 1;
            return NGHTTP2_ERR_DEFERRED;
        }
        next_piece(st);
        st->ev_due = now + st->ev_interval;
    }
    size_t left = st->ev_len - st->ev_rd;
    size_t n = left < length ? left : length;
    st->ev_rd += n;
    *flags |= NGHTTP2_DATA_FLAG_NO_COPY;
    if (st->ev_rd == st->ev_len && st->ev_seq == st->ev_count) *flags |= NGHTTP2_DATA_FLAG_EOF;
    return (ssize_t)n;
}

/* Queue bytes [from, from + len) of the current event. */
static void queue_event(hb_h2_server *s, h2stream *st, size_t from, size_t len)
{
    size_t to = from + len, at = 0;
    int copy_all = len <= SMALL_BODY;
    for (int k = 0; k < st->ev_niov && at < to; k++) {
        const char *base = st->ev_iov[k].iov_base;
        size_t a = at, b = at + st->ev_iov[k].iov_len;
        at = b;
        if (b <= from) continue;
        size_t lo = a > from ? a : from, hi = b < to ? b : to;
        const char *p = base + (lo - a);
        if (copy_all || base == st->ev_scratch || hi - lo <= COPY_PIECE)
            hb__h2_q_copy(s, p, hi - lo);
        else
            hb__h2_q_iov(s, p, hi - lo);
    }
}

/* Queue content bytes [off, off + len). */
static void queue_content(hb_h2_server *s, uint64_t off, size_t len)
{
    const char *content = hb_content_buf();
    if (len <= SMALL_BODY) {
        hb__h2_q_copy(s, content + off % HB_CONTENT_PERIOD, len);
        return;
    }
    while (len) {
        size_t take = len < HB_CONTENT_WIN ? len : HB_CONTENT_WIN;
        hb__h2_q_iov(s, content + off % HB_CONTENT_PERIOD, take);
        off += take;
        len -= take;
    }
}

int hb__h2_events_send(hb_h2_server *s, h2stream *st, const uint8_t *framehd, size_t length)
{
    /* bytes: at most the copied segments (SMALL_BODY, or the scratch and short
     * segments of a larger frame); iovecs: one per segment or content window */
    int iovs = 2 + (st->ev_sse ? st->ev_niov : (int)(length / HB_CONTENT_WIN) + 1);
    if (!hb__h2_room(s, 9 + SMALL_BODY + HB_SSE_SCRATCH, iovs) || s->qbytes >= BATCH)
        return NGHTTP2_ERR_WOULDBLOCK;
    hb__h2_q_copy(s, framehd, 9);
    if (st->ev_sse)
        queue_event(s, st, st->ev_wr, length);
    else
        queue_content(s, st->soff + st->ev_wr, length);
    st->ev_wr += length;
    st->ev_progress = *s->cfg.now;
    if (st->ev_wr < st->ev_len || !s->cfg.sm) return 0;
    hb_stream_stats *sm = s->cfg.sm;
    if (!st->ev_sse) {
        ADD(sm->stream_chunks, 1);
        ADD(sm->stream_bytes, st->ev_len);
    } else if (st->ev_seq > 1) { /* not the preamble */
        ADD(sm->sse_events, 1);
        ADD(sm->sse_bytes, st->ev_len);
    }
    return 0;
}

int hb_h2_server_sweep(hb_h2_server *s, uint64_t timeout_ns)
{
    uint64_t now = *s->cfg.now;
    int n = 0;
    for (h2stream *st = s->live; st; st = st->next) {
        /* a stream waiting on its pacing timer is not stalled */
        if (st->src != SRC_EVENTS || st->ev_cut || st->head_only || st->deadline) continue;
        if (now - st->ev_progress < timeout_ns) continue;
        st->ev_cut = 1;
        if (nghttp2_submit_rst_stream(s->ng, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_CANCEL) != 0)
            continue; /* out of memory: the connection's own timeout ends it */
        n++;
        if (!s->cfg.sm) continue;
        if (st->ev_sse)
            ADD(s->cfg.sm->sse_write_timeouts, 1);
        else
            ADD(s->cfg.sm->stream_write_timeouts, 1);
    }
    return n;
}

#else
typedef int hb__h2_server_events_unused;
#endif
