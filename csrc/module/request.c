/* request.c - _core.split_url() and _core.build_request_head(): bench()'s way
 * into hb_request (csrc/core/http/hb_request.h), and the conversion of Python
 * headers into hb_header entries that the Client shares. */
#include "module.h"

#include <string.h>

#include "http/hb_request.h"

/* str (as UTF-8) or bytes -> pointer and length, valid while o lives. */
static int text_of(PyObject *o, const char **p, size_t *n, const char *what)
{
    Py_ssize_t len;
    if (PyUnicode_Check(o)) {
        *p = PyUnicode_AsUTF8AndSize(o, &len);
        if (!*p) return -1;
    } else if (PyBytes_Check(o)) {
        *p = PyBytes_AS_STRING(o);
        len = PyBytes_GET_SIZE(o);
    } else {
        PyErr_Format(PyExc_TypeError, "header %s must be str or bytes, not %.100s", what,
                     Py_TYPE(o)->tp_name);
        return -1;
    }
    *n = (size_t)len;
    return 0;
}

static int entry(PyObject *k, PyObject *v, hb_header *h)
{
    if (text_of(k, &h->name, &h->name_len, "name") < 0) return -1;
    return text_of(v, &h->value, &h->value_len, "value");
}

Py_ssize_t hb_py_headers(PyObject *headers, hb_header *stack, size_t cap, hb_header **out,
                         PyObject **keep)
{
    *out = stack;
    *keep = NULL;
    if (headers == NULL || headers == Py_None) return 0;
    PyObject *seq;
    Py_ssize_t n;
    if (PyDict_Check(headers)) {
        seq = Py_NewRef(headers);
        n = PyDict_GET_SIZE(headers);
    } else {
        PyObject *items = PyObject_HasAttrString(headers, "items")
                              ? PyObject_CallMethod(headers, "items", NULL)
                              : Py_NewRef(headers);
        if (!items) return -1;
        seq = PySequence_Fast(items, "headers must be a mapping or an iterable of (name, value) "
                                     "pairs");
        Py_DECREF(items);
        if (!seq) return -1;
        n = PySequence_Fast_GET_SIZE(seq);
    }
    hb_header *hs = stack;
    if ((size_t)n > cap) {
        hs = PyMem_New(hb_header, (size_t)n);
        if (!hs) {
            Py_DECREF(seq);
            PyErr_NoMemory();
            return -1;
        }
    }
    Py_ssize_t i = 0;
    if (PyDict_Check(seq)) {
        Py_ssize_t pos = 0;
        PyObject *k, *v;
        while (i < n && PyDict_Next(seq, &pos, &k, &v))
            if (entry(k, v, &hs[i++]) < 0) goto fail;
    } else {
        for (; i < n; i++) {
            PyObject *pair = PySequence_Fast_GET_ITEM(seq, i);
            if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2) {
                PyErr_SetString(PyExc_TypeError,
                                "headers must be a mapping or an iterable of (name, value) pairs");
                goto fail;
            }
            if (entry(PyTuple_GET_ITEM(pair, 0), PyTuple_GET_ITEM(pair, 1), &hs[i]) < 0) goto fail;
        }
    }
    *out = hs;
    *keep = seq;
    return i;
fail:
    if (hs != stack) PyMem_Free(hs);
    Py_DECREF(seq);
    return -1;
}

int hb_py_url(hb_modstate *st, PyObject *url, hb_url *u, const char **text, Py_ssize_t *len)
{
    if (!PyUnicode_Check(url)) {
        PyErr_Format(PyExc_TypeError, "url must be str, not %.100s", Py_TYPE(url)->tp_name);
        return -1;
    }
    *text = PyUnicode_AsUTF8AndSize(url, len);
    if (!*text) return -1;
    char err[HB_ERR_LEN];
    int rc = hb_url_split(*text, (size_t)*len, u, err);
    if (rc < 0) {
        hb_raise(st, rc, err);
        return -1;
    }
    return 0;
}

static PyObject *split_url(PyObject *m, PyObject *arg)
{
    hb_url u;
    const char *s;
    Py_ssize_t len;
    if (hb_py_url(hb_state(m), arg, &u, &s, &len) < 0) return NULL;
    PyObject *target = PyUnicode_New((Py_ssize_t)hb_url_target_len(&u), 127);
    if (!target) return NULL;
    hb_url_target(&u, (char *)PyUnicode_DATA(target), hb_url_target_len(&u) + 1, NULL);
    PyObject *auth;
    if (u.user) {
        char small[256];
        size_t need = hb_url_basic_auth_len(&u);
        char *b = need <= sizeof small ? small : PyMem_Malloc(need);
        if (!b) {
            Py_DECREF(target);
            return PyErr_NoMemory();
        }
        int n = hb_url_basic_auth(&u, b, need, NULL);
        auth = PyUnicode_FromStringAndSize(b, n);
        if (b != small) PyMem_Free(b);
    } else {
        auth = Py_NewRef(Py_None);
    }
    return Py_BuildValue("(ss#iNs#N)", u.tls ? "https" : "http", u.host, (Py_ssize_t)u.host_len,
                         u.port, target, u.host_header, (Py_ssize_t)u.host_header_len, auth);
}

/* The request both build_request_head and build_h2_fields describe; spec
 * points into u and hs, so a head_args is not copied. */
typedef struct head_args {
    hb_url u;
    hb_header stack[32], *hs;
    PyObject *keep;
    hb_head_spec spec;
} head_args;

/* args[0..3] are method, url, headers, body_len; keepalive NULL means on.
 * On success the caller calls head_args_free(a). */
static int head_args_parse(hb_modstate *st, PyObject *const *args, PyObject *keepalive,
                           PyObject *user_agent, head_args *a)
{
    const char *method, *url, *ua;
    Py_ssize_t mlen, ulen;
    int ka;
    if (hb_arg_str(args[0], "method", &method, &mlen) < 0 ||
        hb_arg_str(user_agent, "user_agent", &ua, NULL) < 0 || hb_arg_bool(keepalive, 1, &ka) < 0)
        return -1;
    if (!method) {
        PyErr_SetString(PyExc_TypeError, "method is required");
        return -1;
    }
    long long body_len = PyLong_AsLongLong(args[3]);
    if (body_len == -1 && PyErr_Occurred()) return -1;
    if (hb_py_url(st, args[1], &a->u, &url, &ulen) < 0) return -1;
    Py_ssize_t nh = hb_py_headers(args[2], a->stack, 32, &a->hs, &a->keep);
    if (nh < 0) return -1;
    a->spec = (hb_head_spec){method, (size_t)mlen, &a->u, a->hs, (size_t)nh, body_len, ka, ua};
    return 0;
}

static void head_args_free(head_args *a)
{
    if (a->hs != a->stack) PyMem_Free(a->hs);
    Py_XDECREF(a->keep);
}

static PyObject *build_request_head(PyObject *m, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "build_request_head(method, url, headers, body_len, "
                                         "keepalive, user_agent)");
        return NULL;
    }
    hb_modstate *st = hb_state(m);
    head_args a;
    if (head_args_parse(st, args, args[4], args[5], &a) < 0) return NULL;
    char err[HB_ERR_LEN];
    size_t cap = hb_build_head_bound(&a.spec);
    PyObject *res = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)cap);
    if (res) {
        int rc = hb_build_head(PyBytes_AS_STRING(res), cap, &a.spec, err);
        if (rc < 0) {
            Py_CLEAR(res);
            hb_raise(st, rc, err);
        } else {
            _PyBytes_Resize(&res, rc);
        }
    }
    head_args_free(&a);
    return res;
}

static PyObject *build_h2_fields(PyObject *m, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError,
                        "build_h2_fields(method, url, headers, body_len, user_agent)");
        return NULL;
    }
    hb_modstate *st = hb_state(m);
    head_args a;
    if (head_args_parse(st, args, NULL, args[4], &a) < 0) return NULL;
    char err[HB_ERR_LEN];
    PyObject *res = NULL;
    size_t nf;
    size_t cap = hb_build_h2_bound(&a.spec, &nf);
    hb_header *f = PyMem_New(hb_header, nf);
    char *buf = PyMem_Malloc(cap);
    if (!f || !buf) {
        PyErr_NoMemory();
        goto done;
    }
    int rc = hb_build_h2_fields(f, nf, buf, cap, &a.spec, err);
    if (rc < 0) {
        hb_raise(st, rc, err);
        goto done;
    }
    res = PyList_New(rc);
    for (int i = 0; res && i < rc; i++) {
        PyObject *t = Py_BuildValue("(y#y#)", f[i].name, (Py_ssize_t)f[i].name_len, f[i].value,
                                    (Py_ssize_t)f[i].value_len);
        if (!t)
            Py_CLEAR(res);
        else
            PyList_SET_ITEM(res, i, t);
    }
done:
    PyMem_Free(f);
    PyMem_Free(buf);
    head_args_free(&a);
    return res;
}

static PyMethodDef request_methods[] = {
    {"split_url", split_url, METH_O,
     "split_url(url) -> (scheme, host, port, target, host_header, authorization)\n\n"
     "Split an http(s) URL (ValueError when invalid); authorization is the Basic "
     "credentials from user:password@, or None."},
    {"build_request_head", (PyCFunction)(void (*)(void))build_request_head, METH_FASTCALL,
     "build_request_head(method, url, headers, body_len, keepalive, user_agent) -> bytes\n\n"
     "The serialized request head. body_len: bytes, -1 none, -2 chunked."},
    {"build_h2_fields", (PyCFunction)(void (*)(void))build_h2_fields, METH_FASTCALL,
     "build_h2_fields(method, url, headers, body_len, user_agent) -> list[tuple[bytes, bytes]]\n\n"
     "The same request as HTTP/2 header fields (pseudo-headers first, lowercase names)."},
    {NULL, NULL, 0, NULL},
};

int hb_mod_request_init(PyObject *m, hb_modstate *st)
{
    (void)st;
    return PyModule_AddFunctions(m, request_methods);
}
