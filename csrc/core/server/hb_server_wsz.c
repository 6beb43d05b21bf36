/* hb_server_wsz.c - permessage-deflate (RFC 7692) on the embedded server's
 * /ws, with zlib: the negotiation of the client's offers, and the echo of a
 * compressed message as a pipeline that never holds the message: compressed
 * bytes from the reader are inflated into a 4 KiB buffer (a message inflating
 * past 64 MiB is closed with 1009; data zlib cannot inflate with 1007, invalid
 * payload data, as for invalid UTF-8: RFC 7692 names no code), a text message's
 * inflated bytes are UTF-8-checked, and re-deflated into echo frames of at
 * most 4000 bytes (RSV1 on the first only, the final sync flush's 00 00 ff ff
 * stripped). Built without zlib.h (HB_NO_ZLIB), no offer is ever accepted. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/hb_content.h"
#include "server/hb_server_int.h"
#include "ws/hb_ws.h"

#ifdef HB_NO_ZLIB

int hb__wsz_negotiate(const hb_request_head *h, struct hb__wsz **z, char *hdr, size_t cap)
{
    (void)h, (void)hdr, (void)cap;
    *z = NULL;
    return 0;
}
void hb__wsz_free(struct hb__wsz *z)
{
    (void)z;
}
void hb__wsz_input(struct hb__wsz *z, const uint8_t *p, size_t n, int first, int fin, int op)
{
    (void)z, (void)p, (void)n, (void)first, (void)fin, (void)op;
}
int hb__wsz_pump(hb__conn *c, struct hb__wsz *z)
{
    (void)c, (void)z;
    return 0;
}
int hb__wsz_busy(const struct hb__wsz *z)
{
    (void)z;
    return 0;
}
void hb__wsz_push(struct hb__wsz *z, const char *content, uint64_t size, int op)
{
    (void)z, (void)content, (void)size, (void)op;
}
int hb__wsz_active(const struct hb__wsz *z)
{
    (void)z;
    return 0;
}

#else

#include <zlib.h>

#define ZIN 4096
#define ZOUT 4000                 /* a frame's payload: with its head it fits hb__out_room's 4096 */
#define WSZ_MAX_MSG (64ull << 20) /* inflated bytes of a message at most (close 1009) */

struct hb__wsz {
    z_stream inf, def;
    int server_no_ctx, client_no_ctx;
    /* the message in progress */
    int active, op, fin_seen, tail_fed, inf_more, out_started, flushing;
    int raw;            /* a pushed message: content bytes deflated, nothing inflated */
    const uint8_t *src; /* its content (HB_CONTENT_PERIOD + HB_CONTENT_WIN bytes) */
    uint64_t src_off, src_left;
    const uint8_t *pin; /* compressed input not yet inflated (in the read buffer) */
    size_t pin_len;
    size_t zin_pos, zin_len, carry;
    uint64_t inflated;
    uint32_t utf8;
    uint8_t zin[ZIN];
    uint8_t zout[ZOUT];
};

/* One extension offer: "permessage-deflate; p1; p2=v". 1 accepted (the answer's
 * parameters in ans), 0 declined. */
static int offer(const char *v, size_t n, int *sbits, int *sno, int *cno)
{
    static const char name[] = "permessage-deflate";
    size_t i = 0;
    while (i < n && (v[i] == ' ' || v[i] == '\t'))
        i++;
    size_t s = i;
    while (i < n && v[i] != ';' && v[i] != ' ' && v[i] != '\t')
        i++;
    if (i - s != sizeof name - 1 || strncasecmp(v + s, name, i - s) != 0) return 0;
    int seen_sbits = 0, seen_cbits = 0;
    *sbits = 15;
    *sno = *cno = 0;
    while (i < n) {
        while (i < n && (v[i] == ' ' || v[i] == '\t' || v[i] == ';'))
            i++;
        if (i >= n) break;
        size_t ps = i;
        while (i < n && v[i] != '=' && v[i] != ';' && v[i] != ' ' && v[i] != '\t')
            i++;
        size_t pl = i - ps;
        while (i < n && (v[i] == ' ' || v[i] == '\t'))
            i++;
        const char *val = NULL;
        size_t vl = 0;
        if (i < n && v[i] == '=') {
            i++;
            while (i < n && (v[i] == ' ' || v[i] == '\t'))
                i++;
            size_t vs = i;
            while (i < n && v[i] != ';' && v[i] != ' ' && v[i] != '\t')
                i++;
            val = v + vs;
            vl = i - vs;
            if (vl >= 2 && val[0] == '"' && val[vl - 1] == '"') { /* a quoted-string */
                val++;
                vl -= 2;
            }
        }
        int bits = 0;
        if (val) {
            if (vl < 1 || vl > 2) return 0;
            for (size_t k = 0; k < vl; k++) {
                if (val[k] < '0' || val[k] > '9') return 0;
                bits = bits * 10 + (val[k] - '0');
            }
            if ((vl == 2 && val[0] == '0') || bits < 8 || bits > 15) return 0;
        }
#define PARAM(lit) (pl == sizeof(lit) - 1 && strncasecmp(v + ps, lit, pl) == 0)
        if (PARAM("server_no_context_takeover")) {
            if (val || *sno) return 0;
            *sno = 1;
        } else if (PARAM("client_no_context_takeover")) {
            if (val || *cno) return 0;
            *cno = 1;
        } else if (PARAM("server_max_window_bits")) {
            /* zlib's raw deflate cannot keep an 8-bit window: decline that one */
            if (!val || seen_sbits || bits == 8) return 0;
            seen_sbits = 1;
            *sbits = bits;
        } else if (PARAM("client_max_window_bits")) {
            /* the client's window is at most what it says; we inflate with 15 bits,
             * which reads any smaller window, so the answer leaves it out */
            if (seen_cbits) return 0;
            seen_cbits = 1;
        } else
            return 0; /* an unknown parameter: decline the offer */
#undef PARAM
    }
    return 1;
}

int hb__wsz_negotiate(const hb_request_head *h, struct hb__wsz **z, char *hdr, size_t cap)
{
    *z = NULL;
    for (size_t k = 0; k < h->num_headers; k++) {
        const hb_header *f = &h->headers[k];
        if (f->name_len != 24 || strncasecmp(f->name, "sec-websocket-extensions", 24) != 0)
            continue;
        /* offers are comma-separated (no comma inside a parameter we accept) */
        size_t i = 0;
        while (i < f->value_len) {
            size_t s = i;
            while (i < f->value_len && f->value[i] != ',')
                i++;
            int sbits, sno, cno;
            if (offer(f->value + s, i - s, &sbits, &sno, &cno)) {
                struct hb__wsz *w = calloc(1, sizeof *w);
                if (!w) return -1;
                if (inflateInit2(&w->inf, -15) != Z_OK) {
                    free(w);
                    return -1;
                }
                if (deflateInit2(&w->def, 1, Z_DEFLATED, -sbits, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
                    inflateEnd(&w->inf);
                    free(w);
                    return -1;
                }
                w->server_no_ctx = sno;
                w->client_no_ctx = cno;
                char bits[48] = "";
                if (sbits != 15) snprintf(bits, sizeof bits, "; server_max_window_bits=%d", sbits);
                snprintf(hdr, cap, "Sec-WebSocket-Extensions: permessage-deflate%s%s%s\r\n",
                         sno ? "; server_no_context_takeover" : "",
                         cno ? "; client_no_context_takeover" : "", bits);
                *z = w;
                return 1;
            }
            i++;
        }
    }
    return 0;
}

void hb__wsz_free(struct hb__wsz *z)
{
    if (!z) return;
    inflateEnd(&z->inf);
    deflateEnd(&z->def);
    free(z);
}

void hb__wsz_input(struct hb__wsz *z, const uint8_t *p, size_t n, int first, int fin, int op)
{
    if (first) {
        z->active = 1;
        z->op = op;
        z->fin_seen = z->tail_fed = z->inf_more = z->out_started = z->flushing = 0;
        z->zin_pos = z->zin_len = z->carry = 0;
        z->inflated = 0;
        z->utf8 = HB_UTF8_ACCEPT;
    }
    z->pin = p;
    z->pin_len = n;
    if (fin) z->fin_seen = 1;
}

void hb__wsz_push(struct hb__wsz *z, const char *content, uint64_t size, int op)
{
    hb__wsz_input(z, NULL, 0, 1, 1, op);
    z->raw = 1;
    z->tail_fed = 1;
    z->src = (const uint8_t *)content;
    z->src_off = 0;
    z->src_left = size;
}

int hb__wsz_active(const struct hb__wsz *z)
{
    return z && z->active;
}

int hb__wsz_busy(const struct hb__wsz *z)
{
    return z && z->active && (z->pin_len || z->zin_pos < z->zin_len || z->inf_more || z->fin_seen);
}

/* Queue one echo frame of the message (RSV1 on its first). */
static void emit(hb__conn *c, struct hb__wsz *z, const uint8_t *p, size_t n, int fin)
{
    if (!n && !fin) return;
    uint8_t h[HB_WS_MAX_HEAD];
    int hl = hb_ws_build_head(h, sizeof h, fin, z->out_started ? HB_WS_CONT : z->op, n, NULL);
    if (!z->out_started) h[0] |= 0x40;
    z->out_started = 1;
    hb__out_bytes(c, h, (size_t)hl);
    hb__out_bytes(c, p, n);
    HB__ADD(c->w->st.ws.frames_out, 1);
    HB__ADD(c->w->st.ws.payload_out, n);
}

int hb__wsz_pump(hb__conn *c, struct hb__wsz *z)
{
    static const uint8_t tail[4] = {0x00, 0x00, 0xff, 0xff};
    while (hb__wsz_busy(z)) {
        /* inflating costs the turn's budget like reading: a bomb-sized message
         * (64 MiB from a few KB) waits behind the worker's other connections */
        if (!hb__out_room(c) || c->budget <= 0) return 1;
        if (z->zin_pos < z->zin_len) { /* re-deflate inflated bytes */
            z->def.next_in = z->zin + z->zin_pos;
            z->def.avail_in = (uInt)(z->zin_len - z->zin_pos);
            z->def.next_out = z->zout;
            z->def.avail_out = ZOUT;
            if (deflate(&z->def, Z_NO_FLUSH) == Z_STREAM_ERROR) return 1011;
            z->zin_pos = z->zin_len - z->def.avail_in;
            emit(c, z, z->zout, ZOUT - z->def.avail_out, 0);
            continue;
        }
        if (z->raw && z->src_left) { /* a push: the next content bytes */
            size_t take = z->src_left < ZIN ? (size_t)z->src_left : ZIN;
            memcpy(z->zin, z->src + z->src_off % HB_CONTENT_PERIOD, take);
            z->src_off += take;
            z->src_left -= take;
            c->budget -= (int64_t)take;
            z->zin_pos = 0;
            z->zin_len = take;
            continue;
        }
        if (z->pin_len || z->inf_more || (z->fin_seen && !z->tail_fed)) { /* inflate more */
            if (!z->pin_len && !z->inf_more && z->fin_seen) {
                z->pin = tail; /* the tail the sender stripped (RFC 7692 7.2.2) */
                z->pin_len = sizeof tail;
                z->tail_fed = 1;
            }
            z->inf.next_in = (Bytef *)(uintptr_t)z->pin;
            z->inf.avail_in = (uInt)z->pin_len;
            z->inf.next_out = z->zin;
            z->inf.avail_out = ZIN;
            int rc = inflate(&z->inf, Z_SYNC_FLUSH);
            if (rc == Z_STREAM_END) { /* a final block: the next bytes start afresh */
                rc = inflateReset(&z->inf);
            }
            if (rc != Z_OK && rc != Z_BUF_ERROR) return 1007;
            size_t used = z->pin_len - z->inf.avail_in;
            z->pin += used;
            z->pin_len -= used;
            size_t got = ZIN - z->inf.avail_out;
            z->inf_more = z->inf.avail_out == 0;
            if (rc == Z_BUF_ERROR && z->pin_len && !got && !used) return 1007; /* stuck */
            z->inflated += got;
            c->budget -= (int64_t)got;
            if (z->inflated > WSZ_MAX_MSG) return 1009;
            if (z->op == HB_WS_TEXT) {
                z->utf8 = hb_ws_utf8(z->utf8, z->zin, got);
                if (z->utf8 == HB_UTF8_REJECT) return 1007;
            }
            z->zin_pos = 0;
            z->zin_len = got;
            continue;
        }
        /* all inflated and re-deflated: the final sync flush, its tail stripped */
        if (!z->raw && z->op == HB_WS_TEXT && z->utf8 != HB_UTF8_ACCEPT) return 1007;
        z->def.next_in = NULL;
        z->def.avail_in = 0;
        z->def.next_out = z->zout + z->carry;
        z->def.avail_out = (uInt)(ZOUT - z->carry);
        if (deflate(&z->def, Z_SYNC_FLUSH) == Z_STREAM_ERROR) return 1011;
        size_t have = ZOUT - z->def.avail_out;
        if (z->def.avail_out == 0) { /* more to come: keep the last 4 bytes back */
            emit(c, z, z->zout, have - 4, 0);
            memmove(z->zout, z->zout + have - 4, 4);
            z->carry = 4;
            continue;
        }
        if (have == 0) { /* nothing since the last flush: an empty block, 0x00 (7.2.3.6) */
            z->zout[0] = 0x00;
            have = 5;
        } else if (have < 4 || memcmp(z->zout + have - 4, tail, 4) != 0)
            return 1011;
        emit(c, z, z->zout, have - 4, 1);
        z->active = 0;
        z->fin_seen = 0;
        z->carry = 0;
        if (z->server_no_ctx) deflateReset(&z->def);
        if (z->client_no_ctx && !z->raw) inflateReset(&z->inf);
        int pushed = z->raw;
        z->raw = 0;
        return pushed ? 3 : 2;
    }
    return 0;
}

#endif
