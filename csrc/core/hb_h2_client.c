/* hb_h2_client.c - HTTP/2 client session over hb_sock (see hb_h2_client.h). */
#include "hb_h2_client.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Frame types and flags (RFC 9113 section 6). */
enum {
    F_DATA = 0,
    F_HEADERS = 1,
    F_PRIORITY = 2,
    F_RST_STREAM = 3,
    F_SETTINGS = 4,
    F_PUSH_PROMISE = 5,
    F_PING = 6,
    F_GOAWAY = 7,
    F_WINDOW_UPDATE = 8,
    F_CONTINUATION = 9,
};
#define FL_END_STREAM 0x1
#define FL_ACK 0x1
#define FL_END_HEADERS 0x4
#define FL_PADDED 0x8
#define FL_PRIORITY 0x20

/* Error codes (section 7). */
enum {
    E_NO_ERROR = 0,
    E_PROTOCOL = 1,
    E_INTERNAL = 2,
    E_FLOW_CONTROL = 3,
    E_STREAM_CLOSED = 5,
    E_FRAME_SIZE = 6,
    E_REFUSED_STREAM = 7,
    E_CANCEL = 8,
    E_COMPRESSION = 9,
    E_ENHANCE_YOUR_CALM = 11,
};

#define MAX_WINDOW 0x7fffffffu
#define DEFAULT_WINDOW 65535u
#define MAX_BLOCK (1u << 20) /* a header block beyond this ends the connection */
#define MAX_LIST (1u << 20)  /* a header list beyond this resets the stream */
#define MAX_WBUF (16u << 20) /* queued output beyond this: the peer floods us */
#define DEFAULT_STREAMS 256u /* table size when settings.max_streams is 0 */
/* Limits on what a server may send that makes us work without progress:
 * CONTINUATION frames per header block (a 1 MiB block needs 64 of 16 KiB)
 * and informational (1xx) responses per stream. */
#define MAX_CONTINUATIONS 128u
#define MAX_1XX 16u
#define PREFACE "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

/* Parser states for the payload of the current frame. */
enum { S_HEADER = 0, S_PAYLOAD };

typedef struct hb_h2stream {
    int32_t id; /* 0: slot free */
    void *ud;
    hb_h2_body *body;       /* request body still to send (NULL: done) */
    int64_t send_window;    /* may go negative after a SETTINGS change */
    uint32_t recv_unacked;  /* DATA bytes not yet given back */
    int status;             /* final status once its header block is in (0: none yet) */
    int64_t content_length; /* -1: none */
    uint64_t data_len;
    uint8_t head; /* a HEAD request: no body whatever content-length says */
    uint8_t in_body_list;
    uint8_t overflow; /* not in its index cell (see find) */
    uint8_t n1xx;     /* informational responses so far */
} hb_h2stream;

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

static inline uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}
static inline void put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}
static inline void put_fh(uint8_t *p, uint32_t len, uint8_t type, uint8_t flags, int32_t sid)
{
    p[0] = (uint8_t)(len >> 16);
    p[1] = (uint8_t)(len >> 8);
    p[2] = (uint8_t)len;
    p[3] = type;
    p[4] = flags;
    put32(p + 5, (uint32_t)sid & MAX_WINDOW);
}

/* Record the first connection-fatal condition; returns rc. */
__attribute__((format(printf, 3, 4))) static int set_fatal(hb_h2_client *c, int rc, const char *fmt,
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

static int queue_frame(hb_h2_client *c, uint8_t type, uint8_t flags, int32_t sid, const uint8_t *pl,
                       size_t len)
{
    uint8_t *p = out_reserve(c, 9 + len);
    if (!p) return -1;
    put_fh(p, (uint32_t)len, type, flags, sid);
    if (len) memcpy(p + 9, pl, len);
    c->wlen += 9 + len;
    return 0;
}

static int queue_u32(hb_h2_client *c, uint8_t type, int32_t sid, uint32_t v)
{
    uint8_t pl[4];
    put32(pl, v);
    return queue_frame(c, type, 0, sid, pl, 4);
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
__attribute__((format(printf, 3, 4))) static int conn_error(hb_h2_client *c, uint32_t code,
                                                            const char *fmt, ...)
{
    if (c->fatal) return c->fatal_rc;
    char why[HB_ERR_LEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    uint8_t pl[8];
    put32(pl, 0); /* we process no stream of the server's */
    put32(pl + 4, code);
    if (!c->goaway_sent && queue_frame(c, F_GOAWAY, 0, 0, pl, 8) == 0) {
        c->goaway_sent = 1;
        flush_best_effort(c);
    }
    return set_fatal(c, HB_E_H2, "HTTP/2 protocol error from the server (%.160s; sent GOAWAY(%s))",
                     why, hb_h2_code_name(code));
}

/* ---- streams ---- */

/* Stream ids are sequential, so (id / 2) modulo a table of twice the
 * streams in flight is a direct map; a stream still open when a later id
 * wants its cell (rare: one stream outlives many) is marked overflow and
 * found by a scan of the slots. */
static hb_h2stream *find(hb_h2_client *c, int32_t id)
{
    int32_t k = c->index[((uint32_t)id >> 1) & c->index_mask];
    if (k && c->slots[k - 1].id == id) return &c->slots[k - 1];
    if (!c->noverflow) return NULL;
    for (uint32_t i = 0; i < c->max_streams; i++)
        if (c->slots[i].id == id && c->slots[i].overflow) return &c->slots[i];
    return NULL;
}

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
static void close_stream(hb_h2_client *c, hb_h2stream *s, int end, uint32_t code)
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
__attribute__((format(printf, 4, 5))) static int stream_error(hb_h2_client *c, hb_h2stream *s,
                                                              uint32_t code, const char *fmt, ...)
{
    if (!c->fatal) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->err, sizeof c->err, fmt, ap);
        va_end(ap);
    }
    if (queue_u32(c, F_RST_STREAM, s->id, code) != 0)
        return set_fatal(c, HB_E_NOMEM, "h2: out of memory");
    close_stream(c, s, HB_H2_END_PROTOCOL, code);
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
    c->peer_init_window = DEFAULT_WINDOW;
    c->peer_max_frame = 16384;
    c->conn_send_window = DEFAULT_WINDOW;
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
    memcpy(p, PREFACE, 24);
    uint8_t *s = p + 24 + 9;
    static const uint16_t ids[4] = {0x2, 0x4, 0x5, 0x9};
    uint32_t vals[4] = {0, c->stream_window, mfs, 1};
    for (int i = 0; i < 4; i++) {
        s[6 * i] = (uint8_t)(ids[i] >> 8);
        s[6 * i + 1] = (uint8_t)ids[i];
        put32(s + 6 * i + 2, vals[i]);
    }
    put_fh(p + 24, 24, F_SETTINGS, 0, 0);
    c->wlen = 24 + 9 + 24;
    if (c->conn_window > DEFAULT_WINDOW) {
        put_fh(p + c->wlen, 4, F_WINDOW_UPDATE, 0, 0);
        put32(p + c->wlen + 9, c->conn_window - DEFAULT_WINDOW);
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
        uint8_t fl = k == nframes - 1 ? FL_END_HEADERS : 0;
        if (k == 0 && end_stream) fl |= FL_END_STREAM;
        put_fh(p, (uint32_t)take, k ? F_CONTINUATION : F_HEADERS, fl, id);
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
    if (c->next_id <= 0 || c->next_id > (int32_t)MAX_WINDOW - 2)
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
    put32(pl, 0);
    put32(pl + 4, E_NO_ERROR);
    if (queue_frame(c, F_GOAWAY, 0, 0, pl, 8) == 0) c->goaway_sent = 1;
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
            if (queue_frame(c, F_DATA, last ? FL_END_STREAM : 0, s->id,
                            (const uint8_t *)b->data + b->sent, n) != 0)
                return set_fatal(c, HB_E_NOMEM, "h2: out of memory");
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
            return set_fatal(c, (int)w, "%s", e);
        }
        c->wpos += (size_t)w;
        c->bytes_out += (uint64_t)w;
    }
    return c->fatal ? c->fatal_rc : 0;
}

/* ---- header blocks ---- */

typedef struct blockctx {
    hb_h2_client *c;
    hb_h2stream *s; /* NULL: a stream we no longer track (decode for HPACK only) */
    int trailers;   /* the stream's final response is already in */
    int status;     /* :status of this block */
    int regular;    /* a regular field was seen */
    int bad;        /* first problem found (the rest of the block is still decoded) */
    char why[120];
} blockctx;

__attribute__((format(printf, 2, 3))) static void bad_field(blockctx *b, const char *fmt, ...)
{
    if (b->bad) return;
    b->bad = 1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b->why, sizeof b->why, fmt, ap);
    va_end(ap);
}

/* RFC 9110 token characters, lowercase only (RFC 9113 section 8.2.1). */
static const uint8_t NAME_OK[256] = {
    ['!'] = 1, ['#'] = 1, ['$'] = 1, ['%'] = 1, ['&'] = 1, ['\''] = 1, ['*'] = 1, ['+'] = 1,
    ['-'] = 1, ['.'] = 1, ['^'] = 1, ['_'] = 1, ['`'] = 1, ['|'] = 1,  ['~'] = 1, ['0'] = 1,
    ['1'] = 1, ['2'] = 1, ['3'] = 1, ['4'] = 1, ['5'] = 1, ['6'] = 1,  ['7'] = 1, ['8'] = 1,
    ['9'] = 1, ['a'] = 1, ['b'] = 1, ['c'] = 1, ['d'] = 1, ['e'] = 1,  ['f'] = 1, ['g'] = 1,
    ['h'] = 1, ['i'] = 1, ['j'] = 1, ['k'] = 1, ['l'] = 1, ['m'] = 1,  ['n'] = 1, ['o'] = 1,
    ['p'] = 1, ['q'] = 1, ['r'] = 1, ['s'] = 1, ['t'] = 1, ['u'] = 1,  ['v'] = 1, ['w'] = 1,
    ['x'] = 1, ['y'] = 1, ['z'] = 1,
};

/* Any byte equal to 0, CR or LF in the 8 bytes of w? (bit tricks on a word) */
static inline uint64_t has_ctl(uint64_t w)
{
    const uint64_t ones = 0x0101010101010101ull, high = 0x8080808080808080ull;
    uint64_t cr = w ^ (ones * '\r'), lf = w ^ (ones * '\n');
    return ((w - ones) & ~w & high) | ((cr - ones) & ~cr & high) | ((lf - ones) & ~lf & high);
}

static int value_ok(const char *v, size_t n)
{
    if (n && (v[0] == ' ' || v[0] == '\t' || v[n - 1] == ' ' || v[n - 1] == '\t')) return 0;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, v + i, 8);
        if (has_ctl(w)) return 0;
    }
    for (; i < n; i++) {
        unsigned char ch = (unsigned char)v[i];
        if (ch == 0 || ch == '\r' || ch == '\n') return 0;
    }
    return 1;
}

static int name_is(const char *n, size_t nl, const char *lit, size_t ll)
{
    return nl == ll && memcmp(n, lit, ll) == 0;
}

static void on_field(void *ud, const char *n, size_t nl, const char *v, size_t vl)
{
    blockctx *b = ud;
    if (!b->s || b->bad) return;
    if (nl == 0) return bad_field(b, "an empty field name");
    if (n[0] == ':') {
        if (b->trailers) return bad_field(b, "pseudo-header %.*s in trailers", (int)nl, n);
        if (b->regular) return bad_field(b, "pseudo-header %.*s after a regular field", (int)nl, n);
        if (!name_is(n, nl, ":status", 7))
            return bad_field(b, "pseudo-header %.*s in a response", (int)nl, n);
        if (b->status) return bad_field(b, "two :status fields");
        if (vl != 3 || v[0] < '1' || v[0] > '9' || v[1] < '0' || v[1] > '9' || v[2] < '0' ||
            v[2] > '9')
            return bad_field(b, "bad :status '%.*s'", (int)(vl < 16 ? vl : 16), v);
        b->status = (v[0] - '0') * 100 + (v[1] - '0') * 10 + (v[2] - '0');
        if (b->status == 101) return bad_field(b, ":status 101 over HTTP/2");
        return;
    }
    b->regular = 1;
    for (size_t i = 0; i < nl; i++)
        if (!NAME_OK[(unsigned char)n[i]])
            return bad_field(b, "invalid field name '%.*s'", (int)(nl < 40 ? nl : 40), n);
    if (!value_ok(v, vl)) return bad_field(b, "invalid value of %.*s", (int)(nl < 40 ? nl : 40), n);
    switch (nl) {
    case 2:
        if (name_is(n, nl, "te", 2) && !(vl == 8 && memcmp(v, "trailers", 8) == 0))
            return bad_field(b, "te other than 'trailers'");
        break;
    case 7:
        if (name_is(n, nl, "upgrade", 7)) return bad_field(b, "connection-specific field upgrade");
        break;
    case 10:
        if (name_is(n, nl, "connection", 10) || name_is(n, nl, "keep-alive", 10))
            return bad_field(b, "connection-specific field %.*s", (int)nl, n);
        break;
    case 14:
        if (!b->trailers && name_is(n, nl, "content-length", 14)) {
            if (vl == 0 || vl > 18) return bad_field(b, "bad content-length");
            int64_t len = 0;
            for (size_t i = 0; i < vl; i++) {
                if (v[i] < '0' || v[i] > '9') return bad_field(b, "bad content-length");
                len = len * 10 + (v[i] - '0');
            }
            if (b->s->content_length >= 0 && b->s->content_length != len)
                return bad_field(b, "two different content-length values");
            b->s->content_length = len;
        }
        break;
    case 16:
        if (name_is(n, nl, "proxy-connection", 16))
            return bad_field(b, "connection-specific field proxy-connection");
        break;
    case 17:
        if (name_is(n, nl, "transfer-encoding", 17))
            return bad_field(b, "connection-specific field transfer-encoding");
        break;
    default:
        break;
    }
    /* :status is first, so a final response's fields are known final here */
    if (b->status >= 200 && !b->trailers && b->c->cb->on_header)
        b->c->cb->on_header(b->c->ud, b->s->ud, n, nl, v, vl);
}

/* A response may carry no body: HEAD, 204, 304. */
static int bodiless(const hb_h2stream *s)
{
    return s->head || s->status == 204 || s->status == 304;
}

/* The stream's END_STREAM arrived: check the length, then it is done. */
static int end_of_response(hb_h2_client *c, hb_h2stream *s)
{
    if (!bodiless(s) && s->content_length >= 0 && (uint64_t)s->content_length != s->data_len)
        return stream_error(c, s, E_PROTOCOL, "content-length %lld but %llu bytes of DATA",
                            (long long)s->content_length, (unsigned long long)s->data_len);
    if (s->body) /* the server answered before our body was all sent: stop sending it */
        if (queue_u32(c, F_RST_STREAM, s->id, E_NO_ERROR) != 0)
            return set_fatal(c, HB_E_NOMEM, "h2: out of memory");
    close_stream(c, s, HB_H2_END_OK, E_NO_ERROR);
    return 0;
}

/* A whole header block for stream sid. */
static int header_block(hb_h2_client *c, int32_t sid, const uint8_t *blk, size_t len,
                        int end_stream)
{
    hb_h2stream *s = find(c, sid);
    blockctx b = {c, s, s && s->status > 0, 0, 0, 0, {0}};
    size_t need = hb_h2_hpack_scratch_need(len);
    if (need > c->scratch_cap) {
        uint8_t *ns = realloc(c->scratch, need);
        if (!ns) return set_fatal(c, HB_E_NOMEM, "h2: out of memory");
        c->scratch = ns;
        c->scratch_cap = need;
    }
    char herr[HB_ERR_LEN];
    int rc = hb_h2_hpack_decode(&c->hpack, blk, len, c->scratch, MAX_LIST, on_field, &b, herr);
    if (rc < 0) return conn_error(c, E_COMPRESSION, "%s", herr);
    if (!s) return 0;
    if (rc == HB_H2_HPACK_TOO_LARGE) bad_field(&b, "header list over %u bytes", MAX_LIST);
    if (b.bad) return stream_error(c, s, E_PROTOCOL, "%s", b.why);
    if (b.trailers) {
        if (!end_stream) return stream_error(c, s, E_PROTOCOL, "trailers without END_STREAM");
        return end_of_response(c, s);
    }
    if (!b.status) return stream_error(c, s, E_PROTOCOL, "a response without :status");
    if (b.status < 200) { /* informational: the final response follows */
        s->content_length = -1;
        if (end_stream) return stream_error(c, s, E_PROTOCOL, "a 1xx response ends the stream");
        if (++s->n1xx > MAX_1XX)
            return stream_error(c, s, E_ENHANCE_YOUR_CALM, "more than %u 1xx responses", MAX_1XX);
        return 0;
    }
    s->status = b.status;
    c->cb->on_response(c->ud, s->ud, b.status);
    if (end_stream) return end_of_response(c, s);
    return 0;
}

/* ---- frames ---- */

static int is_idle(const hb_h2_client *c, int32_t sid)
{
    return (sid & 1) == 0 || sid >= c->next_id;
}

static int apply_setting(hb_h2_client *c, const uint8_t *e)
{
    uint16_t id = (uint16_t)(e[0] << 8 | e[1]);
    uint32_t v = get32(e + 2);
    switch (id) {
    case 0x2: /* ENABLE_PUSH */
        if (v != 0) return conn_error(c, E_PROTOCOL, "SETTINGS_ENABLE_PUSH %u from a server", v);
        break;
    case 0x3: /* MAX_CONCURRENT_STREAMS */
        c->peer_max_streams = v;
        break;
    case 0x4: /* INITIAL_WINDOW_SIZE */ {
        if (v > MAX_WINDOW)
            return conn_error(c, E_FLOW_CONTROL, "SETTINGS_INITIAL_WINDOW_SIZE %u", v);
        int64_t delta = (int64_t)v - c->peer_init_window;
        c->peer_init_window = v;
        for (uint32_t i = 0; i < c->max_streams; i++) {
            hb_h2stream *s = &c->slots[i];
            if (!s->id) continue;
            s->send_window += delta;
            if (s->send_window > MAX_WINDOW)
                return conn_error(c, E_FLOW_CONTROL, "a stream window over 2^31-1");
        }
        break;
    }
    case 0x5: /* MAX_FRAME_SIZE */
        if (v < 16384 || v > 16777215)
            return conn_error(c, E_PROTOCOL, "SETTINGS_MAX_FRAME_SIZE %u", v);
        c->peer_max_frame = v;
        break;
    case 0x9: /* NO_RFC7540_PRIORITIES */
        if (v > 1) return conn_error(c, E_PROTOCOL, "SETTINGS_NO_RFC7540_PRIORITIES %u", v);
        break;
    default: /* HEADER_TABLE_SIZE (we never index), MAX_HEADER_LIST_SIZE, unknown */
        break;
    }
    return 0;
}

static void close_above(hb_h2_client *c, int32_t last, uint32_t code)
{
    for (uint32_t i = 0; i < c->max_streams; i++) {
        hb_h2stream *s = &c->slots[i];
        if (s->id && s->id > last) close_stream(c, s, HB_H2_END_GOAWAY, code);
    }
}

/* A frame header is in c->fh: check it and set up its payload. */
static int frame_begin(hb_h2_client *c)
{
    const uint8_t *h = c->fh;
    c->flen = (uint32_t)h[0] << 16 | (uint32_t)h[1] << 8 | h[2];
    c->ftype = h[3];
    c->fflags = h[4];
    c->fsid = (int32_t)(get32(h + 5) & MAX_WINDOW);
    c->fdone = c->fpad = c->fskip = 0;
    c->setting_have = 0;
    if (!c->peer_settings && (c->ftype != F_SETTINGS || (c->fflags & FL_ACK)))
        return conn_error(c, E_PROTOCOL, "the server's first frame is not SETTINGS");
    if (c->flen > c->max_frame)
        return conn_error(c, E_FRAME_SIZE, "a frame of %u bytes (limit %u)", c->flen, c->max_frame);
    if (c->hb_sid && (c->ftype != F_CONTINUATION || c->fsid != c->hb_sid))
        return conn_error(c, E_PROTOCOL, "a frame inside a header block");
    switch (c->ftype) {
    case F_DATA:
    case F_HEADERS:
        if (c->fsid == 0) return conn_error(c, E_PROTOCOL, "DATA or HEADERS on stream 0");
        if (is_idle(c, c->fsid))
            return conn_error(c, E_PROTOCOL, "a frame on idle stream %d", (int)c->fsid);
        if (c->fflags & FL_PADDED) c->fskip = 1;
        if (c->ftype == F_HEADERS && (c->fflags & FL_PRIORITY)) c->fskip += 5;
        if (c->flen < c->fskip) return conn_error(c, E_FRAME_SIZE, "a frame too short");
        if (c->ftype == F_DATA) {
            /* flow control counts the whole payload, padding included */
            if (c->flen > c->conn_window - c->conn_unacked)
                return conn_error(c, E_FLOW_CONTROL, "DATA beyond the connection window");
            c->conn_unacked += c->flen;
            hb_h2stream *s = find(c, c->fsid);
            if (s) {
                uint32_t win =
                    c->stream_window > DEFAULT_WINDOW ? c->stream_window : DEFAULT_WINDOW;
                if (c->flen > win - s->recv_unacked)
                    return stream_error(c, s, E_FLOW_CONTROL, "DATA beyond the stream window");
                s->recv_unacked += c->flen;
                if (!s->status)
                    return stream_error(c, s, E_PROTOCOL, "DATA before the response headers");
            }
        } else {
            c->hb_sid = c->fsid;
            c->hb_end_stream = c->fflags & FL_END_STREAM;
            c->hblock_len = 0;
            c->hb_conts = 0;
        }
        break;
    case F_CONTINUATION:
        if (!c->hb_sid) return conn_error(c, E_PROTOCOL, "CONTINUATION without HEADERS");
        if (++c->hb_conts > MAX_CONTINUATIONS)
            return conn_error(c, E_ENHANCE_YOUR_CALM,
                              "a header block in over %u CONTINUATION frames", MAX_CONTINUATIONS);
        break;
    case F_PRIORITY:
        if (c->fsid == 0) return conn_error(c, E_PROTOCOL, "PRIORITY on stream 0");
        if (c->flen != 5) return conn_error(c, E_FRAME_SIZE, "PRIORITY of %u bytes", c->flen);
        break;
    case F_RST_STREAM:
        if (c->fsid == 0) return conn_error(c, E_PROTOCOL, "RST_STREAM on stream 0");
        if (c->flen != 4) return conn_error(c, E_FRAME_SIZE, "RST_STREAM of %u bytes", c->flen);
        if (is_idle(c, c->fsid))
            return conn_error(c, E_PROTOCOL, "RST_STREAM on idle stream %d", (int)c->fsid);
        break;
    case F_SETTINGS:
        if (c->fsid != 0) return conn_error(c, E_PROTOCOL, "SETTINGS on a stream");
        if ((c->fflags & FL_ACK) && c->flen)
            return conn_error(c, E_FRAME_SIZE, "SETTINGS ACK with a payload");
        if (c->flen % 6) return conn_error(c, E_FRAME_SIZE, "SETTINGS of %u bytes", c->flen);
        /* no limit unless the first SETTINGS names one (we assumed 1 until now) */
        if (!c->peer_settings && !(c->fflags & FL_ACK)) c->peer_max_streams = UINT32_MAX;
        break;
    case F_PUSH_PROMISE:
        return conn_error(c, E_PROTOCOL, "PUSH_PROMISE although push is disabled");
    case F_PING:
        if (c->fsid != 0) return conn_error(c, E_PROTOCOL, "PING on a stream");
        if (c->flen != 8) return conn_error(c, E_FRAME_SIZE, "PING of %u bytes", c->flen);
        break;
    case F_GOAWAY:
        if (c->fsid != 0) return conn_error(c, E_PROTOCOL, "GOAWAY on a stream");
        if (c->flen < 8) return conn_error(c, E_FRAME_SIZE, "GOAWAY of %u bytes", c->flen);
        break;
    case F_WINDOW_UPDATE:
        if (c->flen != 4) return conn_error(c, E_FRAME_SIZE, "WINDOW_UPDATE of %u bytes", c->flen);
        if (c->fsid && is_idle(c, c->fsid))
            return conn_error(c, E_PROTOCOL, "WINDOW_UPDATE on idle stream %d", (int)c->fsid);
        break;
    default: /* unknown types are ignored */
        break;
    }
    return 0;
}

static int append_block(hb_h2_client *c, const uint8_t *p, size_t n)
{
    if (c->hblock_len + n > MAX_BLOCK)
        return conn_error(c, E_ENHANCE_YOUR_CALM, "a header block over %u bytes", MAX_BLOCK);
    if (c->hblock_len + n > c->hblock_cap) {
        size_t cap = c->hblock_cap ? c->hblock_cap : 4096;
        while (cap < c->hblock_len + n)
            cap *= 2;
        uint8_t *nb = realloc(c->hblock, cap);
        if (!nb) return set_fatal(c, HB_E_NOMEM, "h2: out of memory");
        c->hblock = nb;
        c->hblock_cap = cap;
    }
    memcpy(c->hblock + c->hblock_len, p, n);
    c->hblock_len += n;
    return 0;
}

/* Payload bytes p[0..n) of the current frame (fdone already counted before). */
static int frame_payload(hb_h2_client *c, const uint8_t *p, size_t n)
{
    size_t off = 0;
    /* leading bytes: pad length, priority fields */
    while (off < n && c->fdone + off < c->fskip) {
        if (c->fdone + off == 0 && (c->fflags & FL_PADDED) &&
            (c->ftype == F_DATA || c->ftype == F_HEADERS)) {
            c->fpad = p[0];
            if (c->fpad > c->flen - c->fskip)
                return conn_error(c, E_PROTOCOL, "padding longer than the frame");
        }
        off++;
    }
    uint32_t pos = c->fdone + (uint32_t)off; /* payload offset of p[off] */
    uint32_t body_end = c->flen - c->fpad;   /* content ends here, padding after */
    size_t m = 0;                            /* content bytes in this chunk */
    if (pos < body_end) m = body_end - pos < n - off ? body_end - pos : n - off;
    const uint8_t *q = p + off;
    switch (c->ftype) {
    case F_DATA:
        if (m) {
            hb_h2stream *s = find(c, c->fsid);
            if (s) {
                s->data_len += m;
                if (bodiless(s))
                    return stream_error(c, s, E_PROTOCOL, "DATA in a response to HEAD or a %d",
                                        s->status);
                if (s->content_length >= 0 && s->data_len > (uint64_t)s->content_length)
                    return stream_error(c, s, E_PROTOCOL, "more DATA than content-length %lld",
                                        (long long)s->content_length);
                if (c->cb->on_data) c->cb->on_data(c->ud, s->ud, q, m);
            }
        }
        break;
    case F_HEADERS:
    case F_CONTINUATION:
        if (m) return append_block(c, q, m);
        break;
    case F_SETTINGS:
        if (c->fflags & FL_ACK) break;
        for (size_t i = 0; i < m; i++) {
            c->setting[c->setting_have++] = q[i];
            if (c->setting_have == 6) {
                c->setting_have = 0;
                int rc = apply_setting(c, c->setting);
                if (rc) return rc;
            }
        }
        break;
    default: /* control frames: keep the first bytes */
        for (size_t i = 0; i < m && pos + i < sizeof c->ctl; i++)
            c->ctl[pos + i] = q[i];
        break;
    }
    return 0;
}

/* Give flow-control credit back once half a window is used. */
static int window_credit(hb_h2_client *c, hb_h2stream *s)
{
    if (c->conn_unacked >= c->conn_window / 2) {
        if (queue_u32(c, F_WINDOW_UPDATE, 0, (uint32_t)c->conn_unacked) != 0)
            return set_fatal(c, HB_E_NOMEM, "h2: out of memory");
        c->conn_unacked = 0;
    }
    if (s && s->recv_unacked >= c->stream_window / 2 && !(c->fflags & FL_END_STREAM)) {
        if (queue_u32(c, F_WINDOW_UPDATE, s->id, s->recv_unacked) != 0)
            return set_fatal(c, HB_E_NOMEM, "h2: out of memory");
        s->recv_unacked = 0;
    }
    return 0;
}

/* The current frame's payload is complete. */
static int frame_end(hb_h2_client *c)
{
    switch (c->ftype) {
    case F_DATA: {
        hb_h2stream *s = find(c, c->fsid);
        int rc = window_credit(c, s);
        if (rc) return rc;
        if (s && (c->fflags & FL_END_STREAM)) return end_of_response(c, s);
        return 0;
    }
    case F_HEADERS:
    case F_CONTINUATION:
        if (c->fflags & FL_END_HEADERS) {
            int32_t sid = c->hb_sid;
            c->hb_sid = 0;
            return header_block(c, sid, c->hblock, c->hblock_len, c->hb_end_stream);
        }
        return 0;
    case F_RST_STREAM: {
        hb_h2stream *s = find(c, c->fsid);
        if (s) close_stream(c, s, HB_H2_END_RESET, get32(c->ctl));
        return 0;
    }
    case F_SETTINGS:
        if (c->fflags & FL_ACK) return 0;
        c->peer_settings = 1;
        /* the ACKs the server does not read fill our queue */
        if (queue_frame(c, F_SETTINGS, FL_ACK, 0, NULL, 0) != 0)
            return conn_error(c, E_ENHANCE_YOUR_CALM, "SETTINGS flood");
        return 0;
    case F_PING:
        if (c->fflags & FL_ACK) return 0;
        if (queue_frame(c, F_PING, FL_ACK, 0, c->ctl, 8) != 0)
            return conn_error(c, E_ENHANCE_YOUR_CALM, "PING flood");
        return 0;
    case F_GOAWAY: {
        int32_t last = (int32_t)(get32(c->ctl) & MAX_WINDOW);
        uint32_t code = get32(c->ctl + 4);
        if (c->goaway_recv && last > c->goaway_last) last = c->goaway_last;
        c->goaway_recv = 1;
        c->goaway_last = last;
        c->goaway_code = code;
        if (code != E_NO_ERROR)
            set_fatal(c, HB_E_H2, "the server sent GOAWAY(%s)", hb_h2_code_name(code));
        if (c->cb->on_goaway) c->cb->on_goaway(c->ud, last, code);
        close_above(c, last, E_REFUSED_STREAM);
        return 0;
    }
    case F_WINDOW_UPDATE: {
        uint32_t inc = get32(c->ctl) & MAX_WINDOW;
        if (c->fsid == 0) {
            if (inc == 0) return conn_error(c, E_PROTOCOL, "WINDOW_UPDATE of 0");
            c->conn_send_window += inc;
            if (c->conn_send_window > MAX_WINDOW)
                return conn_error(c, E_FLOW_CONTROL, "the connection window over 2^31-1");
            return 0;
        }
        hb_h2stream *s = find(c, c->fsid);
        if (!s) return 0;
        if (inc == 0) return stream_error(c, s, E_PROTOCOL, "WINDOW_UPDATE of 0");
        s->send_window += inc;
        if (s->send_window > MAX_WINDOW)
            return stream_error(c, s, E_FLOW_CONTROL, "a stream window over 2^31-1");
        return 0;
    }
    default:
        return 0;
    }
}

/* Process input bytes; callbacks run here. 0 or a fatal code. */
static int feed(hb_h2_client *c, const uint8_t *p, size_t n)
{
    while (n) {
        if (c->fstate == S_HEADER) {
            if (c->fh_have == 0 && n >= 9) {
                memcpy(c->fh, p, 9);
                p += 9;
                n -= 9;
            } else {
                size_t want = 9u - (size_t)c->fh_have, take = want < n ? want : n;
                memcpy(c->fh + c->fh_have, p, take);
                c->fh_have = (uint8_t)(c->fh_have + take);
                p += take;
                n -= take;
                if (c->fh_have < 9) return 0;
            }
            c->fh_have = 0;
            int rc = frame_begin(c);
            if (rc) return rc;
            /* a stream error while checking the header: skip the payload */
            c->fstate = S_PAYLOAD;
            /* A whole HEADERS block in this chunk: decode it in place. */
            if (c->ftype == F_HEADERS && (c->fflags & FL_END_HEADERS) && !c->fskip &&
                n >= c->flen) {
                c->hb_sid = 0;
                c->fstate = S_HEADER;
                const uint8_t *blk = p;
                p += c->flen;
                n -= c->flen;
                rc = header_block(c, c->fsid, blk, c->flen, c->hb_end_stream);
                if (rc) return rc;
                continue;
            }
        }
        size_t take = c->flen - c->fdone < n ? c->flen - c->fdone : n;
        if (take) {
            int rc = frame_payload(c, p, take);
            if (rc) return rc;
            c->fdone += (uint32_t)take;
            p += take;
            n -= take;
        }
        if (c->fdone == c->flen) {
            c->fstate = S_HEADER;
            int rc = frame_end(c);
            if (rc) return rc;
        }
    }
    return 0;
}

int hb_h2_client_read(hb_h2_client *c)
{
    if (!c->live) return HB_E_CLOSED;
    if (c->fatal) return c->fatal_rc;
    c->more_input = 0;
    for (size_t got = 0;;) {
        if (got >= HB_H2_CLIENT_READ_BUDGET) {
            c->more_input = 1;
            break;
        }
        ssize_t n = hb_sock_read(c->sock, c->rbuf, HB_H2_CLIENT_RBUF);
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
        got += (size_t)n;
        if (!c->preface_checked) {
            /* An HTTP/1.x server answers "PRI * HTTP/2.0" with a status line. */
            size_t k = (size_t)n < 5 ? (size_t)n : 5;
            if (memcmp(c->rbuf, "HTTP/", k) == 0)
                return set_fatal(c, HB_E_NO_H2,
                                 "the server does not speak HTTP/2 with prior knowledge (h2c): it "
                                 "answered the connection preface with '%.*s...'",
                                 n < 12 ? (int)n : 12, (const char *)c->rbuf);
            c->preface_checked = 1;
        }
        int rc = feed(c, c->rbuf, (size_t)n);
        if (rc) return rc;
        if (c->fatal) return c->fatal_rc;
        if (c->short_read_drains &&
            (c->sock->ssl ? !hb_sock_has_buffered(c->sock) : (size_t)n < HB_H2_CLIENT_RBUF))
            break;
    }
    if (c->goaway_recv && c->nopen == 0 && !hb_h2_client_wants_write(c))
        return set_fatal(c, HB_E_CLOSED, "the server sent GOAWAY");
    return HB_AGAIN;
}
