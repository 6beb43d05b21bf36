/* module.h - shared declarations of the httpbench._core bindings.
 *
 * One extension, multi-phase init, all state in the module state (no C
 * globals holding Python objects). Each exposed object lives in its own file
 * with one init hook, called from module.c's exec slot.
 */
#ifndef HB_MODULE_H
#define HB_MODULE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "hb_common.h"
#include "hb_hist.h"

typedef struct hb_modstate {
    /* Exceptions (created in module.c). */
    PyObject *HttpbenchError;
    PyObject *ProtocolError;
    PyObject *ConnectError;
    PyObject *RequestTimeout;
    PyObject *TLSError;
    PyObject *RemoteClosed;
    /* Heap types, set by each component's init hook. */
    PyTypeObject *HistogramType;
    PyTypeObject *ServerType;
    PyTypeObject *ClientType;
    PyTypeObject *ResponseType;
    PyTypeObject *EngineType;
    PyTypeObject *MeasureType;
    PyObject *spare[8]; /* components needing more references keep them here;
                           taken: [7] parser.c (interned result-dict keys) */
} hb_modstate;

hb_modstate *hb_state(PyObject *module);
/* State reached from an instance of one of this module's heap types. */
hb_modstate *hb_state_from_type(PyTypeObject *tp);

/* The one mapping from core codes to Python exceptions. Sets the exception and
 * returns NULL. `detail` (may be NULL or empty) is the core's err text. */
PyObject *hb_raise(hb_modstate *st, int rc, const char *detail);

/* Keyword-only METH_FASTCALL|METH_KEYWORDS arguments: out[i] gets the value
 * passed for names[i] (borrowed; NULL when absent or None). TypeError for
 * positional or unknown arguments, naming fn. Returns 0 or -1. */
int hb_kw_only(const char *fn, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
               const char *const *names, int n, PyObject **out);

/* Component init hooks: add types/functions to the module, return 0 or -1. */
int hb_mod_parser_init(PyObject *m, hb_modstate *st);
int hb_mod_hist_init(PyObject *m, hb_modstate *st);
int hb_mod_server_init(PyObject *m, hb_modstate *st);
int hb_mod_engine_init(PyObject *m, hb_modstate *st);
int hb_mod_client_init(PyObject *m, hb_modstate *st);
int hb_mod_measure_init(PyObject *m, hb_modstate *st);

/* hist.c (hist owner): a new httpbench.Histogram holding a copy of the core
 * histogram h (engine/measure results), or NULL with an exception set. */
PyObject *hb_py_hist_from_core(hb_modstate *st, const hb_hist *h);
/* hist.c: the core histogram inside a Histogram object (borrowed, valid while
 * obj lives), or NULL with TypeError when obj is not a Histogram. */
const hb_hist *hb_py_hist_core(hb_modstate *st, PyObject *obj);

extern PyModuleDef hb_moduledef;

#endif
