/* hb_client_mux.h - what the native client's multiplexed protocols share:
 * the exchange of a batch (hb_mx), run by HTTP/2 (hb_client_h2.h) and HTTP/3
 * (hb_client_h3.h) alike, and its response header records.
 *
 * Per exchange the caller owns everything: the header fields (pseudo-headers
 * first, as hb_request.h builds them), the body, the sink, and a head buffer
 * where the response's header fields are kept as decoded (records read back
 * with hb_mx_field_next; the status is x->status). Nothing here allocates.
 *
 * x->rc after a run: 0, or the exchange's error (a reset or refused stream:
 * HB_E_H2 / HB_E_H3; HB_E_TOO_LARGE over max_body or the head buffer; -errno
 * writing a file; or the batch's connection error).
 */
#ifndef HB_CLIENT_MUX_H
#define HB_CLIENT_MUX_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "base/hb_common.h"
#include "client/hb_client.h"
#include "http/hb_parse.h"
#include "http/hb_request.h"

/* A head buffer holds one record per response header field: the name's and
 * the value's length (16 bits each, host order) then the name and value
 * bytes, as the protocol decoded them (names lowercase, validated). */
#define HB_MX_FIELD_HDR 4
#define HB_MX_FIELD_MAX 0xffffu /* longest name or value a record holds */

/* The field at *off of buf[0..len) into f (pointers into buf), *off moved past
 * it: 1, or 0 at the end (or on a truncated record). */
static inline int hb_mx_field_next(const char *buf, size_t len, size_t *off, hb_header *f)
{
    uint16_t nl, vl;
    if (len - *off < HB_MX_FIELD_HDR || *off > len) return 0;
    memcpy(&nl, buf + *off, 2);
    memcpy(&vl, buf + *off + 2, 2);
    if (len - *off - HB_MX_FIELD_HDR < (size_t)nl + vl) return 0;
    f->name = buf + *off + HB_MX_FIELD_HDR;
    f->name_len = nl;
    f->value = f->name + nl;
    f->value_len = vl;
    *off += HB_MX_FIELD_HDR + (size_t)nl + vl;
    return 1;
}

typedef struct hb_mx {
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
    int reused; /* sent on a connection that served an earlier batch */
    int end;    /* how the stream ended: the protocol's HB_H2_END_* / HB_H3_END_* (0: complete) */
    /* private */
    hb_body_src b; /* the body's send cursor */
    int state;     /* 0 not submitted, 1 open, 2 ended */
} hb_mx;

#endif
