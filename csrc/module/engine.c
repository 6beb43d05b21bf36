/* engine.c - _core.run_bench(): configure hb_engine, run it without the GIL,
 * report progress, turn Ctrl-C into the engine's stop flag, and return the
 * merged numbers as a dict (the package's _loadgen builds the BenchResult). */
#include "module.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/hb_clock.h"
#include "engine/hb_engine.h"
#include "h3/hb_h3_client.h"
#include "net/hb_sock.h"
#include "net/hb_tls.h"

#define WAIT_SLICE_NS (50ull * 1000000ull) /* Ctrl-C is noticed within this */

/* Keyword-only arguments of run_bench, in this order. */
enum {
    A_HOST,
    A_PORT,
    A_TLS,
    A_HEAD,
    A_BODY,
    A_BODY_FILE,
    A_METHOD_IS_HEAD,
    A_N,
    A_DURATION,
    A_WARMUP,
    A_CONNECTIONS,
    A_THREADS,
    A_PIPELINE,
    A_RATE,
    A_KEEPALIVE,
    A_TIMEOUT,
    A_VERIFY,
    A_CA_FILE,
    A_CA_PEM,
    A_SERVER_NAME,
    A_SESSION_RESUMPTION,
    A_ALPN,
    A_PROGRESS,
    A_PROGRESS_INTERVAL,
    A_RBUF_SIZE,
    A_TLS_MAX_VERSION,
    A_LENIENT,
    A_HTTP2,
    A_H2_FIELDS,
    A_GIVE_UP,
    A_HTTP3,
    A_WS,
    A_WS_SIZE,
    A_WS_TEXT,
    A_STREAM,
    A_STREAM_MAX_LINE,
    A_NARGS
};
static const char *const arg_names[A_NARGS] = {
    "host",
    "port",
    "tls",
    "head",
    "body",
    "body_file",
    "method_is_head",
    "n",
    "duration",
    "warmup",
    "connections",
    "threads",
    "pipeline",
    "rate",
    "keepalive",
    "timeout",
    "verify",
    "ca_file",
    "ca_pem",
    "server_name",
    "session_resumption",
    "alpn",
    "progress",
    "progress_interval",
    "rbuf_size",
    "tls_max_version",
    "lenient",
    "http2",
    "h2_fields",
    "give_up",
    "http3",
    "ws",
    "ws_size",
    "ws_text",
    "stream",
    "stream_max_line",
};

static int set_item(PyObject *d, const char *k, PyObject *v)
{
    if (!v) return -1;
    int rc = PyDict_SetItemString(d, k, v);
    Py_DECREF(v);
    return rc;
}

static PyObject *u64_list(const uint64_t *a, uint32_t n)
{
    PyObject *l = PyList_New(n);
    if (!l) return NULL;
    for (uint32_t i = 0; i < n; i++) {
        PyObject *x = PyLong_FromUnsignedLongLong(a[i]);
        if (!x) {
            Py_DECREF(l);
            return NULL;
        }
        PyList_SET_ITEM(l, i, x);
    }
    return l;
}

static PyObject *result_dict(hb_modstate *st, const hb_engine_result *r, int64_t mono_to_unix)
{
    PyObject *d = PyDict_New();
    if (!d) return NULL;
#define U(k, v)                                                                                    \
    if (set_item(d, k, PyLong_FromUnsignedLongLong(v)) < 0) goto fail
    U("completed", r->completed);
    U("responses", r->responses);
    U("ok", r->ok);
    U("non2xx", r->non2xx);
    U("errors_total", r->errors_total);
    U("bytes_in", r->bytes_in);
    U("bytes_out", r->bytes_out);
    U("body_bytes", r->body_bytes);
    U("connections_opened", r->connections_opened);
    U("reconnects", r->reconnects);
    U("tls_resumed", r->tls_resumed);
    U("inflight_at_stop", r->inflight_at_stop);
    U("warmup_requests", r->warmup_requests);
    U("sends", r->sends);
    U("sends_late", r->sends_late);
    U("unsent", r->unsent);
    U("connect_attempts", r->connect_attempts);
    U("connect_failures", r->connect_failures);
    U("connect_fd_exhausted", r->connect_fd_exhausted);
    U("quic_dgrams_sent", r->quic_dgrams_sent);
    U("quic_dgrams_recv", r->quic_dgrams_recv);
    U("quic_pto", r->quic_pto);
    U("events", r->events);
    U("cpu_user_ns", r->cpu_user_ns);
    U("cpu_sys_ns", r->cpu_sys_ns);
    U("duration_ns", r->end_ns > r->start_ns ? r->end_ns - r->start_ns : 0);
    U("start_unix_ns", (uint64_t)((int64_t)r->start_ns + mono_to_unix));
    U("end_unix_ns", (uint64_t)((int64_t)r->end_ns + mono_to_unix));
#undef U
    if (set_item(d, "interrupted", PyBool_FromLong(r->interrupted)) < 0) goto fail;
    if (set_item(d, "doc_length", PyLong_FromLongLong(r->doc_length)) < 0) goto fail;
    if (set_item(d, "server",
                 PyUnicode_DecodeUTF8(r->server, (Py_ssize_t)strlen(r->server), "replace")) < 0)
        goto fail;
    if (set_item(d, "tls_info",
                 PyUnicode_DecodeUTF8(r->tls_info, (Py_ssize_t)strlen(r->tls_info), "replace")) < 0)
        goto fail;
    if (set_item(d, "first_error",
                 PyUnicode_DecodeUTF8(r->first_error, (Py_ssize_t)strlen(r->first_error),
                                      "replace")) < 0)
        goto fail;
    PyObject *status = PyDict_New();
    if (set_item(d, "status", status) < 0) goto fail;
    for (int i = 0; i < 1000; i++) {
        if (!r->status[i]) continue;
        PyObject *k = PyLong_FromLong(i), *v = PyLong_FromUnsignedLongLong(r->status[i]);
        int rc = (k && v) ? PyDict_SetItem(status, k, v) : -1;
        Py_XDECREF(k);
        Py_XDECREF(v);
        if (rc < 0) goto fail;
    }
    PyObject *classes = PyDict_New();
    if (set_item(d, "status_classes", classes) < 0) goto fail;
    static const char *const cls[6] = {"other", "1xx", "2xx", "3xx", "4xx", "5xx"};
    for (int i = 0; i < 6; i++)
        if (set_item(classes, cls[i], PyLong_FromUnsignedLongLong(r->status_class[i])) < 0)
            goto fail;
    PyObject *errors = PyDict_New();
    if (set_item(d, "errors", errors) < 0) goto fail;
    for (int i = 0; i < HB_ENG_NERR; i++)
        if (set_item(errors, hb_eng_err_name(i), PyLong_FromUnsignedLongLong(r->errors[i])) < 0)
            goto fail;
    if (set_item(d, "series_ok", u64_list(r->sec_ok, r->nseconds)) < 0) goto fail;
    if (set_item(d, "series_err", u64_list(r->sec_err, r->nseconds)) < 0) goto fail;
    {
        /* per second: the p50 and p99 latency of the responses that finished in it */
        uint64_t *pct = r->nseconds ? malloc(2 * (size_t)r->nseconds * sizeof *pct) : NULL;
        if (r->nseconds && !pct) {
            PyErr_NoMemory();
            goto fail;
        }
        for (uint32_t s = 0; s < r->nseconds; s++) {
            pct[s] = hb_engine_sec_percentile(r, s, 50.0);
            pct[r->nseconds + s] = hb_engine_sec_percentile(r, s, 99.0);
        }
        int bad =
            set_item(d, "series_p50", u64_list(pct, r->nseconds)) < 0 ||
            set_item(d, "series_p99", u64_list(pct ? pct + r->nseconds : NULL, r->nseconds)) < 0;
        free(pct);
        if (bad) goto fail;
    }
    struct {
        const char *k;
        const hb_hist *h;
    } hs[] = {{"latency", &r->latency},
              {"latency_uncorrected", &r->latency_uncorrected},
              {"processing", &r->processing},
              {"ttfb", &r->ttfb},
              {"connect", &r->connect},
              {"tls", &r->tls},
              {"setup", &r->setup},
              {"ttfe", &r->ttfe},
              {"gap", &r->gap}};
    for (size_t i = 0; i < sizeof hs / sizeof hs[0]; i++)
        if (set_item(d, hs[i].k, hb_py_hist_from_core(st, hs[i].h)) < 0) goto fail;
    return d;
fail:
    Py_DECREF(d);
    return NULL;
}

/* Poll the running engine: progress callback, signals, and (give_up_s > 0) a
 * target that accepted no connection within give_up_s: then the run stops and
 * *gave_up is set. Returns 0, or -1 with a pending (non-KeyboardInterrupt)
 * exception to re-raise after the join. */
static int supervise(hb_engine *e, PyObject *progress, double interval_s, double give_up_s,
                     int *gave_up)
{
    uint64_t start = hb_now_ns();
    uint64_t next_progress = start;
    uint64_t give_up_at = give_up_s > 0 ? start + (uint64_t)(give_up_s * 1e9) : 0;
    int done = 0;
    while (!done) {
        if (give_up_at && !done && hb_now_ns() >= give_up_at) {
            hb_engine_progress p;
            hb_engine_progress_get(e, &p);
            give_up_at = 0; /* one look: a target that connected once is reachable */
            if (p.connected == 0) {
                hb_engine_stop(e);
                *gave_up = 1;
            }
        }
        Py_BEGIN_ALLOW_THREADS done = hb_engine_wait(e, WAIT_SLICE_NS);
        Py_END_ALLOW_THREADS if (PyErr_CheckSignals() < 0)
        {
            hb_engine_stop(e);
            if (PyErr_ExceptionMatches(PyExc_KeyboardInterrupt)) {
                PyErr_Clear(); /* Ctrl-C: a partial result marked interrupted */
                return 0;
            }
            return -1;
        }
        if (progress && !done && hb_now_ns() >= next_progress) {
            next_progress = hb_now_ns() + (uint64_t)(interval_s * 1e9);
            hb_engine_progress p;
            hb_engine_progress_get(e, &p);
            PyObject *res = PyObject_CallFunction(
                progress, "KKKKdOKK", (unsigned long long)p.completed, (unsigned long long)p.ok,
                (unsigned long long)p.errors, (unsigned long long)p.bytes_in,
                (double)p.elapsed_ns / 1e9, p.warming_up ? Py_True : Py_False,
                (unsigned long long)p.p50_ns, (unsigned long long)p.p99_ns);
            if (!res) {
                hb_engine_stop(e);
                if (PyErr_ExceptionMatches(PyExc_KeyboardInterrupt)) {
                    PyErr_Clear();
                    return 0;
                }
                return -1;
            }
            Py_DECREF(res);
        }
    }
    return 0;
}

static PyObject *run_bench(PyObject *m, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    hb_modstate *st = hb_state(m);
    PyObject *a[A_NARGS];
    if (hb_kw_only("run_bench", args, nargs, kwnames, arg_names, A_NARGS, a) < 0) return NULL;

    hb_engine_config cfg;
    hb_engine_config_init(&cfg);
    char err[HB_ERR_LEN] = "";
    const char *host;
    if (hb_arg_str(a[A_HOST], "host", &host, NULL) < 0) return NULL;
    if (!host) {
        PyErr_SetString(PyExc_TypeError, "host is required");
        return NULL;
    }
    uint64_t port, n, conns, threads, pipeline, rbuf, ws_size, max_line;
    int ws, ws_text, stream;
    double duration, warmup, rate, timeout, interval, give_up;
    int tls, keepalive, verify, resumption, is_head, lenient, http2, http3;
    if (hb_arg_u64(a[A_PORT], 0, "port", &port) < 0 || hb_arg_u64(a[A_N], 0, "n", &n) < 0 ||
        hb_arg_u64(a[A_CONNECTIONS], 1, "connections", &conns) < 0 ||
        hb_arg_u64(a[A_THREADS], 1, "threads", &threads) < 0 ||
        hb_arg_u64(a[A_PIPELINE], 1, "pipeline", &pipeline) < 0 ||
        hb_arg_u64(a[A_RBUF_SIZE], 0, "rbuf_size", &rbuf) < 0 ||
        hb_arg_double(a[A_DURATION], 0, "duration", &duration) < 0 ||
        hb_arg_double(a[A_WARMUP], 0, "warmup", &warmup) < 0 ||
        hb_arg_double(a[A_RATE], 0, "rate", &rate) < 0 ||
        hb_arg_double(a[A_TIMEOUT], 0, "timeout", &timeout) < 0 ||
        hb_arg_double(a[A_PROGRESS_INTERVAL], 0.2, "progress_interval", &interval) < 0 ||
        hb_arg_double(a[A_GIVE_UP], 0, "give_up", &give_up) < 0 ||
        hb_arg_bool(a[A_TLS], 0, &tls) < 0 || hb_arg_bool(a[A_KEEPALIVE], 1, &keepalive) < 0 ||
        hb_arg_bool(a[A_VERIFY], 1, &verify) < 0 ||
        hb_arg_bool(a[A_SESSION_RESUMPTION], 1, &resumption) < 0 ||
        hb_arg_bool(a[A_METHOD_IS_HEAD], 0, &is_head) < 0 ||
        hb_arg_bool(a[A_LENIENT], 0, &lenient) < 0 || hb_arg_bool(a[A_HTTP2], 0, &http2) < 0 ||
        hb_arg_bool(a[A_HTTP3], 0, &http3) < 0 || hb_arg_bool(a[A_WS], 0, &ws) < 0 ||
        hb_arg_u64(a[A_WS_SIZE], 16, "ws_size", &ws_size) < 0 ||
        hb_arg_bool(a[A_WS_TEXT], 0, &ws_text) < 0 || hb_arg_bool(a[A_STREAM], 0, &stream) < 0 ||
        hb_arg_u64(a[A_STREAM_MAX_LINE], 0, "stream_max_line", &max_line) < 0)
        return NULL;
    if (http2 && http3) {
        PyErr_SetString(PyExc_ValueError, "http2 and http3 are exclusive");
        return NULL;
    }
    if (port < 1 || port > 65535) {
        PyErr_SetString(PyExc_ValueError, "port must be in 1..65535");
        return NULL;
    }
    if (conns < 1 || conns > 1000000 || threads < 1 || threads > 1024 || pipeline < 1 ||
        pipeline > 1024) {
        PyErr_SetString(PyExc_ValueError,
                        "connections must be 1..1000000, threads 1..1024, pipeline 1..1024");
        return NULL;
    }
    if (!http2 && !http3 && (!a[A_HEAD] || !PyBytes_Check(a[A_HEAD]))) {
        PyErr_SetString(PyExc_TypeError, "head must be bytes");
        return NULL;
    }
    /* HTTP/2 and HTTP/3: the request as (name, value) bytes pairs from build_h2_fields. */
    hb_header h2f[128];
    Py_ssize_t nf = 0;
    if (http2 || http3) {
        PyObject *l = a[A_H2_FIELDS];
        if (!l || !PyList_Check(l) || PyList_GET_SIZE(l) < 4 || PyList_GET_SIZE(l) > 128) {
            PyErr_SetString(PyExc_TypeError,
                            "h2_fields must be a list of 4..128 (bytes, bytes) pairs");
            return NULL;
        }
        nf = PyList_GET_SIZE(l);
        for (Py_ssize_t i = 0; i < nf; i++) {
            PyObject *t = PyList_GET_ITEM(l, i);
            if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 2 ||
                !PyBytes_Check(PyTuple_GET_ITEM(t, 0)) || !PyBytes_Check(PyTuple_GET_ITEM(t, 1))) {
                PyErr_SetString(PyExc_TypeError, "h2_fields must hold (bytes, bytes) pairs");
                return NULL;
            }
            h2f[i].name = PyBytes_AS_STRING(PyTuple_GET_ITEM(t, 0));
            h2f[i].name_len = (size_t)PyBytes_GET_SIZE(PyTuple_GET_ITEM(t, 0));
            h2f[i].value = PyBytes_AS_STRING(PyTuple_GET_ITEM(t, 1));
            h2f[i].value_len = (size_t)PyBytes_GET_SIZE(PyTuple_GET_ITEM(t, 1));
        }
    }
    if (a[A_BODY] && !PyBytes_Check(a[A_BODY])) {
        PyErr_SetString(PyExc_TypeError, "body must be bytes");
        return NULL;
    }
    if (a[A_PROGRESS] && !PyCallable_Check(a[A_PROGRESS])) {
        PyErr_SetString(PyExc_TypeError, "progress must be callable");
        return NULL;
    }
    const char *body_file, *ca_file, *ca_pem, *sni, *alpn, *tls_max;
    if (hb_arg_str(a[A_BODY_FILE], "body_file", &body_file, NULL) < 0 ||
        hb_arg_str(a[A_CA_FILE], "ca_file", &ca_file, NULL) < 0 ||
        hb_arg_str(a[A_CA_PEM], "ca_pem", &ca_pem, NULL) < 0 ||
        hb_arg_str(a[A_SERVER_NAME], "server_name", &sni, NULL) < 0 ||
        hb_arg_str(a[A_ALPN], "alpn", &alpn, NULL) < 0 ||
        hb_arg_str(a[A_TLS_MAX_VERSION], "tls_max_version", &tls_max, NULL) < 0)
        return NULL;
    int max_version = 0;
    if (tls_max && strcmp(tls_max, "1.2") == 0) {
        max_version = HB_TLS_1_2;
    } else if (tls_max && strcmp(tls_max, "1.3") == 0) {
        max_version = HB_TLS_1_3;
    } else if (tls_max) {
        PyErr_SetString(PyExc_ValueError, "tls_max_version must be '1.2' or '1.3'");
        return NULL;
    }

    if (http2 || http3) {
        cfg.h2 = http2;
        cfg.h3 = http3;
        cfg.fields = h2f;
        cfg.nfields = (size_t)nf;
    } else {
        cfg.head = PyBytes_AS_STRING(a[A_HEAD]);
        cfg.head_len = (size_t)PyBytes_GET_SIZE(a[A_HEAD]);
    }
    if (a[A_BODY]) {
        cfg.body = PyBytes_AS_STRING(a[A_BODY]);
        cfg.body_len = (size_t)PyBytes_GET_SIZE(a[A_BODY]);
    }
    cfg.method_is_head = is_head;
    cfg.ws = ws;
    cfg.ws_size = ws_size;
    cfg.ws_text = ws_text;
    cfg.stream = stream;
    cfg.stream_max_line = max_line;
    cfg.parse_flags = lenient ? HB_PARSE_LENIENT_LF : 0;
    cfg.n = n;
    cfg.duration_ns = (uint64_t)(duration * 1e9);
    cfg.warmup_ns = (uint64_t)(warmup * 1e9);
    cfg.connections = (uint32_t)conns;
    cfg.threads = (uint32_t)threads;
    cfg.pipeline = (uint32_t)pipeline;
    cfg.rate = rate;
    cfg.keepalive = keepalive;
    cfg.timeout_ns = (uint64_t)(timeout * 1e9);
    cfg.rbuf_size = (size_t)rbuf;
    cfg.host = sni ? sni : host;

    int rc = 0, body_fd = -1;
    hb_tls_ctx *tctx = NULL;
    hb_h3_tls *qtls = NULL;
    hb_engine *e = NULL;
    Py_BEGIN_ALLOW_THREADS rc = hb_resolve_host(host, (int)port, &cfg.addr, &cfg.addrlen, err);
    if (rc == 0 && body_file) {
        body_fd = open(body_file, O_RDONLY | O_CLOEXEC);
        struct stat sb;
        if (body_fd < 0 || fstat(body_fd, &sb) != 0) {
            rc = hb_fail(err, -errno, "body file %s: %s", body_file, strerror(errno));
        } else if (!S_ISREG(sb.st_mode)) {
            rc = hb_fail(err, HB_E_INVALID, "body file %s is not a regular file", body_file);
        } else {
            cfg.body_fd = body_fd;
            cfg.body_len = (size_t)sb.st_size;
        }
    }
    if (rc == 0 && http3) {
        /* QUIC's TLS is GnuTLS's: its own trust, same options */
        hb_h3_tls_opts qo = {ca_file, ca_pem, !verify};
        rc = hb_h3_tls_new(&qtls, &qo, err);
        cfg.h3_tls = qtls;
        cfg.h3_resume = resumption;
    } else if (rc == 0 && tls) {
        hb_tls_client_opts o;
        hb_tls_client_opts_init(&o);
        o.insecure = !verify;
        o.ca_file = ca_file;
        o.ca_pem = ca_pem;
        o.session_resumption = resumption;
        if (alpn)
            o.alpn = alpn;
        else if (http2)
            o.alpn = "h2,http/1.1"; /* so a server without h2 is named, not a handshake failure */
        o.max_version = max_version;
        rc = hb_tls_client_ctx_new(&tctx, &o, err);
        cfg.tls = tctx;
    }
    if (rc == 0) rc = hb_engine_new(&e, &cfg, err);
    if (body_fd >= 0) close(body_fd); /* the engine keeps its own dup */
    if (rc == 0) rc = hb_engine_start(e, err);
    Py_END_ALLOW_THREADS if (rc < 0)
    {
        if (e) hb_engine_free(e);
        if (tctx) hb_tls_ctx_free(tctx);
        hb_h3_tls_free(qtls);
        return hb_raise(st, rc, err);
    }

    int gave_up = 0;
    int sup = supervise(e, a[A_PROGRESS], interval, give_up, &gave_up);
    hb_engine_result r;
    Py_BEGIN_ALLOW_THREADS rc = hb_engine_join(e, 1, &r, err);
    hb_engine_free(e);
    if (tctx) hb_tls_ctx_free(tctx);
    hb_h3_tls_free(qtls);
    Py_END_ALLOW_THREADS if (sup < 0)
    {
        if (rc == 0) hb_engine_result_free(&r);
        return NULL;
    }
    if (rc < 0) return hb_raise(st, rc, err);
    if (r.fatal_rc) {
        /* The run was invalid as asked (e.g. HTTP/2 to a server without it). */
        char fatal[HB_ERR_LEN];
        int frc = r.fatal_rc;
        memcpy(fatal, r.fatal, sizeof fatal);
        hb_engine_result_free(&r);
        return hb_raise(st, frc, fatal);
    }
    int64_t mono_to_unix = (int64_t)hb_clock_ns_of(CLOCK_REALTIME) - (int64_t)hb_now_ns();
    PyObject *d = result_dict(st, &r, mono_to_unix);
    hb_engine_result_free(&r);
    if (d && set_item(d, "gave_up", PyBool_FromLong(gave_up)) < 0) Py_CLEAR(d);
    return d;
}

static PyMethodDef engine_methods[] = {
    {"run_bench", (PyCFunction)(void (*)(void))run_bench, METH_FASTCALL | METH_KEYWORDS,
     "run_bench(*, host, port, head, ...) -> dict: run the native load generator."},
    {NULL, NULL, 0, NULL},
};

int hb_mod_engine_init(PyObject *m, hb_modstate *st)
{
    (void)st;
    /* TLSError.code of a certificate that failed verification */
    if (PyModule_AddIntConstant(m, "E_TLS_VERIFY", HB_E_TLS_VERIFY) < 0) return -1;
    return PyModule_AddFunctions(m, engine_methods);
}
