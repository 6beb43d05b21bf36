/* hb_server_stream.c - the streaming routes over HTTP/1.1: /sse (server-sent
 * events) and /stream/{n} (a chunked body in paced chunks). One event or chunk
 * is queued at a time, after the previous one is written, so each is its own
 * write and a client that stops reading holds at most one event's bytes (the
 * write timeout then cuts it). Between paced events the connection waits on
 * its timer (phase WAIT: a client that leaves is noticed). */
#include <string.h>

#include "base/hb_content.h"
#include "server/hb_server_int.h"
#include "http/hb_sse.h"

_Static_assert(sizeof HB_SSE_PREAMBLE - 1 == 0x19, "the preamble's chunk line below");

#define CT_SSE "Content-Type: text/event-stream\r\nCache-Control: no-cache\r\n"

/* The previous event or chunk is written: count it. */
static void count_written(hb__conn *c)
{
    if (!c->ev_unsent) return;
    hb_server_stream_stats *st = &c->w->st.sm;
    if (c->ev_kind == HB__EV_SSE) {
        HB__ADD(st->sse_events, 1);
        HB__ADD(st->sse_bytes, c->ev_unsent);
    } else {
        HB__ADD(st->stream_chunks, 1);
        HB__ADD(st->stream_bytes, c->ev_unsent);
    }
    c->ev_unsent = 0;
}

/* Start the route's stream after its head. */
static void ev_begin(hb__conn *c, int kind, uint64_t count, uint64_t interval_ms)
{
    c->ev_kind = (uint8_t)kind;
    c->ev_active = 1;
    c->ev_seq = 0;
    c->ev_count = count;
    c->ev_interval = interval_ms * HB__SRV_MS;
    c->ev_due = c->w->now;
    c->ev_unsent = 0;
    c->phase = HB__PH_WAIT;
    c->wait_kind = HB__W_EVENTS;
}

void hb__sse_respond(hb__conn *c)
{
    const hb_route_req *rq = &c->rq;
    int chunked = c->minor >= 1;
    if (!chunked) c->close_after = 1; /* HTTP/1.0: delimited by the close */
    hb__out_head(c, 200, CT_SSE, sizeof CT_SSE - 1, -1, chunked);
    if (c->head_only) return;
    HB__ADD(c->w->st.sm.sse_streams, 1);
    ev_begin(c, HB__EV_SSE, rq->p.sse.events, rq->p.sse.interval_ms);
    /* the preamble (a comment and the retry field) goes with the head */
    if (chunked) HB__OUT_LIT(c, "19\r\n");
    HB__OUT_LIT(c, HB_SSE_PREAMBLE);
    if (chunked) HB__OUT_LIT(c, "\r\n");
}

void hb__stream_respond(hb__conn *c)
{
    const hb_route_req *rq = &c->rq;
    int chunked = c->minor >= 1;
    if (!chunked) c->close_after = 1;
    hb__out_head(c, 200, HB__CT_OCTET, sizeof HB__CT_OCTET - 1, -1, chunked);
    if (c->head_only) return;
    HB__ADD(c->w->st.sm.stream_streams, 1);
    uint64_t n = rq->p.stream.n, k = rq->p.stream.chunk;
    ev_begin(c, HB__EV_STREAM, (n + k - 1) / k, rq->p.stream.interval_ms);
}

/* Queue the next event or chunk (the output queue is empty). */
static void queue_next(hb__conn *c)
{
    const hb_route_req *rq = &c->rq;
    int chunked = c->minor >= 1;
    char line[24];
    size_t ll = 0, len;
    uint64_t i = c->ev_seq++;
    if (c->ev_kind == HB__EV_SSE) {
        struct iovec iov[HB_SSE_EVENT_IOV];
        int n = hb_sse_event_iov(iov, c->ev_scratch, i + 1, rq->p.sse.size, &len);
        if (chunked) {
            ll = hb__xtoa(line, len);
            line[ll++] = '\r';
            line[ll++] = '\n';
            hb__out_bytes(c, line, ll);
        }
        /* an event that fits the output buffer goes as one contiguous piece: one
         * iovec for the kernel to import instead of six */
        int copy = c->olen + len + 2 <= HB__SRV_OBUF;
        for (int k = 0; k < n; k++) {
            if (copy)
                hb__out_bytes(c, iov[k].iov_base, iov[k].iov_len);
            else
                hb__out_iov(c, iov[k].iov_base, iov[k].iov_len);
        }
    } else {
        uint64_t off = i * rq->p.stream.chunk;
        uint64_t left = rq->p.stream.n - off;
        len = (size_t)(left < rq->p.stream.chunk ? left : rq->p.stream.chunk);
        if (chunked) {
            ll = hb__xtoa(line, len);
            line[ll++] = '\r';
            line[ll++] = '\n';
            hb__out_bytes(c, line, ll);
        }
        hb__out_content(c, off, len);
    }
    if (chunked) hb__out_bytes(c, "\r\n", 2);
    c->ev_unsent = len;
}

int hb__ev_step(hb__conn *c)
{
    hb__worker *w = c->w;
    count_written(c);
    if (c->ev_seq == c->ev_count) {
        c->ev_active = 0;
        c->wait_kind = HB__W_NONE;
        c->phase = HB__PH_HEAD;
        if (c->minor >= 1) HB__OUT_LIT(c, "0\r\n\r\n");
        hb__request_done(c);
        return 1;
    }
    /* the first event goes at once, each next one an interval after the previous */
    if (c->ev_seq && c->ev_interval) {
        if (w->now < c->ev_due) {
            if (!hb_timer_armed(&c->timer) && hb__conn_timer(c, c->ev_due) < 0) {
                c->ev_active = 0;
                c->after = HB__AF_RESET;
                return 1;
            }
            return 0;
        }
    }
    /* a flood to a fast reader never blocks: after a turn's budget the others go first */
    if (c->budget <= 0) {
        hb__conn_defer(c);
        return 0;
    }
    c->ev_due = w->now + c->ev_interval;
    queue_next(c);
    c->budget -= (int64_t)c->ev_unsent;
    return 1;
}
