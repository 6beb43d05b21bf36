/* hb_tls.c - client/server SSL_CTX setup, the generated test CA and server
 * certificate, ALPN and the one-slot client session cache. */
#include "net/hb_tls.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "net/hb_net_int.h"

struct hb_tls_ctx {
    SSL_CTX *ctx;
    int is_server;
    int insecure;
    int session_resumption;
    pthread_mutex_t lock;   /* guards session */
    SSL_SESSION *session;   /* client: most recent resumable session */
    uintptr_t session_host; /* hash of the host it was made for */
    char *cert_pem;         /* server: the trust anchor's PEM (generated CA or cert_file's) */
    size_t cert_pem_len;
};

static const unsigned char ALPN_HTTP11[] = "\x08http/1.1";
static const unsigned char ALPN_H2_HTTP11[] = "\x02h2\x08http/1.1"; /* server preference */

int hb__tls_fail(char *err, int rc, const char *prefix)
{
    unsigned long e = ERR_get_error();
    char reason[160] = "";
    if (e) ERR_error_string_n(e, reason, sizeof reason);
    ERR_clear_error();
    return hb_fail(err, rc, "%s%s%s", prefix, reason[0] ? ": " : "", reason[0] ? reason : "");
}

void hb_tls_client_opts_init(hb_tls_client_opts *o)
{
    memset(o, 0, sizeof *o);
    o->session_resumption = 1;
}

void hb_tls_server_opts_init(hb_tls_server_opts *o)
{
    memset(o, 0, sizeof *o);
    o->session_resumption = 1;
}

static hb_tls_ctx *ctx_alloc(const SSL_METHOD *m, char *err)
{
    hb_tls_ctx *c = calloc(1, sizeof *c);
    if (!c) {
        hb_fail(err, HB_E_NOMEM, "out of memory");
        return NULL;
    }
    c->ctx = SSL_CTX_new(m);
    if (!c->ctx) {
        hb__tls_fail(err, HB_E_TLS, "SSL_CTX_new");
        free(c);
        return NULL;
    }
    pthread_mutex_init(&c->lock, NULL);
    SSL_CTX_set_app_data(c->ctx, c);
    /* Partial writes + moving buffers let hb_sock retry writes from a
     * caller's iovec; unexpected EOF is an EOF, as HTTP clients treat it. */
    SSL_CTX_set_mode(c->ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    SSL_CTX_set_options(c->ctx, SSL_OP_IGNORE_UNEXPECTED_EOF | SSL_OP_NO_RENEGOTIATION);
    return c;
}

static int set_versions(hb_tls_ctx *c, int minv, int maxv, char *err)
{
    if (!SSL_CTX_set_min_proto_version(c->ctx, minv ? minv : TLS1_2_VERSION) ||
        !SSL_CTX_set_max_proto_version(c->ctx, maxv ? maxv : TLS1_3_VERSION))
        return hb_fail(err, HB_E_INVALID, "unsupported TLS version range 0x%x..0x%x", minv, maxv);
    return 0;
}

void hb_tls_ctx_free(hb_tls_ctx *c)
{
    if (!c) return;
    if (c->session) SSL_SESSION_free(c->session);
    SSL_CTX_free(c->ctx);
    free(c->cert_pem);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

/* ---- client ---- */

/* OpenSSL hands us each new session (after the handshake for TLS 1.2, with
 * each NewSessionTicket for TLS 1.3); keep a copy of the latest. A copy,
 * because SSL_free without close_notify marks the connection's own session
 * not resumable. */
static int on_new_session(SSL *ssl, SSL_SESSION *orig)
{
    hb_tls_ctx *c = SSL_CTX_get_app_data(SSL_get_SSL_CTX(ssl));
    if (!c || !c->session_resumption) return 0;
    SSL_SESSION *sess = SSL_SESSION_dup(orig);
    if (!sess) {
        ERR_clear_error();
        return 0;
    }
    pthread_mutex_lock(&c->lock);
    SSL_SESSION *old = c->session;
    c->session = sess;
    c->session_host = (uintptr_t)SSL_get_app_data(ssl);
    pthread_mutex_unlock(&c->lock);
    if (old) SSL_SESSION_free(old);
    return 0; /* we did not keep orig's reference */
}

static int load_ca_pem(hb_tls_ctx *c, const char *pem, char *err)
{
    BIO *b = BIO_new_mem_buf(pem, -1);
    if (!b) return hb__tls_fail(err, HB_E_NOMEM, "BIO_new_mem_buf");
    X509_STORE *store = SSL_CTX_get_cert_store(c->ctx);
    int n = 0;
    X509 *x;
    while ((x = PEM_read_bio_X509(b, NULL, NULL, NULL)) != NULL) {
        if (!X509_STORE_add_cert(store, x)) {
            X509_free(x);
            BIO_free(b);
            return hb__tls_fail(err, HB_E_TLS, "X509_STORE_add_cert");
        }
        X509_free(x);
        n++;
    }
    ERR_clear_error(); /* the loop ends with a "no start line" error */
    BIO_free(b);
    if (n == 0) return hb_fail(err, HB_E_INVALID, "ca_pem contains no PEM certificate");
    return 0;
}

int hb_tls_client_ctx_new(hb_tls_ctx **out, const hb_tls_client_opts *o, char *err)
{
    hb_tls_client_opts defaults;
    if (!o) {
        hb_tls_client_opts_init(&defaults);
        o = &defaults;
    }
    *out = NULL;
    hb_tls_ctx *c = ctx_alloc(TLS_client_method(), err);
    if (!c) return HB_E_TLS;
    int rc = set_versions(c, o->min_version, o->max_version, err);
    if (rc < 0) goto fail;
    c->insecure = o->insecure;
    c->session_resumption = o->session_resumption;
    if (o->insecure) {
        SSL_CTX_set_verify(c->ctx, SSL_VERIFY_NONE, NULL);
    } else {
        SSL_CTX_set_verify(c->ctx, SSL_VERIFY_PEER, NULL);
        if (o->ca_file) {
            if (access(o->ca_file, R_OK) != 0) {
                rc = hb_fail(err, HB_E_INVALID, "cannot read CA file %s: %s", o->ca_file,
                             strerror(errno));
                goto fail;
            }
            if (!SSL_CTX_load_verify_locations(c->ctx, o->ca_file, NULL)) {
                rc = hb__tls_fail(err, HB_E_TLS, "loading CA file");
                goto fail;
            }
        }
        if (o->ca_pem && (rc = load_ca_pem(c, o->ca_pem, err)) < 0) goto fail;
        if (!o->ca_file && !o->ca_pem && !SSL_CTX_set_default_verify_paths(c->ctx)) {
            rc = hb__tls_fail(err, HB_E_TLS, "loading system CAs");
            goto fail;
        }
    }
    const char *alpn = o->alpn ? o->alpn : "http/1.1";
    if (alpn[0]) {
        /* A comma-separated list ("h2,http/1.1") in preference order. */
        unsigned char wire[512];
        size_t w = 0;
        for (const char *p = alpn;;) {
            const char *e = strchr(p, ',');
            size_t n = e ? (size_t)(e - p) : strlen(p);
            if (n == 0 || n > 255 || w + 1 + n > sizeof wire) {
                rc = hb_fail(err, HB_E_INVALID, "invalid ALPN list '%.100s'", alpn);
                goto fail;
            }
            wire[w++] = (unsigned char)n;
            memcpy(wire + w, p, n);
            w += n;
            if (!e) break;
            p = e + 1;
        }
        if (SSL_CTX_set_alpn_protos(c->ctx, wire, (unsigned)w) != 0) {
            rc = hb__tls_fail(err, HB_E_TLS, "SSL_CTX_set_alpn_protos");
            goto fail;
        }
    }
    if (o->session_resumption) {
        SSL_CTX_set_session_cache_mode(c->ctx,
                                       SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
        SSL_CTX_sess_set_new_cb(c->ctx, on_new_session);
    } else {
        SSL_CTX_set_session_cache_mode(c->ctx, SSL_SESS_CACHE_OFF);
        SSL_CTX_set_options(c->ctx, SSL_OP_NO_TICKET);
    }
    *out = c;
    return 0;
fail:
    hb_tls_ctx_free(c);
    return rc;
}

static uintptr_t tls_host_key(const char *host)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (const char *p = host ? host : ""; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ull;
    return (uintptr_t)(h | 1); /* never 0 */
}

int hb__tls_ctx_apply_client(hb_tls_ctx *c, SSL *ssl, const char *host)
{
    /* The host's key rides in the SSL's app data so on_new_session can tag
     * the session: a session is only offered again to the same host, since
     * a resumed handshake skips certificate verification. */
    uintptr_t key = tls_host_key(host);
    SSL_set_app_data(ssl, (void *)key);
    if (!c->session_resumption) return 0;
    pthread_mutex_lock(&c->lock);
    int ok = 1;
    if (c->session && c->session_host == key && SSL_SESSION_is_resumable(c->session))
        ok = SSL_set_session(ssl, c->session);
    pthread_mutex_unlock(&c->lock);
    if (!ok) ERR_clear_error(); /* not fatal: a full handshake follows */
    return 0;
}

/* ---- server ---- */

static int alpn_select(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                       const unsigned char *in, unsigned int inlen, void *arg)
{
    (void)ssl;
    const unsigned char *ours = arg ? ALPN_H2_HTTP11 : ALPN_HTTP11;
    unsigned ours_len = arg ? sizeof ALPN_H2_HTTP11 - 1 : sizeof ALPN_HTTP11 - 1;
    unsigned char *sel = NULL;
    if (SSL_select_next_proto(&sel, outlen, ours, ours_len, in, inlen) != OPENSSL_NPN_NEGOTIATED)
        return SSL_TLSEXT_ERR_NOACK; /* nothing in common: no ALPN, the first bytes decide */
    *out = sel;
    return SSL_TLSEXT_ERR_OK;
}

/* issuer: the certificate whose key signs x (x itself when self-signed). */
static int add_ext(X509 *x, X509 *issuer, int nid, const char *value)
{
    X509V3_CTX v3;
    X509V3_set_ctx_nodb(&v3);
    X509V3_set_ctx(&v3, issuer, x, NULL, NULL, 0);
    X509_EXTENSION *e = X509V3_EXT_conf_nid(NULL, &v3, nid, value);
    if (!e) return 0;
    int ok = X509_add_ext(x, e, -1);
    X509_EXTENSION_free(e);
    return ok;
}

/* A fresh P-256 key and an unsigned certificate for it: random serial,
 * valid from now-1h for 30 days, subject O=httpbench, CN=cn. */
static int new_cert(const char *cn, EVP_PKEY **pkey_out, X509 **x_out)
{
    EVP_PKEY *pkey = EVP_EC_gen("P-256");
    X509 *x = pkey ? X509_new() : NULL;
    unsigned char serial[16];
    if (!x || RAND_bytes(serial, sizeof serial) != 1) goto fail;
    serial[0] &= 0x7f; /* positive */
    BIGNUM *bn = BN_bin2bn(serial, sizeof serial, NULL);
    if (!bn) goto fail;
    ASN1_INTEGER *sn = BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x));
    BN_free(bn);
    if (!sn || !X509_set_version(x, 2) || !X509_gmtime_adj(X509_getm_notBefore(x), -3600) ||
        !X509_gmtime_adj(X509_getm_notAfter(x), 30L * 24 * 3600) || !X509_set_pubkey(x, pkey))
        goto fail;
    X509_NAME *name = X509_get_subject_name(x);
    if (!X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC, (const unsigned char *)"httpbench", -1,
                                    -1, 0) ||
        !X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1, -1, 0))
        goto fail;
    *pkey_out = pkey;
    *x_out = x;
    return 0;
fail:
    X509_free(x);
    EVP_PKEY_free(pkey);
    return HB_E_TLS;
}

/* A CA and a leaf it signed, both P-256. A separate CA because WebPKI
 * verifiers (rustls: reqwest-based clients) refuse a CA certificate as the
 * server's own (CaUsedAsEndEntity); extensions are the ones strict verifiers
 * (Python 3.13's VERIFY_X509_STRICT) insist on: key usage, SKI/AKI, SAN. */
static int make_ca_and_leaf(EVP_PKEY **leaf_key, X509 **leaf_out, X509 **ca_out, char *err)
{
    EVP_PKEY *ca_key = NULL, *key = NULL;
    X509 *ca = NULL, *x = NULL;
    if (new_cert("httpbench test CA", &ca_key, &ca) < 0 || new_cert("localhost", &key, &x) < 0)
        goto fail;
    if (!X509_set_issuer_name(ca, X509_get_subject_name(ca)) ||
        !add_ext(ca, ca, NID_basic_constraints, "critical,CA:TRUE,pathlen:0") ||
        !add_ext(ca, ca, NID_key_usage, "critical,keyCertSign,cRLSign") ||
        !add_ext(ca, ca, NID_subject_key_identifier, "hash") ||
        !add_ext(ca, ca, NID_authority_key_identifier, "keyid:always") ||
        !X509_sign(ca, ca_key, EVP_sha256()))
        goto fail;
    if (!X509_set_issuer_name(x, X509_get_subject_name(ca)) ||
        !add_ext(x, ca, NID_basic_constraints, "critical,CA:FALSE") ||
        !add_ext(x, ca, NID_key_usage, "critical,digitalSignature") ||
        !add_ext(x, ca, NID_ext_key_usage, "serverAuth") ||
        !add_ext(x, ca, NID_subject_key_identifier, "hash") ||
        !add_ext(x, ca, NID_authority_key_identifier, "keyid:always") ||
        !add_ext(x, ca, NID_subject_alt_name, "DNS:localhost,IP:127.0.0.1,IP:::1") ||
        !X509_sign(x, ca_key, EVP_sha256()))
        goto fail;
    EVP_PKEY_free(ca_key);
    *leaf_key = key;
    *leaf_out = x;
    *ca_out = ca;
    return 0;
fail:
    X509_free(ca);
    X509_free(x);
    EVP_PKEY_free(ca_key);
    EVP_PKEY_free(key);
    return hb__tls_fail(err, HB_E_TLS, "generating the test CA and server certificate");
}

static int store_cert_pem(hb_tls_ctx *c, X509 *x, char *err)
{
    BIO *b = BIO_new(BIO_s_mem());
    if (!b) return hb__tls_fail(err, HB_E_NOMEM, "BIO_new");
    if (!PEM_write_bio_X509(b, x)) {
        BIO_free(b);
        return hb__tls_fail(err, HB_E_TLS, "PEM_write_bio_X509");
    }
    char *data;
    long n = BIO_get_mem_data(b, &data);
    c->cert_pem = malloc((size_t)n + 1);
    if (!c->cert_pem) {
        BIO_free(b);
        return hb_fail(err, HB_E_NOMEM, "out of memory");
    }
    memcpy(c->cert_pem, data, (size_t)n);
    c->cert_pem[n] = 0;
    c->cert_pem_len = (size_t)n;
    BIO_free(b);
    return 0;
}

int hb_tls_server_ctx_new(hb_tls_ctx **out, const hb_tls_server_opts *o, char *err)
{
    hb_tls_server_opts defaults;
    if (!o) {
        hb_tls_server_opts_init(&defaults);
        o = &defaults;
    }
    *out = NULL;
    hb_tls_ctx *c = ctx_alloc(TLS_server_method(), err);
    if (!c) return HB_E_TLS;
    X509 *anchor = NULL; /* the generated CA: what clients trust */
    c->is_server = 1;
    c->session_resumption = o->session_resumption;
    int rc = set_versions(c, o->min_version, o->max_version, err);
    if (rc < 0) goto fail;
    if (o->cert_file) {
        const char *key = o->key_file ? o->key_file : o->cert_file;
        if (access(o->cert_file, R_OK) != 0 || access(key, R_OK) != 0) {
            rc = hb_fail(err, HB_E_INVALID, "cannot read certificate/key file %s / %s: %s",
                         o->cert_file, key, strerror(errno));
            goto fail;
        }
        if (SSL_CTX_use_certificate_chain_file(c->ctx, o->cert_file) != 1) {
            rc = hb__tls_fail(err, HB_E_TLS, "loading certificate");
            goto fail;
        }
        if (SSL_CTX_use_PrivateKey_file(c->ctx, key, SSL_FILETYPE_PEM) != 1) {
            rc = hb__tls_fail(err, HB_E_TLS, "loading private key");
            goto fail;
        }
    } else {
        EVP_PKEY *pkey = NULL;
        X509 *x = NULL;
        if ((rc = make_ca_and_leaf(&pkey, &x, &anchor, err)) < 0) goto fail;
        int ok =
            SSL_CTX_use_certificate(c->ctx, x) == 1 && SSL_CTX_use_PrivateKey(c->ctx, pkey) == 1;
        EVP_PKEY_free(pkey);
        X509_free(x);
        if (!ok) {
            rc = hb__tls_fail(err, HB_E_TLS, "installing generated certificate");
            goto fail;
        }
    }
    if (SSL_CTX_check_private_key(c->ctx) != 1) {
        rc = hb__tls_fail(err, HB_E_TLS, "certificate and private key do not match");
        goto fail;
    }
    rc = store_cert_pem(c, anchor ? anchor : SSL_CTX_get0_certificate(c->ctx), err);
    X509_free(anchor);
    anchor = NULL;
    if (rc < 0) goto fail;
    SSL_CTX_set_alpn_select_cb(c->ctx, alpn_select, o->alpn_h2 ? (void *)ALPN_H2_HTTP11 : NULL);
    static const unsigned char sid_ctx[] = "httpbench";
    SSL_CTX_set_session_id_context(c->ctx, sid_ctx, sizeof sid_ctx - 1);
    if (o->session_resumption) {
        SSL_CTX_set_session_cache_mode(c->ctx, SSL_SESS_CACHE_SERVER);
    } else {
        SSL_CTX_set_session_cache_mode(c->ctx, SSL_SESS_CACHE_OFF);
        SSL_CTX_set_options(c->ctx, SSL_OP_NO_TICKET);
        SSL_CTX_set_num_tickets(c->ctx, 0);
    }
    *out = c;
    return 0;
fail:
    X509_free(anchor);
    hb_tls_ctx_free(c);
    return rc;
}

const char *hb_tls_ctx_cert_pem(const hb_tls_ctx *c, size_t *len)
{
    if (len) *len = c->cert_pem ? c->cert_pem_len : 0;
    return c->cert_pem;
}

int hb_tls_ctx_is_server(const hb_tls_ctx *c)
{
    return c->is_server;
}
int hb_tls_ctx_insecure(const hb_tls_ctx *c)
{
    return c->insecure;
}
struct ssl_ctx_st *hb__tls_ctx_ssl(hb_tls_ctx *c)
{
    return c->ctx;
}

/* The PEM texts of a BIO's contents, malloc'ed and NUL-terminated. */
static char *bio_text(BIO *b, size_t *len)
{
    char *data;
    long n = BIO_get_mem_data(b, &data);
    char *out = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (!out) return NULL;
    memcpy(out, data, (size_t)n);
    out[n] = 0;
    *len = (size_t)n;
    return out;
}

int hb_tls_server_pems(hb_tls_ctx *c, char **cert, size_t *cert_len, char **key, size_t *key_len,
                       char *err)
{
    *cert = *key = NULL;
    X509 *x = SSL_CTX_get0_certificate(c->ctx);
    EVP_PKEY *k = SSL_CTX_get0_privatekey(c->ctx);
    STACK_OF(X509) *chain = NULL;
    if (!x || !k) return hb_fail(err, HB_E_INVALID, "the TLS context has no certificate");
    (void)SSL_CTX_get0_chain_certs(c->ctx, &chain);
    BIO *cb = BIO_new(BIO_s_mem()), *kb = BIO_new(BIO_s_mem());
    int ok = cb && kb && PEM_write_bio_X509(cb, x) == 1 &&
             PEM_write_bio_PrivateKey(kb, k, NULL, NULL, 0, NULL, NULL) == 1;
    for (int i = 0; ok && chain && i < sk_X509_num(chain); i++)
        ok = PEM_write_bio_X509(cb, sk_X509_value(chain, i)) == 1;
    int rc = 0;
    if (!ok) {
        rc = hb__tls_fail(err, HB_E_TLS, "writing the certificate and key as PEM");
    } else if (!(*cert = bio_text(cb, cert_len)) || !(*key = bio_text(kb, key_len))) {
        free(*cert);
        *cert = NULL;
        rc = hb_fail(err, HB_E_NOMEM, "out of memory");
    }
    BIO_free(cb);
    BIO_free(kb);
    return rc;
}
