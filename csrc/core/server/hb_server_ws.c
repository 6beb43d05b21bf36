/* hb_server_ws.c - WebSocket (RFC 6455) on the embedded server: the upgrade
 * of GET /ws, then echo (every message back, frame by frame as it arrives:
 * nothing is buffered beyond the read buffer) and ?push=N server messages,
 * ping -> pong, the close handshake. Frames are read with hb_ws_rx, unmasked
 * in place in the read buffer, and echoed by reference into it (input is only
 * read when the output queue is empty, as for HTTP/1.1's echo).
 *
 * Bounds: a message is at most HB__WS_MAX_MSG bytes in HB__WS_MAX_FRAGS frames
 * (beyond: close 1009); a client that stops reading is cut by the write
 * timeout; one that never answers our close is closed HB__WS_CLOSE_WAIT after
 * it; an idle one after the keep-alive timeout. permessage-deflate, when the
 * client offers it, is hb_server_wsz.c's: a compressed message goes through its
 * pump (inflate, check, re-deflate) instead of the echo by reference. */
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "base/hb_content.h"
#include "server/hb_server_int.h"
#include "ws/hb_ws.h"

#define HB__WS_MAX_MSG (64ull << 20)
#define HB__WS_MAX_FRAGS 4096
#define HB__WS_CLOSE_WAIT (1000 * HB__SRV_MS)

#define WS_ADD(f, n) HB__ADD(c->w->st.ws.f, (n))

static int close_slot(int code)
{
    return code >= 1000 && code < 1000 + HB_SERVER_WS_CODES - 1 ? code - 1000
                                                                : HB_SERVER_WS_CODES - 1;
}

/* A token in a comma-separated header value, case-insensitively. */
static int has_token(const char *v, size_t n, const char *tok)
{
    size_t tl = strlen(tok);
    size_t i = 0;
    while (i < n) {
        while (i < n && (v[i] == ' ' || v[i] == '\t' || v[i] == ','))
            i++;
        size_t s = i;
        while (i < n && v[i] != ',')
            i++;
        size_t e = i;
        while (e > s && (v[e - 1] == ' ' || v[e - 1] == '\t'))
            e--;
        if (e - s == tl && strncasecmp(v + s, tok, tl) == 0) return 1;
    }
    return 0;
}

static int name_is(const hb_header *h, const char *name)
{
    size_t n = strlen(name);
    return h->name_len == n && strncasecmp(h->name, name, n) == 0;
}

int hb__ws_upgrade(hb__conn *c, const hb_request_head *h)
{
    const char *key = NULL;
    size_t key_len = 0;
    int upgrade = 0, connection = 0, version = 0, keys = 0;
    for (size_t i = 0; i < h->num_headers; i++) {
        const hb_header *f = &h->headers[i];
        if (name_is(f, "upgrade"))
            upgrade |= has_token(f->value, f->value_len, "websocket");
        else if (name_is(f, "connection"))
            connection |= has_token(f->value, f->value_len, "upgrade");
        else if (name_is(f, "sec-websocket-version"))
            version = f->value_len == 2 && memcmp(f->value, "13", 2) == 0 ? 1 : -1;
        else if (name_is(f, "sec-websocket-key")) {
            keys++;
            key = f->value;
            key_len = f->value_len;
        }
    }
    if (keys != 1) key = NULL; /* none, or more than one: invalid */
    int is_get = h->method_len == 3 && memcmp(h->method, "GET", 3) == 0;
    if (!is_get || h->minor_version < 1 || !upgrade || !connection || !key ||
        !hb_ws_key_ok(key, key_len) || c->body_chunked || c->body_left) {
        WS_ADD(bad_upgrades, 1);
        hb__respond_error_close(c, -1, 400, "bad WebSocket upgrade\n");
        return -1;
    }
    if (version != 1) {
        WS_ADD(bad_upgrades, 1);
        c->close_after = 1;
        static const char v[] = "Sec-WebSocket-Version: 13\r\n";
        hb__out_head(c, 426, v, sizeof v - 1, 0, 0);
        return -1;
    }
    char accept[29];
    hb_ws_accept(key, key_len, accept);
    struct hb__wsz *z = NULL;
    char ext[160];
    int zr = hb__wsz_negotiate(h, &z, ext, sizeof ext);
    if (zr < 0) {
        hb__respond_error_close(c, -1, 503, "out of memory\n");
        return -1;
    }
    static const char head[] = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                               "Connection: Upgrade\r\nSec-WebSocket-Accept: ";
    HB__OUT_LIT(c, head);
    hb__out_bytes(c, accept, 28);
    HB__OUT_LIT(c, "\r\n");
    if (z) {
        hb__out_bytes(c, ext, strlen(ext));
        WS_ADD(deflate, 1);
    }
    HB__OUT_LIT(c, "\r\n");
    hb__count_status(c, 101);
    c->responded = 1;
    WS_ADD(upgrades, 1);

    hb__ws *ws = &c->ws;
    memset(ws, 0, sizeof *ws);
    hb_ws_rx_init(&ws->rx, HB_WS_SERVER | (z ? HB_WS_DEFLATE : 0), HB__WS_MAX_MSG,
                  HB__WS_MAX_FRAGS);
    ws->z = z;
    ws->push_left = c->rq.p.ws.push;
    ws->push_size = c->rq.p.ws.size;
    ws->push_interval = c->rq.p.ws.interval_ms * HB__SRV_MS;
    ws->push_text = (uint8_t)c->rq.p.ws.text;
    ws->push_due = c->w->now;
    ws->last_in = c->w->now;
    c->proto = HB__PROTO_WS;
    c->mp = &hb__srv_ws; /* from here the connection is driven by the table below */
    c->phase = HB__PH_HEAD;
    c->req_deadline = 0;
    return 0;
}

/* Queue a frame head (into obuf) and count the frame. */
static void frame(hb__conn *c, int fin, int op, uint64_t len)
{
    uint8_t h[HB_WS_MAX_HEAD];
    int n = hb_ws_build_head(h, sizeof h, fin, op, len, NULL);
    hb__out_bytes(c, h, (size_t)n);
    WS_ADD(frames_out, 1);
    if (op < HB_WS_CLOSE) WS_ADD(payload_out, len); /* message bytes only */
}

static void send_close(hb__conn *c, int code)
{
    hb__ws *ws = &c->ws;
    if (ws->close_sent) return;
    uint8_t p[2];
    int n = code == 1005 ? 0 : hb_ws_close_build(p, sizeof p, code, NULL, 0);
    frame(c, 1, HB_WS_CLOSE, (uint64_t)n);
    if (n > 0) hb__out_bytes(c, p, (size_t)n);
    ws->close_sent = 1;
    ws->close_deadline = c->w->now + HB__WS_CLOSE_WAIT;
    WS_ADD(close_sent[close_slot(code)], 1);
}

/* One event of the reader. 0 go on, 1 the connection is done (after the flush). */
static int on_event(hb__conn *c, const hb_ws_event *ev)
{
    hb__ws *ws = &c->ws;
    switch (ev->type) {
    case HB_WS_EV_DATA:
        if (ws->close_sent) return 0; /* after our close: read, never answer */
        if (ev->compressed) {         /* counted when its echo is out (hb__wsz_pump) */
            hb__wsz_input(ws->z, ev->data, ev->data_len, ev->first, ev->fin, ev->opcode);
            return 0;
        }
        if (ev->data_len || ev->fin) {
            frame(c, ev->fin, ws->echo_open ? HB_WS_CONT : ev->opcode, ev->data_len);
            hb__out_iov(c, ev->data, ev->data_len);
            ws->echo_open = !ev->fin;
        }
        if (ev->fin) {
            WS_ADD(messages_in, 1);
            WS_ADD(messages_out, 1);
        }
        return 0;
    case HB_WS_EV_PING:
        WS_ADD(pings, 1);
        if (ws->close_sent) return 0;
        frame(c, 1, HB_WS_PONG, ev->data_len);
        hb__out_bytes(c, ev->data, ev->data_len);
        return 0;
    case HB_WS_EV_PONG:
        WS_ADD(pongs, 1);
        return 0;
    case HB_WS_EV_CLOSE:
        WS_ADD(close_received[close_slot(ev->code)], 1);
        ws->close_recv = 1;
        send_close(c, ev->code); /* the reply echoes the code (none: an empty close) */
        return 1;
    default:
        return 0;
    }
}

/* Read frames from the read buffer while the output queue has room. */
/* A compressed message's pending work. 0 done, 1 waiting for output room, -1 closed. */
static int pump(hb__conn *c)
{
    hb__ws *ws = &c->ws;
    if (!ws->z) return 0;
    int r = hb__wsz_pump(c, ws->z);
    if (r == 2 || r == 3) {
        if (r == 2) WS_ADD(messages_in, 1);
        WS_ADD(messages_out, 1);
        WS_ADD(compressed, 1);
        if (r == 3) {
            WS_ADD(pushed, 1);
            if (!ws->push_left) send_close(c, 1000); /* the last push is out: close */
        }
        return 0;
    }
    if (r > 3) {
        WS_ADD(errors, 1);
        send_close(c, r);
        ws->done = 1;
        return -1;
    }
    return r;
}

static int process(hb__conn *c)
{
    hb__ws *ws = &c->ws;
    int pr = pump(c);
    if (pr < 0) return 1;
    if (pr > 0) return 0;
    while (c->rpos < c->rlen && hb__out_room(c)) {
        hb_ws_event ev;
        uint64_t frames = ws->rx.frames;
        int rc = hb_ws_rx_next(&ws->rx, (uint8_t *)c->rbuf + c->rpos, c->rlen - c->rpos, &ev);
        if (rc < 0) {
            WS_ADD(errors, 1);
            send_close(c, hb_ws_close_code(rc));
            ws->done = 1;
            return 1;
        }
        WS_ADD(frames_in, ws->rx.frames - frames);
        c->rpos += (size_t)rc;
        if (rc) ws->last_in = c->w->now;
        WS_ADD(payload_in, ev.type == HB_WS_EV_DATA ? ev.data_len : 0);
        if (ev.type == HB_WS_EV_NONE) {
            if (c->rlen - c->rpos == c->w->srv->rbuf_size) { /* cannot happen: a head fits */
                send_close(c, 1009);
                ws->done = 1;
                return 1;
            }
            return 0;
        }
        if (on_event(c, &ev)) {
            ws->done = 1;
            return 1;
        }
        pr = pump(c);
        if (pr < 0) return 1;
        if (pr > 0) return 0;
    }
    return 0;
}

/* Queue the next pushed message when it is due. 1 queued, 0 not now. */
static int push(hb__conn *c)
{
    hb__ws *ws = &c->ws;
    if (!ws->push_left || ws->close_sent) return 0;
    if (ws->push_interval && ws->pushed && c->w->now < ws->push_due) {
        if (!hb_timer_armed(&c->timer) && hb__conn_timer(c, ws->push_due) < 0) ws->done = 1;
        return 0;
    }
    if (c->budget <= 0) { /* a flood: the worker's other connections first */
        hb__conn_defer(c);
        return 0;
    }
    if (ws->z) { /* compressed, through the pump; never inside an open message */
        if (hb__wsz_active(ws->z) || ws->echo_open) return 0;
        c->budget -= HB__SRV_FRAME_COST;
        hb__wsz_push(ws->z, c->w->srv->content, ws->push_size,
                     ws->push_text ? HB_WS_TEXT : HB_WS_BINARY);
        ws->pushed++;
        ws->push_left--;
        ws->push_due = c->w->now + ws->push_interval;
        return 1;
    }
    c->budget -= (int64_t)ws->push_size + HB__SRV_FRAME_COST;
    frame(c, 1, ws->push_text ? HB_WS_TEXT : HB_WS_BINARY, ws->push_size);
    hb__out_content(c, 0, (size_t)ws->push_size);
    WS_ADD(messages_out, 1);
    WS_ADD(pushed, 1);
    ws->pushed++;
    ws->push_left--;
    ws->push_due = c->w->now + ws->push_interval;
    if (!ws->push_left) send_close(c, 1000); /* all pushed: the close handshake */
    return 1;
}

static int flush_out(hb__conn *c)
{
    while (hb__has_output(c)) {
        int cnt = c->niov < IOV_MAX ? c->niov : IOV_MAX;
        ssize_t n = hb__conn_write(c, &c->iov[c->iov_first], cnt);
        if (n == HB_AGAIN) return 0;
        if (n < 0) return -1;
        size_t left = (size_t)n;
        while (left && c->niov) {
            struct iovec *v = &c->iov[c->iov_first];
            if (left >= v->iov_len) {
                left -= v->iov_len;
                c->iov_first++;
                c->niov--;
            } else {
                v->iov_base = (char *)v->iov_base + left;
                v->iov_len -= left;
                left = 0;
            }
        }
        if (c->niov && !c->sock.ssl) {
            c->wr_ready = 0;
            return 0;
        }
    }
    c->iov_first = 0;
    c->olen = 0;
    return 0;
}

static void ws_gone(hb__conn *c)
{
    c->peer_left = 1;
    hb__conn_free(c, 0);
}

static void ws_run(hb__conn *c)
{
    hb__ws *ws = &c->ws;
    hb_server *srv = c->w->srv;
    for (;;) {
        if (hb__has_output(c)) {
            if (!c->wr_ready) return;
            if (flush_out(c) < 0) {
                ws_gone(c);
                return;
            }
            if (hb__has_output(c)) return;
        }
        /* the output is out: the read buffer's echoed bytes are free again */
        if (ws->done || (ws->close_sent && ws->close_recv)) {
            hb__conn_free(c, 0);
            return;
        }
        if (process(c)) continue;
        if (hb__has_output(c)) continue;
        if (push(c)) continue;
        if (c->peer_eof) {
            ws_gone(c);
            return;
        }
        if (hb__wsz_busy(ws->z)) { /* a compressed message's turn ran out: the others first */
            hb__conn_defer(c);
            return;
        }
        if (!c->rd_ready) return;
        if (c->budget <= 0) {
            hb__conn_defer(c);
            return;
        }
        if (c->rpos == c->rlen) {
            c->rpos = c->rlen = 0;
        } else if (c->rpos > 0) {
            memmove(c->rbuf, c->rbuf + c->rpos, c->rlen - c->rpos);
            c->rlen -= c->rpos;
            c->rpos = 0;
        }
        size_t space = srv->rbuf_size - c->rlen;
        ssize_t n = hb_sock_read(&c->sock, c->rbuf + c->rlen, space);
        if (n > 0) {
            HB__ADD(c->w->st.bytes_in, (uint64_t)n);
            c->budget -= n;
            c->rlen += (size_t)n;
            /* a short plain read drained the socket (edge-triggered: epoll says when more
             * comes), unless the wake-up carried the FIN: then read on until EOF */
            if ((size_t)n < space && !c->sock.ssl && !c->rdhup) c->rd_ready = 0;
        } else if (n == 0) {
            c->peer_eof = 1;
        } else if (n == HB_AGAIN) {
            c->rd_ready = 0;
            return;
        } else {
            ws_gone(c);
            return;
        }
    }
}

static void ws_sweep(hb__conn *c)
{
    hb__worker *w = c->w;
    hb__ws *ws = &c->ws;
    if (hb__has_output(c) && w->now >= c->wr_deadline) { /* the client stopped reading */
        WS_ADD(write_timeouts, 1);
        hb__conn_free(c, 1);
        return;
    }
    if (ws->close_sent && w->now >= ws->close_deadline) { /* our close was never answered */
        WS_ADD(close_timeouts, 1);
        hb__conn_free(c, 0);
        return;
    }
    if (!ws->push_left && !hb__has_output(c) &&
        w->now - ws->last_in >= (uint64_t)w->srv->o.keepalive_timeout_ms * HB__SRV_MS) {
        HB__ADD(w->st.idle_timeouts, 1);
        hb__conn_free(c, 0);
    }
}

/* The connection ends: without a close frame from the peer, that is 1006. */
static void ws_end(hb__conn *c, int peer_left)
{
    (void)peer_left;
    if (!c->ws.close_recv) WS_ADD(close_received[close_slot(1006)], 1);
    hb__wsz_free(c->ws.z);
    c->ws.z = NULL;
}

static void ws_timer(hb__conn *c)
{
    (void)c; /* a push's interval: the run that follows sends it */
}

static int ws_enabled(const hb_server *srv)
{
    (void)srv;
    return 1;
}

static void ws_worker(hb__worker *w)
{
    (void)w;
}

static int ws_alpn(hb__conn *c)
{
    (void)c;
    return 0; /* only the HTTP/1.1 upgrade of /ws switches a connection to WebSocket */
}

static int ws_sniff(hb__conn *c)
{
    (void)c;
    return -1;
}

const hb__conn_proto hb__srv_ws = {
    .enabled = ws_enabled,
    .worker_init = ws_worker,
    .worker_idle = ws_worker,
    .alpn = ws_alpn,
    .sniff = ws_sniff,
    .run = ws_run,
    .timer = ws_timer,
    .sweep = ws_sweep,
    .end = ws_end,
};

/* {"1000": n, ...} of the codes with a count ("0": the rest). */
static size_t codes_json(const uint64_t *v, char *p, size_t cap)
{
    size_t n = 0;
    for (int i = 0; i < HB_SERVER_WS_CODES; i++) {
        if (!v[i]) continue;
        int k = snprintf(p + n, cap - n, "%s\"%d\": %llu", n ? ", " : "",
                         i == HB_SERVER_WS_CODES - 1 ? 0 : 1000 + i, (unsigned long long)v[i]);
        if (k < 0 || (size_t)k >= cap - n) break;
        n += (size_t)k;
    }
    return n;
}

void hb__ws_stats_json(const hb_server_ws_stats *w, char *body, size_t cap, size_t *at)
{
    char sent[HB_SERVER_WS_CODES * 32], recv[HB_SERVER_WS_CODES * 32];
    sent[codes_json(w->close_sent, sent, sizeof sent)] = 0;
    recv[codes_json(w->close_received, recv, sizeof recv)] = 0;
    int k = snprintf(body + *at, cap - *at,
                     "\"ws\": {\"upgrades\": %llu, \"bad_upgrades\": %llu, \"frames_in\": %llu, "
                     "\"frames_out\": %llu, \"messages_in\": %llu, \"messages_out\": %llu, "
                     "\"payload_in\": %llu, \"payload_out\": %llu, \"pings\": %llu, "
                     "\"pongs\": %llu, \"pushed\": %llu, \"errors\": %llu, "
                     "\"write_timeouts\": %llu, \"close_timeouts\": %llu, "
                     "\"deflate\": %llu, \"compressed\": %llu, "
                     "\"close_sent\": {%s}, \"close_received\": {%s}}, ",
                     (unsigned long long)w->upgrades, (unsigned long long)w->bad_upgrades,
                     (unsigned long long)w->frames_in, (unsigned long long)w->frames_out,
                     (unsigned long long)w->messages_in, (unsigned long long)w->messages_out,
                     (unsigned long long)w->payload_in, (unsigned long long)w->payload_out,
                     (unsigned long long)w->pings, (unsigned long long)w->pongs,
                     (unsigned long long)w->pushed, (unsigned long long)w->errors,
                     (unsigned long long)w->write_timeouts, (unsigned long long)w->close_timeouts,
                     (unsigned long long)w->deflate, (unsigned long long)w->compressed, sent, recv);
    if (k > 0) *at = *at + (size_t)k < cap ? *at + (size_t)k : cap - 1;
}
