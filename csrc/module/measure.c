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
 *
 * This file is the timing loop and the function table; measure_int.h lists
 * the files the rest lives in.
 */
#include "measure_int.h"

#include "base/hb_clock.h"
#include "base/hb_hist.h"

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
    if (hb__ms_span_start(alloc, gc) < 0) {
        hb_hist_free(&h);
        return NULL;
    }
    rc = timing_loop(fn, argv, argc, n, deadline_of(dur), &h, &calls);
    PyObject *d = hb__ms_span_stop(rc < 0);
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
    if (hb__ms_span_start(alloc, gc) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *acct_stop(PyObject *m, PyObject *Py_UNUSED(ignored))
{
    (void)m;
    return hb__ms_span_stop(0);
}

static PyObject *acct_active(PyObject *m, PyObject *Py_UNUSED(ignored))
{
    (void)m;
    return PyBool_FromLong(hb__ms_span_active());
}

static PyObject *now_ns(PyObject *m, PyObject *Py_UNUSED(ignored))
{
    (void)m;
    return PyLong_FromUnsignedLongLong(hb_now_ns());
}

static PyObject *native_counters(PyObject *m, PyObject *Py_UNUSED(ignored))
{
    (void)m;
    hb__ms_mcount_fn rd = hb__ms_mcount_reader();
    if (rd == NULL) Py_RETURN_NONE;
    uint64_t v[3];
    rd(v, 3);
    return Py_BuildValue("(KKK)", v[0], v[1], v[2]);
}

static PyMethodDef measure_functions[] = {
    {"_measure_loop", (PyCFunction)(void (*)(void))measure_loop, METH_FASTCALL,
     "_measure_loop(fn, args, n, duration_ns, warmup_n, warmup_ns, alloc, gc) -> dict"},
    {"_acct_start", (PyCFunction)(void (*)(void))acct_start, METH_FASTCALL,
     "_acct_start(alloc, gc): begin an accounting span."},
    {"_acct_stop", acct_stop, METH_NOARGS, "_acct_stop() -> dict: end the span."},
    {"_acct_active", acct_active, METH_NOARGS, "True while a span is active."},
    {"_alloc_hooks_state", hb__ms_alloc_hooks_state, METH_NOARGS,
     "(installed, armed, still_installed) of the allocation hooks."},
    {"_native_counters", native_counters, METH_NOARGS,
     "(mallocs, bytes, frees) of the preloaded counter, or None."},
    {"now_ns", now_ns, METH_NOARGS, "CLOCK_MONOTONIC in ns."},
    {"_det_loop", (PyCFunction)(void (*)(void))hb__ms_det_loop, METH_FASTCALL,
     "_det_loop(fn, args, n, warmup_n, per_call) -> calls: callgrind/strace windows."},
    {"_callgrind_built", hb__ms_callgrind_built, METH_NOARGS,
     "True when built with valgrind/callgrind.h (client requests compiled in)."},
    {"_running_on_valgrind", hb__ms_running_on_valgrind, METH_NOARGS,
     "Valgrind nesting depth (0 when not under valgrind)."},
    {NULL, NULL, 0, NULL},
};

int hb_mod_measure_init(PyObject *m, hb_modstate *st)
{
    PyObject *tp = PyType_FromModuleAndSpec(m, &hb__ms_rec_spec, NULL);
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
