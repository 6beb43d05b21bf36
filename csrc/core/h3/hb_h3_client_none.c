/* hb_h3_client_none.c - hb_h3_client.h in a build without ngtcp2
 * and GnuTLS (HB_NO_H3): init and connect fail with HB_E_UNSUPPORTED. */
#include "h3/hb_h3_client.h"

#ifdef HB_NO_H3

#include <string.h>

int hb_h3_available(void)
{
    return 0;
}

int hb_h3_tls_new(hb_h3_tls **out, const hb_h3_tls_opts *o, char *err)
{
    (void)o;
    *out = NULL;
    return hb_fail(err, HB_E_UNSUPPORTED, "%s", HB_H3_MISSING);
}

void hb_h3_tls_free(hb_h3_tls *t)
{
    (void)t;
}

int hb_h3_client_init(hb_h3_client *c, const hb_h3_settings *s, char *err)
{
    (void)s;
    memset(c, 0, sizeof *c);
    c->fd = -1;
    return hb_fail(err, HB_E_UNSUPPORTED, "%s", HB_H3_MISSING);
}

void hb_h3_client_free(hb_h3_client *c)
{
    (void)c;
}

int hb_h3_client_connect(hb_h3_client *c, const hb_h3_tls *tls, const struct sockaddr *addr,
                         socklen_t alen, const char *sni, const hb_h3_callbacks *cb, void *ud,
                         uint64_t now)
{
    (void)tls;
    (void)addr;
    (void)alen;
    (void)sni;
    (void)cb;
    (void)ud;
    (void)now;
    return hb_fail(c->err, HB_E_UNSUPPORTED, "%s", HB_H3_MISSING);
}

void hb_h3_client_close(hb_h3_client *c)
{
    (void)c;
}

int hb_h3_client_read(hb_h3_client *c, uint64_t now)
{
    (void)c;
    (void)now;
    return HB_E_UNSUPPORTED;
}

int hb_h3_client_write(hb_h3_client *c, uint64_t now)
{
    (void)c;
    (void)now;
    return HB_E_UNSUPPORTED;
}

int hb_h3_client_writable(hb_h3_client *c, uint64_t now)
{
    (void)c;
    (void)now;
    return HB_E_UNSUPPORTED;
}

int hb_h3_client_expiry(hb_h3_client *c, uint64_t now)
{
    (void)c;
    (void)now;
    return HB_E_UNSUPPORTED;
}

uint64_t hb_h3_client_next_expiry(const hb_h3_client *c)
{
    (void)c;
    return UINT64_MAX;
}

void hb_h3_client_describe(const hb_h3_client *c, char *buf, size_t len)
{
    (void)c;
    if (len) buf[0] = 0;
}

uint32_t hb_h3_client_room(const hb_h3_client *c)
{
    (void)c;
    return 0;
}

uint64_t hb_h3_client_peer_streams(const hb_h3_client *c)
{
    (void)c;
    return 0;
}

int64_t hb_h3_client_submit(hb_h3_client *c, const hb_header *fields, size_t nfields, int with_body,
                            void *sud)
{
    (void)c;
    (void)fields;
    (void)nfields;
    (void)with_body;
    (void)sud;
    return HB_E_UNSUPPORTED;
}

int64_t hb_h3_client_submit_body(hb_h3_client *c, const hb_header *fields, size_t nfields,
                                 const void *body, size_t body_len, void *sud)
{
    (void)c;
    (void)fields;
    (void)nfields;
    (void)body;
    (void)body_len;
    (void)sud;
    return HB_E_UNSUPPORTED;
}

#endif
