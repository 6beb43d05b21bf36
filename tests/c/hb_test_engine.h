/* hb_test_engine.h - what the engine tests share: a config aimed at a port on
 * 127.0.0.1, and one whole run of the engine. */
#ifndef HB_TEST_ENGINE_H
#define HB_TEST_ENGINE_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>

#include "engine/hb_engine.h"

/* c at its defaults, aimed at 127.0.0.1:port. */
static inline void engine_config_loopback(hb_engine_config *c, int port)
{
    hb_engine_config_init(c);
    struct sockaddr_in *a = (struct sockaddr_in *)&c->addr;
    a->sin_family = AF_INET;
    a->sin_port = htons((uint16_t)port);
    a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    c->addrlen = sizeof *a;
}

/* New, start, wait (at most ~10 s, so a hung engine fails the test rather
 * than hanging it) and join: join's rc, or the error of new or start. */
static inline int run_engine(hb_engine_config *c, hb_engine_result *r)
{
    hb_engine *e;
    char err[HB_ERR_LEN];
    int rc = hb_engine_new(&e, c, err);
    if (rc < 0) {
        fprintf(stderr, "engine_new: %s\n", err);
        return rc;
    }
    rc = hb_engine_start(e, err);
    if (rc == 0) {
        int spins = 0;
        while (!hb_engine_wait(e, 100000000ull) && ++spins < 100) {
        }
        rc = hb_engine_join(e, 1, r, err);
    }
    hb_engine_free(e);
    return rc;
}

#endif
