/* parser.c - private test surface of the HTTP/1.1 parser (httpbench._core).
 *
 *   parse_response_head(data, *, max_head=65536, max_headers=128, head_request=False)
 *   parse_request_head(data, *, max_head=65536, max_headers=128)
 *       -> None while the head is incomplete, else a dict (see the docstrings).
 *   ChunkedDecoder().feed(data) -> bytes; .done; .unconsumed
 *   parse_strerror(code) -> str; PE_* constants (the HB_PE_* codes)
 *
 * Every parse error raises httpbench.ProtocolError through hb_raise(), which
 * puts the HB_PE_* code on the exception as `.code`.
 */
#include "module.h"

#include "hb_parse.h"

#define STACK_HEADERS 256

typedef struct head_opts {
    Py_buffer buf;
    hb_parse_limits limits;
    int head_request;
} head_opts;

/* data positional; max_head, max_headers (and head_request) keyword-only. */
static int parse_args(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, int allow_head,
                      const char *fname, head_opts *o)
{
    if (nargs != 1) {
        PyErr_Format(PyExc_TypeError, "%s() takes exactly one positional argument (%zd given)",
                     fname, nargs);
        return -1;
    }
    o->limits.max_head = HB_PARSE_DEFAULT_MAX_HEAD;
    o->limits.max_headers = HB_PARSE_DEFAULT_MAX_HEADERS;
    o->head_request = 0;
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t i = 0; i < nkw; i++) {
        PyObject *key = PyTuple_GET_ITEM(kwnames, i);
        PyObject *val = args[nargs + i];
        if (PyUnicode_CompareWithASCIIString(key, "max_head") == 0 ||
            PyUnicode_CompareWithASCIIString(key, "max_headers") == 0) {
            Py_ssize_t v = PyLong_AsSsize_t(val);
            if (v == -1 && PyErr_Occurred()) return -1;
            if (v < 1) {
                PyErr_Format(PyExc_ValueError, "%U must be >= 1", key);
                return -1;
            }
            if (PyUnicode_CompareWithASCIIString(key, "max_head") == 0)
                o->limits.max_head = (size_t)v;
            else
                o->limits.max_headers = (size_t)v;
        } else if (allow_head && PyUnicode_CompareWithASCIIString(key, "head_request") == 0) {
            int t = PyObject_IsTrue(val);
            if (t < 0) return -1;
            o->head_request = t;
        } else {
            PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument '%U'", fname,
                         key);
            return -1;
        }
    }
    return PyObject_GetBuffer(args[0], &o->buf, PyBUF_SIMPLE);
}

/* The headers array: on the stack for ordinary limits, else PyMem. */
static hb_header *headers_array(hb_header *stack, size_t max_headers)
{
    if (max_headers <= STACK_HEADERS) return stack;
    if (max_headers > (size_t)PY_SSIZE_T_MAX / sizeof(hb_header)) {
        PyErr_NoMemory();
        return NULL;
    }
    hb_header *h = PyMem_Malloc(max_headers * sizeof(hb_header));
    if (!h) PyErr_NoMemory();
    return h;
}

static PyObject *headers_list(const hb_header *h, size_t n)
{
    PyObject *list = PyList_New((Py_ssize_t)n);
    if (!list) return NULL;
    for (size_t i = 0; i < n; i++) {
        PyObject *t = Py_BuildValue("(y#y#)", h[i].name, (Py_ssize_t)h[i].name_len, h[i].value,
                                    (Py_ssize_t)h[i].value_len);
        if (!t) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)i, t);
    }
    return list;
}

static const char *body_kind_name(enum hb_body_kind k)
{
    switch (k) {
    case HB_BODY_NONE: return "none";
    case HB_BODY_LENGTH: return "length";
    case HB_BODY_CHUNKED: return "chunked";
    case HB_BODY_UNTIL_CLOSE: return "close";
    }
    return "none";
}

/* Adds the framing keys shared by both head kinds; steals nothing. */
static int add_framing(PyObject *d, const hb_framing *f)
{
    PyObject *cl = f->content_length < 0 ? Py_NewRef(Py_None)
                                         : PyLong_FromLongLong((long long)f->content_length);
    if (!cl) return -1;
    int rc = PyDict_SetItemString(d, "content_length", cl);
    Py_DECREF(cl);
    if (rc < 0) return -1;
    if (PyDict_SetItemString(d, "chunked", f->chunked ? Py_True : Py_False) < 0) return -1;
    if (PyDict_SetItemString(d, "connection_close", f->connection_close ? Py_True : Py_False) < 0)
        return -1;
    if (PyDict_SetItemString(d, "transfer_encoding", f->transfer_encoding ? Py_True : Py_False) <
        0)
        return -1;
    return PyDict_SetItemString(d, "expect_continue", f->expect_continue ? Py_True : Py_False);
}

static int set_steal(PyObject *d, const char *key, PyObject *v)
{
    if (!v) return -1;
    int rc = PyDict_SetItemString(d, key, v);
    Py_DECREF(v);
    return rc;
}

PyDoc_STRVAR(parse_response_head_doc,
             "parse_response_head(data, *, max_head=65536, max_headers=128, head_request=False)\n"
             "--\n\n"
             "Parse an HTTP/1.x response head at the start of data (bytes-like).\n"
             "Returns None when the head is incomplete, else a dict with consumed,\n"
             "version ('HTTP/1.1'), status, reason (str, latin-1), headers (list of\n"
             "(name, value) bytes), content_length (None or int), chunked,\n"
             "connection_close, transfer_encoding, expect_continue, body_kind\n"
             "('none' | 'length' | 'chunked' | 'close') and interim.\n"
             "Raises httpbench.ProtocolError (with .code) on malformed input.");

static PyObject *py_parse_response_head(PyObject *m, PyObject *const *args, Py_ssize_t nargs,
                                        PyObject *kwnames)
{
    head_opts o;
    if (parse_args(args, nargs, kwnames, 1, "parse_response_head", &o) < 0) return NULL;
    hb_header stack[STACK_HEADERS];
    hb_header *h = headers_array(stack, o.limits.max_headers);
    PyObject *d = NULL;
    if (!h) goto out;
    hb_response_head r = {.headers = h, .num_headers = o.limits.max_headers};
    int rc = hb_parse_response_head(o.buf.buf, (size_t)o.buf.len, &r, &o.limits);
    if (rc == HB_AGAIN) {
        d = Py_NewRef(Py_None);
        goto out;
    }
    if (rc < 0) {
        hb_raise(hb_state(m), r.error, NULL);
        goto out;
    }
    d = PyDict_New();
    if (!d) goto out;
    enum hb_body_kind kind = hb_response_body_kind(&r, o.head_request);
    if (set_steal(d, "consumed", PyLong_FromLong(rc)) < 0 ||
        set_steal(d, "version", PyUnicode_FromFormat("HTTP/1.%d", r.minor_version)) < 0 ||
        set_steal(d, "status", PyLong_FromLong(r.status)) < 0 ||
        set_steal(d, "reason", PyUnicode_DecodeLatin1(r.reason, (Py_ssize_t)r.reason_len, NULL)) <
            0 ||
        set_steal(d, "headers", headers_list(h, r.num_headers)) < 0 || add_framing(d, &r.framing) ||
        set_steal(d, "body_kind", PyUnicode_FromString(body_kind_name(kind))) < 0 ||
        PyDict_SetItemString(d, "interim", hb_response_is_interim(&r) ? Py_True : Py_False) < 0)
        Py_CLEAR(d);
out:
    if (h && h != stack) PyMem_Free(h);
    PyBuffer_Release(&o.buf);
    return d;
}

PyDoc_STRVAR(parse_request_head_doc,
             "parse_request_head(data, *, max_head=65536, max_headers=128)\n"
             "--\n\n"
             "Parse an HTTP/1.x request head at the start of data (bytes-like).\n"
             "Returns None when the head is incomplete, else a dict with consumed,\n"
             "method, target (str, latin-1), version, headers, content_length,\n"
             "chunked, connection_close, transfer_encoding, expect_continue and\n"
             "body_kind ('none' | 'length' | 'chunked').\n"
             "Raises httpbench.ProtocolError (with .code) on malformed input.");

static PyObject *py_parse_request_head(PyObject *m, PyObject *const *args, Py_ssize_t nargs,
                                       PyObject *kwnames)
{
    head_opts o;
    if (parse_args(args, nargs, kwnames, 0, "parse_request_head", &o) < 0) return NULL;
    hb_header stack[STACK_HEADERS];
    hb_header *h = headers_array(stack, o.limits.max_headers);
    PyObject *d = NULL;
    if (!h) goto out;
    hb_request_head r = {.headers = h, .num_headers = o.limits.max_headers};
    int rc = hb_parse_request_head(o.buf.buf, (size_t)o.buf.len, &r, &o.limits);
    if (rc == HB_AGAIN) {
        d = Py_NewRef(Py_None);
        goto out;
    }
    if (rc < 0) {
        hb_raise(hb_state(m), r.error, NULL);
        goto out;
    }
    d = PyDict_New();
    if (!d) goto out;
    if (set_steal(d, "consumed", PyLong_FromLong(rc)) < 0 ||
        set_steal(d, "method", PyUnicode_DecodeLatin1(r.method, (Py_ssize_t)r.method_len, NULL)) <
            0 ||
        set_steal(d, "target", PyUnicode_DecodeLatin1(r.target, (Py_ssize_t)r.target_len, NULL)) <
            0 ||
        set_steal(d, "version", PyUnicode_FromFormat("HTTP/1.%d", r.minor_version)) < 0 ||
        set_steal(d, "headers", headers_list(h, r.num_headers)) < 0 || add_framing(d, &r.framing) ||
        set_steal(d, "body_kind", PyUnicode_FromString(body_kind_name(hb_request_body_kind(&r)))) <
            0)
        Py_CLEAR(d);
out:
    if (h && h != stack) PyMem_Free(h);
    PyBuffer_Release(&o.buf);
    return d;
}

static PyObject *py_parse_strerror(PyObject *m, PyObject *arg)
{
    (void)m;
    long code = PyLong_AsLong(arg);
    if (code == -1 && PyErr_Occurred()) return NULL;
    return PyUnicode_FromString(hb_parse_strerror((int)code));
}

/* ---- ChunkedDecoder ----------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    hb_chunked c;
    Py_ssize_t unconsumed;
} chunked_obj;

static int chunked_init(PyObject *self, PyObject *args, PyObject *kw)
{
    if (PyTuple_GET_SIZE(args) || (kw && PyDict_GET_SIZE(kw))) {
        PyErr_SetString(PyExc_TypeError, "ChunkedDecoder() takes no arguments");
        return -1;
    }
    chunked_obj *o = (chunked_obj *)self;
    hb_chunked_init(&o->c);
    o->unconsumed = 0;
    return 0;
}

PyDoc_STRVAR(chunked_feed_doc,
             "feed(data) -> bytes\n--\n\n"
             "Decode the next piece of a chunked body (split anywhere) and return the\n"
             "body bytes it completes. Once the last chunk and trailers are read, .done\n"
             "is True and .unconsumed counts the bytes of this data that follow the body\n"
             "(data[len(data) - unconsumed:]); later feeds return b'' and consume nothing.\n"
             "Raises httpbench.ProtocolError (with .code); errors are sticky.");

static PyObject *chunked_feed(PyObject *self, PyObject *arg)
{
    chunked_obj *o = (chunked_obj *)self;
    Py_buffer b;
    if (PyObject_GetBuffer(arg, &b, PyBUF_SIMPLE) < 0) return NULL;
    /* decoded data is never longer than its encoding: one allocation */
    PyObject *out = PyBytes_FromStringAndSize(NULL, b.len);
    if (!out) {
        PyBuffer_Release(&b);
        return NULL;
    }
    char *dst = PyBytes_AS_STRING(out);
    size_t pos = 0, len = (size_t)b.len, o_len = 0;
    const char *src = b.buf;
    while (pos < len && !o->c.done) {
        const char *d;
        size_t dl;
        ssize_t r = hb_chunked_feed(&o->c, src + pos, len - pos, &d, &dl);
        if (r < 0) {
            Py_DECREF(out);
            PyBuffer_Release(&b);
            return hb_raise(hb_state_from_type(Py_TYPE(self)), o->c.error, NULL);
        }
        if (dl) {
            memcpy(dst + o_len, d, dl);
            o_len += dl;
        }
        pos += (size_t)r;
    }
    o->unconsumed = (Py_ssize_t)(len - pos);
    PyBuffer_Release(&b);
    if (_PyBytes_Resize(&out, (Py_ssize_t)o_len) < 0) return NULL;
    return out;
}

static PyObject *chunked_get_done(PyObject *self, void *c)
{
    (void)c;
    return PyBool_FromLong(((chunked_obj *)self)->c.done);
}

static PyObject *chunked_get_unconsumed(PyObject *self, void *c)
{
    (void)c;
    return PyLong_FromSsize_t(((chunked_obj *)self)->unconsumed);
}

static PyMethodDef chunked_methods[] = {
    {"feed", chunked_feed, METH_O, chunked_feed_doc},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef chunked_getset[] = {
    {"done", chunked_get_done, NULL, "True once the last chunk and the trailers were read.", NULL},
    {"unconsumed", chunked_get_unconsumed, NULL,
     "Bytes at the end of the last feed() that follow the body (0 until done).", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static void chunked_dealloc(PyObject *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    tp->tp_free(self);
    Py_DECREF(tp);
}

static PyType_Slot chunked_slots[] = {
    {Py_tp_doc, "ChunkedDecoder()\n--\n\nIncremental decoder of a chunked transfer-coded body."},
    {Py_tp_init, chunked_init},
    {Py_tp_new, PyType_GenericNew},
    {Py_tp_dealloc, chunked_dealloc},
    {Py_tp_methods, chunked_methods},
    {Py_tp_getset, chunked_getset},
    {0, NULL},
};

static PyType_Spec chunked_spec = {
    .name = "httpbench._core.ChunkedDecoder",
    .basicsize = sizeof(chunked_obj),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE,
    .slots = chunked_slots,
};

static PyMethodDef parser_functions[] = {
    {"parse_response_head", (PyCFunction)(void (*)(void))py_parse_response_head,
     METH_FASTCALL | METH_KEYWORDS, parse_response_head_doc},
    {"parse_request_head", (PyCFunction)(void (*)(void))py_parse_request_head,
     METH_FASTCALL | METH_KEYWORDS, parse_request_head_doc},
    {"parse_strerror", py_parse_strerror, METH_O, "Short reason text of an HB_PE_* code."},
    {NULL, NULL, 0, NULL},
};

static const struct {
    const char *name;
    int code;
} pe_codes[] = {
    {"PE_BAD_VERSION", HB_PE_BAD_VERSION},
    {"PE_BAD_STATUS", HB_PE_BAD_STATUS},
    {"PE_BAD_CONTENT_LENGTH", HB_PE_BAD_CONTENT_LENGTH},
    {"PE_DUP_CONTENT_LENGTH", HB_PE_DUP_CONTENT_LENGTH},
    {"PE_BAD_CHUNK_SIZE", HB_PE_BAD_CHUNK_SIZE},
    {"PE_CHUNK_SIZE_OVERFLOW", HB_PE_CHUNK_SIZE_OVERFLOW},
    {"PE_NO_COLON", HB_PE_NO_COLON},
    {"PE_SPACE_BEFORE_COLON", HB_PE_SPACE_BEFORE_COLON},
    {"PE_BAD_HEADER_CHAR", HB_PE_BAD_HEADER_CHAR},
    {"PE_HEAD_TOO_LARGE", HB_PE_HEAD_TOO_LARGE},
    {"PE_TOO_MANY_HEADERS", HB_PE_TOO_MANY_HEADERS},
    {"PE_BAD_REQUEST_LINE", HB_PE_BAD_REQUEST_LINE},
    {"PE_BAD_CHUNK", HB_PE_BAD_CHUNK},
    {"PE_BAD_TRANSFER_ENCODING", HB_PE_BAD_TRANSFER_ENCODING},
    {"PE_BAD_LINE_ENDING", HB_PE_BAD_LINE_ENDING},
    {"PE_OBS_FOLD", HB_PE_OBS_FOLD},
    {"PE_TE_AND_CONTENT_LENGTH", HB_PE_TE_AND_CONTENT_LENGTH},
    {"PE_CHUNK_LINE_TOO_LONG", HB_PE_CHUNK_LINE_TOO_LONG},
    {"PE_TRAILERS_TOO_LARGE", HB_PE_TRAILERS_TOO_LARGE},
};

int hb_mod_parser_init(PyObject *m, hb_modstate *st)
{
    (void)st;
    if (PyModule_AddFunctions(m, parser_functions) < 0) return -1;
    for (size_t i = 0; i < sizeof pe_codes / sizeof pe_codes[0]; i++)
        if (PyModule_AddIntConstant(m, pe_codes[i].name, pe_codes[i].code) < 0) return -1;
    PyObject *tp = PyType_FromModuleAndSpec(m, &chunked_spec, NULL);
    if (!tp) return -1;
    int rc = PyModule_AddType(m, (PyTypeObject *)tp);
    Py_DECREF(tp);
    return rc;
}
