/* hb_h2_frame.h - HTTP/2's wire format (RFC 9113 sections 3.4, 4, 6, 7):
 * frame types and flags, error codes, the connection preface, and the
 * 9-byte frame header and 32-bit fields in network order. Header-only. */
#ifndef HB_H2_FRAME_H
#define HB_H2_FRAME_H

#include <stdint.h>

/* Frame types and flags (RFC 9113 section 6). */
enum hb_h2_frame_type {
    HB_H2_F_DATA = 0,
    HB_H2_F_HEADERS = 1,
    HB_H2_F_PRIORITY = 2,
    HB_H2_F_RST_STREAM = 3,
    HB_H2_F_SETTINGS = 4,
    HB_H2_F_PUSH_PROMISE = 5,
    HB_H2_F_PING = 6,
    HB_H2_F_GOAWAY = 7,
    HB_H2_F_WINDOW_UPDATE = 8,
    HB_H2_F_CONTINUATION = 9,
};
#define HB_H2_FL_END_STREAM 0x1
#define HB_H2_FL_ACK 0x1
#define HB_H2_FL_END_HEADERS 0x4
#define HB_H2_FL_PADDED 0x8
#define HB_H2_FL_PRIORITY 0x20

/* Error codes (section 7). */
enum hb_h2_error_code {
    HB_H2_E_NO_ERROR = 0,
    HB_H2_E_PROTOCOL = 1,
    HB_H2_E_INTERNAL = 2,
    HB_H2_E_FLOW_CONTROL = 3,
    HB_H2_E_STREAM_CLOSED = 5,
    HB_H2_E_FRAME_SIZE = 6,
    HB_H2_E_REFUSED_STREAM = 7,
    HB_H2_E_CANCEL = 8,
    HB_H2_E_COMPRESSION = 9,
    HB_H2_E_ENHANCE_YOUR_CALM = 11,
};

#define HB_H2_MAX_WINDOW 0x7fffffffu
#define HB_H2_DEFAULT_WINDOW 65535u
#define HB_H2_PREFACE "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

static inline uint32_t hb_h2_get32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}
static inline void hb_h2_put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}
/* The frame header: 24-bit length, type, flags, 31-bit stream id. */
static inline void hb_h2_put_fh(uint8_t *p, uint32_t len, uint8_t type, uint8_t flags, int32_t sid)
{
    p[0] = (uint8_t)(len >> 16);
    p[1] = (uint8_t)(len >> 8);
    p[2] = (uint8_t)len;
    p[3] = type;
    p[4] = flags;
    hb_h2_put32(p + 5, (uint32_t)sid & HB_H2_MAX_WINDOW);
}

#endif
