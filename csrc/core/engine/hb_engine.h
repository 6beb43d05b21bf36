/* hb_engine.h - the load generator's timing loop.
 *
 * T threads, each with its own hb_loop and C/T connections (connection i goes
 * to thread i % T). Everything a run needs is allocated by hb_engine_new():
 * read buffers, pipelining rings, histograms, counters, the per-second series;
 * the per-request path does not allocate (a TLS connection's SSL object is
 * allocated by OpenSSL per *connection*; OpenSSL 3.0's record layer also
 * allocates a little per record, outside our control), takes no locks, and
 * costs one write + one read syscall per request in steady state: plain
 * sockets are registered edge-triggered once per connection (no epoll_ctl
 * per request); TLS sockets are level-triggered and change interest only
 * when a write would block.
 *
 * Modes
 *  - Closed loop: each connection keeps `pipeline` requests in flight. With
 *    n > 0 exactly n requests are accounted (success or typed error): thread t
 *    owns n/T (+1 for t < n%T) and its connections take from that quota.
 *    Otherwise the run lasts duration_ns.
 *  - Constant rate (rate > 0): the global send schedule has slots
 *    k = 0, 1, 2, ... at start + k/rate; connection g owns slots g, g+C, ...
 *    A slot is sent at its time if the connection has pipeline capacity, else
 *    as soon as it has. Latency is recorded from the slot's intended time
 *    (coordinated-omission corrected, `latency`) and from the actual start
 *    (`latency_uncorrected`). Rates below the connection or thread count just
 *    mean slot intervals longer than 1 s per connection; the aggregate rate is
 *    still `rate`. After a stall the overdue slots are sent back to back (a
 *    burst, like wrk2): none is skipped, so the queueing delay shows up in the
 *    corrected histogram and the schedule catches up.
 *    Every measured slot is accounted once: sent on time, sent late (more
 *    than late_ns after its time: `sends_late`), or never sent before the run
 *    ended (`unsent`); sends + unsent = the measured slots due in the window.
 *  - Warm-up (warmup_ns): requests started before start+warmup are sent but
 *    not recorded and not counted in n; measurement starts after it.
 *
 * Accounting
 *  Every issued request ends exactly once: a response (counted by status;
 *  success means 2xx, anything else is non-2xx and never counts as success)
 *  or one typed error (HB_ENG_ERR_*), or it is still in flight when the run
 *  stops (`inflight_at_stop`). A request that needs a new connection starts at
 *  connect start, so its latency includes connect and TLS handshake. Errors
 *  of a connection (read error, peer close, timeout, protocol) fail every
 *  request in flight on it, each once, with that error's type.
 *  HTTP/2 (h2 = 1): each connection carries up to `pipeline` concurrent
 *  streams (h2load's -m), fewer when the server's
 *  SETTINGS_MAX_CONCURRENT_STREAMS is lower; streams complete in any order and
 *  each one is accounted as above (a stream slot takes the place of a
 *  pipelined request, so rate mode's slots and coordinated-omission
 *  correction work per stream slot). Stream ends map to errors:
 *  RST_STREAM -> rst_stream, above a GOAWAY's last stream id (or cut by a
 *  GOAWAY with an error) -> goaway, a response breaking HTTP/2 -> protocol.
 *  A server that does not speak HTTP/2 (ALPN without "h2", or an HTTP/1.x
 *  answer to the h2c preface) stops the whole run: `fatal_rc` = HB_E_NO_H2.
 *  HTTP/3 (h3 = 1): streams per connection as for HTTP/2; a connection is
 *  open when its QUIC handshake completes (the `tls` histogram holds the
 *  handshake: Initial sent -> handshake done, one round trip on a fresh
 *  connection; with h3_resume a reconnect offers the connection's last
 *  session ticket, no 0-RTT); a handshake failure is a tls error, no answer
 *  within the handshake timeout (timeout_ns, else 3 s) or a closed UDP port
 *  (ICMP unreachable) a connect error.
 *  Connection attempts are counted apart from requests (`connect_attempts`,
 *  `connect_failures`); after a failed connect the connection waits before
 *  its next attempt, 1 ms doubling to 128 ms (reset by a successful connect),
 *  so a refusing target sees at most 1,000 attempts/s per connection.
 */
#ifndef HB_ENGINE_H
#define HB_ENGINE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "base/hb_common.h"
#include "base/hb_hist.h"

struct hb_tls_ctx;
struct hb_h3_tls;

enum hb_eng_err {
    HB_ENG_ERR_CONNECT = 0, /* connect failed (refused, unreachable, ...) */
    HB_ENG_ERR_TLS,         /* TLS handshake / verification failed */
    HB_ENG_ERR_WRITE,       /* sending the request failed */
    HB_ENG_ERR_READ,        /* a read failed (e.g. connection reset) */
    HB_ENG_ERR_TIMEOUT,     /* the request (or its connect) passed timeout_ns */
    HB_ENG_ERR_PROTOCOL,    /* malformed response / unsolicited data */
    HB_ENG_ERR_CLOSED,      /* peer closed before the response was complete */
    HB_ENG_ERR_RST_STREAM,  /* HTTP/2: the server reset the stream (RST_STREAM) */
    HB_ENG_ERR_GOAWAY,      /* HTTP/2: the stream was not processed or was cut by a GOAWAY */
    HB_ENG_ERR_UPGRADE,     /* WebSocket: the upgrade was refused or broken */
    HB_ENG_ERR_WS_CLOSE,    /* WebSocket: the server closed with messages in flight */
    HB_ENG_NERR
};
/* "connect", "tls", "write", "read", "timeout", "protocol", "closed",
 * "rst_stream", "goaway", "upgrade", "ws_close". */
const char *hb_eng_err_name(int type);

typedef struct hb_engine_config {
    /* Target: a resolved address; host is the SNI/verification name. */
    struct sockaddr_storage addr;
    socklen_t addrlen;
    const char *host;
    struct hb_tls_ctx *tls; /* NULL: plain HTTP. Not owned; must outlive the engine. */
    /* Request. head: the serialized request head (request line + headers +
     * CRLF CRLF, see hb_build_head in hb_request.h). Body: body/body_len in memory, or
     * body_fd >= 0 with body_len bytes read from offset 0 (pread/sendfile per
     * chunk, never loaded whole). Both are copied/dup'ed by hb_engine_new. */
    const char *head;
    size_t head_len;
    const char *body;
    size_t body_len;
    int body_fd;
    int method_is_head;   /* responses carry no body */
    unsigned parse_flags; /* HB_PARSE_LENIENT_LF: accept bare LF line ends in responses */
    /* Load. */
    uint64_t n;           /* > 0: exactly n requests; 0: duration_ns */
    uint64_t duration_ns; /* used when n == 0 */
    uint64_t warmup_ns;
    uint32_t connections; /* >= 1 */
    uint32_t threads;     /* >= 1, clamped to connections */
    uint32_t pipeline;    /* >= 1; 1 when keepalive == 0 */
    double rate;          /* > 0: constant rate (req/s), 0: closed loop */
    int keepalive;        /* 0: new connection per request */
    uint64_t timeout_ns;  /* per request, 0 = none */
    size_t rbuf_size;     /* per connection read buffer; 0 = auto (16..64 KiB) */
    uint32_t max_seconds; /* per-second series length; 0 = auto */
    uint64_t late_ns;     /* rate mode: a send later than this is `late`; 0 = 10 ms */
    /* HTTP/2: h2c with prior knowledge on plain sockets, ALPN "h2" with TLS
     * (the TLS context must offer it). The request is `fields` instead of head;
     * a body must be in memory (body_fd is refused). pipeline = streams per
     * connection. */
    int h2;
    /* HTTP/2 and HTTP/3: the request's header fields, pseudo-headers first
     * (hb_request.h builds them; copied by hb_engine_new). */
    const struct hb_header *fields;
    size_t nfields;
    /* HTTP/3 (h3 = 1): QUIC on one connected UDP socket per connection, TLS
     * by GnuTLS with h3_tls's trust (not owned; tls is unused). The request is
     * `fields` as for HTTP/2; pipeline = streams per connection. */
    int h3;
    const struct hb_h3_tls *h3_tls;
    int h3_resume; /* resume each connection's last TLS session on its reconnects */
    /* WebSocket (ws = 1): head is the GET of the upgrade (its Upgrade, Connection
     * and Sec-WebSocket-* headers are added); a request is one message of
     * body/body_len (else ws_size content bytes; a text frame when ws_text)
     * echoed back whole; pipeline = messages in flight per connection. */
    int ws;
    uint64_t ws_size;
    int ws_text;
    /* Stream mode (stream = 1, HTTP/1.1): responses are streams of events (SSE
     * dispatches for text/event-stream, else chunks), timed as they arrive:
     * result ttfe, gap, events. stream_max_line bounds an SSE line (0: 1 MiB):
     * a longer one is a protocol error. */
    int stream;
    uint64_t stream_max_line;
} hb_engine_config;

/* Defaults: 1 connection, 1 thread, pipeline 1, keep-alive, 10 s, no timeout. */
void hb_engine_config_init(hb_engine_config *c);

/* Merged results (filled by hb_engine_result after the run). */
#define HB_ENG_SERVER_LEN 128
typedef struct hb_engine_result {
    uint64_t completed;       /* responses + errors (accounted requests) */
    uint64_t responses;       /* complete responses, any status */
    uint64_t ok;              /* 2xx */
    uint64_t non2xx;          /* responses with a status outside 200..299 */
    uint64_t status_class[6]; /* [1..5]: 1xx..5xx, [0]: other */
    uint64_t status[1000];    /* exact codes */
    uint64_t errors[HB_ENG_NERR];
    uint64_t errors_total;
    uint64_t bytes_in, bytes_out;  /* HTTP bytes (after TLS decryption) */
    uint64_t body_bytes;           /* response body bytes */
    uint64_t connections_opened;   /* successful connects */
    uint64_t reconnects;           /* keep-alive connections re-opened (peer close/error) */
    uint64_t tls_resumed;          /* handshakes that resumed a session */
    uint64_t inflight_at_stop;     /* started, not finished when the run stopped */
    uint64_t warmup_requests;      /* finished during warm-up (not recorded) */
    uint64_t sends;                /* measured requests issued */
    uint64_t sends_late;           /* rate mode: issued more than late_ns after their slot */
    uint64_t unsent;               /* rate mode: measured slots due but never issued */
    uint64_t connect_attempts;     /* connect() calls (measured window and warm-up) */
    uint64_t connect_failures;     /* attempts that failed (refused, EMFILE, ...) */
    uint64_t connect_fd_exhausted; /* failures for lack of file descriptors */
    /* HTTP/3: UDP datagrams and probe timeouts (QUIC loss recovery timers
     * that fired) in the measured window; bytes_in/out count UDP payloads. */
    uint64_t quic_dgrams_sent, quic_dgrams_recv, quic_pto;
    int interrupted;                  /* stopped by hb_engine_stop */
    uint64_t start_ns, end_ns;        /* measured window (hb_now_ns clock) */
    uint64_t cpu_user_ns, cpu_sys_ns; /* the engine threads' CPU (getrusage) */
    /* Histograms (ns): latency (CO corrected in rate mode), latency_uncorrected
     * (from the actual start), processing (first byte written -> done),
     * ttfb (first byte written -> first response byte), connect and tls
     * (per connection), setup (per request: issued -> first byte written,
     * so setup + processing = total for each request). Initialised by
     * hb_engine_result; free with hb_engine_result_free. */
    hb_hist latency, latency_uncorrected, processing, ttfb, connect, tls, setup;
    /* Stream mode: time to first event (from the stream's intended start: CO
     * corrected in rate mode), gaps between consecutive events, and events. */
    hb_hist ttfe, gap;
    uint64_t events;
    /* Per-second series of the measured window: ok / errors (incl. non-2xx)
     * finished in second i. */
    uint32_t nseconds;
    uint64_t *sec_ok, *sec_err;
    /* Per second, the latencies of the responses that finished in it, in a coarse
     * log-linear histogram (HB_ENG_SEC_BUCKETS counts per second, row i at
     * sec_lat + i * HB_ENG_SEC_BUCKETS): enough for a p50/p99 timeline. */
    uint32_t *sec_lat;
    /* First successful response: Server header and body length (-1 unknown). */
    char server[HB_ENG_SERVER_LEN];
    int64_t doc_length;
    char first_error[HB_ERR_LEN];     /* detail of the first error seen */
    char tls_info[HB_ENG_SERVER_LEN]; /* first handshake: "TLSv1.3,TLS_AES_256_GCM_SHA384,http/1.1"
                                       */
    /* A condition that ended the run as invalid (HB_E_NO_H2), 0 if none;
     * fatal has its detail. The counters above still hold. */
    int fatal_rc;
    char fatal[HB_ERR_LEN];
} hb_engine_result;

/* The per-second latency histograms: 16 sub-buckets per power of two (a value is
 * known within 1/16 of itself), exact below 16 ns, up to 2^41 ns. */
#define HB_ENG_SEC_SUB 16
#define HB_ENG_SEC_BUCKETS (HB_ENG_SEC_SUB * 38)

/* The latency (ns) at percentile p (0..100) of the responses that finished in second
 * s: the middle of its bucket; 0 when none did. */
uint64_t hb_engine_sec_percentile(const hb_engine_result *r, uint32_t s, double p);

typedef struct hb_engine hb_engine;

/* Validate cfg and allocate everything. 0, HB_E_INVALID or HB_E_NOMEM (err). */
int hb_engine_new(hb_engine **out, const hb_engine_config *cfg, char *err);
/* Start the threads (returns at once). 0 or -errno. */
int hb_engine_start(hb_engine *e, char *err);
/* Ask the threads to stop (async-signal-safe: one atomic store). Threads
 * notice within 20 ms. */
void hb_engine_stop(hb_engine *e);
/* 1 when every thread has finished. */
int hb_engine_done(hb_engine *e);
/* Wait up to timeout_ns for the run to end; 1 done, 0 still running. */
int hb_engine_wait(hb_engine *e, uint64_t timeout_ns);
/* Progress, readable from any thread while running (relaxed atomics).
 * p50_ns/p99_ns: latency percentiles of the measured responses so far, from a
 * coarse per-thread copy of the latency histogram (16 log-linear buckets per
 * power of two, single writer, no locks); each is the lower bound of its
 * bucket, so the exact value lies in [p, p * 1.0625). 0 before any response. */
typedef struct hb_engine_progress {
    uint64_t completed, ok, errors, bytes_in;
    uint64_t elapsed_ns;
    int warming_up;
    uint64_t p50_ns, p99_ns;
    uint64_t connected; /* connections opened so far (warm-up included) */
} hb_engine_progress;
void hb_engine_progress_get(hb_engine *e, hb_engine_progress *p);
/* Join the threads (stopping them first if stop != 0) and merge results into
 * r. 0 or an error code. */
int hb_engine_join(hb_engine *e, int stop, hb_engine_result *r, char *err);
void hb_engine_result_free(hb_engine_result *r);
void hb_engine_free(hb_engine *e);

#endif
