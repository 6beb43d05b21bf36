/* client_stream.c - Client.stream(): a response whose head is read at once and
 * whose body is read piece by piece (hb_client_body_next), as bytes or as
 * server-sent events parsed in C (hb_sse_parse.h).
 *
 * The exchange stays checked out of the pool while the stream is open; it goes
 * back kept alive only when the body was read to its end, and is closed when
 * the stream is closed (or collected) earlier, so the pool never hands out a
 * half-read connection. Each wait for bytes releases the GIL and has its own
 * deadline (the stream's timeout, per read); bytes already buffered are
 * consumed with the GIL held, without a syscall. Per event: one event object,
 * its data str and its id str (the type str is reused while it repeats); the
 * parser's buffers belong to the stream and grow to the largest line or event
 * seen, never past max_line.
 */
#include "client_int.h"

#include <string.h>
#include <structmember.h>

#include "base/hb_clock.h"
#include "http/hb_sse_parse.h"

typedef struct {
    PyObject_HEAD ClientObject *client;
    PyObject *resp; /* the Response: head now, timings and size when the stream ends */
    PyObject *url;
    hb_request rq;
    hb_exchange x;
    int active;               /* holds the connection */
    int busy;                 /* a read is waiting with the GIL released */
    uint64_t read_timeout_ns; /* per read; UINT64_MAX: none */
    const char *pp;           /* body bytes received and not consumed yet (in the */
    size_t pl;                /* connection's buffer) */
    hb_sse_parser sp;
    PyObject *type_cache, *id_cache;
    char method[32];
    size_t mlen;
} StreamObject;

enum { IT_BYTES, IT_EVENTS, IT_LINES };

typedef struct {
    PyObject_HEAD StreamObject *s;
    int kind;
    Py_ssize_t chunk; /* IT_BYTES: 0, else the chunk size */
} StreamIterObject;

static int sse_grow(hb_sse_parser *p, hb_sse_buf *b, size_t need)
{
    (void)p;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < need)
        cap *= 2;
    if (cap > p->max_line + 1) cap = (size_t)p->max_line + 1;
    if (cap < need) cap = need;
    char *n = PyMem_Realloc(b->p, cap);
    if (!n) return HB_E_NOMEM;
    b->p = n;
    b->cap = cap;
    return 0;
}

static hb_modstate *sst(StreamObject *s)
{
    return s->client->st;
}

static void raise_rc(StreamObject *s, int rc, const char *err)
{
    Py_ssize_t ulen;
    const char *u = PyUnicode_AsUTF8AndSize(s->url, &ulen);
    if (!u) return;
    if (rc == HB_SSE_E_LINE) {
        char text[HB_ERR_LEN];
        PyOS_snprintf(text, sizeof text,
                      "server-sent event stream: a line or an event's data over max_line (%llu "
                      "bytes)",
                      (unsigned long long)s->sp.max_line);
        hb__cl_raise(sst(s), rc, text, s->method, s->mlen, u, ulen);
        return;
    }
    hb__cl_raise(sst(s), rc, err, s->method, s->mlen, u, ulen);
}

/* Give the connection back (kept only after the whole body) and record the end. */
static void finish(StreamObject *s)
{
    if (!s->active) return;
    s->active = 0;
    s->pl = 0;
    hb_client_end(&s->client->pool, &s->x);
    PyObject *empty = PyBytes_FromStringAndSize(NULL, 0);
    if (empty)
        hb_py_response_finish(s->resp, &s->x, empty);
    else
        PyErr_Clear();
}

/* The next piece of body into s->pp/s->pl (at most max bytes): 1, 0 at the
 * end (the connection is given back), -1 with an exception. */
static int next_piece(StreamObject *s, size_t max)
{
    if (s->pl) return 1;
    if (!s->active) return 0;
    if (s->busy) {
        PyErr_SetString(PyExc_RuntimeError, "the stream is being read by another thread");
        return -1;
    }
    char err[HB_ERR_LEN];
    int rc;
    if (hb_client_buffered(&s->x) > 0 || s->x.body_done) {
        rc = hb_client_body_next(&s->x, &s->pp, &s->pl, max, 0, err);
        if (rc != HB_AGAIN) goto done;
    }
    uint64_t now = hb_now_ns();
    s->rq.start_ns = now;
    s->rq.deadline_ns = s->read_timeout_ns == UINT64_MAX ? UINT64_MAX : now + s->read_timeout_ns;
    s->busy = 1;
    Py_BEGIN_ALLOW_THREADS rc = hb_client_body_next(&s->x, &s->pp, &s->pl, max, 1, err);
    Py_END_ALLOW_THREADS s->busy = 0;
done:
    if (rc > 0) return 1;
    if (rc == 0) {
        finish(s);
        return 0;
    }
    s->pl = 0;
    finish(s);
    if (PyErr_Occurred()) PyErr_Clear();
    raise_rc(s, rc, err);
    return -1;
}

static PyObject *cached_str(PyObject **cache, const char *p, size_t n)
{
    if (*cache) {
        Py_ssize_t cl;
        const char *c = PyUnicode_AsUTF8AndSize(*cache, &cl);
        if (c && (size_t)cl == n && memcmp(c, p, n) == 0) return Py_NewRef(*cache);
        PyErr_Clear();
    }
    PyObject *o = PyUnicode_DecodeUTF8(p, (Py_ssize_t)n, "replace");
    if (o) Py_XSETREF(*cache, Py_NewRef(o));
    return o;
}

static PyObject *make_event(StreamObject *s, const hb_sse_event *ev)
{
    hb_modstate *st = sst(s);
    PyObject *e = PyStructSequence_New(st->SSEventType);
    if (!e) return NULL;
    PyObject *t = cached_str(&s->type_cache, ev->type, ev->type_len);
    PyObject *d = PyUnicode_DecodeUTF8(ev->data, (Py_ssize_t)ev->data_len, "replace");
    PyObject *i = cached_str(&s->id_cache, ev->id, ev->id_len);
    PyObject *r = ev->retry < 0 ? Py_NewRef(Py_None) : PyLong_FromLongLong(ev->retry);
    PyStructSequence_SET_ITEM(e, 0, t);
    PyStructSequence_SET_ITEM(e, 1, d);
    PyStructSequence_SET_ITEM(e, 2, i);
    PyStructSequence_SET_ITEM(e, 3, r);
    if (!t || !d || !i || !r) Py_CLEAR(e);
    return e;
}

static PyObject *next_event(StreamObject *s)
{
    for (;;) {
        int r = next_piece(s, SIZE_MAX);
        if (r <= 0) return NULL; /* the end (an unfinished block is dropped) or an error */
        hb_sse_event ev;
        int got;
        int64_t k = hb_sse_parse(&s->sp, s->pp, s->pl, &ev, &got);
        if (k < 0) {
            s->pl = 0;
            s->x.keep_alive = 0;
            finish(s);
            raise_rc(s, (int)k, NULL);
            return NULL;
        }
        s->pp += k;
        s->pl -= (size_t)k;
        if (got) return make_event(s, &ev);
    }
}

static PyObject *next_bytes(StreamObject *s, Py_ssize_t chunk)
{
    if (chunk <= 0) {
        int r = next_piece(s, SIZE_MAX);
        if (r <= 0) return NULL;
        PyObject *b = PyBytes_FromStringAndSize(s->pp, (Py_ssize_t)s->pl);
        s->pl = 0;
        return b;
    }
    PyObject *b = PyBytes_FromStringAndSize(NULL, chunk);
    if (!b) return NULL;
    Py_ssize_t n = 0;
    while (n < chunk) {
        int r = next_piece(s, (size_t)(chunk - n));
        if (r < 0) {
            Py_DECREF(b);
            return NULL;
        }
        if (r == 0) break;
        size_t k = s->pl < (size_t)(chunk - n) ? s->pl : (size_t)(chunk - n);
        memcpy(PyBytes_AS_STRING(b) + n, s->pp, k);
        s->pp += k;
        s->pl -= k;
        n += (Py_ssize_t)k;
    }
    if (n == 0) {
        Py_DECREF(b);
        return NULL;
    }
    if (n < chunk && _PyBytes_Resize(&b, n) < 0) return NULL;
    return b;
}

/* ---- the iterator ---- */

static PyObject *it_next(PyObject *o)
{
    StreamIterObject *it = (StreamIterObject *)o;
    if (it->kind == IT_EVENTS) return next_event(it->s);
    return next_bytes(it->s, it->chunk);
}

static void it_dealloc(PyObject *o)
{
    PyTypeObject *tp = Py_TYPE(o);
    Py_XDECREF(((StreamIterObject *)o)->s);
    tp->tp_free(o);
    Py_DECREF(tp);
}

static PyType_Slot it_slots[] = {
    {Py_tp_doc, "An iterator over a Stream's body (Stream.iter_bytes / iter_events)."},
    {Py_tp_dealloc, it_dealloc},
    {Py_tp_iter, PyObject_SelfIter},
    {Py_tp_iternext, it_next},
    {0, NULL},
};

static PyType_Spec it_spec = {
    .name = "httpbench._StreamIterator",
    .basicsize = sizeof(StreamIterObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = it_slots,
};

static PyObject *new_iter(StreamObject *s, int kind, Py_ssize_t chunk)
{
    PyTypeObject *tp = sst(s)->StreamIterType;
    StreamIterObject *it = (StreamIterObject *)tp->tp_alloc(tp, 0);
    if (!it) return NULL;
    it->s = (StreamObject *)Py_NewRef(s);
    it->kind = kind;
    it->chunk = chunk;
    return (PyObject *)it;
}

/* ---- the Stream type ---- */

static PyObject *st_iter_bytes(PyObject *o, PyObject *const *args, Py_ssize_t nargs,
                               PyObject *kwnames)
{
    static const char *const names[] = {"chunk_size"};
    PyObject *a[1];
    if (hb_args("iter_bytes", args, nargs, kwnames, names, 1, 1, 0, a) < 0) return NULL;
    Py_ssize_t chunk = 0;
    if (a[0] && a[0] != Py_None) {
        chunk = PyLong_AsSsize_t(a[0]);
        if (chunk == -1 && PyErr_Occurred()) return NULL;
        if (chunk < 1) {
            PyErr_SetString(PyExc_ValueError, "chunk_size must be >= 1 or None");
            return NULL;
        }
    }
    return new_iter((StreamObject *)o, IT_BYTES, chunk);
}

static PyObject *st_iter_events(PyObject *o, PyObject *unused)
{
    (void)unused;
    return new_iter((StreamObject *)o, IT_EVENTS, 0);
}

static PyObject *st_close(PyObject *o, PyObject *unused)
{
    (void)unused;
    StreamObject *s = (StreamObject *)o;
    if (s->busy) {
        PyErr_SetString(PyExc_RuntimeError, "the stream is being read by another thread");
        return NULL;
    }
    finish(s);
    Py_RETURN_NONE;
}

static PyObject *st_enter(PyObject *o, PyObject *unused)
{
    (void)unused;
    return Py_NewRef(o);
}

static PyObject *st_exit(PyObject *o, PyObject *const *args, Py_ssize_t nargs)
{
    (void)args;
    (void)nargs;
    return st_close(o, NULL);
}

static PyObject *st_resp_attr(PyObject *o, void *name)
{
    return PyObject_GetAttrString(((StreamObject *)o)->resp, (const char *)name);
}

static PyObject *st_closed(PyObject *o, void *c)
{
    (void)c;
    return PyBool_FromLong(!((StreamObject *)o)->active);
}

static PyObject *st_size(PyObject *o, void *c)
{
    (void)c;
    StreamObject *s = (StreamObject *)o;
    return PyLong_FromUnsignedLongLong(s->x.body_bytes - s->pl);
}

static PyObject *st_events(PyObject *o, void *c)
{
    (void)c;
    return PyLong_FromUnsignedLongLong(((StreamObject *)o)->sp.events);
}

static PyObject *st_retry(PyObject *o, void *c)
{
    (void)c;
    int64_t r = ((StreamObject *)o)->sp.reconnect;
    if (r < 0) Py_RETURN_NONE;
    return PyLong_FromLongLong(r);
}

static PyObject *st_repr(PyObject *o)
{
    StreamObject *s = (StreamObject *)o;
    return PyUnicode_FromFormat("<Stream [%d] %s>", s->x.resp.status,
                                s->active ? "open" : "closed");
}

static void st_dealloc(PyObject *o)
{
    StreamObject *s = (StreamObject *)o;
    PyTypeObject *tp = Py_TYPE(o);
    if (s->active) {
        s->active = 0;
        hb_client_end(&s->client->pool, &s->x); /* unfinished: closed, never pooled */
    }
    PyMem_Free(s->sp.line.p);
    PyMem_Free(s->sp.data.p);
    PyMem_Free(s->sp.type.p);
    PyMem_Free(s->sp.id.p);
    Py_XDECREF(s->type_cache);
    Py_XDECREF(s->id_cache);
    Py_XDECREF(s->resp);
    Py_XDECREF(s->url);
    Py_XDECREF(s->client);
    tp->tp_free(o);
    Py_DECREF(tp);
}

static PyMethodDef st_methods[] = {
    {"iter_bytes", (PyCFunction)(void (*)(void))st_iter_bytes, METH_FASTCALL | METH_KEYWORDS,
     "iter_bytes($self, /, chunk_size=None)\n--\n\n"
     "The body as bytes: with chunk_size None each run of bytes as it arrives (chunked "
     "framing removed), else chunks of exactly chunk_size bytes (the last may be shorter)."},
    {"iter_events", st_iter_events, METH_NOARGS,
     "iter_events($self, /)\n--\n\n"
     "The body as server-sent events (WHATWG rules), each a ServerSentEvent(event, data, id, "
     "retry). A line or an event's data over max_line raises ProtocolError."},
    {"close", st_close, METH_NOARGS,
     "close($self, /)\n--\n\nEnd the stream: a connection whose body was not read to its end "
     "is closed, never pooled."},
    {"__enter__", st_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)(void (*)(void))st_exit, METH_FASTCALL, NULL},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef st_getset[] = {
    {"status", st_resp_attr, NULL, "Status code.", "status"},
    {"reason", st_resp_attr, NULL, "Reason phrase as sent.", "reason"},
    {"http_version", st_resp_attr, NULL, "'HTTP/1.1' or 'HTTP/1.0'.", "http_version"},
    {"headers", st_resp_attr, NULL, "Response headers (a Headers).", "headers"},
    {"url", st_resp_attr, NULL, "The requested URL.", "url"},
    {"closed", st_closed, NULL, "True once the body ended or the stream was closed.", NULL},
    {"size", st_size, NULL, "Body bytes consumed so far.", NULL},
    {"events", st_events, NULL, "Events dispatched so far by iter_events().", NULL},
    {"retry", st_retry, NULL, "The stream's last valid retry field (ms), or None.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMemberDef st_members[] = {
    {"response", T_OBJECT, offsetof(StreamObject, resp), READONLY,
     "The Response (its head now; elapsed and size once the stream ended)."},
    {NULL, 0, 0, 0, NULL},
};

static PyType_Slot st_slots[] = {
    {Py_tp_doc, "A streaming response of Client.stream(): the head is read, the body is read "
                "with iter_bytes() or iter_events(). Use it as a context manager."},
    {Py_tp_dealloc, st_dealloc},
    {Py_tp_methods, st_methods},
    {Py_tp_getset, st_getset},
    {Py_tp_members, st_members},
    {Py_tp_repr, st_repr},
    {0, NULL},
};

static PyType_Spec st_spec = {
    .name = "httpbench.Stream",
    .basicsize = sizeof(StreamObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = st_slots,
};

static PyStructSequence_Field ev_fields[] = {
    {"event", "The event type ('message' when the stream named none)."},
    {"data", "The data lines joined by '\\n'."},
    {"id", "The last event ID ('' when none was set)."},
    {"retry", "This event's block's retry field in ms, or None."},
    {NULL, NULL},
};

static PyStructSequence_Desc ev_desc = {
    "httpbench.ServerSentEvent",
    "A server-sent event: (event, data, id, retry), by position or by name.",
    ev_fields,
    4,
};

PyObject *hb__cl_stream(ClientObject *self, const char *method, size_t mlen, PyObject *url,
                        PyObject *headers, PyObject *body, PyObject *timeout, PyObject *max_line)
{
    hb_modstate *st = self->st;
    if (self->http2 || self->http3)
        return hb_raise(st, HB_E_UNSUPPORTED,
                        self->http3 ? "Client.stream() reads HTTP/1.1 responses; this client "
                                      "speaks HTTP/3 (http3=True)"
                                    : "Client.stream() reads HTTP/1.1 responses; this client "
                                      "speaks HTTP/2 (http2=True)");
    if (self->closed) {
        PyErr_SetString(PyExc_ValueError, "the client is closed");
        return NULL;
    }
    double rt = self->timeout;
    uint64_t ml = HB_SSE_DEFAULT_MAX_LINE;
    if ((timeout && hb_arg_timeout(timeout, 1, "timeout", &rt) < 0) ||
        hb_arg_u64(max_line, ml, "max_line", &ml) < 0)
        return NULL;
    if (ml == 0) {
        PyErr_SetString(PyExc_ValueError, "max_line must be >= 1");
        return NULL;
    }
    h1_prep pr;
    if (hb__cl_h1_prepare(self, method, mlen, url, headers, body, &pr) < 0) return NULL;
    char err[HB_ERR_LEN];
    PyTypeObject *tp = st->StreamType;
    StreamObject *s = (StreamObject *)tp->tp_alloc(tp, 0);
    if (!s) goto fail;
    s->client = (ClientObject *)Py_NewRef(self);
    s->url = Py_NewRef(url);
    s->mlen = mlen < sizeof s->method ? mlen : sizeof s->method - 1;
    memcpy(s->method, method, s->mlen);
    s->read_timeout_ns = rt < 0 ? UINT64_MAX : (uint64_t)(rt * 1e9);
    hb_sse_parser_init(&s->sp, ml, sse_grow, s);
    hb_request *rq = &s->rq;
    hb__cl_h1_request(self, &pr, method, mlen, 0, rq); /* a stream holds no body */
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = hb_client_begin(&self->pool, rq, &s->x, err);
    Py_END_ALLOW_THREADS
        /* the head and the body were sent: what they point to may go */
        rq->head = NULL;
    rq->body = NULL;
    rq->body_fd = -1;
    if (rc < 0) {
        hb__cl_raise(st, rc, err, method, mlen, pr.u, pr.ulen);
        goto fail;
    }
    s->active = 1;
    s->resp = hb_py_response_new(st, &s->x, url);
    if (!s->resp) goto fail;
    if (s->x.body_done) finish(s);
    if (hb__cl_h1_sent(&pr) < 0) goto fail;
    hb__cl_h1_release(&pr);
    return (PyObject *)s;
fail:
    hb__cl_h1_release(&pr);
    Py_XDECREF(s);
    return NULL;
}

int hb_mod_stream_init(PyObject *m, hb_modstate *st)
{
    PyObject *t = PyType_FromModuleAndSpec(m, &st_spec, NULL);
    if (!t) return -1;
    st->StreamType = (PyTypeObject *)t;
    if (PyModule_AddObjectRef(m, "Stream", t) < 0) return -1;
    t = PyType_FromModuleAndSpec(m, &it_spec, NULL);
    if (!t) return -1;
    st->StreamIterType = (PyTypeObject *)t;
    st->SSEventType = PyStructSequence_NewType(&ev_desc);
    if (!st->SSEventType) return -1;
    return PyModule_AddObjectRef(m, "ServerSentEvent", (PyObject *)st->SSEventType);
}
