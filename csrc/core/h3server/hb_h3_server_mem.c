/* hb_h3_server_mem.c - the allocator the HTTP/3 server gives ngtcp2:
 * small blocks from per-power-of-two free lists (a request's stream
 * state reuses the blocks of the requests before it), large ones as their own
 * pages.
 *
 * Why pages: the libraries allocate per connection object arenas of 64 objects
 * and key-sorted-list arenas of 8..16 blocks (4-44 KiB each) of which an idle
 * connection uses the first few hundred bytes. From malloc's heap, recycled
 * memory, those arenas are resident whole; mapped anonymous pages are resident
 * only once touched, so an idle connection pays for the part it uses. Freed
 * mappings wait in a cache per page count, MEM_CACHE_BYTES in all (no syscall
 * for a request or a handshake that takes and returns them), which
 * hb__h3_mem_trim empties when the endpoint goes idle. */
#include "h3server/hb_h3_server_int.h"

#ifndef HB_NO_H3

#include <sys/mman.h>
#include <unistd.h>

#define PAGE 4096u

typedef union mblk {
    struct {
        size_t cap; /* usable bytes after the header */
        union mblk *next;
    } h;
    max_align_t align;
} mblk;

static unsigned size_class(size_t whole)
{
    unsigned k = MEM_MIN_SHIFT;
    while (((size_t)1 << k) < whole)
        k++;
    return k - MEM_MIN_SHIFT;
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

void *hb__h3_mem_malloc(size_t size, void *ud)
{
    hb__h3_mem *m = ud;
    size_t need = size + sizeof(mblk);
    if (need < size) return NULL;
    mblk *b;
    if (need > ((size_t)1 << MEM_MAX_SHIFT)) {
        int fresh;
        b = pages_get(m, need, &fresh);
        return b ? b + 1 : NULL;
    }
    unsigned k = size_class(need);
    if ((b = m->free[k]) != NULL) {
        m->free[k] = b->h.next;
    } else {
        b = malloc((size_t)1 << (k + MEM_MIN_SHIFT));
        if (!b) return NULL;
        b->h.cap = ((size_t)1 << (k + MEM_MIN_SHIFT)) - sizeof(mblk);
    }
    return b + 1;
}

void hb__h3_mem_free(void *ptr, void *ud)
{
    hb__h3_mem *m = ud;
    if (!ptr) return;
    mblk *b = (mblk *)ptr - 1;
    size_t whole = b->h.cap + sizeof(mblk);
    if (whole > ((size_t)1 << MEM_MAX_SHIFT)) {
        pages_put(m, b);
        return;
    }
    unsigned k = size_class(whole);
    b->h.next = m->free[k];
    m->free[k] = b;
}

void *hb__h3_mem_calloc(size_t n, size_t size, void *ud)
{
    if (size && n > SIZE_MAX / size) return NULL;
    size_t len = n * size;
    if (len + sizeof(mblk) > ((size_t)1 << MEM_MAX_SHIFT) && len + sizeof(mblk) > len) {
        int fresh;
        mblk *b = pages_get(ud, len + sizeof(mblk), &fresh);
        if (!b) return NULL;
        /* new pages are zero already: writing them would make them all resident */
        if (!fresh) memset(b + 1, 0, len);
        return b + 1;
    }
    void *p = hb__h3_mem_malloc(len, ud);
    if (p) memset(p, 0, len);
    return p;
}

void *hb__h3_mem_realloc(void *ptr, size_t size, void *ud)
{
    if (!ptr) return hb__h3_mem_malloc(size, ud);
    mblk *b = (mblk *)ptr - 1;
    if (size <= b->h.cap) return ptr;
    void *n = hb__h3_mem_malloc(size, ud);
    if (!n) return NULL;
    memcpy(n, ptr, b->h.cap);
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
