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
#include "hb_parse.h"

typedef struct hb_modstate {
    /* Exceptions (created in module.c). */
    PyObject *HttpbenchError;
    PyObject *ProtocolError;
    PyObject *ConnectError;
    PyObject *RequestTimeout;
    PyObject *TLSError;
    PyObject *RemoteClosed;
    PyObject *BodyTooLarge;
    PyObject *HTTP2NotSupported;
    PyObject *FeatureUnavailable;
    /* Heap types, set by each component's init hook. */
    PyTypeObject *HistogramType;
    PyTypeObject *ServerType;
    PyTypeObject *ClientType;
    PyTypeObject *ResponseType;
    PyTypeObject *EngineType;
    PyTypeObject *MeasureType;
    /* parser.c: interned result-dict keys and constant values, one tuple. */
    PyObject *parser_strings;
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

/* Positional-or-keyword METH_FASTCALL|METH_KEYWORDS arguments: the first
 * npos_max names may be passed by position, all by keyword; the first
 * nrequired must be given. out[i] is borrowed or NULL. TypeError otherwise. */
int hb_args(const char *fn, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
            const char *const *names, int n, int npos_max, int nrequired, PyObject **out);

/* Argument converters, one of each for every binding. o is the argument or
 * NULL when absent (hb_kw_only also gives NULL for None); absent leaves the
 * default. Each returns 0, or -1 with an exception set naming `name`. */
/* Truth value (any object). */
int hb_arg_bool(PyObject *o, int dflt, int *out);
/* An int in lo..hi (ValueError "name must be in lo..hi, got v"). */
int hb_arg_int(PyObject *o, int dflt, long lo, long hi, const char *name, int *out);
/* An int >= 0 (None is absent too); ValueError when negative or too large. */
int hb_arg_u64(PyObject *o, uint64_t dflt, const char *name, uint64_t *out);
/* A finite number >= 0. */
int hb_arg_double(PyObject *o, double dflt, const char *name, double *out);
/* Seconds: a number > 0, or None (*out = -1: no limit) when allow_none. */
int hb_arg_timeout(PyObject *o, int allow_none, const char *name, double *out);
/* A str as UTF-8 (*out NULL when absent or None; len may be NULL). */
int hb_arg_str(PyObject *o, const char *name, const char **out, Py_ssize_t *len);

/* request.c: Python headers (None, a mapping, or an iterable of (name, value)
 * pairs; names and values str, sent as UTF-8, or bytes) as hb_header entries
 * pointing into the objects. Returns the count; *out is `stack` when cap
 * suffices, else a PyMem block (free it when != stack); *keep keeps the
 * pointers valid (Py_XDECREF it after use). -1 with an exception. */
Py_ssize_t hb_py_headers(PyObject *headers, hb_header *stack, size_t cap, hb_header **out,
                         PyObject **keep);

/* request.c: split a str URL (TypeError / ValueError otherwise); *text and
 * *len are its UTF-8, which u points into (valid while url lives). 0 or -1. */
struct hb_url;
int hb_py_url(hb_modstate *st, PyObject *url, struct hb_url *u, const char **text, Py_ssize_t *len);

/* response.c: a new Response for the exchange's final head (copied), or NULL
 * with an exception; finish sets the timings, size and body (stolen) once
 * the body is read. */
struct hb_exchange;
PyObject *hb_py_response_new(hb_modstate *st, const struct hb_exchange *x, PyObject *url);
void hb_py_response_finish(PyObject *resp, const struct hb_exchange *x, PyObject *body);
/* A Response for an HTTP/2 (or, h3: HTTP/3) exchange: its header field records
 * (hb_client_h2.h), body stolen, version "HTTP/2" / "HTTP/3"; or NULL with an exception. */
struct hb_h2x;
PyObject *hb_py_response_h2(hb_modstate *st, const struct hb_h2x *x, PyObject *url, PyObject *body,
                            uint64_t t_connected, uint64_t t_tls_done, int h3);

/* Component init hooks: add types/functions to the module, return 0 or -1. */
int hb_mod_parser_init(PyObject *m, hb_modstate *st);
int hb_mod_hist_init(PyObject *m, hb_modstate *st);
int hb_mod_server_init(PyObject *m, hb_modstate *st);
int hb_mod_engine_init(PyObject *m, hb_modstate *st);
int hb_mod_client_init(PyObject *m, hb_modstate *st);
int hb_mod_response_init(PyObject *m, hb_modstate *st);
int hb_mod_request_init(PyObject *m, hb_modstate *st);
int hb_mod_measure_init(PyObject *m, hb_modstate *st);
int hb_mod_calibrate_init(PyObject *m, hb_modstate *st);

/* hist.c (hist owner): a new httpbench.Histogram holding a copy of the core
 * histogram h (engine/measure results), or NULL with an exception set. */
PyObject *hb_py_hist_from_core(hb_modstate *st, const hb_hist *h);
/* hist.c: the core histogram inside a Histogram object (borrowed, valid while
 * obj lives), or NULL with TypeError when obj is not a Histogram. */
const hb_hist *hb_py_hist_core(hb_modstate *st, PyObject *obj);

extern PyModuleDef hb_moduledef;

#endif
