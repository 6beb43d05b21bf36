/* measure_int.h - httpbench.measure()'s files and what they share:
 *
 *   measure.c          the timing loop and the module functions (_measure_loop,
 *                      _acct_*, now_ns, ...)
 *   measure_alloc.c    allocation hooks (PyMem_SetAllocator, three domains)
 *   measure_span.c     one accounting span: allocations, GC (gc.callbacks), CPU,
 *                      the preloaded malloc counter
 *   measure_det.c      deterministic counts: the window callgrind and strace see
 *   measure_recorder.c _Recorder, per-request timing for measure_async
 */
#ifndef HB_MEASURE_INT_H
#define HB_MEASURE_INT_H

#include "module.h"

#include <stdint.h>

/* ---- measure_alloc.c ---- */

enum { D_RAW = 0, D_MEM = 1, D_OBJ = 2, ND = 3 };

typedef struct {
    uint64_t n, bytes, frees;
} hb__ms_ctr;

/* The counters of the span so far: MEM/OBJ ([D_RAW]: RAW calls nested in
 * them), RAW, and the blocks allocated in the span still alive (live_ok 0
 * when the table could not grow: unknown). */
typedef struct {
    hb__ms_ctr gil[ND];
    hb__ms_ctr raw;
    uint64_t live_n, live_bytes;
    int live_ok;
} hb__ms_alloc_counts;

/* Install the wrapping hooks, or a new layer on top when the active one is
 * no longer the top of every domain. GIL held. 0, or -1 with an exception. */
int hb__ms_hooks_ensure(void);
/* Zero the counters and the live-block tables (hooks disarmed). */
void hb__ms_alloc_zero(void);
/* Start (1) or stop (0) counting. */
void hb__ms_arm(int on);
void hb__ms_alloc_snapshot(hb__ms_alloc_counts *c);
/* _alloc_hooks_state() -> (installed, armed, still_ours, layers) */
PyObject *hb__ms_alloc_hooks_state(PyObject *m, PyObject *ignored);

/* ---- measure_span.c ---- */

/* The preloaded counter's reader (LD_PRELOAD=..._mcount*.so), or NULL. */
typedef void (*hb__ms_mcount_fn)(uint64_t *out, int n);
hb__ms_mcount_fn hb__ms_mcount_reader(void);
/* Begin the one span (RuntimeError when one is active). 0, or -1. */
int hb__ms_span_start(int alloc, int gc);
/* Ends the span (always disarms, unregisters); returns a dict or NULL. With
 * discard set (error path) it returns Py_None after cleaning up, keeping any
 * pending exception intact. */
PyObject *hb__ms_span_stop(int discard);
int hb__ms_span_active(void);

/* ---- measure_det.c ---- */

PyObject *hb__ms_det_loop(PyObject *m, PyObject *const *a, Py_ssize_t nargs);
PyObject *hb__ms_callgrind_built(PyObject *m, PyObject *ignored);
PyObject *hb__ms_running_on_valgrind(PyObject *m, PyObject *ignored);

/* ---- measure_recorder.c ---- */

extern PyType_Spec hb__ms_rec_spec;

#endif
