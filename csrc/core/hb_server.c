/* hb_server.c - the embedded test server: worker loops, connection state
 * machine, routes, timers, stats. See hb_server.h for the contract.
 *
 * Per connection: one read buffer (max_head bytes), one small output buffer
 * for response heads, and an iovec queue whose entries point into that
 * buffer, into the read buffer (echo) or into the shared deterministic
 * buffer. Input is only read (and the read buffer only compacted) when the
 * output queue is empty, so iovecs into the read buffer stay valid; that is
 * also the back-pressure that keeps pipelined responses in order.
 */
#include "hb_server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "hb_clock.h"
#include "hb_loop.h"
#include "hb_parse.h"
#include "hb_sock.h"
#include "hb_tls.h"

#define NIOV 64
#define OBUF 12288
#define HEAD_CACHE 256  /* longest response head out_head caches */
#define SMALL_BODY 1024 /* bodies up to this are copied behind their head */
#define DET_WIN 65536               /* largest contiguous piece of content */
#define STREAM_BATCH (256 * 1024)   /* bytes queued per stream refill */
#define LINGER_NS 1000000000ull     /* drain unread input this long before closing */
#define SWEEP_NS 50000000ull        /* timeout sweep period */
#define MAX_HEADERS 100
#define MS 1000000ull

/* ---- deterministic content and CRC-32 ---- */

static char det[HB_SERVER_PERIOD + DET_WIN];
static uint32_t crc_tab[8][256];
static pthread_once_t init_once = PTHREAD_ONCE_INIT;

static void global_init(void)
{
    static const char alpha[] = HB_SERVER_ALPHABET;
    for (size_t i = 0; i < sizeof det; i++) det[i] = alpha[(i % HB_SERVER_PERIOD) % 62];
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ 0xEDB88320u : c >> 1;
        crc_tab[0][i] = c;
    }
    for (int i = 0; i < 256; i++)
        for (int k = 1; k < 8; k++)
            crc_tab[k][i] = (crc_tab[k - 1][i] >> 8) ^ crc_tab[0][crc_tab[k - 1][i] & 0xff];
}

void hb_server_fill(void *dst, size_t n, uint64_t offset)
{
    pthread_once(&init_once, global_init);
    char *d = dst;
    while (n) {
        size_t at = (size_t)(offset % HB_SERVER_PERIOD);
        size_t take = n < DET_WIN ? n : DET_WIN;
        memcpy(d, det + at, take);
        d += take;
        n -= take;
        offset += take;
    }
}

/* Slicing-by-8 (little-endian words; bytewise elsewhere). */
uint32_t hb_crc32(uint32_t crc, const void *data, size_t n)
{
    pthread_once(&init_once, global_init);
    const unsigned char *p = data;
    crc = ~crc;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    while (n >= 8) {
        uint32_t a, b;
        memcpy(&a, p, 4);
        memcpy(&b, p + 4, 4);
        a ^= crc;
        crc = crc_tab[7][a & 0xff] ^ crc_tab[6][(a >> 8) & 0xff] ^ crc_tab[5][(a >> 16) & 0xff] ^
              crc_tab[4][a >> 24] ^ crc_tab[3][b & 0xff] ^ crc_tab[2][(b >> 8) & 0xff] ^
              crc_tab[1][(b >> 16) & 0xff] ^ crc_tab[0][b >> 24];
        p += 8;
        n -= 8;
    }
#endif
    while (n--) crc = crc_tab[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
    return ~crc;
}

/* ---- types ---- */

enum phase { PH_HANDSHAKE, PH_HEAD, PH_BODY, PH_WAIT, PH_LINGER };
enum body_mode { BM_DISCARD, BM_SINK, BM_ECHO };
enum after { AF_NONE, AF_CLOSE, AF_RESET, AF_STALL };
enum wait_kind { W_NONE, W_DELAY, W_DRIP, W_STALL };

typedef struct wstats {
    uint64_t by_route[HB_ROUTE_COUNT];
    uint64_t by_status[600];
    uint64_t bytes_in, bytes_out, accepted, closed, hs, hs_resumed, hs_err, idle_timeouts,
        body_in;
} wstats;

/* Counters have one writer (their worker); readers use relaxed loads. */
#define ADD(field, n) __atomic_store_n(&(field), (field) + (n), __ATOMIC_RELAXED)
#define LOAD(field) __atomic_load_n(&(field), __ATOMIC_RELAXED)

struct worker;

typedef struct conn {
    hb_sock sock;
    struct worker *w;
    struct conn *prev, *next; /* worker's active list / free list (next only) */
    size_t heap_idx;          /* timer heap slot + 1; 0 = no timer */
    uint64_t timer_at;
    uint64_t req_deadline; /* 0 = no request in progress */
    uint64_t idle_since;
    uint64_t wr_deadline;
    uint64_t linger_until;
    uint8_t phase, rd_ready, wr_ready, peer_eof;
    uint8_t rdhup; /* epoll said RDHUP/HUP/ERR: the FIN may already be queued behind data */
    uint8_t close_after, ka10, head_only, uncounted;
    uint8_t status_owed; /* route counted, status not yet: conn_free counts it as 0 */
    uint8_t body_mode, body_chunked, echo_chunked, after, wait_kind, responded, send_continue;
    int route, status, minor;
    uint64_t body_left; /* Content-Length bytes still to consume */
    hb_chunked chunked;
    uint64_t body_bytes;
    uint32_t crc;
    uint64_t p1, p2, p3; /* route parameters */
    /* streamed body: st_left content bytes from offset st_off; chunked when
     * st_chunk > 0 (st_chunk_left bytes left in the current chunk) */
    uint64_t st_off, st_left;
    uint32_t st_chunk, st_chunk_left;
    uint8_t st_active, st_final; /* st_final: emit the last chunk at the end */
    size_t rpos, rlen;
    size_t olen;
    int iov_first, niov;
    struct iovec iov[NIOV];
    char obuf[OBUF];
    char rbuf[]; /* server's rbuf_size */
} conn;

typedef struct worker {
    struct hb_server *srv;
    int idx;
    pthread_t thread;
    int started, exited;
    clockid_t cpu_clock;
    int has_cpu_clock;
    uint64_t final_cpu_ns;
    int epfd, lfd;
    hb_waiter waiter; /* its timerfd's events carry &WAITER_TAG */
    int listen_paused;
    conn *conns;
    conn *free;
    conn **heap;
    size_t heap_len, heap_cap;
    uint64_t now, next_sweep;
    uint64_t req_timeout_ns;
    time_t date_sec;
    char date[40];
    /* the last head out_head built, reused while its inputs (and the Date)
     * are the same: keep-alive benchmarks ask for one response over and over */
    struct {
        const char *extra;
        int64_t cl;
        int status;
        uint16_t len; /* 0 = empty */
        uint8_t chunked, close_after, ka10;
        char buf[HEAD_CACHE];
    } hc;
    wstats st;
} worker;

struct hb_server {
    hb_server_opts o;
    char host[64];
    int port;
    int stopfd;
    int stopping;
    int running;
    hb_tls_ctx *tls;
    size_t rbuf_size;
    int nworkers;
    worker *w;
};

static char STOP_TAG, LISTEN_TAG, WAITER_TAG;

static const char *route_names[HB_ROUTE_COUNT] = {
    "root", "bytes", "chunked", "sink", "echo", "delay", "status", "drip",
    "close_after_headers", "close_mid_body", "reset", "stall", "early_response",
    "not_found", "bad_request", "timeout",
};

const char *hb_server_route_name(int route)
{
    return route >= 0 && route < HB_ROUTE_COUNT ? route_names[route] : "?";
}

static const char *reason(int code)
{
    switch (code) {
    case 100: return "Continue";
    case 101: return "Switching Protocols";
    case 200: return "OK";
    case 201: return "Created";
    case 202: return "Accepted";
    case 204: return "No Content";
    case 206: return "Partial Content";
    case 301: return "Moved Permanently";
    case 302: return "Found";
    case 303: return "See Other";
    case 304: return "Not Modified";
    case 307: return "Temporary Redirect";
    case 308: return "Permanent Redirect";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 410: return "Gone";
    case 411: return "Length Required";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 415: return "Unsupported Media Type";
    case 418: return "I'm a teapot";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    default: return "Unknown";
    }
}

/* ---- small helpers ---- */

static size_t utoa(char *p, uint64_t v)
{
    char tmp[24];
    size_t n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    for (size_t i = 0; i < n; i++) p[i] = tmp[n - 1 - i];
    return n;
}

static size_t xtoa(char *p, uint64_t v)
{
    static const char hex[] = "0123456789abcdef";
    char tmp[20];
    size_t n = 0;
    do {
        tmp[n++] = hex[v & 15];
        v >>= 4;
    } while (v);
    for (size_t i = 0; i < n; i++) p[i] = tmp[n - 1 - i];
    return n;
}

/* Decimal digits only, at most 15 of them; -1 otherwise. */
static int64_t parse_num(const char *p, size_t n)
{
    if (n == 0 || n > 15) return -1;
    int64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9') return -1;
        v = v * 10 + (p[i] - '0');
    }
    return v;
}

/* Query parameter `name` as a number: 1 found (in *out), 0 absent, -1 bad. */
static int qnum(const char *q, size_t qn, const char *name, int64_t *out)
{
    if (!q) return 0; /* no query string */
    size_t nl = strlen(name);
    const char *end = q + qn;
    while (q < end) {
        const char *amp = memchr(q, '&', (size_t)(end - q));
        const char *e = amp ? amp : end;
        if ((size_t)(e - q) > nl && memcmp(q, name, nl) == 0 && q[nl] == '=') {
            *out = parse_num(q + nl + 1, (size_t)(e - q - nl - 1));
            return *out < 0 ? -1 : 1;
        }
        q = e + 1;
    }
    return 0;
}

static int path_is(const char *p, size_t n, const char *lit)
{
    size_t l = strlen(lit);
    return n == l && memcmp(p, lit, l) == 0;
}

/* "/prefix/{num}" -> 1 and *num, 0 no match, -1 bad number. */
static int path_num(const char *p, size_t n, const char *prefix, int64_t *num)
{
    size_t l = strlen(prefix);
    if (n <= l || memcmp(p, prefix, l) != 0) return 0;
    *num = parse_num(p + l, n - l);
    return *num < 0 ? -1 : 1;
}

/* ---- output queue ---- */

static inline int has_output(const conn *c)
{
    return c->niov > 0;
}

static inline int out_room(const conn *c)
{
    /* 4 KiB keeps room for any one response head or stats body */
    return c->iov_first + c->niov + 8 <= NIOV && c->olen + 4096 <= OBUF;
}

static void out_iov(conn *c, const void *p, size_t n)
{
    if (n == 0) return;
    if (c->niov == 0) c->wr_deadline = c->w->now + c->w->req_timeout_ns; /* write clock */
    if (c->niov > 0) {
        struct iovec *last = &c->iov[c->iov_first + c->niov - 1];
        if ((const char *)last->iov_base + last->iov_len == (const char *)p) {
            last->iov_len += n;
            return;
        }
    }
    if (c->iov_first + c->niov == NIOV) { /* only after partial writes: compact */
        memmove(c->iov, c->iov + c->iov_first, (size_t)c->niov * sizeof c->iov[0]);
        c->iov_first = 0;
    }
    c->iov[c->iov_first + c->niov].iov_base = (void *)p;
    c->iov[c->iov_first + c->niov].iov_len = n;
    c->niov++;
}

static void out_bytes(conn *c, const void *p, size_t n)
{
    if (c->olen + n > OBUF) n = OBUF - c->olen; /* callers check out_room; never expected */
    memcpy(c->obuf + c->olen, p, n);
    out_iov(c, c->obuf + c->olen, n);
    c->olen += n;
}

#define OUT_LIT(c, s) out_bytes((c), (s), sizeof(s) - 1)

/* Content bytes [off, off+n) as iovecs into the shared buffer. */
static void out_content(conn *c, uint64_t off, size_t n)
{
    while (n) {
        size_t take = n < DET_WIN ? n : DET_WIN;
        out_iov(c, det + off % HB_SERVER_PERIOD, take);
        off += take;
        n -= take;
    }
}

static void count_status(conn *c, int status)
{
    if (c->uncounted) return;
    c->status_owed = 0;
    ADD(c->w->st.by_status[status >= 0 && status < 600 ? status : 0], 1);
}

/* Status line + fixed headers + optional Content-Length / chunked + the
 * connection header at p; returns the end. `extra` holds complete header
 * lines. */
static char *format_head(const conn *c, char *p, int status, const char *extra, size_t extra_len,
                         int64_t cl, int chunked)
{
    memcpy(p, "HTTP/1.1 ", 9);
    p += 9;
    p += utoa(p, (uint64_t)status);
    *p++ = ' ';
    const char *r = reason(status);
    size_t rl = strlen(r);
    memcpy(p, r, rl);
    p += rl;
    static const char fixed[] = "\r\nServer: httpbench\r\nDate: ";
    memcpy(p, fixed, sizeof fixed - 1);
    p += sizeof fixed - 1;
    memcpy(p, c->w->date, 29);
    p += 29;
    *p++ = '\r';
    *p++ = '\n';
    if (extra_len) {
        memcpy(p, extra, extra_len);
        p += extra_len;
    }
    if (cl >= 0) {
        memcpy(p, "Content-Length: ", 16);
        p += 16;
        p += utoa(p, (uint64_t)cl);
        *p++ = '\r';
        *p++ = '\n';
    }
    if (chunked) {
        static const char te[] = "Transfer-Encoding: chunked\r\n";
        memcpy(p, te, sizeof te - 1);
        p += sizeof te - 1;
    }
    if (c->close_after) {
        static const char cc[] = "Connection: close\r\n";
        memcpy(p, cc, sizeof cc - 1);
        p += sizeof cc - 1;
    } else if (c->ka10) {
        static const char ka[] = "Connection: keep-alive\r\n";
        memcpy(p, ka, sizeof ka - 1);
        p += sizeof ka - 1;
    }
    *p++ = '\r';
    *p++ = '\n';
    return p;
}

/* Queue a response head (format_head). `extra` must be a string constant:
 * the worker's head cache tells extras apart by address. */
static void out_head(conn *c, int status, const char *extra, size_t extra_len, int64_t cl,
                     int chunked)
{
    worker *w = c->w;
    char *start = c->obuf + c->olen;
    size_t len;
    if (w->hc.len && w->hc.status == status && w->hc.extra == extra && w->hc.cl == cl &&
        w->hc.chunked == (uint8_t)chunked && w->hc.close_after == c->close_after &&
        w->hc.ka10 == c->ka10) {
        len = w->hc.len;
        memcpy(start, w->hc.buf, len);
    } else {
        len = (size_t)(format_head(c, start, status, extra, extra_len, cl, chunked) - start);
        if (len <= HEAD_CACHE) {
            w->hc.len = (uint16_t)len;
            memcpy(w->hc.buf, start, len);
            w->hc.status = status;
            w->hc.extra = extra;
            w->hc.cl = cl;
            w->hc.chunked = (uint8_t)chunked;
            w->hc.close_after = c->close_after;
            w->hc.ka10 = c->ka10;
        }
    }
    out_iov(c, start, len);
    c->olen += len;
    c->responded = 1;
    if (status >= 200) count_status(c, status);
}

#define CT_OCTET "Content-Type: application/octet-stream\r\n"
#define CT_TEXT "Content-Type: text/plain\r\n"
#define CT_JSON "Content-Type: application/json\r\n"

/* A complete response with a small body (copied when not static). */
static void respond_text(conn *c, int status, const char *body, size_t len)
{
    int nobody = status == 204 || status == 304;
    out_head(c, status, CT_TEXT, sizeof CT_TEXT - 1, nobody ? -1 : (int64_t)len, 0);
    if (!c->head_only && !nobody) out_iov(c, body, len);
}

#define RESPOND_LIT(c, st, s) respond_text((c), (st), (s), sizeof(s) - 1)

/* ---- timers (min-heap on timer_at) ---- */

static void heap_swap(worker *w, size_t a, size_t b)
{
    conn *t = w->heap[a];
    w->heap[a] = w->heap[b];
    w->heap[b] = t;
    w->heap[a]->heap_idx = a + 1;
    w->heap[b]->heap_idx = b + 1;
}

static void heap_up(worker *w, size_t i)
{
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (w->heap[p]->timer_at <= w->heap[i]->timer_at) break;
        heap_swap(w, i, p);
        i = p;
    }
}

static void heap_down(worker *w, size_t i)
{
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < w->heap_len && w->heap[l]->timer_at < w->heap[m]->timer_at) m = l;
        if (r < w->heap_len && w->heap[r]->timer_at < w->heap[m]->timer_at) m = r;
        if (m == i) break;
        heap_swap(w, i, m);
        i = m;
    }
}

static void timer_cancel(conn *c)
{
    worker *w = c->w;
    if (!c->heap_idx) return;
    size_t i = c->heap_idx - 1;
    c->heap_idx = 0;
    w->heap_len--;
    if (i != w->heap_len) {
        w->heap[i] = w->heap[w->heap_len];
        w->heap[i]->heap_idx = i + 1;
        heap_down(w, i);
        heap_up(w, i);
    }
}

/* Returns 0 or -1 when the heap cannot grow (the caller closes). */
static int timer_set(conn *c, uint64_t at)
{
    worker *w = c->w;
    timer_cancel(c);
    if (w->heap_len == w->heap_cap) {
        /* grows only past the most timers ever pending, not per request */
        size_t cap = w->heap_cap ? w->heap_cap * 2 : 256;
        conn **h = realloc(w->heap, cap * sizeof *h);
        if (!h) return -1;
        w->heap = h;
        w->heap_cap = cap;
    }
    c->timer_at = at;
    w->heap[w->heap_len] = c;
    c->heap_idx = ++w->heap_len;
    heap_up(w, w->heap_len - 1);
    return 0;
}

/* ---- connection lifecycle ---- */

static void conn_free(conn *c, int abort_it)
{
    worker *w = c->w;
    timer_cancel(c);
    /* a counted request that never got its response (peer gone mid-body,
     * server stopping during a delay) is a "no response" status 0, so
     * requests == sum(by_status) holds once connections are done */
    if (c->status_owed) ADD(w->st.by_status[0], 1);
    c->status_owed = 0;
    if (c->prev)
        c->prev->next = c->next;
    else
        w->conns = c->next;
    if (c->next) c->next->prev = c->prev;
    if (abort_it)
        hb_sock_abort(&c->sock);
    else
        hb_sock_close(&c->sock);
    ADD(w->st.closed, 1);
    c->prev = NULL;
    c->next = w->free;
    w->free = c;
}

static conn *conn_new(worker *w)
{
    conn *c = w->free;
    if (c) {
        w->free = c->next;
    } else {
        c = malloc(sizeof *c + w->srv->rbuf_size);
        if (!c) return NULL;
    }
    memset(c, 0, offsetof(conn, iov)); /* the buffers need no clearing */
    hb_sock_init(&c->sock);
    c->w = w;
    c->next = w->conns;
    if (w->conns) w->conns->prev = c;
    w->conns = c;
    return c;
}

static void begin_linger(conn *c)
{
    (void)hb_sock_shutdown(&c->sock); /* FIN (TLS: close_notify first); errors: just close */
    c->phase = PH_LINGER;
    c->linger_until = c->w->now + LINGER_NS;
}

/* Discard input until EOF (then close) or until the linger time is over, so
 * the response we sent is not destroyed by an RST for unread data. */
static void linger_read(conn *c)
{
    char tmp[16384];
    for (int i = 0; i < 64; i++) {
        ssize_t r = recv(c->sock.fd, tmp, sizeof tmp, 0);
        if (r > 0) {
            ADD(c->w->st.bytes_in, (uint64_t)r);
            continue;
        }
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
        if (r < 0 && errno == EINTR) continue;
        break; /* EOF or error */
    }
    conn_free(c, 0);
}

/* ---- request handling ---- */

static void finish_request(conn *c);

static void request_done(conn *c)
{
    /* back to reading heads; the next request's clock starts with its bytes */
    c->phase = PH_HEAD;
    c->uncounted = 0;
    c->responded = 0;
    if (c->rpos < c->rlen) {
        c->req_deadline = c->w->now + (uint64_t)c->w->srv->o.request_timeout_ms * MS;
    } else {
        c->req_deadline = 0;
        c->idle_since = c->w->now;
    }
}

static void start_stream(conn *c, uint64_t off, uint64_t n, uint32_t chunk, int final)
{
    c->st_off = off;
    c->st_left = n;
    c->st_chunk = chunk;
    c->st_chunk_left = 0;
    c->st_final = (uint8_t)final;
    c->st_active = 1;
}

/* Queue up to STREAM_BATCH more bytes of the active stream. */
static void stream_refill(conn *c)
{
    size_t queued = 0;
    while (c->st_left && queued < STREAM_BATCH && out_room(c)) {
        if (c->st_chunk) {
            if (c->st_chunk_left == 0) {
                uint64_t k = c->st_left < c->st_chunk ? c->st_left : c->st_chunk;
                char line[24];
                size_t n = xtoa(line, k);
                line[n++] = '\r';
                line[n++] = '\n';
                out_bytes(c, line, n);
                c->st_chunk_left = (uint32_t)k;
            }
            size_t take = c->st_chunk_left < DET_WIN ? c->st_chunk_left : DET_WIN;
            out_content(c, c->st_off, take);
            c->st_off += take;
            c->st_left -= take;
            c->st_chunk_left -= (uint32_t)take;
            queued += take;
            if (c->st_chunk_left == 0) out_iov(c, "\r\n", 2);
        } else {
            size_t take = c->st_left < DET_WIN ? (size_t)c->st_left : DET_WIN;
            out_content(c, c->st_off, take);
            c->st_off += take;
            c->st_left -= take;
            queued += take;
        }
    }
    if (c->st_left == 0) {
        if (c->st_final) OUT_LIT(c, "0\r\n\r\n");
        c->st_active = 0;
    }
}

/* Body of n content bytes: small ones go straight into the queue (the
 * smallest copied right behind their head, so a response is one buffer and
 * one send() rather than a two-piece sendmsg()). */
static void out_body(conn *c, uint64_t n)
{
    if (c->head_only || n == 0) return;
    if (n <= SMALL_BODY && c->olen + n <= OBUF) {
        memcpy(c->obuf + c->olen, det, (size_t)n);
        out_iov(c, c->obuf + c->olen, (size_t)n);
        c->olen += (size_t)n;
    } else if (n <= DET_WIN)
        out_content(c, 0, (size_t)n);
    else
        start_stream(c, 0, n, 0, 0);
}

/* route < 0: the request was already counted at dispatch. */
static void respond_error_close(conn *c, int route, int status, const char *msg)
{
    if (route >= 0 && !c->uncounted) {
        ADD(c->w->st.by_route[route], 1);
        c->status_owed = 1;
    }
    c->close_after = 1;
    c->head_only = 0;
    respond_text(c, status, msg, strlen(msg));
}

static void respond_stats(conn *c);

/* Route the parsed head; responses of most routes wait for the body. */
static void dispatch(conn *c, const hb_request_head *h)
{
    const char *t = h->target;
    size_t tn = h->target_len;
    /* absolute-form (proxy style): skip scheme://authority */
    if (tn > 7 && (memcmp(t, "http://", 7) == 0 || (tn > 8 && memcmp(t, "https://", 8) == 0))) {
        const char *s = memchr(t + 8, '/', tn - 8);
        if (!s) {
            t = "/";
            tn = 1;
        } else {
            tn -= (size_t)(s - t);
            t = s;
        }
    }
    const char *q = memchr(t, '?', tn);
    size_t pn = q ? (size_t)(q - t) : tn;
    size_t qn = q ? tn - pn - 1 : 0;
    if (q) q++;
    const char *m = h->method;
    size_t ml = h->method_len;
    int get = (ml == 3 && memcmp(m, "GET", 3) == 0) || c->head_only;
    int post = (ml == 4 && memcmp(m, "POST", 4) == 0) || (ml == 3 && memcmp(m, "PUT", 3) == 0);
    int64_t n = 0, v = 0;
    int r;
    c->status = 200;
    c->p1 = c->p2 = c->p3 = 0;
    int route;

    if (path_is(t, pn, "/")) {
        route = HB_ROUTE_ROOT;
        if (!get) c->status = 405;
    } else if ((r = path_num(t, pn, "/bytes/", &n)) != 0) {
        route = HB_ROUTE_BYTES;
        c->p1 = (uint64_t)n;
        if (r < 0) c->status = 400;
        else if (!get) c->status = 405;
    } else if ((r = path_num(t, pn, "/chunked/", &n)) != 0) {
        route = HB_ROUTE_CHUNKED;
        c->p1 = (uint64_t)n;
        c->p2 = 4096;
        int qr = qnum(q, qn, "chunk", &v);
        if (qr > 0) c->p2 = (uint64_t)v;
        if (r < 0 || qr < 0 || c->p2 == 0 || c->p2 > (1u << 24)) c->status = 400;
        else if (!get) c->status = 405;
    } else if (path_is(t, pn, "/sink")) {
        route = HB_ROUTE_SINK;
        if (!post) c->status = 405;
        else c->body_mode = BM_SINK;
    } else if (path_is(t, pn, "/echo")) {
        route = HB_ROUTE_ECHO;
        if (!post) c->status = 405;
        else c->body_mode = BM_ECHO;
    } else if ((r = path_num(t, pn, "/delay/", &n)) != 0) {
        route = HB_ROUTE_DELAY;
        c->p1 = (uint64_t)n;
        int qr = qnum(q, qn, "bytes", &v);
        c->p2 = qr > 0 ? (uint64_t)v : 0;
        if (r < 0 || qr < 0 || n > 600000) c->status = 400;
    } else if ((r = path_num(t, pn, "/status/", &n)) != 0) {
        route = HB_ROUTE_STATUS;
        c->p1 = (uint64_t)n;
        if (r < 0 || n < 200 || n > 599) c->status = 400;
    } else if ((r = path_num(t, pn, "/drip/", &n)) != 0) {
        route = HB_ROUTE_DRIP;
        c->p1 = (uint64_t)n;
        c->p2 = 10; /* interval_ms */
        c->p3 = 1;  /* bytes per tick */
        int q1 = qnum(q, qn, "interval_ms", &v);
        if (q1 > 0) c->p2 = (uint64_t)v;
        int q2 = qnum(q, qn, "chunk", &v);
        if (q2 > 0) c->p3 = (uint64_t)v;
        if (r < 0 || q1 < 0 || q2 < 0 || c->p2 > 60000 || c->p3 == 0 || c->p3 > DET_WIN ||
            n > (1 << 26))
            c->status = 400;
        else if (!get) c->status = 405;
    } else if (pn > 7 && memcmp(t, "/fault/", 7) == 0) {
        int qr = qnum(q, qn, "bytes", &v);
        c->p2 = qr > 0 ? (uint64_t)v : 1024;
        if (path_is(t, pn, "/fault/close-after-headers")) {
            route = HB_ROUTE_CLOSE_AFTER_HEADERS;
        } else if (path_is(t, pn, "/fault/close-mid-body")) {
            route = HB_ROUTE_CLOSE_MID_BODY;
        } else if (path_is(t, pn, "/fault/reset")) {
            route = HB_ROUTE_RESET;
        } else if ((r = path_num(t, pn, "/fault/stall/", &n)) != 0) {
            route = HB_ROUTE_STALL;
            c->p1 = (uint64_t)n;
            if (r < 0 || n > 600000) c->status = 400;
        } else if (path_is(t, pn, "/fault/early-response")) {
            route = HB_ROUTE_EARLY_RESPONSE;
            c->p1 = 413;
            int sr = qnum(q, qn, "status", &v);
            if (sr > 0) c->p1 = (uint64_t)v;
            if (sr < 0 || c->p1 < 200 || c->p1 > 599) c->status = 400;
        } else {
            route = HB_ROUTE_NOT_FOUND;
            c->status = 404;
        }
        if (qr < 0 || c->p2 > (1ull << 40)) c->status = 400;
    } else if (path_is(t, pn, "/__stats")) {
        route = HB_ROUTE_NOT_FOUND;
        c->uncounted = 1;
        c->status = get ? 200 : 405;
        c->p1 = 1; /* marks the stats route */
    } else {
        route = HB_ROUTE_NOT_FOUND;
        c->status = 404;
    }
    c->route = route;
    if (c->status != 200) c->body_mode = BM_DISCARD;
    if (!c->uncounted) {
        ADD(c->w->st.by_route[route], 1);
        c->status_owed = 1;
    }

    int early = c->status == 200 && route == HB_ROUTE_EARLY_RESPONSE;
    if (c->send_continue && !early) OUT_LIT(c, "HTTP/1.1 100 Continue\r\n\r\n");
    /* Routes that answer before (or while) the body is read. */
    if (c->status == 200 && route == HB_ROUTE_ECHO) {
        if (c->body_chunked && c->minor >= 1) {
            c->echo_chunked = 1;
            out_head(c, 200, CT_OCTET, sizeof CT_OCTET - 1, -1, 1);
        } else {
            c->echo_chunked = 0;
            if (c->body_chunked) c->close_after = 1; /* HTTP/1.0: delimit by close */
            out_head(c, 200, CT_OCTET, sizeof CT_OCTET - 1,
                     c->body_chunked ? -1 : (int64_t)c->body_left, 0);
        }
    } else if (c->status == 200 && route == HB_ROUTE_EARLY_RESPONSE) {
        c->close_after = 1;
        respond_text(c, (int)c->p1, "early response\n", 15);
    }
}

/* Emit the response of a request whose body has been consumed. */
static void finish_request(conn *c)
{
    worker *w = c->w;
    if (c->route == HB_ROUTE_ECHO && c->status == 200) {
        if (c->echo_chunked) OUT_LIT(c, "0\r\n\r\n");
        request_done(c);
        return;
    }
    if (c->route == HB_ROUTE_EARLY_RESPONSE && c->status == 200) {
        request_done(c);
        return;
    }
    if (c->uncounted && c->p1 == 1) { /* /__stats */
        if (c->status == 200) respond_stats(c);
        else RESPOND_LIT(c, 405, "method not allowed\n");
        request_done(c);
        return;
    }
    switch (c->status) {
    case 400: RESPOND_LIT(c, 400, "bad parameter\n"); request_done(c); return;
    case 404: RESPOND_LIT(c, 404, "not found\n"); request_done(c); return;
    case 405: RESPOND_LIT(c, 405, "method not allowed\n"); request_done(c); return;
    default: break;
    }
    switch (c->route) {
    case HB_ROUTE_ROOT: RESPOND_LIT(c, 200, "httpbench test server\n"); break;
    case HB_ROUTE_BYTES:
        out_head(c, 200, CT_OCTET, sizeof CT_OCTET - 1, (int64_t)c->p1, 0);
        out_body(c, c->p1);
        break;
    case HB_ROUTE_CHUNKED:
        if (c->minor == 0) { /* no chunked coding for HTTP/1.0: delimit by close */
            c->close_after = 1;
            out_head(c, 200, CT_OCTET, sizeof CT_OCTET - 1, -1, 0);
            if (!c->head_only) start_stream(c, 0, c->p1, 0, 0);
        } else {
            out_head(c, 200, CT_OCTET, sizeof CT_OCTET - 1, -1, 1);
            if (!c->head_only) {
                if (c->p1)
                    start_stream(c, 0, c->p1, (uint32_t)c->p2, 1);
                else
                    OUT_LIT(c, "0\r\n\r\n");
            }
        }
        break;
    case HB_ROUTE_SINK: {
        char body[96];
        int n = snprintf(body, sizeof body, "{\"bytes\": %llu, \"crc32\": \"%08x\"}",
                         (unsigned long long)c->body_bytes, c->crc);
        out_head(c, 200, CT_JSON, sizeof CT_JSON - 1, n, 0);
        if (!c->head_only) out_bytes(c, body, (size_t)n);
        break;
    }
    case HB_ROUTE_DELAY:
        if (c->p1 == 0) {
            out_head(c, 200, CT_OCTET, sizeof CT_OCTET - 1, (int64_t)c->p2, 0);
            out_body(c, c->p2);
            break;
        }
        c->phase = PH_WAIT;
        c->wait_kind = W_DELAY;
        if (timer_set(c, w->now + c->p1 * MS) < 0) c->after = AF_RESET;
        return; /* request_done when the timer fires */
    case HB_ROUTE_STATUS: respond_text(c, (int)c->p1, "", 0); break;
    case HB_ROUTE_DRIP:
        out_head(c, 200, CT_OCTET, sizeof CT_OCTET - 1, (int64_t)c->p1, 0);
        if (c->head_only || c->p1 == 0) break;
        c->st_off = 0;
        c->st_left = c->p1;
        c->phase = PH_WAIT;
        c->wait_kind = W_DRIP;
        if (timer_set(c, w->now + c->p2 * MS) < 0) c->after = AF_RESET;
        return;
    case HB_ROUTE_CLOSE_AFTER_HEADERS:
        c->close_after = 0;
        out_head(c, 200, CT_OCTET, sizeof CT_OCTET - 1, (int64_t)c->p2, 0);
        c->after = AF_CLOSE;
        break;
    case HB_ROUTE_CLOSE_MID_BODY:
        c->close_after = 0;
        out_head(c, 200, CT_OCTET, sizeof CT_OCTET - 1, (int64_t)c->p2, 0);
        if (!c->head_only) start_stream(c, 0, c->p2 / 2, 0, 0);
        c->after = AF_CLOSE;
        break;
    case HB_ROUTE_RESET:
        count_status(c, 0);
        c->after = AF_RESET;
        break;
    case HB_ROUTE_STALL:
        out_head(c, 200, CT_OCTET, sizeof CT_OCTET - 1, (int64_t)c->p2, 0);
        if (c->head_only) break;
        start_stream(c, 0, c->p2 / 2, 0, 0);
        c->after = AF_STALL;
        break;
    default: RESPOND_LIT(c, 404, "not found\n"); break;
    }
    request_done(c);
}

/* Parse one head from the read buffer. 1 progress, 0 need more, -1 stop. */
static int handle_head(conn *c)
{
    hb_server *srv = c->w->srv;
    hb_header hdrs[MAX_HEADERS];
    hb_request_head h;
    memset(&h, 0, sizeof h);
    h.headers = hdrs;
    h.num_headers = MAX_HEADERS;
    hb_parse_limits lim = {srv->o.max_head, MAX_HEADERS};
    size_t avail = c->rlen - c->rpos;
    int r = hb_parse_request_head(c->rbuf + c->rpos, avail, &h, &lim);
    if (r == HB_AGAIN) {
        if (avail >= srv->o.max_head) {
            respond_error_close(c, HB_ROUTE_BAD_REQUEST, 431, "request head too large\n");
            return -1;
        }
        return 0;
    }
    if (r < 0) {
        int big = h.error == HB_PE_HEAD_TOO_LARGE || h.error == HB_PE_TOO_MANY_HEADERS;
        char msg[128];
        snprintf(msg, sizeof msg, "bad request: %s\n", hb_parse_strerror(h.error));
        respond_error_close(c, HB_ROUTE_BAD_REQUEST, big ? 431 : 400, msg);
        return -1;
    }
    c->rpos += (size_t)r;
    if (!c->req_deadline) c->req_deadline = c->w->now + (uint64_t)srv->o.request_timeout_ms * MS;
    c->minor = h.minor_version;
    c->close_after = (uint8_t)h.framing.connection_close;
    c->ka10 = (uint8_t)(c->minor == 0 && !c->close_after);
    c->head_only = (uint8_t)(h.method_len == 4 && memcmp(h.method, "HEAD", 4) == 0);
    c->body_mode = BM_DISCARD;
    c->body_chunked = (uint8_t)h.framing.chunked;
    c->body_left = (!h.framing.chunked && h.framing.content_length > 0)
                       ? (uint64_t)h.framing.content_length
                       : 0;
    if (c->body_chunked) hb_chunked_init(&c->chunked);
    c->body_bytes = 0;
    c->crc = 0;
    c->echo_chunked = 0;
    int has_body = c->body_chunked || c->body_left > 0;
    /* 1xx only to HTTP/1.1 clients still waiting for it (no body bytes yet) */
    c->send_continue =
        (uint8_t)(has_body && h.framing.expect_continue && c->rpos == c->rlen && c->minor >= 1);
    dispatch(c, &h);
    if (c->route == HB_ROUTE_EARLY_RESPONSE && c->status == 200) {
        request_done(c);
        c->phase = PH_HEAD;
        return -1; /* closing: the unread body is drained by linger */
    }
    if (has_body) {
        c->phase = PH_BODY;
        return 1;
    }
    finish_request(c);
    return 1;
}

static void body_data(conn *c, const char *p, size_t n)
{
    c->body_bytes += n;
    ADD(c->w->st.body_in, n);
    if (c->body_mode == BM_SINK) {
        c->crc = hb_crc32(c->crc, p, n);
    } else if (c->body_mode == BM_ECHO && !c->head_only) {
        if (c->echo_chunked) {
            char line[24];
            size_t l = xtoa(line, n);
            line[l++] = '\r';
            line[l++] = '\n';
            out_bytes(c, line, l);
            out_iov(c, p, n);
            out_iov(c, "\r\n", 2);
        } else {
            out_iov(c, p, n);
        }
    }
}

/* Consume body bytes from the read buffer. 1 progress, 0 need more, -1 stop. */
static int handle_body(conn *c)
{
    size_t avail = c->rlen - c->rpos;
    if (c->body_chunked) {
        size_t before = avail;
        while (avail && !c->chunked.done && out_room(c)) {
            const char *data;
            size_t dl;
            ssize_t used = hb_chunked_feed(&c->chunked, c->rbuf + c->rpos, avail, &data, &dl);
            if (used < 0) {
                if (c->responded) { /* echo already answered: nothing sane to add */
                    c->after = AF_CLOSE;
                    return -1;
                }
                respond_error_close(c, -1, 400, "bad chunked body\n");
                return -1;
            }
            if (dl) body_data(c, data, dl);
            c->rpos += (size_t)used;
            avail -= (size_t)used;
        }
        if (!c->chunked.done) return avail < before ? 1 : 0;
    } else {
        size_t take = avail < c->body_left ? avail : (size_t)c->body_left;
        if (take) body_data(c, c->rbuf + c->rpos, take);
        c->rpos += take;
        c->body_left -= take;
        if (c->body_left) return take ? 1 : 0;
    }
    finish_request(c);
    return 1;
}

/* 1 progress, 0 nothing to do without more input, -1 stop processing. */
static int process_input(conn *c)
{
    int progress = 0;
    while (out_room(c)) {
        int r;
        if (c->phase == PH_HEAD) {
            if (c->rpos == c->rlen) break;
            r = handle_head(c);
        } else if (c->phase == PH_BODY) {
            if (c->rpos == c->rlen && (c->body_chunked || c->body_left)) break;
            r = handle_body(c);
        } else {
            break;
        }
        if (r < 0) return -1;
        if (r == 0) break;
        progress = 1;
        if (c->st_active || c->after || c->close_after || c->phase == PH_WAIT) break;
        /* echo output points into rbuf: flush before more body overwrites nothing,
         * but keep the queue short so the client sees its bytes promptly */
        if (c->body_mode == BM_ECHO && has_output(c) && c->phase == PH_BODY) break;
    }
    return progress;
}

/* Write queued output. 0 ok (maybe still pending), <0 error. */
static int flush(conn *c)
{
    worker *w = c->w;
    while (c->niov) {
        int cnt = c->niov < IOV_MAX ? c->niov : IOV_MAX;
        const struct iovec *v0 = &c->iov[c->iov_first];
        ssize_t n = cnt == 1 ? hb_sock_write(&c->sock, v0->iov_base, v0->iov_len)
                             : hb_sock_writev(&c->sock, v0, cnt);
        if (n == HB_AGAIN) {
            c->wr_ready = 0;
            return 0;
        }
        if (n < 0) return (int)n;
        ADD(w->st.bytes_out, (uint64_t)n);
        c->wr_deadline = w->now + (uint64_t)w->srv->o.request_timeout_ms * MS;
        size_t left = (size_t)n;
        while (left && c->niov) {
            struct iovec *v = &c->iov[c->iov_first];
            if (left >= v->iov_len) {
                left -= v->iov_len;
                c->iov_first++;
                c->niov--;
            } else {
                v->iov_base = (char *)v->iov_base + left;
                v->iov_len -= left;
                left = 0;
            }
        }
        /* a short plain write means the send buffer is full: skip the EAGAIN call */
        if (c->niov && !c->sock.ssl) {
            c->wr_ready = 0;
            return 0;
        }
    }
    c->iov_first = 0;
    c->olen = 0;
    return 0;
}

/* Read more input. 1 got bytes, 0 would block, -1 error (closed). */
static int read_more(conn *c)
{
    hb_server *srv = c->w->srv;
    if (c->rpos == c->rlen) {
        c->rpos = c->rlen = 0;
    } else if (c->rpos > 0) {
        memmove(c->rbuf, c->rbuf + c->rpos, c->rlen - c->rpos);
        c->rlen -= c->rpos;
        c->rpos = 0;
    }
    size_t space = srv->rbuf_size - c->rlen;
    if (space == 0) return 0; /* handle_head turns a full buffer into 431 */
    ssize_t n = hb_sock_read(&c->sock, c->rbuf + c->rlen, space);
    if (n > 0) {
        ADD(c->w->st.bytes_in, (uint64_t)n);
        if (c->phase == PH_HEAD && c->rlen == 0 && !c->req_deadline)
            c->req_deadline = c->w->now + (uint64_t)srv->o.request_timeout_ms * MS;
        c->rlen += (size_t)n;
        /* a short plain read drained the socket; epoll (ET) reports new data -
         * unless the event that woke us already carried the FIN (data and FIN
         * arriving together make one edge): then read on until EOF */
        if ((size_t)n < space && !c->sock.ssl && !c->rdhup) c->rd_ready = 0;
        return 1;
    }
    if (n == 0) {
        c->peer_eof = 1;
        return 0;
    }
    if (n == HB_AGAIN) {
        c->rd_ready = 0;
        return 0;
    }
    return -1;
}

static void conn_run(conn *c);

static int after_action(conn *c)
{
    int a = c->after;
    c->after = AF_NONE;
    switch (a) {
    case AF_CLOSE: /* FIN now, and drain so unread input never turns it into an RST */
        begin_linger(c);
        linger_read(c);
        return 1;
    case AF_RESET: conn_free(c, 1); return 1;
    case AF_STALL:
        c->phase = PH_WAIT;
        c->wait_kind = W_STALL;
        if (timer_set(c, c->w->now + c->p1 * MS) < 0) {
            conn_free(c, 1);
            return 1;
        }
        return 1;
    default: return 0;
    }
}

static void on_timer(conn *c)
{
    worker *w = c->w;
    switch (c->wait_kind) {
    case W_DELAY:
        c->wait_kind = W_NONE;
        c->phase = PH_HEAD;
        out_head(c, 200, CT_OCTET, sizeof CT_OCTET - 1, (int64_t)c->p2, 0);
        out_body(c, c->p2);
        request_done(c);
        break;
    case W_DRIP: {
        size_t take = c->st_left < c->p3 ? (size_t)c->st_left : (size_t)c->p3;
        out_content(c, c->st_off, take);
        c->st_off += take;
        c->st_left -= take;
        if (c->st_left && timer_set(c, w->now + c->p2 * MS) == 0) break;
        c->wait_kind = W_NONE;
        c->phase = PH_HEAD;
        if (c->st_left) c->after = AF_RESET;
        request_done(c);
        break;
    }
    case W_STALL:
        c->wait_kind = W_NONE;
        c->phase = PH_HEAD;
        start_stream(c, c->p2 / 2, c->p2 - c->p2 / 2, 0, 0);
        request_done(c);
        break;
    default: break;
    }
    conn_run(c);
}

static void handshake_step(conn *c)
{
    worker *w = c->w;
    char err[HB_ERR_LEN];
    int rc = hb_sock_handshake(&c->sock, err);
    if (rc == HB_AGAIN) {
        if (c->sock.want == HB_WANT_READ)
            c->rd_ready = 0;
        else
            c->wr_ready = 0;
        return;
    }
    if (rc < 0) {
        ADD(w->st.hs_err, 1);
        conn_free(c, 0);
        return;
    }
    ADD(w->st.hs, 1);
    if (hb_sock_session_reused(&c->sock)) ADD(w->st.hs_resumed, 1);
    c->phase = PH_HEAD;
    c->req_deadline = 0;
    c->idle_since = w->now;
    c->rd_ready = c->wr_ready = 1;
    conn_run(c);
}

/* Drive one connection as far as it goes without blocking. */
static void conn_run(conn *c)
{
    for (;;) {
        if (c->phase == PH_LINGER) {
            linger_read(c);
            return;
        }
        if (c->phase == PH_HANDSHAKE) {
            handshake_step(c);
            return;
        }
        if (has_output(c)) {
            if (!c->wr_ready) return;
            if (flush(c) < 0) {
                conn_free(c, 0);
                return;
            }
            if (has_output(c)) return;
        }
        if (c->st_active) {
            stream_refill(c);
            continue;
        }
        if (c->after) {
            if (after_action(c)) return;
            continue;
        }
        if (c->phase == PH_WAIT) return;
        if (c->close_after && c->phase == PH_HEAD) {
            begin_linger(c);
            linger_read(c);
            return;
        }
        if (c->rpos < c->rlen || (c->phase == PH_BODY && !c->body_chunked && !c->body_left)) {
            int r = process_input(c);
            if (r < 0 || r > 0) continue;
        }
        /* reading may move the read buffer, which queued echo data points into */
        if (has_output(c)) continue;
        if (c->peer_eof) {
            /* a complete request before the FIN was answered above */
            conn_free(c, 0);
            return;
        }
        if (!c->rd_ready) return;
        int r = read_more(c);
        if (r < 0) {
            conn_free(c, 0);
            return;
        }
        if (r == 0 && !c->peer_eof) {
            if (c->rlen - c->rpos >= c->w->srv->rbuf_size) continue; /* full: 431 path */
            return;
        }
    }
}

/* ---- stats route ---- */

static void respond_stats(conn *c)
{
    hb_server_stats st;
    hb_server_stats_read(c->w->srv, &st);
    char body[OBUF];
    size_t n = 0, cap = OBUF - c->olen - 512; /* out_room leaves >= 4 KiB */
#define J(...)                                                                                     \
    do {                                                                                           \
        int k_ = snprintf(body + n, cap - n, __VA_ARGS__);                                         \
        if (k_ > 0) n = n + (size_t)k_ < cap ? n + (size_t)k_ : cap - 1;                           \
    } while (0)
    J("{\"requests\": %llu, \"by_route\": {", (unsigned long long)st.requests);
    for (int i = 0; i < HB_ROUTE_COUNT; i++)
        J("%s\"%s\": %llu", i ? ", " : "", route_names[i], (unsigned long long)st.by_route[i]);
    J("}, \"by_status\": {");
    int first = 1;
    for (int i = 0; i < 600; i++) {
        if (!st.by_status[i]) continue;
        J("%s\"%d\": %llu", first ? "" : ", ", i, (unsigned long long)st.by_status[i]);
        first = 0;
    }
    J("}, \"bytes_in\": %llu, \"bytes_out\": %llu, \"connections_accepted\": %llu, "
      "\"connections_closed\": %llu, \"tls_handshakes\": %llu, \"tls_resumed\": %llu, "
      "\"tls_handshake_errors\": %llu, \"idle_timeouts\": %llu, \"body_bytes_in\": %llu, "
      "\"threads\": %d, \"cpu_ns\": %llu, \"thread_cpu_ns\": [",
      (unsigned long long)st.bytes_in, (unsigned long long)st.bytes_out,
      (unsigned long long)st.connections_accepted, (unsigned long long)st.connections_closed,
      (unsigned long long)st.tls_handshakes, (unsigned long long)st.tls_resumed,
      (unsigned long long)st.tls_handshake_errors, (unsigned long long)st.idle_timeouts,
      (unsigned long long)st.body_bytes_in, st.threads, (unsigned long long)st.cpu_ns);
    for (int i = 0; i < st.threads; i++)
        J("%s%llu", i ? ", " : "", (unsigned long long)st.thread_cpu_ns[i]);
    J("]}\n");
#undef J
    out_head(c, 200, CT_JSON, sizeof CT_JSON - 1, (int64_t)n, 0);
    if (!c->head_only) out_bytes(c, body, n);
}

/* ---- worker loop ---- */

static void update_date(worker *w)
{
    time_t t = time(NULL);
    if (t == w->date_sec) return;
    w->date_sec = t;
    w->hc.len = 0; /* the cached head has the old Date */
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(w->date, sizeof w->date, "%a, %d %b %Y %H:%M:%S GMT", &tm);
}

static void listen_pause(worker *w, int pause)
{
    if (pause == w->listen_paused) return;
    if (pause) {
        (void)epoll_ctl(w->epfd, EPOLL_CTL_DEL, w->lfd, NULL);
    } else {
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &LISTEN_TAG};
        if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, w->lfd, &ev) != 0) return;
    }
    w->listen_paused = pause;
}

static void accept_all(worker *w)
{
    hb_server *srv = w->srv;
    for (int i = 0; i < 256; i++) {
        int fd = accept4(w->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO) continue;
            /* out of fds/memory: stop accepting until the next sweep */
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
                listen_pause(w, 1);
            return;
        }
        conn *c = conn_new(w);
        if (!c) {
            close(fd);
            listen_pause(w, 1);
            return;
        }
        ADD(w->st.accepted, 1);
        char err[HB_ERR_LEN];
        if (hb_sock_adopt(&c->sock, fd, 0) < 0) {
            c->sock.fd = fd;
            conn_free(c, 0);
            continue;
        }
        c->phase = PH_HEAD;
        c->idle_since = w->now;
        if (srv->tls) {
            if (hb_sock_tls_server(&c->sock, srv->tls, err) < 0) {
                conn_free(c, 0);
                continue;
            }
            c->phase = PH_HANDSHAKE;
            c->req_deadline = w->now + (uint64_t)srv->o.request_timeout_ms * MS;
        }
        struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET,
                                 .data.ptr = c};
        if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
            conn_free(c, 0);
            continue;
        }
        c->rd_ready = c->wr_ready = 1;
        conn_run(c);
    }
}

static void sweep(worker *w)
{
    hb_server *srv = w->srv;
    uint64_t now = w->now;
    uint64_t idle_ns = (uint64_t)srv->o.keepalive_timeout_ms * MS;
    conn *next;
    for (conn *c = w->conns; c; c = next) {
        next = c->next;
        if (c->phase == PH_LINGER) {
            if (now >= c->linger_until) conn_free(c, 0);
            continue;
        }
        if (c->phase == PH_WAIT && !has_output(c)) continue;
        if (has_output(c) || c->st_active) {
            if (now >= c->wr_deadline) conn_free(c, 1); /* reader stopped reading */
            continue;
        }
        if (c->req_deadline) {
            if (now < c->req_deadline) continue;
            if (c->phase == PH_HANDSHAKE || c->responded) {
                conn_free(c, 0);
                continue;
            }
            /* a request in its body phase was counted under its route already */
            respond_error_close(c, c->phase == PH_BODY ? -1 : HB_ROUTE_TIMEOUT, 408,
                                "request timeout\n");
            c->phase = PH_HEAD;
            c->req_deadline = 0;
            c->wr_deadline = now + (uint64_t)srv->o.request_timeout_ms * MS;
            c->wr_ready = 1;
            conn_run(c);
            continue;
        }
        if (now - c->idle_since >= idle_ns) {
            ADD(w->st.idle_timeouts, 1);
            conn_free(c, 0);
        }
    }
    if (w->listen_paused) listen_pause(w, 0);
    w->next_sweep = now + SWEEP_NS;
}

/* Wait for events until the next timer or sweep (hb_waiter: a timerfd for
 * far deadlines, epoll_pwait2's ns timeout for near ones, so /delay/{ms}
 * fires within microseconds). */
static int wait_events(worker *w, struct epoll_event *ev, int max)
{
    uint64_t until = UINT64_MAX;
    if (w->heap_len) until = w->heap[0]->timer_at;
    if ((w->conns || w->listen_paused) && w->next_sweep < until) until = w->next_sweep;
    return hb_waiter_wait(&w->waiter, w->epfd, ev, max, hb_now_ns(), until);
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    struct epoll_event ev[256];
    if (pthread_getcpuclockid(pthread_self(), &w->cpu_clock) == 0)
        __atomic_store_n(&w->has_cpu_clock, 1, __ATOMIC_RELEASE);
    /* timers (delay/drip/stall) fire within 10 us instead of the default 50 */
    (void)prctl(PR_SET_TIMERSLACK, 10000UL, 0, 0, 0);
    w->now = hb_now_ns();
    w->next_sweep = w->now + SWEEP_NS;
    update_date(w);
    for (;;) {
        int n = wait_events(w, ev, 256);
        if (n < 0 && errno != EINTR) break;
        w->now = hb_now_ns();
        update_date(w);
        int stop = 0;
        for (int i = 0; i < n; i++) {
            void *p = ev[i].data.ptr;
            if (p == &STOP_TAG) {
                stop = 1;
                continue;
            }
            if (p == &LISTEN_TAG) {
                accept_all(w);
                continue;
            }
            if (p == &WAITER_TAG) {
                hb_waiter_fired(&w->waiter);
                continue;
            }
            conn *c = p;
            uint32_t e = ev[i].events;
            if (c->sock.ssl) {
                c->rd_ready = c->wr_ready = 1; /* TLS may want either way */
            } else {
                if (e & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) c->rd_ready = 1;
                if (e & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) c->rdhup = 1;
                if (e & (EPOLLOUT | EPOLLHUP | EPOLLERR)) c->wr_ready = 1;
            }
            conn_run(c);
        }
        if (stop || __atomic_load_n(&w->srv->stopping, __ATOMIC_ACQUIRE)) break;
        while (w->heap_len && w->heap[0]->timer_at <= w->now) {
            conn *c = w->heap[0];
            timer_cancel(c);
            on_timer(c);
        }
        if (w->now >= w->next_sweep) sweep(w);
    }
    while (w->conns) conn_free(w->conns, 0);
    w->final_cpu_ns = hb_thread_cpu_ns();
    __atomic_store_n(&w->exited, 1, __ATOMIC_RELEASE);
    return NULL;
}

/* ---- public API ---- */

void hb_server_opts_init(hb_server_opts *o)
{
    memset(o, 0, sizeof *o);
    o->host = "127.0.0.1";
    o->threads = 1;
    o->session_resumption = 1;
    o->request_timeout_ms = 10000;
    o->keepalive_timeout_ms = 30000;
    o->max_head = 16384;
    o->backlog = 4096;
}

/* reuseport: join the SO_REUSEPORT group (workers > 1); listen=0 makes a
 * bind-only probe. */
static int make_listener(hb_server *s, const struct sockaddr_storage *ss, socklen_t len,
                         int reuseport, int do_listen, char *err)
{
    int fd = socket(ss->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return hb_fail(err, -errno, "socket: %s", strerror(errno));
    int one = 1;
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        (reuseport && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) != 0) ||
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0) {
        int e = errno;
        close(fd);
        return hb_fail(err, -e, "setsockopt: %s", strerror(e));
    }
    if (bind(fd, (const struct sockaddr *)ss, len) != 0) {
        int e = errno;
        close(fd);
        return hb_fail(err, -e, "bind %s:%d: %s", s->host, s->port, strerror(e));
    }
    if (do_listen && listen(fd, s->o.backlog) != 0) {
        int e = errno;
        close(fd);
        return hb_fail(err, -e, "listen: %s", strerror(e));
    }
    return fd;
}

static void server_cleanup(hb_server *s)
{
    for (int i = 0; i < s->nworkers; i++) {
        worker *w = &s->w[i];
        if (w->lfd >= 0) close(w->lfd);
        hb_waiter_free(&w->waiter);
        if (w->epfd >= 0) close(w->epfd);
        w->lfd = w->epfd = -1;
        conn *c = w->free;
        while (c) {
            conn *n = c->next;
            free(c);
            c = n;
        }
        w->free = NULL;
        free(w->heap);
        w->heap = NULL;
        w->heap_len = w->heap_cap = 0;
    }
    if (s->stopfd >= 0) close(s->stopfd);
    s->stopfd = -1;
}

int hb_server_start(hb_server **out, const hb_server_opts *o, char *err)
{
    hb_server_opts def;
    if (!o) {
        hb_server_opts_init(&def);
        o = &def;
    }
    *out = NULL;
    pthread_once(&init_once, global_init);
    if (o->threads < 1 || o->threads > HB_SERVER_MAX_THREADS)
        return hb_fail(err, HB_E_INVALID, "threads must be 1..%d", HB_SERVER_MAX_THREADS);
    if (o->port < 0 || o->port > 65535) return hb_fail(err, HB_E_INVALID, "bad port %d", o->port);
    if (o->request_timeout_ms <= 0 || o->keepalive_timeout_ms <= 0)
        return hb_fail(err, HB_E_INVALID, "timeouts must be > 0");
    if (o->max_head < 256 || o->max_head > (64u << 20))
        return hb_fail(err, HB_E_INVALID, "max_head must be 256 B .. 64 MiB");
    hb_server *s = calloc(1, sizeof *s);
    if (!s) return hb_fail(err, HB_E_NOMEM, "out of memory");
    s->o = *o;
    snprintf(s->host, sizeof s->host, "%s", o->host ? o->host : "127.0.0.1");
    s->o.host = s->host;
    if (s->o.backlog <= 0) s->o.backlog = 4096;
    s->rbuf_size = o->max_head < 4096 ? 4096 : o->max_head;
    s->stopfd = -1;
    s->nworkers = o->threads;
    s->w = calloc((size_t)s->nworkers, sizeof *s->w);
    if (!s->w) {
        free(s);
        return hb_fail(err, HB_E_NOMEM, "out of memory");
    }
    for (int i = 0; i < s->nworkers; i++) {
        s->w[i].lfd = s->w[i].epfd = -1;
        s->w[i].waiter.tfd = -1;
    }
    int rc;
    struct sockaddr_storage ss;
    socklen_t slen;
    if ((rc = hb_resolve_host(s->host, o->port, &ss, &slen, err)) < 0) goto fail;
    if (o->tls) {
        hb_tls_server_opts to;
        hb_tls_server_opts_init(&to);
        to.cert_file = o->cert_file;
        to.key_file = o->key_file;
        to.session_resumption = o->session_resumption;
        if ((rc = hb_tls_server_ctx_new(&s->tls, &to, err)) < 0) goto fail;
    }
    s->stopfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (s->stopfd < 0) {
        rc = hb_fail(err, -errno, "eventfd: %s", strerror(errno));
        goto fail;
    }
    s->port = o->port;
    int reuseport = s->nworkers > 1;
    if (reuseport && o->port > 0) {
        /* SO_REUSEPORT would silently share a port someone else listens on
         * with SO_REUSEPORT too; a plain bind first says EADDRINUSE. (An
         * ephemeral port is always a fresh one.) */
        if ((rc = make_listener(s, &ss, slen, 0, 0, err)) < 0) goto fail;
        close(rc);
    }
    for (int i = 0; i < s->nworkers; i++) {
        worker *w = &s->w[i];
        w->srv = s;
        w->idx = i;
        w->req_timeout_ns = (uint64_t)o->request_timeout_ms * MS;
        if ((rc = make_listener(s, &ss, slen, reuseport, 1, err)) < 0) goto fail;
        w->lfd = rc;
        if (i == 0) { /* port 0: every later listener joins the chosen port */
            struct sockaddr_storage bound;
            socklen_t bl = sizeof bound;
            if (getsockname(w->lfd, (struct sockaddr *)&bound, &bl) != 0) {
                rc = hb_fail(err, -errno, "getsockname: %s", strerror(errno));
                goto fail;
            }
            s->port = ntohs(bound.ss_family == AF_INET6
                                ? ((struct sockaddr_in6 *)&bound)->sin6_port
                                : ((struct sockaddr_in *)&bound)->sin_port);
            if (ss.ss_family == AF_INET6)
                ((struct sockaddr_in6 *)&ss)->sin6_port = htons((uint16_t)s->port);
            else
                ((struct sockaddr_in *)&ss)->sin_port = htons((uint16_t)s->port);
        }
        w->epfd = epoll_create1(EPOLL_CLOEXEC);
        if (w->epfd < 0) {
            rc = hb_fail(err, -errno, "epoll_create1: %s", strerror(errno));
            goto fail;
        }
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &LISTEN_TAG};
        struct epoll_event sv = {.events = EPOLLIN, .data.ptr = &STOP_TAG};
        if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, w->lfd, &ev) != 0 ||
            epoll_ctl(w->epfd, EPOLL_CTL_ADD, s->stopfd, &sv) != 0) {
            rc = hb_fail(err, -errno, "epoll_ctl: %s", strerror(errno));
            goto fail;
        }
        hb_waiter_init(&w->waiter, w->epfd, &WAITER_TAG);
    }
    s->running = 1;
    for (int i = 0; i < s->nworkers; i++) {
        worker *w = &s->w[i];
        int e = pthread_create(&w->thread, NULL, worker_main, w);
        if (e != 0) {
            rc = hb_fail(err, -e, "pthread_create: %s", strerror(e));
            hb_server_stop(s);
            goto fail;
        }
        w->started = 1;
    }
    *out = s;
    return 0;
fail:
    server_cleanup(s);
    hb_tls_ctx_free(s->tls);
    free(s->w);
    free(s);
    return rc;
}

void hb_server_stop(hb_server *s)
{
    if (!s || !s->running) return;
    __atomic_store_n(&s->stopping, 1, __ATOMIC_RELEASE);
    uint64_t one = 1;
    if (write(s->stopfd, &one, sizeof one) < 0) {
        /* cannot happen for a fresh eventfd; the flag still stops the loops at
         * their next wake-up (sweeps run every 50 ms while connections exist) */
    }
    for (int i = 0; i < s->nworkers; i++) {
        if (s->w[i].started) pthread_join(s->w[i].thread, NULL);
        s->w[i].started = 0;
    }
    s->running = 0;
    server_cleanup(s);
}

void hb_server_free(hb_server *s)
{
    if (!s) return;
    hb_server_stop(s);
    hb_tls_ctx_free(s->tls);
    free(s->w);
    free(s);
}

int hb_server_port(const hb_server *s)
{
    return s->port;
}

int hb_server_running(const hb_server *s)
{
    return s->running;
}

const char *hb_server_cert_pem(const hb_server *s, size_t *len)
{
    if (!s->tls) {
        if (len) *len = 0;
        return NULL;
    }
    return hb_tls_ctx_cert_pem(s->tls, len);
}

void hb_server_stats_read(const hb_server *s, hb_server_stats *out)
{
    memset(out, 0, sizeof *out);
    out->threads = s->nworkers;
    for (int i = 0; i < s->nworkers; i++) {
        worker *w = &s->w[i];
        wstats *st = &w->st;
        for (int r = 0; r < HB_ROUTE_COUNT; r++) {
            uint64_t v = LOAD(st->by_route[r]);
            out->by_route[r] += v;
            out->requests += v;
        }
        for (int k = 0; k < 600; k++) out->by_status[k] += LOAD(st->by_status[k]);
        out->bytes_in += LOAD(st->bytes_in);
        out->bytes_out += LOAD(st->bytes_out);
        out->connections_accepted += LOAD(st->accepted);
        out->connections_closed += LOAD(st->closed);
        out->tls_handshakes += LOAD(st->hs);
        out->tls_resumed += LOAD(st->hs_resumed);
        out->tls_handshake_errors += LOAD(st->hs_err);
        out->idle_timeouts += LOAD(st->idle_timeouts);
        out->body_bytes_in += LOAD(st->body_in);
        uint64_t cpu = 0;
        if (!__atomic_load_n(&w->exited, __ATOMIC_ACQUIRE) &&
            __atomic_load_n(&w->has_cpu_clock, __ATOMIC_ACQUIRE))
            cpu = hb_clock_ns_of(w->cpu_clock);
        if (cpu == 0) cpu = __atomic_load_n(&w->final_cpu_ns, __ATOMIC_RELAXED);
        out->thread_cpu_ns[i] = cpu;
        out->cpu_ns += cpu;
    }
}
