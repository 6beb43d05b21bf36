/* hb_h2_server_int.h - internals shared by the HTTP/2 server's files (never
 * in a public header).
 *
 * hb_h2_server.c         the session: public API, input scan, output queue, slab memory
 * hb_h2_server_stream.c  streams, responses and routes; the nghttp2 callbacks
 * hb_h2_server_events.c  the event routes' bodies: /sse and /stream piece by piece
 */
#ifndef HB_H2_SERVER_INT_H
#define HB_H2_SERVER_INT_H

#include "h2/hb_h2_server.h"

#ifndef HB_NO_NGHTTP2

#include <nghttp2/nghttp2.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "base/hb_common.h"
#include "base/hb_content.h"
#include "http/hb_sse.h"

#define NIOV 128
#define ARENA (64 * 1024)
#define ARENA_BYTES (NIOV * sizeof(struct iovec) + ARENA)
#define ARENA_LOW (20 * 1024) /* stop serializing below this: a frame chunk may be 16 KiB */
#define BATCH (256 * 1024)    /* bytes queued per fill */
#define PATH_MAX_LEN 4096
#define CONN_WINDOW (1 << 30) /* connection receive window: streams do the limiting */
#define BOMB_FACTOR 16        /* decoded header bytes beyond limit x this: GOAWAY */
#define NS_PER_MS 1000000ull
#define SMALL_BODY 1024 /* DATA payloads up to this are copied into the queue */
#define PREFACE_LEN 24

#define ADD(field, n) __atomic_store_n(&(field), (field) + (n), __ATOMIC_RELAXED)

enum src { SRC_NONE, SRC_CONTENT, SRC_MEM, SRC_ECHO, SRC_EVENTS };
enum wait { W_NONE, W_DELAY, W_DRIP, W_STALL, W_EVENTS };

typedef struct h2stream {
    struct h2stream *prev, *next; /* live list / free list (next only) */
    int32_t id;
    uint8_t counted, status_owed, responded, req_done, too_large, bad_method;
    uint8_t head_only, src, no_eof, deferred, wait, stall_armed, peer_reset, echo;
    hb_route_req rq;
    uint64_t deadline;
    uint64_t soff;        /* content offset (SRC_CONTENT) or byte index (SRC_MEM) sent next */
    uint64_t left, avail; /* body bytes the provider still hands out / may hand out now */
    const char *mem;      /* SRC_MEM bytes */
    uint64_t body_bytes;
    uint32_t crc;
    int64_t req_cl;
    uint64_t hdr_bytes;
    char *stats_doc;
    char *ebuf; /* echo: bytes [epos, elen) received, [erd, elen) not yet handed out */
    size_t ecap, epos, erd, elen;
    /* SRC_EVENTS (/sse, /stream; hb_h2_server_events.c): piece ev_seq - 1 of
     * ev_count is the current one (SSE: piece 0 is the preamble, piece i event
     * i), ev_len bytes of which ev_rd are framed and ev_wr queued; the next is
     * due at ev_due; ev_progress: when the stream last moved */
    uint8_t ev_sse, ev_cut;
    int ev_niov;
    uint64_t ev_seq, ev_count, ev_interval, ev_due, ev_progress;
    size_t ev_len, ev_rd, ev_wr;
    struct iovec ev_iov[HB_SSE_EVENT_IOV];
    char ev_scratch[HB_SSE_SCRATCH];
    size_t mlen, plen;
    char method[16];
    char stbuf[4];
    char clbuf[24];
    char jbuf[96];
    char path[PATH_MAX_LEN];
} h2stream;

#define SLAB_BYTES (512 * 1024) /* address space; pages count only once touched */
#define SLAB_HDR 16             /* before each block: its kind, and its size if not a class */
#define SLAB_CLASSES 7          /* 16 B .. 1 KiB, header included */
#define SLAB_LARGE 0xfe
#define SLAB_BIG 0xff /* from malloc: too large, or the mapping is used up */

typedef struct slab {
    char *lo, *hi; /* free space between */
    void *freel[SLAB_CLASSES];
    uint8_t *large; /* freed large blocks */
} slab;

struct hb_h2_server {
    nghttp2_session *ng;
    slab *slab;
    nghttp2_mem mem;
    hb_h2_server_config cfg;
    hb_h2_server_stats *st;
    h2stream *live, *free;
    uint32_t nlive;
    uint32_t term_code;
    uint8_t term_pending, fatal, fatal_counted;
    uint8_t timers; /* a stream may have a deadline: hb_h2_server_deadline must look */
    int iov_first, niov;
    size_t alen, qbytes;
    /* the frame boundaries of the input, followed ahead of nghttp2 so frames
     * that do no work are counted whatever their type */
    uint32_t pre_left, pay_left;
    uint8_t hlen, hdr[9];
    uint64_t frames;
    int64_t idle_tokens; /* no-work frames still allowed (HB_H2_IDLE_FRAMES_*) */
    uint64_t idle_at;    /* when idle_tokens was last refilled */
    /* the output queue (NIOV iovecs, then the bytes they point into), held
     * only while output is queued or streams are open */
    struct iovec *iov;
    char *arena;
};

/* hb_h2_server.c: memory and the output queue */
/* a block from the session's slab (ud: the slab); nghttp2 gets it through nghttp2_mem */
void *hb__h2_slab_malloc(size_t n, void *ud);
/* whether the queue takes bytes more bytes in iovs more iovecs */
int hb__h2_room(const hb_h2_server *s, size_t bytes, int iovs);
/* queue p..p+n as an iovec (it must live until sent) / as a copy */
void hb__h2_q_iov(hb_h2_server *s, const void *p, size_t n);
void hb__h2_q_copy(hb_h2_server *s, const void *p, size_t n);

/* hb_h2_server_stream.c: streams, responses, routes */
void hb__h2_set_callbacks(nghttp2_session_callbacks *cb);
void hb__h2_stream_release(hb_h2_server *s, h2stream *st);
/* a waiting stream's body may go on (nghttp2_session_resume_data) */
void hb__h2_stream_resume(hb_h2_server *s, h2stream *st);
/* answer 200 with n bytes of content; announce: content-length (< 0: none), avail:
 * how many may go out now (the rest waits for a drip or delay timer) */
void hb__h2_respond_content(hb_h2_server *s, h2stream *st, int64_t announce, uint64_t n,
                            uint64_t avail);
/* submit the response head; a body (the stream's src) follows unless body is 0;
 * cl < 0: no content-length */
void hb__h2_respond(hb_h2_server *s, h2stream *st, int status, const char *ct, int64_t cl,
                    int body);

/* hb_h2_server_events.c: the event routes (SRC_EVENTS) */
/* answer the route's events (content type ct), interval_ms apart */
void hb__h2_events_respond(hb_h2_server *s, h2stream *st, const char *ct, uint64_t interval_ms);
/* the data provider's read: how much of the current piece the next DATA frame
 * carries (a piece never shares a frame), or NGHTTP2_ERR_DEFERRED until due */
ssize_t hb__h2_events_read(hb_h2_server *s, h2stream *st, size_t length, uint32_t *flags);
/* queue length bytes of the current piece behind their frame header; 0, or
 * NGHTTP2_ERR_WOULDBLOCK when the output queue is full */
int hb__h2_events_send(hb_h2_server *s, h2stream *st, const uint8_t *framehd, size_t length);

#endif /* HB_NO_NGHTTP2 */
#endif /* HB_H2_SERVER_INT_H */
