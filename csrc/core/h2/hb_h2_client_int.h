/* hb_h2_client_int.h - what the client session's two files share:
 *
 *   hb_h2_client.c       lifecycle, requests (HEADERS, bodies), the output
 *                        queue, streams, errors
 *   hb_h2_client_read.c  input: frames, header blocks, SETTINGS, flow
 *                        control, hb_h2_client_read
 */
#ifndef HB_H2_CLIENT_INT_H
#define HB_H2_CLIENT_INT_H

#include "h2/hb_h2_client.h"
#include "h2/hb_h2_frame.h"

#define MAX_BLOCK (1u << 20) /* a header block beyond this ends the connection */
#define MAX_LIST (1u << 20)  /* a header list beyond this resets the stream */
#define MAX_WBUF (16u << 20) /* queued output beyond this: the peer floods us */
#define DEFAULT_STREAMS 256u /* table size when settings.max_streams is 0 */
/* Limits on what a server may send that makes us work without progress:
 * CONTINUATION frames per header block (a 1 MiB block needs 64 of 16 KiB)
 * and informational (1xx) responses per stream. */
#define MAX_CONTINUATIONS 128u
#define MAX_1XX 16u

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
    uint8_t overflow; /* not in its index cell (see hb__h2c_find) */
    uint8_t n1xx;     /* informational responses so far */
} hb_h2stream;

/* Stream ids are sequential, so (id / 2) modulo a table of twice the
 * streams in flight is a direct map; a stream still open when a later id
 * wants its cell (rare: one stream outlives many) is marked overflow and
 * found by a scan of the slots. */
static inline hb_h2stream *hb__h2c_find(hb_h2_client *c, int32_t id)
{
    int32_t k = c->index[((uint32_t)id >> 1) & c->index_mask];
    if (k && c->slots[k - 1].id == id) return &c->slots[k - 1];
    if (!c->noverflow) return NULL;
    for (uint32_t i = 0; i < c->max_streams; i++)
        if (c->slots[i].id == id && c->slots[i].overflow) return &c->slots[i];
    return NULL;
}

/* Record the first connection-fatal condition; returns rc. */
__attribute__((format(printf, 3, 4))) int hb__h2c_fatal(hb_h2_client *c, int rc, const char *fmt,
                                                        ...);
/* A connection error of the peer's: GOAWAY(code), then the session is over. */
__attribute__((format(printf, 3, 4))) int hb__h2c_conn_error(hb_h2_client *c, uint32_t code,
                                                             const char *fmt, ...);
/* A stream error: RST_STREAM(code) and the stream ends HB_H2_END_PROTOCOL. */
__attribute__((format(printf, 4, 5))) int hb__h2c_stream_error(hb_h2_client *c, hb_h2stream *s,
                                                               uint32_t code, const char *fmt, ...);
/* Remove s and tell the caller how it ended (exactly once per stream). */
void hb__h2c_close_stream(hb_h2_client *c, hb_h2stream *s, int end, uint32_t code);
/* Queue one frame (payload copied) / a frame with one 32-bit field; 0 or -1. */
int hb__h2c_queue_frame(hb_h2_client *c, uint8_t type, uint8_t flags, int32_t sid,
                        const uint8_t *pl, size_t len);
int hb__h2c_queue_u32(hb_h2_client *c, uint8_t type, int32_t sid, uint32_t v);

#endif
