/* client_prep.c - a Client request's inputs: the body source, the TLS
 * context, an HTTP/1.1 request's head, body sinks, max_body and errors named
 * after their request (see client_int.h). */
#include "client_int.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/hb_clock.h"
#include "http/hb_request.h"

void hb__cl_body_release(body_src *bs)
{
    if (bs->view.obj) PyBuffer_Release(&bs->view);
    if (bs->own_fd && bs->fd >= 0) close(bs->fd);
    Py_CLEAR(bs->keep);
    bs->fd = -1;
}

static int body_from_fd(body_src *bs, int fd, off_t pos)
{
    struct stat stb;
    bs->fd = fd; /* first, so body_release closes an fd we opened even on error */
    if (fstat(fd, &stb) < 0) {
        PyErr_SetFromErrno(PyExc_OSError);
        return -1;
    }
    if (S_ISREG(stb.st_mode) && pos >= 0) {
        bs->off = pos;
        bs->len = stb.st_size > pos ? (int64_t)(stb.st_size - pos) : 0;
    } else {
        bs->off = -1;
        bs->len = -1;
    }
    return 0;
}

int hb__cl_body_prepare(PyObject *body, body_src *bs)
{
    memset(bs, 0, sizeof *bs);
    bs->fd = -1;
    bs->off = -1;
    bs->len = -1;
    if (body == NULL || body == Py_None) return 0;
    if (PyObject_CheckBuffer(body)) return PyObject_GetBuffer(body, &bs->view, PyBUF_SIMPLE);
    if (PyUnicode_Check(body) || PyObject_HasAttrString(body, "__fspath__")) {
        PyObject *enc = NULL;
        if (!PyUnicode_FSConverter(body, &enc)) return -1;
        int fd = open(PyBytes_AS_STRING(enc), O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            PyErr_SetFromErrnoWithFilenameObject(PyExc_OSError, body);
            Py_DECREF(enc);
            return -1;
        }
        Py_DECREF(enc);
        bs->own_fd = 1;
        return body_from_fd(bs, fd, 0);
    }
    PyObject *fno =
        PyObject_HasAttrString(body, "fileno") ? PyObject_CallMethod(body, "fileno", NULL) : NULL;
    if (fno) {
        long lfd = PyLong_AsLong(fno);
        Py_DECREF(fno);
        if (lfd == -1 && PyErr_Occurred()) return -1;
        if (lfd < 0 || lfd > INT_MAX) {
            PyErr_SetString(PyExc_ValueError, "body file has an invalid fileno()");
            return -1;
        }
        int fd = (int)lfd;
        off_t pos = -1;
        PyObject *t = PyObject_CallMethod(body, "tell", NULL);
        if (t) {
            pos = (off_t)PyLong_AsLongLong(t);
            Py_DECREF(t);
            if (pos == -1 && PyErr_Occurred()) return -1;
        } else {
            PyErr_Clear(); /* unseekable: stream with read() */
        }
        if (pos >= 0 && lseek(fd, 0, SEEK_CUR) < 0) pos = -1;
        if (body_from_fd(bs, fd, pos) < 0) return -1;
        if (bs->off >= 0) bs->file = body; /* borrowed: the caller holds it */
        return 0;
    }
    if (PyErr_Occurred()) {
        if (!PyErr_ExceptionMatches(PyExc_OSError) && !PyErr_ExceptionMatches(PyExc_ValueError))
            return -1;
        PyErr_Clear(); /* io.UnsupportedOperation (e.g. BytesIO): read it */
    }
    if (PyObject_HasAttrString(body, "read")) {
        bs->keep = PyObject_CallMethod(body, "read", NULL);
        if (!bs->keep) return -1;
        if (!PyObject_CheckBuffer(bs->keep)) {
            PyErr_SetString(PyExc_TypeError, "body file's read() must return bytes");
            return -1;
        }
        return PyObject_GetBuffer(bs->keep, &bs->view, PyBUF_SIMPLE);
    }
    PyErr_Format(PyExc_TypeError, "body must be bytes, a file object or a path, not %.100s",
                 Py_TYPE(body)->tp_name);
    return -1;
}

int hb__cl_ensure_tls(ClientObject *self)
{
    if (self->tls) return 0;
    hb_tls_client_opts o;
    hb_tls_client_opts_init(&o);
    o.ca_file = self->ca_file;
    o.insecure = !self->verify;
    /* h2 first; a server that picks http/1.1 is refused after the handshake
     * (HTTP2NotSupported), never used: a clearer error than an ALPN alert */
    if (self->http2) o.alpn = "h2,http/1.1";
    char err[HB_ERR_LEN] = "";
    hb_tls_ctx *ctx = NULL;
    int rc = hb_tls_client_ctx_new(&ctx, &o, err);
    if (rc < 0) {
        if (rc == HB_E_INVALID) rc = HB_E_TLS; /* a bad CA file is a TLS setup error */
        hb_raise(self->st, rc, err);
        return -1;
    }
    self->tls = ctx;
    hb_pool_set_tls(&self->pool, ctx);
    return 0;
}

int hb__cl_sink_grow(hb_sink *s, size_t need, char *err)
{
    grow_ctx *g = s->ctx;
    /* Exactly what the core asks for: it keeps growth geometric and bounded. */
    size_t nc = need;
    if (nc > PY_SSIZE_T_MAX)
        return hb_fail(err, HB_E_TOO_LARGE, "a %zu byte response body is too large", nc);
    if (g->ts) PyEval_RestoreThread(g->ts);
    int rc = 0;
    if (!g->obj) /* created at the first byte: sized by the announced length, if any */
        rc = (g->obj = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)nc)) ? 0 : -1;
    else
        rc = _PyBytes_Resize(&g->obj, (Py_ssize_t)nc);
    if (rc < 0) PyErr_Clear();
    if (g->ts) g->ts = PyEval_SaveThread();
    if (rc < 0)
        return hb_fail(err, HB_E_TOO_LARGE, "out of memory for a %zu byte response body", nc);
    s->buf = PyBytes_AS_STRING(g->obj);
    s->cap = nc;
    return 0;
}

/* A wait cut short by a signal: run the Python handlers (Ctrl-C raises
 * KeyboardInterrupt from there); otherwise the usual mapping. */
void hb__cl_raise(hb_modstate *st, int rc, const char *err, const char *method, size_t mlen,
                  const char *url, Py_ssize_t ulen)
{
    if (rc == HB_E_INTERRUPTED) {
        if (PyErr_CheckSignals() < 0) return;
        err = "request interrupted by a signal";
    }
    /* Name the request: errors from a benchmark loop must say which one. */
    char text[HB_ERR_LEN + 256];
    PyOS_snprintf(text, sizeof text, "%s (%.*s %.*s)", err && err[0] ? err : hb_strerror(rc),
                  (int)mlen, method, (int)(ulen > 200 ? 200 : ulen), url);
    hb_raise(st, rc, text);
}

/* max_body as given: absent keeps dflt, None is no limit (0), else an int >= 1. */
int hb__cl_max_body(PyObject *o, uint64_t dflt, uint64_t *out)
{
    if (!o) {
        *out = dflt;
        return 0;
    }
    if (o == Py_None) {
        *out = 0;
        return 0;
    }
    if (!PyLong_Check(o) || PyBool_Check(o)) {
        PyErr_Format(PyExc_TypeError, "max_body must be an int or None, not %.100s",
                     Py_TYPE(o)->tp_name);
        return -1;
    }
    unsigned long long v = PyLong_AsUnsignedLongLong(o);
    if (v == (unsigned long long)-1 && PyErr_Occurred()) {
        if (!PyErr_ExceptionMatches(PyExc_OverflowError)) return -1;
        PyErr_Clear();
        PyObject *zero = PyLong_FromLong(0);
        int pos = zero ? PyObject_RichCompareBool(o, zero, Py_GT) : -1;
        Py_XDECREF(zero);
        if (pos < 0) return -1;
        v = pos ? UINT64_MAX : 0; /* beyond 64 bits: no practical limit */
    }
    if (v == 0) {
        PyErr_SetString(PyExc_ValueError, "max_body must be >= 1 (or None for no limit)");
        return -1;
    }
    *out = v;
    return 0;
}

int hb__cl_h1_prepare(ClientObject *self, const char *method, size_t mlen, PyObject *url,
                      PyObject *headers, PyObject *body, h1_prep *p)
{
    hb_modstate *st = self->st;
    p->head = p->head_stack;
    if (hb_py_url(st, url, &p->up, &p->u, &p->ulen) < 0) return -1;
    if (p->up.tls && hb__cl_ensure_tls(self) < 0) return -1;
    if (hb__cl_body_prepare(body, &p->bs) < 0) return -1; /* releases what it got so far */
    hb_header hstack[HEADERS_STACK], *hs = hstack;
    PyObject *hkeep = NULL;
    Py_ssize_t nh = hb_py_headers(headers, hstack, HEADERS_STACK, &hs, &hkeep);
    if (nh < 0) {
        hb__cl_body_release(&p->bs);
        return -1;
    }
    const body_src *bs = &p->bs;
    int64_t blen = HB_REQ_NO_BODY;
    if (bs->fd >= 0)
        blen = bs->len < 0 ? HB_REQ_CHUNKED : bs->len;
    else if (bs->view.obj)
        blen = (int64_t)bs->view.len;
    hb_head_spec spec = {method, mlen, &p->up, hs, (size_t)nh, blen, 1, NULL};
    size_t cap = hb_build_head_bound(&spec);
    char err[HB_ERR_LEN];
    int len = -1;
    if (cap > sizeof p->head_stack && !(p->head = PyMem_Malloc(cap))) {
        p->head = p->head_stack;
        PyErr_NoMemory();
    } else if ((len = hb_build_head(p->head, cap, &spec, err)) < 0) {
        hb_raise(st, len, err);
    }
    /* The head holds copies: the headers' objects may go now. */
    if (hs != hstack) PyMem_Free(hs);
    Py_XDECREF(hkeep);
    if (len < 0) {
        hb__cl_h1_release(p);
        return -1;
    }
    p->head_len = (size_t)len;
    return 0;
}

void hb__cl_h1_request(const ClientObject *self, const h1_prep *p, const char *method, size_t mlen,
                       uint64_t max_body, hb_request *rq)
{
    const body_src *bs = &p->bs;
    rq->target.tls = p->up.tls;
    rq->target.host = p->up.host;
    rq->target.host_len = p->up.host_len;
    rq->target.port = p->up.port;
    rq->head = p->head;
    rq->head_len = p->head_len;
    rq->body = bs->view.obj ? bs->view.buf : NULL;
    rq->body_len = bs->view.obj ? (size_t)bs->view.len : 0;
    rq->body_fd = bs->fd;
    rq->body_fd_off = bs->off;
    rq->body_fd_len = bs->len;
    rq->is_head = hb_method_is_head(method, mlen);
    rq->idempotent = hb_method_idempotent(method, mlen);
    rq->parse_flags = self->lenient ? HB_PARSE_LENIENT_LF : 0;
    rq->max_body = max_body;
    rq->start_ns = hb_now_ns();
    rq->deadline_ns = self->timeout_ns == UINT64_MAX ? UINT64_MAX : rq->start_ns + self->timeout_ns;
    rq->connect_deadline_ns = self->connect_timeout_ns == UINT64_MAX
                                  ? rq->deadline_ns
                                  : rq->start_ns + self->connect_timeout_ns;
    if (rq->connect_deadline_ns > rq->deadline_ns) rq->connect_deadline_ns = rq->deadline_ns;
}

int hb__cl_h1_sent(const h1_prep *p)
{
    const body_src *bs = &p->bs;
    if (!bs->file || bs->len <= 0) return 0;
    PyObject *r = PyObject_CallMethod(bs->file, "seek", "L", (long long)(bs->off + bs->len));
    if (!r) return -1;
    Py_DECREF(r);
    return 0;
}

void hb__cl_h1_release(h1_prep *p)
{
    hb__cl_body_release(&p->bs);
    if (p->head != p->head_stack) PyMem_Free(p->head);
    p->head = p->head_stack;
}
