/* hb_h2_server.c - an HTTP/2 server connection on nghttp2 (see hb_h2_server.h).
 *
 * nghttp2 does framing, HPACK, flow control and the protocol checks; this
 * file answers the routes. Every response body goes through one data
 * provider with NGHTTP2_DATA_FLAG_NO_COPY: the read callback only decides a
 * frame's length, and the send-data callback queues the frame header plus
 * the payload - iovecs into the shared content buffer for generated bodies,
 * a copy only for payloads up to 1 KiB, texts, the stats page and echoed
 * bytes. Automatic
 * WINDOW_UPDATEs are off so an echo stream's window reopens only as its
 * bytes are sent back: a client that uploads but never reads cannot make
 * the server buffer more than one stream window. */
#include "hb_h2_server.h"

/* Without nghttp2 (HB_NO_NGHTTP2) hb_h2_server_none.c stands in for this file. */
#ifndef HB_NO_NGHTTP2

#include <nghttp2/nghttp2.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "hb_common.h"
#include "hb_content.h"

#define NIOV 128
#define ARENA (64 * 1024)
#define ARENA_BYTES (NIOV * sizeof(struct iovec) + ARENA)
#define ARENA_LOW (20 * 1024) /* stop serializing below this: a frame chunk may be 16 KiB */
#define BATCH (256 * 1024)    /* bytes queued per fill */
#define PATH_MAX_LEN 4096
#define CONN_WINDOW (1 << 30) /* connection receive window: streams do the limiting */
#define BOMB_FACTOR 16        /* decoded header bytes beyond limit x this: GOAWAY */
#define NS_PER_MS 1000000ull
#define SMALL_BODY 1024 /* DATA payloads up to this are copied into the queue */
#define PREFACE_LEN 24

#define ADD(field, n) __atomic_store_n(&(field), (field) + (n), __ATOMIC_RELAXED)

enum src { SRC_NONE, SRC_CONTENT, SRC_MEM, SRC_ECHO };
enum wait { W_NONE, W_DELAY, W_DRIP, W_STALL };

typedef struct h2stream {
    struct h2stream *prev, *next; /* live list / free list (next only) */
    int32_t id;
    uint8_t counted, status_owed, responded, req_done, too_large, bad_method;
    uint8_t head_only, src, no_eof, deferred, wait, stall_armed, peer_reset, echo;
    hb_route_req rq;
    uint64_t deadline;
    uint64_t soff;        /* content offset (SRC_CONTENT) or byte index (SRC_MEM) sent next */
    uint64_t left, avail; /* body bytes the provider still hands out / may hand out now */
    const char *mem;      /* SRC_MEM bytes */
    uint64_t body_bytes;
    uint32_t crc;
    int64_t req_cl;
    uint64_t hdr_bytes;
    char *stats_doc;
    char *ebuf; /* echo: bytes [epos, elen) received, [erd, elen) not yet handed out */
    size_t ecap, epos, erd, elen;
    size_t mlen, plen;
    char method[16];
    char stbuf[4];
    char clbuf[24];
    char jbuf[96];
    char path[PATH_MAX_LEN];
} h2stream;

/* Everything a session allocates - its own struct, its streams, and through
 * nghttp2_mem nghttp2's session, streams, frames and HPACK tables - comes
 * from one mapping of its own; freeing the session unmaps it, so the memory
 * goes back to the system whole (a thread's malloc heap keeps its top: glibc
 * trims a thread arena only past a threshold that grows). Blocks up to 1 KiB
 * come in power-of-two classes from the top down, with a free list each;
 * larger ones are cut to size from the bottom up (few: the session's own
 * tables) and reused first-fit. An idle session touches a few pages. */
#define SLAB_BYTES (512 * 1024) /* address space; pages count only once touched */
#define SLAB_HDR 16             /* before each block: its kind, and its size if not a class */
#define SLAB_CLASSES 7          /* 16 B .. 1 KiB, header included */
#define SLAB_LARGE 0xfe
#define SLAB_BIG 0xff /* from malloc: too large, or the mapping is used up */

typedef struct slab {
    char *lo, *hi; /* free space between */
    void *freel[SLAB_CLASSES];
    uint8_t *large; /* freed large blocks */
} slab;

static size_t blk_size(const uint8_t *h)
{
    size_t n;
    memcpy(&n, h + 8, sizeof n);
    return n;
}

static void *slab_malloc(size_t n, void *ud)
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
    void *p = slab_malloc(nmemb * size, ud);
    if (p) memset(p, 0, nmemb * size);
    return p;
}

static void *slab_realloc(void *p, size_t n, void *ud)
{
    if (!p) return slab_malloc(n, ud);
    uint8_t *h = (uint8_t *)p - SLAB_HDR;
    size_t cap = (h[0] >= SLAB_LARGE ? blk_size(h) : (size_t)16 << h[0]) - SLAB_HDR;
    if (n <= cap) return p;
    void *q = slab_malloc(n, ud);
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

struct hb_h2_server {
    nghttp2_session *ng;
    slab *slab;
    nghttp2_mem mem;
    hb_h2_server_config cfg;
    hb_h2_server_stats *st;
    h2stream *live, *free;
    uint32_t nlive;
    uint32_t term_code;
    uint8_t term_pending, fatal, fatal_counted;
    uint8_t timers; /* a stream may have a deadline: hb_h2_server_deadline must look */
    int iov_first, niov;
    size_t alen, qbytes;
    /* the frame boundaries of the input, followed ahead of nghttp2 so frames
     * that do no work are counted whatever their type */
    uint32_t pre_left, pay_left;
    uint8_t hlen, hdr[9];
    uint64_t frames;
    int64_t idle_tokens; /* no-work frames still allowed (HB_H2_IDLE_FRAMES_*) */
    uint64_t idle_at;    /* when idle_tokens was last refilled */
    /* the output queue (NIOV iovecs, then the bytes they point into), held
     * only while output is queued or streams are open */
    struct iovec *iov;
    char *arena;
};

static const char CT_OCTET[] = "application/octet-stream";
static const char CT_TEXT[] = "text/plain";
static const char CT_JSON[] = "application/json";

/* ---- output queue ---- */

static int room(const hb_h2_server *s, size_t bytes, int iovs)
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

static void q_iov(hb_h2_server *s, const void *p, size_t n)
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

static void q_copy(hb_h2_server *s, const void *p, size_t n)
{
    memcpy(s->arena + s->alen, p, n);
    q_iov(s, s->arena + s->alen, n);
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

/* ---- streams ---- */

static h2stream *stream_get(hb_h2_server *s, int32_t id)
{
    return nghttp2_session_get_stream_user_data(s->ng, id);
}

static h2stream *stream_new(hb_h2_server *s)
{
    h2stream *st = s->free;
    if (st) {
        s->free = st->next;
    } else {
        st = slab_malloc(sizeof *st, s->slab); /* the pool grows to the peak of live streams */
        if (!st) return NULL;
        st->ebuf = NULL;
        st->ecap = 0;
    }
    char *eb = st->ebuf;
    size_t ec = st->ecap;
    memset(st, 0, offsetof(h2stream, path));
    st->ebuf = eb;
    st->ecap = ec;
    st->req_cl = -1;
    st->prev = NULL;
    st->next = s->live;
    if (s->live) s->live->prev = st;
    s->live = st;
    s->nlive++;
    return st;
}

static void stream_release(hb_h2_server *s, h2stream *st)
{
    if (st->prev)
        st->prev->next = st->next;
    else
        s->live = st->next;
    if (st->next) st->next->prev = st->prev;
    s->nlive--;
    free(st->stats_doc);
    st->stats_doc = NULL;
    st->next = s->free;
    s->free = st;
}

static void count_status(hb_h2_server *s, h2stream *st, int status)
{
    st->responded = 1;
    if (!st->counted) return;
    st->status_owed = 0;
    ADD(s->st->by_status[status >= 0 && status < 600 ? status : 0], 1);
}

/* ---- responses ---- */

static ssize_t on_read(nghttp2_session *ng, int32_t id, uint8_t *buf, size_t length,
                       uint32_t *flags, nghttp2_data_source *src, void *user)
{
    (void)ng;
    (void)id;
    (void)buf;
    hb_h2_server *s = user;
    h2stream *st = src->ptr;
    if (st->src == SRC_ECHO) {
        size_t have = st->elen - st->erd;
        if (have == 0) {
            if (st->req_done) {
                *flags |= NGHTTP2_DATA_FLAG_EOF;
                return 0;
            }
            st->deferred = 1;
            return NGHTTP2_ERR_DEFERRED;
        }
        size_t n = have < length ? have : length;
        st->erd += n;
        *flags |= NGHTTP2_DATA_FLAG_NO_COPY;
        if (st->req_done && st->erd == st->elen) *flags |= NGHTTP2_DATA_FLAG_EOF;
        return (ssize_t)n;
    }
    if (st->avail == 0) {
        if (st->left == 0) {
            if (st->no_eof) { /* a fault that ends the connection here */
                s->term_pending = 1;
                s->term_code = NGHTTP2_INTERNAL_ERROR;
                st->deferred = 1;
                return NGHTTP2_ERR_DEFERRED;
            }
            *flags |= NGHTTP2_DATA_FLAG_EOF;
            return 0;
        }
        if (st->wait == W_STALL && !st->stall_armed) {
            st->stall_armed = 1;
            st->deadline = *s->cfg.now + st->rq.p.stall.ms * NS_PER_MS;
            s->timers = 1;
        }
        st->deferred = 1;
        return NGHTTP2_ERR_DEFERRED;
    }
    size_t n = st->avail < length ? (size_t)st->avail : length;
    st->avail -= n;
    st->left -= n;
    *flags |= NGHTTP2_DATA_FLAG_NO_COPY;
    if (st->left == 0 && !st->no_eof) *flags |= NGHTTP2_DATA_FLAG_EOF;
    return (ssize_t)n;
}

static int on_send_data(nghttp2_session *ng, nghttp2_frame *frame, const uint8_t *framehd,
                        size_t length, nghttp2_data_source *src, void *user)
{
    hb_h2_server *s = user;
    h2stream *st = src->ptr;
    size_t pad = frame->data.padlen; /* never set by this server; handled for completeness */
    /* small generated payloads are copied behind their frame header, so a burst
     * of small responses is one contiguous buffer, not two iovecs each */
    int small = st->src == SRC_CONTENT && length <= SMALL_BODY;
    int copy = st->src != SRC_CONTENT || small;
    size_t need = 9 + pad + (copy ? length : 0);
    if (!room(s, need, 4 + (int)(length / HB_CONTENT_WIN)) || s->qbytes >= BATCH)
        return NGHTTP2_ERR_WOULDBLOCK;
    q_copy(s, framehd, 9);
    if (pad) {
        uint8_t pl = (uint8_t)(pad - 1);
        q_copy(s, &pl, 1);
    }
    if (small) {
        q_copy(s, hb_content_buf() + st->soff % HB_CONTENT_PERIOD, length);
        st->soff += length;
    } else if (st->src == SRC_CONTENT) {
        const char *content = hb_content_buf();
        size_t n = length;
        while (n) {
            size_t take = n < HB_CONTENT_WIN ? n : HB_CONTENT_WIN;
            q_iov(s, content + st->soff % HB_CONTENT_PERIOD, take);
            st->soff += take;
            n -= take;
        }
    } else if (st->src == SRC_MEM) {
        q_copy(s, st->mem + st->soff, length);
        st->soff += length;
    } else {
        q_copy(s, st->ebuf + st->epos, length);
        st->epos += length;
        (void)nghttp2_session_consume_stream(ng, st->id, length);
    }
    if (pad > 1) {
        memset(s->arena + s->alen, 0, pad - 1);
        q_iov(s, s->arena + s->alen, pad - 1);
        s->alen += pad - 1;
    }
    return 0;
}

#define NV(n, v, vl)                                                                               \
    {                                                                                              \
        (uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, (vl),                                       \
            NGHTTP2_NV_FLAG_NO_COPY_NAME | NGHTTP2_NV_FLAG_NO_COPY_VALUE                           \
    }

/* Submit the response head; a body of `src` kind follows unless body is 0.
 * cl < 0: no content-length. */
static void respond(hb_h2_server *s, h2stream *st, int status, const char *ct, int64_t cl, int body)
{
    if (status < 100 || status > 999) status = 500;
    st->stbuf[0] = (char)('0' + status / 100);
    st->stbuf[1] = (char)('0' + status / 10 % 10);
    st->stbuf[2] = (char)('0' + status % 10);
    size_t cll = 0;
    if (cl >= 0) { /* decimal digits, without snprintf on every response */
        char tmp[24];
        uint64_t v = (uint64_t)cl;
        do {
            tmp[cll++] = (char)('0' + v % 10);
            v /= 10;
        } while (v);
        for (size_t i = 0; i < cll; i++)
            st->clbuf[i] = tmp[cll - 1 - i];
    }
    nghttp2_nv nva[6];
    size_t n = 0;
    nva[n++] = (nghttp2_nv)NV(":status", st->stbuf, 3);
    nva[n++] = (nghttp2_nv)NV("server", "httpbench", 9);
    if (s->cfg.date) nva[n++] = (nghttp2_nv)NV("date", s->cfg.date, 29);
    if (s->cfg.alt_svc)
        nva[n++] = (nghttp2_nv)NV("alt-svc", s->cfg.alt_svc, strlen(s->cfg.alt_svc));
    nva[n++] = (nghttp2_nv)NV("content-type", ct, strlen(ct));
    if (cl >= 0) nva[n++] = (nghttp2_nv)NV("content-length", st->clbuf, cll);
    nghttp2_data_provider prd;
    prd.source.ptr = st;
    prd.read_callback = on_read;
    int with_body = body && !st->head_only;
    if (nghttp2_submit_response(s->ng, st->id, nva, n, with_body ? &prd : NULL) != 0) {
        (void)nghttp2_submit_rst_stream(s->ng, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_INTERNAL_ERROR);
        count_status(s, st, 0);
        return;
    }
    count_status(s, st, status);
}

static void respond_mem(hb_h2_server *s, h2stream *st, int status, const char *ct, const char *body,
                        size_t len)
{
    int nobody = status == 204 || status == 304;
    st->src = SRC_MEM;
    st->mem = body;
    st->soff = 0;
    st->left = st->avail = nobody ? 0 : len;
    respond(s, st, status, ct, nobody ? -1 : (int64_t)len, !nobody && len > 0);
}

#define RESPOND_LIT(s, st, code, lit)                                                              \
    respond_mem((s), (st), (code), CT_TEXT, (lit), sizeof(lit) - 1)

/* Generated content [0, n): `announce` is the content-length (-1: none). */
static void respond_content(hb_h2_server *s, h2stream *st, int64_t announce, uint64_t n,
                            uint64_t avail)
{
    st->src = SRC_CONTENT;
    st->soff = 0;
    st->left = n;
    st->avail = avail;
    respond(s, st, 200, CT_OCTET, announce, n > 0 || st->no_eof);
}

static void respond_stats(hb_h2_server *s, h2stream *st)
{
    size_t len = 0;
    char *doc = s->cfg.stats_json ? s->cfg.stats_json(s->cfg.stats_arg, &len) : NULL;
    if (!doc) {
        RESPOND_LIT(s, st, 503, "stats unavailable\n");
        return;
    }
    st->stats_doc = doc;
    respond_mem(s, st, 200, CT_JSON, doc, len);
}

static void stream_resume(hb_h2_server *s, h2stream *st)
{
    if (!st->deferred) return;
    st->deferred = 0;
    (void)nghttp2_session_resume_data(s->ng, st->id);
}

/* The request is complete: answer it (the HTTP/1.1 side's finish_request). */
static void finish(hb_h2_server *s, h2stream *st)
{
    const hb_route_req *rq = &st->rq;
    uint64_t now = *s->cfg.now;
    if (st->responded || st->wait == W_DELAY) return;
    if (rq->stats_page) {
        if (rq->status == 200)
            respond_stats(s, st);
        else
            RESPOND_LIT(s, st, 405, "method not allowed\n");
        return;
    }
    switch (rq->status) {
    case 400:
        RESPOND_LIT(s, st, 400, "bad parameter\n");
        return;
    case 404:
        RESPOND_LIT(s, st, 404, "not found\n");
        return;
    case 405:
        RESPOND_LIT(s, st, 405, "method not allowed\n");
        return;
    default:
        break;
    }
    switch (rq->route) {
    case HB_ROUTE_ROOT:
        RESPOND_LIT(s, st, 200, "httpbench test server\n");
        break;
    case HB_ROUTE_BYTES:
        respond_content(s, st, (int64_t)rq->p.bytes.n, rq->p.bytes.n, rq->p.bytes.n);
        break;
    case HB_ROUTE_CHUNKED: /* h2 has no chunked coding: plain DATA, no content-length */
        respond_content(s, st, -1, rq->p.chunked.n, rq->p.chunked.n);
        break;
    case HB_ROUTE_SINK: {
        int n = snprintf(st->jbuf, sizeof st->jbuf, "{\"bytes\": %llu, \"crc32\": \"%08x\"}",
                         (unsigned long long)st->body_bytes, st->crc);
        respond_mem(s, st, 200, CT_JSON, st->jbuf, (size_t)n);
        break;
    }
    case HB_ROUTE_DELAY:
        if (rq->p.delay.ms == 0) {
            respond_content(s, st, (int64_t)rq->p.delay.bytes, rq->p.delay.bytes,
                            rq->p.delay.bytes);
            break;
        }
        st->wait = W_DELAY;
        st->deadline = now + rq->p.delay.ms * NS_PER_MS;
        s->timers = 1;
        break;
    case HB_ROUTE_STATUS:
        respond_mem(s, st, rq->p.status.code, CT_TEXT, "", 0);
        break;
    case HB_ROUTE_DRIP:
        if (rq->p.drip.n && !st->head_only) {
            st->wait = W_DRIP;
            st->deadline = now + rq->p.drip.interval_ms * NS_PER_MS;
            s->timers = 1;
        }
        respond_content(s, st, (int64_t)rq->p.drip.n, rq->p.drip.n, 0);
        break;
    case HB_ROUTE_CLOSE_AFTER_HEADERS:
        st->no_eof = 1;
        respond_content(s, st, (int64_t)rq->p.fault.bytes, 0, 0);
        break;
    case HB_ROUTE_CLOSE_MID_BODY:
        st->no_eof = 1;
        respond_content(s, st, (int64_t)rq->p.fault.bytes, rq->p.fault.bytes / 2,
                        rq->p.fault.bytes / 2);
        break;
    case HB_ROUTE_RESET:
        count_status(s, st, 0);
        (void)nghttp2_submit_rst_stream(s->ng, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_INTERNAL_ERROR);
        break;
    case HB_ROUTE_STALL:
        st->wait = W_STALL;
        respond_content(s, st, (int64_t)rq->p.stall.bytes, rq->p.stall.bytes,
                        rq->p.stall.bytes / 2);
        break;
    default:
        RESPOND_LIT(s, st, 404, "not found\n");
        break;
    }
}

/* The request head is complete: route and count it; answer what answers
 * before the body (echo, early response, an oversized head). */
static void on_request(hb_h2_server *s, h2stream *st)
{
    hb_route_req *rq = &st->rq;
    if (st->too_large || st->bad_method) {
        st->counted = 1;
        st->status_owed = 1;
        ADD(s->st->by_route[HB_ROUTE_BAD_REQUEST], 1);
        if (st->too_large)
            RESPOND_LIT(s, st, 431, "request head too large\n");
        else
            RESPOND_LIT(s, st, 400, "bad request\n");
        return;
    }
    hb_route_parse(st->method, st->mlen, st->path, st->plen, rq);
    st->head_only = (uint8_t)(st->mlen == 4 && memcmp(st->method, "HEAD", 4) == 0);
    if (!rq->stats_page) {
        st->counted = 1;
        st->status_owed = 1;
        ADD(s->st->by_route[rq->route], 1);
    }
    if (rq->status != 200) return;
    if (rq->route == HB_ROUTE_ECHO) {
        st->echo = 1;
        st->src = SRC_ECHO;
        respond(s, st, 200, CT_OCTET, st->req_cl, 1);
    } else if (rq->route == HB_ROUTE_EARLY_RESPONSE) {
        /* answered before the body; nghttp2 then resets the upload with NO_ERROR */
        respond_mem(s, st, rq->p.early.status, CT_TEXT, "early response\n", 15);
    }
}

/* ---- nghttp2 callbacks ---- */

static int on_begin_headers(nghttp2_session *ng, const nghttp2_frame *frame, void *user)
{
    hb_h2_server *s = user;
    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
    ADD(s->st->streams, 1);
    h2stream *st = s->nlive < s->cfg.max_concurrent_streams + 16u ? stream_new(s) : NULL;
    if (!st) {
        (void)nghttp2_submit_rst_stream(ng, NGHTTP2_FLAG_NONE, frame->hd.stream_id,
                                        NGHTTP2_REFUSED_STREAM);
        return 0;
    }
    st->id = frame->hd.stream_id;
    if (nghttp2_session_set_stream_user_data(ng, st->id, st) != 0) {
        stream_release(s, st);
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    }
    return 0;
}

static int on_header(nghttp2_session *ng, const nghttp2_frame *frame, const uint8_t *name,
                     size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
                     void *user)
{
    (void)flags;
    hb_h2_server *s = user;
    if (frame->hd.type != NGHTTP2_HEADERS) return 0;
    h2stream *st = nghttp2_session_get_stream_user_data(ng, frame->hd.stream_id);
    if (!st) return 0;
    st->hdr_bytes += namelen + valuelen + 32;
    if (st->hdr_bytes > s->cfg.max_header_list) {
        st->too_large = 1;
        if (st->hdr_bytes > (uint64_t)s->cfg.max_header_list * BOMB_FACTOR) {
            s->term_code = NGHTTP2_ENHANCE_YOUR_CALM; /* a header bomb: drop the connection */
            return NGHTTP2_ERR_CALLBACK_FAILURE;
        }
        return 0;
    }
    if (frame->headers.cat != NGHTTP2_HCAT_REQUEST) return 0; /* trailers: ignored */
    if (namelen == 7 && memcmp(name, ":method", 7) == 0) {
        if (valuelen >= sizeof st->method) {
            st->bad_method = 1;
            return 0;
        }
        memcpy(st->method, value, valuelen);
        st->mlen = valuelen;
    } else if (namelen == 5 && memcmp(name, ":path", 5) == 0) {
        if (valuelen > PATH_MAX_LEN) {
            st->too_large = 1;
            return 0;
        }
        memcpy(st->path, value, valuelen);
        st->plen = valuelen;
    } else if (namelen == 14 && memcmp(name, "content-length", 14) == 0) {
        int64_t v = 0;
        for (size_t i = 0; i < valuelen && v < ((int64_t)1 << 50); i++)
            v = v * 10 + (value[i] - '0'); /* nghttp2 checked the digits */
        st->req_cl = v;
    }
    return 0;
}

static void req_end(hb_h2_server *s, h2stream *st)
{
    st->req_done = 1;
    if (st->echo) {
        stream_resume(s, st);
        return;
    }
    finish(s, st);
}

static int on_frame_recv(nghttp2_session *ng, const nghttp2_frame *frame, void *user)
{
    hb_h2_server *s = user;
    h2stream *st = frame->hd.stream_id ? stream_get(s, frame->hd.stream_id) : NULL;
    (void)ng;
    switch (frame->hd.type) {
    case NGHTTP2_HEADERS:
        if (!st) break;
        if (frame->headers.cat == NGHTTP2_HCAT_REQUEST) on_request(s, st);
        if (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) req_end(s, st);
        break;
    case NGHTTP2_DATA:
        if (st && (frame->hd.flags & NGHTTP2_FLAG_END_STREAM)) req_end(s, st);
        break;
    case NGHTTP2_RST_STREAM:
        ADD(s->st->rst_recv, 1);
        if (st) st->peer_reset = 1;
        break;
    default:
        break;
    }
    return 0;
}

static int on_data_chunk(nghttp2_session *ng, uint8_t flags, int32_t id, const uint8_t *data,
                         size_t len, void *user)
{
    (void)flags;
    hb_h2_server *s = user;
    ADD(s->st->body_in, len);
    h2stream *st = stream_get(s, id);
    if (st && st->echo && !st->head_only) {
        if (st->elen + len > st->ecap) {
            if (st->epos) { /* only [epos, elen) is still needed */
                memmove(st->ebuf, st->ebuf + st->epos, st->elen - st->epos);
                st->elen -= st->epos;
                st->erd -= st->epos;
                st->epos = 0;
            }
            if (st->elen + len > st->ecap) {
                size_t cap = st->ecap ? st->ecap : 16384;
                while (cap < st->elen + len)
                    cap *= 2;
                char *nb = realloc(st->ebuf, cap);
                if (!nb) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
                st->ebuf = nb;
                st->ecap = cap;
            }
        }
        memcpy(st->ebuf + st->elen, data, len);
        st->elen += len;
        st->body_bytes += len;
        (void)nghttp2_session_consume_connection(ng, len); /* the stream's: once echoed */
        stream_resume(s, st);
        return 0;
    }
    if (st) {
        st->body_bytes += len;
        if (st->rq.route == HB_ROUTE_SINK) st->crc = hb_crc32(st->crc, data, len);
    }
    (void)nghttp2_session_consume(ng, id, len);
    return 0;
}

static int on_stream_close(nghttp2_session *ng, int32_t id, uint32_t code, void *user)
{
    (void)code;
    hb_h2_server *s = user;
    h2stream *st = stream_get(s, id);
    if (!st) return 0;
    (void)nghttp2_session_set_stream_user_data(ng, id, NULL);
    if (st->status_owed) {
        ADD(s->st->by_status[0], 1);
        if (st->peer_reset) ADD(s->st->client_gone, 1);
        st->status_owed = 0;
    }
    stream_release(s, st);
    return 0;
}

/* Error codes that mean the peer broke the protocol (not our faults or
 * refusals). */
static int peer_fault(uint32_t code)
{
    switch (code) {
    case NGHTTP2_PROTOCOL_ERROR:
    case NGHTTP2_FLOW_CONTROL_ERROR:
    case NGHTTP2_SETTINGS_TIMEOUT:
    case NGHTTP2_STREAM_CLOSED:
    case NGHTTP2_FRAME_SIZE_ERROR:
    case NGHTTP2_COMPRESSION_ERROR:
    case NGHTTP2_ENHANCE_YOUR_CALM:
        return 1;
    default:
        return 0;
    }
}

static int on_frame_send(nghttp2_session *ng, const nghttp2_frame *frame, void *user)
{
    (void)ng;
    hb_h2_server *s = user;
    if (frame->hd.type == NGHTTP2_RST_STREAM) {
        ADD(s->st->rst_sent, 1);
        if (frame->rst_stream.error_code == NGHTTP2_REFUSED_STREAM) ADD(s->st->refused, 1);
        if (peer_fault(frame->rst_stream.error_code)) ADD(s->st->protocol_errors, 1);
    } else if (frame->hd.type == NGHTTP2_GOAWAY) {
        ADD(s->st->goaway_sent, 1);
        if (peer_fault(frame->goaway.error_code) && !s->fatal_counted)
            ADD(s->st->protocol_errors, 1);
    }
    return 0;
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
    s->mem = (nghttp2_mem){sl, slab_malloc, slab_free, slab_calloc, slab_realloc};
    s->cfg = *cfg;
    s->st = cfg->stats;
    s->pre_left = PREFACE_LEN;
    s->idle_tokens = HB_H2_IDLE_FRAMES_BURST;
    s->idle_at = *cfg->now;
    nghttp2_session_callbacks *cb = NULL;
    nghttp2_option *opt = NULL;
    int rc = HB_E_NOMEM;
    if (nghttp2_session_callbacks_new(&cb) != 0 || nghttp2_option_new(&opt) != 0) goto fail;
    nghttp2_session_callbacks_set_on_begin_headers_callback(cb, on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame_recv);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data_chunk);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_stream_close);
    nghttp2_session_callbacks_set_on_frame_send_callback(cb, on_frame_send);
    nghttp2_session_callbacks_set_send_data_callback(cb, on_send_data);
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
        stream_release(s, st);
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
        if (!room(s, ARENA_LOW, 4) || s->qbytes >= BATCH) break;
        const uint8_t *d;
        ssize_t n = nghttp2_session_mem_send(s->ng, &d);
        if (n < 0) return -1;
        if (n == 0) {
            if (s->term_pending) continue;
            break;
        }
        q_copy(s, d, (size_t)n);
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
            respond_content(s, st, (int64_t)rq->p.delay.bytes, rq->p.delay.bytes,
                            rq->p.delay.bytes);
            break;
        case W_DRIP: {
            uint64_t k = st->left - st->avail;
            if (k > rq->p.drip.chunk) k = rq->p.drip.chunk;
            st->avail += k;
            if (st->left > st->avail) st->deadline = now + rq->p.drip.interval_ms * NS_PER_MS;
            stream_resume(s, st);
            break;
        }
        case W_STALL:
            st->avail = st->left;
            stream_resume(s, st);
            break;
        default:
            break;
        }
    }
}

#endif /* HB_NO_NGHTTP2 */
