/* hb_server_h2.c - the embedded server's HTTP/2 connections: deciding the
 * protocol (ALPN on TLS, the client preface on plain sockets) and driving an
 * hb_h2_server session with the connection's socket, read buffer and timer. */
#include <limits.h>
#include <string.h>

#include "h2/hb_h2_server.h"
#include "server/hb_server_int.h"

static const char PREFACE[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
#define PREFACE_LEN 24

static void h2_run(hb__conn *c);

static int h2_enabled(const hb_server *srv)
{
    return srv->o.http2;
}

static void h2_worker_init(hb__worker *w)
{
    hb_server *srv = w->srv;
    hb_h2_server_config *cfg = &w->h2cfg;
    hb_h2_server_config_init(cfg);
    cfg->max_concurrent_streams = srv->max_streams;
    cfg->initial_window_size = (uint32_t)srv->o.h2_initial_window_size;
    cfg->max_frame_size = (uint32_t)srv->o.h2_max_frame_size;
    cfg->max_header_list = (uint32_t)srv->o.max_head;
    cfg->stats = &w->st.h2;
    cfg->now = &w->now;
    cfg->date = w->date;
    cfg->stats_json = hb__stats_json;
    cfg->stats_arg = srv;
    cfg->arenas = &w->h2arenas;
    cfg->sm = &w->st.sm;
    /* hb__h3_server_prepare fills the value before any connection */
    if (srv->o.http3 && srv->o.alt_svc) cfg->alt_svc = srv->alt_svc_value;
}

static void h2_worker_idle(hb__worker *w)
{
    hb_h2_arena_pool_drain(&w->h2arenas);
}

/* Switch the connection to h2: the buffered input (the preface included) is
 * the session's first input. 0, or -1 when the session cannot be made. */
static int start(hb__conn *c)
{
    char err[HB_ERR_LEN];
    hb_h2_server *s = NULL;
    if (hb_h2_server_new(&s, &c->w->h2cfg, err) < 0) return -1;
    c->sess = s;
    c->mp = &hb__srv_h2;
    hb__conn_set_proto(c, HB__PROTO_H2);
    c->req_deadline = 0;
    c->idle_since = c->w->now;
    size_t n = c->rlen - c->rpos;
    const uint8_t *p = (const uint8_t *)c->rbuf + c->rpos;
    c->rpos = c->rlen = 0;
    (void)hb_h2_server_recv(s, p, n); /* an error queues a GOAWAY: the driver sends it */
    return 0;
}

static int h2_alpn(hb__conn *c)
{
    size_t len = 0;
    const char *p = hb_sock_alpn(&c->sock, &len);
    if (p && len == 2 && memcmp(p, "h2", 2) == 0) {
        if (start(c) < 0) {
            hb__conn_free(c, 0);
            return 1;
        }
        h2_run(c);
        return 1;
    }
    if (p && len) hb__conn_set_proto(c, HB__PROTO_H1);
    return 0;
}

static int h2_sniff(hb__conn *c)
{
    size_t n = c->rlen - c->rpos;
    size_t k = n < PREFACE_LEN ? n : PREFACE_LEN;
    if (memcmp(c->rbuf + c->rpos, PREFACE, k) != 0 || (k < PREFACE_LEN && c->peer_eof)) return -1;
    if (k < PREFACE_LEN) return 0;
    if (start(c) < 0) {
        hb__conn_free(c, 0);
        return 1;
    }
    h2_run(c);
    return 1;
}

/* Write the session's queue. 0 (maybe still pending), <0 error. */
static int flush(hb__conn *c)
{
    for (;;) {
        int cnt;
        const struct iovec *v = hb_h2_server_out(c->sess, &cnt);
        if (cnt == 0) return 0;
        if (cnt > IOV_MAX) cnt = IOV_MAX;
        ssize_t n = hb__conn_write(c, v, cnt);
        if (n == HB_AGAIN) return 0;
        if (n < 0) return (int)n;
        hb_h2_server_sent(c->sess, (size_t)n);
        if (!hb_h2_server_idle_out(c->sess) && !c->sock.ssl) { /* short plain write: buffer full */
            c->wr_ready = 0;
            return 0;
        }
    }
}

/* The session is over (GOAWAY sent, or both sides done): FIN and linger. */
static void finish_conn(hb__conn *c)
{
    hb_h2_server_free(c->sess, 0);
    c->sess = NULL;
    c->mp = NULL;
    hb__conn_linger(c);
}

static void gone(hb__conn *c)
{
    c->peer_left = 1;
    hb__conn_free(c, 0);
}

static void h2_run(hb__conn *c)
{
    hb_h2_server *s = c->sess;
    hb__worker *w = c->w;
    for (;;) {
        if (!hb_h2_server_idle_out(s)) {
            if (!c->wr_ready) break;
            if (flush(c) < 0) {
                gone(c);
                return;
            }
            if (!hb_h2_server_idle_out(s)) break;
        }
        long q = hb_h2_server_fill(s);
        if (q < 0) {
            hb__conn_free(c, 1);
            return;
        }
        if (q > 0) continue;
        if (hb_h2_server_done(s)) {
            finish_conn(c);
            return;
        }
        if (c->peer_eof) {
            gone(c);
            return;
        }
        if (!c->rd_ready) break;
        if (c->budget <= 0) {
            hb__conn_defer(c);
            break;
        }
        ssize_t n = hb_sock_read(&c->sock, c->rbuf, w->srv->rbuf_size);
        if (n > 0) {
            HB__ADD(w->st.bytes_in, (uint64_t)n);
            c->idle_since = w->now;
            if ((size_t)n < w->srv->rbuf_size && !c->sock.ssl && !c->rdhup) c->rd_ready = 0;
            uint64_t f0 = hb_h2_server_frames(s);
            (void)hb_h2_server_recv(s, (const uint8_t *)c->rbuf, (size_t)n);
            c->budget -= n + (int64_t)(hb_h2_server_frames(s) - f0) * HB__SRV_FRAME_COST;
            continue;
        }
        if (n == 0) {
            c->peer_eof = 1;
            continue;
        }
        if (n == HB_AGAIN) {
            c->rd_ready = 0;
            break;
        }
        gone(c);
        return;
    }
    if (!hb_h2_server_busy(s)) c->idle_since = w->now;
    uint64_t d = hb_h2_server_deadline(s);
    if (d && (!hb_timer_armed(&c->timer) || c->timer.deadline != d) && hb__conn_timer(c, d) < 0)
        hb__conn_free(c, 1);
}

static void h2_timer(hb__conn *c)
{
    hb_h2_server_timer(c->sess);
}

static void h2_sweep(hb__conn *c)
{
    hb__worker *w = c->w;
    if (hb_h2_server_sweep(c->sess, w->req_timeout_ns) > 0) {
        /* event streams cut: their resets go out from the timer's run (the
         * connection's own timeouts wait for the next sweep) */
        if (hb__conn_timer(c, w->now) < 0) hb__conn_free(c, 1);
        return;
    }
    if (!hb_h2_server_idle_out(c->sess)) {
        if (w->now >= c->wr_deadline) hb__conn_free(c, 1); /* the reader stopped reading */
        return;
    }
    if (hb_h2_server_busy(c->sess)) {
        /* open streams, none waiting on a timer, and no input for request_timeout: a
         * request (head or body) or a flow-controlled reader that stopped */
        if (!hb_h2_server_deadline(c->sess) && w->now - c->idle_since >= w->req_timeout_ns)
            hb__conn_free(c, 0);
        return;
    }
    if (w->now - c->idle_since >= (uint64_t)w->srv->o.keepalive_timeout_ms * HB__SRV_MS) {
        HB__ADD(w->st.idle_timeouts, 1);
        hb__conn_free(c, 0);
    }
}

static void h2_end(hb__conn *c, int peer_left)
{
    hb_h2_server_free(c->sess, peer_left);
    c->sess = NULL;
}

const hb__conn_proto hb__srv_h2 = {
    .enabled = h2_enabled,
    .worker_init = h2_worker_init,
    .worker_idle = h2_worker_idle,
    .alpn = h2_alpn,
    .sniff = h2_sniff,
    .run = h2_run,
    .timer = h2_timer,
    .sweep = h2_sweep,
    .end = h2_end,
};
