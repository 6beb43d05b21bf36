/* server.c - bindings of the embedded server: _core.server_start() returning
 * a _core.ServerHandle (stop, stats, port, cert_pem), plus the deterministic
 * content helpers expected_bytes() and crc32(). The server's threads never
 * touch Python; start, stop and dealloc release the GIL. */
#include "module.h"

#include <string.h>

#include "base/hb_content.h"
#include "h2/hb_h2_server.h"
#include "h3server/hb_h3_server.h"
#include "server/hb_server.h"

typedef struct {
    PyObject_HEAD hb_server *srv;
} ServerObject;

enum {
    S_HOST,
    S_PORT,
    S_TLS,
    S_THREADS,
    S_CERT_FILE,
    S_KEY_FILE,
    S_SESSION_RESUMPTION,
    S_REQUEST_TIMEOUT_MS,
    S_KEEPALIVE_TIMEOUT_MS,
    S_MAX_HEAD,
    S_BACKLOG,
    S_HTTP2,
    S_H2_STREAMS,
    S_H2_WINDOW,
    S_H2_FRAME,
    S_MAX_CONNECTIONS,
    S_HTTP3,
    S_ALT_SVC,
    S_H3_EARLY_DATA,
    S_NARGS
};
static const char *const s_names[S_NARGS] = {
    "host",
    "port",
    "tls",
    "threads",
    "cert_file",
    "key_file",
    "session_resumption",
    "request_timeout_ms",
    "keepalive_timeout_ms",
    "max_head",
    "backlog",
    "http2",
    "h2_max_concurrent_streams",
    "h2_initial_window_size",
    "h2_max_frame_size",
    "max_connections",
    "http3",
    "alt_svc",
    "h3_early_data",
};

static PyObject *server_start(PyObject *m, PyObject *const *args, Py_ssize_t nargs,
                              PyObject *kwnames)
{
    hb_modstate *st = hb_state(m);
    PyObject *a[S_NARGS];
    if (hb_kw_only("server_start", args, nargs, kwnames, s_names, S_NARGS, a) < 0) return NULL;
    hb_server_opts o;
    hb_server_opts_init(&o);
    int max_head = (int)o.max_head;
    if (hb_arg_str(a[S_HOST], "host", &o.host, NULL) < 0 ||
        hb_arg_str(a[S_CERT_FILE], "cert_file", &o.cert_file, NULL) < 0 ||
        hb_arg_str(a[S_KEY_FILE], "key_file", &o.key_file, NULL) < 0)
        return NULL;
    if (!o.host) o.host = "127.0.0.1";
    if (hb_arg_int(a[S_PORT], 0, 0, 65535, "port", &o.port) < 0 ||
        hb_arg_int(a[S_THREADS], 1, 1, HB_SERVER_MAX_THREADS, "threads", &o.threads) < 0 ||
        hb_arg_int(a[S_REQUEST_TIMEOUT_MS], o.request_timeout_ms, 1, 86400000, "request_timeout_ms",
                   &o.request_timeout_ms) < 0 ||
        hb_arg_int(a[S_KEEPALIVE_TIMEOUT_MS], o.keepalive_timeout_ms, 1, 86400000,
                   "keepalive_timeout_ms", &o.keepalive_timeout_ms) < 0 ||
        hb_arg_int(a[S_MAX_HEAD], max_head, 256, 64 << 20, "max_head", &max_head) < 0 ||
        hb_arg_int(a[S_BACKLOG], o.backlog, 1, 1 << 20, "backlog", &o.backlog) < 0 ||
        hb_arg_int(a[S_H2_STREAMS], o.h2_max_concurrent_streams, 1, HB_H2_MAX_STREAMS_MAX,
                   "h2_max_concurrent_streams", &o.h2_max_concurrent_streams) < 0 ||
        hb_arg_int(a[S_H2_WINDOW], o.h2_initial_window_size, 0, (int)HB_H2_WINDOW_MAX,
                   "h2_initial_window_size", &o.h2_initial_window_size) < 0 ||
        hb_arg_int(a[S_H2_FRAME], o.h2_max_frame_size, HB_H2_FRAME_MIN, HB_H2_FRAME_MAX,
                   "h2_max_frame_size", &o.h2_max_frame_size) < 0 ||
        hb_arg_int(a[S_MAX_CONNECTIONS], 0, 0, 1 << 24, "max_connections", &o.max_connections) < 0)
        return NULL;
    o.max_head = (size_t)max_head;
    if (hb_arg_bool(a[S_TLS], o.tls, &o.tls) < 0 ||
        hb_arg_bool(a[S_SESSION_RESUMPTION], o.session_resumption, &o.session_resumption) < 0 ||
        hb_arg_bool(a[S_HTTP2], o.http2, &o.http2) < 0 ||
        hb_arg_bool(a[S_HTTP3], o.http3, &o.http3) < 0 ||
        hb_arg_bool(a[S_ALT_SVC], o.alt_svc, &o.alt_svc) < 0 ||
        hb_arg_bool(a[S_H3_EARLY_DATA], o.h3_early_data, &o.h3_early_data) < 0)
        return NULL;
    ServerObject *self = PyObject_New(ServerObject, st->ServerType);
    if (!self) return NULL;
    self->srv = NULL;
    char err[HB_ERR_LEN] = "";
    int rc;
    hb_server *srv = NULL;
    Py_BEGIN_ALLOW_THREADS rc = hb_server_start(&srv, &o, err);
    Py_END_ALLOW_THREADS if (rc < 0)
    {
        Py_DECREF(self);
        return hb_raise(st, rc, err);
    }
    self->srv = srv;
    return (PyObject *)self;
}

static void server_dealloc(ServerObject *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    hb_server *srv = self->srv;
    self->srv = NULL;
    if (srv) {
        Py_BEGIN_ALLOW_THREADS hb_server_free(srv);
        Py_END_ALLOW_THREADS
    }
    freefunc f = (freefunc)PyType_GetSlot(tp, Py_tp_free);
    f(self);
    Py_DECREF(tp);
}

static PyObject *server_stop(ServerObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)args;
    if (nargs) {
        PyErr_SetString(PyExc_TypeError, "stop() takes no arguments");
        return NULL;
    }
    if (self->srv) {
        hb_server *srv = self->srv;
        Py_BEGIN_ALLOW_THREADS hb_server_stop(srv);
        Py_END_ALLOW_THREADS
    }
    Py_RETURN_NONE;
}

static PyObject *server_set_cpus(ServerObject *self, PyObject *arg)
{
    int cpus[64];
    PyObject *seq = PySequence_Fast(arg, "set_cpus() takes a sequence of CPU numbers");
    if (!seq) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n < 1 || n > 64) {
        Py_DECREF(seq);
        PyErr_SetString(PyExc_ValueError, "set_cpus() takes 1..64 CPU numbers");
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        long v = PyLong_AsLong(PySequence_Fast_GET_ITEM(seq, i));
        if (v == -1 && PyErr_Occurred()) {
            Py_DECREF(seq);
            return NULL;
        }
        if (v < 0 || v > 1023) {
            Py_DECREF(seq);
            PyErr_Format(PyExc_ValueError, "CPU must be in 0..1023, got %ld", v);
            return NULL;
        }
        cpus[i] = (int)v;
    }
    Py_DECREF(seq);
    char err[HB_ERR_LEN] = "";
    int rc = hb_server_set_cpus(self->srv, cpus, (int)n, err);
    if (rc < 0) return hb_raise(hb_state_from_type(Py_TYPE(self)), rc, err);
    Py_RETURN_NONE;
}

static int set_u64(PyObject *d, const char *k, uint64_t v)
{
    PyObject *o = PyLong_FromUnsignedLongLong(v);
    if (!o) return -1;
    int r = PyDict_SetItemString(d, k, o);
    Py_DECREF(o);
    return r;
}

/* {code: n} of the codes with a count (the last bucket, the rest, as 0). */
static PyObject *close_codes(const uint64_t *v)
{
    PyObject *d = PyDict_New();
    for (int i = 0; d && i < HB_SERVER_WS_CODES; i++) {
        if (!v[i]) continue;
        PyObject *k = PyLong_FromLong(i == HB_SERVER_WS_CODES - 1 ? 0 : 1000 + i);
        PyObject *n = PyLong_FromUnsignedLongLong(v[i]);
        int r = (k && n) ? PyDict_SetItem(d, k, n) : -1;
        Py_XDECREF(k);
        Py_XDECREF(n);
        if (r < 0) Py_CLEAR(d);
    }
    return d;
}

/* stats()["sse"], ["stream"] and ["ws"]. */
static int set_streaming(PyObject *d, const hb_server_stats *s)
{
    const hb_server_stream_stats *m = &s->sm;
    const hb_server_ws_stats *w = &s->ws;
    PyObject *sse = PyDict_New(), *st = PyDict_New(), *ws = PyDict_New();
    PyObject *cs = close_codes(w->close_sent), *cr = close_codes(w->close_received);
    int r = -1;
    if (!sse || !st || !ws || !cs || !cr) goto done;
    if (set_u64(sse, "streams", m->sse_streams) < 0 || set_u64(sse, "events", m->sse_events) < 0 ||
        set_u64(sse, "bytes", m->sse_bytes) < 0 ||
        set_u64(sse, "write_timeouts", m->sse_write_timeouts) < 0 ||
        set_u64(st, "streams", m->stream_streams) < 0 ||
        set_u64(st, "chunks", m->stream_chunks) < 0 || set_u64(st, "bytes", m->stream_bytes) < 0 ||
        set_u64(st, "write_timeouts", m->stream_write_timeouts) < 0 ||
        set_u64(ws, "upgrades", w->upgrades) < 0 ||
        set_u64(ws, "bad_upgrades", w->bad_upgrades) < 0 ||
        set_u64(ws, "frames_in", w->frames_in) < 0 ||
        set_u64(ws, "frames_out", w->frames_out) < 0 ||
        set_u64(ws, "messages_in", w->messages_in) < 0 ||
        set_u64(ws, "messages_out", w->messages_out) < 0 ||
        set_u64(ws, "payload_in", w->payload_in) < 0 ||
        set_u64(ws, "payload_out", w->payload_out) < 0 || set_u64(ws, "pings", w->pings) < 0 ||
        set_u64(ws, "pongs", w->pongs) < 0 || set_u64(ws, "pushed", w->pushed) < 0 ||
        set_u64(ws, "errors", w->errors) < 0 ||
        set_u64(ws, "write_timeouts", w->write_timeouts) < 0 ||
        set_u64(ws, "close_timeouts", w->close_timeouts) < 0 ||
        set_u64(ws, "deflate", w->deflate) < 0 || set_u64(ws, "compressed", w->compressed) < 0 ||
        PyDict_SetItemString(ws, "close_sent", cs) < 0 ||
        PyDict_SetItemString(ws, "close_received", cr) < 0 ||
        PyDict_SetItemString(d, "sse", sse) < 0 || PyDict_SetItemString(d, "stream", st) < 0 ||
        PyDict_SetItemString(d, "ws", ws) < 0)
        goto done;
    r = 0;
done:
    Py_XDECREF(sse);
    Py_XDECREF(st);
    Py_XDECREF(ws);
    Py_XDECREF(cs);
    Py_XDECREF(cr);
    return r;
}

static PyObject *server_stats(ServerObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)args;
    if (nargs) {
        PyErr_SetString(PyExc_TypeError, "stats() takes no arguments");
        return NULL;
    }
    hb_server_stats s;
    hb_server_stats_read(self->srv, &s);
    PyObject *d = PyDict_New(), *routes = NULL, *status = NULL, *cpu = NULL;
    PyObject *byp = NULL, *cbyp = NULL, *h2 = NULL, *h2set = NULL, *h3 = NULL;
    if (!d) return NULL;
    if (!(byp = PyDict_New()) || !(cbyp = PyDict_New()) || !(h2 = PyDict_New()) ||
        !(h2set = PyDict_New()) || !(h3 = PyDict_New()))
        goto fail;
    if (s.http3 &&
        (set_u64(byp, "h3", s.requests_h3) < 0 || set_u64(cbyp, "h3", s.connections_h3) < 0 ||
         set_u64(h3, "streams", s.h3_streams) < 0 ||
         set_u64(h3, "connections_closed", s.h3_connections_closed) < 0 ||
         set_u64(h3, "handshakes", s.h3_handshakes) < 0 ||
         set_u64(h3, "resumed", s.h3_resumed) < 0 ||
         set_u64(h3, "early_data", s.h3_early_data) < 0 ||
         set_u64(h3, "early_rejected", s.h3_early_rejected) < 0 ||
         set_u64(h3, "handshake_errors", s.h3_handshake_errors) < 0 ||
         set_u64(h3, "idle_timeouts", s.h3_idle_timeouts) < 0 ||
         set_u64(h3, "errors", s.h3_errors) < 0 ||
         set_u64(h3, "streams_reset_sent", s.h3_rst_sent) < 0 ||
         set_u64(h3, "streams_reset_received", s.h3_rst_received) < 0 ||
         set_u64(h3, "refused", s.h3_refused) < 0 ||
         set_u64(h3, "packets_in", s.h3_packets_in) < 0 ||
         set_u64(h3, "packets_out", s.h3_packets_out) < 0 ||
         set_u64(h3, "bytes_in", s.h3_bytes_in) < 0 ||
         set_u64(h3, "bytes_out", s.h3_bytes_out) < 0 || set_u64(h3, "dropped", s.h3_dropped) < 0 ||
         set_u64(h3, "version_negotiations", s.h3_version_negotiations) < 0 ||
         set_u64(h3, "early_replays", s.h3_early_replays) < 0 ||
         set_u64(h3, "retries", s.h3_retries) < 0 || set_u64(h3, "half_open", s.h3_half_open) < 0 ||
         set_u64(h3, "stream_timeouts", s.h3_stream_timeouts) < 0 ||
         set_u64(h3, "body_buffered", s.h3_body_buffered) < 0 ||
         set_u64(h3, "closes_limited", s.h3_closes_limited) < 0 ||
         set_u64(h3, "cid_slots", s.h3_cid_slots) < 0 ||
         set_u64(h3, "streams_cut", s.h3_streams_cut) < 0 || PyDict_SetItemString(d, "h3", h3) < 0))
        goto fail;
    if (set_u64(byp, "http/1.1", s.requests - s.requests_h2 - s.requests_h3) < 0 ||
        set_u64(byp, "h2", s.requests_h2) < 0 || set_u64(cbyp, "http/1.1", s.connections_h1) < 0 ||
        set_u64(cbyp, "h2", s.connections_h2) < 0 || set_u64(h2, "streams", s.h2_streams) < 0 ||
        set_u64(h2, "streams_reset_sent", s.h2_rst_sent) < 0 ||
        set_u64(h2, "streams_reset_received", s.h2_rst_received) < 0 ||
        set_u64(h2, "goaway_sent", s.h2_goaway_sent) < 0 ||
        set_u64(h2, "protocol_errors", s.h2_protocol_errors) < 0 ||
        set_u64(h2, "refused_streams", s.h2_refused_streams) < 0 ||
        set_u64(h2, "floods", s.h2_floods) < 0 ||
        set_u64(h2set, "max_concurrent_streams", (uint64_t)s.h2_max_concurrent_streams) < 0 ||
        set_u64(h2set, "initial_window_size", (uint64_t)s.h2_initial_window_size) < 0 ||
        set_u64(h2set, "max_frame_size", (uint64_t)s.h2_max_frame_size) < 0 ||
        PyDict_SetItemString(h2, "settings", h2set) < 0 ||
        PyDict_SetItemString(d, "by_protocol", byp) < 0 ||
        PyDict_SetItemString(d, "connections_by_protocol", cbyp) < 0 ||
        PyDict_SetItemString(d, "h2", h2) < 0)
        goto fail;
    if (!(routes = PyDict_New()) || !(status = PyDict_New()) || !(cpu = PyList_New(s.threads)))
        goto fail;
    for (int i = 0; i < HB_ROUTE_COUNT; i++)
        if (set_u64(routes, hb_server_route_name(i), s.by_route[i]) < 0) goto fail;
    for (int i = 0; i < 600; i++) {
        if (!s.by_status[i]) continue;
        PyObject *k = PyLong_FromLong(i), *v = PyLong_FromUnsignedLongLong(s.by_status[i]);
        int r = (k && v) ? PyDict_SetItem(status, k, v) : -1;
        Py_XDECREF(k);
        Py_XDECREF(v);
        if (r < 0) goto fail;
    }
    for (int i = 0; i < s.threads; i++) {
        PyObject *v = PyLong_FromUnsignedLongLong(s.thread_cpu_ns[i]);
        if (!v) goto fail;
        PyList_SET_ITEM(cpu, i, v);
    }
    if (set_u64(d, "requests", s.requests) < 0 || PyDict_SetItemString(d, "by_route", routes) < 0 ||
        PyDict_SetItemString(d, "by_status", status) < 0 ||
        set_u64(d, "bytes_in", s.bytes_in) < 0 || set_u64(d, "bytes_out", s.bytes_out) < 0 ||
        set_u64(d, "connections_accepted", s.connections_accepted) < 0 ||
        set_u64(d, "connections_closed", s.connections_closed) < 0 ||
        set_u64(d, "connections_active", s.connections_accepted - s.connections_closed) < 0 ||
        set_u64(d, "tls_handshakes", s.tls_handshakes) < 0 ||
        set_u64(d, "tls_resumed", s.tls_resumed) < 0 ||
        set_u64(d, "tls_handshake_errors", s.tls_handshake_errors) < 0 ||
        set_u64(d, "idle_timeouts", s.idle_timeouts) < 0 ||
        set_u64(d, "body_bytes_in", s.body_bytes_in) < 0 ||
        set_u64(d, "client_gone", s.client_gone) < 0 ||
        set_u64(d, "connections_refused", s.connections_refused) < 0 ||
        set_u64(d, "threads", (uint64_t)s.threads) < 0 || set_u64(d, "cpu_ns", s.cpu_ns) < 0 ||
        PyDict_SetItemString(d, "thread_cpu_ns", cpu) < 0 || set_streaming(d, &s) < 0)
        goto fail;
    Py_DECREF(routes);
    Py_DECREF(status);
    Py_DECREF(cpu);
    Py_DECREF(byp);
    Py_DECREF(cbyp);
    Py_DECREF(h2);
    Py_DECREF(h2set);
    Py_DECREF(h3);
    return d;
fail:
    Py_XDECREF(byp);
    Py_XDECREF(cbyp);
    Py_XDECREF(h2);
    Py_XDECREF(h2set);
    Py_XDECREF(h3);
    Py_XDECREF(routes);
    Py_XDECREF(status);
    Py_XDECREF(cpu);
    Py_DECREF(d);
    return NULL;
}

static PyObject *server_get_port(ServerObject *self, void *c)
{
    (void)c;
    return PyLong_FromLong(hb_server_port(self->srv));
}

static PyObject *server_get_running(ServerObject *self, void *c)
{
    (void)c;
    return PyBool_FromLong(hb_server_running(self->srv));
}

static PyObject *server_get_cert_pem(ServerObject *self, void *c)
{
    (void)c;
    size_t n;
    const char *pem = hb_server_cert_pem(self->srv, &n);
    if (!pem) Py_RETURN_NONE;
    return PyUnicode_FromStringAndSize(pem, (Py_ssize_t)n);
}

static PyMethodDef server_methods[] = {
    {"set_cpus", (PyCFunction)server_set_cpus, METH_O,
     "set_cpus(cpus): run every worker thread on these CPUs (ValueError when one is not allowed)."},
    {"stop", (PyCFunction)(void (*)(void))server_stop, METH_FASTCALL,
     "stop()\n--\n\nStop the workers and close every connection (idempotent)."},
    {"stats", (PyCFunction)(void (*)(void))server_stats, METH_FASTCALL,
     "stats()\n--\n\nCounters as a dict, read while the server runs."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef server_getset[] = {
    {"port", (getter)server_get_port, NULL, "bound TCP port", NULL},
    {"running", (getter)server_get_running, NULL, "True until stop()", NULL},
    {"cert_pem", (getter)server_get_cert_pem, NULL, "TLS certificate PEM or None", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot server_slots[] = {
    {Py_tp_doc, "A running embedded server (made by _core.server_start)."},
    {Py_tp_dealloc, server_dealloc},
    {Py_tp_methods, server_methods},
    {Py_tp_getset, server_getset},
    {0, NULL},
};

static PyType_Spec server_spec = {
    .name = "httpbench._core.ServerHandle",
    .basicsize = sizeof(ServerObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = server_slots,
};

/* expected_bytes(n, offset=0) -> bytes: the server's deterministic content. */
static PyObject *expected_bytes(PyObject *m, PyObject *const *args, Py_ssize_t nargs,
                                PyObject *kwnames)
{
    (void)m;
    static const char *const names[] = {"n", "offset"};
    PyObject *a[2] = {NULL, NULL};
    Py_ssize_t nk = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    if (nargs > 2) {
        PyErr_SetString(PyExc_TypeError, "expected_bytes(n, offset=0)");
        return NULL;
    }
    for (Py_ssize_t i = 0; i < nargs; i++)
        a[i] = args[i];
    for (Py_ssize_t k = 0; k < nk; k++) {
        const char *name = PyUnicode_AsUTF8(PyTuple_GET_ITEM(kwnames, k));
        if (!name) return NULL;
        int found = -1;
        for (int i = 0; i < 2; i++)
            if (strcmp(name, names[i]) == 0) found = i;
        if (found < 0 || a[found]) {
            PyErr_Format(PyExc_TypeError, "expected_bytes(): bad keyword argument '%s'", name);
            return NULL;
        }
        a[found] = args[nargs + k];
    }
    if (!a[0]) {
        PyErr_SetString(PyExc_TypeError, "expected_bytes() missing n");
        return NULL;
    }
    long long n = PyLong_AsLongLong(a[0]);
    if (n == -1 && PyErr_Occurred()) return NULL;
    long long off = 0;
    if (a[1]) {
        off = PyLong_AsLongLong(a[1]);
        if (off == -1 && PyErr_Occurred()) return NULL;
    }
    if (n < 0 || off < 0) {
        PyErr_SetString(PyExc_ValueError, "n and offset must be >= 0");
        return NULL;
    }
    PyObject *b = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)n);
    if (!b) return NULL;
    hb_content_fill(PyBytes_AS_STRING(b), (size_t)n, (uint64_t)off);
    return b;
}

/* crc32(data, crc=0) -> int, same as zlib.crc32 (used by the sink route). */
static PyObject *crc32_fn(PyObject *m, PyObject *const *args, Py_ssize_t nargs)
{
    (void)m;
    if (nargs < 1 || nargs > 2) {
        PyErr_SetString(PyExc_TypeError, "crc32(data, crc=0)");
        return NULL;
    }
    unsigned long crc = 0;
    if (nargs == 2) {
        crc = PyLong_AsUnsignedLongMask(args[1]);
        if (crc == (unsigned long)-1 && PyErr_Occurred()) return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) return NULL;
    uint32_t r;
    Py_BEGIN_ALLOW_THREADS r = hb_crc32((uint32_t)crc, view.buf, (size_t)view.len);
    Py_END_ALLOW_THREADS PyBuffer_Release(&view);
    return PyLong_FromUnsignedLong(r);
}

static PyMethodDef server_functions[] = {
    {"server_start", (PyCFunction)(void (*)(void))server_start, METH_FASTCALL | METH_KEYWORDS,
     "server_start(*, host, port, tls, threads, cert_file, key_file, session_resumption,\n"
     "             request_timeout_ms, keepalive_timeout_ms, max_head, backlog)\n--\n\n"
     "Bind and start the embedded server; returns a ServerHandle."},
    {"expected_bytes", (PyCFunction)(void (*)(void))expected_bytes, METH_FASTCALL | METH_KEYWORDS,
     "expected_bytes(n, offset=0)\n--\n\nThe server's deterministic body bytes [offset, "
     "offset+n)."},
    {"crc32", (PyCFunction)(void (*)(void))crc32_fn, METH_FASTCALL,
     "crc32(data, crc=0)\n--\n\nCRC-32 (zlib-compatible)."},
    {NULL, NULL, 0, NULL},
};

int hb_mod_server_init(PyObject *m, hb_modstate *st)
{
    PyObject *tp = PyType_FromModuleAndSpec(m, &server_spec, NULL);
    if (!tp) return -1;
    st->ServerType = (PyTypeObject *)tp;
    if (PyModule_AddObjectRef(m, "ServerHandle", tp) < 0) return -1;
    if (PyModule_AddFunctions(m, server_functions) < 0) return -1;
    PyObject *names = PyTuple_New(HB_ROUTE_COUNT);
    if (!names) return -1;
    for (int i = 0; i < HB_ROUTE_COUNT; i++) {
        PyObject *s = PyUnicode_FromString(hb_server_route_name(i));
        if (!s) {
            Py_DECREF(names);
            return -1;
        }
        PyTuple_SET_ITEM(names, i, s);
    }
    if (PyModule_AddObject(m, "SERVER_ROUTES", names) < 0) {
        Py_DECREF(names);
        return -1;
    }
    return PyModule_AddStringConstant(m, "SERVER_ALPHABET", HB_CONTENT_ALPHABET) < 0 ||
                   PyModule_AddIntConstant(m, "SERVER_PERIOD", HB_CONTENT_PERIOD) < 0 ||
                   PyModule_AddIntConstant(m, "HAVE_H2_SERVER", hb_h2_server_available()) < 0 ||
                   PyModule_AddStringConstant(m, "H2_SERVER_MISSING", HB_H2_SERVER_MISSING) < 0 ||
                   PyModule_AddIntConstant(m, "HAVE_H3", hb_h3_server_available()) < 0 ||
                   PyModule_AddStringConstant(m, "H3_MISSING", HB_H3_SERVER_MISSING) < 0
               ? -1
               : 0;
}
