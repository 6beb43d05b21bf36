/* calibrate.c - binding of hb_calib: the machine's wake-up cost, the working-set probe. */
#include "base/hb_calib.h"
#include "module.h"

static PyObject *calibrate_wakeup(PyObject *m, PyObject *const *args, Py_ssize_t nargs,
                                  PyObject *kwnames)
{
    static const char *const names[] = {"cpu_a", "cpu_b", "round_trips"};
    PyObject *o[3];
    if (hb_args("calibrate_wakeup", args, nargs, kwnames, names, 3, 3, 2, o) < 0) return NULL;
    int a, b, trips;
    if (hb_arg_int(o[0], -1, -1, 1023, "cpu_a", &a) < 0 ||
        hb_arg_int(o[1], -1, -1, 1023, "cpu_b", &b) < 0 ||
        hb_arg_int(o[2], 300, 1, HB_CALIB_MAX_TRIPS, "round_trips", &trips) < 0)
        return NULL;
    hb_calib_result r;
    char err[HB_ERR_LEN] = "";
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = hb_calib_pingpong(a, b, trips, &r, err);
    Py_END_ALLOW_THREADS if (rc < 0) return hb_raise(hb_state(m), rc, err);
    return Py_BuildValue("{s:K,s:K,s:K,s:K}", "round_trips", (unsigned long long)r.round_trips,
                         "rtt_median_ns", (unsigned long long)r.rtt_median_ns, "rtt_min_ns",
                         (unsigned long long)r.rtt_min_ns, "cpu_ns", (unsigned long long)r.cpu_ns);
}

static PyObject *calibrate_working_set(PyObject *m, PyObject *const *args, Py_ssize_t nargs,
                                       PyObject *kwnames)
{
    static const char *const names[] = {"bytes", "accesses", "seed"};
    PyObject *o[3];
    if (hb_args("calibrate_working_set", args, nargs, kwnames, names, 3, 3, 1, o) < 0) return NULL;
    uint64_t bytes, accesses, seed;
    if (hb_arg_u64(o[0], 0, "bytes", &bytes) < 0 ||
        hb_arg_u64(o[1], 200000, "accesses", &accesses) < 0 ||
        hb_arg_u64(o[2], 1, "seed", &seed) < 0)
        return NULL;
    if (bytes > HB_CALIB_MAX_WS_BYTES) bytes = HB_CALIB_MAX_WS_BYTES + 1; /* core says why */
    double ns = 0;
    char err[HB_ERR_LEN] = "";
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = hb_calib_working_set((size_t)bytes, accesses, seed, &ns, err);
    Py_END_ALLOW_THREADS if (rc < 0) return hb_raise(hb_state(m), rc, err);
    return PyFloat_FromDouble(ns);
}

static PyMethodDef calibrate_functions[] = {
    {"calibrate_working_set", (PyCFunction)(void (*)(void))calibrate_working_set,
     METH_FASTCALL | METH_KEYWORDS,
     "calibrate_working_set(bytes, accesses=200000, seed=1) -> float\n\n"
     "ns per step of a dependent random walk through `bytes` of memory (one step per cache "
     "line): the latency of the cache level holding a working set that size."},
    {"calibrate_wakeup", (PyCFunction)(void (*)(void))calibrate_wakeup,
     METH_FASTCALL | METH_KEYWORDS,
     "calibrate_wakeup(cpu_a, cpu_b, round_trips=300) -> dict\n\n"
     "Ping-pong one byte between a thread on cpu_a and one on cpu_b (-1: not pinned), "
     "each blocking between turns: round_trips, rtt_median_ns, rtt_min_ns, cpu_ns (both "
     "threads. CPU per round trip). ValueError when a CPU is not allowed."},
    {NULL, NULL, 0, NULL},
};

int hb_mod_calibrate_init(PyObject *m, hb_modstate *st)
{
    (void)st;
    return PyModule_AddFunctions(m, calibrate_functions);
}
