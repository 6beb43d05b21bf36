/* hb_h3_frame.c - HTTP/3 framing and QUIC varints; see hb_h3_frame.h. */
#include "h3codec/hb_h3_frame.h"

#include <string.h>

#include "base/hb_common.h"

const char *hb_h3_error_name(uint64_t code)
{
    static const char *const H3[] = {
        "H3_NO_ERROR",
        "H3_GENERAL_PROTOCOL_ERROR",
        "H3_INTERNAL_ERROR",
        "H3_STREAM_CREATION_ERROR",
        "H3_CLOSED_CRITICAL_STREAM",
        "H3_FRAME_UNEXPECTED",
        "H3_FRAME_ERROR",
        "H3_EXCESSIVE_LOAD",
        "H3_ID_ERROR",
        "H3_SETTINGS_ERROR",
        "H3_MISSING_SETTINGS",
        "H3_REQUEST_REJECTED",
        "H3_REQUEST_CANCELLED",
        "H3_REQUEST_INCOMPLETE",
        "H3_MESSAGE_ERROR",
        "H3_CONNECT_ERROR",
        "H3_VERSION_FALLBACK",
    };
    static const char *const QPACK[] = {
        "QPACK_DECOMPRESSION_FAILED",
        "QPACK_ENCODER_STREAM_ERROR",
        "QPACK_DECODER_STREAM_ERROR",
    };
    if (code >= 0x100 && code <= 0x110) return H3[code - 0x100];
    if (code >= 0x200 && code <= 0x202) return QPACK[code - 0x200];
    return "unknown";
}

int hb_h3_frame_allowed(hb_h3_stream_kind on, uint64_t type)
{
    switch (type) {
    case HB_H3_FRAME_DATA:
    case HB_H3_FRAME_HEADERS:
        return on != HB_H3_ON_CONTROL ? 0 : -HB_H3_FRAME_UNEXPECTED;
    case HB_H3_FRAME_PUSH_PROMISE:
        return on == HB_H3_ON_REQUEST ? 0 : -HB_H3_FRAME_UNEXPECTED;
    case HB_H3_FRAME_CANCEL_PUSH:
    case HB_H3_FRAME_SETTINGS:
    case HB_H3_FRAME_GOAWAY:
    case HB_H3_FRAME_MAX_PUSH_ID:
        return on == HB_H3_ON_CONTROL ? 0 : -HB_H3_FRAME_UNEXPECTED;
    case 0x02:
    case 0x06:
    case 0x08:
    case 0x09: /* HTTP/2's PRIORITY, PING, WINDOW_UPDATE, CONTINUATION */
        return -HB_H3_FRAME_UNEXPECTED;
    default:
        return 0;
    }
}

/* ---- varints ---- */

uint8_t *hb_h3_varint_put(uint8_t *o, uint64_t v)
{
    if (v < 64) {
        *o++ = (uint8_t)v;
    } else if (v < 16384) {
        *o++ = (uint8_t)(0x40 | v >> 8);
        *o++ = (uint8_t)v;
    } else if (v < (UINT64_C(1) << 30)) {
        *o++ = (uint8_t)(0x80 | v >> 24);
        *o++ = (uint8_t)(v >> 16);
        *o++ = (uint8_t)(v >> 8);
        *o++ = (uint8_t)v;
    } else {
        *o++ = (uint8_t)(0xc0 | v >> 56);
        for (int s = 48; s >= 0; s -= 8)
            *o++ = (uint8_t)(v >> s);
    }
    return o;
}

size_t hb_h3_varint_get(const uint8_t *p, size_t len, uint64_t *v)
{
    if (len == 0) return 0;
    size_t n = (size_t)1 << (p[0] >> 6);
    if (n > len) return 0;
    uint64_t x = p[0] & 0x3f;
    for (size_t i = 1; i < n; i++)
        x = x << 8 | p[i];
    *v = x;
    return n;
}

size_t hb_h3_varint_feed(hb_h3_varint_rd *rd, const uint8_t *in, size_t len, int *done)
{
    size_t i = 0;
    *done = 0;
    if (len == 0) return 0;
    if (rd->need == 0) {
        rd->need = (uint8_t)(1u << (in[0] >> 6));
        rd->v = in[0] & 0x3f;
        rd->have = 1;
        i = 1;
    }
    while (rd->have < rd->need && i < len) {
        rd->v = rd->v << 8 | in[i++];
        rd->have++;
    }
    *done = rd->have == rd->need;
    return i;
}

/* ---- frames ---- */

uint8_t *hb_h3_frame_header_put(uint8_t *o, uint64_t type, uint64_t len)
{
    return hb_h3_varint_put(hb_h3_varint_put(o, type), len);
}

uint8_t *hb_h3_frame_varint_put(uint8_t *o, uint64_t type, uint64_t v)
{
    o = hb_h3_frame_header_put(o, type, hb_h3_varint_len(v));
    return hb_h3_varint_put(o, v);
}

int hb_h3_frame_varint_payload(const uint8_t *p, size_t len, uint64_t *v, char *err)
{
    size_t n = hb_h3_varint_get(p, len, v);
    if (n == 0 || n != len)
        return hb_fail(err, -HB_H3_FRAME_ERROR, "h3: a %zu-byte payload where one varint belongs",
                       len);
    return 0;
}

/* ---- SETTINGS ---- */

void hb_h3_settings_default(hb_h3_conn_settings *s)
{
    memset(s, 0, sizeof *s);
    s->max_field_section_size = HB_H3_UNLIMITED;
}

ssize_t hb_h3_settings_encode(const hb_h3_conn_settings *s, uint8_t *out, size_t cap)
{
    uint8_t pl[5 * 16], *o = pl;
    struct {
        uint64_t id, v;
        int send;
    } items[] = {
        {HB_H3_SETTINGS_QPACK_MAX_TABLE_CAPACITY, s->qpack_max_table_capacity, 1},
        {HB_H3_SETTINGS_QPACK_BLOCKED_STREAMS, s->qpack_blocked_streams, 1},
        {HB_H3_SETTINGS_MAX_FIELD_SECTION_SIZE, s->max_field_section_size,
         s->max_field_section_size != HB_H3_UNLIMITED},
        {HB_H3_SETTINGS_ENABLE_CONNECT_PROTOCOL, s->enable_connect_protocol,
         s->enable_connect_protocol != 0},
        {HB_H3_SETTINGS_H3_DATAGRAM, s->h3_datagram, s->h3_datagram != 0},
    };
    for (size_t i = 0; i < sizeof items / sizeof items[0]; i++) {
        if (!items[i].send) continue;
        if (items[i].v > HB_H3_VARINT_MAX) return -HB_H3_INTERNAL_ERROR;
        o = hb_h3_varint_put(hb_h3_varint_put(o, items[i].id), items[i].v);
    }
    size_t plen = (size_t)(o - pl);
    size_t need = 1 + hb_h3_varint_len(plen) + plen;
    if (need > cap) return -HB_H3_INTERNAL_ERROR;
    uint8_t *w = hb_h3_frame_header_put(out, HB_H3_FRAME_SETTINGS, plen);
    memcpy(w, pl, plen);
    return (ssize_t)need;
}

int hb_h3_settings_decode(const uint8_t *p, size_t len, hb_h3_conn_settings *s, char *err)
{
    hb_h3_settings_default(s);
    uint64_t seen = 0; /* identifiers < 64 already given */
    size_t i = 0;
    while (i < len) {
        uint64_t id, v;
        size_t n = hb_h3_varint_get(p + i, len - i, &id);
        if (n == 0)
            return hb_fail(err, -HB_H3_FRAME_ERROR, "h3: SETTINGS ends inside an identifier");
        i += n;
        n = hb_h3_varint_get(p + i, len - i, &v);
        if (n == 0) return hb_fail(err, -HB_H3_FRAME_ERROR, "h3: SETTINGS ends inside a value");
        i += n;
        if (id < 64) {
            if (seen & (UINT64_C(1) << id))
                return hb_fail(err, -HB_H3_SETTINGS_ERROR, "h3: setting 0x%llx given twice",
                               (unsigned long long)id);
            seen |= UINT64_C(1) << id;
        }
        switch (id) {
        case 0x00:
        case 0x02:
        case 0x03:
        case 0x04:
        case 0x05:
            return hb_fail(err, -HB_H3_SETTINGS_ERROR, "h3: HTTP/2's setting 0x%llx in SETTINGS",
                           (unsigned long long)id);
        case HB_H3_SETTINGS_QPACK_MAX_TABLE_CAPACITY:
            s->qpack_max_table_capacity = v;
            break;
        case HB_H3_SETTINGS_QPACK_BLOCKED_STREAMS:
            s->qpack_blocked_streams = v;
            break;
        case HB_H3_SETTINGS_MAX_FIELD_SECTION_SIZE:
            s->max_field_section_size = v;
            break;
        case HB_H3_SETTINGS_ENABLE_CONNECT_PROTOCOL:
        case HB_H3_SETTINGS_H3_DATAGRAM:
            if (v > 1)
                return hb_fail(err, -HB_H3_SETTINGS_ERROR, "h3: setting 0x%llx = %llu (not 0 or 1)",
                               (unsigned long long)id, (unsigned long long)v);
            if (id == HB_H3_SETTINGS_H3_DATAGRAM)
                s->h3_datagram = v;
            else
                s->enable_connect_protocol = v;
            break;
        default: /* unknown, grease: ignored */
            break;
        }
    }
    return 0;
}

/* ---- the frame reader ---- */

enum { RD_TYPE, RD_LEN, RD_DATA, RD_BUF, RD_SKIP };

void hb_h3_frame_reader_init(hb_h3_frame_reader *r, uint8_t *buf, size_t cap, size_t max_payload)
{
    memset(r, 0, sizeof *r);
    r->buf = buf;
    r->buf_cap = buf ? cap : 0;
    r->max_payload = max_payload;
    r->state = RD_TYPE;
}

int hb_h3_frame_reader_idle(const hb_h3_frame_reader *r)
{
    return r->state == RD_TYPE && r->vr.need == 0;
}

/* Types the reader hands over whole. */
static int buffered_type(uint64_t t)
{
    return t == HB_H3_FRAME_HEADERS || t == HB_H3_FRAME_SETTINGS || t == HB_H3_FRAME_GOAWAY ||
           t == HB_H3_FRAME_MAX_PUSH_ID || t == HB_H3_FRAME_CANCEL_PUSH ||
           t == HB_H3_FRAME_PUSH_PROMISE;
}

/* The frame header is complete: choose how to read its payload. Returns 0 or
 * a negative error. */
static int header_done(hb_h3_frame_reader *r, char *err)
{
    uint64_t t = r->type, len = r->left;
    if (t == 0x02 || t == 0x06 || t == 0x08 || t == 0x09)
        return hb_fail(err, -HB_H3_FRAME_UNEXPECTED, "h3: HTTP/2 frame type 0x%llx",
                       (unsigned long long)t);
    if (t == HB_H3_FRAME_DATA) {
        r->state = RD_DATA;
        r->started = 1;
        return 0;
    }
    if (!buffered_type(t)) {
        r->state = RD_SKIP;
        return 0;
    }
    if ((t == HB_H3_FRAME_GOAWAY || t == HB_H3_FRAME_MAX_PUSH_ID || t == HB_H3_FRAME_CANCEL_PUSH) &&
        (len == 0 || len > 8))
        return hb_fail(err, -HB_H3_FRAME_ERROR, "h3: frame 0x%llx of %llu bytes (one varint)",
                       (unsigned long long)t, (unsigned long long)len);
    if (len > r->max_payload && !(len <= 8 && t != HB_H3_FRAME_HEADERS &&
                                  t != HB_H3_FRAME_SETTINGS && t != HB_H3_FRAME_PUSH_PROMISE))
        return hb_fail(err, -HB_H3_EXCESSIVE_LOAD,
                       "h3: frame 0x%llx of %llu bytes over the limit of %zu",
                       (unsigned long long)t, (unsigned long long)len, r->max_payload);
    r->state = RD_BUF;
    r->buf_n = 0;
    return 0;
}

/* A skipped frame's header, announced (report_skipped); its payload follows. */
static ssize_t skipped(hb_h3_frame_reader *r, hb_h3_frame_ev *ev, size_t i)
{
    ev->kind = HB_H3_EV_SKIPPED;
    ev->type = r->type;
    ev->payload = NULL;
    ev->len = 0;
    ev->frame_start = ev->frame_end = 0;
    if (r->left == 0) r->state = RD_TYPE; /* an empty one is over */
    return (ssize_t)i;
}

ssize_t hb_h3_frame_read(hb_h3_frame_reader *r, const uint8_t *in, size_t len, hb_h3_frame_ev *ev,
                         char *err)
{
    size_t i = 0;
    ev->kind = HB_H3_EV_NEED_MORE;
    for (;;) {
        switch (r->state) {
        case RD_TYPE:
        case RD_LEN: {
            if (i == len) return (ssize_t)i;
            int done;
            if (r->vr.need == 0 && len - i >= 2 && r->state == RD_TYPE) {
                /* the usual case: the whole header in this piece */
                uint64_t t, l;
                size_t a = hb_h3_varint_get(in + i, len - i, &t);
                size_t b = a ? hb_h3_varint_get(in + i + a, len - i - a, &l) : 0;
                if (b) {
                    i += a + b;
                    r->type = t;
                    r->left = l;
                    int rc = header_done(r, err);
                    if (rc < 0) return rc;
                    if (r->state == RD_SKIP && r->report_skipped) return skipped(r, ev, i);
                    break;
                }
            }
            i += hb_h3_varint_feed(&r->vr, in + i, len - i, &done);
            if (!done) return (ssize_t)i;
            if (r->state == RD_TYPE) {
                r->type = r->vr.v;
                r->state = RD_LEN;
            } else {
                r->left = r->vr.v;
                r->vr = (hb_h3_varint_rd){0, 0, 0};
                int rc = header_done(r, err);
                if (rc < 0) return rc;
                if (r->state == RD_SKIP && r->report_skipped) return skipped(r, ev, i);
                break;
            }
            r->vr = (hb_h3_varint_rd){0, 0, 0};
            break;
        }
        case RD_DATA: {
            if (i == len && r->left) return (ssize_t)i; /* no empty pieces but an empty frame */
            size_t n = r->left < len - i ? (size_t)r->left : len - i;
            ev->kind = HB_H3_EV_DATA;
            ev->type = HB_H3_FRAME_DATA;
            ev->payload = in + i;
            ev->len = n;
            ev->frame_start = r->started;
            r->started = 0;
            r->left -= n;
            ev->frame_end = r->left == 0;
            if (r->left == 0) r->state = RD_TYPE;
            return (ssize_t)(i + n);
        }
        case RD_SKIP: {
            size_t n = r->left < len - i ? (size_t)r->left : len - i;
            i += n;
            r->left -= n;
            if (r->left) return (ssize_t)i;
            r->state = RD_TYPE;
            break;
        }
        case RD_BUF: {
            if (r->buf_n == 0 && r->left <= len - i) { /* whole in this piece: no copy */
                ev->kind = HB_H3_EV_FRAME;
                ev->type = r->type;
                ev->payload = in + i;
                ev->len = (size_t)r->left;
                ev->frame_start = ev->frame_end = 1;
                i += (size_t)r->left;
                r->left = 0;
                r->state = RD_TYPE;
                return (ssize_t)i;
            }
            if (r->buf_n + r->left > r->buf_cap)
                return hb_fail(err, -HB_H3_EXCESSIVE_LOAD,
                               "h3: frame 0x%llx arrives in pieces with no room to gather it",
                               (unsigned long long)r->type);
            size_t n = r->left < len - i ? (size_t)r->left : len - i;
            memcpy(r->buf + r->buf_n, in + i, n);
            r->buf_n += n;
            r->left -= n;
            i += n;
            if (r->left) return (ssize_t)i;
            ev->kind = HB_H3_EV_FRAME;
            ev->type = r->type;
            ev->payload = r->buf;
            ev->len = r->buf_n;
            ev->frame_start = ev->frame_end = 1;
            r->buf_n = 0;
            r->state = RD_TYPE;
            return (ssize_t)i;
        }
        default:
            return hb_fail(err, -HB_H3_INTERNAL_ERROR, "h3: frame reader in an unknown state");
        }
    }
}
