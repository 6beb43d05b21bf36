/* hb_server_req.c - request handling: parse a head, route it (hb_route),
 * consume the body (Content-Length or chunked; sink CRCs it, echo queues it
 * back) and queue each route's response. Responses of most routes wait for
 * the body; /echo and /fault/early-response answer before it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/hb_content.h"
#include "server/hb_server_int.h"

#define MAX_HEADERS 100

static void respond_stats(hb__conn *c);

/* Back to reading heads; the next request's clock starts with its bytes. */
void hb__request_done(hb__conn *c)
{
    hb__worker *w = c->w;
    c->phase = HB__PH_HEAD;
    c->uncounted = 0;
    c->responded = 0;
    if (c->rpos < c->rlen) {
        c->req_deadline = w->now + w->req_timeout_ns;
    } else {
        c->req_deadline = 0;
        c->idle_since = w->now;
    }
}

void hb__respond_error_close(hb__conn *c, int route, int status, const char *msg)
{
    if (route >= 0 && !c->uncounted) {
        HB__ADD(c->w->st.by_route[route], 1);
        c->status_owed = 1;
    }
    c->close_after = 1;
    c->head_only = 0;
    hb__respond_text(c, status, msg, strlen(msg));
}

/* Route the parsed head and count it; queue what answers before the body. */
static void dispatch(hb__conn *c, const hb_request_head *h)
{
    hb_route_req *rq = &c->rq;
    hb_route_parse(h->method, h->method_len, h->target, h->target_len, rq);
    c->uncounted = (uint8_t)rq->stats_page;
    if (rq->status == 200 && rq->route == HB_ROUTE_SINK) c->body_mode = HB__BM_SINK;
    if (rq->status == 200 && rq->route == HB_ROUTE_ECHO) c->body_mode = HB__BM_ECHO;
    if (!c->uncounted) {
        HB__ADD(c->w->st.by_route[rq->route], 1);
        c->status_owed = 1;
    }

    int early = rq->status == 200 && rq->route == HB_ROUTE_EARLY_RESPONSE;
    if (c->send_continue && !early) HB__OUT_LIT(c, "HTTP/1.1 100 Continue\r\n\r\n");
    if (rq->status == 200 && rq->route == HB_ROUTE_ECHO) {
        if (c->body_chunked && c->minor >= 1) {
            c->echo_chunked = 1;
            hb__out_head(c, 200, HB__CT_OCTET, sizeof HB__CT_OCTET - 1, -1, 1);
        } else {
            c->echo_chunked = 0;
            if (c->body_chunked) c->close_after = 1; /* HTTP/1.0: delimit by close */
            hb__out_head(c, 200, HB__CT_OCTET, sizeof HB__CT_OCTET - 1,
                         c->body_chunked ? -1 : (int64_t)c->body_left, 0);
        }
    } else if (early) {
        c->close_after = 1;
        hb__respond_text(c, rq->p.early.status, "early response\n", 15);
    }
}

/* Queue the response of a request whose body has been consumed. */
static void finish_request(hb__conn *c)
{
    hb__worker *w = c->w;
    const hb_route_req *rq = &c->rq;
    if (rq->route == HB_ROUTE_ECHO && rq->status == 200) {
        if (c->echo_chunked) HB__OUT_LIT(c, "0\r\n\r\n");
        hb__request_done(c);
        return;
    }
    if (rq->route == HB_ROUTE_EARLY_RESPONSE && rq->status == 200) {
        hb__request_done(c);
        return;
    }
    if (rq->stats_page) {
        if (rq->status == 200)
            respond_stats(c);
        else
            HB__RESPOND_LIT(c, 405, "method not allowed\n");
        hb__request_done(c);
        return;
    }
    switch (rq->status) {
    case 400:
        HB__RESPOND_LIT(c, 400, "bad parameter\n");
        hb__request_done(c);
        return;
    case 404:
        HB__RESPOND_LIT(c, 404, "not found\n");
        hb__request_done(c);
        return;
    case 405:
        HB__RESPOND_LIT(c, 405, "method not allowed\n");
        hb__request_done(c);
        return;
    default:
        break;
    }
    switch (rq->route) {
    case HB_ROUTE_ROOT:
        HB__RESPOND_LIT(c, 200, "httpbench test server\n");
        break;
    case HB_ROUTE_BYTES:
        hb__out_head(c, 200, HB__CT_OCTET, sizeof HB__CT_OCTET - 1, (int64_t)rq->p.bytes.n, 0);
        hb__out_body(c, rq->p.bytes.n);
        break;
    case HB_ROUTE_CHUNKED:
        if (c->minor == 0) { /* no chunked coding for HTTP/1.0: delimit by close */
            c->close_after = 1;
            hb__out_head(c, 200, HB__CT_OCTET, sizeof HB__CT_OCTET - 1, -1, 0);
            if (!c->head_only) hb__stream_start(c, 0, rq->p.chunked.n, 0, 0);
        } else {
            hb__out_head(c, 200, HB__CT_OCTET, sizeof HB__CT_OCTET - 1, -1, 1);
            if (!c->head_only) {
                if (rq->p.chunked.n)
                    hb__stream_start(c, 0, rq->p.chunked.n, rq->p.chunked.chunk, 1);
                else
                    HB__OUT_LIT(c, "0\r\n\r\n");
            }
        }
        break;
    case HB_ROUTE_SINK: {
        char body[96];
        int n = snprintf(body, sizeof body, "{\"bytes\": %llu, \"crc32\": \"%08x\"}",
                         (unsigned long long)c->body_bytes, c->crc);
        hb__out_head(c, 200, HB__CT_JSON, sizeof HB__CT_JSON - 1, n, 0);
        if (!c->head_only) hb__out_bytes(c, body, (size_t)n);
        break;
    }
    case HB_ROUTE_DELAY:
        if (rq->p.delay.ms == 0) {
            hb__out_head(c, 200, HB__CT_OCTET, sizeof HB__CT_OCTET - 1, (int64_t)rq->p.delay.bytes,
                         0);
            hb__out_body(c, rq->p.delay.bytes);
            break;
        }
        c->phase = HB__PH_WAIT;
        c->wait_kind = HB__W_DELAY;
        if (hb__conn_timer(c, w->now + rq->p.delay.ms * HB__SRV_MS) < 0) c->after = HB__AF_RESET;
        return; /* request_done when the timer fires */
    case HB_ROUTE_STATUS:
        hb__respond_text(c, rq->p.status.code, "", 0);
        break;
    case HB_ROUTE_DRIP:
        hb__out_head(c, 200, HB__CT_OCTET, sizeof HB__CT_OCTET - 1, (int64_t)rq->p.drip.n, 0);
        if (c->head_only || rq->p.drip.n == 0) break;
        c->st_off = 0;
        c->st_left = rq->p.drip.n;
        c->phase = HB__PH_WAIT;
        c->wait_kind = HB__W_DRIP;
        if (hb__conn_timer(c, w->now + rq->p.drip.interval_ms * HB__SRV_MS) < 0)
            c->after = HB__AF_RESET;
        return;
    case HB_ROUTE_CLOSE_AFTER_HEADERS:
        c->close_after = 0;
        hb__out_head(c, 200, HB__CT_OCTET, sizeof HB__CT_OCTET - 1, (int64_t)rq->p.fault.bytes, 0);
        c->after = HB__AF_CLOSE;
        break;
    case HB_ROUTE_CLOSE_MID_BODY:
        c->close_after = 0;
        hb__out_head(c, 200, HB__CT_OCTET, sizeof HB__CT_OCTET - 1, (int64_t)rq->p.fault.bytes, 0);
        if (!c->head_only) hb__stream_start(c, 0, rq->p.fault.bytes / 2, 0, 0);
        c->after = HB__AF_CLOSE;
        break;
    case HB_ROUTE_RESET:
        hb__count_status(c, 0);
        c->after = HB__AF_RESET;
        break;
    case HB_ROUTE_STALL:
        hb__out_head(c, 200, HB__CT_OCTET, sizeof HB__CT_OCTET - 1, (int64_t)rq->p.stall.bytes, 0);
        if (c->head_only) break;
        hb__stream_start(c, 0, rq->p.stall.bytes / 2, 0, 0);
        c->after = HB__AF_STALL;
        break;
    case HB_ROUTE_SSE:
        hb__sse_respond(c);
        if (c->ev_active) return; /* hb__request_done when the stream ends */
        break;
    case HB_ROUTE_STREAM:
        hb__stream_respond(c);
        if (c->ev_active) return;
        break;
    default:
        HB__RESPOND_LIT(c, 404, "not found\n");
        break;
    }
    hb__request_done(c);
}

void hb__req_timer(hb__conn *c)
{
    hb__worker *w = c->w;
    const hb_route_req *rq = &c->rq;
    switch (c->wait_kind) {
    case HB__W_DELAY:
        c->wait_kind = HB__W_NONE;
        c->phase = HB__PH_HEAD;
        hb__out_head(c, 200, HB__CT_OCTET, sizeof HB__CT_OCTET - 1, (int64_t)rq->p.delay.bytes, 0);
        hb__out_body(c, rq->p.delay.bytes);
        hb__request_done(c);
        break;
    case HB__W_DRIP: {
        size_t take = c->st_left < rq->p.drip.chunk ? (size_t)c->st_left : rq->p.drip.chunk;
        hb__out_content(c, c->st_off, take);
        c->st_off += take;
        c->st_left -= take;
        if (c->st_left && hb__conn_timer(c, w->now + rq->p.drip.interval_ms * HB__SRV_MS) == 0)
            break;
        c->wait_kind = HB__W_NONE;
        c->phase = HB__PH_HEAD;
        if (c->st_left) c->after = HB__AF_RESET;
        hb__request_done(c);
        break;
    }
    case HB__W_STALL: {
        uint64_t half = rq->p.stall.bytes / 2;
        c->wait_kind = HB__W_NONE;
        c->phase = HB__PH_HEAD;
        hb__stream_start(c, half, rq->p.stall.bytes - half, 0, 0);
        hb__request_done(c);
        break;
    }
    default:
        break;
    }
}

/* Parse one head from the read buffer. 1 progress, 0 need more, -1 stop. */
static int handle_head(hb__conn *c)
{
    hb_server *srv = c->w->srv;
    hb_header hdrs[MAX_HEADERS];
    hb_request_head h;
    memset(&h, 0, sizeof h);
    h.headers = hdrs;
    h.num_headers = MAX_HEADERS;
    hb_parse_limits lim = {srv->o.max_head, MAX_HEADERS};
    size_t avail = c->rlen - c->rpos;
    int r = hb_parse_request_head(c->rbuf + c->rpos, avail, &h, &lim);
    if (r == HB_AGAIN) {
        if (avail >= srv->o.max_head) {
            hb__respond_error_close(c, HB_ROUTE_BAD_REQUEST, 431, "request head too large\n");
            return -1;
        }
        return 0;
    }
    if (r < 0) {
        int big = h.error == HB_PE_HEAD_TOO_LARGE || h.error == HB_PE_TOO_MANY_HEADERS;
        char msg[128];
        snprintf(msg, sizeof msg, "bad request: %s\n", hb_parse_strerror(h.error));
        hb__respond_error_close(c, HB_ROUTE_BAD_REQUEST, big ? 431 : 400, msg);
        return -1;
    }
    if (h.framing.chunked && h.framing.transfer_codings > 1) {
        /* sound framing, but a coding (gzip, chunked) the server does not
         * decode: 501 (RFC 9112 6.1); the body is never read */
        hb__respond_error_close(c, HB_ROUTE_BAD_REQUEST, 501, "transfer coding not implemented\n");
        return -1;
    }
    if (h.minor_version >= 1) {
        /* RFC 9112 3.2: an HTTP/1.1 request without Host, or with more than one, is a 400 */
        size_t hosts = 0;
        for (size_t i = 0; i < h.num_headers; i++) {
            uint32_t v; /* the name, lowercased by OR 0x20 (exact for "host": letters only) */
            if (hdrs[i].name_len != 4) continue;
            memcpy(&v, hdrs[i].name, 4);
            v |= 0x20202020u;
            hosts += memcmp(&v, "host", 4) == 0;
        }
        if (hosts != 1) {
            hb__respond_error_close(c, HB_ROUTE_BAD_REQUEST, 400,
                                    hosts ? "bad request: more than one Host header\n"
                                          : "bad request: no Host header\n");
            return -1;
        }
    }
    c->rpos += (size_t)r;
    if (!c->req_deadline) c->req_deadline = c->w->now + c->w->req_timeout_ns;
    c->minor = h.minor_version;
    c->close_after = (uint8_t)h.framing.connection_close;
    c->ka10 = (uint8_t)(c->minor == 0 && !c->close_after);
    c->head_only = (uint8_t)(h.method_len == 4 && memcmp(h.method, "HEAD", 4) == 0);
    c->body_mode = HB__BM_DISCARD;
    c->body_chunked = (uint8_t)h.framing.chunked;
    c->body_left = (!h.framing.chunked && h.framing.content_length > 0)
                       ? (uint64_t)h.framing.content_length
                       : 0;
    if (c->body_chunked) hb_chunked_init(&c->chunked);
    c->body_bytes = 0;
    c->crc = 0;
    c->echo_chunked = 0;
    int has_body = c->body_chunked || c->body_left > 0;
    /* 1xx only to HTTP/1.1 clients still waiting for it (no body bytes yet) */
    c->send_continue =
        (uint8_t)(has_body && h.framing.expect_continue && c->rpos == c->rlen && c->minor >= 1);
    dispatch(c, &h);
    if (c->rq.route == HB_ROUTE_WS && c->rq.status == 200) {
        hb__ws_upgrade(c, &h); /* 101 (then input is frames), or refused and closing */
        return -1;
    }
    if (c->rq.route == HB_ROUTE_EARLY_RESPONSE && c->rq.status == 200) {
        hb__request_done(c);
        c->phase = HB__PH_HEAD;
        return -1; /* closing: the unread body is drained by linger */
    }
    if (has_body) {
        c->phase = HB__PH_BODY;
        return 1;
    }
    finish_request(c);
    return 1;
}

static void body_data(hb__conn *c, const char *p, size_t n)
{
    c->body_bytes += n;
    HB__ADD(c->w->st.body_in, n);
    if (c->body_mode == HB__BM_SINK) {
        c->crc = hb_crc32(c->crc, p, n);
    } else if (c->body_mode == HB__BM_ECHO && !c->head_only) {
        if (c->echo_chunked) {
            char line[24];
            size_t l = hb__xtoa(line, n);
            line[l++] = '\r';
            line[l++] = '\n';
            hb__out_bytes(c, line, l);
            hb__out_iov(c, p, n);
            hb__out_iov(c, "\r\n", 2);
        } else {
            hb__out_iov(c, p, n);
        }
    }
}

/* Consume body bytes from the read buffer. 1 progress, 0 need more, -1 stop. */
static int handle_body(hb__conn *c)
{
    size_t avail = c->rlen - c->rpos;
    if (c->body_chunked) {
        size_t before = avail;
        while (avail && !c->chunked.done && hb__out_room(c)) {
            const char *data;
            size_t dl;
            ssize_t used = hb_chunked_feed(&c->chunked, c->rbuf + c->rpos, avail, &data, &dl);
            if (used < 0) {
                if (c->responded) { /* echo already answered: nothing sane to add */
                    c->after = HB__AF_CLOSE;
                    return -1;
                }
                hb__respond_error_close(c, -1, 400, "bad chunked body\n");
                return -1;
            }
            if (dl) body_data(c, data, dl);
            c->rpos += (size_t)used;
            avail -= (size_t)used;
        }
        if (!c->chunked.done) return avail < before ? 1 : 0;
    } else {
        size_t take = avail < c->body_left ? avail : (size_t)c->body_left;
        if (take) body_data(c, c->rbuf + c->rpos, take);
        c->rpos += take;
        c->body_left -= take;
        if (c->body_left) return take ? 1 : 0;
    }
    finish_request(c);
    return 1;
}

int hb__process_input(hb__conn *c)
{
    int progress = 0;
    while (hb__out_room(c)) {
        int r;
        if (c->phase == HB__PH_HEAD) {
            if (c->rpos == c->rlen) break;
            r = handle_head(c);
        } else if (c->phase == HB__PH_BODY) {
            if (c->rpos == c->rlen && (c->body_chunked || c->body_left)) break;
            r = handle_body(c);
        } else {
            break;
        }
        if (r < 0) return -1;
        if (r == 0) break;
        progress = 1;
        if (c->st_active || c->after || c->close_after || c->phase == HB__PH_WAIT || c->stats_body)
            break; /* a second stats document waits until the first is written */
        /* echo output points into rbuf: flush before more body overwrites nothing,
         * but keep the queue short so the client sees its bytes promptly */
        if (c->body_mode == HB__BM_ECHO && hb__has_output(c) && c->phase == HB__PH_BODY) break;
    }
    return progress;
}

static void respond_stats(hb__conn *c)
{
    size_t n = 0;
    char *body = hb__stats_json(c->w->srv, &n);
    if (!body) {
        HB__RESPOND_LIT(c, 503, "out of memory\n");
        return;
    }
    hb__out_head(c, 200, HB__CT_JSON, sizeof HB__CT_JSON - 1, (int64_t)n, 0);
    if (c->head_only) {
        free(body);
        return;
    }
    hb__out_iov(c, body, n);
    c->stats_body = body;
}
