/* hb_client_h3.c - blocking HTTP/3 batches for the native client (see hb_client_h3.h). */
#include "client/hb_client_h3.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>

#include "base/hb_clock.h"
#include "client/hb_client_int.h"
#include "net/hb_sock.h"

static void on_close(void *ud, void *sud, int end, uint64_t code)
{
    if (end == HB_H3_END_GOAWAY) { /* not processed: it goes again on a new connection */
        hb_mx *x = sud;
        hb__mx_reset(x, hb_now_ns());
        x->state = 0;
        return;
    }
    hb_mx *x = hb__mx_closed(ud, sud, end);
    if (end != HB_H3_END_OK) {
        char msg[96];
        snprintf(msg, sizeof msg, "HTTP/3 stream reset by the server (error 0x%llx)",
                 (unsigned long long)code);
        hb__mx_fail(x, HB_E_H3, msg);
    }
}

static const hb_h3_callbacks CBS = {hb__mx_on_header, hb__mx_on_response, hb__mx_on_data, on_close,
                                    NULL};

void hb_h3conn_close(hb_h3conn *hc)
{
    if (hc->inited) hb_h3_client_close(&hc->cli);
    hc->live = 0;
    hc->batches = 0;
}

void hb_h3conn_free(hb_h3conn *hc)
{
    if (hc->inited) hb_h3_client_free(&hc->cli);
    memset(hc, 0, sizeof *hc);
}

/* Wait for the socket or the QUIC timer, whichever is first; then let the
 * client act on it. 0, or an error (HB_E_TIMEOUT: the deadline passed). */
static int wait_step(hb_h3_client *c, uint64_t deadline_ns)
{
    uint64_t exp = hb_h3_client_next_expiry(c);
    uint64_t wake = exp < deadline_ns ? exp : deadline_ns;
    short ev = POLLIN | (c->blocked ? POLLOUT : 0);
    int rc = hb__wait_fd(c->fd, ev, wake, 1);
    uint64_t now = hb_now_ns();
    if (rc == 0) {
        if (c->blocked && (rc = hb_h3_client_writable(c, now)) < 0) return rc;
        if ((rc = hb_h3_client_read(c, now)) < 0) return rc;
        /* ngtcp2 completes the handshake (and sends Finished) in its write
         * path: write now rather than on the next timer */
        if (!c->handshake_done && (rc = hb_h3_client_write(c, now)) < 0) return rc;
    } else if (rc != HB_E_TIMEOUT) {
        return rc;
    }
    if (now >= hb_h3_client_next_expiry(c) && (rc = hb_h3_client_expiry(c, now)) < 0) return rc;
    if (now >= deadline_ns) return HB_E_TIMEOUT;
    return 0;
}

/* A new connection to t: resolve, socket, handshake (by connect_deadline_ns). */
static int connect_h3(hb_h3conn *hc, const hb_h3_tls *tls, const hb_target *t, hb__mx_batch *b,
                      uint64_t connect_deadline_ns, char *err)
{
    char host[HB_POOL_MAX_HOST + 1];
    if (t->host_len > HB_POOL_MAX_HOST) return hb_fail(err, HB_E_INVALID, "host name too long");
    memcpy(host, t->host, t->host_len);
    host[t->host_len] = '\0';
    struct sockaddr_storage ss;
    socklen_t sl = 0;
    int rc = hb_resolve_host(host, t->port, &ss, &sl, err);
    if (rc < 0) return rc;
    if (!hc->inited) {
        hb_h3_settings s = {0};
        s.max_streams = 100;
        rc = hb_h3_client_init(&hc->cli, &s, err);
        if (rc < 0) return rc;
        hc->inited = 1;
    }
    hc->cur = b;
    uint64_t now;
    for (int again = 1;; again = 0) {
        now = hb_now_ns();
        rc = hb_h3_client_connect(&hc->cli, tls, (const struct sockaddr *)&ss, sl, host, &CBS,
                                  &hc->cur, now);
        if (rc < 0) goto fail;
        hc->t_connected = hb_now_ns();
        rc = hb_h3_client_write(&hc->cli, now);
        while (rc == 0 && !hc->cli.handshake_done)
            rc = wait_step(&hc->cli, connect_deadline_ns);
        /* refused for its one key share: once more, offering more */
        if (rc < 0 && hc->cli.retry_shares && again) continue;
        break;
    }
    if (rc < 0) goto fail;
    hc->t_tls_done = hb_now_ns();
    hc->live = 1;
    hc->batches = 0;
    return 0;
fail:
    if (rc == HB_E_TIMEOUT) { /* no answer within the connect deadline: a silent port */
        char addr[64];
        hb_fail(err, HB_E_H3_TIMEOUT, "no QUIC handshake with %s within the connect timeout",
                hb_sockaddr_str((const struct sockaddr *)&ss, addr, sizeof addr));
        rc = HB_E_H3_TIMEOUT;
    } else if (rc == -ECONNREFUSED) {
        char addr[64];
        hb_fail(err, rc, "connection refused: no UDP listener at %s",
                hb_sockaddr_str((const struct sockaddr *)&ss, addr, sizeof addr));
    } else if (hc->cli.err[0]) {
        /* a certificate that failed verification reads as over TCP (TLSError, E_TLS_VERIFY) */
        if (rc == HB_E_H3_HANDSHAKE && hc->cli.cert_rejected) rc = HB_E_TLS_VERIFY;
        hb_fail(err, rc, "%s", hc->cli.err);
    }
    hb_h3_client_close(&hc->cli); /* a CONNECTION_CLOSE: the server frees its side at once */
    return rc;
}

/* Submit what the connection has room for. 0, or a connection-fatal code. */
static int submit_more(hb_h3conn *hc, hb__mx_batch *b, size_t *next)
{
    while (*next < b->n) {
        hb_mx *x = &b->xs[*next];
        if (x->state != 0) {
            (*next)++;
            continue;
        }
        int64_t id = hb_h3_client_submit_body(&hc->cli, x->fields, x->nfields, x->body,
                                              x->body ? x->body_len : 0, x);
        if (id == HB_AGAIN) return 0;
        if (id < 0) return (int)id;
        (*next)++;
        x->state = 1;
    }
    return 0;
}

/* One attempt of the batch on hc's connection. */
static int run_once(hb_h3conn *hc, hb__mx_batch *b, uint64_t deadline_ns, char *err)
{
    hb_h3_client *c = &hc->cli;
    size_t next = 0;
    int rc = 0;
    for (;;) {
        rc = submit_more(hc, b, &next);
        if (rc < 0) break;
        rc = hb_h3_client_write(c, hb_now_ns());
        if (rc < 0) break;
        if (b->done == b->n) return 0;
        /* a GOAWAY and nothing left open: the unsubmitted rest goes on a new connection */
        if (c->goaway && c->nopen == 0) return 0;
        rc = wait_step(c, deadline_ns);
        if (b->done == b->n) return 0; /* every stream ended, whatever came after */
        if (rc < 0) break;
    }
    if (rc == HB_E_TIMEOUT)
        hb_fail(err, rc, "HTTP/3 request timed out");
    else if (c->err[0])
        hb_fail(err, rc, "%s", c->err);
    else
        hb_fail(err, rc, "HTTP/3 connection failed: %s", hb_strerror(rc));
    return rc;
}

int hb_client_h3_run(hb_h3conn *hc, const hb_h3_tls *tls, const hb_target *t, hb_mx *xs, size_t n,
                     uint64_t deadline_ns, uint64_t connect_deadline_ns, char *err)
{
    hb__mx_batch b = {xs, n, 0, 0};
    if (err) err[0] = '\0';
    int rc = hb__mx_start(xs, n, "HTTP/3", err);
    if (rc < 0) return rc;
    int retried = 0;
    size_t fresh_tries = 0;
    for (;;) {
        rc = 0;
        /* what came while idle (a CONNECTION_CLOSE), a timer that ran out (idle timeout) */
        if (hc->live) {
            uint64_t t0 = hb_now_ns(), idle = hc->cli.idle_ns;
            /* silent for (nearly) the idle timeout: the server has dropped it or is about to
             * (an idle close sends nothing), so a request there would wait the timeout out;
             * judged before reading, as datagrams still queued arrived long ago */
            int bad = idle && t0 - hc->cli.last_rx >= idle - idle / 8;
            if (!bad) bad = hb_h3_client_read(&hc->cli, t0) < 0;
            for (int k = 0; !bad && k < 4 && t0 >= hb_h3_client_next_expiry(&hc->cli); k++)
                bad = hb_h3_client_expiry(&hc->cli, t0) < 0;
            if (bad) hb_h3conn_close(hc);
        }
        /* a connection the server ended or is ending: a new one */
        if (hc->live && (hc->cli.over || (hc->cli.goaway && hc->cli.nopen == 0)))
            hb_h3conn_close(hc);
        int reused = hc->live;
        if (!hc->live) {
            rc = connect_h3(hc, tls, t, &b,
                            connect_deadline_ns < deadline_ns ? connect_deadline_ns : deadline_ns,
                            err);
            if (rc < 0) goto fail_all;
            fresh_tries++;
        }
        hc->cur = &b;
        size_t before = hb__mx_attempt(&b, reused);
        rc = run_once(hc, &b, deadline_ns, err);
        if (rc == 0) {
            hc->batches++;
            if (b.done == n) return 0;
            /* GOAWAY left some unsent: a new connection, as long as each one serves some */
            if (b.done == before && fresh_tries > 1) {
                rc = hb_fail(err, HB_E_H3,
                             "not sent: the server refused new streams (GOAWAY) "
                             "on every connection tried");
                goto fail_all;
            }
            hb_h3conn_close(hc);
            continue;
        }
        hb_h3conn_close(hc);
        /* an idle connection the server had closed: once more on a new one */
        if (reused && !retried && !b.any_byte && rc != HB_E_TIMEOUT && rc != HB_E_INTERRUPTED) {
            retried = 1;
            for (size_t i = 0; i < n; i++)
                if (xs[i].state != 2) hb__mx_reset(&xs[i], xs[i].t_start);
            continue;
        }
        if (rc == HB_E_H3_TIMEOUT) /* the idle timeout, mid-request: no answer in time */
            rc = hb_fail(err, HB_E_TIMEOUT, "HTTP/3 request timed out (QUIC idle timeout)");
    fail_all:
        hb__mx_fail_open(xs, n, rc, err);
        return rc;
    }
}
