/* hb_h3_server.h - the embedded server's HTTP/3 endpoint: QUIC connections
 * (ngtcp2, TLS 1.3 by GnuTLS) carrying HTTP/3 (h3codec/), answering the
 * server's routes (hb_route.h) with the same bytes as over TCP
 * (hb_content.h).
 *
 * One endpoint belongs to one server worker and does no I/O and has no
 * clock of its own, so the server drives it from its event loop and the fuzz
 * harness from memory:
 *   - hb_h3_server_recv() takes one received UDP datagram and the addresses
 *     it travelled between; a datagram for no known connection that is a
 *     valid client Initial opens one, anything else is counted and dropped;
 *   - hb_h3_server_send() hands out the next datagram to send (0: nothing);
 *   - hb_h3_server_deadline() / hb_h3_server_timer() run QUIC's timers (loss
 *     detection, idle timeout, draining) and /delay, /drip, /fault/stall at
 *     the owner's clock (cfg->now, ns).
 * Connections are found by destination connection ID in the endpoint's own
 * table. Routes keep their HTTP/1.1 meaning; faults map onto HTTP/3:
 * reset, close-after-headers and close-mid-body reset the stream
 * (H3_INTERNAL_ERROR) where HTTP/1.1 closes the connection. Response bodies
 * of generated content are handed to ngtcp2 as pointers into
 * hb_content_buf(), never copied; streams are recycled per connection, so
 * after warm-up nothing is allocated per request except inside ngtcp2 and
 * GnuTLS.
 *
 * Not thread-safe: one endpoint belongs to one thread, which is also the one
 * writer of cfg->stats.
 */
#ifndef HB_H3_SERVER_H
#define HB_H3_SERVER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "http/hb_route.h"

/* Counters written by the endpoint (relaxed atomic stores; readers load
 * relaxed). by_route / by_status count request streams exactly like the
 * HTTP/1.1 side counts requests. */
typedef struct hb_h3_server_stats {
    uint64_t by_route[HB_ROUTE_COUNT];
    uint64_t by_status[600]; /* [0]: reset, or the stream ended before its response */
    uint64_t streams;        /* request streams opened by peers */
    uint64_t connections;    /* QUIC connections accepted (a valid client Initial) */
    uint64_t closed;         /* connections freed (whatever the reason) */
    uint64_t handshakes;     /* TLS handshakes completed */
    uint64_t resumed;        /* of which resumed a session (a ticket from an earlier one) */
    uint64_t handshake_errors;
    uint64_t idle_timeouts; /* connections ended by the idle timeout */
    uint64_t errors;        /* connections ended by a QUIC or HTTP/3 error (either side) */
    uint64_t packets_in;    /* datagrams received */
    uint64_t packets_out;   /* datagrams handed out by hb_h3_server_send */
    uint64_t bytes_in;      /* UDP payload bytes received */
    uint64_t bytes_out;     /* UDP payload bytes handed out */
    uint64_t dropped;       /* datagrams ignored: not QUIC, or for no connection */
    uint64_t version_negotiations;
    uint64_t refused; /* new connections refused beyond max_connections */
    uint64_t rst_sent, rst_recv;
    uint64_t body_in;         /* request body bytes */
    uint64_t client_gone;     /* streams whose peer reset them or left before the response */
    uint64_t early_data;      /* requests answered from 0-RTT data */
    uint64_t early_rejected;  /* requests in 0-RTT data refused with 425 (not GET/HEAD/OPTIONS) */
    uint64_t early_replays;   /* 0-RTT refused: the ClientHello was seen before (a replay) */
    uint64_t retries;         /* Retry packets sent (address validation before any state) */
    uint64_t half_open;       /* now: connections whose handshake has not completed */
    uint64_t stream_timeouts; /* request streams not complete within request_timeout of their
                               * first byte: answered 408 or reset, their slot given back */
    uint64_t body_buffered;   /* now: request body bytes held (echo), flow-control credit held */
    uint64_t closes_limited;  /* CONNECTION_CLOSEs not repeated in the closing state (rate and
                               * 3x-before-validation limits) */
    uint64_t cid_slots;       /* now: slots of the connection-ID table */
    /* /sse and /stream/N (counted as over HTTP/1.1: events and chunks handed to QUIC, their
     * bytes, the preamble not included) and the streams cut because their client read
     * nothing for request_timeout */
    uint64_t sse_streams, sse_events, sse_bytes;
    uint64_t stream_streams, stream_chunks, stream_bytes;
    uint64_t streams_cut;
} hb_h3_server_stats;

/* The 0-RTT anti-replay store shared by every endpoint that shares a ticket key
 * (one per server, all workers): a replay refused by one is refused by all.
 * Thread-safe (a mutex; taken once per 0-RTT ClientHello). */
typedef struct hb_h3_replay hb_h3_replay;
hb_h3_replay *hb_h3_replay_new(void);
void hb_h3_replay_free(hb_h3_replay *r);

typedef struct hb_h3_server_config {
    /* The certificate chain and its private key, PEM (what the TLS listener serves). */
    const char *cert_pem;
    size_t cert_len;
    const char *key_pem;
    size_t key_len;
    hb_h3_server_stats *stats; /* required */
    const uint64_t *now;       /* the owner's clock (ns), required */
    const char *date;          /* 29-char HTTP date kept current by the owner; NULL: none */
    /* The /__stats document (malloc'ed; freed once the stream ends), or NULL
     * (503). NULL function: always 503. */
    char *(*stats_json)(void *arg, size_t *len);
    void *stats_arg;
    uint32_t max_streams;     /* concurrent request streams per connection; default 100 */
    uint32_t idle_timeout_ms; /* QUIC max_idle_timeout; default 30000 */
    /* a request stream's head and body must be in within this, else 408 (the body
     * is then not read); default 10000 */
    uint32_t request_timeout_ms;
    uint32_t max_header_list; /* request header bytes; beyond it: 431; default 16384 */
    uint32_t max_connections; /* per endpoint; a new one beyond it is dropped; 0 = no limit */
    /* TLS 1.3 session tickets: HB_H3_TICKET_KEY_LEN random bytes shared by the
     * endpoints that should resume each other's sessions (copied); NULL: full
     * handshakes only. */
    const uint8_t *ticket_key;
    /* 0-RTT: the tickets allow early data, and requests in it are answered when
     * their method is safe (GET, HEAD, OPTIONS), 425 Too Early otherwise (RFC
     * 8470). A replayed ClientHello within the anti-replay window is refused
     * early data (per endpoint). Needs ticket_key; 0: no 0-RTT. */
    int early_data;
    hb_h3_replay *replay; /* shared anti-replay store; NULL: the endpoint's own */
    /* Half-open connections (handshake not complete) beyond which a client Initial
     * without a valid Retry token is answered with a Retry, statelessly (RFC 9000
     * 8.1.2): a flood of spoofed Initials then costs no connection state. Default 64;
     * 0: every new connection validates its address first. */
    uint32_t retry_after;
    /* Half-open connections at most, validated or not (beyond: dropped); default 1024 */
    uint32_t max_half_open;
} hb_h3_server_config;

#define HB_H3_TICKET_KEY_LEN 64

typedef struct hb_h3_server hb_h3_server;

/* What a build without ngtcp2 / GnuTLS says when HTTP/3 is asked for. */
#define HB_H3_SERVER_MISSING                                                                       \
    "this build has no HTTP/3 server: install libngtcp2-dev libngtcp2-crypto-gnutls-dev "          \
    "libgnutls28-dev (or the distribution's ngtcp2 and GnuTLS headers) and reinstall"

/* A datagram buffer of this size holds any packet hb_h3_server_send makes. */
#define HB_H3_MAX_DATAGRAM 1500

/* 1 when this build has the HTTP/3 server, 0 when it was compiled out
 * (HB_NO_H3): then hb_h3_server_new fails with HB_E_UNSUPPORTED. */
int hb_h3_server_available(void);

/* Defaults (100 streams, 30 s idle, 16 KiB header list); other fields zeroed. */
void hb_h3_server_config_init(hb_h3_server_config *cfg);

/* An endpoint. cfg is copied (the PEM texts are parsed here and need not
 * outlive the call); its other pointers must outlive the endpoint.
 * 0, HB_E_INVALID, HB_E_TLS (the PEM does not load), HB_E_NOMEM or
 * HB_E_UNSUPPORTED. */
int hb_h3_server_new(hb_h3_server **out, const hb_h3_server_config *cfg, char *err);
/* Frees every connection (their unanswered streams count as status 0) and
 * the endpoint. NULL is fine. */
void hb_h3_server_free(hb_h3_server *s);

/* One received datagram: local is the address it arrived at, peer its
 * source. Never fails; what cannot be used is counted in stats->dropped. */
void hb_h3_server_recv(hb_h3_server *s, const struct sockaddr *local, socklen_t local_len,
                       const struct sockaddr *peer, socklen_t peer_len, const uint8_t *p, size_t n);
/* The next datagram to send, into buf (cap >= HB_H3_MAX_DATAGRAM), with its
 * destination in *peer / *peer_len. Returns its length, 0 when nothing is
 * due now. */
size_t hb_h3_server_send(hb_h3_server *s, uint8_t *buf, size_t cap, struct sockaddr_storage *peer,
                         socklen_t *peer_len);
/* Earliest timer (absolute ns), UINT64_MAX when none. */
uint64_t hb_h3_server_deadline(hb_h3_server *s);
/* Run the timers due at cfg->now. */
void hb_h3_server_timer(hb_h3_server *s);
/* Graceful stop: every connection queues an HTTP/3 GOAWAY (the requests it
 * processed) and then a CONNECTION_CLOSE (H3_NO_ERROR); send them, then free
 * the endpoint. */
void hb_h3_server_shutdown(hb_h3_server *s);
/* Open connections (closing ones included). */
int hb_h3_server_conns(const hb_h3_server *s);

#endif
