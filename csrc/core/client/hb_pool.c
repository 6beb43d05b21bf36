/* hb_pool.c - keep-alive connection pool (see hb_pool.h). */
#include "client/hb_pool.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/hb_clock.h"
#include "client/hb_client_int.h"
#include "net/hb_tls.h"

#define POOL_TLS_RBUF (64u * 1024u) /* raw TLS input buffered per connection */

int hb__wait_fd(int fd, short events, uint64_t deadline_ns, int eintr_abort)
{
    for (;;) {
        uint64_t now = hb_now_ns();
        if (now >= deadline_ns) return HB_E_TIMEOUT;
        uint64_t left = deadline_ns - now;
        struct timespec ts = {(time_t)(left / 1000000000u), (long)(left % 1000000000u)};
        struct pollfd pfd = {.fd = fd, .events = events, .revents = 0};
        int n = ppoll(&pfd, 1, &ts, NULL);
        if (n > 0) return 0;  /* POLLERR/POLLHUP too: the next I/O call reports it */
        if (n == 0) continue; /* re-check the clock; ppoll may wake a little early */
        if (errno != EINTR) return -errno;
        if (eintr_abort) return HB_E_INTERRUPTED;
    }
}

int hb_pool_init(hb_pool *p, const hb_pool_opts *opts)
{
    memset(p, 0, sizeof *p);
    if (opts) {
        p->opts = *opts;
    } else {
        p->opts.stale_check = 1;
    }
    if (p->opts.max_per_host == 0) p->opts.max_per_host = HB_POOL_DEFAULT_MAX_PER_HOST;
    if (p->opts.idle_timeout_ns == 0) p->opts.idle_timeout_ns = HB_POOL_DEFAULT_IDLE_NS;
    int rc = pthread_mutex_init(&p->mu, NULL);
    if (rc) return -rc;
    pthread_condattr_t ca;
    if ((rc = pthread_condattr_init(&ca)) != 0) goto fail_mu;
    /* Deadlines are CLOCK_MONOTONIC, so the wait must be too. */
    if ((rc = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC)) == 0)
        rc = pthread_cond_init(&p->cv, &ca);
    pthread_condattr_destroy(&ca);
    if (rc) goto fail_mu;
    return 0;
fail_mu:
    pthread_mutex_destroy(&p->mu);
    return -rc;
}

static void conn_free(hb_conn *c)
{
    hb_sock_close(&c->sock);
    free(c->rbuf);
    free(c);
}

void hb_pool_destroy(hb_pool *p)
{
    hb_pool_host *h = p->hosts;
    while (h) {
        hb_pool_host *hn = h->next;
        for (hb_conn *c = h->idle, *cn; c; c = cn) {
            cn = c->next;
            conn_free(c);
        }
        free(h);
        h = hn;
    }
    for (hb_conn *c = p->free, *cn; c; c = cn) {
        cn = c->next;
        conn_free(c);
    }
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    memset(p, 0, sizeof *p);
}

/* Caller holds the mutex. The struct (and its buffer) goes to the free list. */
static void conn_drop(hb_pool *p, hb_conn *c)
{
    hb_sock_close(&c->sock);
    if (c->host) c->host->nopen--;
    c->host = NULL;
    c->next = p->free;
    p->free = c;
    pthread_cond_broadcast(&p->cv);
}

void hb_pool_close(hb_pool *p)
{
    pthread_mutex_lock(&p->mu);
    p->closed = 1;
    for (hb_pool_host *h = p->hosts; h; h = h->next) {
        while (h->idle) {
            hb_conn *c = h->idle;
            h->idle = c->next;
            conn_drop(p, c);
        }
    }
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

void hb_pool_set_stale_check(hb_pool *p, int on)
{
    pthread_mutex_lock(&p->mu);
    p->opts.stale_check = on;
    pthread_mutex_unlock(&p->mu);
}

void hb_pool_set_tls(hb_pool *p, struct hb_tls_ctx *tls)
{
    pthread_mutex_lock(&p->mu);
    p->opts.tls = tls;
    pthread_mutex_unlock(&p->mu);
}

void hb_pool_get_stats(hb_pool *p, hb_pool_stats *out)
{
    pthread_mutex_lock(&p->mu);
    *out = p->stats;
    out->open = out->idle = 0;
    for (hb_pool_host *h = p->hosts; h; h = h->next) {
        out->open += h->nopen;
        for (hb_conn *c = h->idle; c; c = c->next)
            out->idle++;
    }
    pthread_mutex_unlock(&p->mu);
}

static int host_matches(const hb_pool_host *h, const hb_target *t)
{
    return h->port == t->port && h->tls == t->tls && h->name_len == t->host_len &&
           memcmp(h->name, t->host, t->host_len) == 0;
}

/* Caller holds the mutex. Finds or creates (resolving once) the target entry. */
static int host_get(hb_pool *p, const hb_target *t, hb_pool_host **out, char *err)
{
    if (p->last && host_matches(p->last, t)) {
        *out = p->last;
        return 0;
    }
    for (hb_pool_host *h = p->hosts; h; h = h->next) {
        if (host_matches(h, t)) {
            *out = p->last = h;
            return 0;
        }
    }
    if (t->host_len == 0 || t->host_len > HB_POOL_MAX_HOST)
        return hb_fail(err, HB_E_INVALID, "invalid host name length %zu", t->host_len);
    if (t->port <= 0 || t->port > 65535)
        return hb_fail(err, HB_E_INVALID, "invalid port %d", t->port);
    hb_pool_host *h = calloc(1, sizeof *h);
    if (!h) return hb_fail(err, HB_E_NOMEM, "out of memory");
    memcpy(h->name, t->host, t->host_len);
    h->name[t->host_len] = '\0';
    h->name_len = t->host_len;
    h->port = t->port;
    h->tls = t->tls;
    int rc = hb_resolve_host(h->name, t->port, &h->addr, &h->addrlen, err);
    if (rc < 0) {
        free(h);
        return rc;
    }
    h->next = p->hosts;
    p->hosts = h;
    *out = p->last = h;
    return 0;
}

/* 1 if an idle connection looks unusable: EOF, an error, or bytes nobody
 * asked for (a late response, a TLS close_notify). */
static int conn_is_stale(hb_conn *c)
{
    char b;
    ssize_t n = recv(c->sock.fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
    return 1;
}

static hb_conn *conn_new(hb_pool *p)
{
    hb_conn *c = p->free;
    if (c) {
        p->free = c->next;
    } else {
        c = calloc(1, sizeof *c);
        if (!c) return NULL;
        c->rbuf = malloc(HB_POOL_RBUF_SIZE);
        if (!c->rbuf) {
            free(c);
            return NULL;
        }
        c->rcap = HB_POOL_RBUF_SIZE;
        hb_sock_init(&c->sock);
    }
    c->next = NULL;
    c->requests = 0;
    c->rpos = c->rlen = 0;
    return c;
}

/* Connect (and handshake) c to h, outside the mutex. */
static int conn_open(hb_pool *p, hb_conn *c, hb_pool_host *h, uint64_t cdl, hb_conn_times *times,
                     char *err)
{
    char as[64];
    int rc = hb_sock_connect(&c->sock, (const struct sockaddr *)&h->addr, h->addrlen, 0, err);
    while (rc == HB_AGAIN) {
        rc = hb__wait_fd(c->sock.fd, POLLOUT, cdl, p->opts.eintr_abort);
        if (rc == 0) rc = hb_sock_connect_check(&c->sock);
    }
    if (rc < 0) {
        hb_sockaddr_str((const struct sockaddr *)&h->addr, as, sizeof as);
        if (rc == HB_E_TIMEOUT)
            hb_fail(err, rc, "connect to %s (%s) timed out", h->name, as);
        else
            hb_fail(err, rc, "connect to %s (%s): %s", h->name, as, hb_strerror(rc));
        hb_sock_close(&c->sock);
        return rc;
    }
    if (times) times->connected = hb_now_ns();
    if (!h->tls) return 0;
    if (!p->opts.tls) {
        hb_sock_close(&c->sock);
        return hb_fail(err, HB_E_INVALID, "https target but no TLS context");
    }
    rc = hb_sock_tls_client(&c->sock, p->opts.tls, h->name, err);
    /* One recv() per batch of records, OpenSSL fed a record at a time. */
    if (rc == 0) rc = hb_sock_tls_read_buffer(&c->sock, POOL_TLS_RBUF, err);
    if (rc == 0) {
        while ((rc = hb_sock_handshake(&c->sock, err)) == HB_AGAIN) {
            rc = hb__wait_fd(c->sock.fd, c->sock.want == HB_WANT_WRITE ? POLLOUT : POLLIN, cdl,
                             p->opts.eintr_abort);
            if (rc < 0) break;
        }
    }
    if (rc < 0) {
        if (rc == HB_E_TIMEOUT)
            hb_fail(err, rc, "TLS handshake with %s timed out", h->name);
        else if (rc == HB_E_CLOSED || (rc > -4096 && rc < 0))
            hb_fail(err, rc == HB_E_CLOSED ? HB_E_TLS : rc, "TLS handshake with %s: %s", h->name,
                    hb_strerror(rc));
        else if (err && !err[0])
            hb_sock_errstr(&c->sock, rc, err);
        /* A peer hanging up mid-handshake is a TLS failure, not an HTTP one. */
        if (rc == HB_E_CLOSED) rc = HB_E_TLS;
        hb_sock_close(&c->sock);
        return rc;
    }
    if (times) times->tls_done = hb_now_ns();
    return 0;
}

int hb_pool_acquire(hb_pool *p, const hb_target *t, int fresh, uint64_t deadline_ns,
                    uint64_t connect_deadline_ns, hb_conn **out, int *reused, hb_conn_times *times,
                    char *err)
{
    hb_pool_host *h = NULL;
    int rc;
    if (times) times->connected = times->tls_done = 0;
    *reused = 0;
    pthread_mutex_lock(&p->mu);
    if (p->closed) {
        pthread_mutex_unlock(&p->mu);
        return hb_fail(err, HB_E_INVALID, "the client is closed");
    }
    if ((rc = host_get(p, t, &h, err)) < 0) {
        pthread_mutex_unlock(&p->mu);
        return rc;
    }
    for (;;) {
        while (h->idle && !fresh) {
            hb_conn *c = h->idle;
            h->idle = c->next;
            uint64_t now = hb_now_ns();
            if (p->opts.idle_timeout_ns != UINT64_MAX &&
                now - c->last_used_ns > p->opts.idle_timeout_ns) {
                p->stats.expired++;
                conn_drop(p, c);
                continue;
            }
            if (p->opts.stale_check && conn_is_stale(c)) {
                p->stats.stale_dropped++;
                conn_drop(p, c);
                continue;
            }
            p->stats.reuses++;
            pthread_mutex_unlock(&p->mu);
            c->next = NULL;
            *out = c;
            *reused = 1;
            return 0;
        }
        /* A fresh connection at the limit takes an idle one's slot. */
        if (fresh && h->nopen >= p->opts.max_per_host && h->idle) {
            hb_conn *c = h->idle;
            h->idle = c->next;
            conn_drop(p, c);
        }
        if (h->nopen < p->opts.max_per_host) break;
        struct timespec ts = {(time_t)(deadline_ns / 1000000000u),
                              (long)(deadline_ns % 1000000000u)};
        rc = pthread_cond_timedwait(&p->cv, &p->mu, &ts);
        if (p->closed) {
            pthread_mutex_unlock(&p->mu);
            return hb_fail(err, HB_E_INVALID, "the client is closed");
        }
        if (rc == ETIMEDOUT && h->nopen >= p->opts.max_per_host && (!h->idle || fresh)) {
            pthread_mutex_unlock(&p->mu);
            return hb_fail(err, HB_E_TIMEOUT,
                           "timed out waiting for a free connection to %s (max %u per host)",
                           h->name, p->opts.max_per_host);
        }
    }
    hb_conn *c = conn_new(p);
    if (!c) {
        pthread_mutex_unlock(&p->mu);
        return hb_fail(err, HB_E_NOMEM, "out of memory");
    }
    c->host = h;
    h->nopen++;
    p->stats.connects++;
    pthread_mutex_unlock(&p->mu);

    rc = conn_open(p, c, h, connect_deadline_ns < deadline_ns ? connect_deadline_ns : deadline_ns,
                   times, err);
    if (rc < 0) {
        pthread_mutex_lock(&p->mu);
        conn_drop(p, c);
        pthread_mutex_unlock(&p->mu);
        return rc;
    }
    *out = c;
    return 0;
}

void hb_pool_release(hb_pool *p, hb_conn *c, int keep)
{
    pthread_mutex_lock(&p->mu);
    if (keep && !p->closed && c->rpos == c->rlen && c->sock.fd >= 0) {
        hb_pool_host *h = c->host;
        c->rpos = c->rlen = 0;
        c->requests++;
        c->last_used_ns = hb_now_ns();
        c->next = h->idle;
        h->idle = c;
        pthread_cond_signal(&p->cv);
    } else {
        conn_drop(p, c);
    }
    pthread_mutex_unlock(&p->mu);
}
