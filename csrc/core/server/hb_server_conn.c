/* hb_server_conn.c - a server connection's lifecycle and I/O: accept, TLS
 * handshake, the read/process/write driver (hb__conn_run), after-response
 * actions (close, reset, stall), lingering close, and its timeouts. */
#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>

#include "server/hb_server_int.h"

#define LINGER_NS 1000000000ull /* drain unread input this long before closing */

static void on_io(hb_loop *l, hb_io *io, uint32_t events);
static void on_timer(hb_loop *l, hb_timer *t, uint64_t now);

static size_t conn_size(const hb_server *srv)
{
    return sizeof(hb__conn) + srv->rbuf_size + HB__SRV_OBUF;
}

/* Structs are mapped, not malloc'ed: unmapping hands the pages straight back
 * to the system, and the buffers' untouched pages never count in RSS. */
static hb__conn *conn_new(hb__worker *w)
{
    hb__conn *c = w->free;
    if (c) {
        w->free = c->next;
        w->nfree--;
    } else {
        void *m = mmap(NULL, conn_size(w->srv), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                       -1, 0);
        if (m == MAP_FAILED) return NULL;
        c = m;
    }
    memset(c, 0, offsetof(hb__conn, obuf)); /* the buffers need no clearing */
    c->obuf = c->rbuf + w->srv->rbuf_size;
    hb_sock_init(&c->sock);
    hb_io_init(&c->io, on_io);
    hb_timer_init(&c->timer, on_timer);
    c->w = w;
    c->budget = HB__SRV_READ_BUDGET;
    w->nconns++;
    c->next = w->conns;
    if (w->conns) w->conns->prev = c;
    w->conns = c;
    return c;
}

void hb__conn_release(hb_server *srv, hb__conn *c)
{
    free(c->stats_body);
    (void)munmap(c, conn_size(srv)); /* fails only for a bad range: nothing to do */
}

void hb__conn_free(hb__conn *c, int abort_it)
{
    hb__worker *w = c->w;
    hb_timer_stop(&w->loop, &c->timer);
    /* a counted request that never got its response (peer gone mid-body or
     * while it waited, server stopping during a delay) is a "no response"
     * status 0, so requests == sum(by_status) holds once connections are
     * done; the ones the peer walked away from are client_gone as well */
    if (c->status_owed) {
        HB__ADD(w->st.by_status[0], 1);
        if (c->peer_left) HB__ADD(w->st.client_gone, 1);
    }
    c->status_owed = 0;
    if (c->mp) {
        c->mp->end(c, c->peer_left);
        c->mp = NULL;
    }
    free(c->stats_body);
    c->stats_body = NULL;
    if (c->queued) {
        if (c->rq_prev)
            c->rq_prev->rq_next = c->rq_next;
        else
            w->ready = c->rq_next;
        if (c->rq_next)
            c->rq_next->rq_prev = c->rq_prev;
        else
            w->ready_tail = c->rq_prev;
        c->queued = 0;
    }
    w->nconns--;
    if (c->prev)
        c->prev->next = c->next;
    else
        w->conns = c->next;
    if (c->next) c->next->prev = c->prev;
    if (abort_it)
        hb_sock_abort(&c->sock);
    else
        hb_sock_close(&c->sock);
    hb_io_forget(&c->io); /* closing the fd left the epoll set */
    HB__ADD(w->st.closed, 1);
    if (w->nfree >= HB__SRV_FREE_MAX) {
        hb__conn_release(w->srv, c);
        return;
    }
    c->prev = NULL;
    c->next = w->free;
    w->free = c;
    w->nfree++;
}

/* The peer closed or reset the connection. */
static void conn_gone(hb__conn *c)
{
    c->peer_left = 1;
    hb__conn_free(c, 0);
}

int hb__conn_timer(hb__conn *c, uint64_t at)
{
    return hb_timer_start(&c->w->loop, &c->timer, at) < 0 ? -1 : 0;
}

int hb__conn_accept(hb__worker *w, int fd)
{
    hb_server *srv = w->srv;
    hb__conn *c = conn_new(w);
    if (!c) return -1;
    HB__ADD(w->st.accepted, 1);
    char err[HB_ERR_LEN];
    if (hb_sock_adopt(&c->sock, fd, 0) < 0) {
        c->sock.fd = fd;
        hb__conn_free(c, 0);
        return 0;
    }
    c->phase = HB__PH_HEAD;
    c->idle_since = w->now;
    if (srv->tls) {
        if (hb_sock_tls_server(&c->sock, srv->tls, err) < 0) {
            hb__conn_free(c, 0);
            return 0;
        }
        c->phase = HB__PH_HANDSHAKE;
        c->req_deadline = w->now + w->req_timeout_ns;
    }
    /* edge-triggered: a read or write is retried only after it would block
     * (or a short plain read/write says it would) */
    if (hb_loop_add(&w->loop, &c->io, fd, EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET) != 0) {
        hb__conn_free(c, 0);
        return 0;
    }
    c->rd_ready = c->wr_ready = 1;
    hb__conn_run(c);
    return 0;
}

static void begin_linger(hb__conn *c)
{
    (void)hb_sock_shutdown(&c->sock); /* FIN (TLS: close_notify first); errors: just close */
    c->phase = HB__PH_LINGER;
    c->linger_until = c->w->now + LINGER_NS;
}

static void linger_read(hb__conn *c);

void hb__conn_linger(hb__conn *c)
{
    begin_linger(c);
    linger_read(c);
}

/* Discard input until EOF (then close) or until the linger time is over, so
 * the response we sent is not destroyed by an RST for unread data. */
static void linger_read(hb__conn *c)
{
    char tmp[16384];
    for (int i = 0; i < 64; i++) {
        ssize_t r = recv(c->sock.fd, tmp, sizeof tmp, 0);
        if (r > 0) {
            HB__ADD(c->w->st.bytes_in, (uint64_t)r);
            continue;
        }
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
        if (r < 0 && errno == EINTR) continue;
        break; /* EOF or error */
    }
    hb__conn_free(c, 0);
}

ssize_t hb__conn_write(hb__conn *c, const struct iovec *v, int cnt)
{
    hb__worker *w = c->w;
    ssize_t n = cnt == 1 ? hb_sock_write(&c->sock, v->iov_base, v->iov_len)
                         : hb_sock_writev(&c->sock, v, cnt);
    if (n == HB_AGAIN) c->wr_ready = 0;
    if (n <= 0) return n;
    HB__ADD(w->st.bytes_out, (uint64_t)n);
    c->wr_deadline = w->now + w->req_timeout_ns;
    return n;
}

/* Write queued output. 0 ok (maybe still pending), <0 error. */
static int flush(hb__conn *c)
{
    while (c->niov) {
        int cnt = c->niov < IOV_MAX ? c->niov : IOV_MAX;
        ssize_t n = hb__conn_write(c, &c->iov[c->iov_first], cnt);
        if (n == HB_AGAIN) return 0;
        if (n < 0) return (int)n;
        size_t left = (size_t)n;
        while (left && c->niov) {
            struct iovec *v = &c->iov[c->iov_first];
            if (left >= v->iov_len) {
                left -= v->iov_len;
                c->iov_first++;
                c->niov--;
            } else {
                v->iov_base = (char *)v->iov_base + left;
                v->iov_len -= left;
                left = 0;
            }
        }
        /* a short plain write means the send buffer is full: skip the EAGAIN call */
        if (c->niov && !c->sock.ssl) {
            c->wr_ready = 0;
            return 0;
        }
    }
    c->iov_first = 0;
    c->olen = 0;
    free(c->stats_body); /* written */
    c->stats_body = NULL;
    return 0;
}

/* Read more input. 1 got bytes, 0 would block, -1 error (closed). */
static int read_more(hb__conn *c)
{
    hb_server *srv = c->w->srv;
    if (c->rpos == c->rlen) {
        c->rpos = c->rlen = 0;
    } else if (c->rpos > 0) {
        memmove(c->rbuf, c->rbuf + c->rpos, c->rlen - c->rpos);
        c->rlen -= c->rpos;
        c->rpos = 0;
    }
    size_t space = srv->rbuf_size - c->rlen;
    if (space == 0) return 0; /* handle_head turns a full buffer into 431 */
    ssize_t n = hb_sock_read(&c->sock, c->rbuf + c->rlen, space);
    if (n > 0) {
        HB__ADD(c->w->st.bytes_in, (uint64_t)n);
        c->budget -= n;
        if (c->phase == HB__PH_HEAD && c->rlen == 0 && !c->req_deadline)
            c->req_deadline = c->w->now + c->w->req_timeout_ns;
        c->rlen += (size_t)n;
        /* a short plain read drained the socket; epoll (ET) reports new data -
         * unless the event that woke us already carried the FIN (data and FIN
         * arriving together make one edge): then read on until EOF */
        if ((size_t)n < space && !c->sock.ssl && !c->rdhup) c->rd_ready = 0;
        return 1;
    }
    if (n == 0) {
        c->peer_eof = 1;
        return 0;
    }
    if (n == HB_AGAIN) {
        c->rd_ready = 0;
        return 0;
    }
    return -1;
}

/* The queued response is out: do what the route asked for next. 1 when the
 * connection is closed or waiting, 0 to go on. */
static int after_action(hb__conn *c)
{
    int a = c->after;
    c->after = HB__AF_NONE;
    switch (a) {
    case HB__AF_CLOSE: /* FIN now, and drain so unread input never turns it into an RST */
        begin_linger(c);
        linger_read(c);
        return 1;
    case HB__AF_RESET:
        hb__conn_free(c, 1);
        return 1;
    case HB__AF_STALL:
        c->phase = HB__PH_WAIT;
        c->wait_kind = HB__W_STALL;
        if (hb__conn_timer(c, c->w->now + c->rq.p.stall.ms * HB__SRV_MS) < 0) hb__conn_free(c, 1);
        return 1;
    default:
        return 0;
    }
}

/* A request waits (delay, drip, stall) and epoll reported the peer's FIN or
 * reset: the client left unless it pipelined more requests before its FIN
 * (a half-closed client still reading). Read to find out; a client that left
 * is closed now and its timer freed, instead of at the timer. */
static void watch_peer(hb__conn *c)
{
    if (!c->rdhup || c->rpos < c->rlen) return;
    while (c->rd_ready && !c->peer_eof) {
        int r = read_more(c);
        if (r < 0) {
            conn_gone(c);
            return;
        }
        if (c->rpos < c->rlen) return; /* more requests: answered after this one */
        if (r == 0) break;
    }
    if (c->peer_eof) conn_gone(c);
}

static void handshake_step(hb__conn *c)
{
    hb__worker *w = c->w;
    char err[HB_ERR_LEN];
    int rc = hb_sock_handshake(&c->sock, err);
    if (rc == HB_AGAIN) {
        if (c->sock.want == HB_WANT_READ)
            c->rd_ready = 0;
        else
            c->wr_ready = 0;
        return;
    }
    if (rc < 0) {
        HB__ADD(w->st.hs_err, 1);
        hb__conn_free(c, 0);
        return;
    }
    HB__ADD(w->st.hs, 1);
    if (hb_sock_session_reused(&c->sock)) HB__ADD(w->st.hs_resumed, 1);
    c->phase = HB__PH_HEAD;
    c->req_deadline = 0;
    c->idle_since = w->now;
    c->rd_ready = c->wr_ready = 1;
    if (w->srv->mux && w->srv->mux->alpn(c)) return;
    hb__conn_run(c);
}

void hb__conn_set_proto(hb__conn *c, int proto)
{
    c->proto = (uint8_t)proto;
    if (proto == HB__PROTO_H1)
        HB__ADD(c->w->st.conns_h1, 1);
    else
        HB__ADD(c->w->st.conns_h2, 1);
}

/* The first bytes decide: the enabled protocol's (1 switched, 0 read more), or
 * HTTP/1.1 (-1). */
static int sniff(hb__conn *c)
{
    const hb__conn_proto *mp = c->w->srv->mux;
    int r = mp ? mp->sniff(c) : -1;
    if (r < 0) hb__conn_set_proto(c, HB__PROTO_H1);
    return r;
}

void hb__conn_run(hb__conn *c)
{
    for (;;) {
        if (c->phase == HB__PH_LINGER) {
            linger_read(c);
            return;
        }
        if (c->phase == HB__PH_HANDSHAKE) {
            handshake_step(c);
            return;
        }
        if (c->mp) {
            c->mp->run(c);
            return;
        }
        if (hb__has_output(c)) {
            if (!c->wr_ready) return;
            if (flush(c) < 0) {
                conn_gone(c);
                return;
            }
            if (hb__has_output(c)) return;
        }
        if (c->st_active) {
            hb__stream_refill(c);
            continue;
        }
        if (c->ev_active && hb__ev_step(c)) continue;
        if (c->after) {
            if (after_action(c)) return;
            continue;
        }
        if (c->phase == HB__PH_WAIT) {
            watch_peer(c);
            return;
        }
        if (c->close_after && c->phase == HB__PH_HEAD) {
            begin_linger(c);
            linger_read(c);
            return;
        }
        /* the first bytes decide the protocol (a switch, or HTTP/1.1) */
        if (!c->proto && c->rpos < c->rlen && sniff(c) > 0) return;
        if ((c->rpos < c->rlen && c->proto) ||
            (c->phase == HB__PH_BODY && !c->body_chunked && !c->body_left)) {
            int r = hb__process_input(c);
            if (r < 0 || r > 0) continue;
        }
        /* reading may move the read buffer, which queued echo data points into */
        if (hb__has_output(c)) continue;
        if (c->peer_eof) {
            /* a complete request before the FIN was answered above */
            conn_gone(c);
            return;
        }
        if (!c->rd_ready) return;
        if (c->budget <= 0) {
            hb__conn_defer(c);
            return;
        }
        int r = read_more(c);
        if (r < 0) {
            conn_gone(c);
            return;
        }
        if (r == 0 && !c->peer_eof) {
            if (c->rlen - c->rpos >= c->w->srv->rbuf_size) continue; /* full: 431 path */
            return;
        }
    }
}

static void on_io(hb_loop *l, hb_io *io, uint32_t e)
{
    (void)l;
    hb__conn *c = (hb__conn *)(void *)((char *)io - offsetof(hb__conn, io));
    if (c->sock.ssl) {
        c->rd_ready = c->wr_ready = 1; /* TLS may want either way */
        if (e & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) c->rdhup = 1;
    } else {
        if (e & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) c->rd_ready = 1;
        if (e & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) c->rdhup = 1;
        if (e & (EPOLLOUT | EPOLLHUP | EPOLLERR)) c->wr_ready = 1;
    }
    if (c->queued) return; /* its turn comes from the ready queue, budget and all */
    c->budget = HB__SRV_READ_BUDGET;
    hb__conn_run(c);
}

void hb__conn_defer(hb__conn *c)
{
    hb__worker *w = c->w;
    if (c->queued) return;
    c->queued = 1;
    c->rq_next = NULL;
    c->rq_prev = w->ready_tail;
    if (w->ready_tail)
        w->ready_tail->rq_next = c;
    else
        w->ready = c;
    w->ready_tail = c;
}

void hb__conn_run_ready(hb__worker *w)
{
    /* one pass: a connection that runs out again waits behind the others */
    hb__conn *last = w->ready_tail;
    while (w->ready) {
        hb__conn *c = w->ready;
        w->ready = c->rq_next;
        if (w->ready)
            w->ready->rq_prev = NULL;
        else
            w->ready_tail = NULL;
        c->queued = 0;
        c->budget = HB__SRV_READ_BUDGET;
        hb__conn_run(c);
        if (c == last) break;
    }
}

static void on_timer(hb_loop *l, hb_timer *t, uint64_t now)
{
    (void)l;
    hb__conn *c = (hb__conn *)(void *)((char *)t - offsetof(hb__conn, timer));
    c->w->now = now;
    if (!c->queued) c->budget = HB__SRV_READ_BUDGET;
    if (c->mp)
        c->mp->timer(c);
    else
        hb__req_timer(c);
    hb__conn_run(c);
}

void hb__conn_sweep(hb__conn *c)
{
    hb__worker *w = c->w;
    uint64_t now = w->now;
    if (c->phase == HB__PH_LINGER) {
        if (now >= c->linger_until) hb__conn_free(c, 0);
        return;
    }
    if (c->mp) {
        c->mp->sweep(c);
        return;
    }
    if (c->phase == HB__PH_WAIT && !hb__has_output(c)) return;
    if (hb__has_output(c) || c->st_active) {
        if (now < c->wr_deadline) return;
        if (c->ev_active) { /* an event stream cut: its client stopped reading */
            if (c->ev_kind == HB__EV_SSE)
                HB__ADD(w->st.sm.sse_write_timeouts, 1);
            else
                HB__ADD(w->st.sm.stream_write_timeouts, 1);
        }
        hb__conn_free(c, 1); /* reader stopped reading */
        return;
    }
    if (c->req_deadline) {
        if (now < c->req_deadline) return;
        if (c->phase == HB__PH_HANDSHAKE || c->responded) {
            hb__conn_free(c, 0);
            return;
        }
        /* a request in its body phase was counted under its route already */
        hb__respond_error_close(c, c->phase == HB__PH_BODY ? -1 : HB_ROUTE_TIMEOUT, 408,
                                "request timeout\n");
        c->phase = HB__PH_HEAD;
        c->req_deadline = 0;
        c->wr_deadline = now + w->req_timeout_ns;
        c->wr_ready = 1;
        hb__conn_run(c);
        return;
    }
    if (now - c->idle_since >= (uint64_t)w->srv->o.keepalive_timeout_ms * HB__SRV_MS) {
        HB__ADD(w->st.idle_timeouts, 1);
        hb__conn_free(c, 0);
    }
}
