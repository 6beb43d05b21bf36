/* hb_client.c - one blocking exchange on a pooled connection (see hb_client.h). */
#include "client/hb_client.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/sendfile.h>
#include <unistd.h>

#include "base/hb_clock.h"
#include "client/hb_client_int.h"

/* Free space a memory sink is grown to before an open-ended read. */
#define SINK_CHUNK (64 * 1024)

static int wait_sock(const hb_exchange *x, uint64_t dl)
{
    const hb_sock *s = &x->conn->sock;
    return hb__wait_fd(s->fd, s->want == HB_WANT_WRITE ? POLLOUT : POLLIN, dl, x->eintr_abort);
}

static int timed_out(const hb_request *r, char *err, const char *what)
{
    double secs = (double)(r->deadline_ns - r->start_ns) / 1e9;
    return hb_fail(err, HB_E_TIMEOUT, "request timed out after %.3g s (%s)", secs, what);
}

/* Read once into buf, waiting (poll) as needed. >0 bytes, 0 EOF, <0 error. */
static ssize_t read_some(hb_exchange *x, void *buf, size_t len, char *err, const char *what)
{
    hb_sock *s = &x->conn->sock;
    for (;;) {
        ssize_t n = hb_sock_read(s, buf, len);
        if (n >= 0) {
            if (n > 0 && hb_now_ns() >= x->req->deadline_ns) return timed_out(x->req, err, what);
            return n;
        }
        if (n != HB_AGAIN) {
            if (err && !err[0]) hb_sock_errstr(s, (int)n, err);
            return n;
        }
        int rc = wait_sock(x, x->req->deadline_ns);
        if (rc == HB_E_TIMEOUT) return timed_out(x->req, err, what);
        if (rc < 0) return rc;
    }
}

static int write_iov(hb_exchange *x, struct iovec *iov, int cnt, char *err)
{
    hb_sock *s = &x->conn->sock;
    while (cnt > 0) {
        if (iov->iov_len == 0) {
            iov++;
            cnt--;
            continue;
        }
        ssize_t n = hb_sock_writev(s, iov, cnt);
        if (n == HB_AGAIN) {
            int rc = wait_sock(x, x->req->deadline_ns);
            if (rc == HB_E_TIMEOUT) return timed_out(x->req, err, "sending the request");
            if (rc < 0) return rc;
            continue;
        }
        if (n < 0) return (int)n;
        size_t done = (size_t)n;
        while (cnt > 0 && done >= iov->iov_len) {
            done -= iov->iov_len;
            iov++;
            cnt--;
        }
        if (cnt > 0) {
            iov->iov_base = (char *)iov->iov_base + done;
            iov->iov_len -= done;
        }
    }
    return 0;
}

/* Stream a known-length file body with sendfile (plain sockets); returns
 * HB_AGAIN when sendfile does not apply so the caller falls back to copying. */
static int send_file_zero_copy(hb_exchange *x, off_t *off, int64_t *left, char *err)
{
    hb_sock *s = &x->conn->sock;
    while (*left > 0) {
        size_t want = *left > (1 << 30) ? (size_t)1 << 30 : (size_t)*left;
        ssize_t n = sendfile(s->fd, x->req->body_fd, off, want);
        if (n > 0) {
            *left -= n;
            continue;
        }
        if (n == 0) return hb_fail(err, HB_E_INVALID, "request body file ended early");
        if (errno == EAGAIN) {
            int rc = hb__wait_fd(s->fd, POLLOUT, x->req->deadline_ns, x->eintr_abort);
            if (rc == HB_E_TIMEOUT) return timed_out(x->req, err, "sending the request body");
            if (rc < 0) return rc;
            continue;
        }
        if (errno == EINTR) continue;
        if (errno == EINVAL || errno == ENOSYS || errno == ESPIPE) return HB_AGAIN;
        return -errno;
    }
    return 0;
}

static int send_fd_body(hb_exchange *x, char *err)
{
    const hb_request *r = x->req;
    off_t off = r->body_fd_off;
    int64_t left = r->body_fd_len;
    char *buf = x->conn->rbuf; /* empty while sending: the response has not started */
    size_t cap = x->conn->rcap - 16;
    int rc;
    /* TLS: whole 16 KiB records per chunk, no short record at each chunk's end. */
    if (x->conn->sock.ssl && cap >= 16384) cap -= cap % 16384;
    if (left >= 0 && off >= 0 && x->conn->sock.ssl == NULL) {
        rc = send_file_zero_copy(x, &off, &left, err);
        if (rc != HB_AGAIN) return rc;
    }
    for (;;) {
        size_t want = cap;
        if (left >= 0) {
            if (left == 0) return 0;
            if ((int64_t)want > left) want = (size_t)left;
        }
        if (off < 0) { /* a pipe or socket may stall: it counts against the deadline */
            rc = hb__wait_fd(r->body_fd, POLLIN, r->deadline_ns, x->eintr_abort);
            if (rc == HB_E_TIMEOUT) return timed_out(r, err, "reading the request body");
            if (rc < 0) return rc;
        }
        ssize_t n = off >= 0 ? pread(r->body_fd, buf, want, off) : read(r->body_fd, buf, want);
        if (n < 0) {
            if (errno == EINTR || errno == EAGAIN) continue;
            return hb_fail(err, -errno, "reading the request body: %s", strerror(errno));
        }
        if (off >= 0) off += n;
        if (left >= 0) {
            if (n == 0) return hb_fail(err, HB_E_INVALID, "request body file ended early");
            left -= n;
            struct iovec iov[1] = {{buf, (size_t)n}};
            if ((rc = write_iov(x, iov, 1, err)) < 0) return rc;
            continue;
        }
        char line[24];
        int ll = snprintf(line, sizeof line, "%zx\r\n", (size_t)n);
        if (n == 0) {
            struct iovec iov[1] = {{(char *)"0\r\n\r\n", 5}};
            return write_iov(x, iov, 1, err);
        }
        struct iovec iov[3] = {{line, (size_t)ll}, {buf, (size_t)n}, {(char *)"\r\n", 2}};
        if ((rc = write_iov(x, iov, 3, err)) < 0) return rc;
    }
}

static int send_request(hb_exchange *x, char *err)
{
    const hb_request *r = x->req;
    struct iovec iov[2] = {{(char *)r->head, r->head_len}, {(char *)r->body, r->body_len}};
    int rc = write_iov(x, iov, r->body_fd < 0 && r->body_len ? 2 : 1, err);
    if (rc < 0 || r->body_fd < 0) return rc;
    return send_fd_body(x, err);
}

/* Bytes of a status line with fixed shape ("HTTP/1.1 200 "), plus slack. */
#define START_PREFIX 16

/* Can parsing b[head..to) tell more than it did at b[head..from)? Yes while
 * the start line's fixed prefix is not all checked (so a banner or junk fails
 * on its first bytes) and whenever a line ended in the new bytes (the head
 * may be complete, or a finished line malformed). Saves reparsing a long head
 * on every small read (a peer sending one byte at a time). */
static int worth_parsing(const char *b, size_t head, size_t from, size_t to)
{
    if (from - head < START_PREFIX) return 1;
    return memchr(b + from, '\n', to - from) != NULL;
}

/* The first bytes of what the peer sent, printable, for the error text. */
static void peek_text(const char *p, size_t n, char *out, size_t cap)
{
    size_t o = 0;
    for (size_t i = 0; i < n && i < 24 && o + 5 < cap; i++) {
        unsigned char ch = (unsigned char)p[i];
        if (ch >= 0x20 && ch < 0x7f && ch != '\\' && ch != '"')
            out[o++] = (char)ch;
        else
            o += (size_t)snprintf(out + o, cap - o, "\\x%02x", ch);
    }
    out[o] = '\0';
}

static int has_header(const hb_response_head *h, const char *name, size_t len)
{
    for (size_t i = 0; i < h->num_headers; i++)
        if (h->headers[i].name_len == len && strncasecmp(h->headers[i].name, name, len) == 0)
            return 1;
    return 0;
}

/* Read until a final (non-1xx) head is parsed. *got: response bytes seen. */
static int read_head(hb_exchange *x, size_t *got, char *err)
{
    hb_conn *c = x->conn;
    const hb_request *r = x->req;
    hb_parse_limits lim = {0, 0};
    size_t scanned = c->rpos;
    int first = 1;
    for (;;) {
        if (c->rlen > c->rpos && (c->rlen - c->rpos >= HB_PARSE_DEFAULT_MAX_HEAD ||
                                  worth_parsing(c->rbuf, c->rpos, scanned, c->rlen))) {
            x->resp.headers = x->headers;
            x->resp.num_headers = HB_CLIENT_MAX_HEADERS;
            int n = hb_parse_response_head_ex(c->rbuf + c->rpos, c->rlen - c->rpos, &x->resp, &lim,
                                              r->parse_flags);
            if (n > 0) {
                x->tolerated += x->resp.tolerated;
                if (hb_response_is_interim(&x->resp)) {
                    if (++x->interim > HB_CLIENT_MAX_INTERIM)
                        return hb_fail(err, HB_E_PROTOCOL,
                                       "malformed response: more than %d 1xx responses",
                                       HB_CLIENT_MAX_INTERIM);
                    c->rpos += (size_t)n;
                    scanned = c->rpos;
                    continue;
                }
                if (x->resp.status == 101 && !has_header(&x->resp, "upgrade", 7))
                    /* RFC 9110 15.2.2: a 101 names the protocol it switches to */
                    return hb_fail(err, HB_E_PROTOCOL,
                                   "malformed response: 101 Switching Protocols without Upgrade");
                x->head_buf = c->rbuf + c->rpos;
                x->head_len = (size_t)n;
                c->rpos += (size_t)n;
                return 0;
            }
            if (n != HB_AGAIN) {
                int pe = x->resp.error ? x->resp.error : HB_PE_BAD_STATUS;
                char peek[128];
                peek_text(c->rbuf + c->rpos, c->rlen - c->rpos, peek, sizeof peek);
                return hb_fail(err, pe, "malformed response head: %s (it starts \"%s\")",
                               hb_parse_strerror(pe), peek);
            }
        }
        scanned = c->rlen;
        if (c->rpos > 0) { /* keep the head at the start so it can grow to rcap */
            memmove(c->rbuf, c->rbuf + c->rpos, c->rlen - c->rpos);
            c->rlen -= c->rpos;
            scanned -= c->rpos;
            c->rpos = 0;
        }
        if (c->rlen == c->rcap) {
            return hb_fail(err, HB_PE_HEAD_TOO_LARGE, "malformed response head: %s",
                           hb_parse_strerror(HB_PE_HEAD_TOO_LARGE));
        }
        /* Right after sending, nothing can be buffered yet: wait before reading
         * (saves an EAGAIN read per request) unless TLS input is buffered. */
        if (first && !hb_sock_has_buffered(&c->sock)) {
            int rc = hb__wait_fd(c->sock.fd, POLLIN, r->deadline_ns, x->eintr_abort);
            if (rc == HB_E_TIMEOUT) return timed_out(r, err, "waiting for the response");
            if (rc < 0) return rc;
        }
        first = 0;
        ssize_t n = read_some(x, c->rbuf + c->rlen, c->rcap - c->rlen, err,
                              *got ? "reading the response head" : "waiting for the response");
        if (n < 0) return (int)n;
        if (n == 0) {
            if (*got == 0)
                return hb_fail(err, HB_E_CLOSED, "connection closed before any response byte");
            return hb_fail(err, HB_E_CLOSED, "connection closed in the response head (%zu bytes)",
                           *got);
        }
        if (*got == 0) x->t_first_byte = hb_now_ns();
        *got += (size_t)n;
        c->rlen += (size_t)n;
    }
}

static int retryable(const hb_exchange *x, int rc, size_t got)
{
    const hb_request *r = x->req;
    if (!x->reused || x->retried || !r->idempotent || got) return 0;
    if (r->body_fd >= 0 && r->body_fd_off < 0) return 0; /* cannot replay a pipe */
    return rc == HB_E_CLOSED || rc == -ECONNRESET || rc == -EPIPE;
}

static void setup_body(hb_exchange *x)
{
    const hb_response_head *h = &x->resp;
    x->kind = hb_response_body_kind(h, x->req->is_head);
    x->keep_alive = !h->framing.connection_close && h->status != 101;
    x->body_done = 0;
    x->body_bytes = 0;
    switch (x->kind) {
    case HB_BODY_NONE:
        x->body_done = 1;
        break;
    case HB_BODY_LENGTH:
        x->remaining = (uint64_t)h->framing.content_length;
        if (x->remaining == 0) x->body_done = 1;
        break;
    case HB_BODY_CHUNKED:
        hb_chunked_init_ex(&x->chunk, x->req->parse_flags);
        break;
    case HB_BODY_UNTIL_CLOSE:
        x->keep_alive = 0;
        break;
    }
}

int hb_client_begin(hb_pool *p, const hb_request *r, hb_exchange *x, char *err)
{
    x->conn = NULL;
    x->req = r;
    x->retried = 0;
    x->interim = 0;
    x->tolerated = 0;
    x->eintr_abort = p->opts.eintr_abort;
    x->t_start = r->start_ns;
    x->t_first_byte = x->t_done = 0;
    x->head_buf = NULL;
    x->head_len = 0;
    if (err) err[0] = '\0';
    for (;;) {
        hb_conn_times ct;
        int rc = hb_pool_acquire(p, &r->target, x->retried, r->deadline_ns, r->connect_deadline_ns,
                                 &x->conn, &x->reused, &ct, err);
        if (rc < 0) {
            x->conn = NULL;
            return rc;
        }
        x->t_connected = ct.connected;
        x->t_tls_done = ct.tls_done;
        size_t got = 0;
        rc = send_request(x, err);
        if (rc == -EPIPE || rc == -ECONNRESET) {
            if (retryable(x, rc, 0)) goto retry;
            /* The server may have answered (e.g. 413) before hanging up. */
            char err2[HB_ERR_LEN] = "";
            int rc2 = read_head(x, &got, err2);
            if (rc2 == 0) {
                setup_body(x);
                x->keep_alive = 0;
                return 0;
            }
            hb_fail(err, HB_E_CLOSED, "connection closed while sending the request: %s",
                    hb_strerror(rc));
            rc = HB_E_CLOSED;
        }
        if (rc < 0) goto fail;
        rc = read_head(x, &got, err);
        if (rc == 0) {
            setup_body(x);
            return 0;
        }
        if (rc == -ECONNRESET && got == 0 && !retryable(x, rc, got))
            hb_fail(err, rc, "connection reset before any response byte");
        if (!retryable(x, rc, got)) goto fail;
    retry:
        hb_pool_release(p, x->conn, 0);
        x->conn = NULL;
        x->retried = 1;
        if (err) err[0] = '\0';
        continue;
    fail:
        hb_pool_release(p, x->conn, 0);
        x->conn = NULL;
        return rc;
    }
}

size_t hb_client_buffered(const hb_exchange *x)
{
    return x->conn ? x->conn->rlen - x->conn->rpos : 0;
}

static int sink_reserve(hb_sink *s, size_t need, char *err)
{
    if (s->cap >= need) return 0;
    if (!s->grow) return hb_fail(err, HB_E_NOMEM, "body sink is full");
    return s->grow(s, need, err);
}

/* Capacity to ask a memory sink for when it is full: the whole rest of a
 * small body at once, else a step that doubles what arrived (at least
 * SINK_CHUNK, at most HB_CLIENT_BODY_STEP): never far ahead of the bytes
 * received, whatever Content-Length claims. remaining: UINT64_MAX if unknown. */
static size_t body_need(const hb_sink *s, uint64_t remaining)
{
    uint64_t step = s->len < SINK_CHUNK ? SINK_CHUNK : s->len;
    if (step > HB_CLIENT_BODY_STEP) step = HB_CLIENT_BODY_STEP;
    if (remaining <= HB_CLIENT_BODY_WHOLE || remaining < step) step = remaining;
    return s->len + (size_t)step;
}

static int too_large(const hb_exchange *x, char *err)
{
    return hb_fail(err, HB_E_TOO_LARGE, "response body over max_body (%llu bytes)",
                   (unsigned long long)x->req->max_body);
}

static int write_fd_all(int fd, const char *p, size_t n, char *err)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return hb_fail(err, -errno, "writing the body to the file: %s", strerror(errno));
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Deliver n bytes of body data at p to the sink (copying). */
static int deliver(hb_exchange *x, hb_sink *s, const char *p, size_t n, char *err)
{
    x->body_bytes += n;
    if (x->req->max_body && x->body_bytes > x->req->max_body) return too_large(x, err);
    if (s->fd >= 0) return write_fd_all(s->fd, p, n, err);
    int rc = sink_reserve(s, s->len + n, err);
    if (rc < 0) return rc;
    memcpy(s->buf + s->len, p, n);
    s->len += n;
    return 0;
}

static int closed_in_body(hb_exchange *x, char *err)
{
    if (x->kind == HB_BODY_LENGTH)
        return hb_fail(
            err, HB_E_CLOSED, "connection closed after %llu of %lld body bytes (truncated body)",
            (unsigned long long)x->body_bytes, (long long)x->resp.framing.content_length);
    return hb_fail(err, HB_E_CLOSED,
                   "connection closed in the chunked body after %llu bytes (truncated body)",
                   (unsigned long long)x->body_bytes);
}

static int read_length(hb_exchange *x, hb_sink *s, char *err)
{
    hb_conn *c = x->conn;
    size_t k = c->rlen - c->rpos;
    if (k > x->remaining) k = (size_t)x->remaining;
    int rc;
    if (s->fd < 0 && (rc = sink_reserve(s, body_need(s, x->remaining), err)) < 0) return rc;
    if (k && (rc = deliver(x, s, c->rbuf + c->rpos, k, err)) < 0) return rc;
    c->rpos += k;
    x->remaining -= k;
    while (x->remaining > 0) {
        char *dst;
        size_t room;
        if (s->fd < 0) { /* straight into the caller's memory: no copy */
            if (s->cap == s->len && (rc = sink_reserve(s, body_need(s, x->remaining), err)) < 0)
                return rc;
            dst = s->buf + s->len;
            room = s->cap - s->len;
        } else if (s->buf && s->cap) {
            dst = s->buf;
            room = s->cap;
        } else {
            dst = c->rbuf;
            room = c->rcap;
            c->rpos = c->rlen = 0;
        }
        if (room > x->remaining) room = (size_t)x->remaining;
        ssize_t n = read_some(x, dst, room, err, "reading the response body");
        if (n < 0) return (int)n;
        if (n == 0) return closed_in_body(x, err);
        x->remaining -= (uint64_t)n;
        if (s->fd < 0) {
            s->len += (size_t)n;
            x->body_bytes += (uint64_t)n;
        } else {
            x->body_bytes += (uint64_t)n;
            if ((rc = write_fd_all(s->fd, dst, (size_t)n, err)) < 0) return rc;
        }
    }
    return 0;
}

/* Where the next read of body bytes goes: a memory sink's free space (grown
 * when little is left; the bytes then stay there), else the sink's scratch
 * buffer or the connection's read buffer, to be written to the sink's fd. */
static int body_room(hb_conn *c, hb_sink *s, char **dst, size_t *room, char *err)
{
    if (s->fd < 0) {
        int rc;
        if (s->cap - s->len < SINK_CHUNK / 4 &&
            (rc = sink_reserve(s, body_need(s, UINT64_MAX), err)) < 0)
            return rc;
        *dst = s->buf + s->len;
        *room = s->cap - s->len;
    } else if (s->buf && s->cap) {
        *dst = s->buf;
        *room = s->cap;
    } else {
        *dst = c->rbuf;
        *room = c->rcap;
    }
    return 0;
}

static int read_until_close(hb_exchange *x, hb_sink *s, char *err)
{
    hb_conn *c = x->conn;
    int rc;
    if (c->rlen > c->rpos && (rc = deliver(x, s, c->rbuf + c->rpos, c->rlen - c->rpos, err)) < 0)
        return rc;
    c->rpos = c->rlen = 0;
    for (;;) {
        char *dst;
        size_t room;
        if ((rc = body_room(c, s, &dst, &room, err)) < 0) return rc;
        /* At most one byte past the limit: enough to tell it was crossed. */
        uint64_t max = x->req->max_body;
        if (max && room > max - x->body_bytes + 1) room = (size_t)(max - x->body_bytes + 1);
        ssize_t n = read_some(x, dst, room, err, "reading the response body");
        if (n < 0) return (int)n;
        if (n == 0) return 0;
        x->body_bytes += (uint64_t)n;
        if (max && x->body_bytes > max) return too_large(x, err);
        if (s->fd < 0)
            s->len += (size_t)n;
        else if ((rc = write_fd_all(s->fd, dst, (size_t)n, err)) < 0)
            return rc;
    }
}

/* Decode p[0..n) (chunked framing). out: memory destination for an in-place
 * decode (data runs are moved down to *w) or NULL to deliver to the sink.
 * *rest: bytes left after the body ended. */
static int decode_chunks(hb_exchange *x, hb_sink *s, const char *p, size_t n, char *out, size_t *w,
                         size_t *rest, char *err)
{
    while (n > 0 && !x->chunk.done) {
        const char *data;
        size_t dlen = 0;
        ssize_t k = hb_chunked_feed(&x->chunk, p, n, &data, &dlen);
        if (k < 0) {
            int pe = x->chunk.error ? x->chunk.error : HB_PE_BAD_CHUNK;
            return hb_fail(err, pe, "malformed chunked body: %s", hb_parse_strerror(pe));
        }
        if (dlen) {
            if (out) {
                memmove(out + *w, data, dlen);
                *w += dlen;
                x->body_bytes += dlen;
                if (x->req->max_body && x->body_bytes > x->req->max_body) return too_large(x, err);
            } else {
                int rc = deliver(x, s, data, dlen, err);
                if (rc < 0) return rc;
            }
        }
        if (k == 0 && dlen == 0) break; /* no progress: defensive, never loop */
        p += k;
        n -= (size_t)k;
    }
    *rest = n;
    return 0;
}

static int read_chunked(hb_exchange *x, hb_sink *s, char *err)
{
    hb_conn *c = x->conn;
    size_t rest = 0, w = 0;
    int rc = decode_chunks(x, s, c->rbuf + c->rpos, c->rlen - c->rpos, NULL, &w, &rest, err);
    if (rc < 0) return rc;
    c->rpos = c->rlen - rest;
    while (!x->chunk.done) {
        c->rpos = c->rlen = 0;
        char *dst;
        size_t room;
        /* a memory sink: read into its free space, decode in place */
        if ((rc = body_room(c, s, &dst, &room, err)) < 0) return rc;
        ssize_t n = read_some(x, dst, room, err, "reading the response body");
        if (n < 0) return (int)n;
        if (n == 0) return closed_in_body(x, err);
        if (s->fd < 0) {
            w = s->len;
            rc = decode_chunks(x, s, dst, (size_t)n, s->buf, &w, &rest, err);
            s->len = w;
        } else {
            rc = decode_chunks(x, s, dst, (size_t)n, NULL, &w, &rest, err);
        }
        if (rc < 0) return rc;
        if (rest) x->keep_alive = 0; /* bytes past the body: never reuse */
    }
    return 0;
}

int hb_client_read_body(hb_exchange *x, hb_sink *s, char *err)
{
    int rc = 0;
    if (err) err[0] = '\0';
    uint64_t max = x->req->max_body;
    if (!x->body_done && x->kind == HB_BODY_LENGTH && max && x->remaining > max) {
        x->keep_alive = 0;
        return hb_fail(err, HB_E_TOO_LARGE,
                       "response body of %llu bytes (Content-Length) over max_body (%llu bytes)",
                       (unsigned long long)x->remaining, (unsigned long long)max);
    }
    if (!x->body_done) {
        switch (x->kind) {
        case HB_BODY_LENGTH:
            rc = read_length(x, s, err);
            break;
        case HB_BODY_CHUNKED:
            rc = read_chunked(x, s, err);
            break;
        case HB_BODY_UNTIL_CLOSE:
            rc = read_until_close(x, s, err);
            break;
        case HB_BODY_NONE:
            break;
        }
    }
    if (x->kind == HB_BODY_CHUNKED) x->tolerated += x->chunk.tolerated;
    if (rc < 0) {
        x->keep_alive = 0;
        return rc;
    }
    x->body_done = 1;
    x->t_done = hb_now_ns();
    return 0;
}

/* Refill the empty read buffer: >0 bytes, or an error (EOF in the body is one). */
static int refill(hb_exchange *x, int may_block, char *err)
{
    hb_conn *c = x->conn;
    if (!may_block) return HB_AGAIN;
    c->rpos = c->rlen = 0;
    ssize_t n = read_some(x, c->rbuf, c->rcap, err, "reading the response body");
    if (n < 0) return (int)n;
    if (n == 0) return x->kind == HB_BODY_UNTIL_CLOSE ? 0 : closed_in_body(x, err);
    c->rlen = (size_t)n;
    return 1;
}

static int body_piece(hb_exchange *x, const char **data, size_t *len, size_t max, int may_block,
                      char *err)
{
    hb_conn *c = x->conn;
    for (;;) {
        size_t avail = c->rlen - c->rpos;
        if (avail == 0) {
            int rc = refill(x, may_block, err);
            if (rc <= 0) return rc;
            continue;
        }
        if (x->kind != HB_BODY_CHUNKED) {
            if (x->kind == HB_BODY_LENGTH && avail > x->remaining) avail = (size_t)x->remaining;
            if (avail > max) avail = max;
            *data = c->rbuf + c->rpos;
            *len = avail;
            c->rpos += avail;
            if (x->kind == HB_BODY_LENGTH && (x->remaining -= avail) == 0) x->body_done = 1;
            return 1;
        }
        const char *d = NULL;
        size_t dl = 0;
        ssize_t k =
            hb_chunked_feed(&x->chunk, c->rbuf + c->rpos, avail > max ? max : avail, &d, &dl);
        if (k < 0) {
            int pe = x->chunk.error ? x->chunk.error : HB_PE_BAD_CHUNK;
            return hb_fail(err, pe, "malformed chunked body: %s", hb_parse_strerror(pe));
        }
        c->rpos += (size_t)k;
        if (x->chunk.done) {
            x->body_done = 1;
            if (c->rpos < c->rlen) x->keep_alive = 0; /* bytes past the body: never reuse */
        }
        if (dl) {
            *data = d;
            *len = dl;
            return 1;
        }
        if (x->chunk.done) return 0;
    }
}

int hb_client_body_next(hb_exchange *x, const char **data, size_t *len, size_t max, int may_block,
                        char *err)
{
    if (err) err[0] = '\0';
    *len = 0;
    if (x->body_done) return 0;
    int rc = body_piece(x, data, len, max ? max : SIZE_MAX, may_block, err);
    if (rc == HB_AGAIN) return rc;
    if (rc > 0) {
        x->body_bytes += *len;
        return 1;
    }
    if (x->kind == HB_BODY_CHUNKED) x->tolerated += x->chunk.tolerated;
    if (rc < 0) {
        x->keep_alive = 0;
        return rc;
    }
    x->body_done = 1;
    x->t_done = hb_now_ns();
    return 0;
}

void hb_client_end(hb_pool *p, hb_exchange *x)
{
    if (!x->conn) return;
    if (!x->t_done) x->t_done = hb_now_ns();
    /* TLS input still buffered (decrypted or not) belongs to no request: never reuse. */
    int tls_leftover = hb_sock_has_buffered(&x->conn->sock);
    hb_pool_release(p, x->conn, x->keep_alive && x->body_done && !tls_leftover);
    x->conn = NULL;
}
