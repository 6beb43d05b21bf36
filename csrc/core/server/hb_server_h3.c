/* hb_server_h3.c - the embedded server's HTTP/3 side: each worker's UDP
 * socket (SO_REUSEPORT, bound at the TCP port's number) feeding datagrams to
 * its hb_h3_server endpoint with recvmmsg and writing what the endpoint
 * hands out with sendmsg; the endpoint's timers run on the worker loop's. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/udp.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/hb_clock.h"
#include "server/hb_server_int.h"

#define RX_BATCH 16
#define RX_BUF 2048 /* larger datagrams arrive truncated and are dropped */
#define TX_BATCH 64 /* datagrams written per turn before the loop looks at input again */
#define GSO_MAX 32  /* datagrams per sendmsg with UDP_SEGMENT (the kernel takes up to 64) */

struct hb__h3_io {
    struct mmsghdr msg[RX_BATCH];
    struct iovec iov[RX_BATCH];
    struct sockaddr_storage from[RX_BATCH];
    uint8_t rx[RX_BATCH][RX_BUF];
    /* datagrams to one peer, all seg bytes but the last, sent as one sendmsg
     * with UDP_SEGMENT (GSO); kept when the socket is full (EAGAIN) and sent
     * first on EPOLLOUT */
    size_t out_len, seg;
    int nseg;
    int gso; /* 1 until the kernel refuses UDP_SEGMENT */
    struct sockaddr_storage out_peer;
    socklen_t out_plen;
    uint8_t out[GSO_MAX * HB_H3_MAX_DATAGRAM];
    uint8_t one[HB_H3_MAX_DATAGRAM]; /* a datagram while GSO is off */
};

#define WORKER_OF(ptr, member) ((hb__worker *)(void *)((char *)(ptr)-offsetof(hb__worker, member)))

int hb__h3_server_prepare(hb_server *srv, char *err)
{
    if (!srv->o.http3) return 0;
    int rc = hb_tls_server_pems(srv->tls, &srv->h3_cert, &srv->h3_cert_len, &srv->h3_key,
                                &srv->h3_key_len, err);
    if (rc < 0) return rc;
    if (srv->o.session_resumption) {
        for (size_t got = 0; got < sizeof srv->h3_ticket_key;) {
            ssize_t k = getrandom(srv->h3_ticket_key + got, sizeof srv->h3_ticket_key - got, 0);
            if (k < 0 && errno == EINTR) continue;
            if (k < 0) return hb_fail(err, -errno, "getrandom: %s", strerror(errno));
            got += (size_t)k;
        }
    }
    if (!srv->o.alt_svc) return 0; /* HTTP/3 served, not advertised: clients stay on TCP */
    int n = snprintf(srv->alt_svc, sizeof srv->alt_svc, "Alt-Svc: h3=\":%d\"\r\n", srv->port);
    srv->alt_svc_len = n > 0 ? (size_t)n : 0;
    (void)snprintf(srv->alt_svc_value, sizeof srv->alt_svc_value, "h3=\":%d\"", srv->port);
    return 0;
}

/* Send the batch: 0 sent (or dropped for good), HB_AGAIN when the socket is full. */
static int send_batch(hb__worker *w)
{
    struct hb__h3_io *io = w->h3io;
    char cbuf[CMSG_SPACE(sizeof(uint16_t))];
    struct iovec v = {io->out, io->out_len};
    struct msghdr m = {
        .msg_name = &io->out_peer, .msg_namelen = io->out_plen, .msg_iov = &v, .msg_iovlen = 1};
    if (io->nseg > 1) { /* one sendmsg, the kernel cuts it into seg-byte datagrams */
        memset(cbuf, 0, sizeof cbuf);
        m.msg_control = cbuf;
        m.msg_controllen = sizeof cbuf;
        struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
        cm->cmsg_level = SOL_UDP;
        cm->cmsg_type = UDP_SEGMENT;
        cm->cmsg_len = CMSG_LEN(sizeof(uint16_t));
        uint16_t seg = (uint16_t)io->seg;
        memcpy(CMSG_DATA(cm), &seg, sizeof seg);
    }
    for (;;) {
        ssize_t k = sendmsg(w->ufd, &m, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (k >= 0) break;
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS) return HB_AGAIN;
        if (io->nseg > 1 && (errno == EIO || errno == EINVAL || errno == ENOPROTOOPT)) {
            io->gso = 0; /* no GSO here: the same datagrams one by one */
            for (size_t off = 0; off < io->out_len; off += io->seg) {
                size_t n = io->out_len - off < io->seg ? io->out_len - off : io->seg;
                while (sendto(w->ufd, io->out + off, n, MSG_DONTWAIT | MSG_NOSIGNAL,
                              (const struct sockaddr *)&io->out_peer, io->out_plen) < 0 &&
                       errno == EINTR) {
                }
            }
            break;
        }
        break; /* e.g. ECONNREFUSED from an earlier datagram: QUIC recovers or times out */
    }
    io->out_len = 0;
    io->nseg = 0;
    return 0;
}

static void arm(hb__worker *w)
{
    uint64_t d = hb_h3_server_deadline(w->h3);
    if (d == UINT64_MAX) {
        hb_timer_stop(&w->loop, &w->h3_timer);
        return;
    }
    /* fails only when the heap cannot grow (out of memory): the next datagram re-arms */
    if (!hb_timer_armed(&w->h3_timer) || w->h3_timer.deadline != d)
        (void)hb_timer_start(&w->loop, &w->h3_timer, d);
}

/* Write what the endpoint has to send, up to a batch. Consecutive datagrams to
 * one peer go out in one sendmsg (GSO) while they have the first one's size (the
 * last may be shorter): a 7 MB download is ~5,000 datagrams. */
static void flush(hb__worker *w)
{
    struct hb__h3_io *io = w->h3io;
    int more = 0;
    if (io->out_len && send_batch(w) == HB_AGAIN) goto wait;
    for (int i = 0;; i++) {
        if (i == TX_BATCH) {
            more = 1; /* the next turn, after the loop has looked at input */
            break;
        }
        struct sockaddr_storage peer;
        socklen_t plen = 0;
        int room = io->gso && io->nseg < GSO_MAX;
        uint8_t *dst = room ? io->out + io->out_len : io->one;
        size_t n = hb_h3_server_send(w->h3, dst, HB_H3_MAX_DATAGRAM, &peer, &plen);
        if (n == 0) break;
        HB__ADD(w->st.bytes_out, n);
        int joins = room && io->nseg && n <= io->seg && plen == io->out_plen &&
                    memcmp(&peer, &io->out_peer, plen) == 0;
        if (!joins && io->nseg) { /* flush the batch; this datagram starts the next */
            uint8_t tmp[HB_H3_MAX_DATAGRAM];
            memcpy(tmp, dst, n);
            if (send_batch(w) == HB_AGAIN) {
                /* the batch stays; the new datagram is lost like a dropped one (QUIC
                 * retransmits), which only happens on a full socket buffer */
                goto wait;
            }
            memcpy(io->out, tmp, n);
        } else if (!room) {
            memcpy(io->out, io->one, n);
        }
        if (!io->nseg) {
            memcpy(&io->out_peer, &peer, plen);
            io->out_plen = plen;
            io->seg = n;
            io->out_len = 0;
        }
        io->out_len += n;
        io->nseg++;
        if (n < io->seg || io->nseg == GSO_MAX || !io->gso) { /* a short one ends a batch */
            if (send_batch(w) == HB_AGAIN) goto wait;
        }
    }
    if (io->nseg && send_batch(w) == HB_AGAIN) goto wait;
wait:
    /* a waiting batch, or more to write, waits for EPOLLOUT */
    (void)hb_loop_mod(&w->loop, &w->udp_io, EPOLLIN | (io->out_len || more ? EPOLLOUT : 0));
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

/* SO_REUSEPORT would silently share a UDP port someone else bound with SO_REUSEPORT
 * too (and split the datagrams with them); a plain bind first says EADDRINUSE. */
static int udp_port_free(hb_server *srv, const struct sockaddr_storage *addr, socklen_t len,
                         char *err)
{
    int fd = socket(addr->ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return hb_fail(err, -errno, "socket(UDP): %s", strerror(errno));
    int rc = 0;
    if (bind(fd, (const struct sockaddr *)addr, len) != 0)
        rc = hb_fail(err, -errno, "bind UDP %s:%d (for HTTP/3): %s", srv->host, srv->port,
                     strerror(errno));
    close(fd);
    return rc;
}

int hb__h3_worker_init(hb__worker *w, const struct sockaddr_storage *addr, socklen_t len, char *err)
{
    hb_server *srv = w->srv;
    w->ufd = -1;
    if (!srv->o.http3) return 0;
    w->h3io = calloc(1, sizeof *w->h3io);
    if (!w->h3io) return hb_fail(err, HB_E_NOMEM, "out of memory");
    w->h3io->gso = 1;
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
    cfg.max_streams = srv->max_streams;
    cfg.idle_timeout_ms = (uint32_t)srv->o.keepalive_timeout_ms;
    cfg.request_timeout_ms = (uint32_t)srv->o.request_timeout_ms;
    cfg.max_header_list = (uint32_t)srv->o.max_head;
    cfg.max_connections = srv->o.max_connections > 0 ? (uint32_t)srv->o.max_connections : 0;
    cfg.ticket_key = srv->o.session_resumption ? srv->h3_ticket_key : NULL;
    cfg.early_data = srv->o.h3_early_data;
    int rc = hb_h3_server_new(&w->h3, &cfg, err);
    if (rc < 0) return rc;
    if (w->idx == 0 && (rc = udp_port_free(srv, addr, len, err)) < 0) return rc;
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
        struct hb__h3_io *io = w->h3io;
        io->out_len = 0; /* a batch left waiting no longer matters */
        io->nseg = 0;
        for (int i = 0; i < 1024; i++) { /* the CONNECTION_CLOSEs, best effort */
            size_t n =
                hb_h3_server_send(w->h3, io->out, HB_H3_MAX_DATAGRAM, &io->out_peer, &io->out_plen);
            if (n == 0) break;
            HB__ADD(w->st.bytes_out, n);
            io->out_len = n;
            io->nseg = 1;
            io->seg = n;
            (void)send_batch(w);
            io->out_len = 0;
            io->nseg = 0;
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
