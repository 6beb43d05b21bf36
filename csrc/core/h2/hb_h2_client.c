/* hb_h2_client.c - HTTP/2 client session over hb_sock (see hb_h2_client.h):
 * its lifecycle, requests and output; input is hb_h2_client_read.c's. */
#include "h2/hb_h2_client_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
int hb__h2c_fatal(hb_h2_client *c, int rc, const char *fmt, ...)
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

/* ---- output buffer ---- */

/* Room for n more bytes at wbuf + wlen, or NULL (out of memory or flooded). */
static uint8_t *out_reserve(hb_h2_client *c, size_t n)
{
    if (c->wpos && c->wpos == c->wlen) c->wpos = c->wlen = 0;
    if (c->wcap - c->wlen >= n) return c->wbuf + c->wlen;
    if (c->wpos) { /* compact: what is unsent moves to the front */
        memmove(c->wbuf, c->wbuf + c->wpos, c->wlen - c->wpos);
        c->wlen -= c->wpos;
        c->wpos = 0;
        if (c->wcap - c->wlen >= n) return c->wbuf + c->wlen;
    }
    size_t need = c->wlen + n, cap = c->wcap;
    if (need > MAX_WBUF) return NULL;
    while (cap < need)
        cap *= 2;
    uint8_t *nb = realloc(c->wbuf, cap);
    if (!nb) return NULL;
    c->wbuf = nb;
    c->wcap = cap;
    return c->wbuf + c->wlen;
}

int hb__h2c_queue_frame(hb_h2_client *c, uint8_t type, uint8_t flags, int32_t sid,
                        const uint8_t *pl, size_t len)
{
    uint8_t *p = out_reserve(c, 9 + len);
    if (!p) return -1;
    hb_h2_put_fh(p, (uint32_t)len, type, flags, sid);
    if (len) memcpy(p + 9, pl, len);
    c->wlen += 9 + len;
    return 0;
}

int hb__h2c_queue_u32(hb_h2_client *c, uint8_t type, int32_t sid, uint32_t v)
{
    uint8_t pl[4];
    hb_h2_put32(pl, v);
    return hb__h2c_queue_frame(c, type, 0, sid, pl, 4);
}

/* Write what is queued once, without waiting (a GOAWAY before we give up). */
static void flush_best_effort(hb_h2_client *c)
{
    while (c->wpos < c->wlen) {
        ssize_t w = hb_sock_write(c->sock, c->wbuf + c->wpos, c->wlen - c->wpos);
        if (w <= 0) return;
        c->wpos += (size_t)w;
        c->bytes_out += (uint64_t)w;
    }
}

/* A connection error of the peer's: GOAWAY(code), then the session is over. */
int hb__h2c_conn_error(hb_h2_client *c, uint32_t code, const char *fmt, ...)
{
    if (c->fatal) return c->fatal_rc;
    char why[HB_ERR_LEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    uint8_t pl[8];
    hb_h2_put32(pl, 0); /* we process no stream of the server's */
    hb_h2_put32(pl + 4, code);
    if (!c->goaway_sent && hb__h2c_queue_frame(c, HB_H2_F_GOAWAY, 0, 0, pl, 8) == 0) {
        c->goaway_sent = 1;
        flush_best_effort(c);
    }
    return hb__h2c_fatal(c, HB_E_H2,
                         "HTTP/2 protocol error from the server (%.160s; sent GOAWAY(%s))", why,
                         hb_h2_code_name(code));
}

/* ---- streams ---- */

static void index_add(hb_h2_client *c, hb_h2stream *s, uint32_t slot)
{
    int32_t *cell = &c->index[((uint32_t)s->id >> 1) & c->index_mask];
    if (*cell) {
        s->overflow = 1;
        c->noverflow++;
    } else {
        *cell = (int32_t)slot + 1;
    }
}

static void index_del(hb_h2_client *c, hb_h2stream *s)
{
    if (s->overflow) {
        s->overflow = 0;
        c->noverflow--;
    } else {
        c->index[((uint32_t)s->id >> 1) & c->index_mask] = 0;
    }
}

/* Remove s and tell the caller how it ended (exactly once per stream). */
void hb__h2c_close_stream(hb_h2_client *c, hb_h2stream *s, int end, uint32_t code)
{
    void *ud = s->ud;
    if (s->in_body_list) c->nbody--;
    index_del(c, s);
    s->id = 0;
    s->body = NULL;
    s->in_body_list = 0;
    c->free_slots[c->nfree++] = (uint32_t)(s - c->slots);
    c->nopen--;
    c->cb->on_close(c->ud, ud, end, code);
}

/* A stream error: RST_STREAM(code) and the stream ends HB_H2_END_PROTOCOL. */
int hb__h2c_stream_error(hb_h2_client *c, hb_h2stream *s, uint32_t code, const char *fmt, ...)
{
    if (!c->fatal) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->err, sizeof c->err, fmt, ap);
        va_end(ap);
    }
    if (hb__h2c_queue_u32(c, HB_H2_F_RST_STREAM, s->id, code) != 0)
        return hb__h2c_fatal(c, HB_E_NOMEM, "h2: out of memory");
    hb__h2c_close_stream(c, s, HB_H2_END_PROTOCOL, code);
    return 0;
}

/* ---- lifecycle ---- */

int hb_h2_client_init(hb_h2_client *c, hb_sock *sock, const hb_h2_client_settings *st,
                      const hb_h2_client_callbacks *cb, void *ud, char *err)
{
    memset(c, 0, sizeof *c);
    if (!cb || !cb->on_response || !cb->on_close)
        return hb_fail(err, HB_E_INVALID, "h2: on_response and on_close are required");
    hb_h2_client_settings def = {0};
    if (!st) st = &def;
    uint32_t wbits = st->window_bits ? st->window_bits : 30;
    uint32_t cbits = st->conn_window_bits ? st->conn_window_bits : 30;
    uint32_t mfs = st->max_frame_size ? st->max_frame_size : 16384;
    if (wbits > 30 || cbits < 16 || cbits > 30 || mfs < 16384 || mfs > 16777215)
        return hb_fail(err, HB_E_INVALID,
                       "h2: window bits must be 1..30 (connection 16..30), "
                       "max frame size 16384..16777215");
    if (st->max_streams > (1u << 20))
        return hb_fail(err, HB_E_INVALID, "h2: at most 1048576 streams per connection");
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
    c->max_streams = st->max_streams ? st->max_streams : DEFAULT_STREAMS;
    c->stable_fields = st->stable_fields;
    c->stream_window = (1u << wbits) - 1;
    c->conn_window = (1u << cbits) - 1;
    c->max_frame = mfs;
    c->peer_max_streams = 1; /* until its SETTINGS say */
    c->peer_init_window = HB_H2_DEFAULT_WINDOW;
    c->peer_max_frame = 16384;
    c->conn_send_window = HB_H2_DEFAULT_WINDOW;
    c->next_id = 1;
    uint32_t cells = 2;
    while (cells < 2 * c->max_streams)
        cells *= 2;
    c->index_mask = cells - 1;
    c->live = 1;
    c->slots = calloc(c->max_streams, sizeof *c->slots);
    c->free_slots = malloc(c->max_streams * sizeof *c->free_slots);
    c->index = calloc(cells, sizeof *c->index);
    c->rbuf = malloc(HB_H2_CLIENT_RBUF);
    c->wcap = HB_H2_CLIENT_WBUF;
    c->wbuf = malloc(c->wcap);
    if (!c->slots || !c->free_slots || !c->index || !c->rbuf || !c->wbuf ||
        hb_h2_hpack_dec_init(&c->hpack, HB_H2_HPACK_DEFAULT_TABLE) != 0)
        goto nomem;
    for (uint32_t i = 0; i < c->max_streams; i++)
        c->free_slots[i] = c->max_streams - 1 - i;
    c->nfree = c->max_streams;
    /* Preface, SETTINGS (no push, our windows and frame size, no RFC 7540
     * priorities), and the connection window beyond the default. */
    uint8_t *p = out_reserve(c, 24 + 9 + 24 + 13);
    if (!p) goto nomem;
    memcpy(p, HB_H2_PREFACE, 24);
    uint8_t *s = p + 24 + 9;
    static const uint16_t ids[4] = {0x2, 0x4, 0x5, 0x9};
    uint32_t vals[4] = {0, c->stream_window, mfs, 1};
    for (int i = 0; i < 4; i++) {
        s[6 * i] = (uint8_t)(ids[i] >> 8);
        s[6 * i + 1] = (uint8_t)ids[i];
        hb_h2_put32(s + 6 * i + 2, vals[i]);
    }
    hb_h2_put_fh(p + 24, 24, HB_H2_F_SETTINGS, 0, 0);
    c->wlen = 24 + 9 + 24;
    if (c->conn_window > HB_H2_DEFAULT_WINDOW) {
        hb_h2_put_fh(p + c->wlen, 4, HB_H2_F_WINDOW_UPDATE, 0, 0);
        hb_h2_put32(p + c->wlen + 9, c->conn_window - HB_H2_DEFAULT_WINDOW);
        c->wlen += 13;
    }
    return 0;
nomem:
    hb_h2_client_free(c);
    return hb_fail(err, HB_E_NOMEM, "h2: out of memory");
}

void hb_h2_client_free(hb_h2_client *c)
{
    free(c->slots);
    free(c->free_slots);
    free(c->index);
    free(c->rbuf);
    free(c->wbuf);
    free(c->hblock);
    free(c->scratch);
    free(c->enc_block);
    hb_h2_hpack_dec_free(&c->hpack);
    c->slots = NULL;
    c->free_slots = NULL;
    c->index = NULL;
    c->rbuf = c->wbuf = c->hblock = c->scratch = c->enc_block = NULL;
    c->wlen = c->wpos = c->wcap = 0;
    c->hblock_len = c->hblock_cap = c->scratch_cap = c->enc_len = c->enc_cap = 0;
    c->enc_fields = NULL;
    c->nopen = c->nfree = c->nbody = 0;
    c->live = 0;
}

uint32_t hb_h2_client_peer_max_streams(hb_h2_client *c)
{
    return c->peer_max_streams;
}

uint32_t hb_h2_client_room(hb_h2_client *c)
{
    if (c->fatal || c->goaway_recv || c->goaway_sent || !c->live) return 0;
    uint32_t lim = c->peer_max_streams;
    if (c->max_streams < lim) lim = c->max_streams;
    return lim > c->nopen ? lim - c->nopen : 0;
}

int hb_h2_client_done(hb_h2_client *c)
{
    return (c->fatal || c->goaway_recv) && c->nopen == 0;
}

/* Is this field list a HEAD request? (pseudo-headers come first) */
static int is_head(const hb_header *f, size_t n)
{
    for (size_t i = 0; i < n && f[i].name_len && f[i].name[0] == ':'; i++)
        if (f[i].name_len == 7 && memcmp(f[i].name, ":method", 7) == 0)
            return f[i].value_len == 4 && memcmp(f[i].value, "HEAD", 4) == 0;
    return 0;
}

/* Queue HEADERS (+ CONTINUATION) for stream id with the encoded block. */
static int queue_headers(hb_h2_client *c, int32_t id, const uint8_t *blk, size_t len,
                         int end_stream)
{
    size_t mfs = c->peer_max_frame, nframes = len ? (len + mfs - 1) / mfs : 1;
    uint8_t *p = out_reserve(c, len + 9 * nframes);
    if (!p) return -1;
    size_t off = 0;
    for (size_t k = 0; k < nframes; k++) {
        size_t take = len - off < mfs ? len - off : mfs;
        uint8_t fl = k == nframes - 1 ? HB_H2_FL_END_HEADERS : 0;
        if (k == 0 && end_stream) fl |= HB_H2_FL_END_STREAM;
        hb_h2_put_fh(p, (uint32_t)take, k ? HB_H2_F_CONTINUATION : HB_H2_F_HEADERS, fl, id);
        memcpy(p + 9, blk + off, take);
        p += 9 + take;
        off += take;
    }
    c->wlen += len + 9 * nframes;
    return 0;
}

int hb_h2_client_submit(hb_h2_client *c, const hb_header *fields, size_t nfields, hb_h2_body *body,
                        void *stream_ud, char *err)
{
    if (c->fatal || c->goaway_recv || c->goaway_sent || !c->live)
        return hb_fail(err, HB_E_CLOSED, "h2: the connection takes no new streams (GOAWAY)");
    if (hb_h2_client_room(c) == 0) return HB_AGAIN;
    if (c->next_id <= 0 || c->next_id > (int32_t)HB_H2_MAX_WINDOW - 2)
        return hb_fail(err, HB_E_CLOSED, "h2: stream ids exhausted on this connection");
    /* The block: cached while the caller passes the same stable fields. */
    const uint8_t *blk;
    size_t blen;
    if (c->stable_fields && fields == c->enc_fields && nfields == c->enc_nfields) {
        blk = c->enc_block;
        blen = c->enc_len;
    } else {
        for (size_t i = 0; i < nfields; i++)
            if (!fields[i].name_len)
                return hb_fail(err, HB_E_INVALID, "h2: empty header field name");
        size_t need = hb_h2_hpack_encode_bound(fields, nfields);
        if (need > c->enc_cap) {
            uint8_t *nb = realloc(c->enc_block, need);
            if (!nb) return hb_fail(err, HB_E_NOMEM, "h2: out of memory");
            c->enc_block = nb;
            c->enc_cap = need;
        }
        ssize_t n = hb_h2_hpack_encode(fields, nfields, c->enc_block, c->enc_cap);
        if (n < 0) return hb_fail(err, HB_E_INVALID, "h2: header fields could not be encoded");
        blk = c->enc_block;
        blen = (size_t)n;
        c->enc_len = blen;
        c->enc_fields = c->stable_fields ? fields : NULL;
        c->enc_nfields = nfields;
        c->enc_head = is_head(fields, nfields);
    }
    int has_body = body && body->len > 0;
    int32_t id = c->next_id;
    if (queue_headers(c, id, blk, blen, !has_body) != 0)
        return hb_fail(err, HB_E_NOMEM, "h2: out of memory");
    c->next_id += 2;
    uint32_t slot = c->free_slots[--c->nfree];
    hb_h2stream *s = &c->slots[slot];
    memset(s, 0, sizeof *s);
    s->id = id;
    s->ud = stream_ud;
    s->send_window = c->peer_init_window;
    s->content_length = -1;
    s->head = (uint8_t)c->enc_head;
    if (has_body) {
        body->sent = 0;
        s->body = body;
        s->in_body_list = 1;
        c->nbody++;
    }
    index_add(c, s, slot);
    c->nopen++;
    return id;
}

void hb_h2_client_goaway(hb_h2_client *c)
{
    if (!c->live || c->goaway_sent) return;
    uint8_t pl[8];
    hb_h2_put32(pl, 0);
    hb_h2_put32(pl + 4, HB_H2_E_NO_ERROR);
    if (hb__h2c_queue_frame(c, HB_H2_F_GOAWAY, 0, 0, pl, 8) == 0) c->goaway_sent = 1;
}

/* ---- request bodies ---- */

static int body_sendable(hb_h2_client *c)
{
    if (!c->nbody || c->conn_send_window <= 0) return 0;
    for (uint32_t i = 0; i < c->max_streams; i++) {
        const hb_h2stream *s = &c->slots[i];
        if (s->id && s->body && s->send_window > 0) return 1;
    }
    return 0;
}

/* Queue DATA frames for bodies as windows allow (up to about 64 KiB). */
static int pack_bodies(hb_h2_client *c)
{
    size_t budget = 65536;
    for (uint32_t i = 0; i < c->max_streams && c->nbody && budget; i++) {
        hb_h2stream *s = &c->slots[i];
        while (s->id && s->body && s->send_window > 0 && c->conn_send_window > 0 && budget) {
            hb_h2_body *b = s->body;
            size_t n = b->len - b->sent;
            if (n > c->peer_max_frame) n = c->peer_max_frame;
            if ((int64_t)n > s->send_window) n = (size_t)s->send_window;
            if ((int64_t)n > c->conn_send_window) n = (size_t)c->conn_send_window;
            if (n > budget) n = budget;
            int last = b->sent + n == b->len;
            if (hb__h2c_queue_frame(c, HB_H2_F_DATA, last ? HB_H2_FL_END_STREAM : 0, s->id,
                                    (const uint8_t *)b->data + b->sent, n) != 0)
                return hb__h2c_fatal(c, HB_E_NOMEM, "h2: out of memory");
            b->sent += n;
            s->send_window -= (int64_t)n;
            c->conn_send_window -= (int64_t)n;
            budget -= n;
            if (last) {
                s->body = NULL;
                s->in_body_list = 0;
                c->nbody--;
            }
        }
    }
    return 0;
}

int hb_h2_client_wants_write(hb_h2_client *c)
{
    return c->live && (c->wpos < c->wlen || body_sendable(c));
}

int hb_h2_client_write(hb_h2_client *c)
{
    if (!c->live) return HB_E_CLOSED;
    for (;;) {
        if (c->wpos == c->wlen) {
            c->wpos = c->wlen = 0;
            if (c->fatal) break;
            if (body_sendable(c) && pack_bodies(c) < 0) return c->fatal_rc;
            if (c->wlen == 0) break;
        }
        ssize_t w = hb_sock_write(c->sock, c->wbuf + c->wpos, c->wlen - c->wpos);
        if (w == HB_AGAIN) return HB_AGAIN;
        if (w < 0) {
            char e[HB_ERR_LEN];
            hb_sock_errstr(c->sock, (int)w, e);
            return hb__h2c_fatal(c, (int)w, "%s", e);
        }
        c->wpos += (size_t)w;
        c->bytes_out += (uint64_t)w;
    }
    return c->fatal ? c->fatal_rc : 0;
}
