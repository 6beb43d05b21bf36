/* hb_route.h - the embedded server's routes: one table (hb_route.c) of path
 * pattern, accepted methods and typed parameters, and the pure function that
 * maps a request's method and target onto it.
 *
 * Routes (see README "Embedded server"): /, /bytes/{n}, /chunked/{n}?chunk=k,
 * /sink, /echo, /delay/{ms}?bytes=, /status/{code},
 * /drip/{n}?interval_ms=&chunk=, /fault/{close-after-headers,close-mid-body,
 * reset,stall/{ms},early-response?status=} (all with ?bytes=),
 * /sse?events=&size=&interval=, /stream/{n}?chunk=&interval=,
 * /ws?push=&size=&interval=&text= (GET only), and /__stats
 * (JSON, not counted in the stats). Numbers are at most 15 decimal digits.
 */
#ifndef HB_ROUTE_H
#define HB_ROUTE_H

#include <stddef.h>
#include <stdint.h>

/* Route ids for the stats (order is the stats order; names via
 * hb_server_route_name). */
enum hb_route {
    HB_ROUTE_ROOT = 0,            /* GET / */
    HB_ROUTE_BYTES,               /* /bytes/{n} */
    HB_ROUTE_CHUNKED,             /* /chunked/{n} */
    HB_ROUTE_SINK,                /* POST|PUT /sink */
    HB_ROUTE_ECHO,                /* POST|PUT /echo */
    HB_ROUTE_DELAY,               /* /delay/{ms} */
    HB_ROUTE_STATUS,              /* /status/{code} */
    HB_ROUTE_DRIP,                /* /drip/{n} */
    HB_ROUTE_CLOSE_AFTER_HEADERS, /* /fault/close-after-headers */
    HB_ROUTE_CLOSE_MID_BODY,      /* /fault/close-mid-body */
    HB_ROUTE_RESET,               /* /fault/reset */
    HB_ROUTE_STALL,               /* /fault/stall/{ms} */
    HB_ROUTE_EARLY_RESPONSE,      /* /fault/early-response */
    HB_ROUTE_SSE,                 /* /sse: server-sent events */
    HB_ROUTE_STREAM,              /* /stream/{n}: a chunked body in paced chunks */
    HB_ROUTE_WS,                  /* /ws: WebSocket (HTTP/1.1 upgrade) */
    HB_ROUTE_NOT_FOUND,           /* anything else (404, or 405 for a wrong method) */
    HB_ROUTE_BAD_REQUEST,         /* unparseable request: 400 / 431, then close */
    HB_ROUTE_TIMEOUT,             /* request not complete within request_timeout: 408, close */
    HB_ROUTE_COUNT
};

/* A request target mapped onto the table. `p` holds the parameters of the
 * matched route (defaults filled in) and is meaningful only when status is
 * 200; the member is the one named after the route. */
typedef struct hb_route_req {
    int route;      /* enum hb_route: the stats bucket */
    int status;     /* 200 serve it; 400 bad parameter; 404 unknown path; 405 wrong method */
    int stats_page; /* GET /__stats: answered with the stats JSON, never counted */
    union {
        struct {
            uint64_t n; /* body length */
        } bytes;
        struct {
            uint64_t n;     /* body length */
            uint32_t chunk; /* ?chunk= chunk size, 1 .. 16 MiB; default 4096 */
        } chunked;
        struct {
            uint64_t ms;    /* 0 .. 600000 */
            uint64_t bytes; /* ?bytes= body length; default 0 */
        } delay;
        struct {
            int code; /* 200 .. 599 */
        } status;
        struct {
            uint64_t n;           /* body length, at most 64 Mi */
            uint64_t interval_ms; /* ?interval_ms= between ticks, 0 .. 60000; default 10 */
            uint32_t chunk;       /* ?chunk= bytes per tick, 1 .. 64 KiB; default 1 */
        } drip;
        struct {
            uint64_t bytes; /* ?bytes= announced Content-Length; default 1024 */
        } fault;            /* close-after-headers, close-mid-body, reset */
        struct {
            uint64_t bytes; /* ?bytes= as for fault */
            uint64_t ms;    /* 0 .. 600000 */
        } stall;
        struct {
            int status; /* ?status= 200 .. 599; default 413 */
        } early;
        struct {
            uint64_t events;      /* ?events= 0 .. 10^8; default 10 */
            uint32_t size;        /* ?size= data bytes per event, 0 .. 65536; default 16 */
            uint64_t interval_ms; /* ?interval= between events, 0 .. 60000; default 0 */
        } sse;
        struct {
            uint64_t n;           /* body length, at most 2^40 */
            uint32_t chunk;       /* ?chunk= 1 .. 1 MiB (one queue of iovecs); default 4096 */
            uint64_t interval_ms; /* ?interval= between chunks, 0 .. 60000; default 0 */
        } stream;
        struct {
            uint64_t push;        /* ?push= messages the server sends, 0 .. 10^9; default 0 */
            uint32_t size;        /* ?size= bytes per pushed message, 0 .. 1 MiB; default 16 */
            uint64_t interval_ms; /* ?interval= between pushes, 0 .. 60000; default 0 */
            int text;             /* ?text=1: pushed messages are text frames (else binary) */
        } ws;
    } p;
} hb_route_req;

/* Map method + request target (origin-form, or absolute-form whose
 * scheme://authority is skipped) onto the route table. HEAD counts as GET.
 * Pure: no state, no allocation. Returns out->route. */
int hb_route_parse(const char *method, size_t method_len, const char *target, size_t target_len,
                   hb_route_req *out);

/* The stats name of a route id ("bytes", "not_found", ...); "?" if out of range. */
const char *hb_server_route_name(int route);

#endif
