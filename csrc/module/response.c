/* response.c - httpbench.Response: the result of a httpbench.Client request
 * (client.c). The final response head is stored inline as received (HTTP/2:
 * its header fields as decoded, hb_client_mux.h's records); reason, headers
 * and timings are built only when accessed. */
#include "module.h"

#include <string.h>
#include <structmember.h>

#include "client/hb_client.h"
#include "client/hb_client_mux.h"

/* Variable-size: the final response head is stored inline (ob_size bytes at
 * `head`), so a response costs one allocation, not two. */
typedef struct {
    PyObject_VAR_HEAD int status;
    int minor;
    int reused;
    unsigned parse_flags; /* the head was parsed with these: so is every re-parse */
    unsigned tolerated;
    int h2; /* 2 or 3: received over HTTP/2 or HTTP/3: head holds field records, no status line */
    Py_ssize_t reason_off, reason_len; /* within head */
    PyObject *body;                    /* bytes */
    PyObject *url;
    PyObject *headers; /* cached Headers, built on first access */
    unsigned long long size;
    uint64_t t_start, t_connected, t_tls_done, t_first_byte, t_done;
    char head[1];
} ResponseObject;

static void resp_dealloc(PyObject *o)
{
    ResponseObject *r = (ResponseObject *)o;
    PyTypeObject *tp = Py_TYPE(o);
    Py_XDECREF(r->body);
    Py_XDECREF(r->url);
    Py_XDECREF(r->headers);
    tp->tp_free(o);
    Py_DECREF(tp);
}

static PyObject *resp_reason(PyObject *o, void *c)
{
    (void)c;
    ResponseObject *r = (ResponseObject *)o;
    return PyUnicode_DecodeLatin1(r->head + r->reason_off, r->reason_len, NULL);
}

static PyObject *resp_version(PyObject *o, void *c)
{
    (void)c;
    ResponseObject *r = (ResponseObject *)o;
    if (r->h2) return PyUnicode_FromString(r->h2 == 3 ? "HTTP/3" : "HTTP/2");
    return PyUnicode_FromString(r->minor ? "HTTP/1.1" : "HTTP/1.0");
}

/* Append (name, value) as str (Latin-1, as sent). 0 or -1. */
static int add_field(PyObject *list, const hb_header *f)
{
    PyObject *t =
        Py_BuildValue("(NN)", PyUnicode_DecodeLatin1(f->name, (Py_ssize_t)f->name_len, NULL),
                      PyUnicode_DecodeLatin1(f->value, (Py_ssize_t)f->value_len, NULL));
    if (!t) return -1;
    int rc = PyList_Append(list, t);
    Py_DECREF(t);
    return rc;
}

static PyObject *resp_headers(PyObject *o, void *c)
{
    (void)c;
    ResponseObject *r = (ResponseObject *)o;
    if (r->headers) return Py_NewRef(r->headers);
    PyObject *list = PyList_New(0);
    if (!list) return NULL;
    hb_header f;
    size_t len = (size_t)Py_SIZE(r), off = 0;
    if (r->h2) {
        while (hb_mx_field_next(r->head, len, &off, &f))
            if (add_field(list, &f) < 0) goto fail;
    } else {
        hb_header hs[HB_CLIENT_MAX_HEADERS];
        hb_response_head h;
        memset(&h, 0, sizeof h);
        h.headers = hs;
        h.num_headers = HB_CLIENT_MAX_HEADERS;
        if (hb_parse_response_head_ex(r->head, len, &h, NULL, r->parse_flags) < 0) {
            /* cannot happen: it parsed before */
            PyErr_SetString(PyExc_RuntimeError, "stored response head no longer parses");
            goto fail;
        }
        for (size_t i = 0; i < h.num_headers; i++)
            if (add_field(list, &hs[i]) < 0) goto fail;
    }
    PyObject *mod = PyImport_ImportModule("httpbench._client");
    PyObject *cls = mod ? PyObject_GetAttrString(mod, "Headers") : NULL;
    Py_XDECREF(mod);
    PyObject *res = cls ? PyObject_CallOneArg(cls, list) : NULL;
    Py_XDECREF(cls);
    Py_DECREF(list);
    if (res) r->headers = Py_NewRef(res);
    return res;
fail:
    Py_DECREF(list);
    return NULL;
}

static PyObject *secs(uint64_t a, uint64_t b)
{
    return PyFloat_FromDouble(a && b > a ? (double)(b - a) / 1e9 : 0.0);
}

static PyObject *resp_elapsed(PyObject *o, void *c)
{
    (void)c;
    ResponseObject *r = (ResponseObject *)o;
    return secs(r->t_start, r->t_done);
}
static PyObject *resp_connect_time(PyObject *o, void *c)
{
    (void)c;
    ResponseObject *r = (ResponseObject *)o;
    return secs(r->t_start, r->t_connected);
}
static PyObject *resp_tls_time(PyObject *o, void *c)
{
    (void)c;
    ResponseObject *r = (ResponseObject *)o;
    return r->t_tls_done ? secs(r->t_connected, r->t_tls_done) : PyFloat_FromDouble(0.0);
}
static PyObject *resp_ttfb(PyObject *o, void *c)
{
    (void)c;
    ResponseObject *r = (ResponseObject *)o;
    return secs(r->t_start, r->t_first_byte);
}
static PyObject *resp_reused(PyObject *o, void *c)
{
    (void)c;
    return PyBool_FromLong(((ResponseObject *)o)->reused);
}

static PyObject *resp_repr(PyObject *o)
{
    ResponseObject *r = (ResponseObject *)o;
    PyObject *reason = resp_reason(o, NULL);
    if (!reason) return NULL;
    PyObject *s = PyUnicode_FromFormat("<Response [%d %U]>", r->status, reason);
    Py_DECREF(reason);
    return s;
}

static PyMemberDef resp_members[] = {
    {"status", T_INT, offsetof(ResponseObject, status), READONLY, "Status code (e.g. 200)."},
    {"body", T_OBJECT, offsetof(ResponseObject, body), READONLY,
     "The body as bytes (b'' for HEAD/204/304 and for download())."},
    {"url", T_OBJECT, offsetof(ResponseObject, url), READONLY, "The requested URL."},
    {"size", T_ULONGLONG, offsetof(ResponseObject, size), READONLY,
     "Body bytes received (for download(): bytes written to the file)."},
    {"tolerated", T_UINT, offsetof(ResponseObject, tolerated), READONLY,
     "Bare LF line ends accepted in the head(s) and chunked framing (always 0 unless the "
     "client is lenient)."},
    {NULL, 0, 0, 0, NULL},
};

static PyGetSetDef resp_getset[] = {
    {"reason", resp_reason, NULL, "Reason phrase as sent (may be empty).", NULL},
    {"http_version", resp_version, NULL, "'HTTP/1.1', 'HTTP/1.0', 'HTTP/2' or 'HTTP/3'.", NULL},
    {"headers", resp_headers, NULL,
     "Response headers: a Headers (ordered, case-insensitive, duplicates kept).", NULL},
    {"elapsed", resp_elapsed, NULL, "Seconds from the start of the request to its last byte.",
     NULL},
    {"connect_time", resp_connect_time, NULL,
     "Seconds spent connecting (TCP); 0.0 on a reused connection.", NULL},
    {"tls_time", resp_tls_time, NULL, "Seconds spent in the TLS handshake; 0.0 if none.", NULL},
    {"ttfb", resp_ttfb, NULL, "Seconds from the start of the request to the first response byte.",
     NULL},
    {"reused", resp_reused, NULL, "True when sent on a pooled keep-alive connection.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot resp_slots[] = {
    {Py_tp_doc, "The response of a httpbench.Client request (created by the client only)."},
    {Py_tp_dealloc, resp_dealloc},
    {Py_tp_members, resp_members},
    {Py_tp_getset, resp_getset},
    {Py_tp_repr, resp_repr},
    {0, NULL},
};

static PyType_Spec resp_spec = {
    .name = "httpbench.Response",
    .basicsize = offsetof(ResponseObject, head),
    .itemsize = 1,
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = resp_slots,
};

PyObject *hb_py_response_new(hb_modstate *st, const hb_exchange *x, PyObject *url)
{
    ResponseObject *r =
        (ResponseObject *)st->ResponseType->tp_alloc(st->ResponseType, (Py_ssize_t)x->head_len);
    if (!r) return NULL;
    r->status = x->resp.status;
    r->minor = x->resp.minor_version;
    r->reused = x->reused;
    r->parse_flags = x->req->parse_flags;
    r->reason_off = x->resp.reason ? (Py_ssize_t)(x->resp.reason - x->head_buf) : 0;
    r->reason_len = (Py_ssize_t)x->resp.reason_len;
    r->url = Py_NewRef(url);
    memcpy(r->head, x->head_buf, x->head_len);
    return (PyObject *)r;
}

void hb_py_response_finish(PyObject *resp, const hb_exchange *x, PyObject *body)
{
    ResponseObject *r = (ResponseObject *)resp;
    r->t_start = x->t_start;
    r->t_connected = x->t_connected;
    r->t_tls_done = x->t_tls_done;
    r->t_first_byte = x->t_first_byte;
    r->t_done = x->t_done;
    r->size = (unsigned long long)x->body_bytes;
    r->tolerated = x->tolerated;
    Py_XSETREF(r->body, body);
}

PyObject *hb_py_response_mx(hb_modstate *st, const hb_mx *x, PyObject *url, PyObject *body,
                            uint64_t t_connected, uint64_t t_tls_done, int h3)
{
    ResponseObject *r =
        (ResponseObject *)st->ResponseType->tp_alloc(st->ResponseType, (Py_ssize_t)x->head_len);
    if (!r) {
        Py_DECREF(body);
        return NULL;
    }
    r->status = x->status;
    r->minor = 1;
    r->h2 = h3 ? 3 : 2;
    r->reused = x->reused;
    r->parse_flags = 0;
    r->reason_off = 0; /* HTTP/2 has no reason phrase: "" */
    r->reason_len = 0;
    r->url = Py_NewRef(url);
    memcpy(r->head, x->head, x->head_len);
    r->t_start = x->t_start;
    r->t_connected = x->reused ? 0 : t_connected;
    r->t_tls_done = x->reused ? 0 : t_tls_done;
    r->t_first_byte = x->t_first_byte;
    r->t_done = x->t_done;
    r->size = (unsigned long long)x->body_bytes;
    r->body = body;
    return (PyObject *)r;
}

int hb_mod_response_init(PyObject *m, hb_modstate *st)
{
    PyObject *rt = PyType_FromModuleAndSpec(m, &resp_spec, NULL);
    if (!rt) return -1;
    st->ResponseType = (PyTypeObject *)rt;
    return PyModule_AddObjectRef(m, "Response", rt);
}
