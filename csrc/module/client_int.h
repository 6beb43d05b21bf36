/* client_int.h - httpbench.Client's files and what they share:
 *
 *   client.c          the type: construction, options, close, the method table
 *   client_prep.c     a request's inputs: body sources, TLS context, body sinks,
 *                     max_body, errors named after their request
 *   client_perform.c  one HTTP/1.1 exchange on the pool (and downloads)
 *   client_stream.c   Client.stream(): the body read piece by piece (bytes, events)
 *   client_mux.c      HTTP/2 and HTTP/3 batches: requests multiplexed on one
 *                     connection per origin (hb_mx exchanges)
 *   client_h2.c       HTTP/2: one session per origin
 *   client_h3.c       HTTP/3: one QUIC connection per origin, its TLS trust
 */
#ifndef HB_CLIENT_INT_H
#define HB_CLIENT_INT_H

#include "module.h"

#include <sys/types.h>

#include "client/hb_client.h"
#include "client/hb_client_h2.h"
#include "client/hb_client_h3.h"
#include "http/hb_request.h"
#include "net/hb_tls.h"

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
    int http3;
    PyThread_type_lock mux_lock; /* guards h2, h3 and every session in them */
    struct mxorigin *h3;         /* HTTP/3 connections, one per origin (h3origin) */
    hb_h3_tls *h3tls;            /* their TLS trust, made on first use */
    struct mxorigin *h2;         /* HTTP/2 sessions, one per origin (h2origin) */
    char *mux_scratch;           /* the last batch's field and head buffers, kept for the next */
    size_t mux_scratch_cap;      /* (taken and given back with the GIL held) */
} ClientObject;

/* An origin's entry in a client's list of HTTP/2 or HTTP/3 connections: the
 * first member of h2origin and h3origin. */
typedef struct mxorigin {
    struct mxorigin *next;
    int tls, port;
    size_t host_len;
    char host[HB_POOL_MAX_HOST + 1];
} mxorigin;

/* One HTTP/2 session per (scheme, host, port). */
typedef struct h2origin {
    mxorigin o;
    hb_h2conn hc;
} h2origin;

/* One HTTP/3 connection per (host, port). */
typedef struct h3origin {
    mxorigin o;
    hb_h3conn hc;
} h3origin;

/* Buffer per HTTP/2 or HTTP/3 exchange for its response header fields (hb_client_mux.h). */
#define MX_HEAD_CAP (16 * 1024)
/* The largest batch scratch a client keeps between batches (256 streams' worth). */
#define MX_SCRATCH_KEEP (256 * (MX_HEAD_CAP + 1024))

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

/* Grow callback context for memory sinks: resize the body bytes, taking the
 * GIL for the moment it needs. */
typedef struct {
    PyObject *obj;
    PyThreadState *ts; /* non-NULL while the GIL is released */
} grow_ctx;

/* An HTTP/1.1 request's inputs (Client.request() and Client.stream()): the
 * URL, the body source and the serialized head. */
typedef struct {
    hb_url up;
    const char *u; /* the URL's text, for errors (valid while the url object lives) */
    Py_ssize_t ulen;
    body_src bs;
    char *head; /* head_stack or a PyMem block */
    size_t head_len;
    char head_stack[HEAD_STACK];
} h1_prep;

/* ---- client_prep.c ---- */

/* body (None, bytes-like, file object or path) into bs; 0, or -1 with an
 * exception (what it got so far released). */
int hb__cl_body_prepare(PyObject *body, body_src *bs);
void hb__cl_body_release(body_src *bs);
/* The client's TLS context, made on first use. 0, or -1 with an exception. */
int hb__cl_ensure_tls(ClientObject *self);
/* hb_sink grow callback for bodies held in bytes (ctx: a grow_ctx). */
int hb__cl_sink_grow(hb_sink *s, size_t need, char *err);
/* Raise rc (hb_raise) naming the request; a wait cut short by a signal runs
 * the Python handlers first. */
void hb__cl_raise(hb_modstate *st, int rc, const char *err, const char *method, size_t mlen,
                  const char *url, Py_ssize_t ulen);
/* Parse url, make the TLS context it needs, take the body and build the head
 * (the headers are copied into it). 0, or -1 with an exception and nothing
 * held. */
int hb__cl_h1_prepare(ClientObject *self, const char *method, size_t mlen, PyObject *url,
                      PyObject *headers, PyObject *body, h1_prep *p);
/* Fill rq for the pool from p (its head and body stay p's), with the client's
 * deadlines from now. */
void hb__cl_h1_request(const ClientObject *self, const h1_prep *p, const char *method, size_t mlen,
                       uint64_t max_body, hb_request *rq);
/* After the body went out: a file object's position moves past it. 0 or -1. */
int hb__cl_h1_sent(const h1_prep *p);
/* Release what hb__cl_h1_prepare took (after it succeeded). */
void hb__cl_h1_release(h1_prep *p);
/* max_body as given: absent keeps dflt, None is no limit (0), else an int >= 1. */
int hb__cl_max_body(PyObject *o, uint64_t dflt, uint64_t *out);

/* ---- client_perform.c ---- */

/* One request: a Response, or NULL with an exception. dl_path: download()'s
 * file (else NULL); max_body_arg: the call's max_body (NULL: the client's). */
PyObject *hb__cl_request(ClientObject *self, const char *method, size_t mlen, PyObject *url,
                         PyObject *headers, PyObject *body, PyObject *dl_path,
                         PyObject *max_body_arg);

/* ---- client_stream.c ---- */

/* Client.stream(): a Stream with the head read, or NULL with an exception.
 * timeout: seconds per read (NULL: the client's timeout); max_line: the SSE bound. */
PyObject *hb__cl_stream(ClientObject *self, const char *method, size_t mlen, PyObject *url,
                        PyObject *headers, PyObject *body, PyObject *timeout, PyObject *max_line);

/* ---- client_h2.c ---- */

/* The origin's session entry (created on first use); mux_lock held. NULL with
 * an exception. */
h2origin *hb__cl_h2_origin(ClientObject *self, const hb_url *u);
/* Close every session (mux_lock held); free_entries: forget the origins too. */
void hb__cl_h2_close_all(ClientObject *self, int free_entries);

/* ---- client_mux.c ---- */

/* u's entry in *list, or a new one of size bytes (zeroed) at its head; NULL
 * with an exception. mux_lock held. */
mxorigin *hb__cl_origin(mxorigin **list, const hb_url *u, size_t size);
/* Take mux_lock, releasing the GIL while waiting for it. */
void hb__cl_mux_lock(ClientObject *self);
/* Run one method on urls[0..n) over HTTP/2 or HTTP/3 (the client's; same
 * origin), multiplexed; a list of Responses in order (as_list) or the one
 * Response. */
PyObject *hb__cl_mux_batch(ClientObject *self, const char *method, size_t mlen,
                           PyObject *const *urls, Py_ssize_t n, PyObject *headers, PyObject *body,
                           PyObject *dl_path, PyObject *max_body_arg, int as_list);

/* ---- client_h3.c ---- */

/* The origin's connection entry (created on first use); mux_lock held. NULL with
 * an exception. */
h3origin *hb__cl_h3_origin(ClientObject *self, const hb_url *u);
/* The client's HTTP/3 TLS trust (ca_file / verify), made on first use; mux_lock held. */
int hb__cl_ensure_h3_tls(ClientObject *self);
/* Close every connection (mux_lock held); free_entries: forget the origins and the
 * TLS trust too. */
void hb__cl_h3_close_all(ClientObject *self, int free_entries);

#endif
