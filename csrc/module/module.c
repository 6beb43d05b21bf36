/* module.c - PyInit, module state, exception types, and the one place that
 * turns core error codes into Python exceptions. */
#include "module.h"

#include <errno.h>
#include <string.h>

hb_modstate *hb_state(PyObject *module)
{
    return (hb_modstate *)PyModule_GetState(module);
}

hb_modstate *hb_state_from_type(PyTypeObject *tp)
{
#if PY_VERSION_HEX >= 0x030B0000
    PyObject *m = PyType_GetModuleByDef(tp, &hb_moduledef);
#else
    PyObject *m = PyType_GetModule(tp); /* 3.10: our types are not subclassed */
#endif
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
    if (hb_is_protocol_error(rc)) {
        return raise_with_code(st->ProtocolError, text, rc);
    } else if (hb_is_h2_error(rc)) {
        /* Asked for HTTP/2, the server does not speak it: its own type (a
         * ProtocolError), from Client and bench() alike. */
        return raise_with_code(rc == HB_E_NO_H2 ? st->HTTP2NotSupported : st->ProtocolError, text,
                               rc);
    } else if (hb_is_tls_error(rc) || rc == HB_E_H3_HANDSHAKE) {
        exc = st->TLSError;
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

static PyObject *new_exc(PyObject *m, const char *name, const char *doc, PyObject *bases)
{
    char full[96];
    PyOS_snprintf(full, sizeof full, "httpbench.%s", name);
    PyObject *e = PyErr_NewExceptionWithDoc(full, doc, bases, NULL);
    if (e == NULL) return NULL;
    if (PyModule_AddObjectRef(m, name, e) < 0) {
        Py_DECREF(e);
        return NULL;
    }
    return e;
}

static int add_exceptions(PyObject *m, hb_modstate *st)
{
    st->HttpbenchError = new_exc(m, "HttpbenchError", "Base class of every httpbench error.", NULL);
    if (!st->HttpbenchError) return -1;
    PyObject *b;

    b = PyTuple_Pack(1, st->HttpbenchError);
    if (!b) return -1;
    st->ProtocolError = new_exc(m, "ProtocolError", "Malformed or unsupported HTTP message.", b);
    st->RemoteClosed = new_exc(m, "RemoteClosed",
                               "The peer closed the connection before or during a response.", b);
    st->BodyTooLarge =
        new_exc(m, "BodyTooLarge", "A response body over the client's max_body (or memory).", b);
    st->FeatureUnavailable = new_exc(
        m, "FeatureUnavailable",
        "This build of httpbench lacks the feature (its library was missing when it was built).",
        b);
    Py_DECREF(b);
    if (!st->ProtocolError || !st->RemoteClosed || !st->BodyTooLarge || !st->FeatureUnavailable)
        return -1;
    b = PyTuple_Pack(1, st->ProtocolError);
    if (!b) return -1;
    st->HTTP2NotSupported =
        new_exc(m, "HTTP2NotSupported",
                "HTTP/2 was asked for and the server does not speak it (ALPN or h2c preface).", b);
    Py_DECREF(b);
    if (!st->HTTP2NotSupported) return -1;

    st->TLSError = NULL;
    b = PyTuple_Pack(2, st->HttpbenchError, PyExc_OSError);
    if (!b) return -1;
    st->TLSError = new_exc(m, "TLSError", "TLS handshake or certificate verification failed.", b);
    Py_DECREF(b);
    if (!st->TLSError) return -1;

    b = PyTuple_Pack(2, st->HttpbenchError, PyExc_ConnectionError);
    if (!b) return -1;
    st->ConnectError = new_exc(m, "ConnectError", "Could not connect to the server.", b);
    Py_DECREF(b);
    if (!st->ConnectError) return -1;

    b = PyTuple_Pack(2, st->HttpbenchError, PyExc_TimeoutError);
    if (!b) return -1;
    st->RequestTimeout =
        new_exc(m, "RequestTimeout", "The request's deadline passed (connect to last byte).", b);
    Py_DECREF(b);
    if (!st->RequestTimeout) return -1;
    return 0;
}

/* Test hook: raise the exception the mapping gives for a core code. */
static PyObject *raise_code(PyObject *m, PyObject *arg)
{
    long rc = PyLong_AsLong(arg);
    if (rc == -1 && PyErr_Occurred()) return NULL;
    return hb_raise(hb_state(m), (int)rc, NULL);
}

static int hb_exec(PyObject *m)
{
    hb_modstate *st = hb_state(m);
    if (add_exceptions(m, st) < 0) return -1;
    if (hb_mod_parser_init(m, st) < 0) return -1;
    if (hb_mod_hist_init(m, st) < 0) return -1;
    if (hb_mod_server_init(m, st) < 0) return -1;
    if (hb_mod_engine_init(m, st) < 0) return -1;
    if (hb_mod_request_init(m, st) < 0) return -1;
    if (hb_mod_response_init(m, st) < 0) return -1;
    if (hb_mod_client_init(m, st) < 0) return -1;
    if (hb_mod_measure_init(m, st) < 0) return -1;
    if (hb_mod_calibrate_init(m, st) < 0) return -1;
    return 0;
}

static int hb_traverse(PyObject *m, visitproc visit, void *arg)
{
    hb_modstate *st = hb_state(m);
    Py_VISIT(st->HttpbenchError);
    Py_VISIT(st->ProtocolError);
    Py_VISIT(st->ConnectError);
    Py_VISIT(st->RequestTimeout);
    Py_VISIT(st->TLSError);
    Py_VISIT(st->RemoteClosed);
    Py_VISIT(st->BodyTooLarge);
    Py_VISIT(st->HTTP2NotSupported);
    Py_VISIT(st->FeatureUnavailable);
    Py_VISIT(st->HistogramType);
    Py_VISIT(st->ServerType);
    Py_VISIT(st->ClientType);
    Py_VISIT(st->ResponseType);
    Py_VISIT(st->EngineType);
    Py_VISIT(st->MeasureType);
    Py_VISIT(st->parser_strings);
    return 0;
}

static int hb_clear(PyObject *m)
{
    hb_modstate *st = hb_state(m);
    Py_CLEAR(st->HttpbenchError);
    Py_CLEAR(st->ProtocolError);
    Py_CLEAR(st->ConnectError);
    Py_CLEAR(st->RequestTimeout);
    Py_CLEAR(st->TLSError);
    Py_CLEAR(st->RemoteClosed);
    Py_CLEAR(st->BodyTooLarge);
    Py_CLEAR(st->HTTP2NotSupported);
    Py_CLEAR(st->FeatureUnavailable);
    Py_CLEAR(st->HistogramType);
    Py_CLEAR(st->ServerType);
    Py_CLEAR(st->ClientType);
    Py_CLEAR(st->ResponseType);
    Py_CLEAR(st->EngineType);
    Py_CLEAR(st->MeasureType);
    Py_CLEAR(st->parser_strings);
    return 0;
}

static void hb_free(void *m)
{
    hb_clear((PyObject *)m);
}

static PyMethodDef hb_methods[] = {
    {"_raise_code", raise_code, METH_O, "Raise the exception mapped from a core error code."},
    {NULL, NULL, 0, NULL},
};

static PyModuleDef_Slot hb_slots[] = {
    {Py_mod_exec, hb_exec},
    {0, NULL},
};

PyModuleDef hb_moduledef = {
    PyModuleDef_HEAD_INIT,
    .m_name = "httpbench._core",
    .m_doc = "httpbench's C core: parser, histogram, server, load generator, client, measure.",
    .m_size = sizeof(hb_modstate),
    .m_methods = hb_methods,
    .m_slots = hb_slots,
    .m_traverse = hb_traverse,
    .m_clear = hb_clear,
    .m_free = hb_free,
};

PyMODINIT_FUNC PyInit__core(void)
{
    return PyModuleDef_Init(&hb_moduledef);
}
