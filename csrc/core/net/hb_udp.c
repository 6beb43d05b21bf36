/* hb_udp.c - batched datagram I/O for QUIC (see hb_udp.h). */
#include "net/hb_udp.h"

#include <errno.h>
#include <string.h>
#include <netinet/in.h>
#include <netinet/udp.h>

#include "base/hb_common.h"

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif

void hb_udp_rx_init(hb_udp_rx *rx, uint8_t *buf, size_t dgram, int want_from)
{
    memset(rx, 0, sizeof *rx);
    rx->buf = buf;
    rx->dgram = dgram;
    rx->want_from = want_from;
    for (int i = 0; i < HB_UDP_RX_BATCH; i++) {
        rx->iov[i].iov_base = buf + (size_t)i * dgram;
        rx->iov[i].iov_len = dgram;
        rx->msg[i].msg_hdr.msg_iov = &rx->iov[i];
        rx->msg[i].msg_hdr.msg_iovlen = 1;
        if (want_from) rx->msg[i].msg_hdr.msg_name = &rx->from[i];
    }
}

int hb_udp_recv(int fd, hb_udp_rx *rx)
{
    if (rx->want_from) /* recvmmsg wrote the previous sources' lengths here */
        for (int i = 0; i < HB_UDP_RX_BATCH; i++)
            rx->msg[i].msg_hdr.msg_namelen = sizeof rx->from[i];
    for (;;) {
        int n = recvmmsg(fd, rx->msg, HB_UDP_RX_BATCH, MSG_DONTWAIT, NULL);
        if (n >= 0) return n;
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
        return -errno;
    }
}

static int again(int e)
{
    return e == EAGAIN || e == EWOULDBLOCK || e == ENOBUFS;
}

/* One datagram per sendto(). */
static int send_each(int fd, const struct sockaddr *to, socklen_t tolen, const uint8_t *buf,
                     size_t len, size_t seg, size_t *sent)
{
    while (*sent < len) {
        size_t n = len - *sent < seg ? len - *sent : seg;
        ssize_t w = sendto(fd, buf + *sent, n, MSG_DONTWAIT | MSG_NOSIGNAL, to, to ? tolen : 0);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) return again(errno) ? HB_AGAIN : -errno;
        *sent += n;
    }
    return 0;
}

int hb_udp_send(int fd, const struct sockaddr *to, socklen_t tolen, const uint8_t *buf, size_t len,
                size_t seg, int *gso, size_t *sent)
{
    *sent = 0;
    if (len == 0) return 0;
    if (!*gso || len <= seg) return send_each(fd, to, tolen, buf, len, seg, sent);
    struct iovec iov = {(void *)(uintptr_t)buf, len};
    union {
        char buf[CMSG_SPACE(sizeof(uint16_t))];
        struct cmsghdr align;
    } cm;
    memset(&cm, 0, sizeof cm);
    struct msghdr mh = {0};
    mh.msg_name = (void *)(uintptr_t)to;
    mh.msg_namelen = to ? tolen : 0;
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    mh.msg_control = cm.buf;
    mh.msg_controllen = sizeof cm.buf;
    struct cmsghdr *ch = CMSG_FIRSTHDR(&mh);
    ch->cmsg_level = SOL_UDP;
    ch->cmsg_type = UDP_SEGMENT;
    ch->cmsg_len = CMSG_LEN(sizeof(uint16_t));
    uint16_t s16 = (uint16_t)seg;
    memcpy(CMSG_DATA(ch), &s16, sizeof s16);
    for (;;) {
        ssize_t w = sendmsg(fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (w >= 0) {
            *sent = len;
            return 0;
        }
        if (errno == EINTR) continue;
        if (again(errno)) return HB_AGAIN;
        if (errno == EIO || errno == EINVAL || errno == EOPNOTSUPP || errno == ENOPROTOOPT) {
            *gso = 0; /* no GSO here: the same datagrams one by one, from now on */
            return send_each(fd, to, tolen, buf, len, seg, sent);
        }
        return -errno;
    }
}
