/* helpers.c - what every binding file uses: the module state, the one place
 * that turns core error codes into Python exceptions, and argument parsing
 * and converters. Knows no binding and not the registrar (module.c). */
#include "helpers.h"

#include <errno.h>
#include <string.h>

#include "http/hb_sse.h"

hb_modstate *hb_state(PyObject *module)
{
    return (hb_modstate *)PyModule_GetState(module);
}

hb_modstate *hb_state_from_type(PyTypeObject *tp)
{
    /* our types cannot be subclassed (no Py_TPFLAGS_BASETYPE): tp is the
     * module's own type, and this needs no reference to the module's def */
    PyObject *m = PyType_GetModule(tp);
    if (m == NULL) return NULL;
    return hb_state(m);
}

/* Raise type(text) with the core code on it (.code), so callers can tell
 * protocol errors apart without matching the text. */
static PyObject *raise_with_code(PyObject *type, const char *text, int rc)
{
    PyObject *inst = PyObject_CallFunction(type, "s", text);
    if (inst) {
        PyObject *code = PyLong_FromLong(rc);
        if (code && PyObject_SetAttrString(inst, "code", code) == 0) PyErr_SetObject(type, inst);
        Py_XDECREF(code);
        Py_DECREF(inst);
    }
    return NULL;
}

PyObject *hb_raise(hb_modstate *st, int rc, const char *detail)
{
    const char *text = (detail && detail[0]) ? detail : hb_strerror(rc);
    PyObject *exc;
    if (hb_is_protocol_error(rc) || rc == HB_SSE_E_LINE) {
        return raise_with_code(st->ProtocolError, text, rc);
    } else if (hb_is_h2_error(rc)) {
        /* Asked for HTTP/2, the server does not speak it: its own type (a
         * ProtocolError), from Client and bench() alike. */
        return raise_with_code(rc == HB_E_NO_H2 ? st->HTTP2NotSupported : st->ProtocolError, text,
                               rc);
    } else if (hb_is_tls_error(rc) || rc == HB_E_H3_HANDSHAKE) {
        /* .code tells a certificate that failed verification (E_TLS_VERIFY) from the rest */
        return raise_with_code(st->TLSError, text, rc);
    } else if (hb_is_h3_error(rc)) {
        /* QUIC/HTTP/3: no answer -> ConnectError, the rest are protocol errors */
        if (rc == HB_E_H3_TIMEOUT)
            exc = st->ConnectError;
        else
            return raise_with_code(st->ProtocolError, text, rc);
    } else {
        switch (rc) {
        case HB_E_TIMEOUT:
        case -ETIMEDOUT:
            exc = st->RequestTimeout;
            break;
        case HB_E_CLOSED:
        case -ECONNRESET:
        case -EPIPE:
            exc = st->RemoteClosed;
            break;
        case HB_E_TOO_LARGE:
            exc = st->BodyTooLarge;
            break;
        case HB_E_CONNECT:
        case -ECONNREFUSED:
        case -EHOSTUNREACH:
        case -ENETUNREACH:
        case -EADDRNOTAVAIL:
            exc = st->ConnectError;
            break;
        case HB_E_NOMEM:
        case -ENOMEM:
            return PyErr_NoMemory();
        case HB_E_INVALID:
        case -EINVAL:
            exc = PyExc_ValueError;
            break;
        case HB_E_INTERRUPTED:
            exc = PyExc_KeyboardInterrupt;
            break;
        case HB_E_UNSUPPORTED:
            exc = st->FeatureUnavailable;
            break;
        default:
            if (rc < 0 && rc > -4096 && rc != HB_ERROR && rc != HB_AGAIN) {
                PyObject *args = Py_BuildValue("(is)", -rc, text);
                if (args) {
                    PyErr_SetObject(PyExc_OSError, args);
                    Py_DECREF(args);
                }
                return NULL;
            }
            exc = st->HttpbenchError;
        }
    }
    if (exc == st->ConnectError && rc < 0 && rc > -4096) {
        /* ConnectError is an OSError: keep errno so ConnectionRefusedError
         * style checks on .errno work. */
        PyObject *args = Py_BuildValue("(is)", -rc, text);
        if (args) {
            PyErr_SetObject(exc, args);
            Py_DECREF(args);
        }
        return NULL;
    }
    PyErr_SetString(exc, text);
    return NULL;
}

int hb_kw_only(const char *fn, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
               const char *const *names, int n, PyObject **out)
{
    for (int i = 0; i < n; i++)
        out[i] = NULL;
    if (nargs) {
        PyErr_Format(PyExc_TypeError, "%s() takes keyword arguments only", fn);
        return -1;
    }
    Py_ssize_t nk = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t k = 0; k < nk; k++) {
        const char *name = PyUnicode_AsUTF8(PyTuple_GET_ITEM(kwnames, k));
        if (!name) return -1;
        int found = -1;
        for (int i = 0; i < n; i++)
            if (strcmp(name, names[i]) == 0) found = i;
        if (found < 0) {
            PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument '%s'", fn, name);
            return -1;
        }
        out[found] = args[nargs + k] == Py_None ? NULL : args[nargs + k];
    }
    return 0;
}

int hb_args(const char *fname, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
            const char *const *names, int nnames, int npos_max, int nrequired, PyObject **out)
{
    for (int i = 0; i < nnames; i++)
        out[i] = NULL;
    if (nargs > npos_max) {
        PyErr_Format(PyExc_TypeError, "%s() takes at most %d positional arguments (%zd given)",
                     fname, npos_max, nargs);
        return -1;
    }
    for (Py_ssize_t i = 0; i < nargs; i++)
        out[i] = args[i];
    if (kwnames) {
        Py_ssize_t nk = PyTuple_GET_SIZE(kwnames);
        for (Py_ssize_t k = 0; k < nk; k++) {
            PyObject *key = PyTuple_GET_ITEM(kwnames, k);
            int found = -1;
            for (int i = 0; i < nnames; i++) {
                if (PyUnicode_CompareWithASCIIString(key, names[i]) == 0) {
                    found = i;
                    break;
                }
            }
            if (found < 0) {
                PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument %R", fname,
                             key);
                return -1;
            }
            if (out[found]) {
                PyErr_Format(PyExc_TypeError, "%s() got multiple values for argument '%s'", fname,
                             names[found]);
                return -1;
            }
            out[found] = args[nargs + k];
        }
    }
    for (int i = 0; i < nrequired; i++) {
        if (!out[i]) {
            PyErr_Format(PyExc_TypeError, "%s() missing required argument '%s'", fname, names[i]);
            return -1;
        }
    }
    return 0;
}

int hb_arg_bool(PyObject *o, int dflt, int *out)
{
    int v = o ? PyObject_IsTrue(o) : dflt;
    if (v < 0) return -1;
    *out = v;
    return 0;
}

int hb_arg_int(PyObject *o, int dflt, long lo, long hi, const char *name, int *out)
{
    if (!o) {
        *out = dflt;
        return 0;
    }
    long v = PyLong_AsLong(o);
    if (v == -1 && PyErr_Occurred()) return -1;
    if (v < lo || v > hi) {
        PyErr_Format(PyExc_ValueError, "%s must be in %ld..%ld, got %ld", name, lo, hi, v);
        return -1;
    }
    *out = (int)v;
    return 0;
}

int hb_arg_u64(PyObject *o, uint64_t dflt, const char *name, uint64_t *out)
{
    if (!o || o == Py_None) {
        *out = dflt;
        return 0;
    }
    unsigned long long v = PyLong_AsUnsignedLongLong(o);
    if (v == (unsigned long long)-1 && PyErr_Occurred()) {
        if (PyErr_ExceptionMatches(PyExc_OverflowError)) {
            PyErr_Clear();
            PyErr_Format(PyExc_ValueError, "%s must be an int >= 0", name);
        }
        return -1;
    }
    *out = v;
    return 0;
}

int hb_arg_double(PyObject *o, double dflt, const char *name, double *out)
{
    if (!o) {
        *out = dflt;
        return 0;
    }
    double v = PyFloat_AsDouble(o);
    if (v == -1.0 && PyErr_Occurred()) return -1;
    if (!(v >= 0) || v > 1e12) {
        PyErr_Format(PyExc_ValueError, "%s must be a finite number >= 0", name);
        return -1;
    }
    *out = v;
    return 0;
}

int hb_arg_timeout(PyObject *o, int allow_none, const char *name, double *out)
{
    if (!o) return 0;
    if (o == Py_None) {
        if (!allow_none) {
            PyErr_Format(PyExc_ValueError, "%s must be a number of seconds", name);
            return -1;
        }
        *out = -1;
        return 0;
    }
    double v = PyFloat_AsDouble(o);
    if (v == -1.0 && PyErr_Occurred()) return -1;
    if (!(v > 0) || v > 1e9) {
        PyErr_Format(PyExc_ValueError, "%s must be > 0 seconds (got %R)", name, o);
        return -1;
    }
    *out = v;
    return 0;
}

int hb_arg_str(PyObject *o, const char *name, const char **out, Py_ssize_t *len)
{
    *out = NULL;
    if (len) *len = 0;
    if (!o || o == Py_None) return 0;
    if (!PyUnicode_Check(o)) {
        PyErr_Format(PyExc_TypeError, "%s must be a str, not %.100s", name, Py_TYPE(o)->tp_name);
        return -1;
    }
    *out = PyUnicode_AsUTF8AndSize(o, len);
    return *out ? 0 : -1;
}
