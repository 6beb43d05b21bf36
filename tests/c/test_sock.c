/* test_sock.c - hb_sock / hb_tls over real loopback TCP: plain I/O, EOF,
 * refused connects, TLS handshakes with verification, ALPN, resumption,
 * bytes buffered inside OpenSSL, the TLS read buffer and the TLS description. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <string.h>
#include <unistd.h>

#include <openssl/ssl.h>

#include "net/hb_sock.h"
#include "hb_test.h"
#include "net/hb_tls.h"

static int listener(struct sockaddr_storage *addr, socklen_t *len)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, 16) != 0) abort();
    *len = sizeof *addr;
    getsockname(fd, (struct sockaddr *)addr, len);
    return fd;
}

/* Connect a client hb_sock and accept the server side as another hb_sock. */
static int pair(int lfd, const struct sockaddr_storage *addr, socklen_t len, int flags, hb_sock *c,
                hb_sock *s)
{
    char err[HB_ERR_LEN];
    int rc = hb_sock_connect(c, (const struct sockaddr *)addr, len, flags, err);
    if (rc != 0 && rc != HB_AGAIN) return rc;
    int afd = accept(lfd, NULL, NULL);
    if (afd < 0) return -errno;
    struct pollfd p = {c->fd, POLLOUT, 0};
    poll(&p, 1, 1000);
    rc = hb_sock_connect_check(c);
    if (rc != 0) return rc;
    return hb_sock_adopt(s, afd, 0);
}

static void wait_for(hb_sock *s, int ms)
{
    struct pollfd p = {s->fd, (short)(s->want == HB_WANT_WRITE ? POLLOUT : POLLIN), 0};
    poll(&p, 1, ms);
}

/* Step both handshakes until both are done or one fails; returns the
 * client's final code (server's in *src). */
static int handshake_both(hb_sock *c, hb_sock *s, int *src, char *cerr)
{
    char serr[HB_ERR_LEN];
    int rc = HB_AGAIN, r2 = HB_AGAIN;
    for (int i = 0; i < 200 && (rc == HB_AGAIN || r2 == HB_AGAIN); i++) {
        if (rc == HB_AGAIN) rc = hb_sock_handshake(c, cerr);
        if (r2 == HB_AGAIN) r2 = hb_sock_handshake(s, serr);
        if (rc < 0 && rc != HB_AGAIN) break;
        if (r2 < 0 && r2 != HB_AGAIN) break;
        if (rc == HB_AGAIN) wait_for(c, 5);
    }
    *src = r2;
    return rc;
}

static ssize_t read_some(hb_sock *s, char *buf, size_t len)
{
    for (int i = 0; i < 200; i++) {
        ssize_t r = hb_sock_read(s, buf, len);
        if (r != HB_AGAIN) return r;
        wait_for(s, 10);
    }
    return HB_AGAIN;
}

static void test_resolve(void)
{
    struct sockaddr_storage ss;
    socklen_t len;
    char err[HB_ERR_LEN], buf[64];
    CHECK_EQ_INT(hb_resolve_host("127.0.0.1", 8080, &ss, &len, err), 0);
    CHECK(strcmp(hb_sockaddr_str((struct sockaddr *)&ss, buf, sizeof buf), "127.0.0.1:8080") == 0);
    CHECK_EQ_INT(hb_resolve_host("localhost", 443, &ss, &len, err), 0);
    CHECK(strcmp(hb_sockaddr_str((struct sockaddr *)&ss, buf, sizeof buf), "127.0.0.1:443") == 0);
    CHECK_EQ_INT(hb_resolve_host("[::1]", 9, &ss, &len, err), 0);
    CHECK_EQ_INT(ss.ss_family, AF_INET6);
    CHECK(strcmp(hb_sockaddr_str((struct sockaddr *)&ss, buf, sizeof buf), "[::1]:9") == 0);
    CHECK_EQ_INT(hb_resolve_host("::1", 80, &ss, &len, err), 0);
    CHECK_EQ_INT(len, sizeof(struct sockaddr_in6));
    CHECK_EQ_INT(hb_resolve_host("127.0.0.1", 99999, &ss, &len, err), HB_E_INVALID);
    CHECK_EQ_INT(hb_resolve_host("127.0.0.1", -1, &ss, &len, err), HB_E_INVALID);
    CHECK_EQ_INT(hb_resolve_host("", 80, &ss, &len, err), HB_E_INVALID);
    CHECK_EQ_INT(hb_resolve_host("no-such-host.invalid", 80, &ss, &len, err), HB_E_CONNECT);
}

static void test_plain(void)
{
    struct sockaddr_storage addr;
    socklen_t len;
    int lfd = listener(&addr, &len);
    hb_sock c, s;
    CHECK_EQ_INT(pair(lfd, &addr, len, 0, &c, &s), 0);
    int v = 0;
    socklen_t vl = sizeof v;
    getsockopt(c.fd, IPPROTO_TCP, TCP_NODELAY, &v, &vl);
    CHECK(v != 0);
    char buf[64];
    CHECK_EQ_INT(hb_sock_read(&s, buf, sizeof buf), HB_AGAIN);
    CHECK_EQ_INT(s.want, HB_WANT_READ);
    struct iovec iov[3] = {{"GET ", 4}, {"", 0}, {"/x", 2}};
    CHECK_EQ_INT(hb_sock_writev(&c, iov, 3), 6);
    CHECK_EQ_INT(read_some(&s, buf, sizeof buf), 6);
    CHECK(memcmp(buf, "GET /x", 6) == 0);
    CHECK_EQ_INT(hb_sock_handshake(&c, NULL), 0);
    CHECK_EQ_INT(hb_sock_shutdown(&c), 0);
    CHECK_EQ_INT(read_some(&s, buf, sizeof buf), 0); /* EOF */
    CHECK_EQ_INT(hb_sock_write(&s, "ok", 2), 2);     /* half-closed: other way still works */
    CHECK_EQ_INT(read_some(&c, buf, sizeof buf), 2);
    hb_sock_abort(&s); /* RST */
    ssize_t r = read_some(&c, buf, sizeof buf);
    CHECK(r == -ECONNRESET || r == 0);
    hb_sock_close(&c);
    hb_sock_close(&s);
    CHECK_EQ_INT(c.fd, -1);

    /* Nagle left on when asked */
    CHECK_EQ_INT(pair(lfd, &addr, len, HB_SOCK_NAGLE, &c, &s), 0);
    v = 1;
    getsockopt(c.fd, IPPROTO_TCP, TCP_NODELAY, &v, &vl);
    CHECK_EQ_INT(v, 0);
    hb_sock_close(&c);
    hb_sock_close(&s);
    close(lfd);

    /* refused: the port is closed now */
    char err[HB_ERR_LEN];
    int rc = hb_sock_connect(&c, (struct sockaddr *)&addr, len, 0, err);
    if (rc == HB_AGAIN) {
        struct pollfd p = {c.fd, POLLOUT, 0};
        poll(&p, 1, 1000);
        rc = hb_sock_connect_check(&c);
    }
    CHECK_EQ_INT(rc, -ECONNREFUSED);
    hb_sock_close(&c);
}

static void test_tls(void)
{
    char err[HB_ERR_LEN] = "";
    hb_tls_ctx *sctx = NULL, *cctx = NULL, *bad = NULL, *noresume = NULL;
    CHECK_EQ_INT(hb_tls_server_ctx_new(&sctx, NULL, err), 0);
    size_t pem_len = 0;
    const char *pem = hb_tls_ctx_cert_pem(sctx, &pem_len);
    CHECK(pem && pem_len > 100 && strncmp(pem, "-----BEGIN CERTIFICATE-----", 27) == 0);
    hb_tls_client_opts co;
    hb_tls_client_opts_init(&co);
    co.ca_pem = pem;
    CHECK_EQ_INT(hb_tls_client_ctx_new(&cctx, &co, err), 0);

    struct sockaddr_storage addr;
    socklen_t len;
    int lfd = listener(&addr, &len);
    hb_sock c, s;
    int src;
    char buf[20000];
    /* Verified handshake by IP SAN, twice (the second one resumed). */
    for (int round = 0; round < 2; round++) {
        CHECK_EQ_INT(pair(lfd, &addr, len, 0, &c, &s), 0);
        CHECK_EQ_INT(hb_sock_tls_client(&c, cctx, "127.0.0.1", err), 0);
        CHECK_EQ_INT(hb_sock_tls_server(&s, sctx, err), 0);
        int rc = handshake_both(&c, &s, &src, err);
        CHECK_EQ_INT(rc, 0);
        CHECK_EQ_INT(src, 0);
        if (rc) fprintf(stderr, "handshake: %s\n", err);
        size_t alen;
        const char *alpn = hb_sock_alpn(&c, &alen);
        CHECK(alpn && alen == 8 && memcmp(alpn, "http/1.1", 8) == 0);
        CHECK(strcmp(hb_sock_tls_version(&c), "TLSv1.3") == 0);
        CHECK_EQ_INT(hb_sock_session_reused(&c), round == 1);
        /* writev coalescing + a record bigger than 16 KiB */
        static char big[18000];
        memset(big, 'b', sizeof big);
        struct iovec iov[3] = {{"HEAD", 4}, {"ER\r\n", 4}, {big, sizeof big}};
        ssize_t w = hb_sock_writev(&c, iov, 3);
        CHECK(w > 8);
        size_t got = 0;
        while (got < (size_t)w) {
            ssize_t r = read_some(&s, buf + got, sizeof buf - got);
            if (r <= 0) break;
            got += (size_t)r;
        }
        CHECK_EQ_INT(got, w);
        CHECK(memcmp(buf, "HEADER\r\nbbb", 11) == 0);
        CHECK_EQ_INT(hb_sock_write(&s, "pong", 4), 4);
        CHECK_EQ_INT(read_some(&c, buf, sizeof buf), 4); /* also takes the session tickets */
        CHECK_EQ_INT(hb_sock_shutdown(&s), 0);
        CHECK_EQ_INT(read_some(&c, buf, sizeof buf), 0); /* close_notify -> EOF */
        hb_sock_close(&c);
        hb_sock_close(&s);
    }
    /* Wrong host name -> verify failure with OpenSSL's reason. */
    CHECK_EQ_INT(pair(lfd, &addr, len, 0, &c, &s), 0);
    CHECK_EQ_INT(hb_sock_tls_client(&c, cctx, "example.com", err), 0);
    CHECK_EQ_INT(hb_sock_tls_server(&s, sctx, err), 0);
    CHECK_EQ_INT(handshake_both(&c, &s, &src, err), HB_E_TLS_VERIFY);
    CHECK(strstr(err, "mismatch") != NULL);
    hb_sock_close(&c);
    hb_sock_close(&s);

    /* System CAs don't trust the generated CA. */
    CHECK_EQ_INT(hb_tls_client_ctx_new(&bad, NULL, err), 0);
    CHECK_EQ_INT(pair(lfd, &addr, len, 0, &c, &s), 0);
    CHECK_EQ_INT(hb_sock_tls_client(&c, bad, "localhost", err), 0);
    CHECK_EQ_INT(hb_sock_tls_server(&s, sctx, err), 0);
    CHECK_EQ_INT(handshake_both(&c, &s, &src, err), HB_E_TLS_VERIFY);
    CHECK(strstr(err, "local issuer") != NULL);
    hb_sock_close(&c);
    hb_sock_close(&s);
    hb_tls_ctx_free(bad);

    /* Insecure client, TLS 1.2 only, resumption off on the server. */
    hb_tls_server_opts so;
    hb_tls_server_opts_init(&so);
    so.session_resumption = 0;
    CHECK_EQ_INT(hb_tls_server_ctx_new(&noresume, &so, err), 0);
    hb_tls_client_opts_init(&co);
    co.insecure = 1;
    co.max_version = HB_TLS_1_2;
    CHECK_EQ_INT(hb_tls_client_ctx_new(&bad, &co, err), 0);
    for (int round = 0; round < 2; round++) {
        CHECK_EQ_INT(pair(lfd, &addr, len, 0, &c, &s), 0);
        CHECK_EQ_INT(hb_sock_tls_client(&c, bad, NULL, err), 0);
        CHECK_EQ_INT(hb_sock_tls_server(&s, noresume, err), 0);
        CHECK_EQ_INT(handshake_both(&c, &s, &src, err), 0);
        CHECK(strcmp(hb_sock_tls_version(&s), "TLSv1.2") == 0);
        CHECK_EQ_INT(hb_sock_session_reused(&c), 0);
        hb_sock_close(&c);
        hb_sock_close(&s);
    }
    hb_tls_ctx_free(bad);
    hb_tls_ctx_free(noresume);

    /* Peer closing mid-handshake -> HB_E_CLOSED (or a reset). */
    CHECK_EQ_INT(pair(lfd, &addr, len, 0, &c, &s), 0);
    CHECK_EQ_INT(hb_sock_tls_client(&c, cctx, "localhost", err), 0);
    CHECK_EQ_INT(hb_sock_handshake(&c, err), HB_AGAIN);
    CHECK_EQ_INT(c.want, HB_WANT_READ);
    hb_sock_close(&s);
    int rc = HB_AGAIN;
    for (int i = 0; i < 100 && rc == HB_AGAIN; i++) {
        wait_for(&c, 10);
        rc = hb_sock_handshake(&c, err);
    }
    CHECK(rc == HB_E_CLOSED || rc == -ECONNRESET);
    hb_sock_close(&c);

    /* Errors for bad options / files */
    hb_tls_client_opts_init(&co);
    co.ca_file = "/nonexistent/ca.pem";
    CHECK_EQ_INT(hb_tls_client_ctx_new(&bad, &co, err), HB_E_INVALID);
    CHECK(bad == NULL);
    hb_tls_client_opts_init(&co);
    co.ca_pem = "not a pem";
    CHECK_EQ_INT(hb_tls_client_ctx_new(&bad, &co, err), HB_E_INVALID);
    hb_tls_server_opts_init(&so);
    so.cert_file = "/nonexistent/cert.pem";
    CHECK_EQ_INT(hb_tls_server_ctx_new(&bad, &so, err), HB_E_INVALID);

    /* The exported PEM, written to a file, loads as a CA file. */
    char path[] = "/tmp/hb_test_sock_XXXXXX";
    int tfd = mkstemp(path);
    CHECK(tfd >= 0 && write(tfd, pem, pem_len) == (ssize_t)pem_len);
    close(tfd);
    hb_tls_client_opts_init(&co);
    co.ca_file = path;
    CHECK_EQ_INT(hb_tls_client_ctx_new(&bad, &co, err), 0);
    CHECK_EQ_INT(pair(lfd, &addr, len, 0, &c, &s), 0);
    CHECK_EQ_INT(hb_sock_tls_client(&c, bad, "localhost", err), 0);
    CHECK_EQ_INT(hb_sock_tls_server(&s, sctx, err), 0);
    CHECK_EQ_INT(handshake_both(&c, &s, &src, err), 0);
    hb_sock_close(&c);
    hb_sock_close(&s);
    hb_tls_ctx_free(bad);
    unlink(path);

    close(lfd);
    hb_tls_ctx_free(cctx);
    hb_tls_ctx_free(sctx);
}

/* Wait until the kernel holds at least n unread bytes for fd. */
static int wait_queued(int fd, int n)
{
    for (int i = 0; i < 200; i++) {
        int q = 0;
        if (ioctl(fd, FIONREAD, &q) != 0) return -1;
        if (q >= n) return q;
        usleep(1000);
    }
    return -1;
}

static int fd_readable(int fd)
{
    struct pollfd p = {fd, POLLIN, 0};
    return poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

/* What the engine and the client ask of a socket besides I/O: bytes held
 * inside OpenSSL (which poll cannot see) and the one-line TLS description. */
static void test_buffered_and_describe(void)
{
    char err[HB_ERR_LEN] = "", buf[256], d[128];
    struct sockaddr_storage addr;
    socklen_t len;
    int lfd = listener(&addr, &len);
    hb_sock c, s;
    int src;

    /* Plain: unread bytes stay in the kernel, nothing is buffered above it. */
    CHECK_EQ_INT(pair(lfd, &addr, len, 0, &c, &s), 0);
    CHECK_EQ_INT(hb_sock_tls_read_buffer(&c, 4096, err), 0); /* no-op */
    CHECK(c.rbuf == NULL);
    CHECK_EQ_INT(hb_sock_write(&s, "0123456789", 10), 10);
    CHECK_EQ_INT(wait_queued(c.fd, 10), 10);
    CHECK_EQ_INT(read_some(&c, buf, 4), 4);
    CHECK_EQ_INT(hb_sock_pending(&c), 0);
    CHECK_EQ_INT(hb_sock_has_buffered(&c), 0);
    CHECK(fd_readable(c.fd));
    CHECK(strcmp(hb_sock_describe(&c, d, sizeof d), "") == 0);
    d[0] = 'x';
    CHECK(hb_sock_describe(&c, d, 0) == d && d[0] == 'x'); /* n == 0: nothing written */
    hb_sock_close(&c);
    hb_sock_close(&s);

    hb_tls_ctx *sctx = NULL, *cctx = NULL, *noalpn = NULL;
    CHECK_EQ_INT(hb_tls_server_ctx_new(&sctx, NULL, err), 0);
    hb_tls_client_opts co;
    hb_tls_client_opts_init(&co);
    co.ca_pem = hb_tls_ctx_cert_pem(sctx, NULL);
    CHECK_EQ_INT(hb_tls_client_ctx_new(&cctx, &co, err), 0);

    /* TLS with a read buffer: a partly read record leaves decrypted bytes. */
    CHECK_EQ_INT(pair(lfd, &addr, len, 0, &c, &s), 0);
    CHECK_EQ_INT(hb_sock_tls_client(&c, cctx, "localhost", err), 0);
    CHECK_EQ_INT(hb_sock_tls_read_buffer(&c, 65536, err), 0);
    CHECK_EQ_INT(hb_sock_tls_server(&s, sctx, err), 0);
    CHECK_EQ_INT(handshake_both(&c, &s, &src, err), 0);
    CHECK_EQ_INT(src, 0);
    CHECK_EQ_INT(hb_sock_pending(&c), 0);
    char rec[100];
    memset(rec, 'r', sizeof rec);
    CHECK_EQ_INT(hb_sock_write(&s, rec, sizeof rec), sizeof rec);
    CHECK_EQ_INT(read_some(&c, buf, 10), 10); /* also takes the session tickets */
    CHECK_EQ_INT(hb_sock_pending(&c), 90);
    CHECK_EQ_INT(hb_sock_has_buffered(&c), 1);
    CHECK_EQ_INT(hb_sock_read(&c, buf, sizeof buf), 90);
    CHECK_EQ_INT(hb_sock_pending(&c), 0);
    CHECK_EQ_INT(hb_sock_has_buffered(&c), 0);

    /* Two records in the kernel: the read buffer pulls in both with the
     * first read, so the second is buffered (not yet decrypted: pending
     * stays 0) while poll sees nothing left on the socket. */
    CHECK_EQ_INT(hb_sock_write(&s, rec, 50), 50);
    CHECK_EQ_INT(hb_sock_write(&s, rec, 60), 60);
    CHECK(wait_queued(c.fd, 110) >= 110);
    CHECK_EQ_INT(hb_sock_read(&c, buf, 50), 50);
    CHECK_EQ_INT(hb_sock_pending(&c), 0);
    CHECK_EQ_INT(hb_sock_has_buffered(&c), 1);
    CHECK(!fd_readable(c.fd));
    CHECK_EQ_INT(hb_sock_read(&c, buf, sizeof buf), 60);
    CHECK_EQ_INT(hb_sock_has_buffered(&c), 0);

    hb_sock_describe(&c, d, sizeof d);
    CHECK(strncmp(d, "TLSv1.3,TLS_", 12) == 0);
    CHECK(strlen(d) > 21 && strcmp(d + strlen(d) - 9, ",http/1.1") == 0);
    CHECK(strcmp(hb_sock_describe(&c, d, 8), "TLSv1.3") == 0); /* truncated */
    hb_sock_describe(&s, d, sizeof d);
    CHECK(strncmp(d, "TLSv1.3,TLS_", 12) == 0);
    hb_sock_close(&c);
    hb_sock_close(&s);

    /* Without ALPN the description ends at the cipher. */
    hb_tls_client_opts_init(&co);
    co.insecure = 1;
    co.alpn = "";
    co.max_version = HB_TLS_1_2;
    CHECK_EQ_INT(hb_tls_client_ctx_new(&noalpn, &co, err), 0);
    CHECK_EQ_INT(pair(lfd, &addr, len, 0, &c, &s), 0);
    CHECK_EQ_INT(hb_sock_tls_client(&c, noalpn, NULL, err), 0);
    CHECK_EQ_INT(hb_sock_tls_server(&s, sctx, err), 0);
    CHECK_EQ_INT(handshake_both(&c, &s, &src, err), 0);
    hb_sock_describe(&c, d, sizeof d);
    CHECK(strncmp(d, "TLSv1.2,", 8) == 0);
    CHECK(strchr(d + 8, ',') == NULL && strlen(d) > 8);
    hb_sock_close(&c);
    hb_sock_close(&s);

    /* A list "h2,http/1.1" goes out as both protocols: a server with h2
     * picks it, one without picks http/1.1; malformed lists are refused. */
    hb_tls_ctx *list = NULL, *bad = NULL, *h2srv = NULL;
    hb_tls_server_opts so2;
    hb_tls_server_opts_init(&so2);
    so2.alpn_h2 = 1;
    CHECK_EQ_INT(hb_tls_server_ctx_new(&h2srv, &so2, err), 0);
    hb_tls_client_opts_init(&co);
    co.insecure = 1;
    co.alpn = "h2,http/1.1";
    CHECK_EQ_INT(hb_tls_client_ctx_new(&list, &co, err), 0);
    hb_tls_ctx *servers[2] = {h2srv, sctx};
    const char *want[2] = {"h2", "http/1.1"};
    for (int i = 0; i < 2; i++) {
        CHECK_EQ_INT(pair(lfd, &addr, len, 0, &c, &s), 0);
        CHECK_EQ_INT(hb_sock_tls_client(&c, list, NULL, err), 0);
        CHECK_EQ_INT(hb_sock_tls_server(&s, servers[i], err), 0);
        CHECK_EQ_INT(handshake_both(&c, &s, &src, err), 0);
        size_t al = 0;
        const char *ap = hb_sock_alpn(&c, &al);
        CHECK(ap && al == strlen(want[i]) && memcmp(ap, want[i], al) == 0);
        hb_sock_close(&c);
        hb_sock_close(&s);
    }
    hb_tls_ctx_free(h2srv);
    const char *bads[] = {"h2,", ",h2", "h2,,http/1.1"};
    for (size_t i = 0; i < 3; i++) {
        co.alpn = bads[i];
        CHECK_EQ_INT(hb_tls_client_ctx_new(&bad, &co, err), HB_E_INVALID);
        CHECK(strstr(err, "invalid ALPN list") != NULL);
    }

    hb_tls_ctx_free(list);
    hb_tls_ctx_free(noalpn);
    hb_tls_ctx_free(cctx);
    hb_tls_ctx_free(sctx);
    close(lfd);
}

/* Move what the kernel holds on from to to (loopback: the writes fit). */
static void pump(int from, int to)
{
    char b[65536];
    for (;;) {
        ssize_t n = recv(from, b, sizeof b, MSG_DONTWAIT);
        if (n <= 0) return;
        for (ssize_t off = 0; off < n;) {
            ssize_t w = send(to, b + off, (size_t)(n - off), 0);
            if (w <= 0) abort();
            off += w;
        }
    }
}

/* Byte i of the k-th test record. */
static char rec_byte(int k, int i)
{
    return (char)((k * 31 + i * 7 + 1) & 0xff);
}

static int read_exact(hb_sock *c, char *buf, size_t want, size_t chunk)
{
    size_t got = 0;
    while (got < want) {
        size_t ask = want - got < chunk ? want - got : chunk;
        ssize_t r = read_some(c, buf + got, ask);
        if (r <= 0) return (int)r;
        got += (size_t)r;
    }
    return 0;
}

/* hb_sock_tls_read_buffer: OpenSSL's record reads served from our buffer. */
/* A connected TLS pair, handshake done, the client reading through a 64 KiB
 * read buffer. */
static void buffered_pair(int lfd, const struct sockaddr_storage *addr, socklen_t len,
                          hb_tls_ctx *cctx, hb_tls_ctx *sctx, hb_sock *c, hb_sock *s)
{
    char err[HB_ERR_LEN] = "";
    int src;
    CHECK_EQ_INT(pair(lfd, addr, len, 0, c, s), 0);
    CHECK_EQ_INT(hb_sock_tls_client(c, cctx, NULL, err), 0);
    CHECK_EQ_INT(hb_sock_tls_read_buffer(c, 65536, err), 0);
    CHECK_EQ_INT(hb_sock_tls_server(s, sctx, err), 0);
    CHECK_EQ_INT(handshake_both(c, s, &src, err), 0);
}

static void test_read_buffer(void)
{
    char err[HB_ERR_LEN] = "";
    hb_tls_ctx *sctx = NULL, *cctx = NULL;
    CHECK_EQ_INT(hb_tls_server_ctx_new(&sctx, NULL, err), 0);
    hb_tls_client_opts co;
    hb_tls_client_opts_init(&co);
    co.insecure = 1;
    CHECK_EQ_INT(hb_tls_client_ctx_new(&cctx, &co, err), 0);
    struct sockaddr_storage addr;
    socklen_t len;
    int lfd = listener(&addr, &len);
    hb_sock c, s;
    int src;
    static char want[70000], got[70000];

    /* Bad calls. */
    CHECK_EQ_INT(pair(lfd, &addr, len, 0, &c, &s), 0);
    CHECK_EQ_INT(hb_sock_tls_client(&c, cctx, NULL, err), 0);
    CHECK_EQ_INT(hb_sock_tls_read_buffer(&c, 0, err), HB_E_INVALID);
    CHECK_EQ_INT(hb_sock_tls_read_buffer(&c, 4096, err), 0);
    CHECK(c.rbuf != NULL);
    CHECK_EQ_INT(hb_sock_tls_read_buffer(&c, 4096, err), HB_E_INVALID);
    CHECK(strstr(err, "already") != NULL);
    CHECK_EQ_INT(SSL_get_rfd(c.ssl), c.fd); /* the BIO answers BIO_C_GET_FD */
    CHECK_EQ_INT(SSL_get_wfd(c.ssl), c.fd);
    hb_sock_close(&c); /* before any handshake: the buffer goes with the SSL */
    CHECK(c.rbuf == NULL);
    hb_sock_close(&s);

    /* Many small records, byte-exact, through buffers of 7 bytes (headers
     * split across refills), 200 bytes and 64 KiB. */
    size_t caps[3] = {7, 200, 65536};
    for (int ci = 0; ci < 3; ci++) {
        CHECK_EQ_INT(pair(lfd, &addr, len, 0, &c, &s), 0);
        CHECK_EQ_INT(hb_sock_tls_client(&c, cctx, NULL, err), 0);
        CHECK_EQ_INT(hb_sock_tls_read_buffer(&c, caps[ci], err), 0);
        CHECK_EQ_INT(hb_sock_tls_server(&s, sctx, err), 0);
        CHECK_EQ_INT(hb_sock_tls_read_buffer(&s, caps[ci], err), 0); /* server side too */
        CHECK_EQ_INT(handshake_both(&c, &s, &src, err), 0);
        CHECK_EQ_INT(src, 0);
        CHECK_EQ_INT(hb_sock_tls_read_buffer(&c, 4096, err), HB_E_INVALID); /* too late */
        int k = 0;
        for (int batch = 0; batch < 6; batch++) {
            size_t n = 0;
            for (int j = 0; j < 50; j++, k++) {
                int rl = 1 + (k * 37) % 300;
                for (int i = 0; i < rl; i++)
                    want[n + (size_t)i] = rec_byte(k, i);
                CHECK_EQ_INT(hb_sock_write(&s, want + n, (size_t)rl), rl);
                n += (size_t)rl;
            }
            memset(got, 0, n);
            CHECK_EQ_INT(read_exact(&c, got, n, 1000), 0);
            CHECK(memcmp(got, want, n) == 0);
        }
        /* and the other way, into the server's buffer */
        for (int i = 0; i < 3000; i++)
            want[i] = rec_byte(7, i);
        for (int off = 0; off < 3000; off += 100)
            CHECK_EQ_INT(hb_sock_write(&c, want + off, 100), 100);
        CHECK_EQ_INT(read_exact(&s, got, 3000, 333), 0);
        CHECK(memcmp(got, want, 3000) == 0);
        /* a struct moved elsewhere keeps working: the BIO holds no pointer to it */
        hb_sock moved = c;
        hb_sock_init(&c);
        CHECK_EQ_INT(hb_sock_write(&s, "moved", 5), 5);
        CHECK_EQ_INT(read_exact(&moved, got, 5, 5), 0);
        CHECK(memcmp(got, "moved", 5) == 0);
        hb_sock_close(&moved);
        hb_sock_close(&s);
    }

    /* One recv() takes every record: the kernel is empty, our buffer is not. */
    buffered_pair(lfd, &addr, len, cctx, sctx, &c, &s);
    CHECK_EQ_INT(hb_sock_write(&s, "x", 1), 1);
    CHECK_EQ_INT(read_some(&c, got, sizeof got), 1); /* session tickets taken too */
    static const char abc[] = "abcdefgh";
    for (int j = 0; j < 3; j++)
        CHECK_EQ_INT(hb_sock_write(&s, abc + j, 5), 5);
    CHECK(wait_queued(c.fd, 3 * 22) >= 3 * 22);
    CHECK_EQ_INT(hb_sock_has_buffered(&c), 0); /* all in the kernel: poll sees it */
    CHECK_EQ_INT(hb_sock_read(&c, got, 5), 5);
    CHECK(memcmp(got, "abcde", 5) == 0);
    int q = -1;
    CHECK(ioctl(c.fd, FIONREAD, &q) == 0 && q == 0);
    CHECK(!fd_readable(c.fd));
    CHECK_EQ_INT(hb_sock_pending(&c), 0);
    CHECK_EQ_INT(hb_sock_has_buffered(&c), 1);
    /* OpenSSL took one record: the other two (27 bytes each in TLS 1.3)
     * wait in our buffer, which BIO_pending reports. */
    CHECK_EQ_INT(BIO_pending(SSL_get_rbio(c.ssl)), 2 * 27);
    CHECK_EQ_INT(hb_sock_read(&c, got, 5), 5);
    CHECK(memcmp(got, "bcdef", 5) == 0);
    CHECK_EQ_INT(BIO_pending(SSL_get_rbio(c.ssl)), 27);
    CHECK_EQ_INT(hb_sock_has_buffered(&c), 1);
    CHECK_EQ_INT(hb_sock_read(&c, got, sizeof got), 5);
    CHECK(memcmp(got, "cdefg", 5) == 0);
    CHECK_EQ_INT(hb_sock_has_buffered(&c), 0);
    /* Nothing left anywhere: would block, wants READ. */
    c.want = HB_WANT_NONE;
    CHECK_EQ_INT(hb_sock_read(&c, got, sizeof got), HB_AGAIN);
    CHECK_EQ_INT(c.want, HB_WANT_READ);
    /* A record then close_notify: the record, then EOF. */
    CHECK_EQ_INT(hb_sock_write(&s, "last", 4), 4);
    CHECK_EQ_INT(hb_sock_shutdown(&s), 0);
    CHECK(wait_queued(c.fd, 40) >= 40);
    CHECK_EQ_INT(read_some(&c, got, sizeof got), 4);
    CHECK(memcmp(got, "last", 4) == 0);
    CHECK_EQ_INT(read_some(&c, got, sizeof got), 0);
    CHECK_EQ_INT(read_some(&c, got, sizeof got), 0); /* EOF stays EOF */
    hb_sock_close(&c);
    hb_sock_close(&s);

    /* A record then a bare TCP FIN (no close_notify): the record, then EOF. */
    buffered_pair(lfd, &addr, len, cctx, sctx, &c, &s);
    CHECK_EQ_INT(hb_sock_write(&s, "tail", 4), 4);
    CHECK_EQ_INT(shutdown(s.fd, SHUT_WR), 0);
    CHECK_EQ_INT(read_some(&c, got, sizeof got), 4);
    CHECK(memcmp(got, "tail", 4) == 0);
    CHECK_EQ_INT(read_some(&c, got, sizeof got), 0);
    hb_sock_close(&c);
    hb_sock_close(&s);

    /* A reset: -ECONNRESET (or EOF), as on a plain socket. */
    buffered_pair(lfd, &addr, len, cctx, sctx, &c, &s);
    CHECK_EQ_INT(hb_sock_write(&c, "ping", 4), 4);
    CHECK_EQ_INT(read_some(&s, got, sizeof got), 4);
    hb_sock_abort(&s);
    ssize_t r = read_some(&c, got, sizeof got);
    CHECK(r == -ECONNRESET || r == 0);
    hb_sock_close(&c);

    /* Through a relay that hands the client a record a few bytes at a time:
     * a partial header or body is HB_AGAIN (want READ), the whole record
     * comes out byte-exact, and the socket closes with bytes still
     * buffered (ASan checks the buffer is freed). */
    hb_sock cp, x;
    CHECK_EQ_INT(pair(lfd, &addr, len, 0, &c, &cp), 0);
    CHECK_EQ_INT(pair(lfd, &addr, len, 0, &x, &s), 0);
    CHECK_EQ_INT(hb_sock_tls_client(&c, cctx, NULL, err), 0);
    CHECK_EQ_INT(hb_sock_tls_read_buffer(&c, 65536, err), 0);
    CHECK_EQ_INT(hb_sock_tls_server(&s, sctx, err), 0);
    int crc = HB_AGAIN, srv = HB_AGAIN;
    for (int i = 0; i < 400 && (crc == HB_AGAIN || srv == HB_AGAIN); i++) {
        if (crc == HB_AGAIN) crc = hb_sock_handshake(&c, err);
        pump(cp.fd, x.fd);
        if (srv == HB_AGAIN) srv = hb_sock_handshake(&s, err);
        pump(x.fd, cp.fd);
        usleep(500);
    }
    CHECK_EQ_INT(crc, 0);
    CHECK_EQ_INT(srv, 0);
    usleep(2000);
    pump(x.fd, cp.fd); /* session tickets */
    c.want = HB_WANT_NONE;
    CHECK_EQ_INT(hb_sock_read(&c, got, sizeof got), HB_AGAIN);
    CHECK_EQ_INT(c.want, HB_WANT_READ);
    for (int i = 0; i < 100; i++)
        want[i] = rec_byte(3, i);
    CHECK_EQ_INT(hb_sock_write(&s, want, 100), 100);
    CHECK_EQ_INT(hb_sock_write(&s, want, 100), 100);
    int wire = wait_queued(x.fd, 200);
    CHECK(wire > 200);
    char raw[1024];
    CHECK_EQ_INT(recv(x.fd, raw, sizeof raw, 0), wire);
    int first = wire / 2; /* two records of the same size */
    int cuts[4] = {3, 5, 60, first};
    int sent = 0;
    for (int i = 0; i < 4; i++) {
        CHECK_EQ_INT(send(cp.fd, raw + sent, (size_t)(cuts[i] - sent), 0), cuts[i] - sent);
        sent = cuts[i];
        CHECK(wait_queued(c.fd, 1) > 0);
        c.want = HB_WANT_NONE;
        ssize_t rr = hb_sock_read(&c, got, sizeof got);
        if (i < 3) {
            CHECK_EQ_INT(rr, HB_AGAIN);
            CHECK_EQ_INT(c.want, HB_WANT_READ);
        } else {
            CHECK_EQ_INT(rr, 100);
            CHECK(memcmp(got, want, 100) == 0);
        }
    }
    /* the second record plus 3 bytes more arrive; read 10 bytes of it */
    CHECK_EQ_INT(send(cp.fd, raw + first, (size_t)(wire - first), 0), wire - first);
    CHECK_EQ_INT(send(cp.fd, "\x17\x03\x03", 3, 0), 3);
    CHECK(wait_queued(c.fd, wire - first + 3) > 0);
    CHECK_EQ_INT(hb_sock_read(&c, got, 10), 10);
    CHECK(memcmp(got, want, 10) == 0);
    CHECK_EQ_INT(hb_sock_has_buffered(&c), 1);
    hb_sock_close(&c); /* with decrypted bytes and raw bytes still buffered */
    hb_sock_close(&cp);
    hb_sock_close(&x);
    hb_sock_close(&s);

    close(lfd);
    hb_tls_ctx_free(cctx);
    hb_tls_ctx_free(sctx);
}

int main(void)
{
    test_resolve();
    test_plain();
    test_tls();
    test_buffered_and_describe();
    test_read_buffer();
    HB_TEST_MAIN_END();
}
