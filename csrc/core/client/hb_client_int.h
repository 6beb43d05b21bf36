/* hb_client_int.h - hb__ internals shared by client/'s files and nothing else. */
#ifndef HB_CLIENT_INT_H
#define HB_CLIENT_INT_H

#include <stddef.h>
#include <stdint.h>

#include "client/hb_client_mux.h"

/* hb_pool.c, used by the client's files: wait until fd is ready for `events`
 * (POLLIN/POLLOUT) or deadline_ns (absolute hb_now_ns): 0, HB_E_TIMEOUT or
 * -errno. EINTR: HB_E_INTERRUPTED when eintr_abort, else the wait resumes. */
int hb__wait_fd(int fd, short events, uint64_t deadline_ns, int eintr_abort);

/* ---- hb_client_mux.c: the batch of a multiplexed protocol (h2, h3) ---- */

/* A batch in progress, seen by the callbacks: the connection's `cur`, whose
 * address is the protocol client's ud (the hb__mx_on_* callbacks). */
typedef struct hb__mx_batch {
    hb_mx *xs;
    size_t n, done;
    int any_byte; /* some response byte of this attempt arrived */
} hb__mx_batch;

/* Every exchange has a head buffer (else HB_E_INVALID naming proto, e.g.
 * "HTTP/2"), then each is reset for a first attempt. */
int hb__mx_start(hb_mx *xs, size_t n, const char *proto, char *err);
/* Clear x's results for an attempt started at now (the body cursor rewound). */
void hb__mx_reset(hb_mx *x, uint64_t now);
/* An attempt on a connection (reused: one that served an earlier batch):
 * b->done counts the exchanges ended before it, which it returns. */
size_t hb__mx_attempt(hb__mx_batch *b, int reused);
/* x fails with rc and msg, unless it failed already. */
void hb__mx_fail(hb_mx *x, int rc, const char *msg);
/* Every exchange not ended yet ends with rc and err's text. */
void hb__mx_fail_open(hb_mx *xs, size_t n, int rc, const char *err);
/* The protocols' callbacks (ud: the address of the connection's hb__mx_batch
 * pointer; sud: the exchange): a response header field, the final status,
 * body bytes. */
void hb__mx_on_header(void *ud, void *sud, const char *name, size_t nl, const char *value,
                      size_t vl);
void hb__mx_on_response(void *ud, void *sud, int status);
void hb__mx_on_data(void *ud, void *sud, const uint8_t *data, size_t len);
/* The stream of sud ended (end: the protocol's HB_*_END_*); its exchange. */
hb_mx *hb__mx_closed(void *ud, void *sud, int end);

#endif
