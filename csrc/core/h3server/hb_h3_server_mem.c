/* hb_h3_server_mem.c - the allocator the HTTP/3 server gives ngtcp2:
 * small blocks from per-size-class free lists (a request's stream state reuses
 * the blocks of the requests before it), large ones as their own pages, large
 * zeroed ones from malloc.
 *
 * Size classes, of the usable bytes (the 16-byte header comes on top): 16-byte
 * steps up to 64, then four per doubling (at most 25 % more than asked) up to
 * MEM_SMALL_MAX. ngtcp2 asks for powers of two (32, 64, 128, 256, 512, 2048)
 * which fit exactly; with one class per power of two for the whole block, the
 * header pushed each into the next one (the 2048-byte ACK ring took 4 KiB).
 *
 * Why pages: ngtcp2 allocates per connection object arenas of 64 objects and
 * key-sorted-list arenas of 8 blocks (4-12 KiB each) of which an idle
 * connection uses the first few hundred bytes. From malloc's heap, recycled
 * memory, those arenas are resident whole; mapped anonymous pages are resident
 * only once touched, so an idle connection pays for the part it uses. Freed
 * mappings wait in a cache per page count, MEM_CACHE_BYTES in all (no syscall
 * for a request or a handshake that takes and returns them), which
 * hb__h3_mem_trim empties when the endpoint goes idle.
 *
 * Why malloc for large zeroed blocks: ngtcp2 asks calloc for objects it uses
 * whole (the connection itself, 8,352 bytes in 0.12), never for an arena; as
 * pages the connection took three, all touched (12 KiB). */
#include "h3server/hb_h3_server_int.h"

#ifndef HB_NO_H3

#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>

#define PAGE 4096u
#define CAP_HEAP ((size_t)1) /* in cap: a large zeroed block from malloc (caps are even) */

/* 16 bytes, malloc's alignment here (max_align_t would make it 32) */
typedef union mblk {
    struct {
        size_t cap; /* usable bytes after the header (| CAP_HEAP) */
        union mblk *next;
    } h;
    _Alignas(16) unsigned char align[16];
} mblk;
_Static_assert(sizeof(mblk) == 16 && _Alignof(mblk) == 16, "a block's header is 16 bytes");

/* n: usable bytes, 0..MEM_SMALL_MAX */
static inline unsigned size_class(size_t n)
{
    if (n <= 64) return n ? (unsigned)((n - 1) >> 4) : 0;
    unsigned k = 63u - (unsigned)__builtin_clzll((unsigned long long)(n - 1));
    return 4 + (k - 6) * 4 + (unsigned)(((n - 1) >> (k - 2)) & 3);
}

static inline size_t class_bytes(unsigned k)
{
    if (k < 4) return (size_t)(k + 1) << 4;
    unsigned shift = (k - 4) / 4 + 4;
    return (size_t)(5 + (k - 4) % 4) << shift;
}

/* *fresh: 1 when the pages are new (zero, none resident yet) */
static void *pages_get(hb__h3_mem *m, size_t whole, int *fresh)
{
    size_t np = (whole + PAGE - 1) / PAGE;
    mblk *b;
    *fresh = 0;
    if (np <= MEM_CACHE_PAGES && (b = m->pages[np - 1]) != NULL) {
        m->pages[np - 1] = b->h.next;
        m->cached -= np * PAGE;
        return b;
    }
    *fresh = 1;
    void *p = mmap(NULL, np * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return NULL;
    b = p;
    b->h.cap = np * PAGE - sizeof(mblk);
    return b;
}

static void pages_put(hb__h3_mem *m, mblk *b)
{
    size_t np = (b->h.cap + sizeof(mblk)) / PAGE;
    if (np <= MEM_CACHE_PAGES && m->cached + np * PAGE <= MEM_CACHE_BYTES) {
        b->h.next = m->pages[np - 1];
        m->pages[np - 1] = b;
        m->cached += np * PAGE;
        return;
    }
    (void)munmap(b, np * PAGE); /* fails only for a bad address: nothing to do then */
}

/* ---- HB_H3_MEMSTAT: a live block's h.next holds its requested size ---- */

enum { K_CLASS, K_PAGES, K_HEAP };

static hb__h3_memsize *stat_slot(hb__h3_memstat *d, size_t size)
{
    size_t key = size + 1, i = (key * 0x9e3779b97f4a7c15u) >> 55;
    for (size_t k = 0; k < MEMSTAT_SIZES; k++, i = (i + 1) % MEMSTAT_SIZES) {
        if (d->by[i].size == key) return &d->by[i];
        if (d->by[i].size == 0) {
            d->by[i].size = key;
            return &d->by[i];
        }
    }
    return NULL; /* more distinct sizes than slots: not counted */
}

static int kind_of(const mblk *b)
{
    if (b->h.cap & CAP_HEAP) return K_HEAP;
    return b->h.cap > MEM_SMALL_MAX ? K_PAGES : K_CLASS;
}

static void stat_get(hb__h3_mem *m, mblk *b, size_t size)
{
    hb__h3_memstat *d = m->dbg;
    hb__h3_memsize *e = stat_slot(d, size);
    int kind = kind_of(b);
    if (e) {
        e->live++;
        e->kind = (uint8_t)kind;
        e->held = (b->h.cap & ~CAP_HEAP) + sizeof(mblk);
    }
    b->h.next = (mblk *)(uintptr_t)size;
    if (kind != K_PAGES) return;
    if (d->nmapped == d->capmapped) {
        size_t cap = d->capmapped ? 2 * d->capmapped : 256;
        void **v = realloc(d->mapped, cap * sizeof *v);
        if (!v) return;
        d->mapped = v;
        d->capmapped = cap;
    }
    d->mapped[d->nmapped++] = b;
}

static void stat_put(hb__h3_mem *m, mblk *b)
{
    hb__h3_memstat *d = m->dbg;
    hb__h3_memsize *e = stat_slot(d, (uintptr_t)b->h.next);
    if (e && e->live) e->live--;
    if (kind_of(b) != K_PAGES) return;
    for (size_t i = d->nmapped; i-- > 0;) {
        if (d->mapped[i] == b) {
            d->mapped[i] = d->mapped[--d->nmapped];
            break;
        }
    }
}

int hb__h3_memstat_init(hb__h3_mem *m)
{
    const char *path = getenv("HB_H3_MEMSTAT");
    if (!path || !*path) return 0;
    m->dbg = calloc(1, sizeof *m->dbg);
    if (!m->dbg) return -1;
    m->dbg->out = fopen(path, "a");
    if (!m->dbg->out) {
        free(m->dbg);
        m->dbg = NULL;
        return -1;
    }
    m->dbg->armed = 1;
    return 0;
}

void hb__h3_memstat_free(hb__h3_mem *m)
{
    if (!m->dbg) return;
    (void)fclose(m->dbg->out); /* a report already flushed */
    free(m->dbg->mapped);
    free(m->dbg);
    m->dbg = NULL;
}

/* resident bytes of the pages [p, p + len) touches (malloc'd memory: its pages, which
 * it may share with neighbours) */
static size_t resident(void *p, size_t len)
{
    unsigned char v[MEM_CACHE_PAGES * 4];
    uintptr_t lo = (uintptr_t)p / PAGE * PAGE, hi = ((uintptr_t)p + len + PAGE - 1) / PAGE * PAGE;
    size_t np = (hi - lo) / PAGE, r = 0;
    if (np > sizeof v || mincore((void *)lo, hi - lo, v) != 0) return 0;
    for (size_t i = 0; i < np; i++)
        r += v[i] & 1;
    return r * PAGE;
}

void hb__h3_memstat_close(hb_h3_server *s)
{
    hb__h3_mem *m = s->mpool;
    hb__h3_memstat *d = m->dbg;
    if (!d) return;
    int armed = d->armed;
    d->armed = s->nconns == 1; /* the last one goes: the next wave is reported */
    if (!armed) return;
    FILE *f = d->out;
#if defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 33)
    struct mallinfo2 mi = mallinfo2();
#else
    struct {
        size_t uordblks, hblkhd;
    } mi = {0, 0}; /* no mallinfo2: the report's malloc figure is 0 */
#endif
    fprintf(f,
            "memstat conns %d h3conn %zu h3stream %zu free_slots %u slot_hbuf %zu cid_table %zu "
            "malloc_inuse %zu\n",
            s->nconns, sizeof(h3conn), sizeof(h3stream), s->nsfree,
            (size_t)(s->cfg.max_header_list ? s->cfg.max_header_list : 1), s->tcap * sizeof(cident),
            mi.uordblks + mi.hblkhd); /* malloc in use, heap and mapped */
    size_t pool_free = 0, cached_res = 0;
    for (unsigned k = 0; k < MEM_CLASSES; k++)
        for (mblk *b = m->free[k]; b; b = b->h.next)
            pool_free += sizeof(mblk) + class_bytes(k);
    for (unsigned i = 0; i < MEM_CACHE_PAGES; i++)
        for (mblk *b = m->pages[i]; b; b = b->h.next)
            cached_res += resident(b, (size_t)(i + 1) * PAGE);
    size_t slot_res = 0, hbuf_res = 0;
    for (h3stream *st = s->sfree; st; st = st->next) {
        slot_res += resident(st, sizeof *st);
        hbuf_res += resident(st->hbuf, s->cfg.max_header_list ? s->cfg.max_header_list : 1);
    }
    fprintf(f,
            "pool_free_blocks %zu cached_mappings %zu cached_resident %zu free_slots_resident %zu "
            "free_hbuf_resident %zu\n",
            pool_free, m->cached, cached_res, slot_res, hbuf_res);
    /* per requested size: how (class / pages / heap), live blocks, bytes asked for, bytes
     * held (class, pages or the malloc'd block), resident (pages: mincore; else = held) */
    static const char *const KIND[] = {"class", "pages", "heap"};
    for (size_t i = 0; i < MEMSTAT_SIZES; i++) {
        hb__h3_memsize *e = &d->by[i];
        if (!e->size || !e->live) continue;
        size_t size = e->size - 1, res = e->held * e->live;
        if (e->kind == K_PAGES) {
            res = 0;
            for (size_t j = 0; j < d->nmapped; j++) {
                mblk *b = d->mapped[j];
                if ((uintptr_t)b->h.next == size) res += resident(b, b->h.cap + sizeof(mblk));
            }
        }
        fprintf(f, "size %zu %s live %zu asked %zu held %zu resident %zu\n", size, KIND[e->kind],
                e->live, size * e->live, e->held * e->live, res);
    }
    fprintf(f, "end\n");
    fflush(f);
}

/* ---- the hooks ---- */

void *hb__h3_mem_malloc(size_t size, void *ud)
{
    hb__h3_mem *m = ud;
    size_t need = size + sizeof(mblk);
    if (need < size) return NULL;
    mblk *b;
    if (size > MEM_SMALL_MAX) {
        int fresh;
        b = pages_get(m, need, &fresh);
        if (!b) return NULL;
    } else {
        unsigned k = size_class(size);
        if ((b = m->free[k]) != NULL) {
            m->free[k] = b->h.next;
        } else {
            size_t cap = class_bytes(k);
            b = malloc(sizeof(mblk) + cap);
            if (!b) return NULL;
            b->h.cap = cap;
        }
    }
    if (m->dbg) stat_get(m, b, size);
    return b + 1;
}

void hb__h3_mem_free(void *ptr, void *ud)
{
    hb__h3_mem *m = ud;
    if (!ptr) return;
    mblk *b = (mblk *)ptr - 1;
    if (m->dbg) stat_put(m, b);
    size_t cap = b->h.cap;
    if (cap & CAP_HEAP) {
        free(b);
        return;
    }
    if (cap > MEM_SMALL_MAX) {
        pages_put(m, b);
        return;
    }
    unsigned k = size_class(cap);
    b->h.next = m->free[k];
    m->free[k] = b;
}

void *hb__h3_mem_calloc(size_t n, size_t size, void *ud)
{
    hb__h3_mem *m = ud;
    if (size && n > SIZE_MAX / size) return NULL;
    size_t len = n * size;
    if (len <= MEM_SMALL_MAX) {
        void *p = hb__h3_mem_malloc(len, ud);
        if (p) memset(p, 0, len);
        return p;
    }
    size_t cap = (len + 15) & ~(size_t)15;
    if (cap < len || cap + sizeof(mblk) < cap) return NULL;
    mblk *b = calloc(1, sizeof(mblk) + cap);
    if (!b) return NULL;
    b->h.cap = cap | CAP_HEAP;
    if (m->dbg) stat_get(m, b, len);
    return b + 1;
}

void *hb__h3_mem_realloc(void *ptr, size_t size, void *ud)
{
    if (!ptr) return hb__h3_mem_malloc(size, ud);
    mblk *b = (mblk *)ptr - 1;
    size_t cap = b->h.cap & ~CAP_HEAP;
    hb__h3_mem *m = ud;
    if (size <= cap) {
        if (m->dbg) {
            stat_put(m, b);
            stat_get(m, b, size);
        }
        return ptr;
    }
    void *n = hb__h3_mem_malloc(size, ud);
    if (!n) return NULL;
    memcpy(n, ptr, cap);
    hb__h3_mem_free(ptr, ud);
    return n;
}

void hb__h3_mem_trim(hb__h3_mem *m)
{
    for (unsigned i = 0; i < MEM_CLASSES; i++) {
        while (m->free[i]) {
            mblk *b = m->free[i];
            m->free[i] = b->h.next;
            free(b);
        }
    }
    for (unsigned i = 0; i < MEM_CACHE_PAGES; i++) {
        while (m->pages[i]) {
            mblk *b = m->pages[i];
            m->pages[i] = b->h.next;
            (void)munmap(b, (b->h.cap + sizeof(mblk)));
        }
    }
    m->cached = 0;
}

#else
typedef int hb__h3_server_mem_unused;
#endif
