/* hb_engine_h3.c - HTTP/3 behind the engine's protocol table: a connection is
 * an hb_h3_client on its own connected UDP socket (the protocol's `open`),
 * its requests the shared stream slots (hb_engine_mux.c), and QUIC's timers (loss
 * recovery, acknowledgements, idle) one more loop timer per connection. The
 * connection counts as open when the QUIC handshake completes. See
 * hb_engine_int.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/hb_clock.h"
#include "engine/hb_engine_int.h"
#include "h3/hb_h3_client.h"

#define H3_HS_TIMEOUT_NS 3000000000ull /* handshake timeout without a request timeout */

typedef struct h3conn {
    hb__eng_mconn mc; /* first: the engine's part and the stream slots */
    hb_h3_client cli;
    hb_timer qt;      /* QUIC's next expiry */
    uint64_t now;     /* clock of the call in progress */
    int hs_done;      /* the handshake completed inside the last read: open the connection */
    int wrote;        /* h3_send wrote since the last read */
    int failing;      /* h3_fatal is failing the connection: its attempt is counted there */
    hb_h3_stats seen; /* cli.st already added to the results */
} h3conn;

static inline h3conn *H3(econn *c)
{
    return (h3conn *)c;
}

static void h3_count(econn *c, uint64_t now)
{
    h3conn *h = H3(c);
    hb_engine_result *r = &c->th->r;
    const hb_h3_stats *s = &h->cli.st;
    if (now >= c->th->e->measure_ns) {
        r->bytes_in += s->bytes_recv - h->seen.bytes_recv;
        r->bytes_out += s->bytes_sent - h->seen.bytes_sent;
        r->quic_dgrams_recv += s->dgrams_recv - h->seen.dgrams_recv;
        r->quic_dgrams_sent += s->dgrams_sent - h->seen.dgrams_sent;
        r->quic_pto += s->pto - h->seen.pto;
    }
    h->seen = *s;
}

/* Connection closed (CONNECTION_CLOSE sent when alive). Its slots are freed,
 * unless every request left was never sent (the server's GOAWAY or idle
 * close came first): those stay, for the next connection to send. */
static void h3_reset(econn *c)
{
    h3conn *h = H3(c);
    hb_timer_stop(&c->th->loop, &h->qt);
    if (c->th->finished_loop && h->cli.fd >= 0 && !h->cli.handshake_done && !h->failing) {
        /* the run ended inside a handshake (before the client's own timeout): typed */
        c->th->r.connect_failures++;
        hb__eng_note_error(c->th, HB_ENG_ERR_CONNECT, HB_E_H3_TIMEOUT,
                           h->cli.st.dgrams_recv ? "the QUIC handshake did not complete before "
                                                   "the run ended"
                                                 : "no QUIC handshake before the run ended: the "
                                                   "server answered no datagram");
    }
    hb_h3_client_close(&h->cli);
    h3_count(c, hb_now_ns());
    hb__eng_streams_reset(&h->mc.st, c, 1);
    h->hs_done = 0;
    h->failing = 0;
}

/* The connection ended with rc (c->cli.err has the detail). */
static void h3_fatal(econn *c, int rc)
{
    h3conn *h = H3(c);
    char detail[HB_ERR_LEN - 32]; /* room for note_error's "type: " prefix */
    snprintf(detail, sizeof detail, "%.200s", h->cli.err);
    h3_count(c, hb_now_ns());
    int type;
    if (!h->cli.handshake_done && h->cli.retry_shares) {
        /* the server wants another key share and cannot say so: connect again at once
         * with more (a failed attempt, not a failed request: what waited goes on it) */
        c->th->r.connect_failures++;
        hb__eng_conn_close(c);
        hb__eng_defer_fill(c);
        return;
    }
    if (!h->cli.handshake_done) {
        type = rc == HB_E_H3_HANDSHAKE                             ? HB_ENG_ERR_TLS
               : (rc == HB_E_H3_TIMEOUT || (rc < 0 && rc > -4096)) ? HB_ENG_ERR_CONNECT
                                                                   : HB_ENG_ERR_PROTOCOL;
        if (rc == HB_E_H3_HANDSHAKE) {
            /* TLS refused (the certificate, or the server's alert): every reconnect would
             * fail alike, so the run stops, as the TCP path stops before it starts. The
             * connection still counts as a failed attempt, and the server hears a
             * CONNECTION_CLOSE with the alert (hb_h3_client_close) */
            hb__eng_fatal(c->th, h->cli.cert_rejected ? HB_E_TLS_VERIFY : HB_E_H3_HANDSHAKE,
                          detail);
        }
        h->failing = 1; /* hb__eng_fail_all counts the failed attempt and backs off */
    } else if ((rc == HB_E_H3_CLOSED || rc == HB_E_H3_TIMEOUT) && c->rcount == h->mc.st.pending) {
        /* nothing sent in flight, closed by the server or idled out: reconnect
         * (requests not sent yet go on the next connection) */
        hb__eng_conn_close(c);
        hb__eng_defer_fill(c);
        return;
    } else {
        /* after a GOAWAY, what was in flight when the connection closed was cut by it */
        type = rc == HB_E_H3_CLOSED     ? (h->cli.goaway ? HB_ENG_ERR_GOAWAY : HB_ENG_ERR_CLOSED)
               : rc == HB_E_H3_TIMEOUT  ? HB_ENG_ERR_TIMEOUT
               : (rc < 0 && rc > -4096) ? HB_ENG_ERR_READ
                                        : HB_ENG_ERR_PROTOCOL;
    }
    hb__eng_fail_all(c, type, rc, detail);
}

/* QUIC's timer follows the connection's next expiry; epoll watches for
 * writability only while a datagram waits (a UDP socket reports a new EPOLLOUT
 * edge each time a sent datagram's buffer is freed: one wake-up per send). */
static void h3_arm(econn *c)
{
    h3conn *h = H3(c);
    uint32_t ev = EPOLLIN | EPOLLET | (h->cli.blocked ? EPOLLOUT : 0u);
    if (c->io.fd >= 0) (void)hb_loop_mod(&c->th->loop, &c->io, ev); /* no syscall when unchanged */
    uint64_t t = hb_h3_client_next_expiry(&h->cli);
    if (t == UINT64_MAX)
        hb_timer_stop(&c->th->loop, &h->qt);
    else if (!hb_timer_armed(&h->qt) || h->qt.deadline != t)
        (void)hb_timer_start(&c->th->loop, &h->qt, t); /* one timer per connection: room */
}

/* ---- hb_h3_client callbacks (ud: the econn, sud: a slot) ---- */

static void h3_on_response(void *ud, void *sud, int status)
{
    hb__eng_stream *sl = sud;
    sl->status = status;
    sl->first_byte = H3((econn *)ud)->now;
}

static void h3_on_data(void *ud, void *sud, const uint8_t *data, size_t len)
{
    hb__eng_mux_data(ud, sud, data, len, -1, H3((econn *)ud)->now);
}

static void h3_on_close(void *ud, void *sud, int end, uint64_t code)
{
    econn *c = ud;
    hb__eng_stream *sl = sud;
    ethread *th = c->th;
    if (!sl->used) return;
    int type = -1;
    if (end != HB_H3_END_OK || !sl->status) {
        type = end == HB_H3_END_RESET    ? HB_ENG_ERR_RST_STREAM
               : end == HB_H3_END_GOAWAY ? HB_ENG_ERR_GOAWAY
                                         : HB_ENG_ERR_PROTOCOL;
        if (!th->r.first_error[0]) {
            char d[HB_ERR_LEN - 32];
            if (end == HB_H3_END_GOAWAY)
                snprintf(d, sizeof d,
                         "the stream was at or above the stream ID of the server's "
                         "GOAWAY (not processed)");
            else if (end == HB_H3_END_RESET)
                snprintf(d, sizeof d, "the server reset the stream (HTTP/3 error 0x%llx)",
                         (unsigned long long)code);
            else
                snprintf(d, sizeof d, "the stream ended without a response");
            hb__eng_note_error(th, type, HB_E_H3, d);
        }
    }
    hb__eng_stream_end(&H3(c)->mc.st, c, sl, type, H3(c)->now);
}

static void h3_on_handshake(void *ud)
{
    H3((econn *)ud)->hs_done = 1;
}

static const hb_h3_callbacks H3_CBS = {hb__eng_mux_on_header, h3_on_response, h3_on_data,
                                       h3_on_close, h3_on_handshake};
static const hb_h3_callbacks H3_CBS_QUIET = {NULL, h3_on_response, h3_on_data, h3_on_close,
                                             h3_on_handshake};

/* ---- the protocol ---- */

static void h3_after(econn *c, int rc);

static int h3_open(econn *c, char *err)
{
    h3conn *h = H3(c);
    hb_engine *e = c->th->e;
    uint64_t now = hb_now_ns();
    h->now = now;
    h->hs_done = 0;
    h->seen = h->cli.st; /* the Initial below counts in this attempt's figures */
    int fd = hb_h3_client_connect(&h->cli, e->cfg.h3_tls, (const struct sockaddr *)&e->cfg.addr,
                                  e->cfg.addrlen, e->cfg.host,
                                  c->th->have_server ? &H3_CBS_QUIET : &H3_CBS, c, now);
    h3_count(c, now);
    if (fd < 0) {
        snprintf(err, HB_ERR_LEN, "%s", h->cli.err[0] ? h->cli.err : hb_strerror(fd));
        hb_h3_client_close(&h->cli);
        return fd;
    }
    h3_arm(c);
    return fd;
}

static int h3_start(econn *c)
{
    c->closing = 0;
    return 0;
}

/* Streams c may have in flight now: the open ones plus the connection's room. */
static uint32_t h3_cap(econn *c)
{
    h3conn *h = H3(c);
    int ready = h->cli.handshake_done;
    return hb__eng_streams_cap(&h->mc.st, c, ready, ready ? hb_h3_client_room(&h->cli) : 0);
}

/* Submit the slots waiting for room, then write what is due. */
static void h3_send(econn *c, uint32_t more)
{
    (void)more;
    h3conn *h = H3(c);
    hb_engine *e = c->th->e;
    if (!h->cli.handshake_done || h->cli.fd < 0) return;
    uint64_t now = hb_now_ns();
    h->now = now;
    hb__eng_stream *sl;
    for (uint32_t i = 0; (sl = hb__eng_stream_unsent(&h->mc.st, &i)) != NULL;) {
        int64_t id =
            hb_h3_client_submit(&h->cli, e->fields, e->cfg.nfields, e->cfg.body_len > 0, sl);
        if (id == HB_AGAIN) break;
        if (id < 0) {
            h3_fatal(c, (int)id);
            return;
        }
        hb__eng_stream_submitted(&h->mc.st, sl);
        sl->q.written = now; /* the write below sends it (or queues it behind a blocked send) */
    }
    int rc = hb_h3_client_write(&h->cli, now);
    h->wrote = 1;
    h3_count(c, now);
    if (rc < 0) {
        h3_fatal(c, rc);
        return;
    }
    h3_arm(c);
}

/* After a read, a writable socket or the timer: open the connection when the
 * handshake just completed, else refill; a failure ends the connection. */
static void h3_after(econn *c, int rc)
{
    h3conn *h = H3(c);
    h3_count(c, h->now);
    if (rc < 0) {
        h3_fatal(c, rc);
        return;
    }
    h->wrote = 0;
    if (h->hs_done) {
        h->hs_done = 0;
        if (!c->th->have_server && c->th->r.server[0]) c->th->have_server = 1;
        if (!c->th->r.tls_info[0])
            hb_h3_client_describe(&h->cli, c->th->r.tls_info, sizeof c->th->r.tls_info);
        if (h->cli.resumed) c->th->r.tls_resumed++;
        if (hb_h3_client_peer_streams(&h->cli) == 0) { /* nothing could ever be sent */
            snprintf(h->cli.err, sizeof h->cli.err,
                     "the server allows no request streams (initial_max_streams_bidi 0)");
            h3_fatal(c, HB_E_H3);
            return;
        }
        hb__eng_opened(c, h->cli.hs_ns); /* fills and sends */
    } else if (c->state == C_OPEN) {
        if (c->closing && c->rcount == 0) { /* keep-alive off: one request per connection */
            hb__eng_conn_close(c);
            hb__eng_fill(c, h->now);
            return;
        }
        if (h->cli.goaway && c->rcount == h->mc.st.pending) { /* drained after GOAWAY: reconnect */
            hb__eng_conn_close(c);
            hb__eng_fill(c, h->now);
            return;
        }
        hb__eng_fill(c, h->now);
    }
    if (h->cli.fd < 0) return;
    /* ACKs and handshake packets the input made due, when no request went
     * out with them */
    if (!h->wrote) {
        rc = hb_h3_client_write(&h->cli, h->now);
        h3_count(c, h->now);
        if (rc < 0) {
            h3_fatal(c, rc);
            return;
        }
    }
    h3_arm(c);
}

static void h3_io(hb_loop *l, hb_io *io, uint32_t events)
{
    (void)l;
    econn *c = hb__eng_conn_of(io);
    h3conn *h = H3(c);
    if (h->cli.fd < 0) return; /* a stale event of a closed socket */
    h->now = hb_now_ns();
    int rc = 0;
    if (events & EPOLLOUT) rc = hb_h3_client_writable(&h->cli, h->now);
    if (rc >= 0 && (events & (EPOLLIN | EPOLLERR | EPOLLHUP)))
        rc = hb_h3_client_read(&h->cli, h->now);
    h3_after(c, rc);
}

static void h3_timer(hb_loop *l, hb_timer *t, uint64_t now)
{
    (void)l;
    h3conn *h = (h3conn *)((char *)t - offsetof(h3conn, qt));
    econn *c = &h->mc.base;
    if (h->cli.fd < 0) return;
    h->now = now;
    /* no input, so no request ended and no room opened: no refill. Most
     * firings are ngtcp2's pacing deadline (a few us after each send), with
     * nothing left to send */
    int rc = hb_h3_client_expiry(&h->cli, now);
    h3_count(c, now);
    if (rc < 0) {
        h3_fatal(c, rc);
        return;
    }
    h3_arm(c);
}

static int h3_check(const hb_engine_config *cfg, char *err)
{
    if (!hb_h3_available()) return hb_fail(err, HB_E_UNSUPPORTED, "%s", HB_H3_MISSING);
    if (!cfg->h3_tls) return hb_fail(err, HB_E_INVALID, "HTTP/3 needs its TLS trust (h3_tls)");
    return hb__eng_mux_check(cfg, "HTTP/3", err);
}

static int h3_conn_init(econn *c, size_t rcap, char *err)
{
    (void)rcap;
    h3conn *h = H3(c);
    hb_engine *e = c->th->e;
    uint32_t m = e->cfg.pipeline;
    hb_timer_init(&h->qt, h3_timer);
    int rc = hb__eng_streams_init(&h->mc.st, m, err);
    if (rc < 0) return rc;
    hb_h3_settings s = {0};
    s.max_streams = m;
    s.body = e->body;
    s.body_len = e->cfg.body_len;
    s.handshake_timeout_ns = e->cfg.timeout_ns ? e->cfg.timeout_ns : H3_HS_TIMEOUT_NS;
    s.resume = e->cfg.h3_resume;
    s.stable_fields = 1; /* e->fields lives as long as the engine */
    return hb_h3_client_init(&h->cli, &s, err);
}

static void h3_conn_free(econn *c)
{
    h3conn *h = H3(c);
    hb_h3_client_free(&h->cli);
    hb__eng_streams_free(&h->mc.st);
}

const hb__eng_proto hb__eng_h3 = {
    .conn_size = sizeof(h3conn),
    .thread_size = 0,
    .check = h3_check,
    .prepare = hb__eng_fields_prepare,
    .cleanup = hb__eng_fields_cleanup,
    .conn_init = h3_conn_init,
    .conn_free = h3_conn_free,
    .start = h3_start,
    .cap = h3_cap,
    .issue = hb__eng_mux_issue,
    .send = h3_send,
    .on_io = h3_io,
    .timed_out = hb__eng_mux_timed_out,
    .fail_inflight = hb__eng_mux_fail,
    .inflight_measured = hb__eng_mux_measured,
    .reset = h3_reset,
    .open = h3_open,
    .timers = 1,
};
