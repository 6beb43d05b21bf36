/* client_mux.c - a Client's HTTP/2 and HTTP/3 batches: requests multiplexed
 * on the origin's connection (client_h2.c's session or client_h3.c's QUIC
 * connection) as hb_mx exchanges (see client_int.h). */
#include "client_int.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/hb_clock.h"
#include "http/hb_request.h"

mxorigin *hb__cl_origin(mxorigin **list, const hb_url *u, size_t size)
{
    for (mxorigin *o = *list; o; o = o->next)
        if (o->tls == u->tls && o->port == u->port && o->host_len == u->host_len &&
            memcmp(o->host, u->host, u->host_len) == 0)
            return o;
    if (u->host_len > HB_POOL_MAX_HOST) {
        PyErr_SetString(PyExc_ValueError, "host name too long");
        return NULL;
    }
    mxorigin *o = PyMem_Calloc(1, size);
    if (!o) {
        PyErr_NoMemory();
        return NULL;
    }
    o->tls = u->tls;
    o->port = u->port;
    o->host_len = u->host_len;
    memcpy(o->host, u->host, u->host_len);
    o->next = *list;
    *list = o;
    return o;
}

void hb__cl_mux_lock(ClientObject *self)
{
    if (!PyThread_acquire_lock(self->mux_lock, NOWAIT_LOCK)) {
        Py_BEGIN_ALLOW_THREADS PyThread_acquire_lock(self->mux_lock, WAIT_LOCK);
        Py_END_ALLOW_THREADS
    }
}

/* Per exchange of a batch, besides the core's hb_mx. */
typedef struct {
    hb_sink sink;
    grow_ctx g;
    PyObject *body; /* bytes being filled */
} mxslot;

/* Run one method on urls[0..n) over HTTP/2 or HTTP/3 (same origin), multiplexed; a list of
 * Responses in order (as_list) or the one Response. */
PyObject *hb__cl_mux_batch(ClientObject *self, const char *method, size_t mlen,
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
    if (max_body_arg && hb__cl_max_body(max_body_arg, max_body, &max_body) < 0) return NULL;
    Py_buffer view = {0};
    if (body && body != Py_None) {
        if (!PyObject_CheckBuffer(body)) {
            PyErr_Format(PyExc_TypeError,
                         "an HTTP/%d request body must be bytes-like (or None), not %.100s",
                         self->http3 ? 3 : 2, Py_TYPE(body)->tp_name);
            return NULL;
        }
        if (PyObject_GetBuffer(body, &view, PyBUF_SIMPLE) < 0) return NULL;
    }
    hb_header hstack[HEADERS_STACK], *hs = hstack;
    PyObject *hkeep = NULL, *out = NULL;
    char *block = NULL;
    size_t block_cap = 0;
    hb_mx *xs = NULL;
    mxslot *slots = NULL;
    hb_url *ups = NULL;
    int dl_fd = -1, dl_created = 0, locked = 0;
    PyObject *dl_enc = NULL;
    char err[HB_ERR_LEN] = "";
    int rc;

    Py_ssize_t nh = hb_py_headers(headers, hstack, HEADERS_STACK, &hs, &hkeep);
    if (nh < 0) goto done;
    /* one request (get, request, download): on the stack, no allocation but the Response's */
    hb_url ups1;
    hb_mx xs1;
    mxslot slots1;
    if (n == 1) {
        memset(&ups1, 0, sizeof ups1);
        memset(&xs1, 0, sizeof xs1);
        memset(&slots1, 0, sizeof slots1);
        ups = &ups1;
        xs = &xs1;
        slots = &slots1;
    } else {
        ups = PyMem_Calloc((size_t)n, sizeof *ups);
        xs = PyMem_Calloc((size_t)n, sizeof *xs);
        slots = PyMem_Calloc((size_t)n, sizeof *slots);
    }
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
            total += MX_HEAD_CAP + 16;
            continue;
        }
        if (hb_py_url(st, urls[i], &ups[i], &u, &ulen) < 0) goto done;
        if (self->http3 && !ups[i].tls) {
            PyErr_SetString(PyExc_ValueError,
                            "HTTP/3 runs over QUIC, which is always TLS: use an https:// URL");
            goto done;
        }
        if (i && (ups[i].tls != ups[0].tls || ups[i].port != ups[0].port ||
                  ups[i].host_len != ups[0].host_len ||
                  memcmp(ups[i].host, ups[0].host, ups[0].host_len) != 0)) {
            PyErr_Format(PyExc_ValueError,
                         "every URL of an HTTP/%d batch must have the same origin "
                         "(scheme, host, port): they share one connection",
                         self->http3 ? 3 : 2);
            goto done;
        }
        hb_head_spec spec = {method, mlen, &ups[i], hs, (size_t)nh, blen, 1, NULL};
        size_t nf = 0;
        size_t bound = hb_build_h2_bound(&spec, &nf);
        total += nf * sizeof(hb_header) + bound + MX_HEAD_CAP + 16;
    }
    if (self->mux_scratch && self->mux_scratch_cap >= total) {
        block = self->mux_scratch; /* this thread's until given back */
        block_cap = self->mux_scratch_cap;
        self->mux_scratch = NULL;
    } else if ((block = PyMem_Malloc(total)) != NULL) {
        block_cap = total;
    } else {
        PyErr_NoMemory();
        goto done;
    }
    char *cur = block;
    for (Py_ssize_t i = 0; i < n; i++) {
        hb_mx *x = &xs[i];
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
        x->head_cap = MX_HEAD_CAP;
        cur += MX_HEAD_CAP;
        mxslot *sl = &slots[i];
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
        /* bodies are created by their first DATA (hb__cl_sink_grow), at the announced length */
        int is_head = hb_method_is_head(method, mlen);
        for (Py_ssize_t i = 0; i < n; i++) {
            mxslot *sl = &slots[i];
            sl->sink.grow = is_head ? NULL : hb__cl_sink_grow;
            sl->sink.ctx = &sl->g;
        }
    }
    if (ups[0].tls && !self->http3 && hb__cl_ensure_tls(self) < 0) goto done;

    hb__cl_mux_lock(self);
    locked = 1;
    h2origin *o = NULL;
    h3origin *o3 = NULL;
    if (self->http3) {
        if (hb__cl_ensure_h3_tls(self) < 0 || !(o3 = hb__cl_h3_origin(self, &ups[0]))) goto done;
    } else if (!(o = hb__cl_h2_origin(self, &ups[0]))) {
        goto done;
    }
    hb_target t = {ups[0].tls, ups[0].host, ups[0].host_len, ups[0].port};
    uint64_t start = hb_now_ns();
    uint64_t dl = self->timeout_ns == UINT64_MAX ? UINT64_MAX : start + self->timeout_ns;
    uint64_t cdl = self->connect_timeout_ns == UINT64_MAX ? dl : start + self->connect_timeout_ns;
    if (cdl > dl) cdl = dl;
    PyThreadState *ts = PyEval_SaveThread();
    for (Py_ssize_t i = 0; i < n; i++)
        slots[i].g.ts = ts;
    if (o3)
        rc = hb_client_h3_run(&o3->hc, self->h3tls, &t, xs, (size_t)n, dl, cdl, err);
    else
        rc = hb_client_h2_run(&self->pool, &o->hc, &t, xs, (size_t)n, dl, cdl, err);
    PyEval_RestoreThread(ts);
    uint64_t t_conn = o3 ? o3->hc.t_connected : o->hc.t_connected;
    uint64_t t_tls = o3 ? o3->hc.t_tls_done : o->hc.t_tls_done;
    PyThread_release_lock(self->mux_lock);
    locked = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        slots[i].g.ts = NULL;
        if (slots[i].sink.grow) slots[i].body = slots[i].g.obj; /* may have moved */
    }
    if (rc < 0) {
        const char *u;
        Py_ssize_t ulen;
        u = PyUnicode_AsUTF8AndSize(urls[0], &ulen);
        hb__cl_raise(st, rc, err, method, mlen, u ? u : "", u ? ulen : 0);
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (xs[i].rc < 0) {
            const char *u;
            Py_ssize_t ulen;
            u = PyUnicode_AsUTF8AndSize(urls[i], &ulen);
            hb__cl_raise(st, xs[i].rc, xs[i].err, method, mlen, u ? u : "", u ? ulen : 0);
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
        mxslot *sl = &slots[i];
        PyObject *b = sl->body;
        sl->body = NULL;
        if (!b) {
            b = PyBytes_FromStringAndSize(NULL, 0);
        } else if ((size_t)PyBytes_GET_SIZE(b) != sl->sink.len &&
                   _PyBytes_Resize(&b, (Py_ssize_t)sl->sink.len) < 0) {
            b = NULL;
        }
        PyObject *r =
            b ? hb_py_response_mx(st, &xs[i], urls[i], b, t_conn, t_tls, self->http3) : NULL;
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
    if (locked) PyThread_release_lock(self->mux_lock);
    if (slots)
        for (Py_ssize_t i = 0; i < n; i++)
            Py_XDECREF(slots[i].body);
    if (n > 1) {
        PyMem_Free(slots);
        PyMem_Free(xs);
        PyMem_Free(ups);
    }
    if (block && block_cap <= MX_SCRATCH_KEEP &&
        (!self->mux_scratch || self->mux_scratch_cap < block_cap)) {
        PyMem_Free(self->mux_scratch); /* keep the larger for the next batch */
        self->mux_scratch = block;
        self->mux_scratch_cap = block_cap;
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
