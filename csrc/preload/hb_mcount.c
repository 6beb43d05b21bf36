/* hb_mcount.c - a preloadable malloc counter (LD_PRELOAD=.../_mcount*.so).
 *
 * Interposes malloc/calloc/realloc/free/posix_memalign/aligned_alloc/memalign,
 * counts calls and requested bytes in relaxed atomics (any thread), and
 * delegates to the next definition (dlsym(RTLD_NEXT)). dlsym itself may call
 * calloc before the real one is known: those requests are served from a
 * static bootstrap buffer that is never freed. No Python: it is only ever
 * preloaded, never imported; httpbench reads it through hb_mcount_read().
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

static void *(*real_malloc)(size_t);
static void *(*real_calloc)(size_t, size_t);
static void *(*real_realloc)(void *, size_t);
static void (*real_free)(void *);
static int (*real_posix_memalign)(void **, size_t, size_t);
static void *(*real_aligned_alloc)(size_t, size_t);
static void *(*real_memalign)(size_t, size_t);

static atomic_ullong n_allocs, n_bytes, n_frees;
static atomic_int init_state; /* 0 none, 1 in progress, 2 done */

#define RLX memory_order_relaxed

/* Bootstrap arena for allocations made while dlsym resolves the real ones. */
static _Alignas(16) unsigned char boot[64 * 1024];
static atomic_size_t boot_used;

static int in_boot(const void *p)
{
    return (const unsigned char *)p >= boot && (const unsigned char *)p < boot + sizeof boot;
}

static void *boot_alloc(size_t n)
{
    size_t need = (n + 16 + 15) & ~(size_t)15; /* 16-byte size header, 16-aligned */
    size_t off = atomic_fetch_add(&boot_used, need);
    if (off + need > sizeof boot) return NULL;
    memcpy(boot + off, &n, sizeof n);
    return boot + off + 16;
}

static size_t boot_size(const void *p)
{
    size_t n;
    memcpy(&n, (const unsigned char *)p - 16, sizeof n);
    return n;
}

#define RESOLVE(var, name)                                                                         \
    do {                                                                                           \
        void *s_ = dlsym(RTLD_NEXT, name);                                                         \
        memcpy(&(var), &s_, sizeof s_);                                                            \
    } while (0)

static void resolve(void)
{
    int expected = 0;
    if (!atomic_compare_exchange_strong(&init_state, &expected, 1)) {
        /* Another thread (or our own dlsym) is resolving: spin until done,
         * except recursion from dlsym, which boot_alloc serves. */
        return;
    }
    RESOLVE(real_malloc, "malloc");
    RESOLVE(real_calloc, "calloc");
    RESOLVE(real_realloc, "realloc");
    RESOLVE(real_free, "free");
    RESOLVE(real_posix_memalign, "posix_memalign");
    RESOLVE(real_aligned_alloc, "aligned_alloc");
    RESOLVE(real_memalign, "memalign");
    atomic_store(&init_state, 2);
}

static inline int ready(void)
{
    if (atomic_load_explicit(&init_state, memory_order_acquire) == 2) return 1;
    resolve();
    return atomic_load_explicit(&init_state, memory_order_acquire) == 2;
}

static inline void count(size_t bytes)
{
    atomic_fetch_add_explicit(&n_allocs, 1, RLX);
    atomic_fetch_add_explicit(&n_bytes, bytes, RLX);
}

EXPORT void *malloc(size_t n)
{
    if (!ready()) return boot_alloc(n);
    count(n);
    return real_malloc(n);
}

EXPORT void *calloc(size_t nelem, size_t elsize)
{
    if (!ready()) {
        if (elsize && nelem > SIZE_MAX / elsize) return NULL;
        return boot_alloc(nelem * elsize); /* static storage: already zero */
    }
    count(nelem * elsize);
    return real_calloc(nelem, elsize);
}

EXPORT void *realloc(void *p, size_t n)
{
    if (p && in_boot(p)) {
        void *q = malloc(n);
        if (q) {
            size_t old = boot_size(p);
            memcpy(q, p, old < n ? old : n);
        }
        return q;
    }
    if (!ready()) return boot_alloc(n);
    count(n);
    if (p) atomic_fetch_add_explicit(&n_frees, 1, RLX);
    return real_realloc(p, n);
}

EXPORT void free(void *p)
{
    if (p == NULL || in_boot(p)) return;
    if (!ready()) return; /* cannot happen: p came from a real allocator */
    atomic_fetch_add_explicit(&n_frees, 1, RLX);
    real_free(p);
}

EXPORT int posix_memalign(void **out, size_t align, size_t n)
{
    if (!ready()) return ENOMEM;
    count(n);
    return real_posix_memalign(out, align, n);
}

EXPORT void *aligned_alloc(size_t align, size_t n)
{
    if (!ready()) return NULL;
    count(n);
    return real_aligned_alloc(align, n);
}

EXPORT void *memalign(size_t align, size_t n)
{
    if (!ready()) return NULL;
    count(n);
    return real_memalign(align, n);
}

/* out[0] allocations (malloc, calloc, realloc, aligned), out[1] bytes
 * requested, out[2] frees (free, realloc of a non-NULL block); n <= 3. */
EXPORT void hb_mcount_read(uint64_t *out, int n)
{
    uint64_t v[3] = {atomic_load(&n_allocs), atomic_load(&n_bytes), atomic_load(&n_frees)};
    for (int i = 0; i < n && i < 3; i++)
        out[i] = v[i];
}
