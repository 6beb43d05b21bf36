/* client_perform.c - one Client request: HTTP/1.1 on the pool, or handed
 * to client_h2.c (see client_int.h). */
#include "client_int.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

PyObject *hb__cl_request(ClientObject *self, const char *method, size_t mlen, PyObject *url,
                         PyObject *headers, PyObject *body, PyObject *dl_path,
                         PyObject *max_body_arg)
{
    hb_modstate *st = self->st;
    if (self->http2 || self->http3)
        return hb__cl_mux_batch(self, method, mlen, &url, 1, headers, body, dl_path, max_body_arg,
                                0);
    if (self->closed) {
        PyErr_SetString(PyExc_ValueError, "the client is closed");
        return NULL;
    }
    uint64_t max_body = self->max_body;
    if (dl_path) max_body = 0; /* a download holds no body in memory */
    if (max_body_arg && hb__cl_max_body(max_body_arg, max_body, &max_body) < 0) return NULL;
    h1_prep pr;
    if (hb__cl_h1_prepare(self, method, mlen, url, headers, body, &pr) < 0) return NULL;
    char err[HB_ERR_LEN];
    int rc;
    PyObject *resp_obj = NULL, *bodyobj = NULL;
    int dl_fd = -1, dl_created = 0;
    char *dl_buf = NULL;
    PyObject *dl_enc = NULL;

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
    hb__cl_h1_request(self, &pr, method, mlen, max_body, &rq);

    hb_exchange x;
    PyThreadState *ts = PyEval_SaveThread();
    rc = hb_client_begin(&self->pool, &rq, &x, err);
    PyEval_RestoreThread(ts);
    if (rc < 0) {
        hb__cl_raise(st, rc, err, method, mlen, pr.u, pr.ulen);
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
    } else if (x.kind != HB_BODY_NONE) {
        size_t init;
        if (x.kind == HB_BODY_LENGTH) {
            /* Small: the whole body at once (the usual case, no regrowth).
             * Large: what is buffered, then grown as bytes arrive, so a
             * Content-Length the peer never sends reserves nothing; over
             * max_body the core fails before reading. */
            init = (size_t)HB_CLIENT_BODY_WHOLE;
            if (x.remaining <= HB_CLIENT_BODY_WHOLE)
                init = (size_t)x.remaining;
            else if (max_body && x.remaining > max_body)
                init = 0;
        } else {
            init = hb_client_buffered(&x);
            if (init < CHUNKED_INITIAL) init = CHUNKED_INITIAL;
        }
        bodyobj = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)init);
        if (!bodyobj) goto fail_x;
        g.obj = bodyobj;
        sink.buf = PyBytes_AS_STRING(bodyobj);
        sink.cap = init;
        sink.grow = hb__cl_sink_grow;
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
    if (hb__cl_h1_sent(&pr) < 0) goto fail;
    hb__cl_h1_release(&pr);
    PyMem_RawFree(dl_buf);
    Py_XDECREF(dl_enc);
    return resp_obj;

fail_rc:
    hb__cl_raise(st, rc, err, method, mlen, pr.u, pr.ulen);
fail_x:
    hb_client_end(&self->pool, &x);
fail:
    hb__cl_h1_release(&pr);
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
