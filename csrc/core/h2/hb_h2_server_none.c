/* hb_h2_server_none.c - the HTTP/2 server session of a build without nghttp2
 * (HB_NO_NGHTTP2): no session can be made, so the embedded server never
 * switches a connection to h2 and everything else links unchanged. */
#include "h2/hb_h2_server.h"

#ifdef HB_NO_NGHTTP2

#include <string.h>

#include "base/hb_common.h"

int hb_h2_server_available(void)
{
    return 0;
}

void hb_h2_server_config_init(hb_h2_server_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->max_concurrent_streams = 100;
    cfg->initial_window_size = 65535;
    cfg->max_frame_size = 16384;
    cfg->max_header_list = 16384;
}

int hb_h2_server_new(hb_h2_server **out, const hb_h2_server_config *cfg, char *err)
{
    (void)cfg;
    *out = NULL;
    return hb_fail(err, HB_E_UNSUPPORTED, "%s", HB_H2_SERVER_MISSING);
}

/* No session ever exists, so the rest only satisfies the linker (and no
 * arena ever reaches a pool). */
void hb_h2_arena_pool_drain(hb_h2_arena_pool *p)
{
    p->free = NULL;
    p->nfree = 0;
}

void hb_h2_server_free(hb_h2_server *s, int peer_left)
{
    (void)s;
    (void)peer_left;
}

int hb_h2_server_recv(hb_h2_server *s, const uint8_t *p, size_t n)
{
    (void)s;
    (void)p;
    (void)n;
    return -1;
}

uint64_t hb_h2_server_frames(const hb_h2_server *s)
{
    (void)s;
    return 0;
}

long hb_h2_server_fill(hb_h2_server *s)
{
    (void)s;
    return -1;
}

const struct iovec *hb_h2_server_out(hb_h2_server *s, int *niov)
{
    (void)s;
    *niov = 0;
    return NULL;
}

void hb_h2_server_sent(hb_h2_server *s, size_t n)
{
    (void)s;
    (void)n;
}

int hb_h2_server_idle_out(const hb_h2_server *s)
{
    (void)s;
    return 1;
}

int hb_h2_server_done(const hb_h2_server *s)
{
    (void)s;
    return 1;
}

int hb_h2_server_busy(const hb_h2_server *s)
{
    (void)s;
    return 0;
}

uint64_t hb_h2_server_deadline(hb_h2_server *s)
{
    (void)s;
    return 0;
}

void hb_h2_server_timer(hb_h2_server *s)
{
    (void)s;
}

int hb_h2_server_sweep(hb_h2_server *s, uint64_t timeout_ns)
{
    (void)s;
    (void)timeout_ns;
    return 0;
}

#else
/* ISO C wants a translation unit to declare something. */
typedef int hb__h2_server_none_unused;
#endif
