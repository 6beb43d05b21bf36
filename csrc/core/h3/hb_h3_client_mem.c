/* hb_h3_client_mem.c - the allocator ngtcp2 gets from an
 * hb_h3_client (see hb_h3_client_int.h): per power-of-two free lists. */
#include "h3/hb_h3_client_int.h"

#ifndef HB_NO_H3

void *hb__h3_pool_malloc(size_t size, void *ud)
{
    pool *pl = ud;
    size_t need = size + sizeof(blk);
    if (need < size) return NULL;
    unsigned k = POOL_MIN_SHIFT;
    while (k <= POOL_MAX_SHIFT && ((size_t)1 << k) < need)
        k++;
    blk *b;
    if (k > POOL_MAX_SHIFT) {
        b = malloc(need);
        if (!b) return NULL;
        b->h.cap = size;
    } else if ((b = pl->free[k - POOL_MIN_SHIFT]) != NULL) {
        pl->free[k - POOL_MIN_SHIFT] = b->h.next;
    } else {
        b = malloc((size_t)1 << k);
        if (!b) return NULL;
        b->h.cap = ((size_t)1 << k) - sizeof(blk);
    }
    return b + 1;
}

void hb__h3_pool_free(void *ptr, void *ud)
{
    pool *pl = ud;
    if (!ptr) return;
    blk *b = (blk *)ptr - 1;
    size_t whole = b->h.cap + sizeof(blk);
    if (whole > ((size_t)1 << POOL_MAX_SHIFT)) {
        free(b);
        return;
    }
    unsigned k = POOL_MIN_SHIFT;
    while (((size_t)1 << k) < whole)
        k++;
    b->h.next = pl->free[k - POOL_MIN_SHIFT];
    pl->free[k - POOL_MIN_SHIFT] = b;
}

void *hb__h3_pool_calloc(size_t n, size_t size, void *ud)
{
    if (size && n > SIZE_MAX / size) return NULL;
    void *p = hb__h3_pool_malloc(n * size, ud);
    if (p) memset(p, 0, n * size);
    return p;
}

void *hb__h3_pool_realloc(void *ptr, size_t size, void *ud)
{
    if (!ptr) return hb__h3_pool_malloc(size, ud);
    blk *b = (blk *)ptr - 1;
    if (size <= b->h.cap) return ptr;
    void *n = hb__h3_pool_malloc(size, ud);
    if (!n) return NULL;
    memcpy(n, ptr, b->h.cap);
    hb__h3_pool_free(ptr, ud);
    return n;
}

void hb__h3_pool_destroy(pool *pl)
{
    for (int i = 0; i < POOL_CLASSES; i++) {
        while (pl->free[i]) {
            blk *b = pl->free[i];
            pl->free[i] = b->h.next;
            free(b);
        }
    }
}

#endif /* HB_NO_H3 */
