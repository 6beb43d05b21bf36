/* hist.c - httpbench.Histogram: the Python face of hb_hist (csrc/core/base/hb_hist.h).
 *
 * Statistics are read-only properties (count, min, max, mean, stddev,
 * saturated, lowest, highest, sigfigs); actions are methods. Values are
 * integers >= 0 in the caller's unit (nanoseconds by convention).
 */
#include "module.h"

#include "base/hb_hist.h"

typedef struct {
    PyObject_HEAD hb_hist h;
} HistObject;

/* An int >= 0 as uint64; above UINT64_MAX saturates (the core clamps and counts it). */
static int as_value(PyObject *o, uint64_t *out, const char *what)
{
    if (PyFloat_Check(o)) {
        PyErr_Format(PyExc_TypeError, "%s must be an int (nanoseconds), not float", what);
        return -1;
    }
    PyObject *n = PyNumber_Index(o);
    if (n == NULL) return -1;
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(n, &overflow);
    if (v == -1 && PyErr_Occurred()) {
        Py_DECREF(n);
        return -1;
    }
    if (overflow > 0) {
        unsigned long long u = PyLong_AsUnsignedLongLong(n);
        if (u == (unsigned long long)-1 && PyErr_Occurred()) {
            PyErr_Clear();
            u = UINT64_MAX;
        }
        Py_DECREF(n);
        *out = u;
        return 0;
    }
    Py_DECREF(n);
    if (overflow < 0 || v < 0) {
        PyErr_Format(PyExc_ValueError, "%s must be >= 0", what);
        return -1;
    }
    *out = (uint64_t)v;
    return 0;
}

static hb_modstate *state_of(PyObject *self)
{
    return hb_state_from_type(Py_TYPE(self));
}

static PyObject *hist_alloc(PyTypeObject *tp)
{
    allocfunc alloc = (allocfunc)PyType_GetSlot(tp, Py_tp_alloc);
    HistObject *self = (HistObject *)alloc(tp, 0);
    if (self) memset(&self->h, 0, sizeof self->h);
    return (PyObject *)self;
}

PyObject *hb_py_hist_from_core(hb_modstate *st, const hb_hist *h)
{
    if (st == NULL || st->HistogramType == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "httpbench.Histogram type not initialised");
        return NULL;
    }
    HistObject *self = (HistObject *)hist_alloc(st->HistogramType);
    if (self == NULL) return NULL;
    char err[HB_ERR_LEN] = "";
    int rc = hb_hist_init_copy(&self->h, h, err);
    if (rc != 0) {
        Py_DECREF(self);
        return hb_raise(st, rc, err);
    }
    return (PyObject *)self;
}

const hb_hist *hb_py_hist_core(hb_modstate *st, PyObject *obj)
{
    if (st == NULL || st->HistogramType == NULL || !PyObject_TypeCheck(obj, st->HistogramType)) {
        PyErr_Format(PyExc_TypeError, "expected an httpbench.Histogram, got %.100s",
                     Py_TYPE(obj)->tp_name);
        return NULL;
    }
    return &((HistObject *)obj)->h;
}

static PyObject *hist_new(PyTypeObject *tp, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"lowest", "highest", "sigfigs", NULL};
    PyObject *lo_o = NULL, *hi_o = NULL;
    int sigfigs = HB_HIST_DEFAULT_SIGFIGS;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|OOi:Histogram", kwlist, &lo_o, &hi_o, &sigfigs))
        return NULL;
    hb_hist_config cfg = hb_hist_default_config();
    cfg.sigfigs = sigfigs;
    if (lo_o && as_value(lo_o, &cfg.lowest, "lowest") < 0) return NULL;
    if (hi_o && as_value(hi_o, &cfg.highest, "highest") < 0) return NULL;
    hb_modstate *st = hb_state_from_type(tp);
    if (st == NULL) return NULL;
    HistObject *self = (HistObject *)hist_alloc(tp);
    if (self == NULL) return NULL;
    char err[HB_ERR_LEN] = "";
    int rc = hb_hist_init(&self->h, &cfg, err);
    if (rc != 0) {
        Py_DECREF(self);
        return hb_raise(st, rc, err);
    }
    return (PyObject *)self;
}

static void hist_dealloc(PyObject *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    hb_hist_free(&((HistObject *)self)->h);
    freefunc f = (freefunc)PyType_GetSlot(tp, Py_tp_free);
    f(self);
    Py_DECREF(tp);
}

#define H(self) (&((HistObject *)(self))->h)

static PyObject *hist_record(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs < 1 || nargs > 2) {
        PyErr_Format(PyExc_TypeError, "record(value, count=1) takes 1 or 2 arguments (%zd given)",
                     nargs);
        return NULL;
    }
    uint64_t v, n = 1;
    if (as_value(args[0], &v, "value") < 0) return NULL;
    if (nargs == 2 && as_value(args[1], &n, "count") < 0) return NULL;
    hb_hist_record_n(H(self), v, n);
    Py_RETURN_NONE;
}

static PyObject *hist_record_corrected(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError,
                     "record_corrected(value, expected_interval) takes 2 arguments (%zd given)",
                     nargs);
        return NULL;
    }
    uint64_t v, interval;
    if (as_value(args[0], &v, "value") < 0) return NULL;
    if (as_value(args[1], &interval, "expected_interval") < 0) return NULL;
    hb_hist_record_corrected(H(self), v, interval);
    Py_RETURN_NONE;
}

static PyObject *hist_record_many(PyObject *self, PyObject *iterable)
{
    PyObject *it = PyObject_GetIter(iterable);
    if (it == NULL) return NULL;
    PyObject *item;
    while ((item = PyIter_Next(it)) != NULL) {
        uint64_t v;
        int rc = as_value(item, &v, "value");
        Py_DECREF(item);
        if (rc < 0) {
            Py_DECREF(it);
            return NULL;
        }
        hb_hist_record(H(self), v);
    }
    Py_DECREF(it);
    if (PyErr_Occurred()) return NULL;
    Py_RETURN_NONE;
}

static PyObject *hist_merge(PyObject *self, PyObject *other)
{
    hb_modstate *st = state_of(self);
    if (st == NULL) return NULL;
    const hb_hist *src = hb_py_hist_core(st, other);
    if (src == NULL) return NULL;
    char err[HB_ERR_LEN] = "";
    int rc = hb_hist_merge(H(self), src, err);
    if (rc != 0) return hb_raise(st, rc, err);
    Py_RETURN_NONE;
}

static PyObject *hist_reset(PyObject *self, PyObject *Py_UNUSED(ignored))
{
    hb_hist_reset(H(self));
    Py_RETURN_NONE;
}

static PyObject *hist_copy(PyObject *self, PyObject *Py_UNUSED(ignored))
{
    return hb_py_hist_from_core(state_of(self), H(self));
}

static int as_percentile(PyObject *o, double *p)
{
    double v = PyFloat_AsDouble(o);
    if (v == -1.0 && PyErr_Occurred()) return -1;
    if (!(v >= 0.0 && v <= 100.0)) {
        PyErr_Format(PyExc_ValueError, "percentile must be within 0..100, got %R", o);
        return -1;
    }
    *p = v;
    return 0;
}

static PyObject *hist_percentile(PyObject *self, PyObject *arg)
{
    double p;
    if (as_percentile(arg, &p) < 0) return NULL;
    return PyLong_FromUnsignedLongLong(hb_hist_value_at_percentile(H(self), p));
}

static PyObject *hist_percentiles(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs > 1) {
        PyErr_SetString(PyExc_TypeError, "percentiles(ps=(50, 90, 99, 99.9)) takes 0 or 1 args");
        return NULL;
    }
    PyObject *ps = nargs ? args[0] : NULL;
    PyObject *seq;
    if (ps == NULL || ps == Py_None)
        seq = Py_BuildValue("(iiid)", 50, 90, 99, 99.9);
    else
        seq = PySequence_Fast(ps, "percentiles() expects a sequence of numbers");
    if (seq == NULL) return NULL;
    PyObject *d = PyDict_New();
    if (d == NULL) goto fail;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *k = PySequence_Fast_GET_ITEM(seq, i);
        double p;
        if (as_percentile(k, &p) < 0) goto fail;
        PyObject *v = PyLong_FromUnsignedLongLong(hb_hist_value_at_percentile(H(self), p));
        if (v == NULL || PyDict_SetItem(d, k, v) < 0) {
            Py_XDECREF(v);
            goto fail;
        }
        Py_DECREF(v);
    }
    Py_DECREF(seq);
    return d;
fail:
    Py_XDECREF(d);
    Py_DECREF(seq);
    return NULL;
}

/* [(lo, hi, count), ...] of the non-empty buckets, lowest first (for plots). */
static PyObject *hist_buckets(PyObject *self, PyObject *Py_UNUSED(ignored))
{
    PyObject *list = PyList_New(0);
    if (list == NULL) return NULL;
    hb_hist_iter it;
    hb_hist_iter_init(&it, H(self));
    while (hb_hist_iter_next(&it)) {
        PyObject *t = Py_BuildValue("(KKK)", (unsigned long long)it.lo, (unsigned long long)it.hi,
                                    (unsigned long long)it.count);
        if (t == NULL || PyList_Append(list, t) < 0) {
            Py_XDECREF(t);
            Py_DECREF(list);
            return NULL;
        }
        Py_DECREF(t);
    }
    return list;
}

/* Iteration value of a bucket: its highest equivalent value clamped into
 * [min, max], the same value percentile() reports for it. */
static uint64_t iter_value(const hb_hist *h, const hb_hist_iter *it)
{
    uint64_t v = it->hi;
    if (v > h->max) v = h->max;
    if (v < h->min) v = h->min;
    return v;
}

static PyObject *hist_iter(PyObject *self)
{
    /* A list iterator over a snapshot: safe even if the histogram changes. */
    PyObject *list = PyList_New(0);
    if (list == NULL) return NULL;
    hb_hist_iter it;
    hb_hist_iter_init(&it, H(self));
    while (hb_hist_iter_next(&it)) {
        PyObject *t = Py_BuildValue("(KK)", (unsigned long long)iter_value(H(self), &it),
                                    (unsigned long long)it.count);
        if (t == NULL || PyList_Append(list, t) < 0) {
            Py_XDECREF(t);
            Py_DECREF(list);
            return NULL;
        }
        Py_DECREF(t);
    }
    PyObject *r = PyObject_GetIter(list);
    Py_DECREF(list);
    return r;
}

static Py_ssize_t hist_len(PyObject *self)
{
    uint64_t n = hb_hist_count(H(self));
    if (n > (uint64_t)PY_SSIZE_T_MAX) {
        PyErr_SetString(PyExc_OverflowError, "count does not fit len(); use .count");
        return -1;
    }
    return (Py_ssize_t)n;
}

static PyObject *hist_encode(PyObject *self, PyObject *Py_UNUSED(ignored))
{
    hb_modstate *st = state_of(self);
    if (st == NULL) return NULL;
    size_t cap = hb_hist_encoded_max(H(self));
    PyObject *b = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)cap);
    if (b == NULL) return NULL;
    char err[HB_ERR_LEN] = "";
    int64_t n = hb_hist_encode(H(self), (uint8_t *)PyBytes_AS_STRING(b), cap, err);
    if (n < 0) {
        Py_DECREF(b);
        return hb_raise(st, (int)n, err);
    }
    if (_PyBytes_Resize(&b, (Py_ssize_t)n) < 0) return NULL;
    return b;
}

static PyObject *hist_decode(PyObject *cls, PyObject *data)
{
    PyTypeObject *tp = (PyTypeObject *)cls;
    hb_modstate *st = hb_state_from_type(tp);
    if (st == NULL) return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(data, &view, PyBUF_SIMPLE) < 0) return NULL;
    HistObject *self = (HistObject *)hist_alloc(tp);
    if (self == NULL) {
        PyBuffer_Release(&view);
        return NULL;
    }
    char err[HB_ERR_LEN] = "";
    int rc = hb_hist_decode(&self->h, view.buf, (size_t)view.len, err);
    PyBuffer_Release(&view);
    if (rc != 0) {
        Py_DECREF(self);
        return hb_raise(st, rc, err); /* HB_E_INVALID -> ValueError */
    }
    return (PyObject *)self;
}

static PyObject *hist_reduce(PyObject *self, PyObject *Py_UNUSED(ignored))
{
    PyObject *enc = hist_encode(self, NULL);
    if (enc == NULL) return NULL;
    PyObject *decode = PyObject_GetAttrString((PyObject *)Py_TYPE(self), "decode");
    if (decode == NULL) {
        Py_DECREF(enc);
        return NULL;
    }
    PyObject *r = Py_BuildValue("(N(N))", decode, enc);
    return r;
}

static int hist_equal(const hb_hist *a, const hb_hist *b)
{
    if (!hb_hist_same_config(a, b) || a->total != b->total || a->saturated != b->saturated ||
        a->min != b->min || a->max != b->max || a->max_index != b->max_index)
        return 0;
    return a->max_index < 0 ||
           memcmp(a->counts, b->counts, (size_t)(a->max_index + 1) * sizeof(uint64_t)) == 0;
}

static PyObject *hist_richcompare(PyObject *self, PyObject *other, int op)
{
    hb_modstate *st = state_of(self);
    if (st == NULL) return NULL;
    if ((op != Py_EQ && op != Py_NE) || !PyObject_TypeCheck(other, st->HistogramType))
        Py_RETURN_NOTIMPLEMENTED;
    int eq = hist_equal(H(self), H(other));
    return PyBool_FromLong(op == Py_EQ ? eq : !eq);
}

static PyObject *hist_repr(PyObject *self)
{
    const hb_hist *h = H(self);
    return PyUnicode_FromFormat(
        "<httpbench.Histogram count=%llu min=%llu p50=%llu p99=%llu max=%llu saturated=%llu>",
        (unsigned long long)hb_hist_count(h), (unsigned long long)hb_hist_min(h),
        (unsigned long long)hb_hist_value_at_percentile(h, 50),
        (unsigned long long)hb_hist_value_at_percentile(h, 99), (unsigned long long)hb_hist_max(h),
        (unsigned long long)hb_hist_saturated(h));
}

static PyObject *get_count(PyObject *self, void *c)
{
    (void)c;
    return PyLong_FromUnsignedLongLong(hb_hist_count(H(self)));
}
static PyObject *get_saturated(PyObject *self, void *c)
{
    (void)c;
    return PyLong_FromUnsignedLongLong(hb_hist_saturated(H(self)));
}
static PyObject *get_min(PyObject *self, void *c)
{
    (void)c;
    return PyLong_FromUnsignedLongLong(hb_hist_min(H(self)));
}
static PyObject *get_max(PyObject *self, void *c)
{
    (void)c;
    return PyLong_FromUnsignedLongLong(hb_hist_max(H(self)));
}
static PyObject *get_mean(PyObject *self, void *c)
{
    (void)c;
    return PyFloat_FromDouble(hb_hist_mean(H(self)));
}
static PyObject *get_stddev(PyObject *self, void *c)
{
    (void)c;
    return PyFloat_FromDouble(hb_hist_stddev(H(self)));
}
static PyObject *get_lowest(PyObject *self, void *c)
{
    (void)c;
    return PyLong_FromUnsignedLongLong(H(self)->cfg.lowest);
}
static PyObject *get_highest(PyObject *self, void *c)
{
    (void)c;
    return PyLong_FromUnsignedLongLong(H(self)->cfg.highest);
}
static PyObject *get_sigfigs(PyObject *self, void *c)
{
    (void)c;
    return PyLong_FromLong(H(self)->cfg.sigfigs);
}

static PyGetSetDef hist_getset[] = {
    {"count", get_count, NULL, "Number of recorded values (including saturated ones).", NULL},
    {"saturated", get_saturated, NULL, "Values that were above highest and got clamped.", NULL},
    {"min", get_min, NULL, "Smallest recorded value (exact; 0 when empty).", NULL},
    {"max", get_max, NULL, "Largest recorded value (exact after clamping; 0 when empty).", NULL},
    {"mean", get_mean, NULL, "Mean from bucket midpoints (error < 10^-sigfigs).", NULL},
    {"stddev", get_stddev, NULL, "Population standard deviation from bucket midpoints.", NULL},
    {"lowest", get_lowest, NULL, "Lowest distinguishable value of the configuration.", NULL},
    {"highest", get_highest, NULL, "Highest trackable value; above it values are clamped.", NULL},
    {"sigfigs", get_sigfigs, NULL, "Significant decimal digits of the configuration.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef hist_methods[] = {
    {"record", (PyCFunction)(void (*)(void))hist_record, METH_FASTCALL,
     "record(value, count=1)\n--\n\nRecord an int value >= 0 (count times). Values above "
     "highest are clamped and counted in .saturated."},
    {"record_corrected", (PyCFunction)(void (*)(void))hist_record_corrected, METH_FASTCALL,
     "record_corrected(value, expected_interval)\n--\n\nRecord value plus the samples "
     "coordinated omission hid: value - k*interval (k >= 1) while >= interval."},
    {"record_many", hist_record_many, METH_O,
     "record_many(values)\n--\n\nRecord every int of an iterable."},
    {"merge", hist_merge, METH_O,
     "merge(other)\n--\n\nAdd another Histogram's counts (same configuration, else "
     "ValueError)."},
    {"reset", hist_reset, METH_NOARGS, "reset()\n--\n\nForget every recorded value."},
    {"copy", hist_copy, METH_NOARGS, "copy()\n--\n\nAn independent copy."},
    {"percentile", hist_percentile, METH_O,
     "percentile(p)\n--\n\nValue at percentile p (0..100): the highest value equivalent to "
     "the bucket holding the ceil(p/100*count)-th value, clamped into [min, max]; 0 when "
     "empty."},
    {"percentiles", (PyCFunction)(void (*)(void))hist_percentiles, METH_FASTCALL,
     "percentiles(ps=(50, 90, 99, 99.9))\n--\n\n{p: value} for each p."},
    {"buckets", hist_buckets, METH_NOARGS,
     "buckets()\n--\n\n[(lo, hi, count)] of the non-empty buckets (inclusive value ranges)."},
    {"encode", hist_encode, METH_NOARGS,
     "encode()\n--\n\nCompact versioned binary encoding (see Histogram.decode)."},
    {"decode", hist_decode, METH_O | METH_CLASS,
     "decode(data)\n--\n\nA Histogram from encode() bytes; ValueError on bad data."},
    {"__reduce__", hist_reduce, METH_NOARGS, "Pickle through encode()/decode()."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot hist_slots[] = {
    {Py_tp_doc, "Histogram(lowest=1, highest=3_600_000_000_000, sigfigs=3)\n--\n\n"
                "HDR-style latency histogram (values are ints, nanoseconds by convention).\n"
                "len(h) is the count; iterating yields (value, count) per non-empty bucket."},
    {Py_tp_new, hist_new},
    {Py_tp_dealloc, hist_dealloc},
    {Py_tp_methods, hist_methods},
    {Py_tp_getset, hist_getset},
    {Py_tp_iter, hist_iter},
    {Py_tp_richcompare, hist_richcompare},
    {Py_tp_repr, hist_repr},
    {Py_tp_hash, PyObject_HashNotImplemented},
    {Py_sq_length, hist_len},
    {0, NULL},
};

static PyType_Spec hist_spec = {
    .name = "httpbench.Histogram",
    .basicsize = sizeof(HistObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE,
    .slots = hist_slots,
};

int hb_mod_hist_init(PyObject *m, hb_modstate *st)
{
    PyObject *tp = PyType_FromModuleAndSpec(m, &hist_spec, NULL);
    if (tp == NULL) return -1;
    st->HistogramType = (PyTypeObject *)tp;
    return PyModule_AddObjectRef(m, "Histogram", tp);
}
