/* measure_alloc.c - measure()'s allocation hooks: wrappers around the RAW,
 * MEM and OBJ allocators that count while armed (see measure.c's header for
 * the design, measure_int.h for the files). */
#include "measure_int.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* ---- allocation hooks ---- */

/* A hook layer wraps one domain's allocator as found when it was installed.
 * Layers are never freed or rewired: whoever saved a pointer to one (e.g.
 * tracemalloc wrapping us) keeps a working chain. When our top layer was
 * removed from a domain (tracemalloc.stop() restoring the chain it saved
 * before we were installed), a new layer goes on top; only the newest
 * ("active") layer counts, older ones just delegate, so nothing is counted
 * twice when both are in a chain. */
#define MAX_LAYERS 32
typedef struct {
    PyMemAllocatorEx orig;
    int domain, id;
} layer;

static layer layers[MAX_LAYERS][ND];
static PyMemAllocatorEx mine[ND]; /* what we installed last, per domain */
static int nlayers;
static int active_id = -1;
static atomic_int armed;
static hb__ms_ctr gctr[ND]; /* MEM, OBJ (GIL held); [D_RAW] holds nested RAW calls */
static atomic_ullong raw_n, raw_bytes, raw_frees;
/* Thread inside a MEM/OBJ hook (nesting depth and owner), for the RAW hook. */
static atomic_int nest_depth;
static atomic_ulong nest_owner;

#define RLX memory_order_relaxed

static inline int counting(const layer *L)
{
    return atomic_load_explicit(&armed, RLX) && L->id == active_id;
}

static inline int is_armed(void)
{
    return atomic_load_explicit(&armed, RLX);
}

/* Live blocks allocated during the span (pointer -> size), so "retained
 * after the run" is exact: an open-addressing table with linear probing and
 * backward-shift deletion, in mmap'ed memory (never through the hooked
 * allocators). gtab serves MEM/OBJ (GIL held); rtab serves RAW calls from
 * any thread under a spinlock. Frees of blocks from before the span miss. */
typedef struct {
    uintptr_t key;
    uint64_t size;
} slot;
typedef struct {
    slot *s;
    int bits;
    int overflow; /* could not grow: retained figures unknown */
    uint64_t used, bytes;
} ptab;

#define PTAB_MAX_BITS 22 /* 4M live blocks (64 MiB) at most */
static ptab gtab, rtab;
static atomic_flag rtab_lock = ATOMIC_FLAG_INIT;

static inline uint64_t ptab_home(const ptab *t, uintptr_t key)
{
    return ((uint64_t)key * 0x9E3779B97F4A7C15ull) >> (64 - t->bits);
}

static int ptab_alloc(ptab *t, int bits)
{
    void *m = mmap(NULL, sizeof(slot) << bits, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                   -1, 0);
    if (m == MAP_FAILED) return -1;
    t->s = m;
    t->bits = bits;
    return 0;
}

static void ptab_put(ptab *t, uintptr_t key, uint64_t size);

static void ptab_grow(ptab *t)
{
    ptab old = *t;
    if (old.bits >= PTAB_MAX_BITS || ptab_alloc(t, old.bits + 1) < 0) {
        *t = old;
        t->overflow = 1;
        return;
    }
    t->used = 0;
    t->bytes = 0;
    for (uint64_t i = 0; i < (1ull << old.bits); i++)
        if (old.s[i].key) ptab_put(t, old.s[i].key, old.s[i].size);
    munmap(old.s, sizeof(slot) << old.bits);
}

static void ptab_put(ptab *t, uintptr_t key, uint64_t size)
{
    if (t->overflow || t->s == NULL) return;
    if ((t->used + 1) * 2 > (1ull << t->bits)) {
        ptab_grow(t);
        if (t->overflow) return;
    }
    uint64_t mask = (1ull << t->bits) - 1, i = ptab_home(t, key);
    while (t->s[i].key && t->s[i].key != key)
        i = (i + 1) & mask;
    if (t->s[i].key == key) {
        t->bytes -= t->s[i].size; /* stale entry (freed while untracked) */
    } else {
        t->s[i].key = key;
        t->used++;
    }
    t->s[i].size = size;
    t->bytes += size;
}

static void ptab_del(ptab *t, uintptr_t key)
{
    if (t->used == 0) return;
    uint64_t mask = (1ull << t->bits) - 1, i = ptab_home(t, key);
    while (t->s[i].key != key) {
        if (t->s[i].key == 0) return; /* not allocated during the span */
        i = (i + 1) & mask;
    }
    t->bytes -= t->s[i].size;
    t->used--;
    /* Backward-shift deletion keeps probe chains intact without tombstones. */
    uint64_t j = i;
    for (;;) {
        j = (j + 1) & mask;
        if (t->s[j].key == 0) break;
        uint64_t k = ptab_home(t, t->s[j].key);
        int movable = (j > i) ? (k <= i || k > j) : (k <= i && k > j);
        if (movable) {
            t->s[i] = t->s[j];
            i = j;
        }
    }
    t->s[i].key = 0;
    t->s[i].size = 0;
}

static void ptab_reset(ptab *t, int bits)
{
    if (t->s == NULL) {
        if (ptab_alloc(t, bits) < 0) {
            t->overflow = 1;
            return;
        }
    } else if (t->used) {
        memset(t->s, 0, sizeof(slot) << t->bits);
    }
    t->used = 0;
    t->bytes = 0;
    t->overflow = 0;
}

static inline void rtab_lock_acquire(void)
{
    while (atomic_flag_test_and_set_explicit(&rtab_lock, memory_order_acquire)) {
    }
}
static inline void rtab_lock_release(void)
{
    atomic_flag_clear_explicit(&rtab_lock, memory_order_release);
}

static inline int raw_is_nested(void)
{
    return atomic_load_explicit(&nest_depth, RLX) > 0 &&
           atomic_load_explicit(&nest_owner, RLX) == (unsigned long)pthread_self();
}

/* One RAW allocation p of bytes (and the free of old, if any, for realloc).
 * Bytes are what reaches malloc: CPython's RAW allocator turns a 0-byte
 * request into 1 byte, and the preloaded malloc counter sees that 1 (the
 * native figure is the preload's minus these, so both must agree). */
static inline void raw_count(void *p, size_t bytes, void *old)
{
    if (bytes == 0) bytes = 1;
    if (raw_is_nested()) {
        /* pymalloc's fallback: the MEM/OBJ hook tracks this block; count it
         * apart. The nesting thread holds the GIL. */
        gctr[D_RAW].n++;
        gctr[D_RAW].bytes += bytes;
        if (old) gctr[D_RAW].frees++;
        return;
    }
    atomic_fetch_add_explicit(&raw_n, 1, RLX);
    atomic_fetch_add_explicit(&raw_bytes, bytes, RLX);
    if (old) atomic_fetch_add_explicit(&raw_frees, 1, RLX);
    rtab_lock_acquire();
    if (old) ptab_del(&rtab, (uintptr_t)old);
    ptab_put(&rtab, (uintptr_t)p, bytes);
    rtab_lock_release();
}

static inline void raw_count_free(void *ptr)
{
    if (raw_is_nested()) {
        gctr[D_RAW].frees++;
        return;
    }
    atomic_fetch_add_explicit(&raw_frees, 1, RLX);
    rtab_lock_acquire();
    ptab_del(&rtab, (uintptr_t)ptr);
    rtab_lock_release();
}

static void *raw_malloc(void *ctx, size_t size)
{
    layer *L = ctx;
    void *p = L->orig.malloc(L->orig.ctx, size);
    if (counting(L) && p) raw_count(p, size, NULL);
    return p;
}
static void *raw_calloc(void *ctx, size_t nelem, size_t elsize)
{
    layer *L = ctx;
    void *p = L->orig.calloc(L->orig.ctx, nelem, elsize);
    if (counting(L) && p) raw_count(p, nelem * elsize, NULL);
    return p;
}
static void *raw_realloc(void *ctx, void *ptr, size_t size)
{
    layer *L = ctx;
    void *p = L->orig.realloc(L->orig.ctx, ptr, size);
    if (counting(L) && p) raw_count(p, size, ptr);
    return p;
}
static void raw_free(void *ctx, void *ptr)
{
    layer *L = ctx;
    L->orig.free(L->orig.ctx, ptr);
    if (counting(L) && ptr) raw_count_free(ptr);
}

/* Only the GIL holder writes nest_depth/nest_owner (other threads just read
 * them), so plain relaxed loads and stores do: no locked instructions. */
static inline void nest_enter(void)
{
    atomic_store_explicit(&nest_owner, (unsigned long)pthread_self(), RLX);
    atomic_store_explicit(&nest_depth, atomic_load_explicit(&nest_depth, RLX) + 1, RLX);
}
static inline void nest_exit(void)
{
    atomic_store_explicit(&nest_depth, atomic_load_explicit(&nest_depth, RLX) - 1, RLX);
}

/* MEM and OBJ hooks (called with the GIL held). */
static void *gil_malloc(void *ctx, size_t size)
{
    layer *L = ctx;
    if (!counting(L)) return L->orig.malloc(L->orig.ctx, size);
    nest_enter();
    void *p = L->orig.malloc(L->orig.ctx, size);
    nest_exit();
    if (p) {
        gctr[L->domain].n++;
        gctr[L->domain].bytes += size;
        ptab_put(&gtab, (uintptr_t)p, size);
    }
    return p;
}
static void *gil_calloc(void *ctx, size_t nelem, size_t elsize)
{
    layer *L = ctx;
    if (!counting(L)) return L->orig.calloc(L->orig.ctx, nelem, elsize);
    nest_enter();
    void *p = L->orig.calloc(L->orig.ctx, nelem, elsize);
    nest_exit();
    if (p) {
        gctr[L->domain].n++;
        gctr[L->domain].bytes += nelem * elsize;
        ptab_put(&gtab, (uintptr_t)p, nelem * elsize);
    }
    return p;
}
static void *gil_realloc(void *ctx, void *ptr, size_t size)
{
    layer *L = ctx;
    if (!counting(L)) return L->orig.realloc(L->orig.ctx, ptr, size);
    nest_enter();
    void *p = L->orig.realloc(L->orig.ctx, ptr, size);
    nest_exit();
    if (p) {
        gctr[L->domain].n++;
        gctr[L->domain].bytes += size;
        if (ptr) {
            gctr[L->domain].frees++;
            ptab_del(&gtab, (uintptr_t)ptr);
        }
        ptab_put(&gtab, (uintptr_t)p, size);
    }
    return p;
}
static void gil_free(void *ctx, void *ptr)
{
    layer *L = ctx;
    if (!counting(L)) {
        L->orig.free(L->orig.ctx, ptr);
        return;
    }
    nest_enter();
    L->orig.free(L->orig.ctx, ptr);
    nest_exit();
    if (ptr) {
        gctr[L->domain].frees++;
        ptab_del(&gtab, (uintptr_t)ptr);
    }
}

static const PyMemAllocatorDomain domains[ND] = {PYMEM_DOMAIN_RAW, PYMEM_DOMAIN_MEM,
                                                 PYMEM_DOMAIN_OBJ};

/* A child forked during a span (fn ran subprocess...) must not count, nor
 * wait on a table lock a thread of the parent held at fork time. */
static void after_fork_child(void)
{
    atomic_store(&armed, 0);
    atomic_flag_clear(&rtab_lock);
    atomic_store(&nest_depth, 0);
}

/* 1 when our active layer is the top allocator of every domain. */
static int hooks_on_top(void)
{
    if (active_id < 0) return 0;
    for (int d = 0; d < ND; d++) {
        PyMemAllocatorEx cur;
        PyMem_GetAllocator(domains[d], &cur);
        if (cur.malloc != mine[d].malloc || cur.ctx != mine[d].ctx) return 0;
    }
    return 1;
}

int hb__ms_hooks_ensure(void)
{
    if (hooks_on_top()) return 0;
    if (nlayers >= MAX_LAYERS) {
        PyErr_SetString(PyExc_RuntimeError,
                        "allocation hooks were displaced too often (tracemalloc start/stop "
                        "cycles); use alloc=False");
        return -1;
    }
    if (nlayers == 0 && pthread_atfork(NULL, NULL, after_fork_child) != 0) {
        PyErr_SetString(PyExc_RuntimeError, "pthread_atfork failed");
        return -1;
    }
    int id = nlayers++;
    for (int d = 0; d < ND; d++) {
        layer *L = &layers[id][d];
        PyMem_GetAllocator(domains[d], &L->orig);
        L->domain = d;
        L->id = id;
        if (d == D_RAW)
            mine[d] = (PyMemAllocatorEx){L, raw_malloc, raw_calloc, raw_realloc, raw_free};
        else
            mine[d] = (PyMemAllocatorEx){L, gil_malloc, gil_calloc, gil_realloc, gil_free};
    }
    active_id = id;
    for (int d = 0; d < ND; d++)
        PyMem_SetAllocator(domains[d], &mine[d]);
    return 0;
}

void hb__ms_alloc_zero(void)
{
    memset(gctr, 0, sizeof gctr);
    atomic_store(&raw_n, 0);
    atomic_store(&raw_bytes, 0);
    atomic_store(&raw_frees, 0);
    /* Small first tables stay in cache for churn-heavy calls; they grow. */
    ptab_reset(&gtab, 10);
    rtab_lock_acquire();
    ptab_reset(&rtab, 8);
    rtab_lock_release();
}

void hb__ms_arm(int on)
{
    atomic_store_explicit(&armed, on, memory_order_release);
}

void hb__ms_alloc_snapshot(hb__ms_alloc_counts *c)
{
    memcpy(c->gil, gctr, sizeof c->gil);
    c->raw.n = atomic_load(&raw_n);
    c->raw.bytes = atomic_load(&raw_bytes);
    c->raw.frees = atomic_load(&raw_frees);
    rtab_lock_acquire();
    c->live_n = gtab.used + rtab.used;
    c->live_bytes = gtab.bytes + rtab.bytes;
    c->live_ok = !gtab.overflow && !rtab.overflow;
    rtab_lock_release();
}

PyObject *hb__ms_alloc_hooks_state(PyObject *m, PyObject *Py_UNUSED(ignored))
{
    (void)m;
    /* (installed, armed, still_ours) - for tests that hooks are disarmed. */
    return Py_BuildValue("(iiii)", active_id >= 0, is_armed(), hooks_on_top(), nlayers);
}
