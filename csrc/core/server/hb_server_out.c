/* hb_server_out.c - the server's output side: the per-connection iovec
 * queue, response heads (reason phrases, cached per worker) and streamed
 * bodies of deterministic content. Nothing here allocates or makes syscalls;
 * hb_server_conn.c writes the queue out. */
#include <string.h>

#include "base/hb_content.h"
#include "server/hb_server_int.h"

#define SMALL_BODY 1024           /* bodies up to this are copied behind their head */
#define STREAM_BATCH (256 * 1024) /* bytes queued per stream refill */

static const char *reason(int code)
{
    switch (code) {
    case 100:
        return "Continue";
    case 101:
        return "Switching Protocols";
    case 200:
        return "OK";
    case 201:
        return "Created";
    case 202:
        return "Accepted";
    case 204:
        return "No Content";
    case 206:
        return "Partial Content";
    case 301:
        return "Moved Permanently";
    case 302:
        return "Found";
    case 303:
        return "See Other";
    case 304:
        return "Not Modified";
    case 307:
        return "Temporary Redirect";
    case 308:
        return "Permanent Redirect";
    case 400:
        return "Bad Request";
    case 401:
        return "Unauthorized";
    case 403:
        return "Forbidden";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 408:
        return "Request Timeout";
    case 409:
        return "Conflict";
    case 410:
        return "Gone";
    case 411:
        return "Length Required";
    case 413:
        return "Content Too Large";
    case 414:
        return "URI Too Long";
    case 415:
        return "Unsupported Media Type";
    case 418:
        return "I'm a teapot";
    case 429:
        return "Too Many Requests";
    case 431:
        return "Request Header Fields Too Large";
    case 500:
        return "Internal Server Error";
    case 501:
        return "Not Implemented";
    case 502:
        return "Bad Gateway";
    case 503:
        return "Service Unavailable";
    case 504:
        return "Gateway Timeout";
    default:
        return "Unknown";
    }
}

static size_t utoa(char *p, uint64_t v)
{
    char tmp[24];
    size_t n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    for (size_t i = 0; i < n; i++)
        p[i] = tmp[n - 1 - i];
    return n;
}

size_t hb__xtoa(char *p, uint64_t v)
{
    static const char hex[] = "0123456789abcdef";
    char tmp[20];
    size_t n = 0;
    do {
        tmp[n++] = hex[v & 15];
        v >>= 4;
    } while (v);
    for (size_t i = 0; i < n; i++)
        p[i] = tmp[n - 1 - i];
    return n;
}

/* ---- output queue ---- */

void hb__out_iov(hb__conn *c, const void *p, size_t n)
{
    if (n == 0) return;
    if (c->niov == 0) c->wr_deadline = c->w->now + c->w->req_timeout_ns; /* write clock */
    if (c->niov > 0) {
        struct iovec *last = &c->iov[c->iov_first + c->niov - 1];
        if ((const char *)last->iov_base + last->iov_len == (const char *)p) {
            last->iov_len += n;
            return;
        }
    }
    if (c->iov_first + c->niov == HB__SRV_NIOV) { /* only after partial writes: compact */
        memmove(c->iov, c->iov + c->iov_first, (size_t)c->niov * sizeof c->iov[0]);
        c->iov_first = 0;
    }
    c->iov[c->iov_first + c->niov].iov_base = (void *)p;
    c->iov[c->iov_first + c->niov].iov_len = n;
    c->niov++;
}

void hb__out_bytes(hb__conn *c, const void *p, size_t n)
{
    /* callers check hb__out_room; never expected */
    if (c->olen + n > HB__SRV_OBUF) n = HB__SRV_OBUF - c->olen;
    memcpy(c->obuf + c->olen, p, n);
    hb__out_iov(c, c->obuf + c->olen, n);
    c->olen += n;
}

void hb__out_content(hb__conn *c, uint64_t off, size_t n)
{
    const char *content = c->w->srv->content;
    while (n) {
        size_t take = n < HB_CONTENT_WIN ? n : HB_CONTENT_WIN;
        hb__out_iov(c, content + off % HB_CONTENT_PERIOD, take);
        off += take;
        n -= take;
    }
}

void hb__count_status(hb__conn *c, int status)
{
    if (c->uncounted) return;
    c->status_owed = 0;
    HB__ADD(c->w->st.by_status[status >= 0 && status < 600 ? status : 0], 1);
}

/* ---- response heads ---- */

/* Status line + fixed headers + optional Content-Length / chunked + the
 * connection header at p; returns the end. */
static char *format_head(const hb__conn *c, char *p, int status, const char *extra,
                         size_t extra_len, int64_t cl, int chunked)
{
    memcpy(p, "HTTP/1.1 ", 9);
    p += 9;
    p += utoa(p, (uint64_t)status);
    *p++ = ' ';
    const char *r = reason(status);
    size_t rl = strlen(r);
    memcpy(p, r, rl);
    p += rl;
    static const char fixed[] = "\r\nServer: httpbench\r\nDate: ";
    memcpy(p, fixed, sizeof fixed - 1);
    p += sizeof fixed - 1;
    memcpy(p, c->w->date, 29);
    p += 29;
    *p++ = '\r';
    *p++ = '\n';
    if (c->w->srv->alt_svc_len && c->sock.ssl) { /* HTTP/3 is on: say where */
        memcpy(p, c->w->srv->alt_svc, c->w->srv->alt_svc_len);
        p += c->w->srv->alt_svc_len;
    }
    if (extra_len) {
        memcpy(p, extra, extra_len);
        p += extra_len;
    }
    if (cl >= 0) {
        memcpy(p, "Content-Length: ", 16);
        p += 16;
        p += utoa(p, (uint64_t)cl);
        *p++ = '\r';
        *p++ = '\n';
    }
    if (chunked) {
        static const char te[] = "Transfer-Encoding: chunked\r\n";
        memcpy(p, te, sizeof te - 1);
        p += sizeof te - 1;
    }
    if (c->close_after) {
        static const char cc[] = "Connection: close\r\n";
        memcpy(p, cc, sizeof cc - 1);
        p += sizeof cc - 1;
    } else if (c->ka10) {
        static const char ka[] = "Connection: keep-alive\r\n";
        memcpy(p, ka, sizeof ka - 1);
        p += sizeof ka - 1;
    }
    *p++ = '\r';
    *p++ = '\n';
    return p;
}

void hb__out_head(hb__conn *c, int status, const char *extra, size_t extra_len, int64_t cl,
                  int chunked)
{
    hb__worker *w = c->w;
    char *start = c->obuf + c->olen;
    size_t len;
    if (w->hc.len && w->hc.status == status && w->hc.extra == extra && w->hc.cl == cl &&
        w->hc.chunked == (uint8_t)chunked && w->hc.close_after == c->close_after &&
        w->hc.ka10 == c->ka10) {
        len = w->hc.len;
        memcpy(start, w->hc.buf, len);
    } else {
        len = (size_t)(format_head(c, start, status, extra, extra_len, cl, chunked) - start);
        if (len <= HB__SRV_HEAD_CACHE) {
            w->hc.len = (uint16_t)len;
            memcpy(w->hc.buf, start, len);
            w->hc.status = status;
            w->hc.extra = extra;
            w->hc.cl = cl;
            w->hc.chunked = (uint8_t)chunked;
            w->hc.close_after = c->close_after;
            w->hc.ka10 = c->ka10;
        }
    }
    hb__out_iov(c, start, len);
    c->olen += len;
    c->responded = 1;
    if (status >= 200) hb__count_status(c, status);
}

void hb__respond_text(hb__conn *c, int status, const char *body, size_t len)
{
    int nobody = status == 204 || status == 304;
    hb__out_head(c, status, HB__CT_TEXT, sizeof HB__CT_TEXT - 1, nobody ? -1 : (int64_t)len, 0);
    if (!c->head_only && !nobody) hb__out_iov(c, body, len);
}

/* ---- bodies ---- */

void hb__stream_start(hb__conn *c, uint64_t off, uint64_t n, uint32_t chunk, int final)
{
    c->st_off = off;
    c->st_left = n;
    c->st_chunk = chunk;
    c->st_chunk_left = 0;
    c->st_final = (uint8_t) final;
    c->st_active = 1;
}

void hb__stream_refill(hb__conn *c)
{
    size_t queued = 0;
    while (c->st_left && queued < STREAM_BATCH && hb__out_room(c)) {
        if (c->st_chunk) {
            if (c->st_chunk_left == 0) {
                uint64_t k = c->st_left < c->st_chunk ? c->st_left : c->st_chunk;
                char line[24];
                size_t n = hb__xtoa(line, k);
                line[n++] = '\r';
                line[n++] = '\n';
                hb__out_bytes(c, line, n);
                c->st_chunk_left = (uint32_t)k;
            }
            size_t take = c->st_chunk_left < HB_CONTENT_WIN ? c->st_chunk_left : HB_CONTENT_WIN;
            hb__out_content(c, c->st_off, take);
            c->st_off += take;
            c->st_left -= take;
            c->st_chunk_left -= (uint32_t)take;
            queued += take;
            if (c->st_chunk_left == 0) hb__out_iov(c, "\r\n", 2);
        } else {
            size_t take = c->st_left < HB_CONTENT_WIN ? (size_t)c->st_left : HB_CONTENT_WIN;
            hb__out_content(c, c->st_off, take);
            c->st_off += take;
            c->st_left -= take;
            queued += take;
        }
    }
    if (c->st_left == 0) {
        if (c->st_final) HB__OUT_LIT(c, "0\r\n\r\n");
        c->st_active = 0;
    }
}

/* Small bodies go straight into the queue (the smallest copied right behind
 * their head, so a response is one buffer and one send() rather than a
 * two-piece sendmsg()). */
void hb__out_body(hb__conn *c, uint64_t n)
{
    if (c->head_only || n == 0) return;
    if (n <= SMALL_BODY && c->olen + n <= HB__SRV_OBUF) {
        memcpy(c->obuf + c->olen, c->w->srv->content, (size_t)n);
        hb__out_iov(c, c->obuf + c->olen, (size_t)n);
        c->olen += (size_t)n;
    } else if (n <= HB_CONTENT_WIN)
        hb__out_content(c, 0, (size_t)n);
    else
        hb__stream_start(c, 0, n, 0, 0);
}
