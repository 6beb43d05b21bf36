/* hb_client_h2.h - blocking HTTP/2 for the native client: one session per
 * origin on a pooled connection, a batch of requests multiplexed on it.
 *
 * An hb_h2conn holds a fresh connection taken from the pool (connected, TLS
 * done with ALPN "h2") and its hb_h2_client session for as long as it is usable;
 * it is never shared with HTTP/1.1 exchanges. hb_client_h2_run submits every
 * exchange of a batch (as many at once as the peer's SETTINGS allow, the
 * rest as streams end), then reads and writes until each has ended, waiting
 * with poll against one deadline for the whole batch. A session that the
 * server closed while idle (EOF or GOAWAY before any response byte of the
 * batch) is replaced once by a new connection and the batch sent again;
 * streams a GOAWAY left unprocessed (above its last stream id) are sent again
 * on a new connection, as long as each connection answers some of them.
 *
 * Per exchange the caller owns everything: the header fields (from
 * hb_build_h2_fields), the body, the sink, and a head buffer where the
 * response's header fields are kept as decoded (records read back with
 * hb_h2x_field_next; the status is x->status). No allocation here: the
 * session's buffers are hb_h2_client's, made once per connection.
 *
 * Results: hb_client_h2_run returns 0 when every exchange ended (each x->rc
 * says how: 0 or a per-stream error: HB_E_H2 for a reset or refused stream,
 * HB_E_TOO_LARGE over max_body or the head buffer, -errno writing a file),
 * or a connection error for the batch (HB_E_NO_H2 when the server does not
 * speak HTTP/2, HB_E_H2, HB_E_CLOSED, HB_E_TIMEOUT, HB_E_CONNECT / -errno,
 * HB_E_TLS*, HB_E_INTERRUPTED), which every exchange not yet ended also
 * gets in x->rc. After a connection error the session is gone (the next
 * batch connects again).
 *
 * Thread safety: none; the caller serializes the use of one hb_h2conn.
 */
#ifndef HB_CLIENT_H2_H
#define HB_CLIENT_H2_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "client/hb_client.h"
#include "base/hb_common.h"
#include "h2/hb_h2_client.h"
#include "client/hb_pool.h"

/* A head buffer holds one record per response header field: the name's and
 * the value's length (16 bits each, host order) then the name and value
 * bytes, as HPACK decoded them (names lowercase, validated by hb_h2_client). */
#define HB_H2X_FIELD_HDR 4
#define HB_H2X_FIELD_MAX 0xffffu /* longest name or value a record holds */

/* The field at *off of buf[0..len) into f (pointers into buf), *off moved past
 * it: 1, or 0 at the end (or on a truncated record). */
static inline int hb_h2x_field_next(const char *buf, size_t len, size_t *off, hb_header *f)
{
    uint16_t nl, vl;
    if (len - *off < HB_H2X_FIELD_HDR || *off > len) return 0;
    memcpy(&nl, buf + *off, 2);
    memcpy(&vl, buf + *off + 2, 2);
    if (len - *off - HB_H2X_FIELD_HDR < (size_t)nl + vl) return 0;
    f->name = buf + *off + HB_H2X_FIELD_HDR;
    f->name_len = nl;
    f->value = f->name + nl;
    f->value_len = vl;
    *off += HB_H2X_FIELD_HDR + (size_t)nl + vl;
    return 1;
}

typedef struct hb_h2x {
    /* in */
    const hb_header *fields;
    size_t nfields;
    const char *body; /* request body (NULL: none) */
    size_t body_len;
    hb_sink *sink;     /* response body: memory (grow) or fd */
    uint64_t max_body; /* 0: no limit */
    char *head;        /* caller's buffer for the response's header fields */
    size_t head_cap;   /* > 0; a header block that does not fit is HB_E_TOO_LARGE */
    /* out */
    size_t head_len; /* bytes of field records in head */
    int status;
    int rc; /* 0 or the exchange's error (see above) */
    char err[HB_ERR_LEN];
    uint64_t body_bytes;
    uint64_t content_length; /* UINT64_MAX: not given */
    uint64_t t_start, t_first_byte, t_done;
    int reused; /* sent on a session that served an earlier batch */
    int end;    /* how the stream ended (HB_H2_END_*) */
    /* private */
    hb_h2_body b;
    int state; /* 0 not submitted, 1 open, 2 ended */
} hb_h2x;

typedef struct hb_h2conn {
    hb_conn *conn; /* NULL: no session */
    hb_h2_client cli;
    int live;
    uint64_t batches;                 /* batches served by this session */
    uint64_t t_connected, t_tls_done; /* of the session's connect (absolute ns) */
} hb_h2conn;

/* A zeroed hb_h2conn is a valid "no session" value. */
static inline void hb_h2conn_init(hb_h2conn *hc)
{
    hc->conn = NULL;
    hc->live = 0;
    hc->batches = 0;
    hc->t_connected = hc->t_tls_done = 0;
}

/* Run the batch xs[0..n) to t over hc (connecting first when it has no
 * session). deadline_ns / connect_deadline_ns are absolute hb_now_ns. */
int hb_client_h2_run(hb_pool *p, hb_h2conn *hc, const hb_target *t, hb_h2x *xs, size_t n,
                     uint64_t deadline_ns, uint64_t connect_deadline_ns, char *err);

/* A response header field / body bytes into x (head records, sink, max_body);
 * shared with the HTTP/3 glue. Failures go to x->rc. */
void hb__h2x_header(hb_h2x *x, const char *name, size_t nl, const char *value, size_t vl);
void hb__h2x_data(hb_h2x *x, const uint8_t *data, size_t len);

/* End the session (GOAWAY, best effort) and give the connection back closed. */
void hb_h2conn_close(hb_pool *p, hb_h2conn *hc);

#endif
