/* hb_h3_client_int.h - what the files of hb_h3_client share (not for callers):
 *
 *   hb_h3_client.c      TLS trust, init/free, connect/close (the GnuTLS session)
 *   hb_h3_client_cb.c   the ngtcp2 callbacks, and HTTP/3 on our own framing and QPACK
 *                       (h3codec/): the control stream, request streams, the server's streams
 *   hb_h3_client_io.c   datagrams in and out (recvmmsg, GSO batches), timers, requests
 *   hb_h3_client_mem.c  ngtcp2's allocator: per-size free lists
 *   hb_h3_client_none.c the same functions in a build without the libraries
 */
#ifndef HB_H3_CLIENT_INT_H
#define HB_H3_CLIENT_INT_H

#include "h3/hb_h3_client.h"
#include "net/hb_udp.h"

#ifndef HB_NO_H3

#include <errno.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <ngtcp2/ngtcp2.h>
#include <ngtcp2/ngtcp2_crypto.h>
#include <ngtcp2/ngtcp2_crypto_gnutls.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "h3codec/hb_h3_frame.h"
#include "h3codec/hb_qpack.h"

#define PKT_MAX 1452     /* a datagram ngtcp2 may fill (Ethernet MTU minus IPv6/UDP) */
#define RX_DGRAM 1500    /* the largest datagram we accept (max_udp_payload_size) */
#define TX_BATCH 16      /* full-size datagrams per sendmsg (UDP GSO) */
#define NV_MAX 128       /* request fields per stream */
#define REQ_HDR_MAX 4096 /* a request's HEADERS frame and its DATA frame's header */
#define REQ_RBUF 8192    /* a response HEADERS frame that arrives in pieces */
#define UNI_MAX 8        /* the server's unidirectional streams we track */
#define DEF_HS_NS 3000000000ull
#define DEF_IDLE_NS 30000000000ull

struct hb_h3_tls {
    gnutls_certificate_credentials_t cred;
    gnutls_priority_t prio; /* parsed once, shared by every session */
    int insecure;
    _Atomic unsigned refs; /* its owners: the callers of hb_h3_tls_new, and the trust cache */
};

/* The libraries' allocations come from a free list per power-of-two size
 * class, kept for the client's life: a stream's frames and QPACK state reuse
 * the blocks of the streams before it, so steady-state requests call no
 * malloc (over 16 KiB goes to malloc directly). One client, one thread. */
#define POOL_MIN_SHIFT 5
#define POOL_MAX_SHIFT 14
#define POOL_CLASSES (POOL_MAX_SHIFT - POOL_MIN_SHIFT + 1)

typedef union blk {
    struct {
        size_t cap; /* usable bytes after the header */
        union blk *next;
    } h;
    max_align_t align;
} blk;

typedef struct pool {
    blk *free[POOL_CLASSES];
} pool;

/* hb_h3_client_mem.c: ngtcp2_mem functions (ud: the pool). */
void *hb__h3_pool_malloc(size_t size, void *ud);
void hb__h3_pool_free(void *ptr, void *ud);
void *hb__h3_pool_calloc(size_t n, size_t size, void *ud);
void *hb__h3_pool_realloc(void *ptr, size_t size, void *ud);
void hb__h3_pool_destroy(pool *pl);

/* One request stream: what we send (kept until the stream closes, which
 * ngtcp2 reports only once all of it is acknowledged) and the response's
 * reading state. Allocated with the client, reused from a free list. */
typedef struct h3_req {
    int64_t sid;
    void *sud;           /* the caller's; NULL once its on_close ran */
    struct h3_req *next; /* the free list, or the send queue */
    const uint8_t *body; /* caller-owned */
    size_t body_len;
    size_t hdr_len;   /* bytes in hdr: HEADERS frame, then the DATA frame's header */
    size_t sent;      /* bytes of hdr then body given to ngtcp2 */
    uint64_t clen;    /* the response's content-length, or UINT64_MAX */
    uint64_t got;     /* DATA bytes received */
    uint8_t phase;    /* 0: before the final HEADERS, 1: body, 2: after trailers */
    uint8_t queued;   /* in the send queue */
    uint8_t fin_sent; /* all of it, FIN included, went to ngtcp2 */
    uint8_t bad;      /* a malformed response: H3_MESSAGE_ERROR */
    uint8_t no_body;  /* a HEAD request: content-length describes no DATA */
    int status;
    hb_h3_frame_reader rd;
    uint8_t hdr[REQ_HDR_MAX];
    uint8_t rbuf[REQ_RBUF];
} h3_req;

/* One of the server's unidirectional streams. */
typedef struct h3_uni {
    int64_t sid;
    uint64_t type;
    int typed; /* the type varint is complete */
    hb_h3_varint_rd vr;
    hb_h3_frame_reader rd;
    hb_qpack_dstream ds;
    uint8_t buf[256]; /* a control frame that arrives in pieces */
} h3_uni;

struct hb__h3 {
    pool pool; /* behind qmem */
    ngtcp2_mem qmem;
    ngtcp2_conn *q;
    int h; /* HTTP/3 is set up (the handshake completed) */
    gnutls_session_t tls;
    ngtcp2_crypto_conn_ref ref;
    const hb_h3_callbacks *cb;
    void *ud;
    hb_h3_settings set;
    struct sockaddr_storage local, remote;
    socklen_t llen, rlen;
    ngtcp2_connection_close_error last; /* what CONNECTION_CLOSE says after our own error */
    int wide_shares; /* offer key shares for X25519 and P-256 (a server without X25519 and
                      * without HelloRetryRequest refused the one share); kept across connects */
    int close_owed;  /* the connection ended by our own error (or timeout): tell the server, with
                      * `last`, so it frees the connection at once instead of at its timeout */
    size_t last_pto;
    uint64_t now;  /* clock of the call in progress */
    uint8_t *rbuf; /* HB_UDP_RX_BATCH datagrams of RX_DGRAM bytes */
    hb_udp_rx rx;
    uint8_t pkt[PKT_MAX]; /* CONNECTION_CLOSE */
    uint8_t *tx;          /* TX_BATCH datagrams back to back, all gso bytes but the last */
    size_t txlen, gso;
    uint32_t ntx;
    int pending;      /* the batch in tx waits for the socket */
    int gso_ok;       /* 0 once the kernel refused UDP_SEGMENT: one send() per datagram */
    int failed;       /* a callback failed: its code in fail_rc */
    int goaway_owed;  /* a GOAWAY came: the streams it did not process are to be ended */
    int64_t next_sid; /* the next request stream's ID (every one below was opened) */
    int fail_rc;
    int64_t ctrl_sid;                           /* our control stream */
    uint8_t ctrl[HB_H3_SETTINGS_FRAME_MAX + 1]; /* its bytes: type, SETTINGS */
    size_t ctrl_len, ctrl_sent;
    int peer_settings;  /* the server's SETTINGS came */
    int have_peer_ctrl; /* the server's control stream was opened */
    h3_req *reqs;       /* nreqs of them */
    uint32_t nreqs;
    h3_req *free_req;       /* unused ones */
    h3_req *txq, *txq_tail; /* streams with bytes to send */
    h3_uni uni[UNI_MAX];
    unsigned nuni;
    uint8_t scratch[REQ_RBUF / 5 * 8 + 16]; /* QPACK's Huffman output (hb_qpack_scratch_need) */
    const hb_header *tmpl_fields; /* stable_fields: the last fields encoded, and their frame */
    size_t tmpl_n, tmpl_len;
    int tmpl_no_body;
    uint8_t tmpl[REQ_HDR_MAX];
    gnutls_datum_t ticket; /* the last session ticket (GnuTLS's allocation), for resumption */
    struct {
        int64_t sid; /* -1: free */
        const void *data;
        size_t len;
    } bodies[HB_H3_BODIES]; /* per-request bodies (hb_h3_client_submit_body) */
    unsigned nbodies;       /* entries in use: 0 keeps the settings' body path free of lookups */
};

/* hb_h3_client_cb.c */
/* Record an error in c->err (fmt has one %s for detail); returns rc. */
int hb__h3_fail(hb_h3_client *c, int rc, const char *fmt, const char *detail);
/* An HTTP/3 connection error (code: an hb_h3_error, detail: why): remember it,
 * close with that code; returns NGTCP2_ERR_CALLBACK_FAILURE. */
int hb__h3_conn_fail(hb_h3_client *c, uint64_t code, const char *detail);
ngtcp2_conn *hb__h3_get_conn(ngtcp2_crypto_conn_ref *ref);
/* End the streams the server's GOAWAY did not process (HB_H3_END_GOAWAY). */
void hb__h3_goaway_cancel(hb_h3_client *c);
/* Forget the per-request body of stream sid. */
void hb__h3_body_release(struct hb__h3 *p, int64_t sid);
extern const ngtcp2_callbacks hb__h3_q_cbs;

/* hb_h3_client_cb.c: HTTP/3 */
/* After the handshake: our control stream (SETTINGS), the request slots reset. */
int hb__h3_setup(hb_h3_client *c);
/* Stream data from ngtcp2 (sud: the request, or NULL for the server's streams).
 * 0 or NGTCP2_ERR_CALLBACK_FAILURE. */
int hb__h3_recv(hb_h3_client *c, int64_t sid, h3_req *r, const uint8_t *data, size_t len, int fin);
/* ngtcp2 closed a stream (app: code is the peer's). 0 or NGTCP2_ERR_CALLBACK_FAILURE. */
int hb__h3_stream_close(hb_h3_client *c, int64_t sid, h3_req *r, uint64_t code);
/* The next stream with bytes to send: its ID, vectors (up to 2), whether the
 * FIN goes with them. 0 when none. */
int hb__h3_next_tx(hb_h3_client *c, int64_t *sid, ngtcp2_vec *v, size_t *nv, int *fin, h3_req **r);
/* ngtcp2 took n bytes of what hb__h3_next_tx gave (r NULL: the control stream). */
void hb__h3_sent(hb_h3_client *c, h3_req *r, size_t n);
/* The stream cannot send now (flow control, shut): out of the queue until unblocked. */
void hb__h3_tx_block(hb_h3_client *c, h3_req *r);
/* Stream sid may send again. */
void hb__h3_tx_unblock(hb_h3_client *c, h3_req *r);
/* A new request on stream sid: its HEADERS (and DATA header), queued. */
int hb__h3_request(hb_h3_client *c, h3_req *r, int64_t sid, const hb_header *fields, size_t n,
                   const void *body, size_t body_len, void *sud);

#endif /* HB_NO_H3 */

#endif
