/* hb_h3_client_int.h - what the files of hb_h3_client share (not for callers):
 *
 *   hb_h3_client.c      TLS trust, init/free, connect/close (the GnuTLS session)
 *   hb_h3_client_cb.c   the ngtcp2 and nghttp3 callbacks, HTTP/3 set-up after the handshake
 *   hb_h3_client_io.c   datagrams in and out (recvmmsg, GSO batches), timers, requests
 *   hb_h3_client_mem.c  the libraries' allocator: per-size free lists
 *   hb_h3_client_none.c the same functions in a build without the libraries
 */
#ifndef HB_H3_CLIENT_INT_H
#define HB_H3_CLIENT_INT_H

#include "h3/hb_h3_client.h"

#ifndef HB_NO_H3

#include <errno.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <nghttp3/nghttp3.h>
#include <ngtcp2/ngtcp2.h>
#include <ngtcp2/ngtcp2_crypto.h>
#include <ngtcp2/ngtcp2_crypto_gnutls.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define PKT_MAX 1452  /* a datagram ngtcp2 may fill (Ethernet MTU minus IPv6/UDP) */
#define RX_BATCH 16   /* datagrams per recvmmsg() */
#define RX_DGRAM 1500 /* the largest datagram we accept (max_udp_payload_size) */
#define TX_BATCH 16   /* full-size datagrams per sendmsg (UDP GSO) */
#define NV_MAX 128    /* request fields per stream */
#define DEF_HS_NS 3000000000ull
#define DEF_IDLE_NS 30000000000ull

struct hb_h3_tls {
    gnutls_certificate_credentials_t cred;
    int insecure;
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

/* hb_h3_client_mem.c: ngtcp2_mem / nghttp3_mem functions (ud: the pool). */
void *hb__h3_pool_malloc(size_t size, void *ud);
void hb__h3_pool_free(void *ptr, void *ud);
void *hb__h3_pool_calloc(size_t n, size_t size, void *ud);
void *hb__h3_pool_realloc(void *ptr, size_t size, void *ud);
void hb__h3_pool_destroy(pool *pl);

struct hb__h3 {
    pool pool; /* behind qmem and hmem */
    ngtcp2_mem qmem;
    nghttp3_mem hmem;
    ngtcp2_conn *q;
    nghttp3_conn *h;
    gnutls_session_t tls;
    ngtcp2_crypto_conn_ref ref;
    const hb_h3_callbacks *cb;
    void *ud;
    hb_h3_settings set;
    struct sockaddr_storage local, remote;
    socklen_t llen, rlen;
    ngtcp2_connection_close_error last; /* what CONNECTION_CLOSE says */
    size_t last_pto;
    uint64_t now;  /* clock of the call in progress */
    uint8_t *rbuf; /* RX_BATCH datagrams of RX_DGRAM bytes */
    struct mmsghdr rmsg[RX_BATCH];
    struct iovec riov[RX_BATCH];
    uint8_t pkt[PKT_MAX]; /* CONNECTION_CLOSE */
    uint8_t *tx;          /* TX_BATCH datagrams back to back, all gso bytes but the last */
    size_t txlen, gso;
    uint32_t ntx;
    int pending; /* the batch in tx waits for the socket */
    int no_gso;  /* the kernel refused UDP_SEGMENT: one send() per datagram */
    int failed;  /* a callback failed: its code in fail_rc */
    int fail_rc;
    nghttp3_nv nv[NV_MAX]; /* one request's fields, converted (nghttp3 copies them) */
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
/* A callback failed (liberr: the library's code): remember it; the library's failure code. */
int hb__h3_cb_fail(hb_h3_client *c, int rc, const char *what, int liberr);
ngtcp2_conn *hb__h3_get_conn(ngtcp2_crypto_conn_ref *ref);
/* Forget the per-request body of stream sid. */
void hb__h3_body_release(struct hb__h3 *p, int64_t sid);
extern const ngtcp2_callbacks hb__h3_q_cbs;
/* nghttp3's read_data for a request body: the stream's own, else the settings' one. */
nghttp3_ssize hb__h3_read_body(nghttp3_conn *h, int64_t sid, nghttp3_vec *vec, size_t veccnt,
                               uint32_t *pflags, void *ud, void *sud);

#endif /* HB_NO_H3 */

#endif
