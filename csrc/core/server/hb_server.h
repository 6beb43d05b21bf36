/* hb_server.h - the embedded HTTP/1.1 and HTTP/2 (+TLS) test server.
 *
 * N worker threads, each running its own hb_loop with its own SO_REUSEPORT
 * listener on the same port; connections never move between threads.
 * Keep-alive, pipelining (answered in order), HTTP/1.0 and 1.1, HEAD,
 * request bodies by Content-Length or chunked, Expect: 100-continue.
 * Responses are assembled from static pieces and a shared read-only buffer
 * of deterministic content with writev; nothing is allocated per request
 * (connection structs are recycled per worker, up to a bounded free list).
 *
 * HTTP/2 (hb_h2_server.h): on TLS when ALPN selects h2, on the plain port when a
 * connection starts with the client preface (h2c with prior knowledge).
 *
 * HTTP/3 (hb_h3_server.h, opt-in with http3, TLS only): each worker also has a
 * UDP socket (SO_REUSEPORT) on the TCP port's number, so https://host:port
 * works over TCP and QUIC alike; TLS responses then carry Alt-Svc: h3=":port".
 *
 * Bodies are deterministic content (hb_content.h); routes and their
 * parameters are hb_route.h's table.
 *
 * Stats are per-worker counters written only by their worker and read with
 * relaxed atomic loads, so hb_server_stats_read never stops the server.
 */
#ifndef HB_SERVER_H
#define HB_SERVER_H

#include <stddef.h>
#include <stdint.h>

#include "base/hb_common.h"
#include "http/hb_route.h"
#include "http/hb_sse.h"

#define HB_SERVER_MAX_THREADS 64

typedef struct hb_server_opts {
    const char *host;              /* numeric address or "localhost"; default "127.0.0.1" */
    int port;                      /* 0 = ephemeral (all workers share the chosen port) */
    int threads;                   /* worker threads, 1..HB_SERVER_MAX_THREADS; default 1 */
    int tls;                       /* 1 = HTTPS */
    const char *cert_file;         /* TLS: PEM cert (chain); NULL = generated self-signed */
    const char *key_file;          /* TLS: PEM key; NULL = in cert_file */
    int session_resumption;        /* TLS: default 1 */
    int request_timeout_ms;        /* a started request (head+body) or a stalled write must
                                      progress within this; default 10000 */
    int keepalive_timeout_ms;      /* idle keep-alive connection lifetime; default 30000 */
    size_t max_head;               /* request head limit -> 431; default 16384 */
    int backlog;                   /* listen backlog; default 4096 */
    int http2;                     /* h2 (ALPN, h2c); default hb_h2_server_available() */
    int h2_max_concurrent_streams; /* SETTINGS_MAX_CONCURRENT_STREAMS 1..100000; default 100 */
    int h2_initial_window_size;    /* SETTINGS_INITIAL_WINDOW_SIZE 0..2^31-1; default 65535 */
    int h2_max_frame_size;         /* SETTINGS_MAX_FRAME_SIZE 16384..2^24-1; default 16384 */
    int http3;           /* HTTP/3 over QUIC on UDP at the same port; needs tls; default 0 */
    int alt_svc;         /* with http3: TLS responses carry Alt-Svc: h3=":port"; default 1 */
    int h3_early_data;   /* HTTP/3 0-RTT (with session_resumption; see hb_h3_server.h); default 1 */
    int max_connections; /* open connections per worker; beyond it a new one gets a
                            503 (plain HTTP) or just a FIN, and is closed; 0 = none */
    /* (SETTINGS_MAX_HEADER_LIST_SIZE is max_head: a larger header list gets 431) */
} hb_server_opts;

/* The streaming routes' counters (every protocol's): hb_sse.h's. */
typedef hb_stream_stats hb_server_stream_stats;

/* WebSocket close codes counted one by one: 1000 .. 1014; the last bucket holds the rest. */
#define HB_SERVER_WS_CODES 16

/* WebSocket counters: upgrades answered 101 (bad_upgrades: refused), frames
 * and messages in and out (payload bytes, unmasked), pings answered, pongs
 * received, messages pushed, connections ended by a protocol error, cut for
 * not reading (write timeout) or for never answering our close; close codes
 * sent and received (1006: the connection ended without a close frame). */
typedef struct hb_server_ws_stats {
    uint64_t upgrades, bad_upgrades, frames_in, frames_out, messages_in, messages_out;
    uint64_t payload_in, payload_out, pings, pongs, pushed, errors;
    uint64_t write_timeouts, close_timeouts;
    uint64_t deflate, compressed; /* permessage-deflate: upgrades, compressed messages echoed */
    uint64_t close_sent[HB_SERVER_WS_CODES], close_received[HB_SERVER_WS_CODES];
} hb_server_ws_stats;

typedef struct hb_server_stats {
    uint64_t requests; /* == sum(by_route) == sum(by_status) */
    uint64_t by_route[HB_ROUTE_COUNT];
    uint64_t by_status[600];      /* index = status code; [0] = no response (reset route,
                                     or the connection ended before the response) */
    uint64_t bytes_in, bytes_out; /* on the wire (TLS: plaintext bytes) */
    uint64_t connections_accepted, connections_closed;
    uint64_t connections_refused; /* closed at accept: the worker had max_connections open */
    uint64_t tls_handshakes, tls_resumed, tls_handshake_errors;
    uint64_t idle_timeouts; /* keep-alive connections closed for idling (not requests) */
    uint64_t body_bytes_in; /* request body bytes consumed */
    uint64_t client_gone;   /* requests whose client closed or reset the connection before
                               their response began (also in by_status[0]) */
    uint64_t requests_h2;   /* h2 streams among requests (the rest are HTTP/1.1) */
    uint64_t connections_h1, connections_h2; /* once the protocol is decided */
    uint64_t h2_streams, h2_rst_sent, h2_rst_received, h2_goaway_sent, h2_protocol_errors,
        h2_refused_streams;
    uint64_t h2_floods; /* sessions ended with GOAWAY(ENHANCE_YOUR_CALM): floods of frames */
    int h2_max_concurrent_streams, h2_initial_window_size, h2_max_frame_size;
    /* HTTP/3 (QUIC): requests_h3 streams are among requests (and by_route,
     * by_status, body_bytes_in, client_gone); its datagrams' payload bytes are in
     * bytes_in / bytes_out, its connections in none of the TCP counters */
    uint64_t requests_h3, connections_h3, h3_connections_closed, h3_handshakes, h3_handshake_errors,
        h3_idle_timeouts, h3_errors, h3_streams, h3_rst_sent, h3_rst_received, h3_refused,
        h3_resumed, h3_early_data, h3_early_rejected;
    uint64_t h3_packets_in, h3_packets_out, h3_bytes_in, h3_bytes_out;
    uint64_t h3_dropped; /* datagrams ignored: not QUIC, or for no connection */
    uint64_t h3_version_negotiations;
    /* see hb_h3_server_stats; half_open, body_buffered and cid_slots are levels now */
    uint64_t h3_early_replays, h3_retries, h3_half_open, h3_stream_timeouts, h3_body_buffered,
        h3_closes_limited, h3_cid_slots, h3_streams_cut;
    int http3;                 /* 1 when the HTTP/3 side is on */
    hb_server_stream_stats sm; /* /sse, /stream (HTTP/1.1 and HTTP/2) */
    hb_server_ws_stats ws;     /* /ws */
    int threads;
    uint64_t cpu_ns;                               /* sum of the workers' thread CPU time */
    uint64_t thread_cpu_ns[HB_SERVER_MAX_THREADS]; /* per worker */
} hb_server_stats;

typedef struct hb_server hb_server;

void hb_server_opts_init(hb_server_opts *o);

/* Bind, create the TLS context (generating the certificate) and start the
 * workers. Returns 0 with *out set, or -errno (e.g. -EADDRINUSE),
 * HB_E_INVALID, HB_E_TLS, HB_E_NOMEM with detail in err. */
int hb_server_start(hb_server **out, const hb_server_opts *o, char *err);
/* Signal the workers (an eventfd wakes every loop), join them and close all
 * connections and listeners. Idempotent; returns within a few ms. */
void hb_server_stop(hb_server *s);
/* Stops if needed, then frees. NULL is fine. */
void hb_server_free(hb_server *s);

int hb_server_port(const hb_server *s);
int hb_server_running(const hb_server *s);
/* Run every worker thread on the `n` CPUs in `cpus` (an in-process server's
 * placement next to its client is chosen, not left to the scheduler). Returns
 * 0, -EINVAL for a CPU not allowed, -ESRCH when stopped; detail in err. */
int hb_server_set_cpus(hb_server *s, const int *cpus, int n, char *err);
/* TLS only: the PEM a client trusts (the generated CA), NUL-terminated, owned by s; else NULL. */
const char *hb_server_cert_pem(const hb_server *s, size_t *len);

/* Consistent snapshot of the counters (each counter read atomically; taken
 * while the server runs). */
void hb_server_stats_read(const hb_server *s, hb_server_stats *out);

#endif
