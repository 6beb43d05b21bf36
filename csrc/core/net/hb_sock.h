/* hb_sock.h - a non-blocking TCP socket with an ops vtable (plain / TLS).
 *
 * Contract (every I/O call):
 *   >= 0      bytes transferred; read() returning 0 means orderly EOF (for TLS:
 *             close_notify or a TCP FIN without it - unexpected EOF is treated
 *             as EOF, like most HTTP clients do)
 *   HB_AGAIN  would block; s->want says which readiness to wait for
 *             (HB_WANT_READ or HB_WANT_WRITE; a TLS read may need writability
 *             and vice versa, so always set epoll interest from s->want)
 *   < 0       -errno, HB_E_TLS, HB_E_TLS_VERIFY (handshake), HB_E_CLOSED
 *             (EPIPE/ECONNRESET are returned as -errno)
 * OpenSSL's SSL_ERROR_WANT_READ/WANT_WRITE become HB_AGAIN in exactly one
 * place (tls_result() in hb_sock.c). The struct is caller-owned (embed it in
 * your connection); nothing here allocates except the SSL object per TLS
 * connection and, when asked for, its read buffer (hb_sock_tls_read_buffer).
 * Not thread-safe per socket; different sockets are independent.
 */
#ifndef HB_SOCK_H
#define HB_SOCK_H

#include <stddef.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "base/hb_common.h"

struct ssl_st;       /* OpenSSL SSL */
struct hb_tls_ctx;   /* hb_tls.h */
struct hb_sock_rbuf; /* hb_sock.c: the TLS read buffer */

enum hb_want { HB_WANT_NONE = 0, HB_WANT_READ = 1, HB_WANT_WRITE = 2 };

/* Flags for hb_sock_connect / hb_sock_adopt. */
#define HB_SOCK_NAGLE 0x1 /* leave Nagle on (no TCP_NODELAY); default is TCP_NODELAY */

typedef struct hb_sock hb_sock;

typedef struct hb_sock_ops {
    ssize_t (*read)(hb_sock *s, void *buf, size_t len);
    ssize_t (*write)(hb_sock *s, const void *buf, size_t len);
    ssize_t (*writev)(hb_sock *s, const struct iovec *iov, int iovcnt);
    /* 0 when the TLS handshake is complete (plain: always 0). */
    int (*handshake)(hb_sock *s, char *err);
    /* Half-close our sending side (TLS: sends close_notify first). */
    int (*shutdown)(hb_sock *s);
} hb_sock_ops;

struct hb_sock {
    int fd; /* -1 when closed */
    const hb_sock_ops *ops;
    struct ssl_st *ssl;     /* NULL for plain sockets */
    struct hb_tls_ctx *tls; /* the context ssl came from (not owned) */
    int want;               /* HB_WANT_* after an HB_AGAIN */
    int handshake_done;
    int is_server;
    unsigned long tls_err; /* first OpenSSL error code of the last TLS failure */
    long verify_result;    /* X509_V_* of the last client handshake */
    /* TLS read buffer or NULL; owned by the SSL's read BIO, freed with it. */
    struct hb_sock_rbuf *rbuf;
};

extern const hb_sock_ops hb_sock_plain_ops;
extern const hb_sock_ops hb_sock_tls_ops;

/* Reset to a closed plain socket (fd -1). Safe on a zeroed struct. */
void hb_sock_init(hb_sock *s);

/* Create a non-blocking TCP socket for sa's family and start connecting.
 * Returns 0 when connected at once (loopback can do that), HB_AGAIN when in
 * progress (wait for writability, then hb_sock_connect_check), or -errno.
 * TCP_NODELAY is set unless flags has HB_SOCK_NAGLE. On error s->fd is -1. */
int hb_sock_connect(hb_sock *s, const struct sockaddr *sa, socklen_t salen, int flags, char *err);
/* After writability: 0 connected, HB_AGAIN still in progress, or -errno
 * (e.g. -ECONNREFUSED) from SO_ERROR. */
int hb_sock_connect_check(hb_sock *s);
/* Has an in-progress connect finished (either way)? A zero-timeout poll: 1
 * yes, 0 not yet (or poll failed: the caller waits for writability as usual).
 * On loopback the handshake completes inside connect() itself. */
int hb_sock_connect_done(const hb_sock *s);

/* Wrap an already connected fd (e.g. from accept4); makes it non-blocking and
 * sets TCP_NODELAY unless HB_SOCK_NAGLE. Returns 0 or -errno. */
int hb_sock_adopt(hb_sock *s, int fd, int flags);

/* Attach TLS (allocates the SSL object). host: the name to verify and send as
 * SNI (IP literals are verified as IP SANs and not sent as SNI); may be NULL
 * when the context is insecure. Returns 0 or HB_E_TLS/HB_E_NOMEM. After this,
 * call hb_sock_handshake until it returns 0. */
int hb_sock_tls_client(hb_sock *s, struct hb_tls_ctx *ctx, const char *host, char *err);
int hb_sock_tls_server(hb_sock *s, struct hb_tls_ctx *ctx, char *err);

static inline ssize_t hb_sock_read(hb_sock *s, void *buf, size_t len)
{
    return s->ops->read(s, buf, len);
}
static inline ssize_t hb_sock_write(hb_sock *s, const void *buf, size_t len)
{
    return s->ops->write(s, buf, len);
}
/* TLS: coalesces small iovecs into one record (stack buffer); partial writes
 * are possible - retry with the remaining bytes. */
static inline ssize_t hb_sock_writev(hb_sock *s, const struct iovec *iov, int iovcnt)
{
    return s->ops->writev(s, iov, iovcnt);
}
/* 0 done, HB_AGAIN (see s->want), HB_E_TLS_VERIFY (err has OpenSSL's verify
 * reason, e.g. "self-signed certificate"), HB_E_TLS, -errno, HB_E_CLOSED. */
static inline int hb_sock_handshake(hb_sock *s, char *err)
{
    return s->ops->handshake(s, err);
}
static inline int hb_sock_shutdown(hb_sock *s)
{
    return s->ops->shutdown(s);
}
/* Free the SSL (if any) and close the fd; the struct is reset (fd -1). */
void hb_sock_close(hb_sock *s);
/* Close with an RST instead of a FIN (SO_LINGER 0) - for fault injection and
 * for dropping a broken connection without TIME_WAIT. */
void hb_sock_abort(hb_sock *s);

/* Read TLS input through a buffer of cap bytes this socket owns: one recv()
 * of up to cap bytes fills it and OpenSSL takes one record per read from it,
 * so one syscall brings as many records as the kernel holds without
 * OpenSSL's read-ahead moving the unread rest before every record.
 * Writes still go straight to the socket. Call after hb_sock_tls_client/
 * server, before the handshake; no-op (0) on plain sockets. Returns 0,
 * HB_E_NOMEM, or HB_E_INVALID (cap 0 or > INT_MAX, already set, handshake
 * started). The buffer is freed with the SSL (hb_sock_close). Bytes in it
 * are invisible to poll/epoll: see hb_sock_has_buffered. */
int hb_sock_tls_read_buffer(hb_sock *s, size_t cap, char *err);

/* Decrypted application bytes OpenSSL holds for the next read, i.e. bytes
 * hb_sock_read returns without touching the socket. 0 for plain sockets
 * (their unread bytes sit in the kernel, where poll sees them). */
size_t hb_sock_pending(const hb_sock *s);
/* 1 when unread input sits above the kernel - decrypted bytes or a partial
 * record inside OpenSSL, or raw bytes in the read buffer of
 * hb_sock_tls_read_buffer - so a read may succeed although poll/epoll report
 * nothing; 0 otherwise and for plain sockets. */
int hb_sock_has_buffered(const hb_sock *s);

/* Negotiated ALPN protocol ("http/1.1") or NULL; *len set. TLS 1.x version
 * string ("TLSv1.3") or NULL for plain; 1 if the TLS session was resumed. */
const char *hb_sock_alpn(const hb_sock *s, size_t *len);
const char *hb_sock_tls_version(const hb_sock *s);
int hb_sock_session_reused(const hb_sock *s);
/* One line for reports: "version,cipher" plus ",alpn" when ALPN was
 * negotiated, e.g. "TLSv1.3,TLS_AES_256_GCM_SHA384,http/1.1" ("?" for an
 * unknown version). Written into buf (truncated to n - 1 characters,
 * NUL-terminated when n > 0); "" for plain sockets. Returns buf. */
char *hb_sock_describe(const hb_sock *s, char *buf, size_t n);

/* Fill err with the detail of a code returned by this socket (OpenSSL reason
 * for HB_E_TLS, verify reason for HB_E_TLS_VERIFY, strerror otherwise).
 * Returns rc. */
int hb_sock_errstr(const hb_sock *s, int rc, char *err);

/* Resolve host ("example.com", "127.0.0.1", "::1" or "[::1]") and port into
 * *out. Numeric addresses and "localhost" never hit DNS ("localhost" ->
 * 127.0.0.1). Other names use getaddrinfo (blocking; call it off the hot
 * path). Returns 0, HB_E_INVALID (bad host syntax or port) or HB_E_CONNECT
 * (resolution failed), with detail in err. */
int hb_resolve_host(const char *host, int port, struct sockaddr_storage *out, socklen_t *outlen,
                    char *err);
/* "127.0.0.1:8080" / "[::1]:8080" into buf; returns buf. */
char *hb_sockaddr_str(const struct sockaddr *sa, char *buf, size_t len);

#endif
