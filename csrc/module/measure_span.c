/* measure_span.c - one accounting span of measure(): allocations (through
 * measure_alloc.c), GC runs and pauses (gc.callbacks), CPU and wall time,
 * and the preloaded malloc counter when present (see measure_int.h). */
#include "measure_int.h"

#include <dlfcn.h>
#include <string.h>
#include <sys/resource.h>

#include "base/hb_clock.h"

/* ---- native (preloaded malloc counter) ---- */

hb__ms_mcount_fn hb__ms_mcount_reader(void)
{
    /* Present only when the process was started with LD_PRELOAD=..._mcount*.so. */
    void *sym = dlsym(RTLD_DEFAULT, "hb_mcount_read");
    hb__ms_mcount_fn fn;
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

int hb__ms_span_active(void)
{
    return cur_span.active;
}

static uint64_t tv_ns(struct timeval tv)
{
    return (uint64_t)tv.tv_sec * 1000000000ull + (uint64_t)tv.tv_usec * 1000ull;
}

int hb__ms_span_start(int alloc, int gc)
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
    if (alloc && hb__ms_hooks_ensure() < 0) return -1;
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
    if (alloc) hb__ms_alloc_zero();
    hb__ms_mcount_fn rd = hb__ms_mcount_reader();
    if (rd) {
        rd(s->native0, 3);
        s->have_native = 1;
    }
    s->active = 1;
    if (getrusage(RUSAGE_SELF, &s->ru0) != 0) memset(&s->ru0, 0, sizeof s->ru0);
    s->thread_cpu0 = hb_thread_cpu_ns();
    s->unix0 = hb_clock_ns_of(CLOCK_REALTIME);
    s->wall0 = hb_now_ns();
    if (alloc) hb__ms_arm(1);
    return 0;
}

PyObject *hb__ms_span_stop(int discard)
{
    span *s = &cur_span;
    hb__ms_arm(0);
    uint64_t wall1 = hb_now_ns();
    uint64_t thread_cpu1 = hb_thread_cpu_ns();
    uint64_t unix1 = hb_clock_ns_of(CLOCK_REALTIME);
    struct rusage ru1;
    if (getrusage(RUSAGE_SELF, &ru1) != 0) ru1 = s->ru0;
    uint64_t native1[3] = {0, 0, 0};
    if (s->have_native) hb__ms_mcount_reader()(native1, 3);
    if (!s->active) {
        PyErr_SetString(PyExc_RuntimeError, "no measurement span is active");
        return NULL;
    }
    s->active = 0;
    /* Snapshot the counters before creating any Python object. */
    hb__ms_alloc_counts ac;
    hb__ms_alloc_snapshot(&ac);
    const hb__ms_ctr *g = ac.gil;
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
        PUT("alloc_raw", Py_BuildValue("(KKK)", ac.raw.n, ac.raw.bytes, ac.raw.frees));
        PUT("alloc_mem", Py_BuildValue("(KKK)", g[D_MEM].n, g[D_MEM].bytes, g[D_MEM].frees));
        PUT("alloc_obj", Py_BuildValue("(KKK)", g[D_OBJ].n, g[D_OBJ].bytes, g[D_OBJ].frees));
        PUT("alloc_raw_nested", Py_BuildValue("(KKK)", g[D_RAW].n, g[D_RAW].bytes, g[D_RAW].frees));
        /* Blocks allocated during the span and still alive at its end. */
        if (ac.live_ok)
            PUT("alloc_retained", Py_BuildValue("(KK)", ac.live_n, ac.live_bytes));
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
