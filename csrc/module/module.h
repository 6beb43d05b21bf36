/* module.h - the bindings' init hooks and the conversions one binding offers
 * another.
 *
 * One extension, multi-phase init, all state in the module state (no C
 * globals holding Python objects). Each exposed object lives in its own file
 * with one init hook, called from module.c's exec slot (the registrar); what
 * every binding shares (state, hb_raise, argument converters) is helpers.h.
 */
#ifndef HB_MODULE_H
#define HB_MODULE_H

#include "helpers.h"
#include "base/hb_hist.h"
#include "http/hb_parse.h"

/* request.c: Python headers (None, a mapping, or an iterable of (name, value)
 * pairs; names and values str, sent as UTF-8, or bytes) as hb_header entries
 * pointing into the objects. Returns the count; *out is `stack` when cap
 * suffices, else a PyMem block (free it when != stack); *keep keeps the
 * pointers valid (Py_XDECREF it after use). -1 with an exception. */
Py_ssize_t hb_py_headers(PyObject *headers, hb_header *stack, size_t cap, hb_header **out,
                         PyObject **keep);

/* request.c: split a str URL (TypeError / ValueError otherwise); *text and
 * *len are its UTF-8, which u points into (valid while url lives). 0 or -1. */
struct hb_url;
int hb_py_url(hb_modstate *st, PyObject *url, struct hb_url *u, const char **text, Py_ssize_t *len);

/* response.c: a new Response for the exchange's final head (copied), or NULL
 * with an exception; finish sets the timings, size and body (stolen) once
 * the body is read. */
struct hb_exchange;
PyObject *hb_py_response_new(hb_modstate *st, const struct hb_exchange *x, PyObject *url);
void hb_py_response_finish(PyObject *resp, const struct hb_exchange *x, PyObject *body);
/* A Response for an HTTP/2 or HTTP/3 exchange: its header field records
 * (hb_client_mux.h), body stolen, version "HTTP/2" / "HTTP/3"; or NULL with an exception. */
struct hb_mx;
PyObject *hb_py_response_mx(hb_modstate *st, const struct hb_mx *x, PyObject *url, PyObject *body,
                            uint64_t t_connected, uint64_t t_tls_done, int h3);

/* Component init hooks: add types/functions to the module, return 0 or -1. */
int hb_mod_parser_init(PyObject *m, hb_modstate *st);
int hb_mod_hist_init(PyObject *m, hb_modstate *st);
int hb_mod_server_init(PyObject *m, hb_modstate *st);
int hb_mod_engine_init(PyObject *m, hb_modstate *st);
int hb_mod_client_init(PyObject *m, hb_modstate *st);
int hb_mod_stream_init(PyObject *m, hb_modstate *st); /* client_stream.c */
int hb_mod_response_init(PyObject *m, hb_modstate *st);
int hb_mod_request_init(PyObject *m, hb_modstate *st);
int hb_mod_measure_init(PyObject *m, hb_modstate *st);
int hb_mod_calibrate_init(PyObject *m, hb_modstate *st);

/* hist.c (hist owner): a new httpbench.Histogram holding a copy of the core
 * histogram h (engine/measure results), or NULL with an exception set. */
PyObject *hb_py_hist_from_core(hb_modstate *st, const hb_hist *h);
/* hist.c: the core histogram inside a Histogram object (borrowed, valid while
 * obj lives), or NULL with TypeError when obj is not a Histogram. */
const hb_hist *hb_py_hist_core(hb_modstate *st, PyObject *obj);

#endif
