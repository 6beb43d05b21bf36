/* hb_h3_client.h - one HTTP/3 client connection: QUIC (ngtcp2, TLS 1.3 by
 * GnuTLS) and HTTP/3 (our own framing and QPACK, static table only) over its
 * own connected UDP socket.
 *
 * The caller owns the event loop: it watches hb_h3_client.fd for input
 * (edge-triggered is fine: hb_h3_client_read drains the socket) and arms a
 * timer for hb_h3_client_expiry() at the time the client asks for. Requests
 * are streams; each carries the caller's pointer `sud` back in the callbacks.
 * Everything a request needs (packet buffers, the request's fields, the body)
 * is allocated in hb_h3_client_init or owned by the caller: after the
 * connection is up a request allocates nothing outside the two libraries.
 *
 * A build without the libraries (HB_NO_H3) has the same functions: init and
 * connect fail with HB_E_UNSUPPORTED and HB_H3_MISSING's text.
 *
 * Return codes per hb_common.h, plus the HB_E_H3_* codes: HB_E_H3_HANDSHAKE
 * (TLS: certificate, ALPN, alert), HB_E_H3_TIMEOUT (no answer within the
 * handshake timeout, or the idle timeout passed), HB_E_H3_CLOSED (the peer
 * closed the connection), HB_E_H3 (a QUIC or HTTP/3 protocol error); -errno
 * for the socket (a closed UDP port reads as -ECONNREFUSED). Detail text goes
 * to c->err.
 */
#ifndef HB_H3_CLIENT_H
#define HB_H3_CLIENT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "base/hb_common.h"
#include "http/hb_parse.h" /* hb_header */

#define HB_H3_MISSING                                                                              \
    "this build has no HTTP/3 client: install libngtcp2-dev libngtcp2-crypto-gnutls-dev "          \
    "libgnutls28-dev and reinstall"

/* 1 when built with ngtcp2 and GnuTLS. */
int hb_h3_available(void);

/* TLS trust shared by a run's connections (immutable once made). */
typedef struct hb_h3_tls hb_h3_tls;
typedef struct hb_h3_tls_opts {
    const char *ca_file; /* PEM CAs to trust; NULL (and no ca_pem): the system's */
    const char *ca_pem;  /* PEM text of CAs to trust */
    int insecure;        /* 1: no certificate verification */
} hb_h3_tls_opts;
int hb_h3_tls_new(hb_h3_tls **out, const hb_h3_tls_opts *o, char *err);
void hb_h3_tls_free(hb_h3_tls *t);

/* How a stream ended (on_close's `end`); GOAWAY: the server's GOAWAY said it did
 * not process it (its ID is the GOAWAY's or above), so it may go again elsewhere. */
enum { HB_H3_END_OK = 0, HB_H3_END_RESET, HB_H3_END_ERROR, HB_H3_END_GOAWAY };

typedef struct hb_h3_callbacks {
    /* every response header field (NULL: not wanted) */
    void (*on_header)(void *ud, void *sud, const char *name, size_t nl, const char *value,
                      size_t vl);
    /* the final response head (status) */
    void (*on_response)(void *ud, void *sud, int status);
    /* len more body bytes at data (valid during the call only) */
    void (*on_data)(void *ud, void *sud, const uint8_t *data, size_t len);
    /* the stream ended (code: the HTTP/3 error code of a reset); sud is never
     * seen again */
    void (*on_close)(void *ud, void *sud, int end, uint64_t code);
    /* the handshake completed (c->hs_ns holds its duration) */
    void (*on_handshake)(void *ud);
} hb_h3_callbacks;

/* What went over the wire, for one connection (cumulative). */
typedef struct hb_h3_stats {
    uint64_t dgrams_sent, dgrams_recv; /* UDP datagrams (one send() / recv() each) */
    uint64_t bytes_sent, bytes_recv;   /* UDP payload bytes */
    uint64_t pto;                      /* probe timeouts (loss recovery timers that fired) */
} hb_h3_stats;

typedef struct hb_h3_settings {
    uint32_t max_streams;          /* requests this connection keeps in flight, at most */
    const void *body;              /* every request's body (caller-owned, stable), or NULL */
    size_t body_len;               /* its length */
    uint64_t handshake_timeout_ns; /* 0: 3 s */
    uint64_t idle_timeout_ns;      /* 0: 30 s */
    int resume;                    /* offer the session ticket of this client's last connection (TLS
                                    * resumption: a PSK handshake; no 0-RTT data is sent) */
    int stable_fields;             /* 1: a fields pointer given to submit again (same count) holds
                                    * the same bytes (the generator's one request): its HEADERS
                                    * frame is encoded once and copied after */
} hb_h3_settings;

struct hb__h3;

typedef struct hb_h3_client {
    /* read-only for the caller */
    int fd;                   /* the UDP socket while connected, else -1 */
    int handshake_done;       /* 1 once the QUIC handshake completed */
    int over;                 /* the connection ended (an error was returned): close it */
    uint32_t nopen;           /* streams in flight */
    uint64_t hs_start, hs_ns; /* handshake start, and its duration once done */
    uint64_t idle_ns;         /* the idle timeout in force (the smaller side's), once done */
    uint64_t last_rx;         /* when a datagram last arrived (hb_now_ns) */
    int resumed;              /* the TLS session was resumed */
    int retry_shares;         /* the server refused the ClientHello's one key share (X25519) with
                               * handshake_failure and no HelloRetryRequest: connect again at once;
                               * that and every later connection of this client offer more shares */
    int cert_rejected;        /* the handshake failed verifying the server's certificate (with
                               * HB_E_H3_HANDSHAKE; c->err says why) */
    int blocked; /* a datagram waits for the socket: call hb_h3_client_writable when writable */
    int goaway;  /* the server sent GOAWAY: no new stream (room 0); reconnect when drained */
    int64_t goaway_id; /* its stream ID: streams from it on were not processed (ended with
                        * HB_H3_END_GOAWAY: safe to send again on a new connection) */
    hb_h3_stats st;
    char err[HB_ERR_LEN];
    struct hb__h3 *p; /* private */
} hb_h3_client;

/* Allocate c's buffers (once; reused by every connect). */
int hb_h3_client_init(hb_h3_client *c, const hb_h3_settings *s, char *err);
void hb_h3_client_free(hb_h3_client *c);

/* A new connection to addr: socket, QUIC Initial sent. sni: the name the
 * certificate is verified against (and sent as SNI unless an IP literal).
 * cb/ud: the callbacks (c->p keeps the pointers). Returns the fd (>= 0). */
int hb_h3_client_connect(hb_h3_client *c, const hb_h3_tls *tls, const struct sockaddr *addr,
                         socklen_t alen, const char *sni, const hb_h3_callbacks *cb, void *ud,
                         uint64_t now);
/* End the connection: a CONNECTION_CLOSE when it is alive (no error) or ended
 * by this side (a failed handshake: the TLS alert as a crypto error; a QUIC or
 * HTTP/3 error: its code), not after the server's own close or an idle
 * timeout; free the sessions, close the socket. Streams in flight get no
 * callback. */
void hb_h3_client_close(hb_h3_client *c);

/* Drain the socket (recvmmsg batches) into the connection. 0, or an error
 * (the connection is over: c->over). Callbacks run from here; what the input
 * made due (ACKs, flow control) goes out with the next hb_h3_client_write,
 * so the caller can submit its next requests first and send one datagram. */
int hb_h3_client_read(hb_h3_client *c, uint64_t now);
/* Send what is due (new requests, acknowledgements). 0 or an error. */
int hb_h3_client_write(hb_h3_client *c, uint64_t now);
/* The socket is writable again (c->blocked: a send blocked earlier). */
int hb_h3_client_writable(hb_h3_client *c, uint64_t now);
/* The timer fired: loss recovery, acknowledgements, timeouts; then writes. */
int hb_h3_client_expiry(hb_h3_client *c, uint64_t now);
/* When hb_h3_client_expiry must run next (hb_now_ns time; UINT64_MAX: never). */
uint64_t hb_h3_client_next_expiry(const hb_h3_client *c);

/* After the handshake: "QUIC v1,TLSv1.3,<cipher suite>,h3" into buf. */
void hb_h3_client_describe(const hb_h3_client *c, char *buf, size_t len);

/* Streams that may be opened now (0 before the handshake completes). */
uint32_t hb_h3_client_room(const hb_h3_client *c);
/* Request streams the server's limit still allows (its MAX_STREAMS less those
 * opened); 0 right after the handshake: a server that allows none. */
uint64_t hb_h3_client_peer_streams(const hb_h3_client *c);
/* Open a request stream: fields (pseudo-headers first; caller-owned, stable
 * until the stream closes), the settings' body when with_body. Queued: the
 * next hb_h3_client_write sends it. Returns the stream id, HB_AGAIN when
 * there is no room, or an error. */
int64_t hb_h3_client_submit(hb_h3_client *c, const hb_header *fields, size_t nfields, int with_body,
                            void *sud);
/* The same with this request's own body (caller-owned, stable until the
 * stream closes; NULL/0: none) instead of the settings' one. At most
 * HB_H3_BODIES such requests are in flight at once (HB_AGAIN past that). */
#define HB_H3_BODIES 8
int64_t hb_h3_client_submit_body(hb_h3_client *c, const hb_header *fields, size_t nfields,
                                 const void *body, size_t body_len, void *sud);

#endif
