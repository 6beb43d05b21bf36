/* hb_h3_server_int.h - internals shared by the HTTP/3 server's files (never
 * in a public header).
 *
 * hb_h3_server.c       the endpoint: connection-ID table, send list, public API
 * hb_h3_server_conn.c  one QUIC connection: ngtcp2 callbacks, handshake, read/write, timers
 * hb_h3_server_http.c  the routes on HTTP/3 request streams: responses, timers
 * hb_h3_server_h3.c    HTTP/3 itself (h3codec/): the control and QPACK streams, the
 *                      request streams' frame reader and QPACK decoding, the send queue
 */
#ifndef HB_H3_SERVER_INT_H
#define HB_H3_SERVER_INT_H

#include "h3server/hb_h3_server.h"

#ifndef HB_NO_H3

#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <ngtcp2/ngtcp2.h>
#include <ngtcp2/ngtcp2_crypto.h>
#include <ngtcp2/ngtcp2_crypto_gnutls.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/hb_common.h"
#include "base/hb_content.h"
#include "h3codec/hb_h3_frame.h"
#include "h3codec/hb_qpack.h"
#include "http/hb_sse.h"

#define SCIDLEN 18
#define PATH_MAX_LEN 4096
#define NS_PER_MS 1000000ull
#define NS_PER_S 1000000000ull
#define ECHO_MAX (16u << 20) /* an /echo body beyond this is answered 413 */
#define OUTV 16              /* a stream's pieces waiting for QUIC, at most */
#define CHUNK (16 * 1024)    /* bytes of generated content per piece handed to QUIC */
#define HDR_OUT 256          /* a response's HEADERS frame, at most */
#define FH_LEN 10            /* a DATA frame header (type and a length < 2^62) */
#define UNI_MAX 6   /* the peer's unidirectional streams at once (its limit): 3 + reserved ones */
#define CTRL_IN 256 /* the peer's control frames gathered when they come in pieces */
#define STREAM_WINDOW (1u << 20)
#define CONN_WINDOW (16u << 20)
#define ANTI_REPLAY_SLOTS 4096
#define SFREE_MAX 256      /* free stream slots an endpoint keeps (an idle connection keeps none) */
#define CONN_CIDS 12       /* connection IDs a connection remembers for an O(1) free */
#define STATELESS_SLOTS 32 /* Retry / version negotiation packets waiting to be sent */
#define STATELESS_LEN 256
#define RETRY_TOKEN_NS (10 * NGTCP2_SECONDS) /* a Retry token's life */

#define ADD(field, n) __atomic_store_n(&(field), (field) + (n), __ATOMIC_RELAXED)

enum src { SRC_NONE, SRC_CONTENT, SRC_MEM, SRC_SSE };
enum wait { W_NONE, W_DELAY, W_DRIP, W_STALL, W_PACE };
enum evkind { EV_NONE, EV_SSE, EV_STREAM };
#define EV_SLOTS 32 /* SSE events handed out and not yet acknowledged, at most */
enum cstate { C_OPEN, C_CLOSING, C_DRAINING };

/* hb_h3_server_mem.c: ngtcp2's allocator (small: size classes; large: pages; large
 * zeroed: malloc) */
#define MEM_SMALL_MAX 3072u        /* usable bytes above this: pages of its own */
#define MEM_CLASSES 26             /* 16..64 by 16, then 4 per doubling to MEM_SMALL_MAX */
#define MEM_CACHE_PAGES 16         /* mappings up to this many pages are cached when freed */
#define MEM_CACHE_BYTES (4u << 20) /* ... up to this many bytes in all */

/* HB_H3_MEMSTAT=<file> (a diagnostic, read when the server is made): every live
 * block is counted by its requested size, and when connections start to close
 * from their peak (and at the warm-up's one) the counts go to <file>, the mapped
 * blocks' resident pages read with mincore (hb__h3_mem_report) */
#define MEMSTAT_SIZES 512
typedef struct hb__h3_memsize {
    size_t size; /* the requested size + 1 (0: an empty slot) */
    size_t live, held;
    uint8_t kind;
} hb__h3_memsize;

typedef struct hb__h3_memstat {
    FILE *out;
    unsigned armed;                   /* a report is due at the next close */
    hb__h3_memsize by[MEMSTAT_SIZES]; /* open addressing on the requested size */
    void **mapped;                    /* the live mapped blocks */
    size_t nmapped, capmapped;
} hb__h3_memstat;

typedef struct hb__h3_mem {
    union mblk *free[MEM_CLASSES];
    union mblk *pages[MEM_CACHE_PAGES];
    size_t cached;       /* bytes of the cached mappings */
    hb__h3_memstat *dbg; /* NULL unless HB_H3_MEMSTAT is set */
} hb__h3_mem;

void *hb__h3_mem_malloc(size_t size, void *ud);
void hb__h3_mem_free(void *ptr, void *ud);
void *hb__h3_mem_calloc(size_t n, size_t size, void *ud);
void *hb__h3_mem_realloc(void *ptr, size_t size, void *ud);
/* every free block and cached mapping back to the system */
void hb__h3_mem_trim(hb__h3_mem *m);
/* HB_H3_MEMSTAT: set up when asked for (0, or -1 when the file cannot be opened) /
 * a connection of s is about to be freed (reports once per wave of closes) / freed */
int hb__h3_memstat_init(hb__h3_mem *m);
void hb__h3_memstat_close(hb_h3_server *s);
void hb__h3_memstat_free(hb__h3_mem *m);

typedef struct h3stream {
    struct h3stream *prev, *next; /* live list / free list (next only) */
    int64_t id;
    uint8_t counted, status_owed, responded, head_only, src, wait, echo, too_large;
    uint8_t no_eof, reset_owed, blocked, peer_reset, early, req_done;
    uint8_t zombie; /* timed out: released, waiting only for the QUIC stream to close */
    /* HTTP/3: the request's frames read (0 none, 1 HEADERS, 2 trailers), input ignored from
     * now on, the response's pieces all generated / the FIN written, the write side shut, in
     * the send queue, waiting for the peer's stream credit */
    uint8_t phase, rd_off, gen_done, fin_sent, wshut, queued, fc_blocked, with_body;
    uint8_t hdr_q, dfh_q; /* the HEADERS frame / the DATA frame header queued */
    uint8_t out_n, hdr_off;
    uint16_t hdr_len;               /* the response's HEADERS frame: 0 before the response */
    struct h3stream *wprev, *wnext; /* the connection's send queue */
    uint64_t clen;                  /* the request's content-length, UINT64_MAX: none */
    uint64_t qoff;                  /* stream bytes queued for QUIC (frames included) */
    hb_h3_frame_reader rd;
    hb_route_req rq;
    uint64_t deadline;
    uint64_t req_deadline; /* the request must be complete by then (until req_done) */
    uint64_t soff;        /* content offset (SRC_CONTENT) or byte index (SRC_MEM) handed out next */
    uint64_t left, avail; /* body bytes still to hand out / that may be handed out now */
    const char *mem;
    uint64_t body_bytes;
    uint32_t crc;
    uint64_t hdr_bytes;
    uint64_t held; /* body bytes buffered whose connection flow-control credit is held */
    char *stats_doc;
    /* /sse and /stream/N: events (chunks) released by the pacing timer, handed out,
     * acknowledged; an SSE event's scratch (its id line) lives until its bytes are
     * acknowledged; no acknowledgment for request_timeout while bytes are out cuts it */
    uint8_t ev_kind, ev_pre;           /* ev_pre: the SSE preamble is handed out */
    uint64_t ev_seq, ev_count, ev_rel; /* next event, events in all, events released */
    uint64_t ev_interval;              /* ns between events (chunks) */
    uint64_t hoff;                     /* body bytes handed out */
    uint64_t acked;                    /* stream bytes acknowledged (frames included) */
    uint64_t cut_at;                   /* 0, or when the stream is cut for not reading */
    uint64_t chunks_counted;
    unsigned ev_head, ev_n; /* in-flight events: a ring of EV_SLOTS */
    uint8_t *hbuf;          /* a HEADERS frame arriving in pieces (kept across reuse) */
    char *ebuf;             /* echo: the request body (kept across reuse) */
    size_t ecap, elen;
    size_t mlen, plen;
    char method[16];
    char stbuf[4];
    char clbuf[24];
    char jbuf[96];
    /* not cleared per request (written before read); what every request touches first,
     * then the path (touched as far as it goes), then what SSE alone uses, so that a
     * slot's mapping (hb_h3_server_http.c) is mostly one resident page */
    ngtcp2_vec out[OUTV];   /* pieces queued and not yet taken by QUIC */
    uint8_t hdr[HDR_OUT];   /* the response's HEADERS frame (kept until acknowledged) */
    uint8_t dfh[FH_LEN];    /* its DATA frame header (a body of known length) */
    uint8_t pre_fh[FH_LEN]; /* the SSE preamble's */
    char path[PATH_MAX_LEN];
    uint64_t ev_end[EV_SLOTS]; /* stream offset at each in-flight event's end */
    char ev_scr[EV_SLOTS][HB_SSE_SCRATCH];
    uint8_t ev_fh[EV_SLOTS][FH_LEN]; /* each in-flight event's DATA frame header */
} h3stream;

typedef struct h3conn {
    struct h3conn *prev, *next;   /* the endpoint's connections */
    struct h3conn *pnext, *pprev; /* the send list: connections that may have packets to write */
    uint8_t pending, state, hs_done, timers, close_queued, counted_error;
    uint8_t accepted;  /* counted as a connection (its first packet was accepted) */
    uint8_t half_done; /* no longer counted in half_open (handshake done, or closed) */
    uint8_t validated; /* the peer's address is validated (a Retry token, or the handshake) */
    uint8_t ncids;     /* cids[] in use; CONN_CIDS + 1: overflowed, freeing scans the table */
    uint8_t stopping;  /* the server stops: 1 GOAWAY queued, 2 written (CONNECTION_CLOSE next) */
    uint64_t h3err;    /* the HTTP/3 error code that failed a callback, for the CONNECTION_CLOSE */
    uint32_t credit;   /* request streams closed whose MAX_STREAMS credit is not yet given back */
    uint8_t rx_early;  /* the stream data being read came in 0-RTT */
    uint8_t dirty; /* touched since dl was computed: the endpoint's deadline scan recomputes it */
    uint64_t dl;   /* the connection's earliest timer, as of its last touch */
    /* the last write found nothing more to send and none of ours waiting: ngtcp2's
     * expiry from before that write set its next pacing instant (nopace_dl) is the
     * deadline, until the connection hears from the peer or a timer */
    uint8_t nopace;
    uint64_t nopace_dl;
    hb_h3_server *s;
    ngtcp2_conn *q;
    /* HTTP/3: set up (our control stream open), the peer's control stream seen / its
     * SETTINGS read, its QPACK streams seen, our control stream blocked by flow control */
    uint8_t h, peer_ctrl, peer_settings, peer_enc, peer_dec, ctrl_blocked, nuni;
    int64_t ctrl_sid;
    ngtcp2_vec cvec;
    int64_t max_bidi;  /* the highest request stream ID seen (-4: none) */
    int64_t goaway_id; /* GOAWAY sent: streams from this ID on are refused; -1: none */
    uint64_t peer_goaway;
    size_t ctrl_len, ctrl_sent;
    uint8_t ctrl[1 + HB_H3_SETTINGS_FRAME_MAX + 10]; /* our control stream: SETTINGS, GOAWAY */
    struct h3uni {
        int64_t sid;
        uint64_t type;
        uint8_t typed;
        hb_h3_varint_rd vr;
        hb_qpack_dstream ds;
    } uni[UNI_MAX];
    hb_h3_frame_reader crd; /* the peer's control stream */
    uint8_t cbuf[CTRL_IN];
    h3stream *wq, *wq_tail; /* streams with bytes to write, in order */
    gnutls_session_t tls;
    ngtcp2_crypto_conn_ref ref;
    struct sockaddr_storage local, peer;
    socklen_t llen, plen;
    ngtcp2_cid odcid; /* the client's first DCID (also in the table while the conn lives) */
    uint64_t close_until;
    size_t closelen;
    uint64_t rx_bytes, tx_bytes;   /* datagram bytes from / to the peer (anti-amplification) */
    uint32_t close_rx;             /* datagrams received in the closing state */
    uint32_t nzombie;              /* timed-out streams whose QUIC stream is still open */
    struct sockaddr_storage cpeer; /* where the queued CONNECTION_CLOSE goes */
    socklen_t cplen;
    struct {
        uint8_t len;
        uint8_t id[NGTCP2_MAX_CIDLEN];
    } cids[CONN_CIDS];
    h3stream *live, *zombies; /* zombies: timed out, their QUIC stream still open */
    uint32_t nlive;
    uint8_t *closebuf; /* the CONNECTION_CLOSE, taken once the connection closes */
} h3conn;

typedef struct cident {
    h3conn *c; /* NULL: empty; TOMB: deleted */
    uint8_t len;
    uint8_t id[NGTCP2_MAX_CIDLEN];
} cident;

struct hb_h3_server {
    hb_h3_server_config cfg;
    hb_h3_server_stats *st;
    gnutls_certificate_credentials_t cred;
    gnutls_priority_t prio;
    uint8_t reset_secret[32];
    uint8_t token_secret[32]; /* Retry tokens */
    uint8_t ticket_key[HB_H3_TICKET_KEY_LEN];
    gnutls_datum_t ticket;   /* .size 0: no session tickets */
    gnutls_anti_replay_t ar; /* NULL: no 0-RTT */
    hb_h3_replay *replay;    /* cfg.replay, or own_replay */
    hb_h3_replay *own_replay;
    h3conn *conns;
    h3conn *phead, *ptail;
    int burst; /* datagrams the head of the send list wrote in a row */
    int nconns;
    cident *tab;
    uint64_t cid_seed;         /* cid_hash's */
    size_t tcap, tlive, ttomb; /* slots, live entries, tombstones */
    /* ngtcp2's allocations: per-size free lists (hb_h3_server_mem.c), so a request's
     * stream state reuses the blocks of the requests before it */
    hb__h3_mem *mpool;
    ngtcp2_mem qmem;
    uint8_t *qscratch;         /* QPACK's Huffman scratch (one endpoint, one thread) */
    hb_qpack_head_cache heads; /* response heads' field sections, by shape */
    h3stream *sfree;           /* request streams' slots, shared by the connections */
    uint32_t nsfree;
    uint32_t half_open;
    uint32_t freed;   /* connections freed since the heap was last trimmed */
    uint64_t trimmed; /* when it was */
    /* stateless packets (Retry, version negotiation) waiting to be sent: a ring */
    unsigned sl_head, sl_n;
    struct {
        size_t len;
        struct sockaddr_storage peer;
        socklen_t plen;
        uint8_t buf[STATELESS_LEN];
    } sl[STATELESS_SLOTS];
};

static inline uint64_t hb__h3_now(const hb_h3_server *s)
{
    return *s->cfg.now;
}

/* hb_h3_server.c: the connection-ID table and the send list */
int hb__h3_cid_add(hb_h3_server *s, const uint8_t *p, size_t n, h3conn *c);
void hb__h3_cid_del(hb_h3_server *s, const uint8_t *p, size_t n, h3conn *c);
/* drops every table entry still naming c (it is being freed) */
void hb__h3_cid_forget(hb_h3_server *s, h3conn *c);
/* c may have packets to write (also marks its timer for recomputation) */
void hb__h3_pend(h3conn *c);
void hb__h3_unpend(h3conn *c);

/* hb_h3_server_conn.c: one QUIC connection */
/* a connection for a client Initial (its CIDs entered in the table), or NULL */
/* odcid: the DCID of the client's first Initial when hd carries a valid Retry token
 * (hd->dcid is then the Retry's SCID), else NULL */
h3conn *hb__h3_conn_new(hb_h3_server *s, const ngtcp2_pkt_hd *hd, const ngtcp2_cid *odcid,
                        const struct sockaddr *local, socklen_t llen, const struct sockaddr *peer,
                        socklen_t plen);
/* A datagram for c from peer. fresh: c was made for it; then 0 when the packet did
 * not open the connection (c freed, the datagram to be counted as dropped), else 1 */
int hb__h3_conn_recv(h3conn *c, const struct sockaddr *peer, socklen_t plen, const uint8_t *p,
                     size_t n, int fresh);
/* one datagram into buf: its length, 0 when c has nothing to send, -1 when c failed */
ngtcp2_ssize hb__h3_conn_write(h3conn *c, uint8_t *buf, size_t cap);
/* c's earliest timer (recomputed when c was touched) / runs c's timers that are due */
uint64_t hb__h3_conn_dl(h3conn *c);
void hb__h3_conn_timer(h3conn *c);
void hb__h3_conn_close(h3conn *c, const ngtcp2_connection_close_error *ccerr);
/* peer_left: the streams still open are counted as the peer's resets */
void hb__h3_conn_free(h3conn *c, int peer_left);

/* hb_h3_server_h3.c: HTTP/3 framing and QPACK on the connection's streams */
/* HTTP/3 on a connection whose application keys are in: our control stream opened */
int hb__h3_setup_h3(h3conn *c);
/* stream data from the peer; 0, or NGTCP2_ERR_CALLBACK_FAILURE with c->h3err set */
int hb__h3_stream_recv(h3conn *c, int64_t id, void *sud, const uint8_t *p, size_t n, int fin);
/* a stream closed (code: the peer's or ours); 0, or NGTCP2_ERR_CALLBACK_FAILURE */
int hb__h3_closed(h3conn *c, int64_t id, void *sud);
/* the peer's RESET_STREAM / STOP_SENDING / more credit on stream id */
void hb__h3_peer_reset(h3conn *c, int64_t id, void *sud);
void hb__h3_peer_stop(h3conn *c, int64_t id, void *sud);
void hb__h3_unblock(h3conn *c, int64_t id, void *sud);
/* stream bytes [0, end) of request stream st acknowledged */
void hb__h3_acked(h3conn *c, h3stream *st, uint64_t end);
/* the next pieces to write: the stream (-1: none), its vectors, FIN; the stream's
 * record (NULL: the control stream) */
size_t hb__h3_next(h3conn *c, int64_t *sid, ngtcp2_vec **v, int *fin, h3stream **st);
/* QUIC took n bytes of the pieces hb__h3_next gave (the FIN with them when all
 * were taken and fin was set) / the stream cannot take more now / its write side is shut */
void hb__h3_wrote(h3conn *c, h3stream *st, size_t n, int fin);
void hb__h3_wblocked(h3conn *c, h3stream *st);
void hb__h3_wshut(h3conn *c, h3stream *st);
/* st has (or may have) bytes to write / none any more */
void hb__h3_wq_add(h3conn *c, h3stream *st);
void hb__h3_wq_del(h3conn *c, h3stream *st);
/* queue GOAWAY on our control stream (graceful stop): 0, -1 when HTTP/3 is not up */
int hb__h3_goaway(h3conn *c);
/* n bytes of stream id consumed: flow-control credit back to the peer */
void hb__h3_consumed(h3conn *c, int64_t id, size_t n);
/* a stream's error: the stream is reset (and the peer asked to stop sending) */
void hb__h3_stream_error(h3conn *c, h3stream *st, uint64_t code);

/* hb_h3_server_http.c: the routes on request streams */
h3stream *hb__h3_stream_new(h3conn *c);
/* the request's head is in (st->method, st->path, st->too_large): its route */
void hb__h3_head(h3conn *c, h3stream *st, int fin);
/* the request is complete: answer it */
void hb__h3_finish(h3conn *c, h3stream *st);
/* body bytes of the request; returns the bytes whose connection credit is held */
size_t hb__h3_body(h3conn *c, h3stream *st, const uint8_t *p, size_t n);
/* the pieces of st's response that can be generated now, into st->out */
void hb__h3_fill(h3conn *c, h3stream *st);
/* gives back the MAX_STREAMS credit of the request streams closed so far */
void hb__h3_stream_credit(h3conn *c);
void hb__h3_stream_release(h3conn *c, h3stream *st, int peer_left);
void hb__h3_zombie_free(h3conn *c, h3stream *st);
/* the endpoint's free stream slots back to the system */
void hb__h3_streams_trim(hb_h3_server *s);
/* the streams' earliest deadline (delays, drips, request timeouts) / runs those due */
uint64_t hb__h3_stream_deadline(h3conn *c);
void hb__h3_stream_timers(h3conn *c);

#endif /* HB_NO_H3 */
#endif /* HB_H3_SERVER_INT_H */
