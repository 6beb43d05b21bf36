/* hb_engine_h1.c - HTTP/1.1 behind the engine's protocol table: requests
 * written from the pre-serialized head (+ body), pipelined through a ring of
 * request slots; responses parsed in place in the connection's read buffer.
 * See hb_engine_int.h for how the engine's files share the work. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <unistd.h>

#include "base/hb_clock.h"
#include "engine/hb_engine_int.h"
#include "http/hb_parse.h"

#define MAX_HEADERS HB_PARSE_DEFAULT_MAX_HEADERS
#define PBUF_MAX (256u * 1024u) /* pipelined copies of the request up to this size */
#define FILE_CHUNK (64u * 1024u)
#define SENDFILE_CHUNK (1u << 20)
#define HEAD_CACHE_CAP 1024u /* response heads up to this size are remembered */

enum rstate { R_HEAD = 0, R_BODY_LEN, R_BODY_CHUNKED, R_BODY_CLOSE };

typedef struct h1conn {
    econn base; /* first: the engine's part */
    /* read side */
    char *rbuf;
    size_t rcap, rlen, rpos;
    int rstate;
    uint64_t body_left, resp_body, first_byte;
    int have_first, resp_close, resp_status;
    hb_chunked ch;
    hb__eng_events sm; /* stream mode: the response's events */
    /* in-flight ring, capacity = pipeline; base.rcount requests from rhead */
    req_slot *ring;
    uint32_t rhead, nstarted;
    uint64_t wleft; /* bytes of the ring's requests not yet written */
    char *wbuf;     /* TLS + file body: chunk buffer */
} h1conn;

/* Per thread: header scratch and the last final response head parsed, with
 * what it said. Servers answer a benchmark's identical requests with
 * byte-identical heads (until the Date header ticks); a head equal byte for
 * byte to this one has the same parse, so it is compared instead of parsed
 * again. */
typedef struct h1thread {
    hb_header hdrs[MAX_HEADERS];
    size_t hc_len; /* 0: empty */
    int hc_status, hc_close, hc_kind;
    int64_t hc_clen;
    char hc[HEAD_CACHE_CAP];
} h1thread;

static inline h1conn *H1(econn *c)
{
    return (h1conn *)c;
}

static inline req_slot *ring_at(econn *c, uint32_t i)
{
    uint32_t cap = c->th->e->cfg.pipeline;
    h1conn *hc = H1(c);
    return &hc->ring[(hc->rhead + i) % cap];
}

static void issue(econn *c, uint64_t intended, uint64_t now, int warm)
{
    h1conn *hc = H1(c);
    hb__eng_issue_slot(c->th, ring_at(c, c->rcount), intended, now, warm);
    c->rcount++;
    hc->wleft += c->th->e->req_len;
}

static void mark_started(econn *c, uint64_t now)
{
    h1conn *hc = H1(c);
    uint64_t L = c->th->e->req_len;
    uint32_t unstarted = (uint32_t)(hc->wleft / L);
    uint32_t started = c->rcount - unstarted;
    while (hc->nstarted < started) {
        ring_at(c, hc->nstarted)->written = now;
        hc->nstarted++;
    }
}

/* Write as much of the pending request bytes as the socket takes. */
static void flush(econn *c)
{
    h1conn *hc = H1(c);
    ethread *th = c->th;
    hb_engine *e = th->e;
    uint64_t L = e->req_len;
    size_t hl = e->cfg.head_len;
    while (hc->wleft > 0) {
        uint64_t pos = (L - hc->wleft % L) % L; /* offset inside the current request */
        ssize_t w;
        /* Requests whose first byte goes out in this write get this stamp. */
        uint64_t now = hb_now_ns();
        if (e->pbuf) {
            uint64_t n = e->pbuf_len - pos;
            if (n > hc->wleft) n = hc->wleft;
            w = hb_sock_write(&c->s, e->pbuf + pos, (size_t)n);
        } else if (pos < hl) {
            struct iovec iov[2];
            int cnt = 1;
            iov[0].iov_base = e->head + pos;
            iov[0].iov_len = hl - pos;
            if (e->body && e->cfg.body_len) {
                iov[1].iov_base = e->body;
                iov[1].iov_len = e->cfg.body_len;
                cnt = 2;
            }
            w = hb_sock_writev(&c->s, iov, cnt);
        } else {
            uint64_t boff = pos - hl;
            uint64_t left = e->cfg.body_len - boff;
            if (e->body) {
                w = hb_sock_write(&c->s, e->body + boff, (size_t)left);
            } else if (!e->cfg.tls) {
                off_t off = (off_t)boff;
                size_t n = left > SENDFILE_CHUNK ? SENDFILE_CHUNK : (size_t)left;
                w = sendfile(c->s.fd, e->body_fd, &off, n);
                if (w < 0) w = (errno == EAGAIN || errno == EWOULDBLOCK) ? HB_AGAIN : -errno;
                if (w == HB_AGAIN) c->s.want = HB_WANT_WRITE;
            } else {
                size_t n = left > FILE_CHUNK ? FILE_CHUNK : (size_t)left;
                ssize_t rd = pread(e->body_fd, hc->wbuf, n, (off_t)boff);
                if (rd <= 0) {
                    hb__eng_fail_all(c, HB_ENG_ERR_WRITE, rd < 0 ? -errno : HB_E_INVALID,
                                     "reading the body file failed");
                    return;
                }
                w = hb_sock_write(&c->s, hc->wbuf, (size_t)rd);
            }
        }
        if (w == HB_AGAIN) {
            if (c->s.want == HB_WANT_READ) {
                /* TLS renegotiation-style wants: rare; wait for readability. */
                c->write_blocked = 0;
            } else {
                c->write_blocked = 1;
            }
            hb__eng_update_interest(c);
            return;
        }
        if (w < 0) {
            char err[HB_ERR_LEN];
            hb_sock_errstr(&c->s, (int)w, err);
            hb__eng_fail_all(c, HB_ENG_ERR_WRITE, (int)w, err);
            return;
        }
        hc->wleft -= (uint64_t)w;
        if (now >= e->measure_ns) th->r.bytes_out += (uint64_t)w;
        mark_started(c, now);
    }
    if (c->write_blocked) {
        c->write_blocked = 0;
        hb__eng_update_interest(c);
    }
}

/* The response at the head of the ring is complete. */
static void complete(econn *c, uint64_t now)
{
    h1conn *hc = H1(c);
    ethread *th = c->th;
    hb_engine *e = th->e;
    req_slot *q = &hc->ring[hc->rhead];
    hc->rhead = (hc->rhead + 1) % e->cfg.pipeline;
    c->rcount--;
    if (hc->nstarted) hc->nstarted--;
    hb__eng_account_response(th, q, hc->resp_status, hc->resp_body, hc->first_byte, now);
    hc->rstate = R_HEAD;
    hc->have_first = 0;
    hc->resp_body = 0;
    if (hc->resp_close || !e->cfg.keepalive) c->closing = 1;
}

/* Stream mode: body bytes of the response at the ring's head. 0, or -1 when c was failed. */
static int stream_data(econn *c, const char *p, size_t n, int chunk_end, uint64_t now)
{
    h1conn *hc = H1(c);
    int rc = hb__eng_events_data(c->th, &hc->ring[hc->rhead], &hc->sm, p, n, chunk_end, now);
    if (rc < 0) {
        hb__eng_fail_all(c, HB_ENG_ERR_PROTOCOL, HB_E_PROTOCOL,
                         "a server-sent event line over the stream's line bound");
        return -1;
    }
    return 0;
}

/* Parse what is buffered. Returns 0 to go on, -1 when c was closed. */
static int process(econn *c, uint64_t now)
{
    h1conn *hc = H1(c);
    ethread *th = c->th;
    hb_engine *e = th->e;
    h1thread *ts = th->proto;
    while (hc->rpos < hc->rlen) {
        if (c->rcount == 0 || hc->nstarted == 0) {
            /* Bytes nobody asked for: the connection is unusable. */
            hb__eng_note_error(th, HB_ENG_ERR_PROTOCOL, HB_E_PROTOCOL, "unsolicited response data");
            hb__eng_conn_close(c);
            hb__eng_defer_fill(c);
            return -1;
        }
        char *p = hc->rbuf + hc->rpos;
        size_t avail = hc->rlen - hc->rpos;
        switch (hc->rstate) {
        case R_HEAD: {
            if (!hc->have_first) {
                hc->have_first = 1;
                hc->first_byte = now;
            }
            int status, conn_close, kind;
            int64_t clen;
            if (ts->hc_len && avail >= ts->hc_len && memcmp(p, ts->hc, ts->hc_len) == 0) {
                /* The same bytes up to and including the blank line: the
                 * parser would stop at the same place with the same result. */
                hc->rpos += ts->hc_len;
                status = ts->hc_status;
                conn_close = ts->hc_close;
                kind = ts->hc_kind;
                clen = ts->hc_clen;
            } else {
                hb_response_head h;
                memset(&h, 0, sizeof h);
                /* Header pairs are only needed once (the Server header); after
                 * that the parser just counts them and derives the framing. */
                h.headers = th->have_server ? NULL : ts->hdrs;
                h.num_headers = MAX_HEADERS;
                hb_parse_limits lim = {hc->rcap, MAX_HEADERS};
                int pr = hb_parse_response_head_ex(p, avail, &h, &lim, e->cfg.parse_flags);
                if (pr == HB_AGAIN) {
                    if (avail == hc->rcap) {
                        hb__eng_fail_all(c, HB_ENG_ERR_PROTOCOL, HB_PE_HEAD_TOO_LARGE,
                                         "response head larger than the read buffer");
                        return -1;
                    }
                    if (hc->rpos > 0) {
                        memmove(hc->rbuf, p, avail);
                        hc->rpos = 0;
                        hc->rlen = avail;
                    }
                    return 0;
                }
                if (pr < 0) {
                    int code = h.error ? h.error : HB_E_PROTOCOL;
                    hb__eng_fail_all(c, HB_ENG_ERR_PROTOCOL, code, hb_parse_strerror(code));
                    return -1;
                }
                hc->rpos += (size_t)pr;
                if (hb_response_is_interim(&h)) continue;
                if (!th->have_server) {
                    for (size_t i = 0; i < h.num_headers; i++) {
                        hb__eng_header(th, h.headers[i].name, h.headers[i].name_len,
                                       h.headers[i].value, h.headers[i].value_len);
                        if (e->cfg.stream)
                            hb__eng_events_header(th, h.headers[i].name, h.headers[i].name_len,
                                                  h.headers[i].value, h.headers[i].value_len);
                    }
                    th->have_server = 1;
                }
                status = h.status;
                conn_close = h.framing.connection_close;
                kind = hb_response_body_kind(&h, e->cfg.method_is_head);
                clen = h.framing.content_length;
                if ((size_t)pr <= HEAD_CACHE_CAP) {
                    memcpy(ts->hc, p, (size_t)pr);
                    ts->hc_len = (size_t)pr;
                    ts->hc_status = status;
                    ts->hc_close = conn_close;
                    ts->hc_kind = kind;
                    ts->hc_clen = clen;
                } else {
                    ts->hc_len = 0;
                }
            }
            hc->resp_status = status;
            hc->resp_close = conn_close;
            hc->resp_body = 0;
            if (e->cfg.stream) hb__eng_events_begin(th, &hc->sm);
            switch (kind) {
            case HB_BODY_NONE:
                complete(c, now);
                break;
            case HB_BODY_LENGTH:
                hc->body_left = (uint64_t)clen;
                if (hc->body_left == 0)
                    complete(c, now);
                else
                    hc->rstate = R_BODY_LEN;
                break;
            case HB_BODY_CHUNKED:
                hb_chunked_init_ex(&hc->ch, e->cfg.parse_flags);
                hc->rstate = R_BODY_CHUNKED;
                break;
            default:
                hc->rstate = R_BODY_CLOSE;
                hc->resp_close = 1;
                break;
            }
            break;
        }
        case R_BODY_LEN: {
            uint64_t take = avail < hc->body_left ? avail : hc->body_left;
            if (e->cfg.stream && stream_data(c, p, (size_t)take, -1, now) < 0) return -1;
            hc->rpos += (size_t)take;
            hc->body_left -= take;
            hc->resp_body += take;
            if (hc->body_left == 0) complete(c, now);
            break;
        }
        case R_BODY_CHUNKED: {
            const char *d;
            size_t dl = 0;
            ssize_t k = hb_chunked_feed(&hc->ch, p, avail, &d, &dl);
            if (k < 0) {
                int code = hc->ch.error ? hc->ch.error : HB_E_PROTOCOL;
                hb__eng_fail_all(c, HB_ENG_ERR_PROTOCOL, code, hb_parse_strerror(code));
                return -1;
            }
            if (e->cfg.stream && dl && stream_data(c, d, dl, hc->ch.remaining == 0, now) < 0)
                return -1;
            hc->rpos += (size_t)k;
            hc->resp_body += dl;
            if (hc->ch.done)
                complete(c, now);
            else if (k == 0 && dl == 0)
                return 0; /* needs more input */
            break;
        }
        default: /* R_BODY_CLOSE */
            if (e->cfg.stream && stream_data(c, p, avail, -1, now) < 0) return -1;
            hc->resp_body += avail;
            hc->rpos = hc->rlen;
            break;
        }
        if (c->closing) break;
    }
    if (hc->rpos >= hc->rlen) hc->rpos = hc->rlen = 0;
    return 0;
}

static void on_eof(econn *c, uint64_t now)
{
    h1conn *hc = H1(c);
    if (hc->rstate == R_BODY_CLOSE && c->rcount > 0) complete(c, now);
    if (c->rcount > 0) {
        hb__eng_fail_all(c, HB_ENG_ERR_CLOSED, HB_E_CLOSED,
                         "connection closed before the response");
        return;
    }
    hb__eng_conn_close(c);
    hb__eng_fill(c, now);
}

/* events: what epoll reported (0 when called for another reason). */
static void do_read(econn *c, uint32_t events)
{
    h1conn *hc = H1(c);
    ethread *th = c->th;
    hb_engine *e = th->e;
    for (;;) {
        if (hc->rlen >= hc->rcap) { /* cannot happen: process() compacts or fails */
            hb__eng_fail_all(c, HB_ENG_ERR_PROTOCOL, HB_PE_HEAD_TOO_LARGE, "read buffer full");
            return;
        }
        size_t space = hc->rcap - hc->rlen;
        ssize_t n = hb_sock_read(&c->s, hc->rbuf + hc->rlen, space);
        if (n == HB_AGAIN) {
            int want_w = c->s.want == HB_WANT_WRITE;
            if (want_w != c->read_wants_write) {
                c->read_wants_write = want_w;
                hb__eng_update_interest(c);
            }
            return;
        }
        uint64_t now = hb_now_ns();
        if (n == 0) {
            on_eof(c, now);
            return;
        }
        if (n < 0) {
            char err[HB_ERR_LEN];
            hb_sock_errstr(&c->s, (int)n, err);
            if (c->rcount == 0) { /* idle keep-alive connection reset: not a request's error */
                hb__eng_conn_close(c);
                hb__eng_defer_fill(c);
                return;
            }
            hb__eng_fail_all(c, HB_ENG_ERR_READ, (int)n, err);
            return;
        }
        if (c->read_wants_write) {
            c->read_wants_write = 0;
            hb__eng_update_interest(c);
        }
        if (now >= e->measure_ns) th->r.bytes_in += (uint64_t)n;
        hc->rlen += (size_t)n;
        if (process(c, now) < 0) return;
        if (c->closing) {
            /* Connection: close (or keep-alive off): what else is in flight is lost. */
            if (c->rcount > 0) {
                hb__eng_fail_all(c, HB_ENG_ERR_CLOSED, HB_E_CLOSED,
                                 "server closed the connection with requests in flight");
                return;
            }
            hb__eng_conn_close(c);
            hb__eng_fill(c, now);
            return;
        }
        hb__eng_fill(c, now);
        if (c->state != C_OPEN) return;
        /* Edge-triggered: a short read means the data is drained (TCP hands
         * over everything queued up to len); a full one may have left more.
         * A FIN that came with the data raises no further edge, so when epoll
         * said RDHUP/HUP/ERR keep reading until EOF or EAGAIN. */
        if (c->et) {
            if ((size_t)n < space && !(events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR))) return;
            continue;
        }
        /* OpenSSL or the TLS read buffer may hold bytes epoll cannot see. */
        if (!hb_sock_has_buffered(&c->s)) return;
    }
}

/* ---- the table ---- */

static int h1_check(const hb_engine_config *cfg, char *err)
{
    if (!cfg->head || cfg->head_len < 4)
        return hb_fail(err, HB_E_INVALID, "a serialized request head is required");
    return 0;
}

static int h1_prepare(hb_engine *e, char *err)
{
    hb_engine_config *c = &e->cfg;
    e->head = malloc(c->head_len);
    if (!e->head) return hb_fail(err, HB_E_NOMEM, "out of memory");
    memcpy(e->head, c->head, c->head_len);
    c->head = e->head;
    e->req_len = c->head_len + c->body_len;
    if (e->body_fd < 0 && e->req_len * c->pipeline <= PBUF_MAX) {
        e->pbuf_len = (size_t)e->req_len * c->pipeline;
        e->pbuf = malloc(e->pbuf_len);
        if (!e->pbuf) return hb_fail(err, HB_E_NOMEM, "out of memory");
        for (uint32_t i = 0; i < c->pipeline; i++) {
            memcpy(e->pbuf + i * e->req_len, e->head, c->head_len);
            if (c->body_len) memcpy(e->pbuf + i * e->req_len + c->head_len, e->body, c->body_len);
        }
    }
    return 0;
}

static void h1_cleanup(hb_engine *e)
{
    free(e->head);
    free(e->pbuf);
}

static int h1_conn_init(econn *c, size_t rcap, char *err)
{
    h1conn *hc = H1(c);
    hb_engine *e = c->th->e;
    hc->ring = calloc(e->cfg.pipeline, sizeof *hc->ring);
    hc->rcap = rcap;
    hc->rbuf = malloc(rcap);
    if (!hc->ring || !hc->rbuf) return hb_fail(err, HB_E_NOMEM, "out of memory");
    if (e->body_fd >= 0 && e->cfg.tls) {
        hc->wbuf = malloc(FILE_CHUNK);
        if (!hc->wbuf) return hb_fail(err, HB_E_NOMEM, "out of memory");
    }
    return 0;
}

static void h1_conn_free(econn *c)
{
    h1conn *hc = H1(c);
    free(hc->rbuf);
    free(hc->ring);
    free(hc->wbuf);
}

static uint32_t h1_cap(econn *c)
{
    return c->th->e->cfg.pipeline;
}

static void h1_send(econn *c, uint32_t more)
{
    if (H1(c)->wleft && (more || !c->write_blocked)) flush(c);
}

static void h1_on_io(hb_loop *l, hb_io *io, uint32_t events)
{
    (void)l;
    econn *c = hb__eng_conn_of(io);
    if (H1(c)->wleft) {
        flush(c);
        if (c->state != C_OPEN) return;
    }
    if ((events & (EPOLLIN | EPOLLERR | EPOLLHUP | EPOLLRDHUP)) || c->read_wants_write)
        do_read(c, events);
}

static int h1_timed_out(const econn *c, uint64_t now, uint64_t tmo)
{
    const h1conn *hc = (const h1conn *)c;
    return now - hc->ring[hc->rhead].start > tmo;
}

static void h1_fail_inflight(econn *c, int type, uint64_t now)
{
    h1conn *hc = H1(c);
    uint32_t m = c->th->e->cfg.pipeline;
    while (c->rcount) {
        hb__eng_account_error(c->th, &hc->ring[hc->rhead], type, now);
        hc->rhead = (hc->rhead + 1) % m;
        c->rcount--;
    }
}

static uint64_t h1_inflight_measured(const econn *c)
{
    const h1conn *hc = (const h1conn *)c;
    uint32_t m = c->th->e->cfg.pipeline;
    uint64_t n = 0;
    for (uint32_t k = 0; k < c->rcount; k++)
        n += !hc->ring[(hc->rhead + k) % m].warm;
    return n;
}

static void h1_reset(econn *c)
{
    h1conn *hc = H1(c);
    hc->rlen = hc->rpos = 0;
    hc->rstate = R_HEAD;
    hc->have_first = 0;
    hc->wleft = 0;
    hc->nstarted = 0;
    hc->resp_close = 0;
}

const hb__eng_proto hb__eng_h1 = {
    .conn_size = sizeof(h1conn),
    .thread_size = sizeof(h1thread),
    .check = h1_check,
    .prepare = h1_prepare,
    .cleanup = h1_cleanup,
    .conn_init = h1_conn_init,
    .conn_free = h1_conn_free,
    .start = NULL,
    .cap = h1_cap,
    .issue = issue,
    .send = h1_send,
    .on_io = h1_on_io,
    .timed_out = h1_timed_out,
    .fail_inflight = h1_fail_inflight,
    .inflight_measured = h1_inflight_measured,
    .reset = h1_reset,
};
