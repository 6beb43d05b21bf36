/* measure.c - the C timing loop behind httpbench.measure()/measure_async(),
 * with allocation (PyMem_SetAllocator hooks), GC (gc.callbacks) and CPU
 * accounting for the measured span only.
 *
 * Allocation hooks wrap (never replace) the allocators of the RAW, MEM and
 * OBJ domains. They are installed once, on first use, and stay installed;
 * they count only while `armed` is set (one relaxed load when disarmed).
 * MEM/OBJ run with the GIL held, so their counters are plain; RAW may run
 * without the GIL, so its counters are atomics. A RAW call made from inside
 * a MEM/OBJ hook on the same thread (pymalloc's fallback for large blocks)
 * is the same allocation, so it is counted separately as "nested" instead of
 * twice. The process-wide counters (all threads) are C statics: the hooks
 * are process-wide by nature; one measured span at a time (reentry raises).
 *
 * Private module functions (used by python/httpbench/_measure.py):
 *   _measure_loop(fn, args, n, duration_ns, warmup_n, warmup_ns, alloc, gc)
 *       -> dict (calls, wall_ns, latency Histogram, cpu, alloc, gc, native)
 *   _acct_start(alloc, gc) / _acct_stop() -> dict     (spans driven elsewhere)
 *   _Recorder(n, duration_ns): begin() -> t0 | None, end(t0), histogram()
 *   now_ns() -> CLOCK_MONOTONIC ns
 *   _det_loop(fn, args, n, warmup_n, per_call) -> calls  (deterministic counts)
 *   _callgrind_built() -> bool; _running_on_valgrind() -> int
 */
#include "module.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#ifdef HB_HAVE_CALLGRIND
#include <valgrind/callgrind.h>
#endif

#include "hb_clock.h"
#include "hb_hist.h"

/* ---- allocation hooks ---- */

enum { D_RAW = 0, D_MEM = 1, D_OBJ = 2, ND = 3 };

typedef struct {
    uint64_t n, bytes, frees;
} gil_ctr;

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
static gil_ctr gctr[ND]; /* MEM, OBJ (GIL held); [D_RAW] holds nested RAW calls */
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

/* Install the wrapping hooks, or a new layer on top when the active one is
 * no longer the top of every domain. GIL held. 0, or -1 with an exception. */
static int hooks_ensure(void)
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

static void alloc_zero(void)
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

/* ---- native (preloaded malloc counter) ---- */

typedef void (*mcount_read_fn)(uint64_t *out, int n);

static mcount_read_fn mcount_reader(void)
{
    /* Present only when the process was started with LD_PRELOAD=..._mcount*.so. */
    void *sym = dlsym(RTLD_DEFAULT, "hb_mcount_read");
    mcount_read_fn fn;
    memcpy(&fn, &sym, sizeof fn);
    return fn;
}

/* ---- GC watch ---- */

static uint64_t gc_count[3], gc_pause_ns, gc_t0;
static int gc_in;

static PyObject *gc_callback(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 2) Py_RETURN_NONE;
    uint64_t now = hb_now_ns();
    if (PyUnicode_CompareWithASCIIString(args[0], "start") == 0) {
        gc_t0 = now;
        gc_in = 1;
    } else if (gc_in) {
        gc_in = 0;
        gc_pause_ns += now - gc_t0;
        PyObject *g = PyDict_Check(args[1]) ? PyDict_GetItemString(args[1], "generation") : NULL;
        long gen = g ? PyLong_AsLong(g) : -1;
        if (gen == -1 && PyErr_Occurred()) PyErr_Clear();
        if (gen >= 0 && gen <= 2) gc_count[gen]++;
    }
    Py_RETURN_NONE;
}

static PyMethodDef gc_cb_def = {"_httpbench_gc_watch", (PyCFunction)(void (*)(void))gc_callback,
                                METH_FASTCALL, "httpbench.measure() GC accounting callback."};

static PyObject *gc_callbacks_list(void)
{
    PyObject *gc = PyImport_ImportModule("gc");
    if (gc == NULL) return NULL;
    PyObject *cbs = PyObject_GetAttrString(gc, "callbacks");
    Py_DECREF(gc);
    if (cbs && !PyList_Check(cbs)) {
        Py_DECREF(cbs);
        PyErr_SetString(PyExc_TypeError, "gc.callbacks is not a list");
        return NULL;
    }
    return cbs;
}

/* ---- one accounting span (alloc + gc + cpu + native) ---- */

typedef struct {
    int active, alloc, gc, gc_registered;
    struct rusage ru0;
    uint64_t thread_cpu0, wall0, unix0;
    uint64_t native0[3];
    int have_native;
} span;

/* One measured span at a time; plain C data (no Python references). */
static span cur_span;

static uint64_t tv_ns(struct timeval tv)
{
    return (uint64_t)tv.tv_sec * 1000000000ull + (uint64_t)tv.tv_usec * 1000ull;
}

static int span_start(int alloc, int gc)
{
    span *s = &cur_span;
    if (s->active) {
        PyErr_SetString(PyExc_RuntimeError,
                        "httpbench.measure() is already measuring (not reentrant)");
        return -1;
    }
    memset(s, 0, sizeof *s);
    s->alloc = alloc;
    s->gc = gc;
    if (alloc && hooks_ensure() < 0) return -1;
    if (gc) {
        PyObject *cbs = gc_callbacks_list();
        if (cbs == NULL) return -1;
        /* gc.callbacks holds the only reference; we find it again by its def. */
        PyObject *cb = PyCFunction_New(&gc_cb_def, NULL);
        if (cb == NULL || PyList_Append(cbs, cb) < 0) {
            Py_DECREF(cbs);
            Py_XDECREF(cb);
            return -1;
        }
        Py_DECREF(cb);
        Py_DECREF(cbs);
        s->gc_registered = 1;
        memset(gc_count, 0, sizeof gc_count);
        gc_pause_ns = 0;
        gc_in = 0;
    }
    if (alloc) alloc_zero();
    mcount_read_fn rd = mcount_reader();
    if (rd) {
        rd(s->native0, 3);
        s->have_native = 1;
    }
    s->active = 1;
    if (getrusage(RUSAGE_SELF, &s->ru0) != 0) memset(&s->ru0, 0, sizeof s->ru0);
    s->thread_cpu0 = hb_thread_cpu_ns();
    s->unix0 = hb_clock_ns_of(CLOCK_REALTIME);
    s->wall0 = hb_now_ns();
    if (alloc) atomic_store_explicit(&armed, 1, memory_order_release);
    return 0;
}

/* Ends the span (always disarms, unregisters); returns a dict or NULL. With
 * discard set (error path) it returns Py_None after cleaning up, keeping any
 * pending exception intact. */
static PyObject *span_stop(int discard)
{
    span *s = &cur_span;
    atomic_store_explicit(&armed, 0, memory_order_release);
    uint64_t wall1 = hb_now_ns();
    uint64_t thread_cpu1 = hb_thread_cpu_ns();
    uint64_t unix1 = hb_clock_ns_of(CLOCK_REALTIME);
    struct rusage ru1;
    if (getrusage(RUSAGE_SELF, &ru1) != 0) ru1 = s->ru0;
    uint64_t native1[3] = {0, 0, 0};
    if (s->have_native) mcount_reader()(native1, 3);
    if (!s->active) {
        PyErr_SetString(PyExc_RuntimeError, "no measurement span is active");
        return NULL;
    }
    s->active = 0;
    /* Snapshot the counters before creating any Python object. */
    gil_ctr g[ND];
    memcpy(g, gctr, sizeof g);
    uint64_t rn = atomic_load(&raw_n), rb = atomic_load(&raw_bytes), rf = atomic_load(&raw_frees);
    rtab_lock_acquire();
    uint64_t live_n = gtab.used + rtab.used, live_b = gtab.bytes + rtab.bytes;
    int live_ok = !gtab.overflow && !rtab.overflow;
    rtab_lock_release();
    uint64_t gcc[3] = {gc_count[0], gc_count[1], gc_count[2]}, gcp = gc_pause_ns;

    if (s->gc_registered) {
        /* Unregister even when an exception is pending: save and restore it. */
        PyObject *et, *ev, *tb;
        PyErr_Fetch(&et, &ev, &tb);
        PyObject *cbs = gc_callbacks_list();
        if (cbs) {
            for (Py_ssize_t i = PyList_GET_SIZE(cbs) - 1; i >= 0; i--) {
                PyObject *it = PyList_GET_ITEM(cbs, i);
                if (PyCFunction_Check(it) && ((PyCFunctionObject *)it)->m_ml == &gc_cb_def) {
                    PySequence_DelItem(cbs, i);
                    break;
                }
            }
            Py_DECREF(cbs);
        }
        PyErr_Clear();
        PyErr_Restore(et, ev, tb);
        s->gc_registered = 0;
    }
    if (discard) Py_RETURN_NONE;

    PyObject *d = PyDict_New();
    if (d == NULL) return NULL;
    PyObject *v;
#define PUT(key, expr)                                                                             \
    do {                                                                                           \
        v = (expr);                                                                                \
        if (v == NULL || PyDict_SetItemString(d, key, v) < 0) goto fail;                           \
        Py_DECREF(v);                                                                              \
    } while (0)
    PUT("wall_ns", PyLong_FromUnsignedLongLong(wall1 - s->wall0));
    PUT("start_unix_ns", PyLong_FromUnsignedLongLong(s->unix0));
    PUT("end_unix_ns", PyLong_FromUnsignedLongLong(unix1));
    PUT("cpu_user_ns", PyLong_FromUnsignedLongLong(tv_ns(ru1.ru_utime) - tv_ns(s->ru0.ru_utime)));
    PUT("cpu_sys_ns", PyLong_FromUnsignedLongLong(tv_ns(ru1.ru_stime) - tv_ns(s->ru0.ru_stime)));
    PUT("cpu_thread_ns", PyLong_FromUnsignedLongLong(thread_cpu1 - s->thread_cpu0));
    PUT("maxrss_kb", PyLong_FromLong(ru1.ru_maxrss));
    if (s->alloc) {
        /* (count, bytes, frees) per domain; raw_nested = pymalloc fallbacks
         * already counted under mem/obj. */
        PUT("alloc_raw", Py_BuildValue("(KKK)", rn, rb, rf));
        PUT("alloc_mem", Py_BuildValue("(KKK)", g[D_MEM].n, g[D_MEM].bytes, g[D_MEM].frees));
        PUT("alloc_obj", Py_BuildValue("(KKK)", g[D_OBJ].n, g[D_OBJ].bytes, g[D_OBJ].frees));
        PUT("alloc_raw_nested", Py_BuildValue("(KKK)", g[D_RAW].n, g[D_RAW].bytes, g[D_RAW].frees));
        /* Blocks allocated during the span and still alive at its end. */
        if (live_ok)
            PUT("alloc_retained", Py_BuildValue("(KK)", live_n, live_b));
        else
            PUT("alloc_retained", Py_NewRef(Py_None));
    }
    if (s->gc) {
        PUT("gc_collections", Py_BuildValue("(KKK)", gcc[0], gcc[1], gcc[2]));
        PUT("gc_pause_ns", PyLong_FromUnsignedLongLong(gcp));
    }
    if (s->have_native) {
        PUT("native", Py_BuildValue("(KKK)", native1[0] - s->native0[0], native1[1] - s->native0[1],
                                    native1[2] - s->native0[2]));
    }
#undef PUT
    return d;
fail:
    Py_XDECREF(v);
    Py_DECREF(d);
    return NULL;
}

/* ---- the timing loop ---- */

/* Calls fn up to n times or until deadline; records each call's wall time
 * into h when h != NULL. One clock read per call: a sample runs from the end
 * of the previous one through the call and the release of its result (the
 * result's dealloc is the callee's cost, as in a Python `fn()` statement),
 * so it also holds the loop's few ns of bookkeeping, which the no-op
 * calibration reports as overhead. Signals are checked between samples. */
static int timing_loop(PyObject *fn, PyObject *const *args, Py_ssize_t nargs, uint64_t n,
                       uint64_t deadline, hb_hist *h, uint64_t *calls)
{
    uint64_t i = 0;
    int rc = 0;
    uint64_t t0 = hb_now_ns();
    while (i < n) {
        PyObject *r = PyObject_Vectorcall(fn, args, (size_t)nargs, NULL);
        if (r == NULL) {
            rc = -1;
            break;
        }
        Py_DECREF(r);
        uint64_t t1 = hb_now_ns();
        if (h) hb_hist_record(h, t1 - t0);
        i++;
        if (t1 >= deadline) break;
        if (PyErr_CheckSignals() < 0) {
            rc = -1;
            break;
        }
        t0 = t1;
    }
    *calls = i;
    return rc;
}

static uint64_t deadline_of(uint64_t dur_ns)
{
    if (dur_ns == 0) return UINT64_MAX;
    uint64_t now = hb_now_ns();
    return dur_ns > UINT64_MAX - now ? UINT64_MAX : now + dur_ns;
}

/* _measure_loop(fn, args, n, duration_ns, warmup_n, warmup_ns, alloc, gc) -> dict */
static PyObject *measure_loop(PyObject *m, PyObject *const *a, Py_ssize_t nargs)
{
    hb_modstate *st = hb_state(m);
    if (nargs != 8) {
        PyErr_SetString(PyExc_TypeError,
                        "_measure_loop(fn, args, n, duration_ns, warmup_n, warmup_ns, alloc, gc)");
        return NULL;
    }
    PyObject *fn = a[0], *args = a[1];
    if (!PyCallable_Check(fn)) {
        PyErr_Format(PyExc_TypeError, "fn must be callable, not %.100s", Py_TYPE(fn)->tp_name);
        return NULL;
    }
    if (!PyTuple_Check(args)) {
        PyErr_SetString(PyExc_TypeError, "args must be a tuple");
        return NULL;
    }
    uint64_t n, dur, wn, wdur;
    if (hb_arg_u64(a[2], UINT64_MAX, "n", &n) < 0 || hb_arg_u64(a[3], 0, "duration_ns", &dur) < 0 ||
        hb_arg_u64(a[4], 0, "warmup_n", &wn) < 0 || hb_arg_u64(a[5], 0, "warmup_ns", &wdur) < 0)
        return NULL;
    if (n == UINT64_MAX && dur == 0) {
        PyErr_SetString(PyExc_ValueError, "give n or duration");
        return NULL;
    }
    if (n == 0) {
        PyErr_SetString(PyExc_ValueError, "n must be >= 1");
        return NULL;
    }
    int alloc, gc;
    if (hb_arg_bool(a[6], 0, &alloc) < 0 || hb_arg_bool(a[7], 0, &gc) < 0) return NULL;
    PyObject *const *argv = &PyTuple_GET_ITEM(args, 0);
    Py_ssize_t argc = PyTuple_GET_SIZE(args);

    hb_hist h;
    char err[HB_ERR_LEN] = "";
    hb_hist_config cfg = hb_hist_default_config();
    int rc = hb_hist_init(&h, &cfg, err);
    if (rc != 0) return hb_raise(st, rc, err);

    uint64_t calls = 0;
    if (wn > 0 || wdur > 0) {
        if (timing_loop(fn, argv, argc, wn ? wn : UINT64_MAX, deadline_of(wdur), NULL, &calls) <
            0) {
            hb_hist_free(&h);
            return NULL;
        }
    }
    if (span_start(alloc, gc) < 0) {
        hb_hist_free(&h);
        return NULL;
    }
    rc = timing_loop(fn, argv, argc, n, deadline_of(dur), &h, &calls);
    PyObject *d = span_stop(rc < 0);
    if (rc < 0 || d == NULL) {
        Py_XDECREF(d);
        hb_hist_free(&h);
        return NULL;
    }
    PyObject *hist = hb_py_hist_from_core(st, &h);
    hb_hist_free(&h);
    PyObject *c = PyLong_FromUnsignedLongLong(calls);
    if (hist == NULL || c == NULL || PyDict_SetItemString(d, "latency", hist) < 0 ||
        PyDict_SetItemString(d, "calls", c) < 0) {
        Py_XDECREF(hist);
        Py_XDECREF(c);
        Py_DECREF(d);
        return NULL;
    }
    Py_DECREF(hist);
    Py_DECREF(c);
    return d;
}

static PyObject *acct_start(PyObject *m, PyObject *const *a, Py_ssize_t nargs)
{
    (void)m;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "_acct_start(alloc, gc)");
        return NULL;
    }
    int alloc, gc;
    if (hb_arg_bool(a[0], 0, &alloc) < 0 || hb_arg_bool(a[1], 0, &gc) < 0) return NULL;
    if (span_start(alloc, gc) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *acct_stop(PyObject *m, PyObject *Py_UNUSED(ignored))
{
    (void)m;
    return span_stop(0);
}

static PyObject *acct_active(PyObject *m, PyObject *Py_UNUSED(ignored))
{
    (void)m;
    return PyBool_FromLong(cur_span.active);
}

static PyObject *alloc_hooks_state(PyObject *m, PyObject *Py_UNUSED(ignored))
{
    (void)m;
    /* (installed, armed, still_ours) - for tests that hooks are disarmed. */
    return Py_BuildValue("(iiii)", active_id >= 0, is_armed(), hooks_on_top(), nlayers);
}

static PyObject *now_ns(PyObject *m, PyObject *Py_UNUSED(ignored))
{
    (void)m;
    return PyLong_FromUnsignedLongLong(hb_now_ns());
}

static PyObject *native_counters(PyObject *m, PyObject *Py_UNUSED(ignored))
{
    (void)m;
    mcount_read_fn rd = mcount_reader();
    if (rd == NULL) Py_RETURN_NONE;
    uint64_t v[3];
    rd(v, 3);
    return Py_BuildValue("(KKK)", v[0], v[1], v[2]);
}

/* ---- deterministic counts: the window seen by callgrind and strace ---- */

#ifdef HB_HAVE_CALLGRIND
#define DET_INSTR_START() CALLGRIND_START_INSTRUMENTATION
#define DET_INSTR_STOP() CALLGRIND_STOP_INSTRUMENTATION
#define DET_ZERO() CALLGRIND_ZERO_STATS
#define DET_TOGGLE() CALLGRIND_TOGGLE_COLLECT
#define DET_DUMP() CALLGRIND_DUMP_STATS_AT("httpbench-call")
#define DET_ON_VALGRIND() ((int)RUNNING_ON_VALGRIND)
#else
#define DET_INSTR_START() ((void)0)
#define DET_INSTR_STOP() ((void)0)
#define DET_ZERO() ((void)0)
#define DET_TOGGLE() ((void)0)
#define DET_DUMP() ((void)0)
#define DET_ON_VALGRIND() 0
#endif

/* A marker is a write(2) to fd -1: it always fails with EBADF, touches no
 * state, and its text is unique in a trace, so a strace parser can count the
 * syscalls between two markers exactly. The call is the only one here whose
 * result is deliberately ignored: EBADF is the expected outcome. */
static void det_marker(const char *text)
{
    ssize_t r = write(-1, text, strlen(text));
    (void)r;
}

/* Calls fn warmup_n times unobserved, then n times. With per_call, each
 * call is alone in a window: a "call" marker before it, callgrind's counters
 * zeroed and collection on for exactly the vectorcall and the release of its
 * result, then collection off and the counters dumped (one part per call).
 * Without it, one window holds all n calls (one dump: cheaper, no per-call
 * figures). Markers and dumps fall outside the collected window. Without
 * valgrind (strace run) the client requests are no-ops. Returns the calls
 * completed or -1. */
static int64_t det_run(PyObject *fn, PyObject *const *argv, Py_ssize_t argc, uint64_t n,
                       uint64_t warmup_n, int per_call)
{
    for (uint64_t i = 0; i < warmup_n; i++) {
        PyObject *r = PyObject_Vectorcall(fn, argv, (size_t)argc, NULL);
        if (r == NULL) return -1;
        Py_DECREF(r);
    }
    DET_INSTR_START();
    det_marker("httpbench:det:begin");
    uint64_t i = 0;
    int rc = 0;
    if (per_call) {
        for (; i < n; i++) {
            det_marker("httpbench:det:call");
            DET_ZERO();
            DET_TOGGLE();
            PyObject *r = PyObject_Vectorcall(fn, argv, (size_t)argc, NULL);
            Py_XDECREF(r);
            DET_TOGGLE();
            DET_DUMP();
            if (r == NULL || PyErr_CheckSignals() < 0) {
                rc = -1;
                break;
            }
        }
    } else {
        det_marker("httpbench:det:call");
        DET_ZERO();
        DET_TOGGLE();
        for (; i < n; i++) {
            PyObject *r = PyObject_Vectorcall(fn, argv, (size_t)argc, NULL);
            Py_XDECREF(r);
            if (r == NULL) {
                rc = -1;
                break;
            }
        }
        DET_TOGGLE();
        DET_DUMP();
    }
    det_marker("httpbench:det:end");
    DET_INSTR_STOP();
    return rc < 0 ? -1 : (int64_t)i;
}

/* _det_loop(fn, args, n, warmup_n, per_call) -> calls */
static PyObject *det_loop(PyObject *m, PyObject *const *a, Py_ssize_t nargs)
{
    (void)m;
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "_det_loop(fn, args, n, warmup_n, per_call)");
        return NULL;
    }
    if (!PyCallable_Check(a[0])) {
        PyErr_Format(PyExc_TypeError, "fn must be callable, not %.100s", Py_TYPE(a[0])->tp_name);
        return NULL;
    }
    if (!PyTuple_Check(a[1])) {
        PyErr_SetString(PyExc_TypeError, "args must be a tuple");
        return NULL;
    }
    uint64_t n, wn;
    if (hb_arg_u64(a[2], 0, "n", &n) < 0 || hb_arg_u64(a[3], 0, "warmup_n", &wn) < 0) return NULL;
    if (n == 0) {
        PyErr_SetString(PyExc_ValueError, "n must be >= 1");
        return NULL;
    }
    int per_call;
    if (hb_arg_bool(a[4], 1, &per_call) < 0) return NULL;
    int64_t calls =
        det_run(a[0], &PyTuple_GET_ITEM(a[1], 0), PyTuple_GET_SIZE(a[1]), n, wn, per_call);
    if (calls < 0) return NULL;
    return PyLong_FromLongLong(calls);
}

static PyObject *callgrind_built(PyObject *m, PyObject *Py_UNUSED(ignored))
{
    (void)m;
#ifdef HB_HAVE_CALLGRIND
    Py_RETURN_TRUE;
#else
    Py_RETURN_FALSE;
#endif
}

static PyObject *running_on_valgrind(PyObject *m, PyObject *Py_UNUSED(ignored))
{
    (void)m;
    return PyLong_FromLong(DET_ON_VALGRIND());
}

/* ---- _Recorder: per-request timing for measure_async ---- */

typedef struct {
    PyObject_HEAD hb_hist h;
    uint64_t n, issued, completed, deadline, dur_ns;
    int record;
} RecObject;

static PyObject *rec_new(PyTypeObject *tp, PyObject *args, PyObject *kwds)
{
    static char *kw[] = {"n", "duration_ns", "record", NULL};
    PyObject *n_o = Py_None, *d_o = Py_None;
    int record = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|OOp:_Recorder", kw, &n_o, &d_o, &record))
        return NULL;
    uint64_t n, dur;
    if (hb_arg_u64(n_o, UINT64_MAX, "n", &n) < 0 || hb_arg_u64(d_o, 0, "duration_ns", &dur) < 0)
        return NULL;
    hb_modstate *st = hb_state_from_type(tp);
    if (st == NULL) return NULL;
    allocfunc alloc = (allocfunc)PyType_GetSlot(tp, Py_tp_alloc);
    RecObject *self = (RecObject *)alloc(tp, 0);
    if (self == NULL) return NULL;
    memset(&self->h, 0, sizeof self->h);
    char err[HB_ERR_LEN] = "";
    hb_hist_config cfg = hb_hist_default_config();
    int rc = hb_hist_init(&self->h, &cfg, err);
    if (rc != 0) {
        Py_DECREF(self);
        return hb_raise(st, rc, err);
    }
    self->n = n;
    self->record = record;
    self->dur_ns = dur;
    self->deadline = UINT64_MAX; /* the clock starts at the first begin() */
    return (PyObject *)self;
}

static void rec_dealloc(PyObject *o)
{
    PyTypeObject *tp = Py_TYPE(o);
    hb_hist_free(&((RecObject *)o)->h);
    freefunc f = (freefunc)PyType_GetSlot(tp, Py_tp_free);
    f(o);
    Py_DECREF(tp);
}

/* begin() -> t0 (ns) when another request may start, else None. */
static PyObject *rec_begin(PyObject *o, PyObject *Py_UNUSED(ignored))
{
    RecObject *r = (RecObject *)o;
    uint64_t now = hb_now_ns();
    if (r->issued == 0 && r->dur_ns)
        r->deadline = r->dur_ns > UINT64_MAX - now ? UINT64_MAX : now + r->dur_ns;
    if (r->issued >= r->n || now >= r->deadline) Py_RETURN_NONE;
    r->issued++;
    return PyLong_FromUnsignedLongLong(now);
}

/* end(t0): records now - t0. */
static PyObject *rec_end(PyObject *o, PyObject *arg)
{
    RecObject *r = (RecObject *)o;
    uint64_t now = hb_now_ns();
    unsigned long long t0 = PyLong_AsUnsignedLongLong(arg);
    if (t0 == (unsigned long long)-1 && PyErr_Occurred()) return NULL;
    if (r->record) hb_hist_record(&r->h, now >= t0 ? now - t0 : 0);
    r->completed++;
    Py_RETURN_NONE;
}

static PyObject *rec_histogram(PyObject *o, PyObject *Py_UNUSED(ignored))
{
    return hb_py_hist_from_core(hb_state_from_type(Py_TYPE(o)), &((RecObject *)o)->h);
}

static PyObject *rec_get_completed(PyObject *o, void *c)
{
    (void)c;
    return PyLong_FromUnsignedLongLong(((RecObject *)o)->completed);
}
static PyObject *rec_get_issued(PyObject *o, void *c)
{
    (void)c;
    return PyLong_FromUnsignedLongLong(((RecObject *)o)->issued);
}

static PyMethodDef rec_methods[] = {
    {"begin", rec_begin, METH_NOARGS, "begin() -> t0 ns, or None when the budget is spent."},
    {"end", rec_end, METH_O, "end(t0): record now - t0."},
    {"histogram", rec_histogram, METH_NOARGS, "A copy of the latency Histogram."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef rec_getset[] = {
    {"completed", rec_get_completed, NULL, "Requests ended.", NULL},
    {"issued", rec_get_issued, NULL, "Requests begun.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot rec_slots[] = {
    {Py_tp_doc, "_Recorder(n=None, duration_ns=None, record=True): C-side request timing."},
    {Py_tp_new, rec_new},
    {Py_tp_dealloc, rec_dealloc},
    {Py_tp_methods, rec_methods},
    {Py_tp_getset, rec_getset},
    {0, NULL},
};

static PyType_Spec rec_spec = {
    .name = "httpbench._core._Recorder",
    .basicsize = sizeof(RecObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE,
    .slots = rec_slots,
};

static PyMethodDef measure_functions[] = {
    {"_measure_loop", (PyCFunction)(void (*)(void))measure_loop, METH_FASTCALL,
     "_measure_loop(fn, args, n, duration_ns, warmup_n, warmup_ns, alloc, gc) -> dict"},
    {"_acct_start", (PyCFunction)(void (*)(void))acct_start, METH_FASTCALL,
     "_acct_start(alloc, gc): begin an accounting span."},
    {"_acct_stop", acct_stop, METH_NOARGS, "_acct_stop() -> dict: end the span."},
    {"_acct_active", acct_active, METH_NOARGS, "True while a span is active."},
    {"_alloc_hooks_state", alloc_hooks_state, METH_NOARGS,
     "(installed, armed, still_installed) of the allocation hooks."},
    {"_native_counters", native_counters, METH_NOARGS,
     "(mallocs, bytes, frees) of the preloaded counter, or None."},
    {"now_ns", now_ns, METH_NOARGS, "CLOCK_MONOTONIC in ns."},
    {"_det_loop", (PyCFunction)(void (*)(void))det_loop, METH_FASTCALL,
     "_det_loop(fn, args, n, warmup_n, per_call) -> calls: callgrind/strace windows."},
    {"_callgrind_built", callgrind_built, METH_NOARGS,
     "True when built with valgrind/callgrind.h (client requests compiled in)."},
    {"_running_on_valgrind", running_on_valgrind, METH_NOARGS,
     "Valgrind nesting depth (0 when not under valgrind)."},
    {NULL, NULL, 0, NULL},
};

int hb_mod_measure_init(PyObject *m, hb_modstate *st)
{
    PyObject *tp = PyType_FromModuleAndSpec(m, &rec_spec, NULL);
    if (tp == NULL) return -1;
    st->MeasureType = (PyTypeObject *)tp;
    if (PyModule_AddObjectRef(m, "_Recorder", tp) < 0) return -1;
#ifdef HB_HAVE_CALLGRIND
    if (PyModule_AddIntConstant(m, "HAVE_CALLGRIND", 1) < 0) return -1;
#else
    if (PyModule_AddIntConstant(m, "HAVE_CALLGRIND", 0) < 0) return -1;
#endif
    return PyModule_AddFunctions(m, measure_functions);
}
