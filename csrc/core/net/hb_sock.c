/* hb_sock.c - plain and TLS socket ops, connect, resolve. */
#include "net/hb_sock.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "net/hb_net_int.h"
#include "net/hb_tls.h"

/* Largest TLS record payload: small iovecs are coalesced up to this. */
#define TLS_COALESCE 16384

void hb_sock_init(hb_sock *s)
{
    memset(s, 0, sizeof *s);
    s->fd = -1;
    s->ops = &hb_sock_plain_ops;
}

/* ---- plain ---- */

static ssize_t plain_read(hb_sock *s, void *buf, size_t len)
{
    for (;;) {
        ssize_t r = recv(s->fd, buf, len, 0);
        if (r >= 0) return r;
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            s->want = HB_WANT_READ;
            return HB_AGAIN;
        }
        return -errno;
    }
}

static ssize_t plain_write(hb_sock *s, const void *buf, size_t len)
{
    for (;;) {
        /* MSG_NOSIGNAL: a peer's close is -EPIPE, never SIGPIPE. */
        ssize_t r = send(s->fd, buf, len, MSG_NOSIGNAL);
        if (r >= 0) return r;
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            s->want = HB_WANT_WRITE;
            return HB_AGAIN;
        }
        return -errno;
    }
}

static ssize_t plain_writev(hb_sock *s, const struct iovec *iov, int iovcnt)
{
    struct msghdr m;
    memset(&m, 0, sizeof m);
    m.msg_iov = (struct iovec *)iov;
    m.msg_iovlen = (size_t)iovcnt;
    for (;;) {
        ssize_t r = sendmsg(s->fd, &m, MSG_NOSIGNAL);
        if (r >= 0) return r;
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            s->want = HB_WANT_WRITE;
            return HB_AGAIN;
        }
        return -errno;
    }
}

static int plain_handshake(hb_sock *s, char *err)
{
    (void)err;
    s->handshake_done = 1;
    return 0;
}

static int plain_shutdown(hb_sock *s)
{
    if (shutdown(s->fd, SHUT_WR) != 0 && errno != ENOTCONN) return -errno;
    return 0;
}

const hb_sock_ops hb_sock_plain_ops = {plain_read, plain_write, plain_writev, plain_handshake,
                                       plain_shutdown};

/* ---- TLS ---- */

#define TLS_EOF 1 /* internal: tls_result saw an orderly or unclean EOF */

/* THE one place where SSL_ERROR_WANT_* becomes HB_AGAIN. Returns HB_AGAIN,
 * TLS_EOF, -errno or HB_E_TLS / HB_E_TLS_VERIFY (s->tls_err, s->verify_result
 * keep the detail; the thread's error queue is left empty). */
static int tls_result(hb_sock *s, int r, int saved_errno)
{
    int e = SSL_get_error(s->ssl, r);
    switch (e) {
    case SSL_ERROR_WANT_READ:
        s->want = HB_WANT_READ;
        return HB_AGAIN;
    case SSL_ERROR_WANT_WRITE:
        s->want = HB_WANT_WRITE;
        return HB_AGAIN;
    case SSL_ERROR_ZERO_RETURN:
        return TLS_EOF;
    case SSL_ERROR_SYSCALL:
        s->tls_err = ERR_get_error();
        ERR_clear_error();
        if (s->tls_err) return HB_E_TLS;
        if (saved_errno == EAGAIN || saved_errno == EWOULDBLOCK) {
            s->want = HB_WANT_READ;
            return HB_AGAIN;
        }
        return saved_errno ? -saved_errno : TLS_EOF;
    default:
        s->tls_err = ERR_get_error();
        ERR_clear_error();
        if (!s->is_server && !s->handshake_done) {
            long v = SSL_get_verify_result(s->ssl);
            s->verify_result = v;
            if (v != X509_V_OK) return HB_E_TLS_VERIFY;
        }
        return HB_E_TLS;
    }
}

static ssize_t tls_read(hb_sock *s, void *buf, size_t len)
{
    errno = 0;
    int r = SSL_read(s->ssl, buf, len > INT_MAX ? INT_MAX : (int)len);
    if (r > 0) return r;
    int rc = tls_result(s, r, errno);
    return rc == TLS_EOF ? 0 : rc;
}

static ssize_t tls_write(hb_sock *s, const void *buf, size_t len)
{
    if (len == 0) return 0;
    errno = 0;
    int r = SSL_write(s->ssl, buf, len > INT_MAX ? INT_MAX : (int)len);
    if (r > 0) return r;
    int rc = tls_result(s, r, errno);
    return rc == TLS_EOF ? -EPIPE : rc;
}

/* OpenSSL has no writev: coalesce small pieces into one record so a
 * header + small body is one record and one syscall. A retry after HB_AGAIN
 * with the same (or an extended) iovec rebuilds the same leading bytes, which
 * is what SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER requires. */
static ssize_t tls_writev(hb_sock *s, const struct iovec *iov, int iovcnt)
{
    int i = 0;
    while (i < iovcnt && iov[i].iov_len == 0)
        i++;
    if (i == iovcnt) return 0;
    if (iov[i].iov_len >= TLS_COALESCE || i == iovcnt - 1)
        return tls_write(s, iov[i].iov_base, iov[i].iov_len);
    char buf[TLS_COALESCE];
    size_t n = 0;
    for (; i < iovcnt && n < sizeof buf; i++) {
        size_t take = iov[i].iov_len;
        if (take > sizeof buf - n) take = sizeof buf - n;
        memcpy(buf + n, iov[i].iov_base, take);
        n += take;
    }
    return tls_write(s, buf, n);
}

static int tls_handshake(hb_sock *s, char *err)
{
    if (s->handshake_done) return 0;
    errno = 0;
    int r = SSL_do_handshake(s->ssl);
    if (r == 1) {
        s->handshake_done = 1;
        return 0;
    }
    int rc = tls_result(s, r, errno);
    if (rc == HB_AGAIN) return rc;
    if (rc == TLS_EOF) return hb_fail(err, HB_E_CLOSED, "peer closed during TLS handshake");
    return hb_sock_errstr(s, rc, err);
}

static int tls_shutdown(hb_sock *s)
{
    if (s->handshake_done) {
        errno = 0;
        int r = SSL_shutdown(s->ssl); /* sends close_notify; we never wait for the peer's */
        if (r < 0) {
            int rc = tls_result(s, r, errno);
            if (rc == HB_AGAIN) return rc;
        }
    }
    if (shutdown(s->fd, SHUT_WR) != 0 && errno != ENOTCONN) return -errno;
    return 0;
}

const hb_sock_ops hb_sock_tls_ops = {tls_read, tls_write, tls_writev, tls_handshake, tls_shutdown};

static int is_ip_literal(const char *host)
{
    unsigned char tmp[16];
    return inet_pton(AF_INET, host, tmp) == 1 || inet_pton(AF_INET6, host, tmp) == 1;
}

static int tls_attach(hb_sock *s, hb_tls_ctx *ctx, char *err)
{
    if (s->fd < 0) return hb_fail(err, HB_E_INVALID, "TLS on a closed socket");
    if (s->ssl) return hb_fail(err, HB_E_INVALID, "TLS already attached");
    SSL *ssl = SSL_new(hb__tls_ctx_ssl(ctx));
    if (!ssl) return hb__tls_fail(err, HB_E_NOMEM, "SSL_new");
    if (SSL_set_fd(ssl, s->fd) != 1) {
        SSL_free(ssl);
        return hb__tls_fail(err, HB_E_TLS, "SSL_set_fd");
    }
    s->ssl = ssl;
    s->tls = ctx;
    s->ops = &hb_sock_tls_ops;
    s->handshake_done = 0;
    s->tls_err = 0;
    s->verify_result = X509_V_OK;
    return 0;
}

int hb_sock_tls_client(hb_sock *s, hb_tls_ctx *ctx, const char *host, char *err)
{
    if (hb_tls_ctx_is_server(ctx)) return hb_fail(err, HB_E_INVALID, "server TLS context");
    int rc = tls_attach(s, ctx, err);
    if (rc < 0) return rc;
    s->is_server = 0;
    SSL_set_connect_state(s->ssl);
    char h[256];
    if (host && host[0]) {
        /* accept "[::1]" as well as "::1" */
        size_t n = strlen(host);
        if (host[0] == '[' && n > 2 && host[n - 1] == ']') {
            host++;
            n -= 2;
        }
        if (n >= sizeof h) {
            rc = hb_fail(err, HB_E_INVALID, "host name too long");
            goto fail;
        }
        memcpy(h, host, n);
        h[n] = 0;
        int ip = is_ip_literal(h);
        if (!ip && SSL_set_tlsext_host_name(s->ssl, h) != 1) {
            rc = hb__tls_fail(err, HB_E_TLS, "setting SNI");
            goto fail;
        }
        if (!hb_tls_ctx_insecure(ctx)) {
            X509_VERIFY_PARAM *p = SSL_get0_param(s->ssl);
            int ok = ip ? X509_VERIFY_PARAM_set1_ip_asc(p, h) : SSL_set1_host(s->ssl, h);
            if (ok != 1) {
                rc = hb__tls_fail(err, HB_E_TLS, "setting verify host");
                goto fail;
            }
        }
    } else if (!hb_tls_ctx_insecure(ctx)) {
        rc = hb_fail(err, HB_E_INVALID, "verified TLS needs a host name");
        goto fail;
    }
    hb__tls_ctx_apply_client(ctx, s->ssl, host && host[0] ? h : NULL);
    return 0;
fail:
    SSL_free(s->ssl);
    s->ssl = NULL;
    s->ops = &hb_sock_plain_ops;
    return rc;
}

int hb_sock_tls_server(hb_sock *s, hb_tls_ctx *ctx, char *err)
{
    if (!hb_tls_ctx_is_server(ctx)) return hb_fail(err, HB_E_INVALID, "client TLS context");
    int rc = tls_attach(s, ctx, err);
    if (rc < 0) return rc;
    s->is_server = 1;
    SSL_set_accept_state(s->ssl);
    return 0;
}

const char *hb_sock_alpn(const hb_sock *s, size_t *len)
{
    *len = 0;
    if (!s->ssl) return NULL;
    const unsigned char *p = NULL;
    unsigned n = 0;
    SSL_get0_alpn_selected(s->ssl, &p, &n);
    *len = n;
    return n ? (const char *)p : NULL;
}

const char *hb_sock_tls_version(const hb_sock *s)
{
    return s->ssl ? SSL_get_version(s->ssl) : NULL;
}

int hb_sock_session_reused(const hb_sock *s)
{
    return s->ssl ? SSL_session_reused(s->ssl) : 0;
}

/* ---- TLS read buffer ----
 * A read-only BIO serving OpenSSL's reads from one recv() of up to cap
 * bytes. No read returns more than the rest of the current TLS record:
 * OpenSSL's read-ahead then gets one whole record per call, and its buffer
 * is empty at every record start, so it never moves leftover bytes (which
 * it does before each record when it holds several). The framing only
 * bounds how much one read returns; OpenSSL reads on until it has what it
 * needs, so a wrong guess costs speed, never bytes. The state is its own
 * allocation, owned by the BIO (freed with the SSL), so the caller-owned
 * hb_sock may move or be reset freely. */
#define TLS_HDR 5 /* type, version (2), length (2) */

struct hb_sock_rbuf {
    int fd;
    int eof;    /* the last recv() returned 0 */
    size_t off; /* next unread byte */
    size_t len; /* bytes held */
    size_t cap;
    size_t rec_left; /* bytes of the current record not yet returned; 0: at a header */
    size_t hdr_have; /* bytes of the next header already returned */
    unsigned char hdr[TLS_HDR];
    unsigned char data[];
};

static BIO_METHOD *rbuf_method;
static pthread_once_t rbuf_once = PTHREAD_ONCE_INIT;

static int rbuf_bread(BIO *b, char *out, int outl)
{
    struct hb_sock_rbuf *r = BIO_get_data(b);
    BIO_clear_retry_flags(b);
    if (outl <= 0) return 0;
    if (r->off == r->len) {
        ssize_t n;
        do {
            n = recv(r->fd, r->data, r->cap, 0);
        } while (n < 0 && errno == EINTR);
        if (n < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK) BIO_set_retry_read(b);
            return -1; /* errno kept for tls_result */
        }
        r->off = 0;
        r->len = (size_t)n;
        r->eof = n == 0;
        if (n == 0) return 0;
    }
    const unsigned char *p = r->data + r->off;
    size_t avail = r->len - r->off;
    if (r->rec_left == 0 && r->hdr_have + avail >= TLS_HDR) {
        memcpy(r->hdr + r->hdr_have, p, TLS_HDR - r->hdr_have);
        r->rec_left = TLS_HDR - r->hdr_have + ((size_t)r->hdr[3] << 8 | r->hdr[4]);
        r->hdr_have = 0;
    }
    size_t n = avail < (size_t)outl ? avail : (size_t)outl;
    if (r->rec_left) {
        if (n > r->rec_left) n = r->rec_left;
        r->rec_left -= n;
    } else { /* part of a header: remember it to learn the record's length */
        memcpy(r->hdr + r->hdr_have, p, n);
        r->hdr_have += n;
    }
    memcpy(out, p, n);
    r->off += n;
    return (int)n;
}

static long rbuf_ctrl(BIO *b, int cmd, long num, void *ptr)
{
    (void)num;
    struct hb_sock_rbuf *r = BIO_get_data(b);
    switch (cmd) {
    case BIO_CTRL_FLUSH:
        return 1;
    case BIO_CTRL_EOF:
        return r->eof;
    case BIO_CTRL_PENDING:
        return (long)(r->len - r->off);
    case BIO_C_GET_FD:
        if (ptr) *(int *)ptr = r->fd;
        return r->fd;
    default:
        return 0;
    }
}

static int rbuf_destroy(BIO *b)
{
    free(BIO_get_data(b));
    BIO_set_data(b, NULL);
    BIO_set_init(b, 0);
    return 1;
}

static void rbuf_method_init(void)
{
    /* DESCRIPTOR: SSL_get_rfd finds the fd through BIO_C_GET_FD. */
    BIO_METHOD *m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK | BIO_TYPE_DESCRIPTOR,
                                 "hb_sock read buffer");
    if (!m) return;
    if (!BIO_meth_set_read(m, rbuf_bread) || !BIO_meth_set_ctrl(m, rbuf_ctrl) ||
        !BIO_meth_set_destroy(m, rbuf_destroy)) {
        BIO_meth_free(m);
        return;
    }
    rbuf_method = m;
}

int hb_sock_tls_read_buffer(hb_sock *s, size_t cap, char *err)
{
    if (!s->ssl) return 0;
    if (cap == 0 || cap > INT_MAX) return hb_fail(err, HB_E_INVALID, "bad TLS read buffer size");
    if (s->rbuf) return hb_fail(err, HB_E_INVALID, "TLS read buffer already set");
    if (!SSL_in_before(s->ssl))
        return hb_fail(err, HB_E_INVALID, "TLS read buffer after the handshake started");
    if (pthread_once(&rbuf_once, rbuf_method_init) != 0 || !rbuf_method)
        return hb_fail(err, HB_E_NOMEM, "BIO_meth_new failed");
    struct hb_sock_rbuf *r = malloc(sizeof *r + cap);
    if (!r) return hb_fail(err, HB_E_NOMEM, "out of memory for the TLS read buffer");
    BIO *b = BIO_new(rbuf_method);
    if (!b) {
        free(r);
        return hb__tls_fail(err, HB_E_NOMEM, "BIO_new");
    }
    r->fd = s->fd;
    r->eof = 0;
    r->off = r->len = 0;
    r->cap = cap;
    r->rec_left = r->hdr_have = 0;
    BIO_set_data(b, r);
    BIO_set_init(b, 1);
    /* Reads come from b; writes keep the socket BIO SSL_set_fd made. */
    SSL_set0_rbio(s->ssl, b);
    SSL_set_read_ahead(s->ssl, 1); /* one BIO read per record (see above) */
    s->rbuf = r;
    return 0;
}

size_t hb_sock_pending(const hb_sock *s)
{
    int n = s->ssl ? SSL_pending(s->ssl) : 0;
    return n > 0 ? (size_t)n : 0;
}

int hb_sock_has_buffered(const hb_sock *s)
{
    if (s->rbuf && s->rbuf->off < s->rbuf->len) return 1;
    return s->ssl && SSL_has_pending(s->ssl);
}

char *hb_sock_describe(const hb_sock *s, char *buf, size_t n)
{
    if (n == 0) return buf;
    buf[0] = 0;
    if (!s->ssl) return buf;
    size_t alen = 0;
    const char *alpn = hb_sock_alpn(s, &alen);
    const char *ver = hb_sock_tls_version(s);
    snprintf(buf, n, "%s,%s%s%.*s", ver ? ver : "?", SSL_get_cipher_name(s->ssl), alpn ? "," : "",
             alpn ? (int)alen : 0, alpn ? alpn : "");
    return buf;
}

int hb_sock_errstr(const hb_sock *s, int rc, char *err)
{
    if (!err) return rc;
    if (rc == HB_E_TLS_VERIFY) {
        return hb_fail(err, rc, "certificate verify failed: %s",
                       X509_verify_cert_error_string(s->verify_result));
    }
    if (rc == HB_E_TLS) {
        char reason[160] = "unknown TLS error";
        if (s->tls_err) ERR_error_string_n(s->tls_err, reason, sizeof reason);
        return hb_fail(err, rc, "TLS error: %s", reason);
    }
    return hb_fail(err, rc, "%s", hb_strerror(rc));
}

/* ---- lifecycle ---- */

void hb_sock_close(hb_sock *s)
{
    if (s->ssl) {
        SSL_free(s->ssl);
        ERR_clear_error();
    }
    if (s->fd >= 0) close(s->fd);
    hb_sock_init(s);
}

void hb_sock_abort(hb_sock *s)
{
    if (s->fd >= 0) {
        struct linger l = {1, 0};
        (void)setsockopt(s->fd, SOL_SOCKET, SO_LINGER, &l, sizeof l); /* best effort */
    }
    hb_sock_close(s);
}

static int set_opts(int fd, int flags)
{
    if (!(flags & HB_SOCK_NAGLE)) {
        int one = 1;
        if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0) return -errno;
    }
    return 0;
}

int hb_sock_adopt(hb_sock *s, int fd, int flags)
{
    hb_sock_init(s);
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0) return -errno;
    if (!(fl & O_NONBLOCK) && fcntl(fd, F_SETFL, fl | O_NONBLOCK) != 0) return -errno;
    int rc = set_opts(fd, flags);
    if (rc < 0) return rc;
    s->fd = fd;
    return 0;
}

int hb_sock_connect(hb_sock *s, const struct sockaddr *sa, socklen_t salen, int flags, char *err)
{
    hb_sock_init(s);
    int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_TCP);
    if (fd < 0) return hb_fail(err, -errno, "socket: %s", strerror(errno));
    int rc = set_opts(fd, flags);
    if (rc < 0) {
        close(fd);
        return hb_fail(err, rc, "setsockopt TCP_NODELAY: %s", strerror(-rc));
    }
    s->fd = fd;
    if (connect(fd, sa, salen) == 0) return 0;
    if (errno == EINPROGRESS || errno == EINTR) {
        s->want = HB_WANT_WRITE;
        return HB_AGAIN;
    }
    int e = errno;
    char a[64];
    hb_fail(err, -e, "connect %s: %s", hb_sockaddr_str(sa, a, sizeof a), strerror(e));
    close(fd);
    s->fd = -1;
    return -e;
}

int hb_sock_connect_check(hb_sock *s)
{
    int e = 0;
    socklen_t l = sizeof e;
    if (getsockopt(s->fd, SOL_SOCKET, SO_ERROR, &e, &l) != 0) return -errno;
    if (e == EINPROGRESS || e == EALREADY) return HB_AGAIN;
    if (e) return -e;
    /* SO_ERROR 0 can also mean "not finished yet": ask the peer address. */
    struct sockaddr_storage ss;
    l = sizeof ss;
    if (getpeername(s->fd, (struct sockaddr *)&ss, &l) != 0) {
        if (errno == ENOTCONN) {
            s->want = HB_WANT_WRITE;
            return HB_AGAIN;
        }
        return -errno;
    }
    return 0;
}

int hb_sock_connect_done(const hb_sock *s)
{
    struct pollfd p = {.fd = s->fd, .events = POLLOUT};
    return poll(&p, 1, 0) == 1 && (p.revents & (POLLOUT | POLLERR | POLLHUP));
}

/* ---- addresses ---- */

char *hb_sockaddr_str(const struct sockaddr *sa, char *buf, size_t len)
{
    char ip[INET6_ADDRSTRLEN] = "?";
    int port = 0;
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)sa;
        inet_ntop(AF_INET, &a->sin_addr, ip, sizeof ip);
        port = ntohs(a->sin_port);
        snprintf(buf, len, "%s:%d", ip, port);
    } else if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)sa;
        inet_ntop(AF_INET6, &a->sin6_addr, ip, sizeof ip);
        port = ntohs(a->sin6_port);
        snprintf(buf, len, "[%s]:%d", ip, port);
    } else {
        snprintf(buf, len, "?");
    }
    return buf;
}

int hb_resolve_host(const char *host, int port, struct sockaddr_storage *out, socklen_t *outlen,
                    char *err)
{
    if (port < 0 || port > 65535) return hb_fail(err, HB_E_INVALID, "bad port %d", port);
    char h[256];
    size_t n = strlen(host);
    if (host[0] == '[' && n > 2 && host[n - 1] == ']') {
        host++;
        n -= 2;
    }
    if (n == 0 || n >= sizeof h) return hb_fail(err, HB_E_INVALID, "bad host name");
    memcpy(h, host, n);
    h[n] = 0;
    memset(out, 0, sizeof *out);
    struct sockaddr_in *a4 = (struct sockaddr_in *)out;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)out;
    if (strcmp(h, "localhost") == 0) strcpy(h, "127.0.0.1");
    if (inet_pton(AF_INET, h, &a4->sin_addr) == 1) {
        a4->sin_family = AF_INET;
        a4->sin_port = htons((uint16_t)port);
        *outlen = sizeof *a4;
        return 0;
    }
    if (inet_pton(AF_INET6, h, &a6->sin6_addr) == 1) {
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons((uint16_t)port);
        *outlen = sizeof *a6;
        return 0;
    }
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    int g = getaddrinfo(h, NULL, &hints, &res);
    if (g != 0 || !res) {
        if (res) freeaddrinfo(res);
        return hb_fail(err, HB_E_CONNECT, "cannot resolve %s: %s", h, gai_strerror(g));
    }
    memcpy(out, res->ai_addr, res->ai_addrlen);
    *outlen = res->ai_addrlen;
    freeaddrinfo(res);
    if (out->ss_family == AF_INET)
        a4->sin_port = htons((uint16_t)port);
    else if (out->ss_family == AF_INET6)
        a6->sin6_port = htons((uint16_t)port);
    else
        return hb_fail(err, HB_E_CONNECT, "%s: unsupported address family", h);
    return 0;
}
