/* helpers.h - what every binding file shares: the module state, the one
 * mapping from core codes to Python exceptions, and argument parsing and
 * converters (defined in helpers.c, which includes no binding's header). */
#ifndef HB_HELPERS_H
#define HB_HELPERS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "base/hb_common.h"

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
    PyTypeObject *StreamType; /* client_stream.c: Stream, its iterator, ServerSentEvent */
    PyTypeObject *StreamIterType;
    PyTypeObject *SSEventType;
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

#endif
