/* floor_h2.h: what the two HTTP/2 floor programs (floor_h2server.c,
 * floor_h2loadgen.c) share: frame headers written and read by their 9 bytes,
 * an output buffer flushed with one send per call under level-triggered
 * epoll, and a fatal-error exit. Header-only, no allocation, no HPACK.
 *
 * Before including it define FLOOR_NAME (the program's name, the prefix of
 * its error messages) and H2_PRE (how many payload bytes of each frame are
 * kept for the program to look at). */
#ifndef FLOOR_H2_H
#define FLOOR_H2_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>

__attribute__((noreturn)) static inline void die(const char *what)
{
    fprintf(stderr, FLOOR_NAME ": %s%s%s\n", what, errno ? ": " : "", errno ? strerror(errno) : "");
    exit(1);
}

static inline uint32_t be32(const uint8_t *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

/* The payload length and stream id of a frame header. */
static inline uint32_t h2_len(const uint8_t *fh)
{
    return ((uint32_t)fh[0] << 16) | ((uint32_t)fh[1] << 8) | fh[2];
}

static inline uint32_t h2_id(const uint8_t *fh)
{
    return be32(fh + 5) & 0x7fffffffu;
}

/* Patch the stream id of a prebuilt frame. */
static inline void h2_set_id(uint8_t *f, uint32_t id)
{
    f[5] = (uint8_t)(id >> 24) & 0x7f;
    f[6] = (uint8_t)(id >> 16);
    f[7] = (uint8_t)(id >> 8);
    f[8] = (uint8_t)id;
}

static inline void h2_put_hdr(uint8_t *f, uint32_t len, uint8_t type, uint8_t flags, uint32_t id)
{
    f[0] = (uint8_t)(len >> 16);
    f[1] = (uint8_t)(len >> 8);
    f[2] = (uint8_t)len;
    f[3] = type;
    f[4] = flags;
    h2_set_id(f, id);
}

/* A connection's input, frame by frame: the header being read, then how much
 * payload is still to come, of which the first H2_PRE bytes are kept. */
typedef struct h2_in {
    uint8_t fh[9];
    uint32_t fhlen, left;
    uint8_t pre[H2_PRE];
    uint32_t prelen;
} h2_in;

/* Take bytes of p[0..n) up to the end of the current frame; returns how many
 * were taken, *whole = 1 when that completed a frame. */
static inline size_t h2_in_take(h2_in *in, const uint8_t *p, size_t n, int *whole)
{
    size_t used = 0;
    *whole = 0;
    if (in->fhlen < 9) {
        used = 9 - in->fhlen < n ? 9 - in->fhlen : n;
        memcpy(in->fh + in->fhlen, p, used);
        in->fhlen += (uint32_t)used;
        if (in->fhlen < 9) return used;
        in->left = h2_len(in->fh);
        in->prelen = 0;
    }
    size_t k = in->left < n - used ? in->left : n - used;
    if (in->prelen < sizeof in->pre) {
        size_t q = sizeof in->pre - in->prelen;
        if (q > k) q = k;
        memcpy(in->pre + in->prelen, p + used, q);
        in->prelen += (uint32_t)q;
    }
    in->left -= (uint32_t)k;
    if (!in->left) {
        in->fhlen = 0;
        *whole = 1;
    }
    return used + k;
}

/* Read p[0..n) frame by frame: on_frame(ctx) for each whole frame, its header
 * in in->fh and its first payload bytes in in->pre (in->prelen of them). */
static inline void h2_in_feed(h2_in *in, const uint8_t *p, size_t n, void (*on_frame)(void *),
                              void *ctx)
{
    while (n) {
        int whole;
        size_t k = h2_in_take(in, p, n, &whole);
        p += k;
        n -= k;
        if (whole) on_frame(ctx);
    }
}

/* A connection's output: bytes to send (at most cap), and whether epoll
 * watches for EPOLLOUT. */
typedef struct h2_out {
    uint8_t *buf;
    size_t len, cap;
    int want_out;
} h2_out;

static inline void h2_out_put(h2_out *o, const void *p, size_t n)
{
    if (o->len + n > o->cap) die("output buffer overflow (the peer does not read)");
    memcpy(o->buf + o->len, p, n);
    o->len += n;
}

/* Acknowledge the peer's SETTINGS frame. */
static inline void h2_ack_settings(h2_out *o)
{
    uint8_t f[9];
    h2_put_hdr(f, 0, 4, 0x1, 0);
    h2_out_put(o, f, 9);
}

/* Answer the PING frame just read (in) with its 8 bytes. */
static inline void h2_ack_ping(h2_out *o, const h2_in *in)
{
    if (h2_len(in->fh) != 8 || in->prelen < 8) die("bad PING");
    uint8_t f[17];
    h2_put_hdr(f, 8, 6, 0x1, 0);
    memcpy(f + 9, in->pre, 8);
    h2_out_put(o, f, 17);
}

/* Send until the socket would block; epoll (event data ptr) then watches for
 * EPOLLOUT only while bytes remain. 0, or -1 when send failed or sent nothing
 * (the peer went away; nothing else is done). */
static inline int h2_out_flush(int ep, int fd, h2_out *o, void *ptr)
{
    size_t off = 0;
    while (off < o->len) {
        ssize_t w = send(fd, o->buf + off, o->len - off, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        if (w <= 0) return -1;
        off += (size_t)w;
    }
    memmove(o->buf, o->buf + off, o->len - off);
    o->len -= off;
    int want = o->len > 0;
    if (want != o->want_out) {
        struct epoll_event ev = {.events = EPOLLIN | (want ? EPOLLOUT : 0), .data.ptr = ptr};
        if (epoll_ctl(ep, EPOLL_CTL_MOD, fd, &ev) != 0) die("epoll_ctl");
        o->want_out = want;
    }
    return 0;
}

#endif
