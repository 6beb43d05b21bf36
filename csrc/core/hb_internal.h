/* hb_internal.h - hb__ cross-file internals of the C core.
 *
 * Declarations shared between a few csrc/core files and nothing else: no
 * public header includes this one, and the bindings never call these. Each
 * section names the files that define and use its functions.
 */
#ifndef HB_INTERNAL_H
#define HB_INTERNAL_H

#include <stdint.h>

/* ---- sock, tls, pool ---- */

struct hb_tls_ctx; /* hb_tls.h */
struct ssl_st;     /* OpenSSL SSL */
struct ssl_ctx_st; /* OpenSSL SSL_CTX */

/* hb_pool.c, used by hb_client.c: wait until fd is ready for `events`
 * (POLLIN/POLLOUT) or deadline_ns (absolute hb_now_ns): 0, HB_E_TIMEOUT or
 * -errno. EINTR: HB_E_INTERRUPTED when eintr_abort, else the wait resumes. */
int hb__wait_fd(int fd, short events, uint64_t deadline_ns, int eintr_abort);

/* hb_tls.c, used by hb_sock.c: the context's SSL_CTX, to create SSL objects
 * from (OpenSSL stays inside hb_sock.c and hb_tls.c). */
struct ssl_ctx_st *hb__tls_ctx_ssl(struct hb_tls_ctx *c);
/* Tag ssl with host (may be NULL) and offer the cached session when it was
 * made for the same host and resumption is on. Always 0. */
int hb__tls_ctx_apply_client(struct hb_tls_ctx *c, struct ssl_st *ssl, const char *host);
/* Drain OpenSSL's thread-local error queue into err ("prefix: reason");
 * returns rc. */
int hb__tls_fail(char *err, int rc, const char *prefix);

#endif
