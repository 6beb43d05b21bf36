/* hb_pool.h - blocking keep-alive connection pool per (scheme, host, port).
 *
 * Used by the synchronous client (hb_client.h): a caller acquires a connected
 * hb_conn for a target, runs one exchange on it without holding any lock, and
 * releases it (keep-alive or not). Idle connections are kept LIFO per target
 * (the most recently used, likeliest still open, comes first), expire after
 * idle_timeout, and can be stale-checked before reuse (a non-blocking
 * MSG_PEEK: EOF or unexpected bytes on an idle connection mean the server has
 * closed or misbehaved, so it is discarded). At most max_per_host connections
 * per target exist at once; acquirers beyond that wait until one is released
 * or their deadline passes.
 *
 * Memory: a target entry is allocated the first time a target is seen and a
 * connection struct (with its read buffer) the first time the pool grows to
 * that size; released structs go to a free list, so steady-state requests and
 * even reconnects never allocate (the TLS layer's SSL object aside).
 *
 * Thread safety: all pool calls are serialized by one mutex; a connection is
 * owned by exactly one caller between acquire and release. DNS resolution of
 * a new target (not numeric, not "localhost") happens once, under the mutex.
 * Errors per hb_common.h, detail in err: HB_E_TIMEOUT, HB_E_CONNECT / -errno
 * (connect), HB_E_TLS / HB_E_TLS_VERIFY, HB_E_INVALID, HB_E_NOMEM.
 */
#ifndef HB_POOL_H
#define HB_POOL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "base/hb_common.h"
#include "net/hb_sock.h"

struct hb_tls_ctx;

#define HB_POOL_DEFAULT_MAX_PER_HOST 10
#define HB_POOL_DEFAULT_IDLE_NS (60ull * 1000000000ull)
/* Read buffer per connection: must hold a whole response head (the parser's
 * default max_head is 64 KiB) plus the start of the body. */
#define HB_POOL_RBUF_SIZE (64 * 1024 + 4096)
#define HB_POOL_MAX_HOST 255

typedef struct hb_pool_opts {
    unsigned max_per_host;    /* 0: HB_POOL_DEFAULT_MAX_PER_HOST */
    uint64_t idle_timeout_ns; /* 0: HB_POOL_DEFAULT_IDLE_NS; UINT64_MAX: never expire */
    int stale_check;          /* peek at an idle connection before reusing it */
    struct hb_tls_ctx *tls;   /* client context for https targets (not owned); may be NULL */
    int eintr_abort;          /* a signal interrupting a wait ends it with HB_E_INTERRUPTED
                                 (so the caller can run signal handlers); else waits resume */
} hb_pool_opts;

/* The pool key. host is the name as written in the URL (brackets stripped
 * for IPv6 literals); it is what TLS verifies and sends as SNI. */
typedef struct hb_target {
    int tls;
    const char *host;
    size_t host_len;
    int port;
} hb_target;

typedef struct hb_pool_host hb_pool_host;

typedef struct hb_conn {
    hb_sock sock;
    struct hb_conn *next; /* idle stack or free list */
    hb_pool_host *host;
    uint64_t last_used_ns;
    uint64_t requests; /* exchanges completed on this connection */
    char *rbuf;        /* HB_POOL_RBUF_SIZE bytes, allocated once with the struct */
    size_t rcap;
    size_t rpos, rlen; /* unread bytes are rbuf[rpos, rlen) */
} hb_conn;

struct hb_pool_host {
    int tls;
    int port;
    size_t name_len;
    char name[HB_POOL_MAX_HOST + 1];
    struct sockaddr_storage addr;
    socklen_t addrlen;
    hb_conn *idle;  /* LIFO stack */
    unsigned nopen; /* idle + in use */
    hb_pool_host *next;
};

/* Phase timestamps of an acquire (absolute hb_now_ns; 0 when not done). */
typedef struct hb_conn_times {
    uint64_t connected; /* TCP connect completed */
    uint64_t tls_done;  /* TLS handshake completed */
} hb_conn_times;

typedef struct hb_pool_stats {
    uint64_t connects;      /* new connections opened */
    uint64_t reuses;        /* idle connections handed out again */
    uint64_t stale_dropped; /* idle connections discarded by the stale check */
    uint64_t expired;       /* idle connections discarded for idle_timeout */
    unsigned open, idle;    /* now, over all targets */
} hb_pool_stats;

typedef struct hb_pool {
    pthread_mutex_t mu;
    pthread_cond_t cv; /* signalled when a connection slot frees up */
    hb_pool_opts opts;
    hb_pool_host *hosts;
    hb_pool_host *last; /* one-entry lookup cache */
    hb_conn *free;      /* released structs with their buffers */
    int closed;
    hb_pool_stats stats;
} hb_pool;

/* opts may be NULL for the defaults (stale check on). Returns 0 or -errno. */
int hb_pool_init(hb_pool *p, const hb_pool_opts *opts);
/* Closes and frees everything. No connection may be in use. */
void hb_pool_destroy(hb_pool *p);
/* Close idle connections and make the pool refuse new acquires (HB_E_INVALID);
 * connections in use are closed when released. Safe from any thread. */
void hb_pool_close(hb_pool *p);
/* Toggle the stale check (e.g. to measure its cost). */
void hb_pool_set_stale_check(hb_pool *p, int on);
/* Set the TLS client context used for new https connections (not owned). */
void hb_pool_set_tls(hb_pool *p, struct hb_tls_ctx *tls);
void hb_pool_get_stats(hb_pool *p, hb_pool_stats *out);

/* Hand out a connected connection for t: an idle one (unless `fresh`), else a
 * new one, connected (and TLS-handshaken) before connect_deadline_ns (which
 * must be <= deadline_ns; both absolute hb_now_ns). *reused tells which. On
 * a new connection, times (may be NULL) gets the phase timestamps. */
int hb_pool_acquire(hb_pool *p, const hb_target *t, int fresh, uint64_t deadline_ns,
                    uint64_t connect_deadline_ns, hb_conn **out, int *reused, hb_conn_times *times,
                    char *err);
/* Return c. keep: the exchange ended cleanly and the connection may be
 * reused (ignored when unread bytes remain or the pool is closed). */
void hb_pool_release(hb_pool *p, hb_conn *c, int keep);

#endif
