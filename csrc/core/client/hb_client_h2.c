/* hb_client_h2.c - blocking HTTP/2 batches for the native client (see hb_client_h2.h). */
#include "client/hb_client_h2.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/hb_clock.h"
#include "client/hb_client_int.h"

/* Smallest growth of a memory sink whose final size is unknown, and its first size. */
#define H2_SINK_CHUNK (64 * 1024)
#define H2_SINK_FIRST 1024

/* Batch state seen by the callbacks. */
typedef struct {
    hb_h2x *xs;
    size_t n, done;
    int any_byte; /* some response byte of this batch arrived */
} batch;

static void x_fail(hb_h2x *x, int rc, const char *msg)
{
    if (x->rc == 0) {
        x->rc = rc;
        snprintf(x->err, sizeof x->err, "%s", msg);
    }
}

void hb__h2x_header(hb_h2x *x, const char *name, size_t nl, const char *value, size_t vl)
{
    if (nl > HB_H2X_FIELD_MAX || vl > HB_H2X_FIELD_MAX ||
        x->head_len + HB_H2X_FIELD_HDR + nl + vl > x->head_cap) {
        x_fail(x, HB_E_TOO_LARGE, "response header block larger than the head buffer");
        return;
    }
    uint16_t l[2] = {(uint16_t)nl, (uint16_t)vl};
    char *o = x->head + x->head_len;
    memcpy(o, l, HB_H2X_FIELD_HDR);
    memcpy(o + HB_H2X_FIELD_HDR, name, nl);
    memcpy(o + HB_H2X_FIELD_HDR + nl, value, vl);
    x->head_len += HB_H2X_FIELD_HDR + nl + vl;
    if (nl == 14 && memcmp(name, "content-length", 14) == 0) {
        uint64_t v = 0;
        size_t i = 0;
        for (; i < vl && value[i] >= '0' && value[i] <= '9' && v < UINT64_MAX / 10; i++)
            v = v * 10 + (uint64_t)(value[i] - '0');
        if (i == vl && vl > 0) x->content_length = v;
    }
}

static void on_header(void *ud, void *sud, const char *name, size_t nl, const char *value,
                      size_t vl)
{
    ((batch *)ud)->any_byte = 1;
    hb__h2x_header(sud, name, nl, value, vl);
}

static void on_response(void *ud, void *sud, int status)
{
    batch *b = ud;
    hb_h2x *x = sud;
    b->any_byte = 1;
    x->status = status;
    x->t_first_byte = hb_now_ns();
}

static int sink_put(hb_h2x *x, const uint8_t *p, size_t len)
{
    hb_sink *s = x->sink;
    if (s->fd >= 0) {
        while (len > 0) {
            ssize_t w = write(s->fd, p, len);
            if (w < 0) {
                if (errno == EINTR) continue;
                return -errno;
            }
            p += w;
            len -= (size_t)w;
        }
        return 0;
    }
    size_t need = s->len + len;
    if (need > s->cap) {
        if (!s->grow) return HB_E_NOMEM;
        size_t want = need;
        if (x->content_length != UINT64_MAX && x->content_length <= HB_CLIENT_BODY_WHOLE &&
            x->content_length >= need)
            want = (size_t)x->content_length; /* the whole announced body at once */
        else {
            size_t step = s->cap == 0              ? H2_SINK_FIRST
                          : s->len < H2_SINK_CHUNK ? H2_SINK_CHUNK
                                                   : s->len;
            if (step > HB_CLIENT_BODY_STEP) step = HB_CLIENT_BODY_STEP;
            if (want < s->len + step) want = s->len + step;
        }
        if (x->max_body && want > x->max_body && need <= x->max_body) want = (size_t)x->max_body;
        int rc = s->grow(s, want, x->err);
        if (rc < 0) return rc;
    }
    memcpy(s->buf + s->len, p, len);
    s->len += len;
    return 0;
}

void hb__h2x_data(hb_h2x *x, const uint8_t *data, size_t len)
{
    x->body_bytes += len;
    if (x->rc) return; /* failed already: the rest is dropped */
    if (x->max_body && x->body_bytes > x->max_body) {
        char msg[96];
        snprintf(msg, sizeof msg, "response body over max_body (%llu bytes)",
                 (unsigned long long)x->max_body);
        x_fail(x, HB_E_TOO_LARGE, msg);
        return;
    }
    int rc = sink_put(x, data, len);
    if (rc < 0) {
        if (x->rc == 0 && x->err[0]) /* grow wrote the detail */
            x->rc = rc;
        else
            x_fail(x, rc, rc == HB_E_NOMEM ? "body sink is full" : "writing the body failed");
    }
}

static void on_data(void *ud, void *sud, const uint8_t *data, size_t len)
{
    ((batch *)ud)->any_byte = 1;
    hb__h2x_data(sud, data, len);
}

static void on_close(void *ud, void *sud, int end, uint32_t code)
{
    batch *b = ud;
    hb_h2x *x = sud;
    x->state = 2;
    x->end = end;
    x->t_done = hb_now_ns();
    b->done++;
    if (end != HB_H2_END_OK) {
        char msg[128];
        snprintf(msg, sizeof msg, "HTTP/2 stream ended: %s (%s)", hb_h2_end_name(end),
                 hb_h2_code_name(code));
        x_fail(x, HB_E_H2, msg);
    }
}

static const hb_h2_client_callbacks CBS = {on_header, on_response, on_data, on_close, NULL};

static void drop_session(hb_pool *p, hb_h2conn *hc)
{
    if (hc->live) hb_h2_client_free(&hc->cli);
    if (hc->conn) hb_pool_release(p, hc->conn, 0);
    hc->conn = NULL;
    hc->live = 0;
    hc->batches = 0;
}

void hb_h2conn_close(hb_pool *p, hb_h2conn *hc)
{
    if (hc->live) {
        hb_h2_client_goaway(&hc->cli);
        (void)hb_h2_client_write(&hc->cli); /* best effort: non-blocking */
    }
    drop_session(p, hc);
}

static int connect_session(hb_pool *p, hb_h2conn *hc, const hb_target *t, batch *b,
                           uint64_t deadline_ns, uint64_t connect_deadline_ns, char *err)
{
    hb_conn_times ct;
    int reused = 0;
    int rc =
        hb_pool_acquire(p, t, 1, deadline_ns, connect_deadline_ns, &hc->conn, &reused, &ct, err);
    if (rc < 0) {
        hc->conn = NULL;
        return rc;
    }
    hc->t_connected = ct.connected;
    hc->t_tls_done = ct.tls_done;
    rc = hb_h2_client_init(&hc->cli, &hc->conn->sock, NULL, &CBS, b, err);
    if (rc < 0) {
        hb_pool_release(p, hc->conn, 0);
        hc->conn = NULL;
        return rc;
    }
    hc->live = 1;
    hc->batches = 0;
    return 0;
}

static void reset_one(hb_h2x *x, uint64_t now)
{
    x->head_len = 0;
    x->status = 0;
    x->rc = 0;
    x->err[0] = '\0';
    x->body_bytes = 0;
    x->content_length = UINT64_MAX;
    x->t_start = now;
    x->t_first_byte = x->t_done = 0;
    x->state = 0;
    x->end = HB_H2_END_OK;
    x->b.data = x->body;
    x->b.len = x->body_len;
    x->b.sent = 0;
    if (x->sink) x->sink->len = 0;
}

/* Submit what the session has room for. 0, or a connection-fatal code. */
static int submit_more(hb_h2conn *hc, batch *b, size_t *next)
{
    while (*next < b->n) {
        hb_h2x *x = &b->xs[*next];
        if (x->state != 0) { /* ended in an earlier attempt */
            (*next)++;
            continue;
        }
        int id =
            hb_h2_client_submit(&hc->cli, x->fields, x->nfields, x->body ? &x->b : NULL, x, x->err);
        if (id == HB_AGAIN) return 0;
        if (id == HB_E_CLOSED) /* after a GOAWAY: the rest goes on a new connection */
            return hc->cli.goaway_recv ? 0 : HB_E_CLOSED;
        (*next)++;
        if (id < 0) { /* this request only (invalid fields, no memory) */
            x->rc = id;
            x->state = 2;
            b->done++;
            continue;
        }
        x->state = 1;
    }
    return 0;
}

static int flush(hb_h2conn *hc)
{
    while (hb_h2_client_wants_write(&hc->cli)) {
        int rc = hb_h2_client_write(&hc->cli);
        if (rc == HB_AGAIN) return 0;
        if (rc < 0) return rc;
    }
    return 0;
}

/* One attempt of the batch on hc's session. */
static int run_once(hb_pool *p, hb_h2conn *hc, batch *b, uint64_t deadline_ns, char *err)
{
    size_t next = 0;
    int rc = 0;
    for (;;) {
        rc = hb_h2_client_read(&hc->cli);
        if (b->done == b->n) return 0; /* every stream ended, whatever came after */
        /* a GOAWAY and nothing left open: the unsubmitted rest is the caller's to resend */
        if (hc->cli.goaway_recv && hb_h2_client_open_streams(&hc->cli) == 0) return 0;
        if (rc != HB_AGAIN && rc < 0) break;
        rc = submit_more(hc, b, &next);
        if (rc < 0) break;
        rc = flush(hc);
        if (rc < 0) break;
        if (b->done == b->n) return 0;
        short ev = POLLIN;
        if (hb_h2_client_wants_write(&hc->cli) || hc->conn->sock.want == HB_WANT_WRITE)
            ev |= POLLOUT;
        /* input waiting that poll would not announce: read on, if time is left */
        if (hc->cli.more_input || hb_sock_has_buffered(&hc->conn->sock)) {
            if (hb_now_ns() < deadline_ns) continue;
            hb_fail(err, HB_E_TIMEOUT, "HTTP/2 batch timed out");
            return HB_E_TIMEOUT;
        }
        rc = hb__wait_fd(hc->conn->sock.fd, ev, deadline_ns, p->opts.eintr_abort);
        if (rc < 0) {
            if (rc == HB_E_TIMEOUT) hb_fail(err, rc, "HTTP/2 batch timed out");
            return rc;
        }
    }
    if (hc->cli.err[0])
        hb_fail(err, rc, "%s", hc->cli.err);
    else
        hb_fail(err, rc, "HTTP/2 connection failed: %s", hb_strerror(rc));
    return rc;
}

int hb_client_h2_run(hb_pool *p, hb_h2conn *hc, const hb_target *t, hb_h2x *xs, size_t n,
                     uint64_t deadline_ns, uint64_t connect_deadline_ns, char *err)
{
    batch b = {xs, n, 0, 0};
    if (err) err[0] = '\0';
    for (size_t i = 0; i < n; i++)
        if (!xs[i].head || xs[i].head_cap == 0)
            return hb_fail(err, HB_E_INVALID, "HTTP/2 exchange %zu has no head buffer", i);
    uint64_t now = hb_now_ns();
    for (size_t i = 0; i < n; i++)
        reset_one(&xs[i], now);
    int idle_retried = 0;
    for (;;) {
        int rc = 0;
        if (hc->live && (hb_h2_client_done(&hc->cli) || hc->cli.goaway_recv)) drop_session(p, hc);
        int reused = hc->live;
        if (!hc->live) {
            rc = connect_session(p, hc, t, &b, deadline_ns, connect_deadline_ns, err);
            if (rc < 0) goto fail_all;
        } else {
            hc->cli.ud = &b; /* this batch's state for the callbacks */
        }
        b.done = 0;
        b.any_byte = 0;
        size_t before = 0; /* streams that had ended before this attempt */
        for (size_t i = 0; i < n; i++) {
            if (xs[i].state == 2)
                before++;
            else
                xs[i].reused = reused;
        }
        b.done = before;
        rc = run_once(p, hc, &b, deadline_ns, err);
        if (rc == 0) {
            hc->batches++;
            /* streams above a GOAWAY's last id were not processed: send them again
             * on a new connection (a server ending connections after N requests) */
            size_t again = 0;
            for (size_t i = 0; i < n; i++)
                if (xs[i].end == HB_H2_END_GOAWAY || xs[i].state == 0) again++;
            if (again == 0) return 0;
            if (n - again <= before) { /* a new connection served none: give up */
                for (size_t i = 0; i < n; i++)
                    if (xs[i].state == 0) {
                        xs[i].state = 2;
                        x_fail(&xs[i], HB_E_H2,
                               "not sent: the server refused new streams "
                               "(GOAWAY) on every connection tried");
                    }
                return 0;
            }
            for (size_t i = 0; i < n; i++)
                if (xs[i].end == HB_H2_END_GOAWAY || xs[i].state == 0)
                    reset_one(&xs[i], xs[i].t_start);
            drop_session(p, hc);
            continue;
        }
        drop_session(p, hc);
        /* an idle session the server had closed: once more on a new connection */
        if (reused && !idle_retried && !b.any_byte &&
            (rc == HB_E_CLOSED || rc == -ECONNRESET || rc == -EPIPE)) {
            idle_retried = 1;
            for (size_t i = 0; i < n; i++)
                if (xs[i].state != 2) reset_one(&xs[i], xs[i].t_start);
            continue;
        }
    fail_all:
        for (size_t i = 0; i < n; i++)
            if (xs[i].state != 2) {
                xs[i].state = 2;
                xs[i].rc = rc;
                snprintf(xs[i].err, sizeof xs[i].err, "%s", err && err[0] ? err : "");
            }
        return rc;
    }
}
