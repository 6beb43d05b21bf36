/* hb_h2_client_read.c - the client session's input: frames, header blocks,
 * SETTINGS, flow control and hb_h2_client_read (see hb_h2_client_int.h). */
#include "h2/hb_h2_client_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
        return hb__h2c_stream_error(c, s, HB_H2_E_PROTOCOL,
                                    "content-length %lld but %llu bytes of DATA",
                                    (long long)s->content_length, (unsigned long long)s->data_len);
    if (s->body) /* the server answered before our body was all sent: stop sending it */
        if (hb__h2c_queue_u32(c, HB_H2_F_RST_STREAM, s->id, HB_H2_E_NO_ERROR) != 0)
            return hb__h2c_fatal(c, HB_E_NOMEM, "h2: out of memory");
    hb__h2c_close_stream(c, s, HB_H2_END_OK, HB_H2_E_NO_ERROR);
    return 0;
}

/* A whole header block for stream sid. */
static int header_block(hb_h2_client *c, int32_t sid, const uint8_t *blk, size_t len,
                        int end_stream)
{
    hb_h2stream *s = hb__h2c_find(c, sid);
    blockctx b = {c, s, s && s->status > 0, 0, 0, 0, {0}};
    size_t need = hb_h2_hpack_scratch_need(len);
    if (need > c->scratch_cap) {
        uint8_t *ns = realloc(c->scratch, need);
        if (!ns) return hb__h2c_fatal(c, HB_E_NOMEM, "h2: out of memory");
        c->scratch = ns;
        c->scratch_cap = need;
    }
    char herr[HB_ERR_LEN];
    int rc = hb_h2_hpack_decode(&c->hpack, blk, len, c->scratch, MAX_LIST, on_field, &b, herr);
    if (rc < 0) return hb__h2c_conn_error(c, HB_H2_E_COMPRESSION, "%s", herr);
    if (!s) return 0;
    if (rc == HB_H2_HPACK_TOO_LARGE) bad_field(&b, "header list over %u bytes", MAX_LIST);
    if (b.bad) return hb__h2c_stream_error(c, s, HB_H2_E_PROTOCOL, "%s", b.why);
    if (b.trailers) {
        if (!end_stream)
            return hb__h2c_stream_error(c, s, HB_H2_E_PROTOCOL, "trailers without END_STREAM");
        return end_of_response(c, s);
    }
    if (!b.status)
        return hb__h2c_stream_error(c, s, HB_H2_E_PROTOCOL, "a response without :status");
    if (b.status < 200) { /* informational: the final response follows */
        s->content_length = -1;
        if (end_stream)
            return hb__h2c_stream_error(c, s, HB_H2_E_PROTOCOL, "a 1xx response ends the stream");
        if (++s->n1xx > MAX_1XX)
            return hb__h2c_stream_error(c, s, HB_H2_E_ENHANCE_YOUR_CALM,
                                        "more than %u 1xx responses", MAX_1XX);
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
    uint32_t v = hb_h2_get32(e + 2);
    switch (id) {
    case 0x2: /* ENABLE_PUSH */
        if (v != 0)
            return hb__h2c_conn_error(c, HB_H2_E_PROTOCOL, "SETTINGS_ENABLE_PUSH %u from a server",
                                      v);
        break;
    case 0x3: /* MAX_CONCURRENT_STREAMS */
        c->peer_max_streams = v;
        break;
    case 0x4: /* INITIAL_WINDOW_SIZE */ {
        if (v > HB_H2_MAX_WINDOW)
            return hb__h2c_conn_error(c, HB_H2_E_FLOW_CONTROL, "SETTINGS_INITIAL_WINDOW_SIZE %u",
                                      v);
        int64_t delta = (int64_t)v - c->peer_init_window;
        c->peer_init_window = v;
        for (uint32_t i = 0; i < c->max_streams; i++) {
            hb_h2stream *s = &c->slots[i];
            if (!s->id) continue;
            s->send_window += delta;
            if (s->send_window > HB_H2_MAX_WINDOW)
                return hb__h2c_conn_error(c, HB_H2_E_FLOW_CONTROL, "a stream window over 2^31-1");
        }
        break;
    }
    case 0x5: /* MAX_FRAME_SIZE */
        if (v < 16384 || v > 16777215)
            return hb__h2c_conn_error(c, HB_H2_E_PROTOCOL, "SETTINGS_MAX_FRAME_SIZE %u", v);
        c->peer_max_frame = v;
        break;
    case 0x9: /* NO_RFC7540_PRIORITIES */
        if (v > 1)
            return hb__h2c_conn_error(c, HB_H2_E_PROTOCOL, "SETTINGS_NO_RFC7540_PRIORITIES %u", v);
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
        if (s->id && s->id > last) hb__h2c_close_stream(c, s, HB_H2_END_GOAWAY, code);
    }
}

/* A frame header is in c->fh: check it and set up its payload. */
static int frame_begin(hb_h2_client *c)
{
    const uint8_t *h = c->fh;
    c->flen = (uint32_t)h[0] << 16 | (uint32_t)h[1] << 8 | h[2];
    c->ftype = h[3];
    c->fflags = h[4];
    c->fsid = (int32_t)(hb_h2_get32(h + 5) & HB_H2_MAX_WINDOW);
    c->fdone = c->fpad = c->fskip = 0;
    c->setting_have = 0;
    if (!c->peer_settings && (c->ftype != HB_H2_F_SETTINGS || (c->fflags & HB_H2_FL_ACK)))
        return hb__h2c_conn_error(c, HB_H2_E_PROTOCOL, "the server's first frame is not SETTINGS");
    if (c->flen > c->max_frame)
        return hb__h2c_conn_error(c, HB_H2_E_FRAME_SIZE, "a frame of %u bytes (limit %u)", c->flen,
                                  c->max_frame);
    if (c->hb_sid && (c->ftype != HB_H2_F_CONTINUATION || c->fsid != c->hb_sid))
        return hb__h2c_conn_error(c, HB_H2_E_PROTOCOL, "a frame inside a header block");
    switch (c->ftype) {
    case HB_H2_F_DATA:
    case HB_H2_F_HEADERS:
        if (c->fsid == 0)
            return hb__h2c_conn_error(c, HB_H2_E_PROTOCOL, "DATA or HEADERS on stream 0");
        if (is_idle(c, c->fsid))
            return hb__h2c_conn_error(c, HB_H2_E_PROTOCOL, "a frame on idle stream %d",
                                      (int)c->fsid);
        if (c->fflags & HB_H2_FL_PADDED) c->fskip = 1;
        if (c->ftype == HB_H2_F_HEADERS && (c->fflags & HB_H2_FL_PRIORITY)) c->fskip += 5;
        if (c->flen < c->fskip)
            return hb__h2c_conn_error(c, HB_H2_E_FRAME_SIZE, "a frame too short");
        if (c->ftype == HB_H2_F_DATA) {
            /* flow control counts the whole payload, padding included */
            if (c->flen > c->conn_window - c->conn_unacked)
                return hb__h2c_conn_error(c, HB_H2_E_FLOW_CONTROL,
                                          "DATA beyond the connection window");
            c->conn_unacked += c->flen;
            hb_h2stream *s = hb__h2c_find(c, c->fsid);
            if (s) {
                uint32_t win = c->stream_window > HB_H2_DEFAULT_WINDOW ? c->stream_window
                                                                       : HB_H2_DEFAULT_WINDOW;
                if (c->flen > win - s->recv_unacked)
                    return hb__h2c_stream_error(c, s, HB_H2_E_FLOW_CONTROL,
                                                "DATA beyond the stream window");
                s->recv_unacked += c->flen;
                if (!s->status)
                    return hb__h2c_stream_error(c, s, HB_H2_E_PROTOCOL,
                                                "DATA before the response headers");
            }
        } else {
            c->hb_sid = c->fsid;
            c->hb_end_stream = c->fflags & HB_H2_FL_END_STREAM;
            c->hblock_len = 0;
            c->hb_conts = 0;
        }
        break;
    case HB_H2_F_CONTINUATION:
        if (!c->hb_sid)
            return hb__h2c_conn_error(c, HB_H2_E_PROTOCOL, "CONTINUATION without HEADERS");
        if (++c->hb_conts > MAX_CONTINUATIONS)
            return hb__h2c_conn_error(c, HB_H2_E_ENHANCE_YOUR_CALM,
                                      "a header block in over %u CONTINUATION frames",
                                      MAX_CONTINUATIONS);
        break;
    case HB_H2_F_PRIORITY:
        if (c->fsid == 0) return hb__h2c_conn_error(c, HB_H2_E_PROTOCOL, "PRIORITY on stream 0");
        if (c->flen != 5)
            return hb__h2c_conn_error(c, HB_H2_E_FRAME_SIZE, "PRIORITY of %u bytes", c->flen);
        break;
    case HB_H2_F_RST_STREAM:
        if (c->fsid == 0) return hb__h2c_conn_error(c, HB_H2_E_PROTOCOL, "RST_STREAM on stream 0");
        if (c->flen != 4)
            return hb__h2c_conn_error(c, HB_H2_E_FRAME_SIZE, "RST_STREAM of %u bytes", c->flen);
        if (is_idle(c, c->fsid))
            return hb__h2c_conn_error(c, HB_H2_E_PROTOCOL, "RST_STREAM on idle stream %d",
                                      (int)c->fsid);
        break;
    case HB_H2_F_SETTINGS:
        if (c->fsid != 0) return hb__h2c_conn_error(c, HB_H2_E_PROTOCOL, "SETTINGS on a stream");
        if ((c->fflags & HB_H2_FL_ACK) && c->flen)
            return hb__h2c_conn_error(c, HB_H2_E_FRAME_SIZE, "SETTINGS ACK with a payload");
        if (c->flen % 6)
            return hb__h2c_conn_error(c, HB_H2_E_FRAME_SIZE, "SETTINGS of %u bytes", c->flen);
        /* no limit unless the first SETTINGS names one (we assumed 1 until now) */
        if (!c->peer_settings && !(c->fflags & HB_H2_FL_ACK)) c->peer_max_streams = UINT32_MAX;
        break;
    case HB_H2_F_PUSH_PROMISE:
        return hb__h2c_conn_error(c, HB_H2_E_PROTOCOL, "PUSH_PROMISE although push is disabled");
    case HB_H2_F_PING:
        if (c->fsid != 0) return hb__h2c_conn_error(c, HB_H2_E_PROTOCOL, "PING on a stream");
        if (c->flen != 8)
            return hb__h2c_conn_error(c, HB_H2_E_FRAME_SIZE, "PING of %u bytes", c->flen);
        break;
    case HB_H2_F_GOAWAY:
        if (c->fsid != 0) return hb__h2c_conn_error(c, HB_H2_E_PROTOCOL, "GOAWAY on a stream");
        if (c->flen < 8)
            return hb__h2c_conn_error(c, HB_H2_E_FRAME_SIZE, "GOAWAY of %u bytes", c->flen);
        break;
    case HB_H2_F_WINDOW_UPDATE:
        if (c->flen != 4)
            return hb__h2c_conn_error(c, HB_H2_E_FRAME_SIZE, "WINDOW_UPDATE of %u bytes", c->flen);
        if (c->fsid && is_idle(c, c->fsid))
            return hb__h2c_conn_error(c, HB_H2_E_PROTOCOL, "WINDOW_UPDATE on idle stream %d",
                                      (int)c->fsid);
        break;
    default: /* unknown types are ignored */
        break;
    }
    return 0;
}

static int append_block(hb_h2_client *c, const uint8_t *p, size_t n)
{
    if (c->hblock_len + n > MAX_BLOCK)
        return hb__h2c_conn_error(c, HB_H2_E_ENHANCE_YOUR_CALM, "a header block over %u bytes",
                                  MAX_BLOCK);
    if (c->hblock_len + n > c->hblock_cap) {
        size_t cap = c->hblock_cap ? c->hblock_cap : 4096;
        while (cap < c->hblock_len + n)
            cap *= 2;
        uint8_t *nb = realloc(c->hblock, cap);
        if (!nb) return hb__h2c_fatal(c, HB_E_NOMEM, "h2: out of memory");
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
        if (c->fdone + off == 0 && (c->fflags & HB_H2_FL_PADDED) &&
            (c->ftype == HB_H2_F_DATA || c->ftype == HB_H2_F_HEADERS)) {
            c->fpad = p[0];
            if (c->fpad > c->flen - c->fskip)
                return hb__h2c_conn_error(c, HB_H2_E_PROTOCOL, "padding longer than the frame");
        }
        off++;
    }
    uint32_t pos = c->fdone + (uint32_t)off; /* payload offset of p[off] */
    uint32_t body_end = c->flen - c->fpad;   /* content ends here, padding after */
    size_t m = 0;                            /* content bytes in this chunk */
    if (pos < body_end) m = body_end - pos < n - off ? body_end - pos : n - off;
    const uint8_t *q = p + off;
    switch (c->ftype) {
    case HB_H2_F_DATA:
        if (m) {
            hb_h2stream *s = hb__h2c_find(c, c->fsid);
            if (s) {
                s->data_len += m;
                if (bodiless(s))
                    return hb__h2c_stream_error(c, s, HB_H2_E_PROTOCOL,
                                                "DATA in a response to HEAD or a %d", s->status);
                if (s->content_length >= 0 && s->data_len > (uint64_t)s->content_length)
                    return hb__h2c_stream_error(c, s, HB_H2_E_PROTOCOL,
                                                "more DATA than content-length %lld",
                                                (long long)s->content_length);
                c->data_end = pos + m == body_end;
                if (c->cb->on_data) c->cb->on_data(c->ud, s->ud, q, m);
            }
        }
        break;
    case HB_H2_F_HEADERS:
    case HB_H2_F_CONTINUATION:
        if (m) return append_block(c, q, m);
        break;
    case HB_H2_F_SETTINGS:
        if (c->fflags & HB_H2_FL_ACK) break;
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
        if (hb__h2c_queue_u32(c, HB_H2_F_WINDOW_UPDATE, 0, (uint32_t)c->conn_unacked) != 0)
            return hb__h2c_fatal(c, HB_E_NOMEM, "h2: out of memory");
        c->conn_unacked = 0;
    }
    if (s && s->recv_unacked >= c->stream_window / 2 && !(c->fflags & HB_H2_FL_END_STREAM)) {
        if (hb__h2c_queue_u32(c, HB_H2_F_WINDOW_UPDATE, s->id, s->recv_unacked) != 0)
            return hb__h2c_fatal(c, HB_E_NOMEM, "h2: out of memory");
        s->recv_unacked = 0;
    }
    return 0;
}

/* The current frame's payload is complete. */
static int frame_end(hb_h2_client *c)
{
    switch (c->ftype) {
    case HB_H2_F_DATA: {
        hb_h2stream *s = hb__h2c_find(c, c->fsid);
        int rc = window_credit(c, s);
        if (rc) return rc;
        if (s && (c->fflags & HB_H2_FL_END_STREAM)) return end_of_response(c, s);
        return 0;
    }
    case HB_H2_F_HEADERS:
    case HB_H2_F_CONTINUATION:
        if (c->fflags & HB_H2_FL_END_HEADERS) {
            int32_t sid = c->hb_sid;
            c->hb_sid = 0;
            return header_block(c, sid, c->hblock, c->hblock_len, c->hb_end_stream);
        }
        return 0;
    case HB_H2_F_RST_STREAM: {
        hb_h2stream *s = hb__h2c_find(c, c->fsid);
        if (s) hb__h2c_close_stream(c, s, HB_H2_END_RESET, hb_h2_get32(c->ctl));
        return 0;
    }
    case HB_H2_F_SETTINGS:
        if (c->fflags & HB_H2_FL_ACK) return 0;
        c->peer_settings = 1;
        /* the ACKs the server does not read fill our queue */
        if (hb__h2c_queue_frame(c, HB_H2_F_SETTINGS, HB_H2_FL_ACK, 0, NULL, 0) != 0)
            return hb__h2c_conn_error(c, HB_H2_E_ENHANCE_YOUR_CALM, "SETTINGS flood");
        return 0;
    case HB_H2_F_PING:
        if (c->fflags & HB_H2_FL_ACK) return 0;
        if (hb__h2c_queue_frame(c, HB_H2_F_PING, HB_H2_FL_ACK, 0, c->ctl, 8) != 0)
            return hb__h2c_conn_error(c, HB_H2_E_ENHANCE_YOUR_CALM, "PING flood");
        return 0;
    case HB_H2_F_GOAWAY: {
        int32_t last = (int32_t)(hb_h2_get32(c->ctl) & HB_H2_MAX_WINDOW);
        uint32_t code = hb_h2_get32(c->ctl + 4);
        if (c->goaway_recv && last > c->goaway_last) last = c->goaway_last;
        c->goaway_recv = 1;
        c->goaway_last = last;
        c->goaway_code = code;
        if (code != HB_H2_E_NO_ERROR)
            hb__h2c_fatal(c, HB_E_H2, "the server sent GOAWAY(%s)", hb_h2_code_name(code));
        if (c->cb->on_goaway) c->cb->on_goaway(c->ud, last, code);
        close_above(c, last, HB_H2_E_REFUSED_STREAM);
        return 0;
    }
    case HB_H2_F_WINDOW_UPDATE: {
        uint32_t inc = hb_h2_get32(c->ctl) & HB_H2_MAX_WINDOW;
        if (c->fsid == 0) {
            if (inc == 0) return hb__h2c_conn_error(c, HB_H2_E_PROTOCOL, "WINDOW_UPDATE of 0");
            c->conn_send_window += inc;
            if (c->conn_send_window > HB_H2_MAX_WINDOW)
                return hb__h2c_conn_error(c, HB_H2_E_FLOW_CONTROL,
                                          "the connection window over 2^31-1");
            return 0;
        }
        hb_h2stream *s = hb__h2c_find(c, c->fsid);
        if (!s) return 0;
        if (inc == 0) return hb__h2c_stream_error(c, s, HB_H2_E_PROTOCOL, "WINDOW_UPDATE of 0");
        s->send_window += inc;
        if (s->send_window > HB_H2_MAX_WINDOW)
            return hb__h2c_stream_error(c, s, HB_H2_E_FLOW_CONTROL, "a stream window over 2^31-1");
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
            if (c->ftype == HB_H2_F_HEADERS && (c->fflags & HB_H2_FL_END_HEADERS) && !c->fskip &&
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
                return hb__h2c_fatal(c, HB_E_CLOSED,
                                     "the server closed the connection after GOAWAY");
            return hb__h2c_fatal(c, HB_E_CLOSED, "connection closed by the server");
        }
        if (n < 0) {
            char e[HB_ERR_LEN];
            hb_sock_errstr(c->sock, (int)n, e);
            return hb__h2c_fatal(c, (int)n, "%s", e);
        }
        c->bytes_in += (uint64_t)n;
        got += (size_t)n;
        if (!c->preface_checked) {
            /* An HTTP/1.x server answers "PRI * HTTP/2.0" with a status line. */
            size_t k = (size_t)n < 5 ? (size_t)n : 5;
            if (memcmp(c->rbuf, "HTTP/", k) == 0)
                return hb__h2c_fatal(
                    c, HB_E_NO_H2,
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
        return hb__h2c_fatal(c, HB_E_CLOSED, "the server sent GOAWAY");
    return HB_AGAIN;
}
