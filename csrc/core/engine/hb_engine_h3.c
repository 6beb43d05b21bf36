/* hb_engine_h3.c - HTTP/3 behind the engine's protocol table: a connection is
 * an hb_h3_client on its own connected UDP socket (the protocol's `open`),
 * its requests stream slots as in hb_engine_h2.c, and QUIC's timers (loss
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

typedef struct h3slot {
    req_slot q;
    uint64_t first_byte, body_bytes;
    int status; /* 0 until the final response head */
    int used, submitted;
} h3slot;

typedef struct h3conn {
    econn base; /* first: the engine's part */
    hb_h3_client cli;
    hb_timer qt;    /* QUIC's next expiry */
    h3slot *slots;  /* pipeline of them */
    uint32_t *free; /* stack of free slot indices */
    uint32_t nfree;
    uint32_t pending; /* used slots not yet submitted (waiting for the handshake or room) */
    uint64_t now;     /* clock of the call in progress */
    int hs_done;      /* the handshake completed inside the last read: open the connection */
    int wrote;        /* h3_send wrote since the last read */
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
    uint32_t m = c->th->e->cfg.pipeline;
    hb_timer_stop(&c->th->loop, &h->qt);
    hb_h3_client_close(&h->cli);
    h3_count(c, hb_now_ns());
    int keep = c->rcount && c->rcount == h->pending;
    h->nfree = 0;
    for (uint32_t i = m; i-- > 0;) {
        if (!keep) h->slots[i].used = 0;
        if (!h->slots[i].used) h->free[h->nfree++] = i;
    }
    if (!keep) h->pending = 0;
    c->rcount = h->pending;
    h->hs_done = 0;
}

static void h3_release(econn *c, h3slot *sl)
{
    h3conn *h = H3(c);
    if (!sl->submitted) h->pending--;
    sl->used = 0;
    h->free[h->nfree++] = (uint32_t)(sl - h->slots);
    c->rcount--;
}

static void h3_fail_streams(econn *c, int type, uint64_t now)
{
    h3conn *h = H3(c);
    uint32_t m = c->th->e->cfg.pipeline;
    for (uint32_t i = 0; i < m && c->rcount; i++) {
        h3slot *sl = &h->slots[i];
        if (!sl->used) continue;
        hb__eng_account_error(c->th, &sl->q, type, now);
        h3_release(c, sl);
    }
}

/* The connection ended with rc (c->cli.err has the detail). */
static void h3_fatal(econn *c, int rc)
{
    h3conn *h = H3(c);
    char detail[HB_ERR_LEN - 32]; /* room for note_error's "type: " prefix */
    snprintf(detail, sizeof detail, "%.200s", h->cli.err);
    h3_count(c, hb_now_ns());
    int type;
    if (!h->cli.handshake_done) {
        type = rc == HB_E_H3_HANDSHAKE                             ? HB_ENG_ERR_TLS
               : (rc == HB_E_H3_TIMEOUT || (rc < 0 && rc > -4096)) ? HB_ENG_ERR_CONNECT
                                                                   : HB_ENG_ERR_PROTOCOL;
    } else if ((rc == HB_E_H3_CLOSED || rc == HB_E_H3_TIMEOUT) && c->rcount == h->pending) {
        /* nothing sent in flight, closed by the server or idled out: reconnect
         * (requests not sent yet go on the next connection) */
        hb__eng_conn_close(c);
        hb__eng_defer_fill(c);
        return;
    } else {
        type = rc == HB_E_H3_CLOSED     ? HB_ENG_ERR_CLOSED
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

static void h3_on_header(void *ud, void *sud, const char *n, size_t nl, const char *v, size_t vl)
{
    (void)sud;
    hb__eng_header(((econn *)ud)->th, n, nl, v, vl);
}

static void h3_on_response(void *ud, void *sud, int status)
{
    h3slot *sl = sud;
    sl->status = status;
    sl->first_byte = H3((econn *)ud)->now;
}

static void h3_on_data(void *ud, void *sud, const uint8_t *data, size_t len)
{
    (void)ud;
    (void)data;
    ((h3slot *)sud)->body_bytes += len;
}

static void h3_on_close(void *ud, void *sud, int end, uint64_t code)
{
    econn *c = ud;
    h3slot *sl = sud;
    ethread *th = c->th;
    uint64_t now = H3(c)->now;
    if (!sl->used) return;
    if (end == HB_H3_END_OK && sl->status) {
        hb__eng_account_response(th, &sl->q, sl->status, sl->body_bytes, sl->first_byte, now);
    } else {
        int type = end == HB_H3_END_RESET ? HB_ENG_ERR_RST_STREAM : HB_ENG_ERR_PROTOCOL;
        if (!th->r.first_error[0]) {
            char d[HB_ERR_LEN - 32];
            if (end == HB_H3_END_RESET)
                snprintf(d, sizeof d, "the server reset the stream (HTTP/3 error 0x%llx)",
                         (unsigned long long)code);
            else
                snprintf(d, sizeof d, "the stream ended without a response");
            hb__eng_note_error(th, type, HB_E_H3, d);
        }
        hb__eng_account_error(th, &sl->q, type, now);
    }
    h3_release(c, sl);
    if (!th->e->cfg.keepalive) c->closing = 1;
}

static void h3_on_handshake(void *ud)
{
    H3((econn *)ud)->hs_done = 1;
}

static const hb_h3_callbacks H3_CBS = {h3_on_header, h3_on_response, h3_on_data, h3_on_close,
                                       h3_on_handshake};
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
    if (c->closing || !h->cli.handshake_done) return c->rcount;
    uint32_t cap = c->rcount - h->pending + hb_h3_client_room(&h->cli);
    uint32_t m = c->th->e->cfg.pipeline;
    return cap < m ? cap : m;
}

static void h3_issue(econn *c, uint64_t intended, uint64_t now, int warm)
{
    h3conn *h = H3(c);
    h3slot *sl = &h->slots[h->free[--h->nfree]];
    hb__eng_issue_slot(c->th, &sl->q, intended, now, warm);
    sl->used = 1;
    sl->submitted = 0;
    sl->status = 0;
    sl->body_bytes = 0;
    sl->first_byte = 0;
    c->rcount++;
    h->pending++;
}

/* Submit the slots waiting for room, then write what is due. */
static void h3_send(econn *c, uint32_t more)
{
    (void)more;
    h3conn *h = H3(c);
    hb_engine *e = c->th->e;
    if (!h->cli.handshake_done || h->cli.fd < 0) return;
    uint32_t m = e->cfg.pipeline;
    uint64_t now = hb_now_ns();
    h->now = now;
    for (uint32_t i = 0; i < m && h->pending; i++) {
        h3slot *sl = &h->slots[i];
        if (!sl->used || sl->submitted) continue;
        int64_t id =
            hb_h3_client_submit(&h->cli, e->h2f, e->cfg.h2_nfields, e->cfg.body_len > 0, sl);
        if (id == HB_AGAIN) break;
        if (id < 0) {
            h3_fatal(c, (int)id);
            return;
        }
        sl->submitted = 1;
        sl->q.written = now; /* the write below sends it (or queues it behind a blocked send) */
        h->pending--;
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
        hb__eng_opened(c, h->cli.hs_ns); /* fills and sends */
    } else if (c->state == C_OPEN) {
        if (c->closing && c->rcount == 0) { /* keep-alive off: one request per connection */
            hb__eng_conn_close(c);
            hb__eng_fill(c, h->now);
            return;
        }
        if (h->cli.goaway && c->rcount == h->pending) { /* drained after GOAWAY: reconnect */
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
    econn *c = &h->base;
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

static int h3_timed_out(const econn *c, uint64_t now, uint64_t tmo)
{
    uint32_t m = c->th->e->cfg.pipeline;
    for (uint32_t i = 0; i < m; i++) {
        const h3slot *sl = &((const h3conn *)c)->slots[i];
        if (sl->used && now > sl->q.start && now - sl->q.start > tmo) return 1;
    }
    return 0;
}

static uint64_t h3_inflight_measured(const econn *c)
{
    const h3conn *h = (const h3conn *)c;
    uint64_t n = 0;
    for (uint32_t k = 0; k < c->th->e->cfg.pipeline; k++)
        n += h->slots[k].used && !h->slots[k].q.warm;
    return n;
}

static int h3_check(const hb_engine_config *cfg, char *err)
{
    if (!hb_h3_available()) return hb_fail(err, HB_E_UNSUPPORTED, "%s", HB_H3_MISSING);
    if (!cfg->h3_tls) return hb_fail(err, HB_E_INVALID, "HTTP/3 needs its TLS trust (h3_tls)");
    if (!cfg->h2_fields || cfg->h2_nfields < 4)
        return hb_fail(err, HB_E_INVALID, "HTTP/3 needs the request's header fields");
    if (cfg->body_fd >= 0)
        return hb_fail(err, HB_E_INVALID, "HTTP/3 sends a body from memory only, not from a file");
    return 0;
}

/* The request's fields as for HTTP/2 (hb_engine_h2.c's prepare). */
static int h3_prepare(hb_engine *e, char *err)
{
    return hb__eng_h2.prepare(e, err);
}

static void h3_cleanup(hb_engine *e)
{
    hb__eng_h2.cleanup(e);
}

static int h3_conn_init(econn *c, size_t rcap, char *err)
{
    (void)rcap;
    h3conn *h = H3(c);
    hb_engine *e = c->th->e;
    uint32_t m = e->cfg.pipeline;
    hb_timer_init(&h->qt, h3_timer);
    h->slots = calloc(m, sizeof *h->slots);
    h->free = calloc(m, sizeof *h->free);
    if (!h->slots || !h->free) return hb_fail(err, HB_E_NOMEM, "out of memory");
    hb_h3_settings s = {0};
    s.max_streams = m;
    s.body = e->body;
    s.body_len = e->cfg.body_len;
    s.handshake_timeout_ns = e->cfg.timeout_ns ? e->cfg.timeout_ns : H3_HS_TIMEOUT_NS;
    s.resume = e->cfg.h3_resume;
    int rc = hb_h3_client_init(&h->cli, &s, err);
    if (rc < 0) return rc;
    for (uint32_t i = 0; i < m; i++)
        h->free[i] = m - 1 - i;
    h->nfree = m;
    return 0;
}

static void h3_conn_free(econn *c)
{
    h3conn *h = H3(c);
    hb_h3_client_free(&h->cli);
    free(h->slots);
    free(h->free);
}

const hb__eng_proto hb__eng_h3 = {
    .conn_size = sizeof(h3conn),
    .thread_size = 0,
    .check = h3_check,
    .prepare = h3_prepare,
    .cleanup = h3_cleanup,
    .conn_init = h3_conn_init,
    .conn_free = h3_conn_free,
    .start = h3_start,
    .cap = h3_cap,
    .issue = h3_issue,
    .send = h3_send,
    .on_io = h3_io,
    .timed_out = h3_timed_out,
    .fail_inflight = h3_fail_streams,
    .inflight_measured = h3_inflight_measured,
    .reset = h3_reset,
    .open = h3_open,
    .timers = 1,
};
