/* hb_engine_ws.c - WebSocket (RFC 6455) behind the engine's protocol table:
 * each connection upgrades (GET with Upgrade: websocket, the 101 and its
 * Sec-WebSocket-Accept checked), then a "request" is one message sent and its
 * echo received whole: the latency histogram is the echo round trip, ttfb the
 * time to the echo's first byte. Messages in flight per connection are the
 * pipeline; rate mode's slots are message sends. The frame is prepared once
 * per run unmasked; at send time each frame gets its own masking key (RFC 6455
 * 5.3) from a per-connection splitmix64 seeded by getrandom, masked while it
 * is copied into the connection's send buffer (one pass over the payload).
 * Errors: a refused upgrade -> upgrade, a broken frame -> protocol, the
 * server's close with messages in flight -> ws_close (the code in the detail).
 * See hb_engine_int.h for how the engine's files share the work. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>

#include "base/hb_clock.h"
#include "base/hb_content.h"
#include "engine/hb_engine_int.h"
#include "http/hb_parse.h"
#include "ws/hb_ws.h"

#define MAX_HEADERS 64
#define PBUF_MAX (256u * 1024u)
#define MAX_MSG (64ull << 20)  /* an echo larger than this is a protocol error */
#define SBUF_MAX (64u * 1024u) /* a connection's send buffer at most */

typedef struct wsconn {
    econn base; /* first: the engine's part */
    char *rbuf;
    size_t rcap, rlen, rpos;
    int upgraded;   /* the 101 was read */
    size_t hs_left; /* upgrade request bytes not yet written */
    hb_ws_rx rx;
    req_slot *ring; /* messages in flight, capacity = pipeline, base.rcount from rhead */
    uint32_t rhead, nstarted;
    uint64_t wleft; /* bytes of the ring's messages not yet written */
    uint64_t first_byte, msg_bytes;
    int have_first;
    uint8_t *sbuf; /* masked frames ready to write: [spos, slen) */
    size_t scap, spos, slen;
    uint64_t rng;   /* splitmix64 state: the masking keys */
    uint8_t key[4]; /* the key of the frame being staged */
} wsconn;

static inline wsconn *WS(econn *c)
{
    return (wsconn *)c;
}

static inline req_slot *ring_at(econn *c, uint32_t i)
{
    wsconn *wc = WS(c);
    return &wc->ring[(wc->rhead + i) % c->th->e->cfg.pipeline];
}

static void fail(econn *c, int type, int rc, const char *detail)
{
    hb__eng_fail_all(c, type, rc, detail);
}

static void update_write_interest(econn *c, int blocked)
{
    if (c->write_blocked != blocked) {
        c->write_blocked = blocked;
        hb__eng_update_interest(c);
    }
}

/* Write the rest of the upgrade request. 0 done, 1 blocked, -1 failed (c closed). */
static int write_upgrade(econn *c)
{
    wsconn *wc = WS(c);
    hb_engine *e = c->th->e;
    while (wc->hs_left) {
        ssize_t w = hb_sock_write(&c->s, e->head + e->ws_head_len - wc->hs_left, wc->hs_left);
        if (w == HB_AGAIN) {
            update_write_interest(c, c->s.want != HB_WANT_READ);
            return 1;
        }
        if (w < 0) {
            char err[HB_ERR_LEN];
            hb_sock_errstr(&c->s, (int)w, err);
            fail(c, HB_ENG_ERR_WRITE, (int)w, err);
            return -1;
        }
        wc->hs_left -= (size_t)w;
        if (hb_now_ns() >= e->measure_ns) c->th->r.bytes_out += (uint64_t)w;
    }
    update_write_interest(c, 0);
    return 0;
}

static uint64_t next_key(wsconn *wc)
{
    uint64_t z = (wc->rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Refill the empty send buffer from the frame template with the next unwritten
 * bytes: each frame's head with a fresh key, its payload masked with it. */
static void stage(econn *c)
{
    wsconn *wc = WS(c);
    hb_engine *e = c->th->e;
    uint64_t L = e->req_len, hl = L - e->ws_payload;
    const uint8_t *tpl = (const uint8_t *)e->body;
    uint64_t unstaged = wc->wleft;
    wc->spos = wc->slen = 0;
    while (unstaged && wc->slen < wc->scap) {
        uint64_t pos = (L - unstaged % L) % L;
        size_t room = wc->scap - wc->slen;
        if (pos == 0) { /* a frame starts: its head goes whole, with its own key */
            if (room < hl) break;
            uint32_t k = (uint32_t)next_key(wc);
            memcpy(wc->key, &k, 4);
            memcpy(wc->sbuf + wc->slen, tpl, (size_t)hl - 4);
            memcpy(wc->sbuf + wc->slen + hl - 4, wc->key, 4);
            wc->slen += (size_t)hl;
            unstaged -= hl;
            continue;
        }
        uint64_t n = L - pos;
        if (n > room) n = room;
        hb_ws_mask_copy(wc->sbuf + wc->slen, tpl + pos, (size_t)n, wc->key, pos - hl);
        wc->slen += (size_t)n;
        unstaged -= n;
    }
}

/* Write pending message frames (after the upgrade). */
static void flush(econn *c)
{
    wsconn *wc = WS(c);
    ethread *th = c->th;
    hb_engine *e = th->e;
    uint64_t L = e->req_len;
    while (wc->wleft) {
        if (wc->spos == wc->slen) stage(c);
        uint64_t now = hb_now_ns();
        ssize_t w = hb_sock_write(&c->s, wc->sbuf + wc->spos, wc->slen - wc->spos);
        if (w == HB_AGAIN) {
            update_write_interest(c, c->s.want != HB_WANT_READ);
            return;
        }
        if (w < 0) {
            char err[HB_ERR_LEN];
            hb_sock_errstr(&c->s, (int)w, err);
            fail(c, HB_ENG_ERR_WRITE, (int)w, err);
            return;
        }
        wc->wleft -= (uint64_t)w;
        wc->spos += (size_t)w;
        if (now >= e->measure_ns) th->r.bytes_out += (uint64_t)w;
        uint32_t started = c->rcount - (uint32_t)(wc->wleft / L);
        while (wc->nstarted < started) {
            ring_at(c, wc->nstarted)->written = now;
            wc->nstarted++;
        }
    }
    update_write_interest(c, 0);
}

static void issue(econn *c, uint64_t intended, uint64_t now, int warm)
{
    hb__eng_issue_slot(c->th, ring_at(c, c->rcount), intended, now, warm);
    c->rcount++;
    WS(c)->wleft += c->th->e->req_len;
}

/* The 101: status, Upgrade and the accept key. 1 upgraded, 0 need more, -1 failed. */
static int read_upgrade(econn *c)
{
    wsconn *wc = WS(c);
    ethread *th = c->th;
    hb_engine *e = th->e;
    hb_header hdrs[MAX_HEADERS];
    hb_response_head h;
    memset(&h, 0, sizeof h);
    h.headers = hdrs;
    h.num_headers = MAX_HEADERS;
    hb_parse_limits lim = {wc->rcap, MAX_HEADERS};
    int pr = hb_parse_response_head(wc->rbuf, wc->rlen, &h, &lim);
    if (pr == HB_AGAIN) {
        if (wc->rlen == wc->rcap) {
            fail(c, HB_ENG_ERR_UPGRADE, HB_WS_E_HANDSHAKE, "upgrade response head too large");
            return -1;
        }
        return 0;
    }
    if (pr < 0) {
        fail(c, HB_ENG_ERR_UPGRADE, h.error ? h.error : HB_E_PROTOCOL,
             hb_parse_strerror(h.error ? h.error : HB_E_PROTOCOL));
        return -1;
    }
    int upgrade = 0, accept = 0;
    for (size_t i = 0; i < h.num_headers; i++) {
        const hb_header *f = &hdrs[i];
        if (!th->have_server) hb__eng_header(th, f->name, f->name_len, f->value, f->value_len);
        if (f->name_len == 7 && strncasecmp(f->name, "upgrade", 7) == 0)
            upgrade = f->value_len == 9 && strncasecmp(f->value, "websocket", 9) == 0;
        else if (f->name_len == 20 && strncasecmp(f->name, "sec-websocket-accept", 20) == 0)
            accept = f->value_len == 28 && memcmp(f->value, e->ws_accept, 28) == 0;
    }
    th->have_server = 1;
    if (h.status != 101 || !upgrade || !accept) {
        char detail[HB_ERR_LEN];
        snprintf(detail, sizeof detail, "WebSocket upgrade refused: status %d%s%s", h.status,
                 h.status == 101 && !upgrade ? ", no Upgrade: websocket" : "",
                 h.status == 101 && upgrade && !accept ? ", wrong Sec-WebSocket-Accept" : "");
        fail(c, HB_ENG_ERR_UPGRADE, HB_WS_E_HANDSHAKE, detail);
        return -1;
    }
    wc->upgraded = 1;
    wc->rpos = (size_t)pr;
    hb_ws_rx_init(&wc->rx, HB_WS_CLIENT, MAX_MSG, 0);
    return 1;
}

/* The echo at the ring's head is complete. */
static void complete(econn *c, uint64_t now)
{
    wsconn *wc = WS(c);
    ethread *th = c->th;
    req_slot *q = &wc->ring[wc->rhead];
    wc->rhead = (wc->rhead + 1) % th->e->cfg.pipeline;
    c->rcount--;
    if (wc->nstarted) wc->nstarted--;
    hb__eng_account_response(th, q, 200, wc->msg_bytes, wc->first_byte, now);
    wc->have_first = 0;
    wc->msg_bytes = 0;
}

/* Frames in the read buffer. 0 go on, -1 c was closed. */
static int process(econn *c, uint64_t now)
{
    wsconn *wc = WS(c);
    while (wc->rpos < wc->rlen) {
        hb_ws_event ev;
        int rc = hb_ws_rx_next(&wc->rx, (uint8_t *)wc->rbuf + wc->rpos, wc->rlen - wc->rpos, &ev);
        if (rc < 0) {
            fail(c, HB_ENG_ERR_PROTOCOL, rc, hb_ws_strerror(rc));
            return -1;
        }
        wc->rpos += (size_t)rc;
        if (ev.type == HB_WS_EV_NONE) break;
        if (ev.type == HB_WS_EV_CLOSE) {
            char detail[HB_ERR_LEN];
            snprintf(detail, sizeof detail, "the server closed the WebSocket: code %d", ev.code);
            if (c->rcount) {
                fail(c, HB_ENG_ERR_WS_CLOSE, HB_E_CLOSED, detail);
            } else {
                hb__eng_conn_close(c);
                hb__eng_defer_fill(c);
            }
            return -1;
        }
        if (ev.type != HB_WS_EV_DATA) continue; /* pings, pongs: the echo server sends none */
        if (c->rcount == 0 || wc->nstarted == 0) {
            hb__eng_note_error(c->th, HB_ENG_ERR_PROTOCOL, HB_E_PROTOCOL, "unsolicited message");
            hb__eng_conn_close(c);
            hb__eng_defer_fill(c);
            return -1;
        }
        if (!wc->have_first) {
            wc->have_first = 1;
            wc->first_byte = now;
        }
        wc->msg_bytes += ev.data_len;
        if (ev.fin) {
            if (wc->msg_bytes != c->th->e->ws_payload) { /* not our echo (a push, say) */
                char detail[HB_ERR_LEN];
                snprintf(detail, sizeof detail,
                         "a message of %llu bytes answered one of %llu: not its echo",
                         (unsigned long long)wc->msg_bytes,
                         (unsigned long long)c->th->e->ws_payload);
                fail(c, HB_ENG_ERR_PROTOCOL, HB_E_PROTOCOL, detail);
                return -1;
            }
            complete(c, now);
        }
    }
    if (wc->rpos == wc->rlen) {
        wc->rpos = wc->rlen = 0;
    } else if (wc->rpos) {
        memmove(wc->rbuf, wc->rbuf + wc->rpos, wc->rlen - wc->rpos);
        wc->rlen -= wc->rpos;
        wc->rpos = 0;
    }
    return 0;
}

static void do_read(econn *c, uint32_t events)
{
    wsconn *wc = WS(c);
    ethread *th = c->th;
    for (;;) {
        size_t space = wc->rcap - wc->rlen;
        ssize_t n = hb_sock_read(&c->s, wc->rbuf + wc->rlen, space);
        if (n == HB_AGAIN) {
            int want_w = c->s.want == HB_WANT_WRITE;
            if (want_w != c->read_wants_write) {
                c->read_wants_write = want_w;
                hb__eng_update_interest(c);
            }
            return;
        }
        uint64_t now = hb_now_ns();
        if (n == 0 || n < 0) {
            char err[HB_ERR_LEN];
            if (n < 0) hb_sock_errstr(&c->s, (int)n, err);
            if (c->rcount == 0 && wc->upgraded) {
                hb__eng_conn_close(c);
                hb__eng_defer_fill(c);
                return;
            }
            if (!wc->upgraded)
                fail(c, HB_ENG_ERR_UPGRADE, n ? (int)n : HB_E_CLOSED,
                     n ? err : "connection closed during the WebSocket upgrade");
            else
                fail(c, n ? HB_ENG_ERR_READ : HB_ENG_ERR_CLOSED, n ? (int)n : HB_E_CLOSED,
                     n ? err : "connection closed before the echo");
            return;
        }
        if (c->read_wants_write) {
            c->read_wants_write = 0;
            hb__eng_update_interest(c);
        }
        if (now >= th->e->measure_ns) th->r.bytes_in += (uint64_t)n;
        wc->rlen += (size_t)n;
        if (!wc->upgraded) {
            int r = read_upgrade(c);
            if (r < 0) return;
            if (r == 0) continue;
            if (wc->wleft) flush(c);
            if (c->state != C_OPEN) return;
        }
        if (process(c, now) < 0) return;
        hb__eng_fill(c, now);
        if (c->state != C_OPEN) return;
        if (c->et) {
            if ((size_t)n < space && !(events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR))) return;
            continue;
        }
        if (!hb_sock_has_buffered(&c->s)) return;
    }
}

/* ---- the table ---- */

static int ws_check(const hb_engine_config *cfg, char *err)
{
    if (!cfg->head || cfg->head_len < 4 || memcmp(cfg->head + cfg->head_len - 4, "\r\n\r\n", 4))
        return hb_fail(err, HB_E_INVALID, "a serialized GET request head is required");
    if (cfg->body_fd >= 0)
        return hb_fail(err, HB_E_INVALID, "a WebSocket message is sent from memory, not a file");
    if (!cfg->keepalive)
        return hb_fail(err, HB_E_INVALID, "a WebSocket connection is kept: keepalive must be on");
    return 0;
}

static int ws_prepare(hb_engine *e, char *err)
{
    hb_engine_config *c = &e->cfg;
    uint8_t rnd[16];
    size_t got = 0;
    while (got < sizeof rnd) {
        ssize_t k = getrandom(rnd + got, sizeof rnd - got, 0);
        if (k < 0) return hb_fail(err, HB_E_INVALID, "getrandom failed");
        got += (size_t)k;
    }
    char key[25];
    hb_ws_make_key(rnd, key);
    hb_ws_accept(key, 24, e->ws_accept);
    static const char fmt[] = "Upgrade: websocket\r\nConnection: Upgrade\r\n"
                              "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n";
    size_t base = c->head_len - 2; /* without the blank line */
    e->head = malloc(base + sizeof fmt + 24);
    if (!e->head) return hb_fail(err, HB_E_NOMEM, "out of memory");
    memcpy(e->head, c->head, base);
    int k = snprintf(e->head + base, sizeof fmt + 24, fmt, key);
    e->ws_head_len = base + (size_t)k;
    c->head = e->head;
    c->head_len = e->ws_head_len;
    /* the message: the body given, else ws_size content bytes; a template whose
     * head has the mask bit and a zero key, its payload unmasked (see stage) */
    uint64_t plen = e->body ? c->body_len : c->ws_size;
    static const uint8_t zero_key[4] = {0, 0, 0, 0};
    uint8_t hb[HB_WS_MAX_HEAD];
    int hl =
        hb_ws_build_head(hb, sizeof hb, 1, c->ws_text ? HB_WS_TEXT : HB_WS_BINARY, plen, zero_key);
    if (hl < 0) return hb_fail(err, HB_E_INVALID, "message too large");
    e->req_len = (uint64_t)hl + plen;
    e->ws_payload = plen;
    char *frame = malloc((size_t)e->req_len);
    if (!frame) return hb_fail(err, HB_E_NOMEM, "out of memory");
    memcpy(frame, hb, (size_t)hl);
    if (e->body)
        memcpy(frame + hl, e->body, (size_t)plen);
    else
        hb_content_fill(frame + hl, (size_t)plen, 0);
    if (c->ws_text && hb_ws_utf8(HB_UTF8_ACCEPT, (uint8_t *)frame + hl, (size_t)plen)) {
        free(frame);
        return hb_fail(err, HB_E_INVALID, "a text message must be UTF-8");
    }
    free(e->body);
    e->body = frame;
    c->body = frame;
    c->body_len = (size_t)e->req_len;
    return 0;
}

static void ws_cleanup(hb_engine *e)
{
    free(e->head);
    free(e->pbuf);
}

static int ws_conn_init(econn *c, size_t rcap, char *err)
{
    wsconn *wc = WS(c);
    wc->ring = calloc(c->th->e->cfg.pipeline, sizeof *wc->ring);
    wc->rcap = rcap;
    wc->rbuf = malloc(rcap);
    /* all of the pipeline's frames at once when they fit */
    uint64_t all = c->th->e->req_len * c->th->e->cfg.pipeline;
    wc->scap = all < SBUF_MAX ? (size_t)all : SBUF_MAX;
    wc->sbuf = malloc(wc->scap);
    if (!wc->ring || !wc->rbuf || !wc->sbuf) return hb_fail(err, HB_E_NOMEM, "out of memory");
    size_t got = 0;
    while (got < sizeof wc->rng) {
        ssize_t k = getrandom((char *)&wc->rng + got, sizeof wc->rng - got, 0);
        if (k < 0) return hb_fail(err, HB_E_INVALID, "getrandom failed");
        got += (size_t)k;
    }
    return 0;
}

static void ws_conn_free(econn *c)
{
    free(WS(c)->rbuf);
    free(WS(c)->ring);
    free(WS(c)->sbuf);
}

static int ws_start(econn *c)
{
    WS(c)->hs_left = c->th->e->ws_head_len;
    return write_upgrade(c) < 0 ? -1 : 0;
}

static uint32_t ws_cap(econn *c)
{
    return c->th->e->cfg.pipeline;
}

static void ws_send(econn *c, uint32_t more)
{
    wsconn *wc = WS(c);
    if (wc->upgraded && wc->wleft && (more || !c->write_blocked)) flush(c);
}

static void ws_on_io(hb_loop *l, hb_io *io, uint32_t events)
{
    (void)l;
    econn *c = hb__eng_conn_of(io);
    wsconn *wc = WS(c);
    if (wc->hs_left) {
        if (write_upgrade(c) < 0) return;
    } else if (wc->upgraded && wc->wleft) {
        flush(c);
        if (c->state != C_OPEN) return;
    }
    if ((events & (EPOLLIN | EPOLLERR | EPOLLHUP | EPOLLRDHUP)) || c->read_wants_write)
        do_read(c, events);
}

static int ws_timed_out(const econn *c, uint64_t now, uint64_t tmo)
{
    const wsconn *wc = (const wsconn *)c;
    return now - wc->ring[wc->rhead].start > tmo;
}

static void ws_fail_inflight(econn *c, int type, uint64_t now)
{
    wsconn *wc = WS(c);
    uint32_t m = c->th->e->cfg.pipeline;
    while (c->rcount) {
        hb__eng_account_error(c->th, &wc->ring[wc->rhead], type, now);
        wc->rhead = (wc->rhead + 1) % m;
        c->rcount--;
    }
}

static uint64_t ws_inflight_measured(const econn *c)
{
    const wsconn *wc = (const wsconn *)c;
    uint32_t m = c->th->e->cfg.pipeline;
    uint64_t n = 0;
    for (uint32_t k = 0; k < c->rcount; k++)
        n += !wc->ring[(wc->rhead + k) % m].warm;
    return n;
}

static void ws_reset(econn *c)
{
    wsconn *wc = WS(c);
    hb_engine *e = c->th->e;
    /* an upgraded connection between frames says goodbye: a close (1000), best effort */
    if (wc->upgraded && c->s.fd >= 0 && wc->wleft % e->req_len == 0) {
        static const uint8_t bye[] = {0x88, 0x82, 0, 0, 0, 0, 0x03, 0xe8};
        (void)hb_sock_write(&c->s, bye, sizeof bye);
    }
    wc->rlen = wc->rpos = 0;
    wc->upgraded = 0;
    wc->hs_left = 0;
    wc->wleft = 0;
    wc->spos = wc->slen = 0;
    wc->nstarted = 0;
    wc->have_first = 0;
    wc->msg_bytes = 0;
}

const hb__eng_proto hb__eng_ws = {
    .conn_size = sizeof(wsconn),
    .thread_size = 0,
    .check = ws_check,
    .prepare = ws_prepare,
    .cleanup = ws_cleanup,
    .conn_init = ws_conn_init,
    .conn_free = ws_conn_free,
    .start = ws_start,
    .cap = ws_cap,
    .issue = issue,
    .send = ws_send,
    .on_io = ws_on_io,
    .timed_out = ws_timed_out,
    .fail_inflight = ws_fail_inflight,
    .inflight_measured = ws_inflight_measured,
    .reset = ws_reset,
};
