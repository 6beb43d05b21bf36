/* hb_h2_server.c - an HTTP/2 server connection on nghttp2 (see hb_h2_server.h).
 *
 * nghttp2 does framing, HPACK, flow control and the protocol checks. This
 * file is the session (input scan, output queue, slab memory, public API);
 * hb_h2_server_stream.c answers the routes. Every response body goes through one data
 * provider with NGHTTP2_DATA_FLAG_NO_COPY: the read callback only decides a
 * frame's length, and the send-data callback queues the frame header plus
 * the payload - iovecs into the shared content buffer for generated bodies,
 * a copy only for payloads up to 1 KiB, texts, the stats page and echoed
 * bytes. Automatic
 * WINDOW_UPDATEs are off so an echo stream's window reopens only as its
 * bytes are sent back: a client that uploads but never reads cannot make
 * the server buffer more than one stream window. */
#include "h2/hb_h2_server_int.h"

/* Without nghttp2 (HB_NO_NGHTTP2) hb_h2_server_none.c stands in for this file. */
#ifndef HB_NO_NGHTTP2

/* Everything a session allocates - its own struct, its streams, and through
 * nghttp2_mem nghttp2's session, streams, frames and HPACK tables - comes
 * from one mapping of its own; freeing the session unmaps it, so the memory
 * goes back to the system whole (a thread's malloc heap keeps its top: glibc
 * trims a thread arena only past a threshold that grows). Blocks up to 1 KiB
 * come in power-of-two classes from the top down, with a free list each;
 * larger ones are cut to size from the bottom up (few: the session's own
 * tables) and reused first-fit. An idle session touches a few pages. */
static size_t blk_size(const uint8_t *h)
{
    size_t n;
    memcpy(&n, h + 8, sizeof n);
    return n;
}

void *hb__h2_slab_malloc(size_t n, void *ud)
{
    slab *sl = ud;
    if (n > SLAB_BYTES) goto big;
    size_t need = (n + SLAB_HDR + 15) & ~(size_t)15;
    uint8_t *h;
    if (need <= (size_t)16 << (SLAB_CLASSES - 1)) {
        unsigned c =
            need <= 16 ? 0 : (unsigned)(64 - __builtin_clzll((unsigned long long)need - 1)) - 4;
        size_t sz = (size_t)16 << c;
        if (sl->freel[c]) {
            h = sl->freel[c];
            sl->freel[c] = *(void **)(void *)(h + SLAB_HDR);
        } else if ((size_t)(sl->hi - sl->lo) >= sz) {
            sl->hi -= sz;
            h = (uint8_t *)sl->hi;
        } else {
            goto big;
        }
        h[0] = (uint8_t)c;
        return h + SLAB_HDR;
    }
    for (uint8_t **pp = &sl->large; *pp; pp = (uint8_t **)(void *)(*pp + SLAB_HDR)) {
        if (blk_size(*pp) >= need) {
            h = *pp;
            *pp = *(uint8_t **)(void *)(h + SLAB_HDR);
            return h + SLAB_HDR;
        }
    }
    if ((size_t)(sl->hi - sl->lo) < need) goto big;
    h = (uint8_t *)sl->lo;
    sl->lo += need;
    h[0] = SLAB_LARGE;
    memcpy(h + 8, &need, sizeof need);
    return h + SLAB_HDR;
big:
    h = malloc(n + SLAB_HDR);
    if (!h) return NULL;
    h[0] = SLAB_BIG;
    need = n + SLAB_HDR;
    memcpy(h + 8, &need, sizeof need);
    return h + SLAB_HDR;
}

static void slab_free(void *p, void *ud)
{
    if (!p) return;
    slab *sl = ud;
    uint8_t *h = (uint8_t *)p - SLAB_HDR;
    if (h[0] == SLAB_BIG) {
        free(h);
    } else if (h[0] == SLAB_LARGE) {
        *(uint8_t **)p = sl->large;
        sl->large = h;
    } else {
        *(void **)p = sl->freel[h[0]];
        sl->freel[h[0]] = h;
    }
}

static void *slab_calloc(size_t nmemb, size_t size, void *ud)
{
    if (size && nmemb > SIZE_MAX / size) return NULL;
    void *p = hb__h2_slab_malloc(nmemb * size, ud);
    if (p) memset(p, 0, nmemb * size);
    return p;
}

static void *slab_realloc(void *p, size_t n, void *ud)
{
    if (!p) return hb__h2_slab_malloc(n, ud);
    uint8_t *h = (uint8_t *)p - SLAB_HDR;
    size_t cap = (h[0] >= SLAB_LARGE ? blk_size(h) : (size_t)16 << h[0]) - SLAB_HDR;
    if (n <= cap) return p;
    void *q = hb__h2_slab_malloc(n, ud);
    if (!q) return NULL;
    memcpy(q, p, cap);
    slab_free(p, ud);
    return q;
}

static slab *slab_new(void)
{
    void *m = mmap(NULL, SLAB_BYTES, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) return NULL;
    slab *sl = m;
    sl->lo = (char *)m + ((sizeof *sl + 15) & ~(size_t)15);
    sl->hi = (char *)m + SLAB_BYTES;
    return sl;
}

/* ---- output queue ---- */

int hb__h2_room(const hb_h2_server *s, size_t bytes, int iovs)
{
    return s->iov_first + s->niov + iovs <= NIOV && s->alen + bytes <= ARENA;
}

/* Arenas come from the owner's pool (mapped, so a drained pool is memory
 * given back), or from malloc without one. */
static int arena_get(hb_h2_server *s)
{
    hb_h2_arena_pool *p = s->cfg.arenas;
    void *m;
    if (!p) {
        m = malloc(ARENA_BYTES);
    } else if (p->free) {
        void **a = p->free;
        p->free = *a;
        p->nfree--;
        m = a;
    } else {
        m = mmap(NULL, ARENA_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED) m = NULL;
    }
    if (!m) return -1;
    s->iov = m;
    s->arena = (char *)m + NIOV * sizeof(struct iovec);
    return 0;
}

static void arena_put(hb_h2_server *s)
{
    hb_h2_arena_pool *p = s->cfg.arenas;
    char *a = (char *)s->iov;
    s->arena = NULL;
    s->iov = NULL;
    if (!a) return;
    if (!p) {
        free(a);
    } else if (p->nfree < HB_H2_ARENA_POOL_MAX) {
        *(void **)(void *)a = p->free;
        p->free = a;
        p->nfree++;
    } else {
        (void)munmap(a, ARENA_BYTES); /* fails only for a bad range */
    }
}

void hb_h2_arena_pool_drain(hb_h2_arena_pool *p)
{
    while (p->free) {
        void **a = p->free;
        p->free = *a;
        (void)munmap(a, ARENA_BYTES);
    }
    p->nfree = 0;
}

void hb__h2_q_iov(hb_h2_server *s, const void *p, size_t n)
{
    if (n == 0) return;
    s->qbytes += n;
    if (s->niov) {
        struct iovec *last = &s->iov[s->iov_first + s->niov - 1];
        if ((const char *)last->iov_base + last->iov_len == (const char *)p) {
            last->iov_len += n;
            return;
        }
    }
    s->iov[s->iov_first + s->niov].iov_base = (void *)p;
    s->iov[s->iov_first + s->niov].iov_len = n;
    s->niov++;
}

void hb__h2_q_copy(hb_h2_server *s, const void *p, size_t n)
{
    memcpy(s->arena + s->alen, p, n);
    hb__h2_q_iov(s, s->arena + s->alen, n);
    s->alen += n;
}

const struct iovec *hb_h2_server_out(hb_h2_server *s, int *niov)
{
    *niov = s->niov;
    return s->iov ? &s->iov[s->iov_first] : NULL;
}

void hb_h2_server_sent(hb_h2_server *s, size_t n)
{
    while (n && s->niov) {
        struct iovec *v = &s->iov[s->iov_first];
        if (n >= v->iov_len) {
            n -= v->iov_len;
            s->iov_first++;
            s->niov--;
        } else {
            v->iov_base = (char *)v->iov_base + n;
            v->iov_len -= n;
            n = 0;
        }
    }
    if (s->niov == 0) {
        s->iov_first = 0;
        s->alen = 0;
        s->qbytes = 0;
        if (s->nlive == 0) arena_put(s); /* idle: an idle connection holds no arena */
    }
}

int hb_h2_server_idle_out(const hb_h2_server *s)
{
    return s->niov == 0;
}

/* ---- session ---- */

int hb_h2_server_available(void)
{
    return 1;
}

void hb_h2_server_config_init(hb_h2_server_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->max_concurrent_streams = 100;
    cfg->initial_window_size = 65535;
    cfg->max_frame_size = 16384;
    cfg->max_header_list = 16384;
}

int hb_h2_server_new(hb_h2_server **out, const hb_h2_server_config *cfg, char *err)
{
    *out = NULL;
    if (cfg->max_concurrent_streams < 1 || cfg->max_concurrent_streams > HB_H2_MAX_STREAMS_MAX)
        return hb_fail(err, HB_E_INVALID, "h2 max concurrent streams must be 1..%u",
                       HB_H2_MAX_STREAMS_MAX);
    if (cfg->initial_window_size > HB_H2_WINDOW_MAX)
        return hb_fail(err, HB_E_INVALID, "h2 initial window size must be 0..%u", HB_H2_WINDOW_MAX);
    if (cfg->max_frame_size < HB_H2_FRAME_MIN || cfg->max_frame_size > HB_H2_FRAME_MAX)
        return hb_fail(err, HB_E_INVALID, "h2 max frame size must be %u..%u", HB_H2_FRAME_MIN,
                       HB_H2_FRAME_MAX);
    if (!cfg->stats || !cfg->now || cfg->max_header_list < 64)
        return hb_fail(err, HB_E_INVALID, "h2 session: stats, clock and header limit needed");
    slab *sl = slab_new();
    hb_h2_server *s = sl ? slab_calloc(1, sizeof *s, sl) : NULL;
    if (!s) {
        if (sl) (void)munmap(sl, SLAB_BYTES);
        return hb_fail(err, HB_E_NOMEM, "out of memory");
    }
    s->slab = sl;
    s->mem = (nghttp2_mem){sl, hb__h2_slab_malloc, slab_free, slab_calloc, slab_realloc};
    s->cfg = *cfg;
    s->st = cfg->stats;
    s->pre_left = PREFACE_LEN;
    s->idle_tokens = HB_H2_IDLE_FRAMES_BURST;
    s->idle_at = *cfg->now;
    nghttp2_session_callbacks *cb = NULL;
    nghttp2_option *opt = NULL;
    int rc = HB_E_NOMEM;
    if (nghttp2_session_callbacks_new(&cb) != 0 || nghttp2_option_new(&opt) != 0) goto fail;
    hb__h2_set_callbacks(cb);
    nghttp2_option_set_no_auto_window_update(opt, 1);
    if (nghttp2_session_server_new3(&s->ng, cb, s, opt, &s->mem) != 0) goto fail;
    nghttp2_session_callbacks_del(cb);
    nghttp2_option_del(opt);
    cb = NULL;
    opt = NULL;
    nghttp2_settings_entry iv[4] = {
        {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, cfg->max_concurrent_streams},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, cfg->initial_window_size},
        {NGHTTP2_SETTINGS_MAX_FRAME_SIZE, cfg->max_frame_size},
        {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, cfg->max_header_list},
    };
    if (nghttp2_submit_settings(s->ng, NGHTTP2_FLAG_NONE, iv, 4) != 0 ||
        nghttp2_session_set_local_window_size(s->ng, NGHTTP2_FLAG_NONE, 0, CONN_WINDOW) != 0)
        goto fail;
    *out = s;
    return 0;
fail:
    if (cb) nghttp2_session_callbacks_del(cb);
    if (opt) nghttp2_option_del(opt);
    if (s->ng) nghttp2_session_del(s->ng);
    (void)munmap(sl, SLAB_BYTES);
    return hb_fail(err, rc, "out of memory (h2 session)");
}

void hb_h2_server_free(hb_h2_server *s, int peer_left)
{
    if (!s) return;
    while (s->live) {
        h2stream *st = s->live;
        if (st->status_owed) {
            ADD(s->st->by_status[0], 1);
            if (peer_left || st->peer_reset) ADD(s->st->client_gone, 1);
            st->status_owed = 0;
        }
        hb__h2_stream_release(s, st);
    }
    nghttp2_session_del(s->ng);
    s->niov = 0;
    arena_put(s);
    while (s->free) {
        h2stream *st = s->free;
        s->free = st->next;
        free(st->ebuf);
        slab_free(st, s->slab); /* a stream may have come from malloc */
    }
    slab *sl = s->slab;           /* s itself lives in it */
    (void)munmap(sl, SLAB_BYTES); /* fails only for a bad range */
}

/* A connection error nghttp2 reports as a fatal return: queue the GOAWAY. */
static int fail_conn(hb_h2_server *s, int rv)
{
    uint32_t code = NGHTTP2_PROTOCOL_ERROR;
    if (rv == NGHTTP2_ERR_FLOODED || rv == NGHTTP2_ERR_TOO_MANY_CONTINUATIONS)
        code = NGHTTP2_ENHANCE_YOUR_CALM;
    if (rv == NGHTTP2_ERR_CALLBACK_FAILURE && s->term_code) code = s->term_code;
    if (rv == NGHTTP2_ERR_NOMEM) code = NGHTTP2_INTERNAL_ERROR;
    if (!s->fatal && rv != NGHTTP2_ERR_NOMEM) {
        ADD(s->st->protocol_errors, 1);
        if (code == NGHTTP2_ENHANCE_YOUR_CALM) ADD(s->st->floods, 1);
        s->fatal_counted = 1;
    }
    s->fatal = 1;
    (void)nghttp2_session_terminate_session(s->ng, code);
    return -1;
}

/* A frame that asks nothing of the application: an unknown type, PING or
 * SETTINGS (their ACK is all), PRIORITY, an empty CONTINUATION, an empty
 * DATA frame that does not end its stream. */
static int no_work(uint8_t type, uint8_t flags, uint32_t len)
{
    switch (type) {
    case NGHTTP2_DATA:
        return len == 0 && !(flags & NGHTTP2_FLAG_END_STREAM);
    case NGHTTP2_PRIORITY:
        return 1;
    case NGHTTP2_SETTINGS:
    case NGHTTP2_PING:
        return !(flags & NGHTTP2_FLAG_ACK);
    case NGHTTP2_CONTINUATION:
        return len == 0;
    case NGHTTP2_HEADERS:
    case NGHTTP2_RST_STREAM:
    case NGHTTP2_PUSH_PROMISE:
    case NGHTTP2_GOAWAY:
    case NGHTTP2_WINDOW_UPDATE:
        return 0;
    default:
        return 1;
    }
}

/* Follow frame headers through p; 0, or -1 when the peer's no-work frames
 * exceed their rate. */
static int scan(hb_h2_server *s, const uint8_t *p, size_t n)
{
    while (n) {
        if (s->pre_left || s->pay_left) {
            uint32_t *left = s->pre_left ? &s->pre_left : &s->pay_left;
            size_t k = n < *left ? n : *left;
            *left -= (uint32_t)k;
            p += k;
            n -= k;
            continue;
        }
        size_t k = 9u - s->hlen;
        if (k > n) k = n;
        memcpy(s->hdr + s->hlen, p, k);
        s->hlen = (uint8_t)(s->hlen + k);
        p += k;
        n -= k;
        if (s->hlen < 9) break;
        s->hlen = 0;
        uint32_t len = (uint32_t)s->hdr[0] << 16 | (uint32_t)s->hdr[1] << 8 | s->hdr[2];
        s->pay_left = len;
        s->frames++;
        if (!no_work(s->hdr[3], s->hdr[4], len)) continue;
        if (--s->idle_tokens >= 0) continue;
        uint64_t now = *s->cfg.now;
        uint64_t add = (now - s->idle_at) / (1000000000ull / HB_H2_IDLE_FRAMES_PER_S);
        if (add == 0) return -1;
        s->idle_at = now;
        s->idle_tokens = add > HB_H2_IDLE_FRAMES_BURST ? HB_H2_IDLE_FRAMES_BURST : (int64_t)add;
        s->idle_tokens--;
    }
    return 0;
}

uint64_t hb_h2_server_frames(const hb_h2_server *s)
{
    return s->frames;
}

int hb_h2_server_recv(hb_h2_server *s, const uint8_t *p, size_t n)
{
    if (s->fatal) return -1;
    if (scan(s, p, n) < 0) {
        ADD(s->st->protocol_errors, 1);
        ADD(s->st->floods, 1);
        s->fatal = s->fatal_counted = 1;
        (void)nghttp2_session_terminate_session(s->ng, NGHTTP2_ENHANCE_YOUR_CALM);
        return -1;
    }
    ssize_t r = nghttp2_session_mem_recv(s->ng, p, n);
    if (r < 0) return fail_conn(s, (int)r);
    return 0;
}

long hb_h2_server_fill(hb_h2_server *s)
{
    if (!s->arena) {
        if (!s->term_pending && !nghttp2_session_want_write(s->ng)) return 0;
        if (arena_get(s) < 0) return -1;
    }
    for (;;) {
        if (s->term_pending) {
            s->term_pending = 0;
            (void)nghttp2_session_terminate_session(s->ng, s->term_code);
        }
        if (!hb__h2_room(s, ARENA_LOW, 4) || s->qbytes >= BATCH) break;
        const uint8_t *d;
        ssize_t n = nghttp2_session_mem_send(s->ng, &d);
        if (n < 0) return -1;
        if (n == 0) {
            if (s->term_pending) continue;
            break;
        }
        hb__h2_q_copy(s, d, (size_t)n);
    }
    return (long)s->qbytes;
}

int hb_h2_server_done(const hb_h2_server *s)
{
    return !nghttp2_session_want_read(s->ng) && !nghttp2_session_want_write(s->ng);
}

int hb_h2_server_busy(const hb_h2_server *s)
{
    return s->nlive > 0 || s->niov > 0;
}

uint64_t hb_h2_server_deadline(hb_h2_server *s)
{
    if (!s->timers) return 0; /* the common case: no scan of the live streams */
    uint64_t d = 0;
    for (const h2stream *st = s->live; st; st = st->next)
        if (st->deadline && (!d || st->deadline < d)) d = st->deadline;
    if (!d) s->timers = 0;
    return d;
}

void hb_h2_server_timer(hb_h2_server *s)
{
    uint64_t now = *s->cfg.now;
    for (h2stream *st = s->live; st; st = st->next) {
        if (!st->deadline || st->deadline > now) continue;
        st->deadline = 0;
        const hb_route_req *rq = &st->rq;
        switch (st->wait) {
        case W_DELAY:
            st->wait = W_NONE;
            hb__h2_respond_content(s, st, (int64_t)rq->p.delay.bytes, rq->p.delay.bytes,
                                   rq->p.delay.bytes);
            break;
        case W_DRIP: {
            uint64_t k = st->left - st->avail;
            if (k > rq->p.drip.chunk) k = rq->p.drip.chunk;
            st->avail += k;
            if (st->left > st->avail) st->deadline = now + rq->p.drip.interval_ms * NS_PER_MS;
            hb__h2_stream_resume(s, st);
            break;
        }
        case W_STALL:
            st->avail = st->left;
            hb__h2_stream_resume(s, st);
            break;
        case W_EVENTS: /* the next event is due */
            st->wait = W_NONE;
            st->ev_progress = now;
            hb__h2_stream_resume(s, st);
            break;
        default:
            break;
        }
    }
}

#endif /* HB_NO_NGHTTP2 */
