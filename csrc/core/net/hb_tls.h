/* hb_tls.h - OpenSSL client and server contexts for hb_sock.
 *
 * A hb_tls_ctx wraps one SSL_CTX plus what the sockets need from it (insecure
 * flag, the client session cache, the server's certificate PEM). A context is
 * created once (off the hot path), is shared read-only by any number of
 * threads and sockets, and must outlive them. Errors: HB_E_TLS (OpenSSL
 * reason in err), HB_E_INVALID (bad options/files), HB_E_NOMEM.
 *
 * Client session resumption: when on, the context keeps the most recent
 * session it was given (TLS 1.2 ticket/ID or TLS 1.3 ticket; one slot, which
 * fits a benchmark's single target) and offers it on the next
 * hb_sock_tls_client to the same host; guarded by a mutex, touched once per
 * connection.
 */
#ifndef HB_TLS_H
#define HB_TLS_H

#include <stddef.h>
#include <stdint.h>

#include "base/hb_common.h"

typedef struct hb_tls_ctx hb_tls_ctx;

/* TLS protocol versions for min/max (0 = default: 1.2 .. 1.3). */
#define HB_TLS_1_2 0x0303
#define HB_TLS_1_3 0x0304

typedef struct hb_tls_client_opts {
    const char *ca_file;    /* PEM CA bundle path; NULL and no ca_pem: system CAs */
    const char *ca_pem;     /* PEM text of trusted CA(s) / a self-signed cert */
    int insecure;           /* 1: no certificate or host verification */
    int session_resumption; /* default 1 */
    const char *alpn;       /* default "http/1.1"; a list "h2,http/1.1"; "" = send no ALPN */
    int min_version, max_version;
} hb_tls_client_opts;

typedef struct hb_tls_server_opts {
    const char *cert_file;  /* PEM certificate (chain); NULL: generate a self-signed */
    const char *key_file;   /* PEM private key; NULL with cert_file: key in cert_file */
    int session_resumption; /* default 1: session cache + tickets; 0: full handshakes */
    int min_version, max_version;
    int alpn_h2; /* 1: ALPN selects h2 when the client offers it (else http/1.1) */
} hb_tls_server_opts;

/* Fill opts with the defaults (verify on, resumption on, ALPN http/1.1). */
void hb_tls_client_opts_init(hb_tls_client_opts *o);
void hb_tls_server_opts_init(hb_tls_server_opts *o);

/* o may be NULL for the defaults. *out is set on success (returns 0). */
int hb_tls_client_ctx_new(hb_tls_ctx **out, const hb_tls_client_opts *o, char *err);
/* Without cert_file: in-memory ECDSA P-256 keys, a test CA (CA:TRUE) and the
 * server's certificate signed by it (CA:FALSE, CN=localhost, SAN DNS:localhost,
 * IP:127.0.0.1, IP:::1), valid from now-1h for 30 days; clients trust the CA
 * (hb_tls_ctx_cert_pem). ALPN: selects h2 (with alpn_h2) or http/1.1 when the client offers it. */
int hb_tls_server_ctx_new(hb_tls_ctx **out, const hb_tls_server_opts *o, char *err);
void hb_tls_ctx_free(hb_tls_ctx *c);

/* PEM text of what a client trusts to verify this server (NUL-terminated,
 * owned by ctx): the generated CA, or cert_file's first certificate; NULL for
 * client contexts. */
const char *hb_tls_ctx_cert_pem(const hb_tls_ctx *c, size_t *len);

/* 1 for a server context; 1 when certificate and host checks are off. */
int hb_tls_ctx_is_server(const hb_tls_ctx *c);
int hb_tls_ctx_insecure(const hb_tls_ctx *c);
/* A server context's certificate (with its chain) and private key as PEM
 * texts (malloc'ed, NUL-terminated; the caller frees both), for the HTTP/3
 * side's GnuTLS. 0, HB_E_TLS or HB_E_NOMEM. */
int hb_tls_server_pems(hb_tls_ctx *c, char **cert, size_t *cert_len, char **key, size_t *key_len,
                       char *err);

#endif
