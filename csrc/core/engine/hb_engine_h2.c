/* hb_engine_h2.c - HTTP/2 behind the engine's protocol table: a
 * connection's requests are the shared stream slots (hb_engine_mux.c);
 * hb_h2_client runs the session (it buffers the input: no read buffer here).
 * See hb_engine_int.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/hb_clock.h"
#include "engine/hb_engine_int.h"
#include "h2/hb_h2_client.h"

typedef struct h2conn {
    hb__eng_mconn mc; /* first: the engine's part and the stream slots */
    hb_h2_client cli;
    int live;           /* cli initialised on the current socket */
    hb_h2_body *bodies; /* each slot's request body cursor */
    uint32_t *unw;      /* submitted slots whose HEADERS may not be out yet */
    uint32_t nunw;
    uint64_t now;               /* clock of the read being processed */
    uint64_t seen_in, seen_out; /* cli byte counters already added to the results */
    int read_pending;           /* the last read stopped at its budget: read again from the timer */
} h2conn;

static inline h2conn *H2(econn *c)
{
    return (h2conn *)c;
}

/* All slots free, session gone (the socket is closed by the caller). */
static void h2_reset(econn *c)
{
    h2conn *h = H2(c);
    if (h->live) hb_h2_client_free(&h->cli);
    h->live = 0;
    hb__eng_streams_reset(&h->mc.st, c, 0);
    h->nunw = 0;
    h->read_pending = 0;
}

static void h2_fail_streams(econn *c, int type, uint64_t now)
{
    h2conn *h = H2(c);
    /* The stream sent before the server's SETTINGS timed out and those SETTINGS
     * allow none: every new connection would wait the same way, so the run ends. */
    if (type == HB_ENG_ERR_TIMEOUT && h->live && h->cli.peer_settings &&
        hb_h2_client_peer_max_streams(&h->cli) == 0)
        hb__eng_fatal(c->th, HB_E_H2,
                      "the server allows no streams (SETTINGS_MAX_CONCURRENT_STREAMS 0) and left "
                      "the first one unanswered until the timeout");
    hb__eng_streams_fail(&h->mc.st, c, type, now);
}

static void h2_count_bytes(econn *c, uint64_t now)
{
    h2conn *h = H2(c);
    if (!h->live) return;
    if (now >= c->th->e->measure_ns) {
        c->th->r.bytes_in += h->cli.bytes_in - h->seen_in;
        c->th->r.bytes_out += h->cli.bytes_out - h->seen_out;
    }
    h->seen_in = h->cli.bytes_in;
    h->seen_out = h->cli.bytes_out;
}

/* A connection-fatal result rc of the session (or its start). */
static void h2_fatal(econn *c, int rc, int type, const char *why)
{
    ethread *th = c->th;
    h2conn *h = H2(c);
    char detail[HB_ERR_LEN - 32]; /* room for note_error's "type: " prefix */
    snprintf(detail, sizeof detail, "%s", why ? why : "");
    int goaway = h->live && h->cli.goaway_recv;
    if (h->live) h2_count_bytes(c, hb_now_ns());
    if (rc == HB_E_NO_H2) {
        /* Asked for HTTP/2, the server does not speak it: the run is invalid. */
        hb__eng_fatal(th, rc, detail);
        type = HB_ENG_ERR_PROTOCOL;
    } else if (rc == HB_E_H2) {
        type = goaway ? HB_ENG_ERR_GOAWAY : HB_ENG_ERR_PROTOCOL;
    } else if (rc == HB_E_CLOSED || type == HB_ENG_ERR_READ) {
        if (c->rcount == 0) { /* idle, or drained after a graceful GOAWAY: reconnect */
            hb__eng_conn_close(c);
            hb__eng_defer_fill(c);
            return;
        }
        if (rc == HB_E_CLOSED) type = goaway ? HB_ENG_ERR_GOAWAY : HB_ENG_ERR_CLOSED;
    }
    hb__eng_fail_all(c, type, rc, detail);
}

static const hb_h2_client_callbacks H2_CBS_QUIET;

static void h2_on_response(void *ud, void *sud, int status)
{
    econn *c = ud;
    hb__eng_stream *sl = sud;
    if (H2(c)->cli.cb != &H2_CBS_QUIET) {
        /* header fields are not needed any more, on any connection */
        c->th->have_server = 1;
        H2(c)->cli.cb = &H2_CBS_QUIET;
    }
    if (!sl) return;
    sl->status = status;
    sl->first_byte = H2(c)->now;
}

static void h2_on_data(void *ud, void *sud, const uint8_t *d, size_t len)
{
    h2conn *h = H2((econn *)ud);
    if (sud) hb__eng_mux_data(ud, sud, d, len, h->cli.data_end, h->now);
}

static void h2_on_close(void *ud, void *sud, int end, uint32_t code)
{
    econn *c = ud;
    hb__eng_stream *sl = sud;
    ethread *th = c->th;
    if (!sl || !sl->used) return;
    int type = -1;
    if (end != HB_H2_END_OK || !sl->status) {
        type = end == HB_H2_END_RESET    ? HB_ENG_ERR_RST_STREAM
               : end == HB_H2_END_GOAWAY ? HB_ENG_ERR_GOAWAY
                                         : HB_ENG_ERR_PROTOCOL;
        if (!th->r.first_error[0]) {
            char d[HB_ERR_LEN - 32];
            if (end == HB_H2_END_RESET)
                snprintf(d, sizeof d, "the server reset the stream (RST_STREAM %s)",
                         hb_h2_code_name(code));
            else if (end == HB_H2_END_GOAWAY)
                snprintf(d, sizeof d,
                         "the stream was above the last stream id of the server's GOAWAY");
            else
                snprintf(d, sizeof d, "invalid HTTP/2 response (%s%s%.160s)", hb_h2_code_name(code),
                         H2(c)->cli.err[0] ? ": " : "", H2(c)->cli.err);
            hb__eng_note_error(th, type, HB_E_H2, d);
        }
    }
    hb__eng_stream_end(&H2(c)->mc.st, c, sl, type, H2(c)->now);
}

static const hb_h2_client_callbacks H2_CBS = {hb__eng_mux_on_header, h2_on_response, h2_on_data,
                                              h2_on_close, NULL};
static const hb_h2_client_callbacks H2_CBS_QUIET = {NULL, h2_on_response, h2_on_data, h2_on_close,
                                                    NULL};

/* The connection (and TLS) is up: start the session. 0, or -1 when c was failed. */
static int h2_start(econn *c)
{
    h2conn *h = H2(c);
    char err[HB_ERR_LEN];
    err[0] = 0;
    hb_h2_client_settings st = {0};
    st.max_streams = c->th->e->cfg.pipeline;
    st.stable_fields = 1; /* e->fields lives as long as the engine */
    int rc = hb_h2_client_init(&h->cli, &c->s, &st, c->th->have_server ? &H2_CBS_QUIET : &H2_CBS, c,
                               err);
    if (rc < 0) {
        h2_fatal(c, rc, HB_ENG_ERR_PROTOCOL, err);
        return -1;
    }
    h->live = 1;
    h->seen_in = h->seen_out = 0;
    c->closing = 0;
    return 0;
}

/* Streams c may have in flight now: the open ones plus the session's room. */
static uint32_t h2_cap(econn *c)
{
    h2conn *h = H2(c);
    return hb__eng_streams_cap(&h->mc.st, c, h->live, h->live ? hb_h2_client_room(&h->cli) : 0);
}

static void h2_io(hb_loop *l, hb_io *io, uint32_t events);

/* Submit the slots waiting for the session, then write what is queued. */
static void h2_send(econn *c, uint32_t more)
{
    (void)more;
    h2conn *h = H2(c);
    hb_engine *e = c->th->e;
    if (!h->live) return;
    if (h->read_pending) { /* the timer's turn came: read on (that fills and sends too) */
        h->read_pending = 0;
        h2_io(&c->th->loop, &c->io, EPOLLIN);
        return;
    }
    uint32_t m = e->cfg.pipeline;
    hb__eng_stream *sl;
    for (uint32_t i = 0; (sl = hb__eng_stream_unsent(&h->mc.st, &i)) != NULL;) {
        uint32_t k = (uint32_t)(sl - h->mc.st.slots);
        hb_h2_body *b = NULL;
        if (e->cfg.body_len) {
            b = &h->bodies[k];
            b->data = e->body;
            b->len = e->cfg.body_len;
            b->sent = 0;
        }
        char err[HB_ERR_LEN];
        int id = hb_h2_client_submit(&h->cli, e->fields, e->cfg.nfields, b, sl, err);
        if (id == HB_AGAIN || id == HB_E_CLOSED) break; /* closes or GOAWAY come through read */
        if (id < 0) {
            hb__eng_fail_all(c, HB_ENG_ERR_WRITE, id, err);
            return;
        }
        hb__eng_stream_submitted(&h->mc.st, sl);
        if (h->nunw < m) h->unw[h->nunw++] = k; /* stamped after the write */
    }
    if (!hb_h2_client_wants_write(&h->cli)) return;
    uint64_t now = hb_now_ns();
    h->now = now;
    int rc = hb_h2_client_write(&h->cli);
    h2_count_bytes(c, now);
    if (rc == HB_AGAIN) {
        int blocked = c->s.want != HB_WANT_READ;
        if (blocked != c->write_blocked) {
            c->write_blocked = blocked;
            hb__eng_update_interest(c);
        }
        return;
    }
    if (rc < 0) {
        h2_fatal(c, rc, HB_ENG_ERR_WRITE, h->cli.err);
        return;
    }
    for (uint32_t k = 0; k < h->nunw; k++) {
        hb__eng_stream *sl = &h->mc.st.slots[h->unw[k]];
        if (sl->used && !sl->q.written) sl->q.written = now;
    }
    h->nunw = 0;
    if (c->write_blocked) {
        c->write_blocked = 0;
        hb__eng_update_interest(c);
    }
}

static void h2_io(hb_loop *l, hb_io *io, uint32_t events)
{
    (void)l;
    econn *c = hb__eng_conn_of(io);
    h2conn *h = H2(c);
    h->now = hb_now_ns();
    const uint32_t rd = EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR;
    if (!(events & rd) && !c->read_wants_write) { /* writable only */
        hb__eng_fill(c, h->now);
        return;
    }
    /* Edge-triggered: a short read drained the socket, unless a FIN came too;
     * TLS is level-triggered: epoll reports what OpenSSL has not read. */
    h->cli.short_read_drains = !c->et || !(events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR));
    int rc = hb_h2_client_read(&h->cli);
    h2_count_bytes(c, h->now);
    if (rc != HB_AGAIN) {
        h2_fatal(c, rc, HB_ENG_ERR_READ, h->cli.err);
        return;
    }
    int rw = c->s.want == HB_WANT_WRITE;
    if (rw != c->read_wants_write) {
        c->read_wants_write = rw;
        hb__eng_update_interest(c);
    }
    if (!h->cli.nopen && !h->cli.goaway_recv && hb_h2_client_peer_max_streams(&h->cli) == 0) {
        /* Nothing can ever be sent on this connection: fail what waits and
         * reconnect later (a new connection's first stream goes out before
         * the SETTINGS, so each attempt accounts a request). */
        static const char why[] =
            "the server allows no streams (SETTINGS_MAX_CONCURRENT_STREAMS 0)";
        if (c->rcount) {
            hb__eng_fail_all(c, HB_ENG_ERR_PROTOCOL, HB_E_H2, why);
        } else {
            hb__eng_note_error(c->th, HB_ENG_ERR_PROTOCOL, HB_E_H2, why);
            hb__eng_conn_close(c);
            hb__eng_defer_fill(c);
        }
        c->retry_at = h->now + (HB__ENG_RETRY_MIN_NS << HB__ENG_RETRY_MAX_SHIFT);
        return;
    }
    if (c->closing && c->rcount == 0) { /* keep-alive off: one request per connection */
        hb__eng_conn_close(c);
        hb__eng_fill(c, h->now);
        return;
    }
    int more = h->cli.more_input;
    hb__eng_fill(c, h->now);
    /* input left at the read budget: timers (timeouts, the run's end) go
     * first, then the connection's timer reads on (edge-triggered epoll
     * would not report it again) */
    if (more && h->live && c->state == C_OPEN) {
        h->read_pending = 1;
        hb__eng_defer_fill(c);
    }
}

static int h2_check(const hb_engine_config *cfg, char *err)
{
    return hb__eng_mux_check(cfg, "HTTP/2", err);
}

static int h2_conn_init(econn *c, size_t rcap, char *err)
{
    (void)rcap;
    h2conn *h = H2(c);
    uint32_t m = c->th->e->cfg.pipeline;
    int rc = hb__eng_streams_init(&h->mc.st, m, err);
    if (rc < 0) return rc;
    h->bodies = calloc(m, sizeof *h->bodies);
    h->unw = calloc(m, sizeof *h->unw);
    if (!h->bodies || !h->unw) return hb_fail(err, HB_E_NOMEM, "out of memory");
    h2_reset(c);
    return 0;
}

static void h2_conn_free(econn *c)
{
    h2conn *h = H2(c);
    if (h->live) hb_h2_client_free(&h->cli);
    hb__eng_streams_free(&h->mc.st);
    free(h->bodies);
    free(h->unw);
}

const hb__eng_proto hb__eng_h2 = {
    .conn_size = sizeof(h2conn),
    .thread_size = 0,
    .check = h2_check,
    .prepare = hb__eng_fields_prepare,
    .cleanup = hb__eng_fields_cleanup,
    .conn_init = h2_conn_init,
    .conn_free = h2_conn_free,
    .start = h2_start,
    .cap = h2_cap,
    .issue = hb__eng_mux_issue,
    .send = h2_send,
    .on_io = h2_io,
    .timed_out = hb__eng_mux_timed_out,
    .fail_inflight = h2_fail_streams,
    .inflight_measured = hb__eng_mux_measured,
    .reset = h2_reset,
};
