/* measure_recorder.c - _Recorder: per-request timing for measure_async, one
 * histogram fed by begin()/end() pairs (see measure_int.h). */
#include "measure_int.h"

#include "base/hb_clock.h"
#include "base/hb_hist.h"

/* ---- _Recorder: per-request timing for measure_async ---- */

typedef struct {
    PyObject_HEAD hb_hist h;
    uint64_t n, issued, completed, deadline, dur_ns;
    int record;
} RecObject;

static PyObject *rec_new(PyTypeObject *tp, PyObject *args, PyObject *kwds)
{
    static char *kw[] = {"n", "duration_ns", "record", NULL};
    PyObject *n_o = Py_None, *d_o = Py_None;
    int record = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|OOp:_Recorder", kw, &n_o, &d_o, &record))
        return NULL;
    uint64_t n, dur;
    if (hb_arg_u64(n_o, UINT64_MAX, "n", &n) < 0 || hb_arg_u64(d_o, 0, "duration_ns", &dur) < 0)
        return NULL;
    hb_modstate *st = hb_state_from_type(tp);
    if (st == NULL) return NULL;
    allocfunc alloc = (allocfunc)PyType_GetSlot(tp, Py_tp_alloc);
    RecObject *self = (RecObject *)alloc(tp, 0);
    if (self == NULL) return NULL;
    memset(&self->h, 0, sizeof self->h);
    char err[HB_ERR_LEN] = "";
    hb_hist_config cfg = hb_hist_default_config();
    int rc = hb_hist_init(&self->h, &cfg, err);
    if (rc != 0) {
        Py_DECREF(self);
        return hb_raise(st, rc, err);
    }
    self->n = n;
    self->record = record;
    self->dur_ns = dur;
    self->deadline = UINT64_MAX; /* the clock starts at the first begin() */
    return (PyObject *)self;
}

static void rec_dealloc(PyObject *o)
{
    PyTypeObject *tp = Py_TYPE(o);
    hb_hist_free(&((RecObject *)o)->h);
    freefunc f = (freefunc)PyType_GetSlot(tp, Py_tp_free);
    f(o);
    Py_DECREF(tp);
}

/* begin() -> t0 (ns) when another request may start, else None. */
static PyObject *rec_begin(PyObject *o, PyObject *Py_UNUSED(ignored))
{
    RecObject *r = (RecObject *)o;
    uint64_t now = hb_now_ns();
    if (r->issued == 0 && r->dur_ns)
        r->deadline = r->dur_ns > UINT64_MAX - now ? UINT64_MAX : now + r->dur_ns;
    if (r->issued >= r->n || now >= r->deadline) Py_RETURN_NONE;
    r->issued++;
    return PyLong_FromUnsignedLongLong(now);
}

/* end(t0): records now - t0. */
static PyObject *rec_end(PyObject *o, PyObject *arg)
{
    RecObject *r = (RecObject *)o;
    uint64_t now = hb_now_ns();
    unsigned long long t0 = PyLong_AsUnsignedLongLong(arg);
    if (t0 == (unsigned long long)-1 && PyErr_Occurred()) return NULL;
    if (r->record) hb_hist_record(&r->h, now >= t0 ? now - t0 : 0);
    r->completed++;
    Py_RETURN_NONE;
}

static PyObject *rec_histogram(PyObject *o, PyObject *Py_UNUSED(ignored))
{
    return hb_py_hist_from_core(hb_state_from_type(Py_TYPE(o)), &((RecObject *)o)->h);
}

static PyObject *rec_get_completed(PyObject *o, void *c)
{
    (void)c;
    return PyLong_FromUnsignedLongLong(((RecObject *)o)->completed);
}
static PyObject *rec_get_issued(PyObject *o, void *c)
{
    (void)c;
    return PyLong_FromUnsignedLongLong(((RecObject *)o)->issued);
}

static PyMethodDef rec_methods[] = {
    {"begin", rec_begin, METH_NOARGS, "begin() -> t0 ns, or None when the budget is spent."},
    {"end", rec_end, METH_O, "end(t0): record now - t0."},
    {"histogram", rec_histogram, METH_NOARGS, "A copy of the latency Histogram."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef rec_getset[] = {
    {"completed", rec_get_completed, NULL, "Requests ended.", NULL},
    {"issued", rec_get_issued, NULL, "Requests begun.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot rec_slots[] = {
    {Py_tp_doc, "_Recorder(n=None, duration_ns=None, record=True): C-side request timing."},
    {Py_tp_new, rec_new},
    {Py_tp_dealloc, rec_dealloc},
    {Py_tp_methods, rec_methods},
    {Py_tp_getset, rec_getset},
    {0, NULL},
};

PyType_Spec hb__ms_rec_spec = {
    .name = "httpbench._core._Recorder",
    .basicsize = sizeof(RecObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE,
    .slots = rec_slots,
};
