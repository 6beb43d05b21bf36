/* hb_ws.h - WebSocket framing (RFC 6455): frame heads, the masking, an
 * incremental reader of frames and messages, close payloads, incremental UTF-8
 * validation and the opening handshake's key.
 *
 * Shaped like hb_parse: the caller owns every buffer, nothing is allocated,
 * results point into the caller's input. The reader (hb_ws_rx) is fed any
 * split of the byte stream: it unmasks data in place, validates text messages'
 * UTF-8 across fragments, enforces the fragmentation and control-frame rules
 * and bounds a message's size and fragment count, so a hostile peer costs
 * bounded memory and time. Errors are HB_WS_E_* (in their own range, see
 * hb_common.h) and sticky; hb_ws_close_code maps each to the close code the
 * endpoint sends (1002 protocol error, 1007 invalid UTF-8, 1009 too big).
 */
#ifndef HB_WS_H
#define HB_WS_H

#include <stddef.h>
#include <stdint.h>

#include "base/hb_common.h"

enum hb_ws_opcode {
    HB_WS_CONT = 0x0,
    HB_WS_TEXT = 0x1,
    HB_WS_BINARY = 0x2,
    HB_WS_CLOSE = 0x8,
    HB_WS_PING = 0x9,
    HB_WS_PONG = 0xA,
};

/* -5500 .. -5549: WebSocket. */
enum hb_ws_error {
    HB_WS_E_PROTOCOL = -5500,  /* bad frame: reserved bits/opcode, unexpected continuation ... */
    HB_WS_E_LENGTH = -5501,    /* length with the top bit set (2^63 and up) or not minimal */
    HB_WS_E_MASK = -5502,      /* masked where it must not be, or unmasked where it must */
    HB_WS_E_CONTROL = -5503,   /* control frame fragmented or longer than 125 bytes */
    HB_WS_E_UTF8 = -5504,      /* text message or close reason not UTF-8 */
    HB_WS_E_TOO_BIG = -5505,   /* message over max_msg bytes or max_frags fragments */
    HB_WS_E_CLOSE = -5506,     /* close payload of 1 byte, or a code never sent on the wire */
    HB_WS_E_HANDSHAKE = -5507, /* the opening handshake failed (status, headers, key) */
    HB_WS_E_LAST = -5549,
};

static inline int hb_is_ws_error(int rc)
{
    return rc <= HB_WS_E_PROTOCOL && rc >= HB_WS_E_LAST;
}

/* The largest frame head: 2 + 8 (length) + 4 (mask). */
#define HB_WS_MAX_HEAD 14
/* A control frame's payload limit (RFC 6455 5.5). */
#define HB_WS_MAX_CONTROL 125

/* One frame head. */
typedef struct hb_ws_frame {
    int fin;
    int opcode;      /* enum hb_ws_opcode */
    int masked;      /* the MASK bit */
    int rsv1;        /* RSV1 (only with HB_WS_DEFLATE: a compressed message) */
    uint8_t mask[4]; /* the masking key when masked */
    uint64_t len;    /* payload length (< 2^63) */
} hb_ws_frame;

/* Flags of hb_ws_parse_head and hb_ws_rx_init. */
#define HB_WS_SERVER 1u /* frames come from a client: every one must be masked */
#define HB_WS_CLIENT 2u /* frames come from a server: none may be masked */
/* permessage-deflate (RFC 7692) was negotiated: RSV1 may mark a data message's
 * first frame as compressed (on any other frame it is a protocol error); a
 * compressed message's bytes are not UTF-8-checked (its inflated text is). */
#define HB_WS_DEFLATE 4u

/* Parse one frame head from buf[0, len). Returns the head's length (2 .. 14),
 * HB_AGAIN when incomplete, or HB_WS_E_*: reserved bits set (RSV1 is allowed
 * with HB_WS_DEFLATE on a TEXT or BINARY frame; RSV2-3 never), a reserved opcode, a control frame
 * fragmented or over 125 bytes, a 64-bit length with the top bit set or any length not in its
 * minimal encoding, a mask bit against HB_WS_SERVER / HB_WS_CLIENT. */
int hb_ws_parse_head(const uint8_t *buf, size_t len, hb_ws_frame *f, unsigned flags);

/* Write a frame head for a payload of `len` bytes into out[0, cap): masked
 * with mask[4] when mask is non-NULL. Returns its length (2 .. 14), or
 * HB_ERROR when cap is too small, len >= 2^63, or a control frame is
 * fragmented or over 125 bytes. */
int hb_ws_build_head(uint8_t *out, size_t cap, int fin, int opcode, uint64_t len,
                     const uint8_t mask[4]);

/* XOR p[0, n) with the mask, as payload bytes starting at payload offset
 * `off` (a payload unmasked in pieces). Its own inverse. */
void hb_ws_mask(uint8_t *p, size_t n, const uint8_t mask[4], uint64_t off);
/* dst[0, n) = src[0, n) masked (as hb_ws_mask, payload offset `off`) in one pass;
 * the two may not overlap. */
void hb_ws_mask_copy(uint8_t *dst, const uint8_t *src, size_t n, const uint8_t mask[4],
                     uint64_t off);

/* Incremental UTF-8 validation (RFC 3629: no overlongs, no surrogates, at most
 * U+10FFFF). Start from HB_UTF8_ACCEPT; the state after all input is
 * HB_UTF8_ACCEPT for complete valid text, HB_UTF8_REJECT once anything was
 * invalid (sticky), anything else mid-sequence. */
#define HB_UTF8_ACCEPT 0u
#define HB_UTF8_REJECT 1u
uint32_t hb_ws_utf8(uint32_t state, const uint8_t *p, size_t n);

/* Close payloads. Parse: code 1005 ("none") for an empty payload; HB_WS_E_CLOSE
 * for a 1-byte payload or a code never sent (below 1000, 1004-1006, 1015,
 * 1016-2999, 5000 and up); HB_WS_E_UTF8 for a reason that is not UTF-8; else 0
 * with reason/reason_len pointing into p. Build: code (1000 .. 4999) and
 * reason (at most 123 bytes) into out; returns the payload length or HB_ERROR. */
int hb_ws_close_parse(const uint8_t *p, size_t n, int *code, const uint8_t **reason,
                      size_t *reason_len);
int hb_ws_close_build(uint8_t *out, size_t cap, int code, const char *reason, size_t reason_len);

/* The close code an endpoint sends for an HB_WS_E_* error (1002, 1007, 1009),
 * 1011 for anything else. */
int hb_ws_close_code(int rc);

/* Static text for an HB_WS_E_* code. */
const char *hb_ws_strerror(int rc);

/* What hb_ws_rx_next found. */
enum hb_ws_ev_type {
    HB_WS_EV_NONE = 0, /* more input needed */
    HB_WS_EV_DATA,     /* message bytes [data, data_len) (unmasked); fin: the message ends */
    HB_WS_EV_PING,     /* a whole ping; its payload in [data, data_len) */
    HB_WS_EV_PONG,
    HB_WS_EV_CLOSE, /* a whole, valid close: code (1005 for none), reason in data */
};

typedef struct hb_ws_event {
    int type;       /* enum hb_ws_ev_type */
    int opcode;     /* DATA: the message's opcode (HB_WS_TEXT or HB_WS_BINARY) */
    int fin;        /* DATA: these are the message's last bytes */
    int first;      /* DATA: these are the message's first bytes */
    int compressed; /* DATA: the message is compressed (RSV1 on its first frame) */
    int code;       /* CLOSE: the status code */
    const uint8_t *data;
    size_t data_len;
} hb_ws_event;

/* The reader's state: set the limits, then hb_ws_rx_init. */
typedef struct hb_ws_rx {
    uint64_t max_msg;   /* a message's bytes at most (0: 2^62) */
    uint32_t max_frags; /* a message's frames at most (0: unbounded) */
    unsigned flags;     /* HB_WS_SERVER / HB_WS_CLIENT */
    /* state */
    int in_frame;   /* a data frame's head was consumed, payload follows */
    hb_ws_frame f;  /* that frame */
    uint64_t off;   /* its payload bytes delivered */
    int in_msg;     /* a fragmented message is open (its first frame was not final) */
    int msg_opcode; /* its opcode */
    int msg_first;  /* no byte of the open message delivered yet */
    int msg_rsv1;   /* the open message is compressed */
    uint64_t msg_len;
    uint32_t msg_frags;
    uint32_t utf8;   /* text: the validator's state */
    int error;       /* sticky HB_WS_E_* */
    uint64_t frames; /* frames read (a data frame once its head is, a control frame whole) */
} hb_ws_rx;

void hb_ws_rx_init(hb_ws_rx *rx, unsigned flags, uint64_t max_msg, uint32_t max_frags);

/* Read the next event from buf[0, len), which it may unmask in place. Returns
 * the bytes consumed (>= 0) with *ev filled, or HB_WS_E_* (sticky). ev->type
 * HB_WS_EV_NONE means more input is needed: keep buf[ret, len) and call again
 * with more appended (a control frame is only consumed whole, so a caller's
 * buffer needs HB_WS_MAX_HEAD + 125 bytes at least). A data frame's payload
 * comes as DATA events of whatever is available, zero-length ones included
 * (an empty frame, or an empty message with fin). */
int hb_ws_rx_next(hb_ws_rx *rx, uint8_t *buf, size_t len, hb_ws_event *ev);

/* The opening handshake. hb_ws_key_ok: the client's Sec-WebSocket-Key is
 * base64 of 16 bytes (24 characters). hb_ws_accept: its Sec-WebSocket-Accept
 * (base64 of SHA-1(key + GUID)) into out[0, 28), NUL at out[28]; returns 28, or
 * HB_ERROR for a key over 64 bytes (a valid one has 24). */
int hb_ws_key_ok(const char *key, size_t len);
int hb_ws_accept(const char *key, size_t len, char out[29]);
/* A client key from 16 bytes of the caller's randomness: out[24], NUL at out[24]. */
void hb_ws_make_key(const uint8_t nonce[16], char out[25]);

#endif
