/* hb_h3_server_none.c - the HTTP/3 endpoint of a build without ngtcp2
 * or GnuTLS (HB_NO_H3): no endpoint can be made, so the embedded
 * server never opens a UDP socket and everything else links unchanged. */
#include "h3server/hb_h3_server.h"

#ifdef HB_NO_H3

#include <string.h>

#include "base/hb_common.h"

int hb_h3_server_available(void)
{
    return 0;
}

void hb_h3_server_config_init(hb_h3_server_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->max_streams = 100;
    cfg->idle_timeout_ms = 30000;
    cfg->request_timeout_ms = 10000;
    cfg->max_header_list = 16384;
    cfg->retry_after = 64;
    cfg->max_half_open = 1024;
}

hb_h3_replay *hb_h3_replay_new(void)
{
    return NULL;
}

void hb_h3_replay_free(hb_h3_replay *r)
{
    (void)r;
}

int hb_h3_server_new(hb_h3_server **out, const hb_h3_server_config *cfg, char *err)
{
    (void)cfg;
    *out = NULL;
    return hb_fail(err, HB_E_UNSUPPORTED, "%s", HB_H3_SERVER_MISSING);
}

/* No endpoint ever exists, so the rest only satisfies the linker. */
void hb_h3_server_free(hb_h3_server *s)
{
    (void)s;
}

void hb_h3_server_recv(hb_h3_server *s, const struct sockaddr *local, socklen_t local_len,
                       const struct sockaddr *peer, socklen_t peer_len, const uint8_t *p, size_t n)
{
    (void)s;
    (void)local;
    (void)local_len;
    (void)peer;
    (void)peer_len;
    (void)p;
    (void)n;
}

size_t hb_h3_server_send(hb_h3_server *s, uint8_t *buf, size_t cap, struct sockaddr_storage *peer,
                         socklen_t *peer_len)
{
    (void)s;
    (void)buf;
    (void)cap;
    (void)peer;
    *peer_len = 0;
    return 0;
}

uint64_t hb_h3_server_deadline(hb_h3_server *s)
{
    (void)s;
    return UINT64_MAX;
}

void hb_h3_server_timer(hb_h3_server *s)
{
    (void)s;
}

void hb_h3_server_shutdown(hb_h3_server *s)
{
    (void)s;
}

int hb_h3_server_conns(const hb_h3_server *s)
{
    (void)s;
    return 0;
}

#else
/* ISO C wants a translation unit to declare something. */
typedef int hb__h3_server_none_unused;
#endif
