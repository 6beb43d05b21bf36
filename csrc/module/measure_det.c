/* measure_det.c - deterministic counts: _det_loop runs fn in the window that
 * callgrind's client requests and strace's markers bound (see measure_int.h). */
#include "measure_int.h"

#include <unistd.h>

#ifdef HB_HAVE_CALLGRIND
#include <valgrind/callgrind.h>
#endif

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
PyObject *hb__ms_det_loop(PyObject *m, PyObject *const *a, Py_ssize_t nargs)
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

PyObject *hb__ms_callgrind_built(PyObject *m, PyObject *Py_UNUSED(ignored))
{
    (void)m;
#ifdef HB_HAVE_CALLGRIND
    Py_RETURN_TRUE;
#else
    Py_RETURN_FALSE;
#endif
}

PyObject *hb__ms_running_on_valgrind(PyObject *m, PyObject *Py_UNUSED(ignored))
{
    (void)m;
    return PyLong_FromLong(DET_ON_VALGRIND());
}
