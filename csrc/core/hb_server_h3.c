/* hb_server_h3.c - the embedded server's HTTP/3 side: each worker's UDP
 * socket (SO_REUSEPORT, bound at the TCP port's number) feeding datagrams to
 * its hb_h3_server endpoint with recvmmsg and writing what the endpoint
 * hands out with sendmsg; the endpoint's timers run on the worker loop's. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "hb_clock.h"
#include "hb_internal.h"

#define RX_BATCH 16
#define RX_BUF 2048 /* larger datagrams arrive truncated and are dropped */
#define TX_BATCH 64 /* datagrams written per turn before the loop looks at input again */

struct hb__h3_io {
    struct mmsghdr msg[RX_BATCH];
    struct iovec iov[RX_BATCH];
    struct sockaddr_storage from[RX_BATCH];
    uint8_t rx[RX_BATCH][RX_BUF];
    /* a datagram the socket could not take (EAGAIN): sent first on EPOLLOUT */
    size_t out_len;
    struct sockaddr_storage out_peer;
    socklen_t out_plen;
    uint8_t out[HB_H3_MAX_DATAGRAM];
};

#define WORKER_OF(ptr, member) ((hb__worker *)(void *)((char *)(ptr)-offsetof(hb__worker, member)))

int hb__h3_server_prepare(hb_server *srv, char *err)
{
    if (!srv->o.http3) return 0;
    int rc = hb__tls_server_pems(srv->tls, &srv->h3_cert, &srv->h3_cert_len, &srv->h3_key,
                                 &srv->h3_key_len, err);
    if (rc < 0) return rc;
    int n = snprintf(srv->alt_svc, sizeof srv->alt_svc, "Alt-Svc: h3=\":%d\"\r\n", srv->port);
    srv->alt_svc_len = n > 0 ? (size_t)n : 0;
    (void)snprintf(srv->alt_svc_h2, sizeof srv->alt_svc_h2, "h3=\":%d\"", srv->port);
    for (int i = 0; i < srv->nworkers; i++)
        srv->w[i].h2cfg.alt_svc = srv->alt_svc_h2;
    return 0;
}

/* 0 sent (or dropped for good), HB_AGAIN when the socket is full. */
static int send_one(hb__worker *w, const uint8_t *p, size_t n, const struct sockaddr_storage *to,
                    socklen_t tolen)
{
    for (;;) {
        ssize_t k =
            sendto(w->ufd, p, n, MSG_DONTWAIT | MSG_NOSIGNAL, (const struct sockaddr *)to, tolen);
        if (k >= 0) return 0;
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS) return HB_AGAIN;
        return 0; /* e.g. ECONNREFUSED from an earlier datagram: QUIC recovers or times out */
    }
}

static void arm(hb__worker *w)
{
    uint64_t d = hb_h3_server_deadline(w->h3);
    if (d == UINT64_MAX) {
        hb_timer_stop(&w->loop, &w->h3_timer);
        return;
    }
    if (!hb_timer_armed(&w->h3_timer) || w->h3_timer.deadline != d)
        (void)hb_timer_start(&w->loop, &w->h3_timer,
                             d); /* a full heap doubles; never fails twice */
}

/* Write what the endpoint has to send, up to a batch. */
static void flush(hb__worker *w)
{
    struct hb__h3_io *io = w->h3io;
    if (io->out_len) {
        if (send_one(w, io->out, io->out_len, &io->out_peer, io->out_plen) == HB_AGAIN) return;
        io->out_len = 0;
    }
    for (int i = 0; i < TX_BATCH; i++) {
        size_t n = hb_h3_server_send(w->h3, io->out, sizeof io->out, &io->out_peer, &io->out_plen);
        if (n == 0) break;
        HB__ADD(w->st.bytes_out, n);
        if (send_one(w, io->out, n, &io->out_peer, io->out_plen) == HB_AGAIN) {
            io->out_len = n;
            break;
        }
    }
    /* a waiting datagram waits for EPOLLOUT; a full batch gets the next turn the same way */
    (void)hb_loop_mod(&w->loop, &w->udp_io, EPOLLIN | (io->out_len ? EPOLLOUT : 0));
}

static void on_udp(hb_loop *l, hb_io *uio, uint32_t events)
{
    (void)l;
    hb__worker *w = WORKER_OF(uio, udp_io);
    struct hb__h3_io *io = w->h3io;
    if (events & EPOLLIN) {
        for (int round = 0; round < 4; round++) {
            for (int i = 0; i < RX_BATCH; i++) {
                io->iov[i].iov_base = io->rx[i];
                io->iov[i].iov_len = RX_BUF;
                memset(&io->msg[i].msg_hdr, 0, sizeof io->msg[i].msg_hdr);
                io->msg[i].msg_hdr.msg_name = &io->from[i];
                io->msg[i].msg_hdr.msg_namelen = sizeof io->from[i];
                io->msg[i].msg_hdr.msg_iov = &io->iov[i];
                io->msg[i].msg_hdr.msg_iovlen = 1;
            }
            int n = recvmmsg(w->ufd, io->msg, RX_BATCH, MSG_DONTWAIT, NULL);
            if (n <= 0) break; /* EAGAIN, or an error the next datagram will not have */
            w->now = hb_now_ns();
            for (int i = 0; i < n; i++) {
                size_t len = io->msg[i].msg_len;
                HB__ADD(w->st.bytes_in, len);
                if (io->msg[i].msg_hdr.msg_flags & MSG_TRUNC) {
                    HB__ADD(w->st.h3.packets_in, 1);
                    HB__ADD(w->st.h3.dropped, 1);
                    continue;
                }
                hb_h3_server_recv(w->h3, (const struct sockaddr *)&w->ulocal, w->ulocal_len,
                                  (const struct sockaddr *)&io->from[i],
                                  io->msg[i].msg_hdr.msg_namelen, io->rx[i], len);
            }
            flush(w);
            if (n < RX_BATCH) break;
        }
    }
    flush(w);
    arm(w);
}

static void on_h3_timer(hb_loop *l, hb_timer *t, uint64_t now)
{
    (void)l;
    hb__worker *w = WORKER_OF(t, h3_timer);
    w->now = now;
    hb_h3_server_timer(w->h3);
    flush(w);
    arm(w);
}

int hb__h3_worker_init(hb__worker *w, const struct sockaddr_storage *addr, socklen_t len, char *err)
{
    hb_server *srv = w->srv;
    w->ufd = -1;
    if (!srv->o.http3) return 0;
    w->h3io = calloc(1, sizeof *w->h3io);
    if (!w->h3io) return hb_fail(err, HB_E_NOMEM, "out of memory");
    hb_h3_server_config cfg;
    hb_h3_server_config_init(&cfg);
    cfg.cert_pem = srv->h3_cert;
    cfg.cert_len = srv->h3_cert_len;
    cfg.key_pem = srv->h3_key;
    cfg.key_len = srv->h3_key_len;
    cfg.stats = &w->st.h3;
    cfg.now = &w->now;
    cfg.date = w->date;
    cfg.stats_json = hb__stats_json;
    cfg.stats_arg = srv;
    cfg.max_streams = (uint32_t)srv->o.h2_max_concurrent_streams;
    cfg.idle_timeout_ms = (uint32_t)srv->o.keepalive_timeout_ms;
    cfg.max_header_list = (uint32_t)srv->o.max_head;
    cfg.max_connections = srv->o.max_connections > 0 ? (uint32_t)srv->o.max_connections : 0;
    int rc = hb_h3_server_new(&w->h3, &cfg, err);
    if (rc < 0) return rc;
    int fd = socket(addr->ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return hb_fail(err, -errno, "socket(UDP): %s", strerror(errno));
    w->ufd = fd;
    int one = 1;
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) != 0)
        return hb_fail(err, -errno, "setsockopt(SO_REUSEPORT): %s", strerror(errno));
    if (bind(fd, (const struct sockaddr *)addr, len) != 0)
        return hb_fail(err, -errno, "bind UDP %s:%d (for HTTP/3): %s", srv->host, srv->port,
                       strerror(errno));
    w->ulocal_len = sizeof w->ulocal;
    if (getsockname(fd, (struct sockaddr *)&w->ulocal, &w->ulocal_len) != 0)
        return hb_fail(err, -errno, "getsockname: %s", strerror(errno));
    hb_io_init(&w->udp_io, on_udp);
    hb_timer_init(&w->h3_timer, on_h3_timer);
    rc = hb_loop_add(&w->loop, &w->udp_io, fd, EPOLLIN);
    if (rc != 0) return hb_fail(err, rc, "epoll_ctl: %s", strerror(-rc));
    return 0;
}

void hb__h3_worker_stop(hb__worker *w)
{
    if (!w->h3) return;
    w->now = hb_now_ns();
    hb_h3_server_shutdown(w->h3);
    if (w->ufd >= 0) {
        w->h3io->out_len = 0; /* a datagram left waiting no longer matters */
        for (int i = 0; i < 1024; i++) {
            struct hb__h3_io *io = w->h3io;
            size_t n =
                hb_h3_server_send(w->h3, io->out, sizeof io->out, &io->out_peer, &io->out_plen);
            if (n == 0) break;
            HB__ADD(w->st.bytes_out, n);
            (void)send_one(w, io->out, n, &io->out_peer, io->out_plen); /* best effort */
        }
    }
    hb_timer_stop(&w->loop, &w->h3_timer);
    hb_h3_server_free(w->h3);
    w->h3 = NULL;
}

void hb__h3_worker_cleanup(hb__worker *w)
{
    if (w->h3) {
        hb_h3_server_free(w->h3);
        w->h3 = NULL;
    }
    if (w->ufd >= 0) close(w->ufd);
    w->ufd = -1;
    free(w->h3io);
    w->h3io = NULL;
}
