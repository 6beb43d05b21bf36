/* client.c - httpbench.Client and httpbench.Response: the Python face of
 * hb_client/hb_pool (csrc/core/hb_client.h, hb_pool.h).
 *
 * Per request, with the GIL held: parse the URL, serialize the head into a
 * stack buffer, prepare the body; then, GIL released: connect or reuse, send,
 * read the head; GIL held again: build the Response, allocate the body bytes
 * at Content-Length size and read the rest straight into them (GIL released
 * when a syscall is needed). No C heap allocation per request; Python objects
 * per request: the Response, its raw head bytes and its body bytes (reason,
 * headers, timings are built only when accessed).
 *
 * Thread safety: a Client may be used from several threads at once; the pool
 * is guarded by a mutex and each request runs on its own connection.
 */
#include "module.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <structmember.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hb_client.h"
#include "hb_clock.h"
#include "hb_tls.h"

#define HEAD_STACK 8192
#define DOWNLOAD_BUF (256 * 1024)
#define CHUNKED_INITIAL (16 * 1024)

typedef struct {
    PyObject_HEAD
    hb_modstate *st;
    hb_pool pool;
    int pool_ok;
    int closed;
    hb_tls_ctx *tls;
    int verify;
    char *ca_file; /* PyMem copy or NULL */
    uint64_t timeout_ns;         /* UINT64_MAX: none */
    uint64_t connect_timeout_ns; /* UINT64_MAX: only the overall timeout */
    double timeout, connect_timeout, idle_timeout; /* as given (-1: None) */
} ClientObject;

/* Variable-size: the final response head as received is stored inline
 * (ob_size bytes at `head`), so a response costs one allocation, not two. */
typedef struct {
    PyObject_VAR_HEAD
    int status;
    int minor;
    int reused;
    Py_ssize_t reason_off, reason_len; /* within head */
    PyObject *body;                    /* bytes */
    PyObject *url;
    PyObject *headers; /* cached Headers, built on first access */
    unsigned long long size;
    uint64_t t_start, t_connected, t_tls_done, t_first_byte, t_done;
    char head[1];
} ResponseObject;

/* ------------------------------------------------------------------ Response */

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
    return PyUnicode_DecodeLatin1(r->head + r->reason_off, r->reason_len,
                                  NULL);
}

static PyObject *resp_version(PyObject *o, void *c)
{
    (void)c;
    return PyUnicode_FromString(((ResponseObject *)o)->minor ? "HTTP/1.1" : "HTTP/1.0");
}

static PyObject *resp_headers(PyObject *o, void *c)
{
    (void)c;
    ResponseObject *r = (ResponseObject *)o;
    if (r->headers) return Py_NewRef(r->headers);
    hb_header hs[HB_CLIENT_MAX_HEADERS];
    hb_response_head h;
    memset(&h, 0, sizeof h);
    h.headers = hs;
    h.num_headers = HB_CLIENT_MAX_HEADERS;
    int n = hb_parse_response_head(r->head, (size_t)Py_SIZE(r), &h, NULL);
    if (n < 0) { /* cannot happen: it parsed before */
        PyErr_SetString(PyExc_RuntimeError, "stored response head no longer parses");
        return NULL;
    }
    PyObject *list = PyList_New((Py_ssize_t)h.num_headers);
    if (!list) return NULL;
    for (size_t i = 0; i < h.num_headers; i++) {
        PyObject *t = Py_BuildValue("(NN)",
                                    PyUnicode_DecodeLatin1(hs[i].name, (Py_ssize_t)hs[i].name_len,
                                                           NULL),
                                    PyUnicode_DecodeLatin1(hs[i].value,
                                                           (Py_ssize_t)hs[i].value_len, NULL));
        if (!t) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)i, t);
    }
    PyObject *mod = PyImport_ImportModule("httpbench._client");
    PyObject *cls = mod ? PyObject_GetAttrString(mod, "Headers") : NULL;
    Py_XDECREF(mod);
    PyObject *res = cls ? PyObject_CallOneArg(cls, list) : NULL;
    Py_XDECREF(cls);
    Py_DECREF(list);
    if (res) r->headers = Py_NewRef(res);
    return res;
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
    {NULL, 0, 0, 0, NULL},
};

static PyGetSetDef resp_getset[] = {
    {"reason", resp_reason, NULL, "Reason phrase as sent (may be empty).", NULL},
    {"http_version", resp_version, NULL, "'HTTP/1.1' or 'HTTP/1.0'.", NULL},
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

/* -------------------------------------------------------------- request prep */

/* A URL split into its parts (pointers into the caller's UTF-8 text). */
typedef struct {
    int tls;
    const char *host; /* without brackets */
    size_t host_len;
    const char *hosthdr; /* as written (with brackets and port if given) */
    size_t hosthdr_len;
    int port;
    const char *path; /* path and query; "" means "/" */
    size_t path_len;
    int query_only; /* the authority ended at '?': target is "/" + path */
} url_parts;

static int parse_url(const char *u, size_t n, url_parts *o)
{
    size_t i;
    if (n >= 7 && strncasecmp(u, "http://", 7) == 0) {
        o->tls = 0;
        i = 7;
        o->port = 80;
    } else if (n >= 8 && strncasecmp(u, "https://", 8) == 0) {
        o->tls = 1;
        i = 8;
        o->port = 443;
    } else {
        PyErr_Format(PyExc_ValueError, "unsupported URL (want http:// or https://): %.200s", u);
        return -1;
    }
    for (size_t k = 0; k < n; k++) {
        unsigned char ch = (unsigned char)u[k];
        if (ch <= 0x20 || ch >= 0x7f) {
            PyErr_Format(PyExc_ValueError,
                         "URL contains whitespace, control or non-ASCII characters "
                         "(percent-encode them): %.200R",
                         PyUnicode_DecodeUTF8(u, (Py_ssize_t)n, "replace"));
            return -1;
        }
    }
    size_t a = i;
    while (i < n && u[i] != '/' && u[i] != '?' && u[i] != '#') i++;
    size_t aend = i;
    if (memchr(u + a, '@', aend - a)) {
        PyErr_SetString(PyExc_ValueError, "credentials in URLs are not supported");
        return -1;
    }
    o->hosthdr = u + a;
    o->hosthdr_len = aend - a;
    size_t hs = a, he;
    size_t p = a;
    if (p < aend && u[p] == '[') {
        const char *rb = memchr(u + p, ']', aend - p);
        if (!rb) goto bad_host;
        hs = p + 1;
        he = (size_t)(rb - u);
        p = he + 1;
        if (p < aend && u[p] != ':') goto bad_host;
    } else {
        while (p < aend && u[p] != ':') p++;
        he = p;
    }
    if (he == hs) goto bad_host;
    o->host = u + hs;
    o->host_len = he - hs;
    if (p < aend) { /* ':' port */
        p++;
        if (p == aend) goto bad_port;
        long port = 0;
        for (; p < aend; p++) {
            if (u[p] < '0' || u[p] > '9' || port > 65535) goto bad_port;
            port = port * 10 + (u[p] - '0');
        }
        if (port < 1 || port > 65535) goto bad_port;
        o->port = (int)port;
    }
    size_t pe = i;
    while (pe < n && u[pe] != '#') pe++; /* the fragment is never sent */
    o->path = u + i;
    o->path_len = pe - i;
    o->query_only = i < n && u[i] == '?';
    return 0;
bad_host:
    PyErr_Format(PyExc_ValueError, "URL has no valid host: %.200s", u);
    return -1;
bad_port:
    PyErr_Format(PyExc_ValueError, "URL has an invalid port: %.200s", u);
    return -1;
}

/* Growable output for the request head: starts on the stack. */
typedef struct {
    char *p;
    size_t len, cap;
    int heap;
} outbuf;

static int ob_put(outbuf *b, const char *s, size_t n)
{
    if (b->len + n > b->cap) {
        size_t nc = b->cap * 2;
        while (nc < b->len + n) nc *= 2;
        char *np = PyMem_Malloc(nc);
        if (!np) {
            PyErr_NoMemory();
            return -1;
        }
        memcpy(np, b->p, b->len);
        if (b->heap) PyMem_Free(b->p);
        b->p = np;
        b->cap = nc;
        b->heap = 1;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    return 0;
}
#define OB_LIT(b, lit) ob_put((b), (lit), sizeof(lit) - 1)

static int is_tchar(unsigned char c)
{
    static const char extra[] = "!#$%&'*+-.^_`|~";
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c && strchr(extra, c));
}

/* str or bytes -> (ptr, len); str must be encodable (UTF-8 for values). */
static int as_text(PyObject *o, const char **p, Py_ssize_t *n, const char *what)
{
    if (PyUnicode_Check(o)) {
        *p = PyUnicode_AsUTF8AndSize(o, n);
        return *p ? 0 : -1;
    }
    if (PyBytes_Check(o)) {
        *p = PyBytes_AS_STRING(o);
        *n = PyBytes_GET_SIZE(o);
        return 0;
    }
    PyErr_Format(PyExc_TypeError, "header %s must be str or bytes, not %.100s", what,
                 Py_TYPE(o)->tp_name);
    return -1;
}

/* Flags of user headers the client would otherwise add itself. */
#define UH_HOST 1

static int put_header(outbuf *b, PyObject *k, PyObject *v, int *flags)
{
    const char *kp, *vp;
    Py_ssize_t kn, vn;
    if (as_text(k, &kp, &kn, "name") < 0 || as_text(v, &vp, &vn, "value") < 0) return -1;
    if (kn == 0) goto bad_name;
    for (Py_ssize_t i = 0; i < kn; i++)
        if (!is_tchar((unsigned char)kp[i])) goto bad_name;
    for (Py_ssize_t i = 0; i < vn; i++) {
        unsigned char c = (unsigned char)vp[i];
        if ((c < 0x20 && c != '\t') || c == 0x7f) {
            PyErr_Format(PyExc_ValueError, "header %R has a control character (CR/LF/NUL) in "
                         "its value", k);
            return -1;
        }
    }
    if (kn == 4 && strncasecmp(kp, "host", 4) == 0) *flags |= UH_HOST;
    if ((kn == 14 && strncasecmp(kp, "content-length", 14) == 0) ||
        (kn == 17 && strncasecmp(kp, "transfer-encoding", 17) == 0)) {
        PyErr_Format(PyExc_ValueError, "header %R is set by the client from the body", k);
        return -1;
    }
    if (ob_put(b, kp, (size_t)kn) < 0 || OB_LIT(b, ": ") < 0 || ob_put(b, vp, (size_t)vn) < 0 ||
        OB_LIT(b, "\r\n") < 0)
        return -1;
    return 0;
bad_name:
    PyErr_Format(PyExc_ValueError, "invalid header name %R", k);
    return -1;
}

static int put_headers(outbuf *b, PyObject *headers, int *flags)
{
    if (headers == NULL || headers == Py_None) return 0;
    if (PyDict_Check(headers)) {
        Py_ssize_t pos = 0;
        PyObject *k, *v;
        while (PyDict_Next(headers, &pos, &k, &v))
            if (put_header(b, k, v, flags) < 0) return -1;
        return 0;
    }
    PyObject *items = NULL;
    if (PyObject_HasAttrString(headers, "items")) {
        items = PyObject_CallMethod(headers, "items", NULL);
        if (!items) return -1;
    } else {
        items = Py_NewRef(headers);
    }
    PyObject *it = PyObject_GetIter(items);
    Py_DECREF(items);
    if (!it) return -1;
    PyObject *pair;
    int rc = 0;
    while (rc == 0 && (pair = PyIter_Next(it))) {
        if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2) {
            PyErr_SetString(PyExc_TypeError,
                            "headers must be a mapping or an iterable of (name, value) pairs");
            rc = -1;
        } else {
            rc = put_header(b, PyTuple_GET_ITEM(pair, 0), PyTuple_GET_ITEM(pair, 1), flags);
        }
        Py_DECREF(pair);
    }
    Py_DECREF(it);
    if (rc == 0 && PyErr_Occurred()) rc = -1;
    return rc;
}

/* The request body as the core wants it. */
typedef struct {
    Py_buffer view; /* in-memory (view.obj set) */
    int fd;
    int own_fd;   /* opened from a path: close it */
    off_t off;    /* pread offset, -1 for read() */
    int64_t len;  /* -1: unknown (chunked) */
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
    PyObject *fno = PyObject_HasAttrString(body, "fileno")
                        ? PyObject_CallMethod(body, "fileno", NULL)
                        : NULL;
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

static int method_idempotent(const char *m, size_t n)
{
    static const char *const idem[] = {"GET", "HEAD", "PUT", "DELETE", "OPTIONS", "TRACE"};
    for (size_t i = 0; i < sizeof idem / sizeof idem[0]; i++)
        if (strlen(idem[i]) == n && memcmp(idem[i], m, n) == 0) return 1;
    return 0;
}

/* Methods whose request normally carries content: send Content-Length: 0. */
static int method_wants_length(const char *m, size_t n)
{
    return (n == 4 && memcmp(m, "POST", 4) == 0) || (n == 3 && memcmp(m, "PUT", 3) == 0) ||
           (n == 5 && memcmp(m, "PATCH", 5) == 0);
}

static int ensure_tls(ClientObject *self)
{
    if (self->tls) return 0;
    hb_tls_client_opts o;
    hb_tls_client_opts_init(&o);
    o.ca_file = self->ca_file;
    o.insecure = !self->verify;
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
    size_t nc = s->cap ? s->cap : CHUNKED_INITIAL;
    while (nc < need) nc *= 2;
    if (nc > PY_SSIZE_T_MAX) return hb_fail(err, HB_E_NOMEM, "body too large");
    if (g->ts) PyEval_RestoreThread(g->ts);
    int rc = _PyBytes_Resize(&g->obj, (Py_ssize_t)nc);
    if (rc < 0) PyErr_Clear();
    if (g->ts) g->ts = PyEval_SaveThread();
    if (rc < 0) return hb_fail(err, HB_E_NOMEM, "out of memory for a %zu byte body", nc);
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

static PyObject *do_request(ClientObject *self, const char *method, size_t mlen, PyObject *url,
                            PyObject *headers, PyObject *body, PyObject *dl_path)
{
    hb_modstate *st = self->st;
    if (self->closed) {
        PyErr_SetString(PyExc_ValueError, "the client is closed");
        return NULL;
    }
    if (!PyUnicode_Check(url)) {
        PyErr_Format(PyExc_TypeError, "url must be str, not %.100s", Py_TYPE(url)->tp_name);
        return NULL;
    }
    Py_ssize_t ulen;
    const char *u = PyUnicode_AsUTF8AndSize(url, &ulen);
    if (!u) return NULL;
    url_parts up;
    if (parse_url(u, (size_t)ulen, &up) < 0) return NULL;
    if (up.tls && ensure_tls(self) < 0) return NULL;

    char stackbuf[HEAD_STACK];
    outbuf b = {stackbuf, 0, sizeof stackbuf, 0};
    body_src bs;
    PyObject *resp_obj = NULL, *bodyobj = NULL;
    int dl_fd = -1, dl_created = 0;
    char *dl_buf = NULL;
    PyObject *dl_enc = NULL;
    if (body_prepare(body, &bs) < 0) goto fail; /* releases what it got so far */

    int flags = 0;
    if (ob_put(&b, method, mlen) < 0 || OB_LIT(&b, " ") < 0) goto fail;
    if (up.path_len == 0 || up.query_only) {
        if (OB_LIT(&b, "/") < 0) goto fail;
    }
    if (ob_put(&b, up.path, up.path_len) < 0 || OB_LIT(&b, " HTTP/1.1\r\n") < 0) goto fail;
    size_t host_at = b.len;
    if (OB_LIT(&b, "Host: ") < 0 || ob_put(&b, up.hosthdr, up.hosthdr_len) < 0 ||
        OB_LIT(&b, "\r\n") < 0)
        goto fail;
    size_t host_end = b.len;
    if (put_headers(&b, headers, &flags) < 0) goto fail;
    if (flags & UH_HOST) { /* the caller's Host wins: drop ours */
        memmove(b.p + host_at, b.p + host_end, b.len - host_end);
        b.len -= host_end - host_at;
    }
    int has_body = bs.view.obj != NULL || bs.fd >= 0;
    if (has_body && bs.fd >= 0 && bs.len < 0) {
        if (OB_LIT(&b, "Transfer-Encoding: chunked\r\n") < 0) goto fail;
    } else if (has_body || method_wants_length(method, mlen)) {
        char cl[48];
        long long n = bs.fd >= 0 ? (long long)bs.len : (long long)bs.view.len;
        int k = PyOS_snprintf(cl, sizeof cl, "Content-Length: %lld\r\n", n);
        if (ob_put(&b, cl, (size_t)k) < 0) goto fail;
    }
    if (OB_LIT(&b, "\r\n") < 0) goto fail;

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
    rq.head = b.p;
    rq.head_len = b.len;
    rq.body = bs.view.obj ? bs.view.buf : NULL;
    rq.body_len = bs.view.obj ? (size_t)bs.view.len : 0;
    rq.body_fd = bs.fd;
    rq.body_fd_off = bs.off;
    rq.body_fd_len = bs.len;
    rq.is_head = mlen == 4 && memcmp(method, "HEAD", 4) == 0;
    rq.idempotent = method_idempotent(method, mlen);
    rq.start_ns = hb_now_ns();
    rq.deadline_ns =
        self->timeout_ns == UINT64_MAX ? UINT64_MAX : rq.start_ns + self->timeout_ns;
    rq.connect_deadline_ns = self->connect_timeout_ns == UINT64_MAX
                                 ? rq.deadline_ns
                                 : rq.start_ns + self->connect_timeout_ns;
    if (rq.connect_deadline_ns > rq.deadline_ns) rq.connect_deadline_ns = rq.deadline_ns;

    hb_exchange x;
    char err[HB_ERR_LEN];
    int rc;
    PyThreadState *ts = PyEval_SaveThread();
    rc = hb_client_begin(&self->pool, &rq, &x, err);
    PyEval_RestoreThread(ts);
    if (rc < 0) {
        raise_rc(st, rc, err, method, mlen, u, ulen);
        goto fail;
    }

    ResponseObject *r =
        (ResponseObject *)st->ResponseType->tp_alloc(st->ResponseType, (Py_ssize_t)x.head_len);
    resp_obj = (PyObject *)r;
    if (!r) goto fail_x;
    r->status = x.resp.status;
    r->minor = x.resp.minor_version;
    r->reused = x.reused;
    r->reason_off = x.resp.reason ? (Py_ssize_t)(x.resp.reason - x.head_buf) : 0;
    r->reason_len = (Py_ssize_t)x.resp.reason_len;
    r->url = Py_NewRef(url);
    memcpy(r->head, x.head_buf, x.head_len);

    hb_sink sink = {NULL, 0, 0, -1, NULL, NULL};
    grow_ctx g = {NULL, NULL};
    if (dl_fd >= 0) {
        sink.fd = dl_fd;
        sink.buf = dl_buf;
        sink.cap = DOWNLOAD_BUF;
    } else if (x.kind == HB_BODY_LENGTH) {
        if (x.remaining > (uint64_t)PY_SSIZE_T_MAX) {
            rc = hb_fail(err, HB_E_NOMEM, "Content-Length %llu is too large",
                         (unsigned long long)x.remaining);
            goto fail_rc;
        }
        bodyobj = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)x.remaining);
        if (!bodyobj) goto fail_x;
        sink.buf = PyBytes_AS_STRING(bodyobj);
        sink.cap = (size_t)x.remaining;
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
    } else if (x.kind == HB_BODY_LENGTH && dl_fd < 0 && hb_client_buffered(&x) >= x.remaining) {
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
    r->t_start = x.t_start;
    r->t_connected = x.t_connected;
    r->t_tls_done = x.t_tls_done;
    r->t_first_byte = x.t_first_byte;
    r->t_done = x.t_done;
    r->size = (unsigned long long)x.body_bytes;
    if (dl_fd >= 0) {
        int crc = close(dl_fd);
        dl_fd = -1;
        if (crc < 0) {
            PyErr_SetFromErrnoWithFilenameObject(PyExc_OSError, dl_path);
            goto fail;
        }
        r->body = PyBytes_FromStringAndSize(NULL, 0);
    } else {
        r->body = bodyobj ? bodyobj : PyBytes_FromStringAndSize(NULL, 0);
        bodyobj = NULL;
    }
    if (bs.file && bs.len > 0) {
        PyObject *s = PyObject_CallMethod(bs.file, "seek", "L", (long long)(bs.off + bs.len));
        if (!s) goto fail;
        Py_DECREF(s);
    }
    body_release(&bs);
    if (b.heap) PyMem_Free(b.p);
    PyMem_RawFree(dl_buf);
    Py_XDECREF(dl_enc);
    return resp_obj;

fail_rc:
    raise_rc(st, rc, err, method, mlen, u, ulen);
fail_x:
    hb_client_end(&self->pool, &x);
fail:
    body_release(&bs);
    if (b.heap) PyMem_Free(b.p);
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

/* ----------------------------------------------------------- argument parsing */

/* Minimal fastcall parser: positional args then keywords by name. out[i] is
 * borrowed or NULL. npos_max: how many may be positional. */
static int parse_args(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                      const char *const *names, int nnames, int npos_max, int nrequired,
                      PyObject **out, const char *fname)
{
    for (int i = 0; i < nnames; i++) out[i] = NULL;
    if (nargs > npos_max) {
        PyErr_Format(PyExc_TypeError, "%s() takes at most %d positional arguments (%zd given)",
                     fname, npos_max, nargs);
        return -1;
    }
    for (Py_ssize_t i = 0; i < nargs; i++) out[i] = args[i];
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
                PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument %R",
                             fname, key);
                return -1;
            }
            if (out[found]) {
                PyErr_Format(PyExc_TypeError, "%s() got multiple values for argument '%s'",
                             fname, names[found]);
                return -1;
            }
            out[found] = args[nargs + k];
        }
    }
    for (int i = 0; i < nrequired; i++) {
        if (!out[i]) {
            PyErr_Format(PyExc_TypeError, "%s() missing required argument '%s'", fname,
                         names[i]);
            return -1;
        }
    }
    return 0;
}

static PyObject *client_get(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                            PyObject *kwnames)
{
    static const char *const names[] = {"url", "headers"};
    PyObject *a[2];
    if (nargs == 1 && !kwnames) { /* the hot path */
        return do_request((ClientObject *)self, "GET", 3, args[0], NULL, NULL, NULL);
    }
    if (parse_args(args, nargs, kwnames, names, 2, 2, 1, a, "get") < 0) return NULL;
    return do_request((ClientObject *)self, "GET", 3, a[0], a[1], NULL, NULL);
}

static PyObject *client_head(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                             PyObject *kwnames)
{
    static const char *const names[] = {"url", "headers"};
    PyObject *a[2];
    if (parse_args(args, nargs, kwnames, names, 2, 2, 1, a, "head") < 0) return NULL;
    return do_request((ClientObject *)self, "HEAD", 4, a[0], a[1], NULL, NULL);
}

static PyObject *client_request(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                                PyObject *kwnames)
{
    static const char *const names[] = {"method", "url", "body", "headers"};
    PyObject *a[4];
    if (parse_args(args, nargs, kwnames, names, 4, 2, 2, a, "request") < 0) return NULL;
    if (!PyUnicode_Check(a[0])) {
        PyErr_SetString(PyExc_TypeError, "method must be str");
        return NULL;
    }
    Py_ssize_t mlen;
    const char *m = PyUnicode_AsUTF8AndSize(a[0], &mlen);
    if (!m) return NULL;
    if (mlen == 0) goto bad;
    for (Py_ssize_t i = 0; i < mlen; i++)
        if (!is_tchar((unsigned char)m[i])) goto bad;
    return do_request((ClientObject *)self, m, (size_t)mlen, a[1], a[3], a[2], NULL);
bad:
    PyErr_Format(PyExc_ValueError, "invalid HTTP method %R", a[0]);
    return NULL;
}

static PyObject *client_download(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                                 PyObject *kwnames)
{
    static const char *const names[] = {"url", "path", "headers"};
    PyObject *a[3];
    if (parse_args(args, nargs, kwnames, names, 3, 2, 2, a, "download") < 0) return NULL;
    return do_request((ClientObject *)self, "GET", 3, a[0], a[2], NULL, a[1]);
}

static PyObject *client_close(PyObject *o, PyObject *unused)
{
    (void)unused;
    ClientObject *self = (ClientObject *)o;
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
    int on = PyObject_IsTrue(v);
    if (on < 0) return -1;
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
static PyObject *client_get_closed(PyObject *o, void *c)
{
    (void)c;
    return PyBool_FromLong(((ClientObject *)o)->closed);
}

/* None -> -1 (none), else a positive finite number of seconds. */
static int timeout_arg(PyObject *o, double *out, const char *name, int allow_none)
{
    if (o == NULL) return 0;
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

static uint64_t to_ns(double s)
{
    return s < 0 ? UINT64_MAX : (uint64_t)(s * 1e9);
}

static PyObject *client_new(PyTypeObject *tp, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"timeout",   "connect_timeout",          "verify",
                             "ca_file",   "max_connections_per_host", "stale_check",
                             "idle_timeout", NULL};
    PyObject *timeout = NULL, *ctimeout = NULL, *ca = NULL, *idle = NULL;
    int verify = 1, stale = 1, maxc = HB_POOL_DEFAULT_MAX_PER_HOST;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|$OOpOipO:Client", kwlist, &timeout, &ctimeout,
                                     &verify, &ca, &maxc, &stale, &idle))
        return NULL;
    double t = 10.0, ct = -1, it = HB_POOL_DEFAULT_IDLE_NS / 1e9;
    if (timeout_arg(timeout, &t, "timeout", 1) < 0 ||
        timeout_arg(ctimeout, &ct, "connect_timeout", 1) < 0 ||
        timeout_arg(idle, &it, "idle_timeout", 1) < 0)
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
    if (self->pool_ok) hb_pool_destroy(&self->pool);
    if (self->tls) hb_tls_ctx_free(self->tls);
    PyMem_Free(self->ca_file);
    tp->tp_free(o);
    Py_DECREF(tp);
}

static PyMethodDef client_methods[] = {
    {"get", (PyCFunction)(void (*)(void))client_get, METH_FASTCALL | METH_KEYWORDS,
     "get($self, /, url, headers=None)\n--\n\nGET url -> Response; the body is read into memory."},
    {"head", (PyCFunction)(void (*)(void))client_head, METH_FASTCALL | METH_KEYWORDS,
     "head($self, /, url, headers=None)\n--\n\nHEAD url -> Response (without a body)."},
    {"request", (PyCFunction)(void (*)(void))client_request, METH_FASTCALL | METH_KEYWORDS,
     "request($self, /, method, url, *, body=None, headers=None)\n--\n\n"
     "Send any method -> Response. body: bytes-like, a file object or a path "
     "(streamed; Content-Length when the size is known, chunked otherwise)."},
    {"download", (PyCFunction)(void (*)(void))client_download, METH_FASTCALL | METH_KEYWORDS,
     "download($self, /, url, path, *, headers=None)\n--\n\n"
     "GET url -> Response, streaming the body into the file at path (never held in "
     "memory); the Response's body is b'' and .size the bytes written. On error the "
     "file is removed."},
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
    {"timeout", client_get_timeout, NULL, "Whole-request deadline in seconds (None: none).",
     NULL},
    {"closed", client_get_closed, NULL, "True after close().", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot client_slots[] = {
    {Py_tp_doc,
     "Client(*, timeout=10.0, connect_timeout=None, verify=True, ca_file=None, "
     "max_connections_per_host=10, stale_check=True, idle_timeout=60.0)\n--\n\n"
     "A native HTTP/1.1 client with a keep-alive pool per (scheme, host, port).\n"
     "timeout is a deadline for the whole request (connect to last byte); "
     "connect_timeout bounds connecting (TCP + TLS). Safe to share between threads."},
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
    PyObject *rt = PyType_FromModuleAndSpec(m, &resp_spec, NULL);
    if (!rt) return -1;
    st->ResponseType = (PyTypeObject *)rt;
    if (PyModule_AddObjectRef(m, "Response", rt) < 0) return -1;
    PyObject *ct = PyType_FromModuleAndSpec(m, &client_spec, NULL);
    if (!ct) return -1;
    st->ClientType = (PyTypeObject *)ct;
    if (PyModule_AddObjectRef(m, "Client", ct) < 0) return -1;
    return 0;
}
