/* client.c - httpbench.Client: the Python face of hb_client/hb_pool
 * (csrc/core/hb_client.h, hb_pool.h); the URL and the head come from
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
 * http2=True: every request goes over HTTP/2 (hb_client_h2.h), one session per
 * origin held by the Client; get_many() multiplexes a batch on it. Threads
 * take turns on an origin's session (one lock per Client), a batch at a time.
 */
#include "module.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hb_client.h"
#include "hb_clock.h"
#include "hb_client_h2.h"
#include "hb_request.h"
#include "hb_tls.h"

#define HEAD_STACK 8192
#define HEADERS_STACK 32
#define DOWNLOAD_BUF (256 * 1024)
#define CHUNKED_INITIAL (16 * 1024)
/* Default max_body for bodies held in memory (download() has none). */
#define DEFAULT_MAX_BODY ((uint64_t)1 << 30)

typedef struct {
    PyObject_HEAD hb_modstate *st;
    hb_pool pool;
    int pool_ok;
    int closed;
    hb_tls_ctx *tls;
    int verify;
    char *ca_file;                                 /* PyMem copy or NULL */
    uint64_t timeout_ns;                           /* UINT64_MAX: none */
    uint64_t connect_timeout_ns;                   /* UINT64_MAX: only the overall timeout */
    double timeout, connect_timeout, idle_timeout; /* as given (-1: None) */
    uint64_t max_body;                             /* in-memory bodies; 0: no limit */
    int lenient;                                   /* HB_PARSE_LENIENT_LF for responses */
    int http2;
    PyThread_type_lock h2lock; /* guards h2 and every session in it */
    struct h2origin *h2;       /* HTTP/2 sessions, one per origin */
    char *h2_scratch;          /* the last batch's field and head buffers, kept for the next */
    size_t h2_scratch_cap;     /* (taken and given back with the GIL held) */
} ClientObject;

/* One HTTP/2 session per (scheme, host, port). */
typedef struct h2origin {
    struct h2origin *next;
    int tls, port;
    size_t host_len;
    char host[HB_POOL_MAX_HOST + 1];
    hb_h2conn hc;
} h2origin;

/* Response head buffer per HTTP/2 exchange (headers in HTTP/1.1 form). */
#define H2_HEAD_CAP (16 * 1024)
/* The largest batch scratch a client keeps between batches (256 streams' worth). */
#define H2_SCRATCH_KEEP (256 * (H2_HEAD_CAP + 1024))

/* -------------------------------------------------------------- request prep */

/* The request body as the core wants it. */
typedef struct {
    Py_buffer view; /* in-memory (view.obj set) */
    int fd;
    int own_fd;     /* opened from a path: close it */
    off_t off;      /* pread offset, -1 for read() */
    int64_t len;    /* -1: unknown (chunked) */
    PyObject *file; /* file object: seek it past the body afterwards */
    PyObject *keep; /* bytes from file.read() */
} body_src;

static void body_release(body_src *bs)
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

static int body_prepare(PyObject *body, body_src *bs)
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

static int ensure_tls(ClientObject *self)
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

/* Grow callback for memory sinks: resize the body bytes, taking the GIL
 * for the moment it needs. */
typedef struct {
    PyObject *obj;
    PyThreadState *ts; /* non-NULL while the GIL is released */
} grow_ctx;

static int sink_grow(hb_sink *s, size_t need, char *err)
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
static void raise_rc(hb_modstate *st, int rc, const char *err, const char *method, size_t mlen,
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
static int arg_max_body(PyObject *o, uint64_t dflt, uint64_t *out)
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

/* ------------------------------------------------------------------ HTTP/2 */

static void h2_lock(ClientObject *self)
{
    if (!PyThread_acquire_lock(self->h2lock, NOWAIT_LOCK)) {
        Py_BEGIN_ALLOW_THREADS PyThread_acquire_lock(self->h2lock, WAIT_LOCK);
        Py_END_ALLOW_THREADS
    }
}

/* The origin's session entry (created on first use); called with h2lock held. */
static h2origin *h2_origin(ClientObject *self, const hb_url *u)
{
    for (h2origin *o = self->h2; o; o = o->next)
        if (o->tls == u->tls && o->port == u->port && o->host_len == u->host_len &&
            memcmp(o->host, u->host, u->host_len) == 0)
            return o;
    if (u->host_len > HB_POOL_MAX_HOST) {
        PyErr_SetString(PyExc_ValueError, "host name too long");
        return NULL;
    }
    h2origin *o = PyMem_Calloc(1, sizeof *o);
    if (!o) {
        PyErr_NoMemory();
        return NULL;
    }
    o->tls = u->tls;
    o->port = u->port;
    o->host_len = u->host_len;
    memcpy(o->host, u->host, u->host_len);
    hb_h2conn_init(&o->hc);
    o->next = self->h2;
    self->h2 = o;
    return o;
}

/* Close every session; with h2lock held (or from dealloc). */
static void h2_close_all(ClientObject *self, int free_entries)
{
    for (h2origin *o = self->h2, *nx; o; o = nx) {
        nx = o->next;
        hb_h2conn_close(&self->pool, &o->hc);
        if (free_entries) PyMem_Free(o);
    }
    if (free_entries) self->h2 = NULL;
}

/* Per exchange of a batch, besides the core's hb_h2x. */
typedef struct {
    hb_sink sink;
    grow_ctx g;
    PyObject *body; /* bytes being filled */
} h2slot;

/* Run one method on urls[0..n) over HTTP/2 (same origin), multiplexed; a list of
 * Responses in order (as_list) or the one Response. */
static PyObject *h2_batch(ClientObject *self, const char *method, size_t mlen,
                          PyObject *const *urls, Py_ssize_t n, PyObject *headers, PyObject *body,
                          PyObject *dl_path, PyObject *max_body_arg, int as_list)
{
    hb_modstate *st = self->st;
    if (self->closed) {
        PyErr_SetString(PyExc_ValueError, "the client is closed");
        return NULL;
    }
    if (n < 1) return as_list ? PyList_New(0) : NULL;
    uint64_t max_body = dl_path ? 0 : self->max_body;
    if (max_body_arg && arg_max_body(max_body_arg, max_body, &max_body) < 0) return NULL;
    Py_buffer view = {0};
    if (body && body != Py_None) {
        if (!PyObject_CheckBuffer(body)) {
            PyErr_Format(PyExc_TypeError,
                         "an HTTP/2 request body must be bytes-like (or None), not %.100s",
                         Py_TYPE(body)->tp_name);
            return NULL;
        }
        if (PyObject_GetBuffer(body, &view, PyBUF_SIMPLE) < 0) return NULL;
    }
    hb_header hstack[HEADERS_STACK], *hs = hstack;
    PyObject *hkeep = NULL, *out = NULL;
    char *block = NULL;
    size_t block_cap = 0;
    hb_h2x *xs = NULL;
    h2slot *slots = NULL;
    hb_url *ups = NULL;
    int dl_fd = -1, dl_created = 0, locked = 0;
    PyObject *dl_enc = NULL;
    char err[HB_ERR_LEN] = "";
    int rc;

    Py_ssize_t nh = hb_py_headers(headers, hstack, HEADERS_STACK, &hs, &hkeep);
    if (nh < 0) goto done;
    ups = PyMem_Calloc((size_t)n, sizeof *ups);
    xs = PyMem_Calloc((size_t)n, sizeof *xs);
    slots = PyMem_Calloc((size_t)n, sizeof *slots);
    if (!ups || !xs || !slots) {
        PyErr_NoMemory();
        goto done;
    }
    int64_t blen = view.obj ? (int64_t)view.len : HB_REQ_NO_BODY;
    size_t total = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        const char *u;
        Py_ssize_t ulen;
        if (i && urls[i] == urls[i - 1]) { /* [url] * k: split and built once */
            ups[i] = ups[i - 1];
            total += H2_HEAD_CAP + 16;
            continue;
        }
        if (hb_py_url(st, urls[i], &ups[i], &u, &ulen) < 0) goto done;
        if (i && (ups[i].tls != ups[0].tls || ups[i].port != ups[0].port ||
                  ups[i].host_len != ups[0].host_len ||
                  memcmp(ups[i].host, ups[0].host, ups[0].host_len) != 0)) {
            PyErr_SetString(PyExc_ValueError,
                            "every URL of an HTTP/2 batch must have the same origin "
                            "(scheme, host, port): they share one connection");
            goto done;
        }
        hb_head_spec spec = {method, mlen, &ups[i], hs, (size_t)nh, blen, 1, NULL};
        size_t nf = 0;
        size_t bound = hb_build_h2_bound(&spec, &nf);
        total += nf * sizeof(hb_header) + bound + H2_HEAD_CAP + 16;
    }
    if (self->h2_scratch && self->h2_scratch_cap >= total) {
        block = self->h2_scratch; /* this thread's until given back */
        block_cap = self->h2_scratch_cap;
        self->h2_scratch = NULL;
    } else if ((block = PyMem_Malloc(total)) != NULL) {
        block_cap = total;
    } else {
        PyErr_NoMemory();
        goto done;
    }
    char *cur = block;
    for (Py_ssize_t i = 0; i < n; i++) {
        hb_h2x *x = &xs[i];
        if (i && urls[i] == urls[i - 1]) {
            x->fields = xs[i - 1].fields; /* read only: shared by the same URL's streams */
            x->nfields = xs[i - 1].nfields;
        } else {
            hb_head_spec spec = {method, mlen, &ups[i], hs, (size_t)nh, blen, 1, NULL};
            size_t nf = 0;
            size_t bound = hb_build_h2_bound(&spec, &nf);
            cur = block + ((size_t)(cur - block) + 15) / 16 * 16;
            hb_header *fields = (hb_header *)cur;
            cur += nf * sizeof(hb_header);
            char *fbuf = cur;
            cur += bound;
            int nfields = hb_build_h2_fields(fields, nf, fbuf, bound, &spec, err);
            if (nfields < 0) {
                hb_raise(st, nfields, err);
                goto done;
            }
            x->fields = fields;
            x->nfields = (size_t)nfields;
        }
        x->body = view.obj ? view.buf : NULL;
        x->body_len = view.obj ? (size_t)view.len : 0;
        x->max_body = max_body;
        x->head = cur;
        x->head_cap = H2_HEAD_CAP;
        cur += H2_HEAD_CAP;
        h2slot *sl = &slots[i];
        sl->sink.fd = -1;
        x->sink = &sl->sink;
    }
    /* the fields point into the headers' strings: hs and hkeep live until the end
     * (streams beyond the server's limit are submitted later in the run) */
    if (dl_path) {
        if (!PyUnicode_FSConverter(dl_path, &dl_enc)) goto done;
        dl_fd = open(PyBytes_AS_STRING(dl_enc), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
        if (dl_fd < 0) {
            PyErr_SetFromErrnoWithFilenameObject(PyExc_OSError, dl_path);
            goto done;
        }
        dl_created = 1;
        slots[0].sink.fd = dl_fd;
    } else {
        /* bodies are created by their first DATA (sink_grow), at the announced length */
        int is_head = hb_method_is_head(method, mlen);
        for (Py_ssize_t i = 0; i < n; i++) {
            h2slot *sl = &slots[i];
            sl->sink.grow = is_head ? NULL : sink_grow;
            sl->sink.ctx = &sl->g;
        }
    }
    if (ups[0].tls && ensure_tls(self) < 0) goto done;

    h2_lock(self);
    locked = 1;
    h2origin *o = h2_origin(self, &ups[0]);
    if (!o) goto done;
    hb_target t = {ups[0].tls, ups[0].host, ups[0].host_len, ups[0].port};
    uint64_t start = hb_now_ns();
    uint64_t dl = self->timeout_ns == UINT64_MAX ? UINT64_MAX : start + self->timeout_ns;
    uint64_t cdl = self->connect_timeout_ns == UINT64_MAX ? dl : start + self->connect_timeout_ns;
    if (cdl > dl) cdl = dl;
    PyThreadState *ts = PyEval_SaveThread();
    for (Py_ssize_t i = 0; i < n; i++)
        slots[i].g.ts = ts;
    rc = hb_client_h2_run(&self->pool, &o->hc, &t, xs, (size_t)n, dl, cdl, err);
    PyEval_RestoreThread(ts);
    uint64_t t_conn = o->hc.t_connected, t_tls = o->hc.t_tls_done;
    PyThread_release_lock(self->h2lock);
    locked = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        slots[i].g.ts = NULL;
        if (slots[i].sink.grow) slots[i].body = slots[i].g.obj; /* may have moved */
    }
    if (rc < 0) {
        const char *u;
        Py_ssize_t ulen;
        u = PyUnicode_AsUTF8AndSize(urls[0], &ulen);
        raise_rc(st, rc, err, method, mlen, u ? u : "", u ? ulen : 0);
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (xs[i].rc < 0) {
            const char *u;
            Py_ssize_t ulen;
            u = PyUnicode_AsUTF8AndSize(urls[i], &ulen);
            raise_rc(st, xs[i].rc, xs[i].err, method, mlen, u ? u : "", u ? ulen : 0);
            goto done;
        }
    }
    if (dl_fd >= 0) {
        int crc = close(dl_fd);
        dl_fd = -1;
        if (crc < 0) {
            PyErr_SetFromErrnoWithFilenameObject(PyExc_OSError, dl_path);
            goto done;
        }
    }
    out = as_list ? PyList_New(n) : NULL;
    if (as_list && !out) goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        h2slot *sl = &slots[i];
        PyObject *b = sl->body;
        sl->body = NULL;
        if (!b) {
            b = PyBytes_FromStringAndSize(NULL, 0);
        } else if ((size_t)PyBytes_GET_SIZE(b) != sl->sink.len &&
                   _PyBytes_Resize(&b, (Py_ssize_t)sl->sink.len) < 0) {
            b = NULL;
        }
        PyObject *r = b ? hb_py_response_h2(st, &xs[i], urls[i], b, t_conn, t_tls) : NULL;
        if (!r) {
            Py_CLEAR(out);
            goto done;
        }
        if (!as_list) {
            out = r;
            break;
        }
        PyList_SET_ITEM(out, i, r);
    }
    dl_created = 0; /* complete: keep the file */
done:
    if (locked) PyThread_release_lock(self->h2lock);
    if (slots)
        for (Py_ssize_t i = 0; i < n; i++)
            Py_XDECREF(slots[i].body);
    PyMem_Free(slots);
    PyMem_Free(xs);
    PyMem_Free(ups);
    if (block && block_cap <= H2_SCRATCH_KEEP &&
        (!self->h2_scratch || self->h2_scratch_cap < block_cap)) {
        PyMem_Free(self->h2_scratch); /* keep the larger for the next batch */
        self->h2_scratch = block;
        self->h2_scratch_cap = block_cap;
    } else {
        PyMem_Free(block);
    }
    if (hs != hstack) PyMem_Free(hs);
    Py_XDECREF(hkeep);
    if (view.obj) PyBuffer_Release(&view);
    if (dl_fd >= 0) close(dl_fd);
    if (dl_enc) {
        if (dl_created) unlink(PyBytes_AS_STRING(dl_enc)); /* never a truncated file */
        Py_DECREF(dl_enc);
    }
    return out;
}

static PyObject *do_request(ClientObject *self, const char *method, size_t mlen, PyObject *url,
                            PyObject *headers, PyObject *body, PyObject *dl_path,
                            PyObject *max_body_arg)
{
    hb_modstate *st = self->st;
    if (self->http2)
        return h2_batch(self, method, mlen, &url, 1, headers, body, dl_path, max_body_arg, 0);
    if (self->closed) {
        PyErr_SetString(PyExc_ValueError, "the client is closed");
        return NULL;
    }
    uint64_t max_body = self->max_body;
    if (dl_path) max_body = 0; /* a download holds no body in memory */
    if (max_body_arg && arg_max_body(max_body_arg, max_body, &max_body) < 0) return NULL;
    const char *u;
    Py_ssize_t ulen;
    hb_url up;
    if (hb_py_url(st, url, &up, &u, &ulen) < 0) return NULL;
    char err[HB_ERR_LEN];
    int rc;
    if (up.tls && ensure_tls(self) < 0) return NULL;

    char stackbuf[HEAD_STACK];
    char *head = stackbuf;
    hb_header hstack[HEADERS_STACK], *hs = hstack;
    PyObject *hkeep = NULL;
    body_src bs;
    PyObject *resp_obj = NULL, *bodyobj = NULL;
    int dl_fd = -1, dl_created = 0;
    char *dl_buf = NULL;
    PyObject *dl_enc = NULL;
    if (body_prepare(body, &bs) < 0) goto fail; /* releases what it got so far */

    Py_ssize_t nh = hb_py_headers(headers, hstack, HEADERS_STACK, &hs, &hkeep);
    if (nh < 0) goto fail;
    int64_t blen = HB_REQ_NO_BODY;
    if (bs.fd >= 0)
        blen = bs.len < 0 ? HB_REQ_CHUNKED : bs.len;
    else if (bs.view.obj)
        blen = (int64_t)bs.view.len;
    hb_head_spec spec = {method, mlen, &up, hs, (size_t)nh, blen, 1, NULL};
    size_t cap = hb_build_head_bound(&spec);
    if (cap > sizeof stackbuf && !(head = PyMem_Malloc(cap))) {
        PyErr_NoMemory();
        goto fail;
    }
    int head_len = hb_build_head(head, cap, &spec, err);
    /* The head holds copies: the headers' objects may go now. */
    if (hs != hstack) PyMem_Free(hs);
    hs = hstack;
    Py_CLEAR(hkeep);
    if (head_len < 0) {
        hb_raise(st, head_len, err);
        goto fail;
    }

    if (dl_path) {
        if (!PyUnicode_FSConverter(dl_path, &dl_enc)) goto fail;
        dl_buf = PyMem_RawMalloc(DOWNLOAD_BUF);
        if (!dl_buf) {
            PyErr_NoMemory();
            goto fail;
        }
        dl_fd = open(PyBytes_AS_STRING(dl_enc), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
        if (dl_fd < 0) {
            PyErr_SetFromErrnoWithFilenameObject(PyExc_OSError, dl_path);
            goto fail;
        }
        dl_created = 1;
    }

    hb_request rq;
    rq.target.tls = up.tls;
    rq.target.host = up.host;
    rq.target.host_len = up.host_len;
    rq.target.port = up.port;
    rq.head = head;
    rq.head_len = (size_t)head_len;
    rq.body = bs.view.obj ? bs.view.buf : NULL;
    rq.body_len = bs.view.obj ? (size_t)bs.view.len : 0;
    rq.body_fd = bs.fd;
    rq.body_fd_off = bs.off;
    rq.body_fd_len = bs.len;
    rq.is_head = hb_method_is_head(method, mlen);
    rq.idempotent = hb_method_idempotent(method, mlen);
    rq.parse_flags = self->lenient ? HB_PARSE_LENIENT_LF : 0;
    rq.max_body = max_body;
    rq.start_ns = hb_now_ns();
    rq.deadline_ns = self->timeout_ns == UINT64_MAX ? UINT64_MAX : rq.start_ns + self->timeout_ns;
    rq.connect_deadline_ns = self->connect_timeout_ns == UINT64_MAX
                                 ? rq.deadline_ns
                                 : rq.start_ns + self->connect_timeout_ns;
    if (rq.connect_deadline_ns > rq.deadline_ns) rq.connect_deadline_ns = rq.deadline_ns;

    hb_exchange x;
    PyThreadState *ts = PyEval_SaveThread();
    rc = hb_client_begin(&self->pool, &rq, &x, err);
    PyEval_RestoreThread(ts);
    if (rc < 0) {
        raise_rc(st, rc, err, method, mlen, u, ulen);
        goto fail;
    }

    resp_obj = hb_py_response_new(st, &x, url);
    if (!resp_obj) goto fail_x;

    hb_sink sink = {NULL, 0, 0, -1, NULL, NULL};
    grow_ctx g = {NULL, NULL};
    if (dl_fd >= 0) {
        sink.fd = dl_fd;
        sink.buf = dl_buf;
        sink.cap = DOWNLOAD_BUF;
    } else if (x.kind == HB_BODY_LENGTH) {
        /* Small: the whole body at once (the usual case, no regrowth). Large:
         * what is buffered, then grown as bytes arrive, so a Content-Length
         * the peer never sends reserves nothing; over max_body the core
         * fails before reading. */
        size_t init = (size_t)HB_CLIENT_BODY_WHOLE;
        if (x.remaining <= HB_CLIENT_BODY_WHOLE)
            init = (size_t)x.remaining;
        else if (max_body && x.remaining > max_body)
            init = 0;
        bodyobj = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)init);
        if (!bodyobj) goto fail_x;
        g.obj = bodyobj;
        sink.buf = PyBytes_AS_STRING(bodyobj);
        sink.cap = init;
        sink.grow = sink_grow;
        sink.ctx = &g;
    } else if (x.kind != HB_BODY_NONE) {
        size_t init = hb_client_buffered(&x);
        if (init < CHUNKED_INITIAL) init = CHUNKED_INITIAL;
        bodyobj = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)init);
        if (!bodyobj) goto fail_x;
        g.obj = bodyobj;
        sink.buf = PyBytes_AS_STRING(bodyobj);
        sink.cap = init;
        sink.grow = sink_grow;
        sink.ctx = &g;
    }
    if (x.kind == HB_BODY_NONE) {
        rc = hb_client_read_body(&x, &sink, err);
    } else if (x.kind == HB_BODY_LENGTH && dl_fd < 0 && hb_client_buffered(&x) >= x.remaining &&
               sink.cap >= x.remaining) {
        rc = hb_client_read_body(&x, &sink, err); /* all buffered: a memcpy, keep the GIL */
    } else {
        g.ts = PyEval_SaveThread();
        rc = hb_client_read_body(&x, &sink, err);
        PyEval_RestoreThread(g.ts);
        g.ts = NULL;
        if (sink.grow) bodyobj = g.obj; /* may have moved or been freed */
    }
    if (rc < 0) goto fail_rc;
    if (sink.grow && bodyobj && (size_t)PyBytes_GET_SIZE(bodyobj) != sink.len) {
        if (_PyBytes_Resize(&bodyobj, (Py_ssize_t)sink.len) < 0) goto fail_x;
    }
    hb_client_end(&self->pool, &x);
    if (dl_fd >= 0) {
        int crc = close(dl_fd);
        dl_fd = -1;
        if (crc < 0) {
            PyErr_SetFromErrnoWithFilenameObject(PyExc_OSError, dl_path);
            goto fail;
        }
        Py_CLEAR(bodyobj);
    }
    if (!bodyobj && !(bodyobj = PyBytes_FromStringAndSize(NULL, 0))) goto fail;
    hb_py_response_finish(resp_obj, &x, bodyobj);
    bodyobj = NULL;
    if (bs.file && bs.len > 0) {
        PyObject *s = PyObject_CallMethod(bs.file, "seek", "L", (long long)(bs.off + bs.len));
        if (!s) goto fail;
        Py_DECREF(s);
    }
    body_release(&bs);
    if (head != stackbuf) PyMem_Free(head);
    PyMem_RawFree(dl_buf);
    Py_XDECREF(dl_enc);
    return resp_obj;

fail_rc:
    raise_rc(st, rc, err, method, mlen, u, ulen);
fail_x:
    hb_client_end(&self->pool, &x);
fail:
    body_release(&bs);
    if (hs != hstack) PyMem_Free(hs);
    Py_XDECREF(hkeep);
    if (head != stackbuf) PyMem_Free(head);
    Py_XDECREF(resp_obj);
    Py_XDECREF(bodyobj);
    if (dl_fd >= 0) close(dl_fd);
    if (dl_enc) {
        /* Never leave a truncated download that looks complete. */
        if (dl_created) unlink(PyBytes_AS_STRING(dl_enc));
        Py_DECREF(dl_enc);
    }
    PyMem_RawFree(dl_buf);
    return NULL;
}

static PyObject *client_get(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                            PyObject *kwnames)
{
    static const char *const names[] = {"url", "headers", "max_body"};
    PyObject *a[3];
    if (nargs == 1 && !kwnames) { /* the hot path */
        return do_request((ClientObject *)self, "GET", 3, args[0], NULL, NULL, NULL, NULL);
    }
    if (hb_args("get", args, nargs, kwnames, names, 3, 2, 1, a) < 0) return NULL;
    return do_request((ClientObject *)self, "GET", 3, a[0], a[1], NULL, NULL, a[2]);
}

static PyObject *client_head(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                             PyObject *kwnames)
{
    static const char *const names[] = {"url", "headers"};
    PyObject *a[2];
    if (hb_args("head", args, nargs, kwnames, names, 2, 2, 1, a) < 0) return NULL;
    return do_request((ClientObject *)self, "HEAD", 4, a[0], a[1], NULL, NULL, NULL);
}

static PyObject *client_request(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                                PyObject *kwnames)
{
    static const char *const names[] = {"method", "url", "body", "headers", "max_body"};
    PyObject *a[5];
    if (hb_args("request", args, nargs, kwnames, names, 5, 2, 2, a) < 0) return NULL;
    if (!PyUnicode_Check(a[0])) {
        PyErr_SetString(PyExc_TypeError, "method must be str");
        return NULL;
    }
    Py_ssize_t mlen;
    const char *m = PyUnicode_AsUTF8AndSize(a[0], &mlen);
    if (!m) return NULL;
    char err[HB_ERR_LEN];
    int rc = hb_check_method(m, (size_t)mlen, err);
    if (rc < 0) return hb_raise(((ClientObject *)self)->st, rc, err);
    return do_request((ClientObject *)self, m, (size_t)mlen, a[1], a[3], a[2], NULL, a[4]);
}

static PyObject *client_download(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                                 PyObject *kwnames)
{
    static const char *const names[] = {"url", "path", "headers", "max_body"};
    PyObject *a[4];
    if (hb_args("download", args, nargs, kwnames, names, 4, 2, 2, a) < 0) return NULL;
    return do_request((ClientObject *)self, "GET", 3, a[0], a[2], NULL, a[1], a[3]);
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
    if (c->http2) {
        out = h2_batch(c, "GET", 3, items, n, a[1], NULL, NULL, a[2], 1);
    } else { /* HTTP/1.1: one after the other on the pool */
        out = PyList_New(n);
        for (Py_ssize_t i = 0; out && i < n; i++) {
            PyObject *r = do_request(c, "GET", 3, items[i], a[1], NULL, NULL, a[2]);
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
    if (self->h2 && self->pool_ok) {
        h2_lock(self);
        Py_BEGIN_ALLOW_THREADS h2_close_all(self, 0);
        Py_END_ALLOW_THREADS PyThread_release_lock(self->h2lock);
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
    static char *kwlist[] = {
        "timeout",     "connect_timeout", "verify",   "ca_file", "max_connections_per_host",
        "stale_check", "idle_timeout",    "max_body", "lenient", "http2",
        NULL};
    PyObject *timeout = NULL, *ctimeout = NULL, *ca = NULL, *idle = NULL, *mb = NULL;
    int verify = 1, stale = 1, maxc = HB_POOL_DEFAULT_MAX_PER_HOST, lenient = 0, http2 = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|$OOpOipOOpp:Client", kwlist, &timeout, &ctimeout,
                                     &verify, &ca, &maxc, &stale, &idle, &mb, &lenient, &http2))
        return NULL;
    if (http2 && lenient) {
        PyErr_SetString(PyExc_ValueError, "lenient applies to HTTP/1.1 framing, not http2");
        return NULL;
    }
    uint64_t max_body;
    if (arg_max_body(mb, DEFAULT_MAX_BODY, &max_body) < 0) return NULL;
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
    if (http2 && !(self->h2lock = PyThread_allocate_lock())) {
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
    if (self->pool_ok) h2_close_all(self, 1); /* sessions hold pool connections */
    if (self->h2lock) PyThread_free_lock(self->h2lock);
    if (self->pool_ok) hb_pool_destroy(&self->pool);
    if (self->tls) hb_tls_ctx_free(self->tls);
    PyMem_Free(self->ca_file);
    PyMem_Free(self->h2_scratch);
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
                "max_body=1073741824, lenient=False, http2=False)\n--\n\n"
                "A native HTTP/1.1 client with a keep-alive pool per (scheme, host, port).\n"
                "timeout is a deadline for the whole request (connect to last byte); "
                "connect_timeout bounds connecting (TCP + TLS). max_body caps a body held in "
                "memory (BodyTooLarge; None: no limit); lenient accepts bare LF line ends in "
                "responses, counted in Response.tolerated. Safe to share between threads. "
                "http2=True: every request over HTTP/2 (h2c with prior knowledge for http://, "
                "ALPN h2 for https://; HTTP2NotSupported when the server does not speak it), one "
                "connection per origin; get_many() multiplexes a batch on it."},
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
