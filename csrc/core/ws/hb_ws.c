/* hb_ws.c - WebSocket framing (RFC 6455); the contract is in hb_ws.h. */
#include "ws/hb_ws.h"

#include <string.h>

#include <openssl/sha.h>

static int is_control(int op)
{
    return op >= 0x8;
}

static int known_opcode(int op)
{
    return op == HB_WS_CONT || op == HB_WS_TEXT || op == HB_WS_BINARY || op == HB_WS_CLOSE ||
           op == HB_WS_PING || op == HB_WS_PONG;
}

int hb_ws_parse_head(const uint8_t *buf, size_t len, hb_ws_frame *f, unsigned flags)
{
    if (len < 2) return HB_AGAIN;
    uint8_t b0 = buf[0], b1 = buf[1];
    /* RSV1: permessage-deflate when negotiated; RSV2-3: no extension uses them */
    if (b0 & ((flags & HB_WS_DEFLATE) ? 0x30 : 0x70)) return HB_WS_E_PROTOCOL;
    int op = b0 & 0x0f;
    f->rsv1 = (b0 & 0x40) != 0;
    if (f->rsv1 && (op == HB_WS_CONT || op >= 0x8)) return HB_WS_E_PROTOCOL;
    if (!known_opcode(op)) return HB_WS_E_PROTOCOL;
    f->fin = b0 >> 7;
    f->opcode = op;
    f->masked = b1 >> 7;
    if ((flags & HB_WS_SERVER) && !f->masked) return HB_WS_E_MASK;
    if ((flags & HB_WS_CLIENT) && f->masked) return HB_WS_E_MASK;
    uint64_t n = b1 & 0x7f;
    size_t need = 2;
    if (n == 126) {
        need += 2;
        if (len < need) return HB_AGAIN;
        n = (uint64_t)buf[2] << 8 | buf[3];
        if (n < 126) return HB_WS_E_LENGTH;
    } else if (n == 127) {
        need += 8;
        if (len < need) return HB_AGAIN;
        n = 0;
        for (int i = 0; i < 8; i++)
            n = n << 8 | buf[2 + i];
        if (n >> 63) return HB_WS_E_LENGTH;
        if (n <= 0xffff) return HB_WS_E_LENGTH;
    }
    if (is_control(op) && (!f->fin || n > HB_WS_MAX_CONTROL)) return HB_WS_E_CONTROL;
    if (f->masked) {
        if (len < need + 4) return HB_AGAIN;
        memcpy(f->mask, buf + need, 4);
        need += 4;
    } else
        memset(f->mask, 0, 4);
    f->len = n;
    return (int)need;
}

int hb_ws_build_head(uint8_t *out, size_t cap, int fin, int opcode, uint64_t len,
                     const uint8_t mask[4])
{
    if (len >> 63 || !known_opcode(opcode)) return HB_ERROR;
    if (is_control(opcode) && (!fin || len > HB_WS_MAX_CONTROL)) return HB_ERROR;
    size_t need = 2 + (len < 126 ? 0 : len <= 0xffff ? 2 : 8) + (mask ? 4 : 0);
    if (cap < need) return HB_ERROR;
    out[0] = (uint8_t)((fin ? 0x80 : 0) | opcode);
    uint8_t m = mask ? 0x80 : 0;
    size_t at = 2;
    if (len < 126)
        out[1] = (uint8_t)(m | len);
    else if (len <= 0xffff) {
        out[1] = m | 126;
        out[2] = (uint8_t)(len >> 8);
        out[3] = (uint8_t)len;
        at = 4;
    } else {
        out[1] = m | 127;
        for (int i = 0; i < 8; i++)
            out[2 + i] = (uint8_t)(len >> (56 - 8 * i));
        at = 10;
    }
    if (mask) memcpy(out + at, mask, 4);
    return (int)need;
}

void hb_ws_mask(uint8_t *p, size_t n, const uint8_t mask[4], uint64_t off)
{
    uint8_t k[8];
    for (int i = 0; i < 8; i++)
        k[i] = mask[(off + (uint64_t)i) & 3];
    size_t i = 0;
    if (n >= 8) {
        uint64_t k8;
        memcpy(&k8, k, 8);
        for (; i + 8 <= n; i += 8) {
            uint64_t v;
            memcpy(&v, p + i, 8);
            v ^= k8;
            memcpy(p + i, &v, 8);
        }
    }
    for (; i < n; i++)
        p[i] ^= k[i & 7];
}

/* 16 bytes as one value (SSE2 / NEON registers where the target has them) */
typedef uint64_t ws_v16 __attribute__((vector_size(16)));

void hb_ws_mask_copy(uint8_t *dst, const uint8_t *src, size_t n, const uint8_t mask[4],
                     uint64_t off)
{
    uint8_t k[16];
    for (int i = 0; i < 16; i++)
        k[i] = mask[(off + (uint64_t)i) & 3];
    ws_v16 kv;
    memcpy(&kv, k, 16);
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        ws_v16 a, b;
        memcpy(&a, src + i, 16);
        memcpy(&b, src + i + 16, 16);
        a ^= kv;
        b ^= kv;
        memcpy(dst + i, &a, 16);
        memcpy(dst + i + 16, &b, 16);
    }
    for (; i < n; i++)
        dst[i] = src[i] ^ k[i & 15];
}

/* The validator's state: 0 accept, 1 reject, else (need << 16) | (lo << 8) | hi:
 * `need` continuation bytes remain and the next one must lie in [lo, hi]. */
uint32_t hb_ws_utf8(uint32_t state, const uint8_t *p, size_t n)
{
    if (state == HB_UTF8_REJECT) return state;
    size_t i = 0;
    while (i < n) {
        if (state == HB_UTF8_ACCEPT) {
            /* ASCII runs eight bytes at a time */
            while (i + 8 <= n) {
                uint64_t v;
                memcpy(&v, p + i, 8);
                if (v & 0x8080808080808080ull) break;
                i += 8;
            }
            if (i >= n) break;
            uint8_t c = p[i++];
            if (c < 0x80) continue;
            if (c < 0xc2) return HB_UTF8_REJECT; /* continuation, or overlong 2-byte */
            if (c < 0xe0)
                state = 1u << 16 | 0x80u << 8 | 0xbf;
            else if (c == 0xe0)
                state = 2u << 16 | 0xa0u << 8 | 0xbf; /* no overlong 3-byte */
            else if (c == 0xed)
                state = 2u << 16 | 0x80u << 8 | 0x9f; /* no surrogates */
            else if (c < 0xf0)
                state = 2u << 16 | 0x80u << 8 | 0xbf;
            else if (c == 0xf0)
                state = 3u << 16 | 0x90u << 8 | 0xbf; /* no overlong 4-byte */
            else if (c < 0xf4)
                state = 3u << 16 | 0x80u << 8 | 0xbf;
            else if (c == 0xf4)
                state = 3u << 16 | 0x80u << 8 | 0x8f; /* at most U+10FFFF */
            else
                return HB_UTF8_REJECT;
        } else {
            uint8_t c = p[i++];
            uint32_t need = state >> 16, lo = state >> 8 & 0xff, hi = state & 0xff;
            if (c < lo || c > hi) return HB_UTF8_REJECT;
            state = need == 1 ? HB_UTF8_ACCEPT : (need - 1) << 16 | 0x80u << 8 | 0xbf;
        }
    }
    return state;
}

static int close_code_ok(int code)
{
    return (code >= 1000 && code <= 1003) || (code >= 1007 && code <= 1014) ||
           (code >= 3000 && code <= 4999);
}

int hb_ws_close_parse(const uint8_t *p, size_t n, int *code, const uint8_t **reason,
                      size_t *reason_len)
{
    *reason = p;
    *reason_len = 0;
    if (n == 0) {
        *code = 1005;
        return 0;
    }
    if (n == 1) return HB_WS_E_CLOSE;
    *code = p[0] << 8 | p[1];
    if (!close_code_ok(*code)) return HB_WS_E_CLOSE;
    if (hb_ws_utf8(HB_UTF8_ACCEPT, p + 2, n - 2) != HB_UTF8_ACCEPT) return HB_WS_E_UTF8;
    *reason = p + 2;
    *reason_len = n - 2;
    return 0;
}

int hb_ws_close_build(uint8_t *out, size_t cap, int code, const char *reason, size_t reason_len)
{
    if (code < 1000 || code > 4999 || reason_len > HB_WS_MAX_CONTROL - 2 || cap < 2 + reason_len)
        return HB_ERROR;
    out[0] = (uint8_t)(code >> 8);
    out[1] = (uint8_t)code;
    if (reason_len) memcpy(out + 2, reason, reason_len);
    return (int)(2 + reason_len);
}

int hb_ws_close_code(int rc)
{
    switch (rc) {
    case HB_WS_E_PROTOCOL:
    case HB_WS_E_LENGTH:
    case HB_WS_E_MASK:
    case HB_WS_E_CONTROL:
    case HB_WS_E_CLOSE:
        return 1002;
    case HB_WS_E_UTF8:
        return 1007;
    case HB_WS_E_TOO_BIG:
        return 1009;
    default:
        return 1011;
    }
}

const char *hb_ws_strerror(int rc)
{
    switch (rc) {
    case HB_WS_E_PROTOCOL:
        return "WebSocket protocol error";
    case HB_WS_E_LENGTH:
        return "WebSocket frame length invalid (2^63 or more, or not minimal)";
    case HB_WS_E_MASK:
        return "WebSocket frame masking wrong for its direction";
    case HB_WS_E_CONTROL:
        return "WebSocket control frame fragmented or over 125 bytes";
    case HB_WS_E_UTF8:
        return "WebSocket text is not valid UTF-8";
    case HB_WS_E_TOO_BIG:
        return "WebSocket message over the size or fragment limit";
    case HB_WS_E_CLOSE:
        return "WebSocket close frame invalid";
    case HB_WS_E_HANDSHAKE:
        return "WebSocket opening handshake failed";
    default:
        return "WebSocket error";
    }
}

void hb_ws_rx_init(hb_ws_rx *rx, unsigned flags, uint64_t max_msg, uint32_t max_frags)
{
    memset(rx, 0, sizeof *rx);
    rx->flags = flags;
    rx->max_msg = max_msg ? max_msg : (uint64_t)1 << 62;
    rx->max_frags = max_frags;
}

static int rx_fail(hb_ws_rx *rx, int rc)
{
    rx->error = rc;
    return rc;
}

/* A data frame's head was parsed: check it against the open message. */
static int rx_data_head(hb_ws_rx *rx, const hb_ws_frame *f)
{
    if (f->opcode == HB_WS_CONT) {
        if (!rx->in_msg) return HB_WS_E_PROTOCOL; /* continuation of nothing */
    } else {
        if (rx->in_msg) return HB_WS_E_PROTOCOL; /* new message inside a fragmented one */
        rx->in_msg = 1;
        rx->msg_opcode = f->opcode;
        rx->msg_first = 1;
        rx->msg_rsv1 = f->rsv1;
        rx->msg_len = 0;
        rx->msg_frags = 0;
        rx->utf8 = HB_UTF8_ACCEPT;
    }
    rx->msg_frags++;
    if (rx->max_frags && rx->msg_frags > rx->max_frags) return HB_WS_E_TOO_BIG;
    if (f->len > rx->max_msg - rx->msg_len) return HB_WS_E_TOO_BIG;
    rx->msg_len += f->len;
    return 0;
}

int hb_ws_rx_next(hb_ws_rx *rx, uint8_t *buf, size_t len, hb_ws_event *ev)
{
    ev->type = HB_WS_EV_NONE;
    ev->compressed = 0;
    ev->data = buf;
    ev->data_len = 0;
    if (rx->error) return rx->error;
    size_t used = 0;
    if (!rx->in_frame) {
        hb_ws_frame f;
        int h = hb_ws_parse_head(buf, len, &f, rx->flags);
        if (h == HB_AGAIN) return 0;
        if (h < 0) return rx_fail(rx, h);
        if (is_control(f.opcode)) {
            if (len - (size_t)h < f.len) return 0; /* only consumed whole */
            uint8_t *p = buf + h;
            if (f.masked) hb_ws_mask(p, (size_t)f.len, f.mask, 0);
            ev->data = p;
            ev->data_len = (size_t)f.len;
            rx->frames++;
            if (f.opcode == HB_WS_CLOSE) {
                const uint8_t *r;
                size_t rl;
                int rc = hb_ws_close_parse(p, (size_t)f.len, &ev->code, &r, &rl);
                if (rc < 0) return rx_fail(rx, rc);
                ev->data = r;
                ev->data_len = rl;
                ev->type = HB_WS_EV_CLOSE;
            } else
                ev->type = f.opcode == HB_WS_PING ? HB_WS_EV_PING : HB_WS_EV_PONG;
            return h + (int)f.len;
        }
        int rc = rx_data_head(rx, &f);
        if (rc < 0) return rx_fail(rx, rc);
        rx->f = f;
        rx->off = 0;
        rx->in_frame = 1;
        rx->frames++;
        used = (size_t)h;
    }
    /* payload of the current data frame */
    uint64_t left = rx->f.len - rx->off;
    size_t n = len - used;
    if (n > left) n = (size_t)left;
    if (n == 0 && left) return (int)used; /* NONE: the payload has not arrived yet */
    /* a call consumes at most INT_MAX bytes */
    if (n > (size_t)0x7fffffff - used) n = (size_t)0x7fffffff - used;
    uint8_t *p = buf + used;
    if (rx->f.masked) hb_ws_mask(p, n, rx->f.mask, rx->off);
    rx->off += n;
    int frame_done = rx->off == rx->f.len;
    int msg_done = frame_done && rx->f.fin;
    if (rx->msg_opcode == HB_WS_TEXT && !rx->msg_rsv1) {
        rx->utf8 = hb_ws_utf8(rx->utf8, p, n);
        if (rx->utf8 == HB_UTF8_REJECT || (msg_done && rx->utf8 != HB_UTF8_ACCEPT))
            return rx_fail(rx, HB_WS_E_UTF8);
    }
    ev->type = HB_WS_EV_DATA;
    ev->opcode = rx->msg_opcode;
    ev->first = rx->msg_first;
    ev->compressed = rx->msg_rsv1;
    ev->fin = msg_done;
    ev->data = p;
    ev->data_len = n;
    rx->msg_first = 0;
    if (frame_done) rx->in_frame = 0;
    if (msg_done) rx->in_msg = 0;
    return (int)(used + n);
}

static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static size_t b64(const uint8_t *in, size_t n, char *out)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16;
        if (i + 1 < n) v |= (uint32_t)in[i + 1] << 8;
        if (i + 2 < n) v |= in[i + 2];
        out[o++] = B64[v >> 18 & 63];
        out[o++] = B64[v >> 12 & 63];
        out[o++] = i + 1 < n ? B64[v >> 6 & 63] : '=';
        out[o++] = i + 2 < n ? B64[v & 63] : '=';
    }
    return o;
}

int hb_ws_key_ok(const char *key, size_t len)
{
    if (len != 24 || key[22] != '=' || key[23] != '=') return 0;
    for (size_t i = 0; i < 22; i++)
        if (!memchr(B64, key[i], 64) || key[i] == 0) return 0;
    /* 16 bytes: the last character's low four bits are padding zeros */
    const char *last = memchr(B64, key[21], 64);
    return ((last - B64) & 15) == 0;
}

int hb_ws_accept(const char *key, size_t len, char out[29])
{
    static const char guid[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
    char in[64 + sizeof guid];
    uint8_t md[SHA_DIGEST_LENGTH];
    if (len > 64) return HB_ERROR;
    memcpy(in, key, len);
    memcpy(in + len, guid, sizeof guid - 1);
    SHA1((const unsigned char *)in, len + sizeof guid - 1, md);
    out[b64(md, sizeof md, out)] = 0;
    return 28;
}

void hb_ws_make_key(const uint8_t nonce[16], char out[25])
{
    out[b64(nonce, 16, out)] = 0;
}
