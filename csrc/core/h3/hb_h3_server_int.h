/* hb_h3_server_int.h - internals shared by the HTTP/3 server's files (never
 * in a public header).
 *
 * hb_h3_server.c       the endpoint: connection-ID table, send list, public API
 * hb_h3_server_conn.c  one QUIC connection: ngtcp2 callbacks, handshake, read/write, timers
 * hb_h3_server_http.c  HTTP/3 streams and routes on nghttp3
 */
#ifndef HB_H3_SERVER_INT_H
#define HB_H3_SERVER_INT_H

#include "h3/hb_h3_server.h"

#ifndef HB_NO_H3

#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <nghttp3/nghttp3.h>
#include <ngtcp2/ngtcp2.h>
#include <ngtcp2/ngtcp2_crypto.h>
#include <ngtcp2/ngtcp2_crypto_gnutls.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/hb_common.h"
#include "base/hb_content.h"

#define SCIDLEN 18
#define PATH_MAX_LEN 4096
#define NS_PER_MS 1000000ull
#define ECHO_MAX (16u << 20) /* an /echo body beyond this is answered 413 */
#define NVEC 16
#define CHUNK (16 * 1024) /* bytes of generated content per vector handed to nghttp3 */
#define STREAM_WINDOW (1u << 20)
#define CONN_WINDOW (16u << 20)
#define ANTI_REPLAY_SLOTS 4096

#define ADD(field, n) __atomic_store_n(&(field), (field) + (n), __ATOMIC_RELAXED)

enum src { SRC_NONE, SRC_CONTENT, SRC_MEM };
enum wait { W_NONE, W_DELAY, W_DRIP, W_STALL };
enum cstate { C_OPEN, C_CLOSING, C_DRAINING };

typedef struct h3stream {
    struct h3stream *prev, *next; /* live list / free list (next only) */
    int64_t id;
    uint8_t counted, status_owed, responded, head_only, src, wait, echo, too_large;
    uint8_t no_eof, reset_owed, blocked, peer_reset, early, req_done;
    hb_route_req rq;
    uint64_t deadline;
    uint64_t req_deadline; /* the request must be complete by then (until req_done) */
    uint64_t soff;        /* content offset (SRC_CONTENT) or byte index (SRC_MEM) handed out next */
    uint64_t left, avail; /* body bytes still to hand out / that may be handed out now */
    const char *mem;
    uint64_t body_bytes;
    uint32_t crc;
    uint64_t hdr_bytes;
    char *stats_doc;
    char *ebuf; /* echo: the request body (kept across reuse) */
    size_t ecap, elen;
    size_t mlen, plen;
    char method[16];
    char stbuf[4];
    char clbuf[24];
    char jbuf[96];
    char path[PATH_MAX_LEN];
} h3stream;

typedef struct h3conn {
    struct h3conn *prev, *next;   /* the endpoint's connections */
    struct h3conn *pnext, *pprev; /* the send list: connections that may have packets to write */
    uint8_t pending, state, hs_done, timers, close_queued, counted_error;
    uint8_t stopping; /* the server stops: 1 GOAWAY queued, 2 written (CONNECTION_CLOSE next) */
    int h3err;        /* the nghttp3 error that failed a callback, for the CONNECTION_CLOSE */
    uint32_t credit;  /* request streams closed whose MAX_STREAMS credit is not yet given back */
    uint8_t rx_early; /* the stream data being read came in 0-RTT */
    uint8_t dirty; /* touched since dl was computed: the endpoint's deadline scan recomputes it */
    uint64_t dl;   /* the connection's earliest timer, as of its last touch */
    hb_h3_server *s;
    ngtcp2_conn *q;
    nghttp3_conn *h;
    gnutls_session_t tls;
    ngtcp2_crypto_conn_ref ref;
    struct sockaddr_storage local, peer;
    socklen_t llen, plen;
    ngtcp2_cid odcid; /* the client's first DCID (also in the table while the conn lives) */
    uint64_t close_until;
    size_t closelen;
    h3stream *live, *free;
    uint32_t nlive;
    uint8_t closebuf[HB_H3_MAX_DATAGRAM];
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
    uint8_t ticket_key[HB_H3_TICKET_KEY_LEN];
    gnutls_datum_t ticket;            /* .size 0: no session tickets */
    gnutls_anti_replay_t ar;          /* NULL: no 0-RTT */
    uint64_t seen[ANTI_REPLAY_SLOTS]; /* hashes of 0-RTT ClientHellos inside the window */
    unsigned seen_next;
    h3conn *conns;
    h3conn *phead, *ptail;
    int burst; /* datagrams the head of the send list wrote in a row */
    int nconns;
    cident *tab;
    size_t tcap, tused; /* used counts tombstones too */
    /* one stateless packet (version negotiation) waiting to be sent */
    size_t vnlen;
    struct sockaddr_storage vnpeer;
    socklen_t vnplen;
    uint8_t vnbuf[256];
};

static inline uint64_t hb__h3_now(const hb_h3_server *s)
{
    return *s->cfg.now;
}

/* hb_h3_server.c: the connection-ID table and the send list */
int hb__h3_cid_add(hb_h3_server *s, const uint8_t *p, size_t n, h3conn *c);
void hb__h3_cid_del(hb_h3_server *s, const uint8_t *p, size_t n, const h3conn *c);
/* drops every table entry still pointing at c (it is being freed) */
void hb__h3_cid_forget(hb_h3_server *s, const h3conn *c);
/* c may have packets to write (also marks its timer for recomputation) */
void hb__h3_pend(h3conn *c);
void hb__h3_unpend(h3conn *c);

/* hb_h3_server_conn.c: one QUIC connection */
/* a connection for a client Initial (its CIDs entered in the table), or NULL */
h3conn *hb__h3_conn_new(hb_h3_server *s, const ngtcp2_pkt_hd *hd, const struct sockaddr *local,
                        socklen_t llen, const struct sockaddr *peer, socklen_t plen);
void hb__h3_conn_recv(h3conn *c, const uint8_t *p, size_t n);
/* one datagram into buf: its length, 0 when c has nothing to send, -1 when c failed */
ngtcp2_ssize hb__h3_conn_write(h3conn *c, uint8_t *buf, size_t cap);
/* c's earliest timer (recomputed when c was touched) / runs c's timers that are due */
uint64_t hb__h3_conn_dl(h3conn *c);
void hb__h3_conn_timer(h3conn *c);
void hb__h3_conn_close(h3conn *c, const ngtcp2_connection_close_error *ccerr);
/* peer_left: the streams still open are counted as the peer's resets */
void hb__h3_conn_free(h3conn *c, int peer_left);

/* hb_h3_server_http.c: HTTP/3 streams and routes */
/* nghttp3 on a connection whose handshake completed: control and QPACK streams opened */
int hb__h3_setup_h3(h3conn *c);
/* n bytes of stream id consumed: flow-control credit back to the peer */
void hb__h3_consumed(h3conn *c, int64_t id, size_t n);
/* gives back the MAX_STREAMS credit of the request streams closed so far */
void hb__h3_stream_credit(h3conn *c);
void hb__h3_stream_release(h3conn *c, h3stream *st, int peer_left);
/* the streams' earliest deadline (delays, drips, request timeouts) / runs those due */
uint64_t hb__h3_stream_deadline(h3conn *c);
void hb__h3_stream_timers(h3conn *c);

#endif /* HB_NO_H3 */
#endif /* HB_H3_SERVER_INT_H */
