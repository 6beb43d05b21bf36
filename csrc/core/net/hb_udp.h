/* hb_udp.h - datagram I/O for QUIC, one unit for both ends of HTTP/3 (the
 * native client and the embedded server): a batch of datagrams in per
 * recvmmsg(), a batch out per sendmsg() with UDP_SEGMENT (GSO: the kernel
 * cuts one buffer into equal datagrams), one send per datagram where the
 * kernel refuses GSO. No allocation: the caller owns every buffer. */
#ifndef HB_UDP_H
#define HB_UDP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define HB_UDP_RX_BATCH 16 /* datagrams per recvmmsg() */

typedef struct hb_udp_rx {
    struct mmsghdr msg[HB_UDP_RX_BATCH];
    struct iovec iov[HB_UDP_RX_BATCH];
    struct sockaddr_storage from[HB_UDP_RX_BATCH]; /* with want_from */
    uint8_t *buf; /* HB_UDP_RX_BATCH datagrams of dgram bytes each (the caller's) */
    size_t dgram;
    int want_from;
} hb_udp_rx;

/* buf holds HB_UDP_RX_BATCH * dgram bytes; want_from: record each datagram's
 * source (an unconnected socket). */
void hb_udp_rx_init(hb_udp_rx *rx, uint8_t *buf, size_t dgram, int want_from);

/* One recvmmsg(): the datagrams received (>= 1), 0 when none waits, -errno on
 * an error (e.g. -ECONNREFUSED: an ICMP port unreachable on a connected socket). */
int hb_udp_recv(int fd, hb_udp_rx *rx);

/* Datagram i of the last hb_udp_recv: its bytes and length, or NULL when it was
 * longer than dgram (truncated: to be dropped, its length still in *len). */
static inline const uint8_t *hb_udp_rx_data(const hb_udp_rx *rx, int i, size_t *len)
{
    *len = rx->msg[i].msg_len;
    return rx->msg[i].msg_hdr.msg_flags & MSG_TRUNC ? NULL : rx->buf + (size_t)i * rx->dgram;
}

/* Send len bytes at buf as datagrams of seg bytes (the last may be shorter) to
 * `to` (NULL on a connected socket): one sendmsg() with UDP_SEGMENT while *gso,
 * else one send per datagram; *gso is cleared for good when the kernel refuses
 * UDP_SEGMENT. *sent: the bytes that went (whole datagrams). Returns 0 when all
 * went, HB_AGAIN when the socket buffer is full (the rest to be sent on
 * EPOLLOUT), -errno on another error. */
int hb_udp_send(int fd, const struct sockaddr *to, socklen_t tolen, const uint8_t *buf, size_t len,
                size_t seg, int *gso, size_t *sent);

#endif
