/* hb_net_int.h - hb__ internals shared by net/'s files (hb_sock.c, hb_tls.c)
 * and nothing else: OpenSSL stays inside this folder. */
#ifndef HB_NET_INT_H
#define HB_NET_INT_H

struct hb_tls_ctx; /* hb_tls.h */
struct ssl_st;     /* OpenSSL SSL */
struct ssl_ctx_st; /* OpenSSL SSL_CTX */

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
