/* hb_h2cli.c - HTTP/2 client session over hb_sock (see hb_h2cli.h). */
#include "hb_h2cli.h"

#include <nghttp2/nghttp2.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_FIELDS 128 /* header fields per request (nv array on the stack) */

const char *hb_h2_end_name(int end)
{
    switch (end) {
    case HB_H2_END_OK:
        return "ok";
    case HB_H2_END_RESET:
        return "rst_stream";
    case HB_H2_END_GOAWAY:
        return "goaway";
    case HB_H2_END_PROTOCOL:
        return "protocol";
    default:
        return "unknown";
    }
}

const char *hb_h2_code_name(uint32_t code)
{
    static const char *const names[] = {"NO_ERROR",
                                        "PROTOCOL_ERROR",
                                        "INTERNAL_ERROR",
                                        "FLOW_CONTROL_ERROR",
                                        "SETTINGS_TIMEOUT",
                                        "STREAM_CLOSED",
                                        "FRAME_SIZE_ERROR",
                                        "REFUSED_STREAM",
                                        "CANCEL",
                                        "COMPRESSION_ERROR",
                                        "CONNECT_ERROR",
                                        "ENHANCE_YOUR_CALM",
                                        "INADEQUATE_SECURITY",
                                        "HTTP_1_1_REQUIRED"};
    return code < sizeof names / sizeof names[0] ? names[code] : "unknown";
}

/* Record the first connection-fatal condition; returns rc. */
__attribute__((format(printf, 3, 4))) static int set_fatal(hb_h2cli *c, int rc, const char *fmt,
                                                           ...)
{
    if (!c->fatal) {
        c->fatal = 1;
        c->fatal_rc = rc;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->err, sizeof c->err, fmt, ap);
        va_end(ap);
    }
    return c->fatal_rc;
}

/* ---- nghttp2 callbacks ---- */

static int cb_begin_headers(nghttp2_session *s, const nghttp2_frame *f, void *ud)
{
    (void)s;
    (void)f;
    ((hb_h2cli *)ud)->hdr_status = 0;
    return 0;
}

static int cb_header(nghttp2_session *s, const nghttp2_frame *f, const uint8_t *name,
                     size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags, void *ud)
{
    (void)flags;
    hb_h2cli *c = ud;
    if (f->hd.type != NGHTTP2_HEADERS) return 0;
    if (namelen == 7 && name[0] == ':' && memcmp(name, ":status", 7) == 0) {
        int st = 0;
        /* nghttp2 has checked it is 3 digits (HTTP messaging is on). */
        for (size_t i = 0; i < valuelen && i < 3; i++)
            st = st * 10 + (value[i] - '0');
        c->hdr_status = st;
        return 0;
    }
    if (c->hdr_status >= 200 && c->cb->on_header && namelen && name[0] != ':') {
        void *sud = nghttp2_session_get_stream_user_data(s, f->hd.stream_id);
        c->cb->on_header(c->ud, sud, (const char *)name, namelen, (const char *)value, valuelen);
    }
    return 0;
}

static int cb_frame_recv(nghttp2_session *s, const nghttp2_frame *f, void *ud)
{
    hb_h2cli *c = ud;
    switch (f->hd.type) {
    case NGHTTP2_HEADERS:
        if (c->hdr_status >= 200) {
            int st = c->hdr_status;
            c->hdr_status = 0; /* trailers later carry no :status */
            void *sud = nghttp2_session_get_stream_user_data(s, f->hd.stream_id);
            c->cb->on_response(c->ud, sud, st);
        }
        break;
    case NGHTTP2_RST_STREAM:
        /* nghttp2 closes the stream right after this callback. */
        c->rst_recv_id = f->hd.stream_id;
        break;
    case NGHTTP2_GOAWAY:
        c->goaway_recv = 1;
        c->goaway_last = f->goaway.last_stream_id;
        c->goaway_code = f->goaway.error_code;
        if (f->goaway.error_code != NGHTTP2_NO_ERROR)
            set_fatal(c, HB_E_H2, "the server sent GOAWAY(%s)",
                      hb_h2_code_name(f->goaway.error_code));
        if (c->cb->on_goaway)
            c->cb->on_goaway(c->ud, f->goaway.last_stream_id, f->goaway.error_code);
        break;
    default:
        break;
    }
    return 0;
}

static int cb_data_chunk(nghttp2_session *s, uint8_t flags, int32_t stream_id, const uint8_t *data,
                         size_t len, void *ud)
{
    (void)flags;
    hb_h2cli *c = ud;
    if (c->cb->on_data) {
        void *sud = nghttp2_session_get_stream_user_data(s, stream_id);
        c->cb->on_data(c->ud, sud, data, len);
    }
    return 0;
}

static int cb_stream_close(nghttp2_session *s, int32_t stream_id, uint32_t code, void *ud)
{
    hb_h2cli *c = ud;
    if (c->freeing) return 0;
    void *sud = nghttp2_session_get_stream_user_data(s, stream_id);
    int end;
    if (stream_id == c->rst_recv_id)
        end = HB_H2_END_RESET;
    else if (c->goaway_recv && stream_id > c->goaway_last)
        end = HB_H2_END_GOAWAY;
    else if (code == NGHTTP2_NO_ERROR)
        end = HB_H2_END_OK;
    else
        end = HB_H2_END_PROTOCOL;
    c->rst_recv_id = 0;
    if (c->nopen) c->nopen--;
    c->cb->on_close(c->ud, sud, end, code);
    return 0;
}

static int cb_frame_send(nghttp2_session *s, const nghttp2_frame *f, void *ud)
{
    (void)s;
    hb_h2cli *c = ud;
    /* Our own GOAWAY with an error: nghttp2 found the peer broke the protocol. */
    if (f->hd.type == NGHTTP2_GOAWAY && f->goaway.error_code != NGHTTP2_NO_ERROR && !c->fatal) {
        char why[HB_ERR_LEN];
        snprintf(why, sizeof why, "%s", c->err[0] ? c->err : "invalid frame");
        set_fatal(c, HB_E_H2, "HTTP/2 protocol error from the server (%.160s; sent GOAWAY(%s))",
                  why, hb_h2_code_name(f->goaway.error_code));
    }
    return 0;
}

static int cb_error(nghttp2_session *s, int lib_error_code, const char *msg, size_t len, void *ud)
{
    (void)s;
    (void)lib_error_code;
    hb_h2cli *c = ud;
    /* Detail for a later fatal result; stream-level errors land here too. */
    if (!c->fatal) snprintf(c->err, sizeof c->err, "%.*s", (int)len, msg);
    return 0;
}

static ssize_t body_read(nghttp2_session *s, int32_t stream_id, uint8_t *buf, size_t length,
                         uint32_t *data_flags, nghttp2_data_source *src, void *ud)
{
    (void)s;
    (void)stream_id;
    (void)ud;
    hb_h2_body *b = src->ptr;
    size_t n = b->len - b->sent;
    if (n > length) n = length;
    if (n) memcpy(buf, b->data + b->sent, n);
    b->sent += n;
    if (b->sent == b->len) *data_flags |= NGHTTP2_DATA_FLAG_EOF;
    return (ssize_t)n;
}

/* ---- nghttp2's allocations ----
 * A session allocates and frees the same few sizes for every stream (stream
 * object, frames, header copies): size-classed free lists per session keep
 * those off the general allocator, whose per-size caches are too small for
 * many streams in flight. */

#define POOL_HDR 16u   /* keeps nghttp2's 16-byte alignment */
#define POOL_CLASSES 8 /* 64 B .. 8 KiB blocks, header included */
#define POOL_KEEP 256  /* free blocks kept per class */
#define POOL_BIG 0xffu

struct hb_h2pool {
    void *head[POOL_CLASSES];
    uint32_t n[POOL_CLASSES];
};

static inline unsigned pool_class(size_t size)
{
    size_t need = size + POOL_HDR;
    if (need <= 64) return 0;
    /* smallest k with 64 << k >= need: bit length of need - 1, minus 6 */
    unsigned k = (unsigned)(64 - __builtin_clzll((unsigned long long)(need - 1))) - 6;
    return k < POOL_CLASSES ? k : POOL_BIG;
}

static void *pool_malloc(size_t size, void *ud)
{
    struct hb_h2pool *p = ud;
    if (size > SIZE_MAX - POOL_HDR) return NULL;
    unsigned k = pool_class(size);
    uint8_t *b;
    if (k != POOL_BIG && p->head[k]) {
        b = p->head[k];
        p->head[k] = *(void **)(b + POOL_HDR);
        p->n[k]--;
    } else {
        b = malloc(k == POOL_BIG ? size + POOL_HDR : (size_t)64u << k);
        if (!b) return NULL;
    }
    b[0] = (uint8_t)k;
    return b + POOL_HDR;
}

static void pool_free(void *ptr, void *ud)
{
    if (!ptr) return;
    struct hb_h2pool *p = ud;
    uint8_t *b = (uint8_t *)ptr - POOL_HDR;
    unsigned k = b[0];
    if (k == POOL_BIG || p->n[k] >= POOL_KEEP) {
        free(b);
        return;
    }
    *(void **)(b + POOL_HDR) = p->head[k];
    p->head[k] = b;
    p->n[k]++;
}

static void *pool_calloc(size_t nmemb, size_t size, void *ud)
{
    if (size && nmemb > SIZE_MAX / size) return NULL;
    void *q = pool_malloc(nmemb * size, ud);
    if (q) memset(q, 0, nmemb * size);
    return q;
}

static void *pool_realloc(void *ptr, size_t size, void *ud)
{
    if (!ptr) return pool_malloc(size, ud);
    if (size > SIZE_MAX - POOL_HDR) return NULL;
    uint8_t *b = (uint8_t *)ptr - POOL_HDR;
    unsigned k = b[0];
    if (k != POOL_BIG && size + POOL_HDR <= (size_t)64u << k) return ptr;
    if (k == POOL_BIG) {
        uint8_t *nb = realloc(b, size + POOL_HDR);
        return nb ? nb + POOL_HDR : NULL;
    }
    void *q = pool_malloc(size, ud);
    if (!q) return NULL;
    memcpy(q, ptr, ((size_t)64u << k) - POOL_HDR);
    pool_free(ptr, ud);
    return q;
}

static void pool_drain(struct hb_h2pool *p)
{
    for (unsigned k = 0; k < POOL_CLASSES; k++)
        while (p->head[k]) {
            uint8_t *b = p->head[k];
            p->head[k] = *(void **)(b + POOL_HDR);
            free(b);
        }
}

/* ---- lifecycle ---- */

int hb_h2cli_init(hb_h2cli *c, hb_sock *sock, const hb_h2cli_settings *st,
                  const hb_h2cli_callbacks *cb, void *ud, char *err)
{
    memset(c, 0, sizeof *c);
    if (!cb || !cb->on_response || !cb->on_close)
        return hb_fail(err, HB_E_INVALID, "h2: on_response and on_close are required");
    hb_h2cli_settings def = {0};
    if (!st) st = &def;
    uint32_t wbits = st->window_bits ? st->window_bits : 30;
    uint32_t cbits = st->conn_window_bits ? st->conn_window_bits : 30;
    uint32_t mfs = st->max_frame_size ? st->max_frame_size : 16384;
    if (wbits > 30 || cbits < 16 || cbits > 30 || mfs < 16384 || mfs > 16777215)
        return hb_fail(err, HB_E_INVALID,
                       "h2: window bits must be 1..30 (connection 16..30), "
                       "max frame size 16384..16777215");
    if (sock->ssl) {
        size_t n = 0;
        const char *p = hb_sock_alpn(sock, &n);
        if (!p || n != 2 || memcmp(p, "h2", 2) != 0)
            return hb_fail(err, HB_E_NO_H2,
                           "the server does not speak HTTP/2 over TLS: ALPN selected %s%.*s%s",
                           p ? "'" : "no protocol", p ? (int)n : 0, p ? p : "", p ? "'" : "");
    }
    c->sock = sock;
    c->cb = cb;
    c->ud = ud;
    c->max_streams = st->max_streams;
    c->nv_flags = st->stable_fields ? NGHTTP2_NV_FLAG_NO_COPY_NAME | NGHTTP2_NV_FLAG_NO_COPY_VALUE
                                    : NGHTTP2_NV_FLAG_NONE;
    c->rbuf = malloc(HB_H2CLI_RBUF);
    c->wbuf = malloc(HB_H2CLI_WBUF);
    c->pool = calloc(1, sizeof *c->pool);
    nghttp2_session_callbacks *cbs = NULL;
    if (!c->rbuf || !c->wbuf || !c->pool || nghttp2_session_callbacks_new(&cbs) != 0) goto nomem;
    nghttp2_session_callbacks_set_on_begin_headers_callback(cbs, cb_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(cbs, cb_header);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, cb_frame_recv);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, cb_data_chunk);
    nghttp2_session_callbacks_set_on_stream_close_callback(cbs, cb_stream_close);
    nghttp2_session_callbacks_set_on_frame_send_callback(cbs, cb_frame_send);
    nghttp2_session_callbacks_set_error_callback2(cbs, cb_error);
    /* One stream until the peer's SETTINGS say how many it takes: a burst
     * above a lower limit would be refused (nghttp2 assumes 100). */
    nghttp2_option *opt = NULL;
    if (nghttp2_option_new(&opt) != 0) {
        nghttp2_session_callbacks_del(cbs);
        goto nomem;
    }
    nghttp2_option_set_peer_max_concurrent_streams(opt, 1);
    /* No RFC 7540 priorities here: closed streams need not be kept for them. */
    nghttp2_option_set_no_closed_streams(opt, 1);
    nghttp2_mem mem = {c->pool, pool_malloc, pool_free, pool_calloc, pool_realloc};
    int rc = nghttp2_session_client_new3(&c->ng, cbs, c, opt, &mem);
    nghttp2_option_del(opt);
    nghttp2_session_callbacks_del(cbs);
    if (rc != 0) goto nomem;
    nghttp2_settings_entry iv[4] = {
        {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, (1u << wbits) - 1},
        {NGHTTP2_SETTINGS_MAX_FRAME_SIZE, mfs},
        {NGHTTP2_SETTINGS_NO_RFC7540_PRIORITIES, 1},
    };
    if (nghttp2_submit_settings(c->ng, NGHTTP2_FLAG_NONE, iv, 4) != 0) goto nomem;
    if (cbits > 16 && nghttp2_session_set_local_window_size(c->ng, NGHTTP2_FLAG_NONE, 0,
                                                            (int32_t)((1u << cbits) - 1)) != 0)
        goto nomem;
    return 0;
nomem:
    hb_h2cli_free(c);
    return hb_fail(err, HB_E_NOMEM, "h2: out of memory");
}

void hb_h2cli_free(hb_h2cli *c)
{
    c->freeing = 1;
    if (c->ng) nghttp2_session_del(c->ng);
    c->ng = NULL;
    if (c->pool) pool_drain(c->pool);
    free(c->pool);
    c->pool = NULL;
    free(c->rbuf);
    free(c->wbuf);
    c->rbuf = c->wbuf = NULL;
    c->pend = NULL;
    c->pend_len = c->wlen = c->wpos = 0;
    c->nopen = 0;
}

uint32_t hb_h2cli_peer_max_streams(hb_h2cli *c)
{
    return nghttp2_session_get_remote_settings(c->ng, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS);
}

uint32_t hb_h2cli_room(hb_h2cli *c)
{
    if (c->fatal || c->goaway_recv || !c->ng) return 0;
    uint32_t lim = hb_h2cli_peer_max_streams(c);
    if (c->max_streams && c->max_streams < lim) lim = c->max_streams;
    return lim > c->nopen ? lim - c->nopen : 0;
}

int hb_h2cli_done(hb_h2cli *c)
{
    return (c->fatal || c->goaway_recv) && c->nopen == 0;
}

int hb_h2cli_submit(hb_h2cli *c, const hb_header *fields, size_t nfields, hb_h2_body *body,
                    void *stream_ud, char *err)
{
    if (c->fatal || c->goaway_recv || !c->ng)
        return hb_fail(err, HB_E_CLOSED, "h2: the connection takes no new streams (GOAWAY)");
    if (hb_h2cli_room(c) == 0) return HB_AGAIN;
    if (nfields > MAX_FIELDS)
        return hb_fail(err, HB_E_INVALID, "h2: more than %d header fields", MAX_FIELDS);
    nghttp2_nv nv[MAX_FIELDS];
    for (size_t i = 0; i < nfields; i++) {
        nv[i].name = (uint8_t *)(uintptr_t)fields[i].name;
        nv[i].namelen = fields[i].name_len;
        nv[i].value = (uint8_t *)(uintptr_t)fields[i].value;
        nv[i].valuelen = fields[i].value_len;
        nv[i].flags = c->nv_flags;
    }
    nghttp2_data_provider prd;
    if (body) {
        body->sent = 0;
        prd.source.ptr = body;
        prd.read_callback = body_read;
    }
    int32_t id = nghttp2_submit_request(c->ng, NULL, nv, nfields, body ? &prd : NULL, stream_ud);
    if (id == NGHTTP2_ERR_NOMEM) return hb_fail(err, HB_E_NOMEM, "h2: out of memory");
    if (id == NGHTTP2_ERR_STREAM_ID_NOT_AVAILABLE)
        return hb_fail(err, HB_E_CLOSED, "h2: stream ids exhausted on this connection");
    if (id < 0) return hb_fail(err, HB_E_INVALID, "h2: %s", nghttp2_strerror(id));
    c->nopen++;
    return id;
}

void hb_h2cli_goaway(hb_h2cli *c)
{
    if (c->ng) (void)nghttp2_session_terminate_session(c->ng, NGHTTP2_NO_ERROR);
}

/* Move what nghttp2 wants to send into wbuf (callbacks may run). */
static int pack(hb_h2cli *c)
{
    if (c->wpos == c->wlen) c->wpos = c->wlen = 0;
    while (c->wlen < HB_H2CLI_WBUF) {
        if (!c->pend_len) {
            const uint8_t *p;
            ssize_t n = nghttp2_session_mem_send(c->ng, &p);
            if (n < 0) return set_fatal(c, HB_E_H2, "h2: %s", nghttp2_strerror((int)n));
            if (n == 0) break;
            c->pend = p;
            c->pend_len = (size_t)n;
        }
        size_t k = HB_H2CLI_WBUF - c->wlen;
        if (k > c->pend_len) k = c->pend_len;
        memcpy(c->wbuf + c->wlen, c->pend, k);
        c->wlen += k;
        c->pend += k;
        c->pend_len -= k;
    }
    return 0;
}

int hb_h2cli_wants_write(hb_h2cli *c)
{
    return c->ng && (c->wpos < c->wlen || c->pend_len || nghttp2_session_want_write(c->ng));
}

int hb_h2cli_write(hb_h2cli *c)
{
    if (!c->ng) return HB_E_CLOSED;
    for (;;) {
        if (c->wpos == c->wlen) {
            int rc = pack(c);
            if (rc < 0 && c->wlen == 0) return rc;
            if (c->wlen == 0) break;
        }
        ssize_t w = hb_sock_write(c->sock, c->wbuf + c->wpos, c->wlen - c->wpos);
        if (w == HB_AGAIN) return HB_AGAIN;
        if (w < 0) {
            char e[HB_ERR_LEN];
            hb_sock_errstr(c->sock, (int)w, e);
            return set_fatal(c, (int)w, "%s", e);
        }
        c->wpos += (size_t)w;
        c->bytes_out += (uint64_t)w;
    }
    return c->fatal ? c->fatal_rc : 0;
}

int hb_h2cli_read(hb_h2cli *c)
{
    if (!c->ng) return HB_E_CLOSED;
    if (c->fatal) return c->fatal_rc;
    for (;;) {
        ssize_t n = hb_sock_read(c->sock, c->rbuf, HB_H2CLI_RBUF);
        if (n == HB_AGAIN) break;
        if (n == 0) {
            if (c->goaway_recv)
                return set_fatal(c, HB_E_CLOSED, "the server closed the connection after GOAWAY");
            return set_fatal(c, HB_E_CLOSED, "connection closed by the server");
        }
        if (n < 0) {
            char e[HB_ERR_LEN];
            hb_sock_errstr(c->sock, (int)n, e);
            return set_fatal(c, (int)n, "%s", e);
        }
        c->bytes_in += (uint64_t)n;
        if (!c->preface_checked) {
            /* An HTTP/1.x server answers "PRI * HTTP/2.0" with a status line;
             * nghttp2 would call it a frame size error. */
            size_t k = (size_t)n < 5 ? (size_t)n : 5;
            if (memcmp(c->rbuf, "HTTP/", k) == 0)
                return set_fatal(c, HB_E_NO_H2,
                                 "the server does not speak HTTP/2 with prior knowledge (h2c): it "
                                 "answered the connection preface with '%.*s...'",
                                 n < 12 ? (int)n : 12, (const char *)c->rbuf);
            c->preface_checked = 1;
        }
        ssize_t k = nghttp2_session_mem_recv(c->ng, c->rbuf, (size_t)n);
        if (k < 0) return set_fatal(c, HB_E_H2, "h2: %s", nghttp2_strerror((int)k));
        if (c->fatal) return c->fatal_rc;
        if (c->short_read_drains &&
            (c->sock->ssl ? !hb_sock_has_buffered(c->sock) : (size_t)n < HB_H2CLI_RBUF))
            break;
    }
    if (c->goaway_recv && c->nopen == 0 && !hb_h2cli_wants_write(c))
        return set_fatal(c, HB_E_CLOSED, "the server sent GOAWAY");
    return HB_AGAIN;
}
