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

#include "http/hb_parse.h"

#define STACK_HEADERS 256

/* Interned dict keys and constant values, made once at init and kept as one
 * tuple in the module state (st->parser_strings): building the result
 * dict then costs no string creation or hashing. */
enum {
    K_CONSUMED,
    K_VERSION,
    K_STATUS,
    K_REASON,
    K_HEADERS,
    K_CONTENT_LENGTH,
    K_CHUNKED,
    K_CONNECTION_CLOSE,
    K_TRANSFER_ENCODING,
    K_EXPECT_CONTINUE,
    K_BODY_KIND,
    K_INTERIM,
    K_METHOD,
    K_TARGET,
    V_HTTP10,
    V_HTTP11,
    V_NONE,
    V_LENGTH,
    V_CHUNKED,
    V_CLOSE,
    N_STRINGS
};
static const char *const string_text[N_STRINGS] = {
    "consumed",
    "version",
    "status",
    "reason",
    "headers",
    "content_length",
    "chunked",
    "connection_close",
    "transfer_encoding",
    "expect_continue",
    "body_kind",
    "interim",
    "method",
    "target",
    "HTTP/1.0",
    "HTTP/1.1",
    "none",
    "length",
    "chunked",
    "close",
};

static PyObject *S(hb_modstate *st, int i)
{
    return PyTuple_GET_ITEM(st->parser_strings, i);
}

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
            if (hb_arg_bool(val, 0, &o->head_request) < 0) return -1;
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
        PyObject *t = PyTuple_New(2);
        if (!t) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)i, t);
        PyObject *k = PyBytes_FromStringAndSize(h[i].name, (Py_ssize_t)h[i].name_len);
        PyObject *v = k ? PyBytes_FromStringAndSize(h[i].value, (Py_ssize_t)h[i].value_len) : NULL;
        if (!v) {
            Py_XDECREF(k);
            Py_DECREF(list);
            return NULL;
        }
        PyTuple_SET_ITEM(t, 0, k);
        PyTuple_SET_ITEM(t, 1, v);
    }
    return list;
}

static PyObject *body_kind_str(hb_modstate *st, enum hb_body_kind k)
{
    switch (k) {
    case HB_BODY_LENGTH:
        return S(st, V_LENGTH);
    case HB_BODY_CHUNKED:
        return S(st, V_CHUNKED);
    case HB_BODY_UNTIL_CLOSE:
        return S(st, V_CLOSE);
    case HB_BODY_NONE:
        break;
    }
    return S(st, V_NONE);
}

static PyObject *version_str(hb_modstate *st, int minor)
{
    if (minor == 0 || minor == 1) return Py_NewRef(S(st, minor ? V_HTTP11 : V_HTTP10));
    return PyUnicode_FromFormat("HTTP/1.%d", minor);
}

/* d[key] = v, stealing v (NULL v means an error is already set). */
static int set_steal(PyObject *d, PyObject *key, PyObject *v)
{
    if (!v) return -1;
    int rc = PyDict_SetItem(d, key, v);
    Py_DECREF(v);
    return rc;
}

static int set_bool(PyObject *d, PyObject *key, int b)
{
    return PyDict_SetItem(d, key, b ? Py_True : Py_False);
}

/* Adds the framing keys shared by both head kinds. */
static int add_framing(hb_modstate *st, PyObject *d, const hb_framing *f)
{
    PyObject *cl = f->content_length < 0 ? Py_NewRef(Py_None)
                                         : PyLong_FromLongLong((long long)f->content_length);
    if (set_steal(d, S(st, K_CONTENT_LENGTH), cl) < 0 ||
        set_bool(d, S(st, K_CHUNKED), f->chunked) < 0 ||
        set_bool(d, S(st, K_CONNECTION_CLOSE), f->connection_close) < 0 ||
        set_bool(d, S(st, K_TRANSFER_ENCODING), f->transfer_encoding) < 0 ||
        set_bool(d, S(st, K_EXPECT_CONTINUE), f->expect_continue) < 0)
        return -1;
    return 0;
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

/* Both heads: the options, the header array, the parse and the dict, whose
 * keys follow each kind's docstring order. */
static PyObject *parse_head(PyObject *m, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                            int response)
{
    head_opts o;
    if (parse_args(args, nargs, kwnames, response,
                   response ? "parse_response_head" : "parse_request_head", &o) < 0)
        return NULL;
    hb_header stack[STACK_HEADERS];
    hb_header *h = headers_array(stack, o.limits.max_headers);
    PyObject *d = NULL;
    if (!h) goto out;
    hb_response_head rs = {.headers = h, .num_headers = o.limits.max_headers};
    hb_request_head rq = {.headers = h, .num_headers = o.limits.max_headers};
    int rc = response ? hb_parse_response_head(o.buf.buf, (size_t)o.buf.len, &rs, &o.limits)
                      : hb_parse_request_head(o.buf.buf, (size_t)o.buf.len, &rq, &o.limits);
    if (rc == HB_AGAIN) {
        d = Py_NewRef(Py_None);
        goto out;
    }
    if (rc < 0) {
        hb_raise(hb_state(m), response ? rs.error : rq.error, NULL);
        goto out;
    }
    hb_modstate *st = hb_state(m);
    d = PyDict_New();
    if (!d) goto out;
    int minor = response ? rs.minor_version : rq.minor_version;
    size_t nh = response ? rs.num_headers : rq.num_headers;
    enum hb_body_kind kind =
        response ? hb_response_body_kind(&rs, o.head_request) : hb_request_body_kind(&rq);
    if (set_steal(d, S(st, K_CONSUMED), PyLong_FromLong(rc)) < 0 ||
        (!response &&
         (set_steal(d, S(st, K_METHOD),
                    PyUnicode_DecodeLatin1(rq.method, (Py_ssize_t)rq.method_len, NULL)) < 0 ||
          set_steal(d, S(st, K_TARGET),
                    PyUnicode_DecodeLatin1(rq.target, (Py_ssize_t)rq.target_len, NULL)) < 0)) ||
        set_steal(d, S(st, K_VERSION), version_str(st, minor)) < 0 ||
        (response &&
         (set_steal(d, S(st, K_STATUS), PyLong_FromLong(rs.status)) < 0 ||
          set_steal(d, S(st, K_REASON),
                    PyUnicode_DecodeLatin1(rs.reason, (Py_ssize_t)rs.reason_len, NULL)) < 0)) ||
        set_steal(d, S(st, K_HEADERS), headers_list(h, nh)) < 0 ||
        add_framing(st, d, response ? &rs.framing : &rq.framing) < 0 ||
        PyDict_SetItem(d, S(st, K_BODY_KIND), body_kind_str(st, kind)) < 0 ||
        (response && set_bool(d, S(st, K_INTERIM), hb_response_is_interim(&rs)) < 0))
        Py_CLEAR(d);
out:
    if (h && h != stack) PyMem_Free(h);
    PyBuffer_Release(&o.buf);
    return d;
}

static PyObject *py_parse_response_head(PyObject *m, PyObject *const *args, Py_ssize_t nargs,
                                        PyObject *kwnames)
{
    return parse_head(m, args, nargs, kwnames, 1);
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
    return parse_head(m, args, nargs, kwnames, 0);
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
    PyObject_HEAD hb_chunked c;
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
    PyObject *strings = PyTuple_New(N_STRINGS);
    if (!strings) return -1;
    for (int i = 0; i < N_STRINGS; i++) {
        PyObject *u = PyUnicode_InternFromString(string_text[i]);
        if (!u) {
            Py_DECREF(strings);
            return -1;
        }
        PyTuple_SET_ITEM(strings, i, u);
    }
    Py_XSETREF(st->parser_strings, strings);
    if (PyModule_AddFunctions(m, parser_functions) < 0) return -1;
    for (size_t i = 0; i < sizeof pe_codes / sizeof pe_codes[0]; i++)
        if (PyModule_AddIntConstant(m, pe_codes[i].name, pe_codes[i].code) < 0) return -1;
    PyObject *tp = PyType_FromModuleAndSpec(m, &chunked_spec, NULL);
    if (!tp) return -1;
    int rc = PyModule_AddType(m, (PyTypeObject *)tp);
    Py_DECREF(tp);
    return rc;
}
