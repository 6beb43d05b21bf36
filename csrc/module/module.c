/* module.c - the registrar: PyInit, the module's definition, exception types,
 * and each binding's init hook (helpers.c holds what the bindings share). */
#include "module.h"

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
    if (hb_mod_stream_init(m, st) < 0) return -1;
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
    Py_VISIT(st->StreamType);
    Py_VISIT(st->StreamIterType);
    Py_VISIT(st->SSEventType);
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
    Py_CLEAR(st->StreamType);
    Py_CLEAR(st->StreamIterType);
    Py_CLEAR(st->SSEventType);
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

static PyModuleDef hb_moduledef = {
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
