/* hb_client_h2.c - blocking HTTP/2 batches for the native client (see hb_client_h2.h). */
#include "client/hb_client_h2.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>

#include "base/hb_clock.h"
#include "client/hb_client_int.h"

static void on_close(void *ud, void *sud, int end, uint32_t code)
{
    hb_mx *x = hb__mx_closed(ud, sud, end);
    if (end != HB_H2_END_OK) {
        char msg[128];
        snprintf(msg, sizeof msg, "HTTP/2 stream ended: %s (%s)", hb_h2_end_name(end),
                 hb_h2_code_name(code));
        hb__mx_fail(x, HB_E_H2, msg);
    }
}

static const hb_h2_client_callbacks CBS = {hb__mx_on_header, hb__mx_on_response, hb__mx_on_data,
                                           on_close, NULL};

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

static int connect_session(hb_pool *p, hb_h2conn *hc, const hb_target *t, uint64_t deadline_ns,
                           uint64_t connect_deadline_ns, char *err)
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
    rc = hb_h2_client_init(&hc->cli, &hc->conn->sock, NULL, &CBS, &hc->cur, err);
    if (rc < 0) {
        hb_pool_release(p, hc->conn, 0);
        hc->conn = NULL;
        return rc;
    }
    hc->live = 1;
    hc->batches = 0;
    return 0;
}

/* Submit what the session has room for. 0, or a connection-fatal code. */
static int submit_more(hb_h2conn *hc, hb__mx_batch *b, size_t *next)
{
    while (*next < b->n) {
        hb_mx *x = &b->xs[*next];
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
static int run_once(hb_pool *p, hb_h2conn *hc, hb__mx_batch *b, uint64_t deadline_ns, char *err)
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

int hb_client_h2_run(hb_pool *p, hb_h2conn *hc, const hb_target *t, hb_mx *xs, size_t n,
                     uint64_t deadline_ns, uint64_t connect_deadline_ns, char *err)
{
    hb__mx_batch b = {xs, n, 0, 0};
    if (err) err[0] = '\0';
    int rc = hb__mx_start(xs, n, "HTTP/2", err);
    if (rc < 0) return rc;
    int idle_retried = 0;
    for (;;) {
        rc = 0;
        if (hc->live && (hb_h2_client_done(&hc->cli) || hc->cli.goaway_recv)) drop_session(p, hc);
        int reused = hc->live;
        hc->cur = &b; /* this batch's state for the callbacks */
        if (!hc->live) {
            rc = connect_session(p, hc, t, deadline_ns, connect_deadline_ns, err);
            if (rc < 0) goto fail_all;
        }
        size_t before = hb__mx_attempt(&b, reused); /* streams that had ended before */
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
                        hb__mx_fail(&xs[i], HB_E_H2,
                                    "not sent: the server refused new streams "
                                    "(GOAWAY) on every connection tried");
                    }
                return 0;
            }
            for (size_t i = 0; i < n; i++)
                if (xs[i].end == HB_H2_END_GOAWAY || xs[i].state == 0)
                    hb__mx_reset(&xs[i], xs[i].t_start);
            drop_session(p, hc);
            continue;
        }
        drop_session(p, hc);
        /* an idle session the server had closed: once more on a new connection */
        if (reused && !idle_retried && !b.any_byte &&
            (rc == HB_E_CLOSED || rc == -ECONNRESET || rc == -EPIPE)) {
            idle_retried = 1;
            for (size_t i = 0; i < n; i++)
                if (xs[i].state != 2) hb__mx_reset(&xs[i], xs[i].t_start);
            continue;
        }
    fail_all:
        hb__mx_fail_open(xs, n, rc, err);
        return rc;
    }
}
