/* hb_client_h3.h - blocking HTTP/3 for the native client: one QUIC connection
 * per origin (hb_h3_client on its own UDP socket), a batch of requests
 * multiplexed on it.
 *
 * An hb_h3conn holds the connection for as long as it is usable; the first
 * batch connects (the handshake counts against the connect deadline), later
 * ones reuse it. hb_client_h3_run submits every exchange (as many at once as
 * the server's stream limit allows, the rest as streams end), then waits with
 * poll on the socket, the timeout the earlier of the QUIC timer and the
 * batch's deadline. A connection the server closed while idle (idle timeout,
 * CONNECTION_CLOSE, or a GOAWAY before any response byte of the batch) is
 * replaced once by a new one and the batch sent again.
 *
 * The exchanges are hb_mx (hb_client_mux.h, shared with HTTP/2): the caller
 * owns their fields, body, sink and head buffer. At most HB_H3_BODIES
 * requests with a body are in flight at once; the rest wait for a stream to
 * end.
 *
 * Results: 0 when every exchange ended (x->rc each), or a
 * connection error that every exchange not yet ended also gets:
 * HB_E_H3_TIMEOUT (no answer to the handshake), -ECONNREFUSED (closed UDP
 * port), HB_E_TLS_VERIFY (the certificate failed verification),
 * HB_E_H3_HANDSHAKE (other TLS failures: ALPN, alerts), HB_E_H3 / HB_E_H3_CLOSED,
 * HB_E_TIMEOUT (the deadline passed after the handshake), HB_E_UNSUPPORTED
 * in a build without HTTP/3.
 *
 * Thread safety: none; the caller serializes the use of one hb_h3conn.
 */
#ifndef HB_CLIENT_H3_H
#define HB_CLIENT_H3_H

#include <stddef.h>
#include <stdint.h>

#include "client/hb_client.h"
#include "client/hb_client_mux.h"
#include "client/hb_pool.h"
#include "h3/hb_h3_client.h"

typedef struct hb_h3conn {
    hb_h3_client cli;
    int inited;                       /* cli's buffers are allocated */
    int live;                         /* connected (the handshake done) */
    uint64_t batches;                 /* batches served by this connection */
    uint64_t t_connected, t_tls_done; /* of its connect (absolute ns): socket, handshake */
    struct hb__mx_batch *cur;         /* the batch in progress (callbacks) */
} hb_h3conn;

/* A zeroed hb_h3conn is a valid "no connection" value. */
int hb_client_h3_run(hb_h3conn *hc, const hb_h3_tls *tls, const hb_target *t, hb_mx *xs, size_t n,
                     uint64_t deadline_ns, uint64_t connect_deadline_ns, char *err);

/* Close the connection (CONNECTION_CLOSE, best effort); buffers kept. */
void hb_h3conn_close(hb_h3conn *hc);
/* Close and free everything; hc is zeroed. */
void hb_h3conn_free(hb_h3conn *hc);

#endif
