/* hb_engine_h2.c - HTTP/2 behind the engine's protocol table: a
 * connection's requests are stream slots instead of a ring, since streams end
 * in any order; c->rcount counts used slots, so the engine's scheduling and
 * bookkeeping treat them like pipelined requests. hb_h2_client runs the
 * session (it buffers the input: no read buffer here). See hb_engine_int.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/hb_clock.h"
#include "engine/hb_engine_int.h"
#include "h2/hb_h2_client.h"

/* One stream slot (a stream in flight, or free). */
typedef struct h2slot {
    req_slot q;
    econn *c;
    hb_h2_body body;
    uint64_t first_byte, body_bytes;
    int status; /* 0 until the final response head */
    int used, submitted;
} h2slot;

typedef struct h2conn {
    econn base; /* first: the engine's part */
    hb_h2_client cli;
    int live;       /* cli initialised on the current socket */
    h2slot *slots;  /* pipeline of them */
    uint32_t *free; /* stack of free slot indices */
    uint32_t nfree;
    uint32_t pending; /* used slots not yet submitted (waiting for the connection) */
    uint32_t *unw;    /* submitted slots whose HEADERS may not be out yet */
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
    uint32_t m = c->th->e->cfg.pipeline;
    if (h->live) hb_h2_client_free(&h->cli);
    h->live = 0;
    for (uint32_t i = 0; i < m; i++) {
        h->slots[i].used = 0;
        h->slots[i].c = c;
        h->free[i] = m - 1 - i;
    }
    h->nfree = m;
    h->pending = h->nunw = 0;
    h->read_pending = 0;
    c->rcount = 0;
}

static void h2_release(econn *c, h2slot *sl)
{
    h2conn *h = H2(c);
    if (!sl->submitted) h->pending--;
    sl->used = 0;
    h->free[h->nfree++] = (uint32_t)(sl - h->slots);
    c->rcount--;
}

static void h2_fail_streams(econn *c, int type, uint64_t now)
{
    h2conn *h = H2(c);
    uint32_t m = c->th->e->cfg.pipeline;
    /* The stream sent before the server's SETTINGS timed out and those SETTINGS
     * allow none: every new connection would wait the same way, so the run ends. */
    if (type == HB_ENG_ERR_TIMEOUT && h->live && h->cli.peer_settings &&
        hb_h2_client_peer_max_streams(&h->cli) == 0)
        hb__eng_fatal(c->th, HB_E_H2,
                      "the server allows no streams (SETTINGS_MAX_CONCURRENT_STREAMS 0) and left "
                      "the first one unanswered until the timeout");
    for (uint32_t i = 0; i < m && c->rcount; i++) {
        h2slot *sl = &h->slots[i];
        if (!sl->used) continue;
        hb__eng_account_error(c->th, &sl->q, type, now);
        h2_release(c, sl);
    }
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

static void h2_on_header(void *ud, void *sud, const char *n, size_t nl, const char *v, size_t vl)
{
    (void)sud;
    hb__eng_header(((econn *)ud)->th, n, nl, v, vl);
}

static void h2_on_response(void *ud, void *sud, int status)
{
    econn *c = ud;
    h2slot *sl = sud;
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
    (void)ud;
    (void)d;
    h2slot *sl = sud;
    if (sl) sl->body_bytes += len;
}

static void h2_on_close(void *ud, void *sud, int end, uint32_t code)
{
    econn *c = ud;
    h2slot *sl = sud;
    ethread *th = c->th;
    uint64_t now = H2(c)->now;
    if (!sl || !sl->used) return;
    if (end == HB_H2_END_OK && sl->status) {
        hb__eng_account_response(th, &sl->q, sl->status, sl->body_bytes, sl->first_byte, now);
    } else {
        int type = end == HB_H2_END_RESET    ? HB_ENG_ERR_RST_STREAM
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
        hb__eng_account_error(th, &sl->q, type, now);
    }
    h2_release(c, sl);
    if (!th->e->cfg.keepalive) c->closing = 1;
}

static const hb_h2_client_callbacks H2_CBS = {h2_on_header, h2_on_response, h2_on_data, h2_on_close,
                                              NULL};
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
    st.stable_fields = 1; /* e->h2f lives as long as the engine */
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
    if (!h->live || c->closing) return c->rcount;
    uint32_t cap = c->rcount - h->pending + hb_h2_client_room(&h->cli);
    uint32_t m = c->th->e->cfg.pipeline;
    return cap < m ? cap : m;
}

static void h2_issue(econn *c, uint64_t intended, uint64_t now, int warm)
{
    h2conn *h = H2(c);
    ethread *th = c->th;
    h2slot *sl = &h->slots[h->free[--h->nfree]];
    hb__eng_issue_slot(th, &sl->q, intended, now, warm);
    sl->used = 1;
    sl->submitted = 0;
    sl->status = 0;
    sl->body_bytes = 0;
    sl->first_byte = 0;
    c->rcount++;
    h->pending++;
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
    for (uint32_t i = 0; i < m && h->pending; i++) {
        h2slot *sl = &h->slots[i];
        if (!sl->used || sl->submitted) continue;
        hb_h2_body *b = NULL;
        if (e->cfg.body_len) {
            sl->body.data = e->body;
            sl->body.len = e->cfg.body_len;
            b = &sl->body;
        }
        char err[HB_ERR_LEN];
        int id = hb_h2_client_submit(&h->cli, e->h2f, e->cfg.h2_nfields, b, sl, err);
        if (id == HB_AGAIN || id == HB_E_CLOSED) break; /* closes or GOAWAY come through read */
        if (id < 0) {
            hb__eng_fail_all(c, HB_ENG_ERR_WRITE, id, err);
            return;
        }
        sl->submitted = 1;
        h->pending--;
        if (h->nunw < m) h->unw[h->nunw++] = i; /* stamped after the write */
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
        h2slot *sl = &h->slots[h->unw[k]];
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

static int h2_timed_out(const econn *c, uint64_t now, uint64_t tmo)
{
    uint32_t m = c->th->e->cfg.pipeline;
    for (uint32_t i = 0; i < m; i++) {
        const h2slot *sl = &((const h2conn *)c)->slots[i];
        /* a read from the connection's timer may have started it after `now` */
        if (sl->used && now > sl->q.start && now - sl->q.start > tmo) return 1;
    }
    return 0;
}

static uint64_t h2_inflight_measured(const econn *c)
{
    const h2conn *h = (const h2conn *)c;
    uint64_t n = 0;
    for (uint32_t k = 0; k < c->th->e->cfg.pipeline; k++)
        n += h->slots[k].used && !h->slots[k].q.warm;
    return n;
}

static int h2_check(const hb_engine_config *cfg, char *err)
{
    if (!cfg->h2_fields || cfg->h2_nfields < 4)
        return hb_fail(err, HB_E_INVALID, "HTTP/2 needs the request's header fields");
    if (cfg->body_fd >= 0)
        return hb_fail(err, HB_E_INVALID, "HTTP/2 sends a body from memory only, not from a file");
    return 0;
}

static int h2_prepare(hb_engine *e, char *err)
{
    hb_engine_config *cf = &e->cfg;
    size_t tot = 0;
    for (size_t i = 0; i < cf->h2_nfields; i++)
        tot += cf->h2_fields[i].name_len + cf->h2_fields[i].value_len;
    e->h2f = calloc(cf->h2_nfields, sizeof *e->h2f);
    e->h2buf = malloc(tot + 1);
    if (!e->h2f || !e->h2buf) return hb_fail(err, HB_E_NOMEM, "out of memory");
    size_t o = 0;
    for (size_t i = 0; i < cf->h2_nfields; i++) {
        const hb_header *f = &cf->h2_fields[i];
        memcpy(e->h2buf + o, f->name, f->name_len);
        e->h2f[i].name = e->h2buf + o;
        e->h2f[i].name_len = f->name_len;
        o += f->name_len;
        memcpy(e->h2buf + o, f->value, f->value_len);
        e->h2f[i].value = e->h2buf + o;
        e->h2f[i].value_len = f->value_len;
        o += f->value_len;
    }
    cf->h2_fields = e->h2f;
    cf->head = NULL;
    cf->head_len = 0;
    e->req_len = cf->body_len;
    return 0;
}

static void h2_cleanup(hb_engine *e)
{
    free(e->h2f);
    free(e->h2buf);
}

static int h2_conn_init(econn *c, size_t rcap, char *err)
{
    (void)rcap;
    h2conn *h = H2(c);
    uint32_t m = c->th->e->cfg.pipeline;
    h->slots = calloc(m, sizeof *h->slots);
    h->free = calloc(m, sizeof *h->free);
    h->unw = calloc(m, sizeof *h->unw);
    if (!h->slots || !h->free || !h->unw) return hb_fail(err, HB_E_NOMEM, "out of memory");
    h2_reset(c);
    return 0;
}

static void h2_conn_free(econn *c)
{
    h2conn *h = H2(c);
    if (h->live) hb_h2_client_free(&h->cli);
    free(h->slots);
    free(h->free);
    free(h->unw);
}

const hb__eng_proto hb__eng_h2 = {
    .conn_size = sizeof(h2conn),
    .thread_size = 0,
    .check = h2_check,
    .prepare = h2_prepare,
    .cleanup = h2_cleanup,
    .conn_init = h2_conn_init,
    .conn_free = h2_conn_free,
    .start = h2_start,
    .cap = h2_cap,
    .issue = h2_issue,
    .send = h2_send,
    .on_io = h2_io,
    .timed_out = h2_timed_out,
    .fail_inflight = h2_fail_streams,
    .inflight_measured = h2_inflight_measured,
    .reset = h2_reset,
};
