/* client.c - httpbench.Client: the Python face of hb_client/hb_pool
 * (csrc/core/client/hb_client.h, hb_pool.h); the URL and the head come from
 * hb_request, the Response type lives in response.c.
 *
 * Per request, with the GIL held: split the URL, serialize the head into a
 * stack buffer, prepare the body; then, GIL released: connect or reuse, send,
 * read the head; GIL held again: build the Response, allocate the body bytes
 * (at Content-Length size when that is at most HB_CLIENT_BODY_WHOLE, else
 * growing with the bytes received) and read the rest straight into them (GIL
 * released when a syscall is needed). No C heap allocation per request; Python objects
 * per request: the Response, its raw head bytes and its body bytes (reason,
 * headers, timings are built only when accessed).
 *
 * Thread safety: a Client may be used from several threads at once; the pool
 * is guarded by a mutex and each request runs on its own connection.
 *
 * http3=True: the same over HTTP/3 (hb_client_h3.h), one QUIC connection per origin.
 * http2=True: every request goes over HTTP/2 (hb_client_h2.h), one session per
 * origin held by the Client; get_many() multiplexes a batch on it. Threads
 * take turns on an origin's session (one lock per Client), a batch at a time.
 *
 * This file is the type; client_int.h lists the files the rest lives in.
 */
#include "client_int.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "client/hb_client.h"
#include "base/hb_clock.h"
#include "client/hb_client_h2.h"
#include "http/hb_request.h"
#include "net/hb_tls.h"

static PyObject *client_get(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                            PyObject *kwnames)
{
    static const char *const names[] = {"url", "headers", "max_body"};
    PyObject *a[3];
    if (nargs == 1 && !kwnames) { /* the hot path */
        return hb__cl_request((ClientObject *)self, "GET", 3, args[0], NULL, NULL, NULL, NULL);
    }
    if (hb_args("get", args, nargs, kwnames, names, 3, 2, 1, a) < 0) return NULL;
    return hb__cl_request((ClientObject *)self, "GET", 3, a[0], a[1], NULL, NULL, a[2]);
}

static PyObject *client_head(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                             PyObject *kwnames)
{
    static const char *const names[] = {"url", "headers"};
    PyObject *a[2];
    if (hb_args("head", args, nargs, kwnames, names, 2, 2, 1, a) < 0) return NULL;
    return hb__cl_request((ClientObject *)self, "HEAD", 4, a[0], a[1], NULL, NULL, NULL);
}

/* The method argument of request() and stream(): its UTF-8 text (a valid
 * token), or NULL with an exception. */
static const char *method_arg(ClientObject *self, PyObject *o, size_t *mlen)
{
    if (!PyUnicode_Check(o)) {
        PyErr_SetString(PyExc_TypeError, "method must be str");
        return NULL;
    }
    Py_ssize_t n;
    const char *m = PyUnicode_AsUTF8AndSize(o, &n);
    if (!m) return NULL;
    char err[HB_ERR_LEN];
    int rc = hb_check_method(m, (size_t)n, err);
    if (rc < 0) {
        hb_raise(self->st, rc, err);
        return NULL;
    }
    *mlen = (size_t)n;
    return m;
}

static PyObject *client_request(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                                PyObject *kwnames)
{
    static const char *const names[] = {"method", "url", "body", "headers", "max_body"};
    PyObject *a[5];
    if (hb_args("request", args, nargs, kwnames, names, 5, 2, 2, a) < 0) return NULL;
    size_t mlen;
    const char *m = method_arg((ClientObject *)self, a[0], &mlen);
    if (!m) return NULL;
    return hb__cl_request((ClientObject *)self, m, mlen, a[1], a[3], a[2], NULL, a[4]);
}

static PyObject *client_stream(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                               PyObject *kwnames)
{
    static const char *const names[] = {"method", "url", "headers", "body", "timeout", "max_line"};
    PyObject *a[6];
    if (hb_args("stream", args, nargs, kwnames, names, 6, 2, 2, a) < 0) return NULL;
    size_t mlen;
    const char *m = method_arg((ClientObject *)self, a[0], &mlen);
    if (!m) return NULL;
    return hb__cl_stream((ClientObject *)self, m, mlen, a[1], a[2], a[3], a[4], a[5]);
}

static PyObject *client_download(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                                 PyObject *kwnames)
{
    static const char *const names[] = {"url", "path", "headers", "max_body"};
    PyObject *a[4];
    if (hb_args("download", args, nargs, kwnames, names, 4, 2, 2, a) < 0) return NULL;
    return hb__cl_request((ClientObject *)self, "GET", 3, a[0], a[2], NULL, a[1], a[3]);
}

static PyObject *client_get_many(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                                 PyObject *kwnames)
{
    static const char *const names[] = {"urls", "headers", "max_body"};
    PyObject *a[3];
    if (hb_args("get_many", args, nargs, kwnames, names, 3, 2, 1, a) < 0) return NULL;
    if (PyUnicode_Check(a[0]) || PyBytes_Check(a[0])) {
        PyErr_SetString(PyExc_TypeError, "urls must be a sequence of URLs, not one string");
        return NULL;
    }
    PyObject *seq = PySequence_Fast(a[0], "urls must be a sequence of str");
    if (!seq) return NULL;
    ClientObject *c = (ClientObject *)self;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject **items = PySequence_Fast_ITEMS(seq);
    PyObject *out;
    if (c->http2 || c->http3) {
        out = hb__cl_mux_batch(c, "GET", 3, items, n, a[1], NULL, NULL, a[2], 1);
    } else { /* HTTP/1.1: one after the other on the pool */
        out = PyList_New(n);
        for (Py_ssize_t i = 0; out && i < n; i++) {
            PyObject *r = hb__cl_request(c, "GET", 3, items[i], a[1], NULL, NULL, a[2]);
            if (!r)
                Py_CLEAR(out);
            else
                PyList_SET_ITEM(out, i, r);
        }
    }
    Py_DECREF(seq);
    return out;
}

static PyObject *client_close(PyObject *o, PyObject *unused)
{
    (void)unused;
    ClientObject *self = (ClientObject *)o;
    if ((self->h2 || self->h3) && self->pool_ok) {
        hb__cl_mux_lock(self);
        Py_BEGIN_ALLOW_THREADS hb__cl_h2_close_all(self, 0);
        hb__cl_h3_close_all(self, 0);
        Py_END_ALLOW_THREADS PyThread_release_lock(self->mux_lock);
    }
    if (!self->closed && self->pool_ok) {
        self->closed = 1;
        Py_BEGIN_ALLOW_THREADS hb_pool_close(&self->pool);
        Py_END_ALLOW_THREADS
    }
    self->closed = 1;
    Py_RETURN_NONE;
}

static PyObject *client_enter(PyObject *o, PyObject *unused)
{
    (void)unused;
    if (((ClientObject *)o)->closed) {
        PyErr_SetString(PyExc_ValueError, "the client is closed");
        return NULL;
    }
    return Py_NewRef(o);
}

static PyObject *client_exit(PyObject *o, PyObject *const *args, Py_ssize_t nargs)
{
    (void)args;
    (void)nargs;
    return client_close(o, NULL);
}

static PyObject *client_pool_stats(PyObject *o, PyObject *unused)
{
    (void)unused;
    ClientObject *self = (ClientObject *)o;
    hb_pool_stats s;
    hb_pool_get_stats(&self->pool, &s);
    return Py_BuildValue("{sKsKsKsKsIsI}", "connects", (unsigned long long)s.connects, "reuses",
                         (unsigned long long)s.reuses, "stale_dropped",
                         (unsigned long long)s.stale_dropped, "expired",
                         (unsigned long long)s.expired, "open", s.open, "idle", s.idle);
}

static PyObject *client_get_stale(PyObject *o, void *c)
{
    (void)c;
    return PyBool_FromLong(((ClientObject *)o)->pool.opts.stale_check);
}

static int client_set_stale(PyObject *o, PyObject *v, void *c)
{
    (void)c;
    if (!v) {
        PyErr_SetString(PyExc_AttributeError, "cannot delete stale_check");
        return -1;
    }
    int on;
    if (hb_arg_bool(v, 1, &on) < 0) return -1;
    hb_pool_set_stale_check(&((ClientObject *)o)->pool, on);
    return 0;
}

static PyObject *opt_float(double v)
{
    if (v < 0) Py_RETURN_NONE;
    return PyFloat_FromDouble(v);
}
static PyObject *client_get_timeout(PyObject *o, void *c)
{
    (void)c;
    return opt_float(((ClientObject *)o)->timeout);
}
static PyObject *client_get_max_body(PyObject *o, void *c)
{
    (void)c;
    uint64_t v = ((ClientObject *)o)->max_body;
    if (!v) Py_RETURN_NONE;
    return PyLong_FromUnsignedLongLong(v);
}
static PyObject *client_get_lenient(PyObject *o, void *c)
{
    (void)c;
    return PyBool_FromLong(((ClientObject *)o)->lenient);
}
static PyObject *client_get_http2(PyObject *o, void *c)
{
    (void)c;
    return PyBool_FromLong(((ClientObject *)o)->http2);
}
static PyObject *client_get_http3(PyObject *o, void *c)
{
    (void)c;
    return PyBool_FromLong(((ClientObject *)o)->http3);
}
static PyObject *client_get_closed(PyObject *o, void *c)
{
    (void)c;
    return PyBool_FromLong(((ClientObject *)o)->closed);
}

static uint64_t to_ns(double s)
{
    return s < 0 ? UINT64_MAX : (uint64_t)(s * 1e9);
}

static PyObject *client_new(PyTypeObject *tp, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"timeout",
                             "connect_timeout",
                             "verify",
                             "ca_file",
                             "max_connections_per_host",
                             "stale_check",
                             "idle_timeout",
                             "max_body",
                             "lenient",
                             "http2",
                             "http3",
                             NULL};
    PyObject *timeout = NULL, *ctimeout = NULL, *ca = NULL, *idle = NULL, *mb = NULL;
    int verify = 1, stale = 1, maxc = HB_POOL_DEFAULT_MAX_PER_HOST, lenient = 0, http2 = 0;
    int http3 = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|$OOpOipOOppp:Client", kwlist, &timeout, &ctimeout,
                                     &verify, &ca, &maxc, &stale, &idle, &mb, &lenient, &http2,
                                     &http3))
        return NULL;
    if ((http2 || http3) && lenient) {
        PyErr_Format(PyExc_ValueError, "lenient applies to HTTP/1.1 framing, not %s",
                     http3 ? "http3" : "http2");
        return NULL;
    }
    if (http2 && http3) {
        PyErr_SetString(PyExc_ValueError,
                        "http2 and http3 are exclusive: a Client speaks one protocol");
        return NULL;
    }
    if (http3 && !hb_h3_available()) {
        hb_modstate *st0 = hb_state_from_type(tp);
        if (st0) hb_raise(st0, HB_E_UNSUPPORTED, HB_H3_MISSING);
        return NULL;
    }
    uint64_t max_body;
    if (hb__cl_max_body(mb, DEFAULT_MAX_BODY, &max_body) < 0) return NULL;
    double t = 10.0, ct = -1, it = HB_POOL_DEFAULT_IDLE_NS / 1e9;
    if (hb_arg_timeout(timeout, 1, "timeout", &t) < 0 ||
        hb_arg_timeout(ctimeout, 1, "connect_timeout", &ct) < 0 ||
        hb_arg_timeout(idle, 1, "idle_timeout", &it) < 0)
        return NULL;
    if (maxc < 1 || maxc > 100000) {
        PyErr_SetString(PyExc_ValueError, "max_connections_per_host must be >= 1");
        return NULL;
    }
    hb_modstate *st = hb_state_from_type(tp);
    if (!st) return NULL;
    ClientObject *self = (ClientObject *)tp->tp_alloc(tp, 0);
    if (!self) return NULL;
    self->st = st;
    self->verify = verify;
    self->timeout = t;
    self->connect_timeout = ct;
    self->idle_timeout = it;
    self->timeout_ns = to_ns(t);
    self->connect_timeout_ns = to_ns(ct);
    self->max_body = max_body;
    self->lenient = lenient;
    self->http2 = http2;
    self->http3 = http3;
    if ((http2 || http3) && !(self->mux_lock = PyThread_allocate_lock())) {
        PyErr_NoMemory();
        goto fail;
    }
    if (ca && ca != Py_None) {
        PyObject *enc = NULL;
        if (!PyUnicode_FSConverter(ca, &enc)) goto fail;
        size_t n = (size_t)PyBytes_GET_SIZE(enc);
        self->ca_file = PyMem_Malloc(n + 1);
        if (!self->ca_file) {
            Py_DECREF(enc);
            PyErr_NoMemory();
            goto fail;
        }
        memcpy(self->ca_file, PyBytes_AS_STRING(enc), n + 1);
        Py_DECREF(enc);
    }
    hb_pool_opts po = {0};
    po.max_per_host = (unsigned)maxc;
    po.idle_timeout_ns = to_ns(it);
    po.stale_check = stale;
    po.eintr_abort = 1; /* let Ctrl-C through: the binding runs the handlers */
    int rc = hb_pool_init(&self->pool, &po);
    if (rc < 0) {
        hb_raise(st, rc, NULL);
        goto fail;
    }
    self->pool_ok = 1;
    return (PyObject *)self;
fail:
    Py_DECREF(self);
    return NULL;
}

static void client_dealloc(PyObject *o)
{
    ClientObject *self = (ClientObject *)o;
    PyTypeObject *tp = Py_TYPE(o);
    if (self->pool_ok) hb__cl_h2_close_all(self, 1); /* sessions hold pool connections */
    hb__cl_h3_close_all(self, 1);
    if (self->mux_lock) PyThread_free_lock(self->mux_lock);
    if (self->pool_ok) hb_pool_destroy(&self->pool);
    if (self->tls) hb_tls_ctx_free(self->tls);
    PyMem_Free(self->ca_file);
    PyMem_Free(self->mux_scratch);
    tp->tp_free(o);
    Py_DECREF(tp);
}

static PyMethodDef client_methods[] = {
    {"get", (PyCFunction)(void (*)(void))client_get, METH_FASTCALL | METH_KEYWORDS,
     "get($self, /, url, headers=None, *, max_body=<client's>)\n--\n\n"
     "GET url -> Response; the body is read into memory (BodyTooLarge over max_body)."},
    {"head", (PyCFunction)(void (*)(void))client_head, METH_FASTCALL | METH_KEYWORDS,
     "head($self, /, url, headers=None)\n--\n\nHEAD url -> Response (without a body)."},
    {"request", (PyCFunction)(void (*)(void))client_request, METH_FASTCALL | METH_KEYWORDS,
     "request($self, /, method, url, *, body=None, headers=None, max_body=<client's>)\n--\n\n"
     "Send any method -> Response. body: bytes-like, a file object or a path "
     "(streamed; Content-Length when the size is known, chunked otherwise)."},
    {"download", (PyCFunction)(void (*)(void))client_download, METH_FASTCALL | METH_KEYWORDS,
     "download($self, /, url, path, *, headers=None, max_body=None)\n--\n\n"
     "GET url -> Response, streaming the body into the file at path (never held in "
     "memory, so the client's max_body does not apply; pass one to cap the file); the "
     "Response's body is b'' and .size the bytes written. On error the file is removed."},
    {"stream", (PyCFunction)(void (*)(void))client_stream, METH_FASTCALL | METH_KEYWORDS,
     "stream($self, /, method, url, *, headers=None, body=None, timeout=<client's>, "
     "max_line=1048576)\n--\n\n"
     "Send a request and read the response head -> Stream, whose body is read piece by "
     "piece: iter_bytes(chunk_size=None) or iter_events() (server-sent events). timeout "
     "bounds each read (None: none); max_line bounds an event stream's line and event data "
     "(ProtocolError beyond). HTTP/1.1 (and TLS) only: FeatureUnavailable over HTTP/2 or 3."},
    {"get_many", (PyCFunction)(void (*)(void))client_get_many, METH_FASTCALL | METH_KEYWORDS,
     "get_many($self, /, urls, headers=None, *, max_body=<client's>)\n--\n\n"
     "GET every URL -> list of Responses in the same order. With http2=True the "
     "requests are multiplexed on the origin's one HTTP/2 connection (all URLs must "
     "share an origin), all in flight at once up to the server's stream limit; "
     "otherwise they run one after the other. The first failed request raises."},
    {"close", client_close, METH_NOARGS,
     "close($self, /)\n--\n\nClose all pooled connections; later requests raise ValueError."},
    {"pool_stats", client_pool_stats, METH_NOARGS,
     "pool_stats($self, /)\n--\n\nPool counters: connects (connection attempts), reuses, "
     "stale_dropped, expired, and open/idle connections now."},
    {"__enter__", client_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)(void (*)(void))client_exit, METH_FASTCALL, NULL},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef client_getset[] = {
    {"stale_check", client_get_stale, client_set_stale,
     "Check idle connections before reuse (settable, to measure its cost).", NULL},
    {"timeout", client_get_timeout, NULL, "Whole-request deadline in seconds (None: none).", NULL},
    {"closed", client_get_closed, NULL, "True after close().", NULL},
    {"http2", client_get_http2, NULL, "True when every request goes over HTTP/2.", NULL},
    {"http3", client_get_http3, NULL, "True when every request goes over HTTP/3.", NULL},
    {"max_body", client_get_max_body, NULL,
     "Largest response body held in memory, in bytes (None: no limit).", NULL},
    {"lenient", client_get_lenient, NULL,
     "True when bare LF line ends are accepted in responses (counted in Response.tolerated).",
     NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot client_slots[] = {
    {Py_tp_doc, "Client(*, timeout=10.0, connect_timeout=None, verify=True, ca_file=None, "
                "max_connections_per_host=10, stale_check=True, idle_timeout=60.0, "
                "max_body=1073741824, lenient=False, http2=False, http3=False)\n--\n\n"
                "A native HTTP/1.1 client with a keep-alive pool per (scheme, host, port).\n"
                "timeout is a deadline for the whole request (connect to last byte); "
                "connect_timeout bounds connecting (TCP + TLS). max_body caps a body held in "
                "memory (BodyTooLarge; None: no limit); lenient accepts bare LF line ends in "
                "responses, counted in Response.tolerated. Safe to share between threads. "
                "http2=True: every request over HTTP/2 (h2c with prior knowledge for http://, "
                "ALPN h2 for https://; HTTP2NotSupported when the server does not speak it), one "
                "connection per origin; get_many() multiplexes a batch on it. http3=True: every "
                "request over HTTP/3 (QUIC on UDP, https:// URLs only, verified against ca_file "
                "unless verify=False), one connection per origin, multiplexed the same way."},
    {Py_tp_new, client_new},
    {Py_tp_dealloc, client_dealloc},
    {Py_tp_methods, client_methods},
    {Py_tp_getset, client_getset},
    {0, NULL},
};

static PyType_Spec client_spec = {
    .name = "httpbench.Client",
    .basicsize = sizeof(ClientObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE,
    .slots = client_slots,
};

int hb_mod_client_init(PyObject *m, hb_modstate *st)
{
    PyObject *ct = PyType_FromModuleAndSpec(m, &client_spec, NULL);
    if (!ct) return -1;
    st->ClientType = (PyTypeObject *)ct;
    if (PyModule_AddObjectRef(m, "Client", ct) < 0) return -1;
    return 0;
}
