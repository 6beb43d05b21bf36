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
 * The exchanges are hb_mx (hb_client_mux.h, shared with HTTP/3): the caller
 * owns their fields, body, sink and head buffer. No allocation here: the
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

#include "base/hb_common.h"
#include "client/hb_client.h"
#include "client/hb_client_mux.h"
#include "client/hb_pool.h"
#include "h2/hb_h2_client.h"

typedef struct hb_h2conn {
    hb_conn *conn; /* NULL: no session */
    hb_h2_client cli;
    int live;
    uint64_t batches;                 /* batches served by this session */
    uint64_t t_connected, t_tls_done; /* of the session's connect (absolute ns) */
    struct hb__mx_batch *cur;         /* the batch in progress (callbacks) */
} hb_h2conn;

/* A zeroed hb_h2conn is a valid "no session" value. */
static inline void hb_h2conn_init(hb_h2conn *hc)
{
    hc->conn = NULL;
    hc->live = 0;
    hc->batches = 0;
    hc->t_connected = hc->t_tls_done = 0;
    hc->cur = NULL;
}

/* Run the batch xs[0..n) to t over hc (connecting first when it has no
 * session). deadline_ns / connect_deadline_ns are absolute hb_now_ns. */
int hb_client_h2_run(hb_pool *p, hb_h2conn *hc, const hb_target *t, hb_mx *xs, size_t n,
                     uint64_t deadline_ns, uint64_t connect_deadline_ns, char *err);

/* End the session (GOAWAY, best effort) and give the connection back closed. */
void hb_h2conn_close(hb_pool *p, hb_h2conn *hc);

#endif
