/* hb_route_plan.h - what each route answers, independent of the protocol:
 * hb_route_plan fills a small plan (respond / reset / delay / stats, status,
 * content type, content-length, where the body comes from, how it is paced)
 * that the HTTP/2 and HTTP/3 servers only execute with their own framing. */
#ifndef HB_ROUTE_PLAN_H
#define HB_ROUTE_PLAN_H

#include <stdio.h>
#include <string.h>

#include "http/hb_route.h"

/* What a route's answer is, whatever the protocol: each server only executes
 * the plan with its own framing, so a route means the same on every one. */
enum hb_route_act {
    HB_ACT_RESPOND = 0, /* a response: the head, then the body described */
    HB_ACT_RESET,       /* no response: reset the stream (HTTP/1.1: the connection) */
    HB_ACT_DELAY,       /* wait wait_ms, then respond as described */
    HB_ACT_STATS,       /* the stats document, rendered by the server */
};

/* Where the body comes from. */
enum hb_route_src {
    HB_SRC_CONTENT = 0, /* hb_content bytes [0, n) */
    HB_SRC_MEM,         /* mem[0, n) */
    HB_SRC_EVENTS,      /* the route's events (/sse, /stream), each its own write or frame */
};

/* How the body is paced after the first `avail` bytes. */
enum hb_route_wait {
    HB_WAIT_NONE = 0,
    HB_WAIT_DRIP,  /* drip.chunk bytes every wait_ms */
    HB_WAIT_STALL, /* the rest wait_ms after the first avail bytes are out */
};

/* The request state a route's answer depends on. */
typedef struct hb_route_in {
    uint64_t body_bytes; /* request body bytes received (sink) */
    uint32_t crc;        /* their CRC-32 (sink) */
    int head_only;       /* HEAD: no body, and a drip does not wait */
    const char *echo;    /* the buffered request body (echo answered at the end) */
    size_t echo_len;
    int echo_too_large; /* the echo buffer overflowed: 413 */
    char *jbuf;         /* where the sink's JSON is rendered (>= 64 bytes) */
    size_t jcap;
    int events_ok; /* the server sends HB_SRC_EVENTS bodies (else those routes answer 501) */
} hb_route_in;

/* The plan: fields past `act` are meaningful for RESPOND and DELAY. */
typedef struct hb_route_answer {
    int act;          /* enum hb_route_act */
    int status;       /* response status */
    const char *ct;   /* content type (static) */
    size_t ct_len;    /* its length */
    int src;          /* enum hb_route_src */
    const char *mem;  /* HB_SRC_MEM: the body (static, jbuf or echo) */
    int64_t cl;       /* content-length; -1: none (chunked route: delimited otherwise) */
    uint64_t n;       /* body bytes in all */
    uint64_t avail;   /* of which sendable at once; the rest waits */
    int wait;         /* enum hb_route_wait */
    uint64_t wait_ms; /* DELAY's wait, the drip interval, the stall, or between events */
    int no_eof;       /* a fault: the body never ends; the stream or connection is cut */
} hb_route_answer;

#define HB__RP_OCTET "application/octet-stream"
#define HB__RP_TEXT "text/plain"
#define HB__RP_JSON "application/json"
#define HB__RP_SSE "text/event-stream"

static inline void hb__rp_mem(hb_route_answer *a, int status, const char *ct, size_t ct_len,
                              const char *body, size_t len)
{
    int nobody = status == 204 || status == 304; /* no body, no content-length */
    a->status = status;
    a->ct = ct;
    a->ct_len = ct_len;
    a->src = HB_SRC_MEM;
    a->mem = body;
    a->cl = nobody ? -1 : (int64_t)len;
    a->n = a->avail = nobody ? 0 : len;
}

#define HB__RP_TEXT_LIT(a, code, lit)                                                              \
    hb__rp_mem((a), (code), HB__RP_TEXT, sizeof HB__RP_TEXT - 1, (lit), sizeof(lit) - 1)

/* Generated content: `cl` announced (-1: none), n in all, avail at once. */
static inline void hb__rp_content(hb_route_answer *a, int64_t cl, uint64_t n, uint64_t avail)
{
    a->status = 200;
    a->ct = HB__RP_OCTET;
    a->ct_len = sizeof HB__RP_OCTET - 1;
    a->src = HB_SRC_CONTENT;
    a->cl = cl;
    a->n = n;
    a->avail = avail;
}

/* Plan the answer to a routed request (hb_route_parse's result) whose body,
 * if any, has been read. Pure: no state, no allocation; every route and
 * status gets a plan (unknown routes: 404). Inline: each server's request
 * path then costs what its own route switch did. */
__attribute__((always_inline)) static inline void
hb_route_plan(const hb_route_req *rq, const hb_route_in *in, hb_route_answer *out)
{
    /* field by field, not memset: the inlined plan then lives in registers */
    out->act = HB_ACT_RESPOND;
    out->mem = NULL;
    out->wait = HB_WAIT_NONE;
    out->wait_ms = 0;
    out->no_eof = 0;
    if (rq->stats_page) {
        if (rq->status == 200) {
            hb__rp_content(out, -1, 0, 0); /* no body of the plan's own */
            out->act = HB_ACT_STATS;
        } else
            HB__RP_TEXT_LIT(out, 405, "method not allowed\n");
        return;
    }
    switch (rq->status) {
    case 200:
        break;
    case 400:
        HB__RP_TEXT_LIT(out, 400, "bad parameter\n");
        return;
    case 405:
        HB__RP_TEXT_LIT(out, 405, "method not allowed\n");
        return;
    default:
        HB__RP_TEXT_LIT(out, 404, "not found\n");
        return;
    }
    switch (rq->route) {
    case HB_ROUTE_ROOT:
        HB__RP_TEXT_LIT(out, 200, "httpbench test server\n");
        break;
    case HB_ROUTE_BYTES:
        hb__rp_content(out, (int64_t)rq->p.bytes.n, rq->p.bytes.n, rq->p.bytes.n);
        break;
    case HB_ROUTE_CHUNKED: /* the length is never announced */
        hb__rp_content(out, -1, rq->p.chunked.n, rq->p.chunked.n);
        break;
    case HB_ROUTE_SINK: {
        int n = in->jbuf ? snprintf(in->jbuf, in->jcap, "{\"bytes\": %llu, \"crc32\": \"%08x\"}",
                                    (unsigned long long)in->body_bytes, in->crc)
                         : -1;
        if (n < 0 || (size_t)n >= in->jcap) {
            HB__RP_TEXT_LIT(out, 500, "internal error\n");
            break;
        }
        hb__rp_mem(out, 200, HB__RP_JSON, sizeof HB__RP_JSON - 1, in->jbuf, (size_t)n);
        break;
    }
    case HB_ROUTE_ECHO:
        if (in->echo_too_large)
            HB__RP_TEXT_LIT(out, 413, "request body too large\n");
        else
            hb__rp_mem(out, 200, HB__RP_OCTET, sizeof HB__RP_OCTET - 1, in->echo, in->echo_len);
        break;
    case HB_ROUTE_DELAY:
        hb__rp_content(out, (int64_t)rq->p.delay.bytes, rq->p.delay.bytes, rq->p.delay.bytes);
        if (rq->p.delay.ms) {
            out->act = HB_ACT_DELAY;
            out->wait_ms = rq->p.delay.ms;
        }
        break;
    case HB_ROUTE_STATUS:
        hb__rp_mem(out, rq->p.status.code, HB__RP_TEXT, sizeof HB__RP_TEXT - 1, "", 0);
        break;
    case HB_ROUTE_DRIP:
        hb__rp_content(out, (int64_t)rq->p.drip.n, rq->p.drip.n, 0);
        if (rq->p.drip.n && !in->head_only) {
            out->wait = HB_WAIT_DRIP;
            out->wait_ms = rq->p.drip.interval_ms;
        }
        break;
    case HB_ROUTE_CLOSE_AFTER_HEADERS:
        hb__rp_content(out, (int64_t)rq->p.fault.bytes, 0, 0);
        out->no_eof = 1;
        break;
    case HB_ROUTE_CLOSE_MID_BODY:
        hb__rp_content(out, (int64_t)rq->p.fault.bytes, rq->p.fault.bytes / 2,
                       rq->p.fault.bytes / 2);
        out->no_eof = 1;
        break;
    case HB_ROUTE_RESET:
        hb__rp_content(out, -1, 0, 0);
        out->act = HB_ACT_RESET;
        break;
    case HB_ROUTE_STALL:
        hb__rp_content(out, (int64_t)rq->p.stall.bytes, rq->p.stall.bytes, rq->p.stall.bytes / 2);
        out->wait = HB_WAIT_STALL;
        out->wait_ms = rq->p.stall.ms;
        break;
    case HB_ROUTE_EARLY_RESPONSE:
        HB__RP_TEXT_LIT(out, rq->p.early.status, "early response\n");
        break;
    case HB_ROUTE_STREAM:
        if (in->events_ok) { /* chunk by chunk, each its own frame, paced by the server */
            hb__rp_content(out, -1, rq->p.stream.n, 0);
            out->src = HB_SRC_EVENTS;
            out->wait_ms = rq->p.stream.interval_ms;
            break;
        }
        /* unpaced: the body (the protocol's framing makes the chunks) */
        if (rq->p.stream.interval_ms == 0) {
            hb__rp_content(out, -1, rq->p.stream.n, rq->p.stream.n);
            break;
        }
        HB__RP_TEXT_LIT(out, 501, "paced streams are served over HTTP/1.1 only\n");
        break;
    case HB_ROUTE_SSE:
        if (in->events_ok) { /* the preamble, then the events, each its own frame */
            hb__rp_content(out, -1, 0, 0);
            out->ct = HB__RP_SSE;
            out->ct_len = sizeof HB__RP_SSE - 1;
            out->src = HB_SRC_EVENTS;
            out->wait_ms = rq->p.sse.interval_ms;
            break;
        }
        HB__RP_TEXT_LIT(out, 501, "server-sent events are served over HTTP/1.1 only\n");
        break;
    case HB_ROUTE_WS: /* no extended CONNECT (RFC 8441) */
        HB__RP_TEXT_LIT(out, 501, "WebSocket is served over HTTP/1.1 only\n");
        break;
    default:
        HB__RP_TEXT_LIT(out, 404, "not found\n");
        break;
    }
}

/* The head's digits for servers that send them as header values (h2, h3):
 * the status (100 .. 999) into st[0..2], the content-length (cl >= 0)
 * into clb (at least 20 bytes); returns the content-length's length (0: none).
 * Decimal by hand: no snprintf on every response. */
static inline size_t hb_route_head_digits(int status, int64_t cl, char st[3], char *clb)
{
    st[0] = (char)('0' + status / 100);
    st[1] = (char)('0' + status / 10 % 10);
    st[2] = (char)('0' + status % 10);
    size_t cll = 0;
    if (cl >= 0) {
        char tmp[24];
        uint64_t v = (uint64_t)cl;
        do {
            tmp[cll++] = (char)('0' + v % 10);
            v /= 10;
        } while (v);
        for (size_t i = 0; i < cll; i++)
            clb[i] = tmp[cll - 1 - i];
    }
    return cll;
}

#endif
