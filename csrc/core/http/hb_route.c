/* hb_route.c - the route table and request-target parsing (hb_route.h). */
#include "http/hb_route.h"

#include <string.h>

#include "base/hb_content.h"

/* How a row's path matches. */
enum match {
    M_NONE,   /* never matched: a stats bucket without a path */
    M_EXACT,  /* the path equals `path` */
    M_NUM,    /* `path` (a prefix) then a number: "/bytes/{n}" */
    M_PREFIX, /* `path` then anything non-empty */
};

/* Methods a row serves; others get 405. */
enum methods {
    ANY,  /* every method */
    GET,  /* GET, HEAD */
    BODY, /* POST, PUT */
};

/* The query part of a target; q == NULL when there is no '?'. */
typedef struct query {
    const char *q;
    size_t n;
} query;

/* Fill rq->p for a matched row; num is the path number (M_NUM rows).
 * 0, or -1 for a bad parameter (400). */
typedef int (*params_fn)(hb_route_req *rq, int64_t num, query q);

typedef struct route_def {
    int route;        /* enum hb_route */
    const char *name; /* stats name: set on exactly one row per route id */
    const char *path;
    unsigned char match, methods;
    short ok_status; /* status when parameters and method are fine */
    unsigned char stats_page;
    params_fn params; /* NULL: none */
} route_def;

/* Decimal digits only, at most 15 of them; -1 otherwise. */
static int64_t parse_num(const char *p, size_t n)
{
    if (n == 0 || n > 15) return -1;
    int64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9') return -1;
        v = v * 10 + (p[i] - '0');
    }
    return v;
}

/* Query parameter `name` as a number: 1 found (in *out), 0 absent, -1 bad. */
static int qnum(query qs, const char *name, int64_t *out)
{
    if (!qs.q) return 0;
    size_t nl = strlen(name);
    const char *q = qs.q, *end = qs.q + qs.n;
    while (q < end) {
        const char *amp = memchr(q, '&', (size_t)(end - q));
        const char *e = amp ? amp : end;
        if ((size_t)(e - q) > nl && memcmp(q, name, nl) == 0 && q[nl] == '=') {
            *out = parse_num(q + nl + 1, (size_t)(e - q - nl - 1));
            return *out < 0 ? -1 : 1;
        }
        q = e + 1;
    }
    return 0;
}

/* Optional query number: *out keeps its default when absent. 0 or -1 (bad). */
static int qopt(query q, const char *name, uint64_t *out)
{
    int64_t v;
    int r = qnum(q, name, &v);
    if (r > 0) *out = (uint64_t)v;
    return r < 0 ? -1 : 0;
}

static int p_bytes(hb_route_req *rq, int64_t num, query q)
{
    (void)q;
    rq->p.bytes.n = (uint64_t)num;
    return 0;
}

static int p_chunked(hb_route_req *rq, int64_t num, query q)
{
    uint64_t chunk = 4096;
    rq->p.chunked.n = (uint64_t)num;
    if (qopt(q, "chunk", &chunk) < 0 || chunk == 0 || chunk > (1u << 24)) return -1;
    rq->p.chunked.chunk = (uint32_t)chunk;
    return 0;
}

static int p_delay(hb_route_req *rq, int64_t num, query q)
{
    rq->p.delay.ms = (uint64_t)num;
    rq->p.delay.bytes = 0;
    return qopt(q, "bytes", &rq->p.delay.bytes) < 0 || num > 600000 ? -1 : 0;
}

static int p_status(hb_route_req *rq, int64_t num, query q)
{
    (void)q;
    if (num < 200 || num > 599) return -1;
    rq->p.status.code = (int)num;
    return 0;
}

static int p_drip(hb_route_req *rq, int64_t num, query q)
{
    uint64_t chunk = 1;
    rq->p.drip.n = (uint64_t)num;
    rq->p.drip.interval_ms = 10;
    if (qopt(q, "interval_ms", &rq->p.drip.interval_ms) < 0 || qopt(q, "chunk", &chunk) < 0)
        return -1;
    if (rq->p.drip.interval_ms > 60000 || chunk == 0 || chunk > HB_CONTENT_WIN || num > (1 << 26))
        return -1;
    rq->p.drip.chunk = (uint32_t)chunk;
    return 0;
}

/* ?bytes= of every /fault/ path (checked even where unused). */
static int fault_bytes(query q, uint64_t *bytes)
{
    *bytes = 1024;
    return qopt(q, "bytes", bytes) < 0 || *bytes > (1ull << 40) ? -1 : 0;
}

static int p_fault(hb_route_req *rq, int64_t num, query q)
{
    (void)num;
    return fault_bytes(q, &rq->p.fault.bytes);
}

static int p_stall(hb_route_req *rq, int64_t num, query q)
{
    rq->p.stall.ms = (uint64_t)num;
    return fault_bytes(q, &rq->p.stall.bytes) < 0 || num > 600000 ? -1 : 0;
}

static int p_early(hb_route_req *rq, int64_t num, query q)
{
    (void)num;
    uint64_t bytes, status = 413;
    if (fault_bytes(q, &bytes) < 0 || qopt(q, "status", &status) < 0) return -1;
    if (status < 200 || status > 599) return -1;
    rq->p.early.status = (int)status;
    return 0;
}

static int p_sse(hb_route_req *rq, int64_t num, query q)
{
    (void)num;
    uint64_t size = 16;
    rq->p.sse.events = 10;
    rq->p.sse.interval_ms = 0;
    if (qopt(q, "events", &rq->p.sse.events) < 0 || qopt(q, "size", &size) < 0 ||
        qopt(q, "interval", &rq->p.sse.interval_ms) < 0)
        return -1;
    if (rq->p.sse.events > 100000000 || size > 65536 || rq->p.sse.interval_ms > 60000) return -1;
    rq->p.sse.size = (uint32_t)size;
    return 0;
}

static int p_stream(hb_route_req *rq, int64_t num, query q)
{
    uint64_t chunk = 4096;
    rq->p.stream.n = (uint64_t)num;
    rq->p.stream.interval_ms = 0;
    if (qopt(q, "chunk", &chunk) < 0 || qopt(q, "interval", &rq->p.stream.interval_ms) < 0)
        return -1;
    if (chunk == 0 || chunk > (1u << 20) || num > (1ll << 40) || rq->p.stream.interval_ms > 60000)
        return -1;
    rq->p.stream.chunk = (uint32_t)chunk;
    return 0;
}

static int p_ws(hb_route_req *rq, int64_t num, query q)
{
    (void)num;
    uint64_t size = 16, text = 0;
    rq->p.ws.push = 0;
    rq->p.ws.interval_ms = 0;
    if (qopt(q, "push", &rq->p.ws.push) < 0 || qopt(q, "size", &size) < 0 ||
        qopt(q, "interval", &rq->p.ws.interval_ms) < 0 || qopt(q, "text", &text) < 0)
        return -1;
    if (rq->p.ws.push > 1000000000 || size > (1u << 20) || rq->p.ws.interval_ms > 60000 || text > 1)
        return -1;
    rq->p.ws.size = (uint32_t)size;
    rq->p.ws.text = (int)text;
    return 0;
}

/* THE route table, in match order (first match wins; the paths are
 * disjoint except the /fault/ catch-all, which comes after the fault routes). */
static const route_def routes[] = {
    {HB_ROUTE_ROOT, "root", "/", M_EXACT, GET, 200, 0, NULL},
    {HB_ROUTE_BYTES, "bytes", "/bytes/", M_NUM, GET, 200, 0, p_bytes},
    {HB_ROUTE_CHUNKED, "chunked", "/chunked/", M_NUM, GET, 200, 0, p_chunked},
    {HB_ROUTE_SINK, "sink", "/sink", M_EXACT, BODY, 200, 0, NULL},
    {HB_ROUTE_ECHO, "echo", "/echo", M_EXACT, BODY, 200, 0, NULL},
    {HB_ROUTE_DELAY, "delay", "/delay/", M_NUM, ANY, 200, 0, p_delay},
    {HB_ROUTE_STATUS, "status", "/status/", M_NUM, ANY, 200, 0, p_status},
    {HB_ROUTE_DRIP, "drip", "/drip/", M_NUM, GET, 200, 0, p_drip},
    {HB_ROUTE_CLOSE_AFTER_HEADERS, "close_after_headers", "/fault/close-after-headers", M_EXACT,
     ANY, 200, 0, p_fault},
    {HB_ROUTE_CLOSE_MID_BODY, "close_mid_body", "/fault/close-mid-body", M_EXACT, ANY, 200, 0,
     p_fault},
    {HB_ROUTE_RESET, "reset", "/fault/reset", M_EXACT, ANY, 200, 0, p_fault},
    {HB_ROUTE_STALL, "stall", "/fault/stall/", M_NUM, ANY, 200, 0, p_stall},
    {HB_ROUTE_EARLY_RESPONSE, "early_response", "/fault/early-response", M_EXACT, ANY, 200, 0,
     p_early},
    {HB_ROUTE_SSE, "sse", "/sse", M_EXACT, GET, 200, 0, p_sse},
    {HB_ROUTE_STREAM, "stream", "/stream/", M_NUM, GET, 200, 0, p_stream},
    {HB_ROUTE_WS, "ws", "/ws", M_EXACT, GET, 200, 0, p_ws},
    /* an unknown fault is a 404, but a bad ?bytes= there still a 400 */
    {HB_ROUTE_NOT_FOUND, "not_found", "/fault/", M_PREFIX, ANY, 404, 0, p_fault},
    {HB_ROUTE_NOT_FOUND, NULL, "/__stats", M_EXACT, GET, 200, 1, NULL},
    {HB_ROUTE_BAD_REQUEST, "bad_request", NULL, M_NONE, ANY, 400, 0, NULL},
    {HB_ROUTE_TIMEOUT, "timeout", NULL, M_NONE, ANY, 408, 0, NULL},
};

#define NROUTES (sizeof routes / sizeof routes[0])

const char *hb_server_route_name(int route)
{
    for (size_t i = 0; i < NROUTES; i++)
        if (routes[i].route == route && routes[i].name) return routes[i].name;
    return "?";
}

/* Does `path` match row r? *num gets the path number of M_NUM rows (-1: bad). */
static int row_matches(const route_def *r, const char *p, size_t n, int64_t *num)
{
    size_t l = r->path ? strlen(r->path) : 0;
    switch (r->match) {
    case M_EXACT:
        return n == l && memcmp(p, r->path, l) == 0;
    case M_NUM:
        if (n <= l || memcmp(p, r->path, l) != 0) return 0;
        *num = parse_num(p + l, n - l);
        return 1;
    case M_PREFIX:
        return n > l && memcmp(p, r->path, l) == 0;
    default:
        return 0;
    }
}

static int method_ok(int methods, const char *m, size_t ml)
{
    switch (methods) {
    case GET:
        return (ml == 3 && memcmp(m, "GET", 3) == 0) || (ml == 4 && memcmp(m, "HEAD", 4) == 0);
    case BODY:
        return (ml == 4 && memcmp(m, "POST", 4) == 0) || (ml == 3 && memcmp(m, "PUT", 3) == 0);
    default:
        return 1;
    }
}

int hb_route_parse(const char *method, size_t method_len, const char *t, size_t tn,
                   hb_route_req *out)
{
    memset(out, 0, sizeof *out);
    /* absolute-form (proxy style): skip scheme://authority */
    if (tn > 7 && (memcmp(t, "http://", 7) == 0 || (tn > 8 && memcmp(t, "https://", 8) == 0))) {
        const char *s = memchr(t + 8, '/', tn - 8);
        if (!s) {
            t = "/";
            tn = 1;
        } else {
            tn -= (size_t)(s - t);
            t = s;
        }
    }
    const char *qm = memchr(t, '?', tn);
    size_t pn = qm ? (size_t)(qm - t) : tn;
    query q = {qm ? qm + 1 : NULL, qm ? tn - pn - 1 : 0};
    for (size_t i = 0; i < NROUTES; i++) {
        const route_def *r = &routes[i];
        int64_t num = 0;
        if (!row_matches(r, t, pn, &num)) continue;
        out->route = r->route;
        out->stats_page = r->stats_page;
        int bad = num < 0;
        if (r->params && r->params(out, num, q) < 0) bad = 1;
        if (bad)
            out->status = 400;
        else if (!method_ok(r->methods, method, method_len))
            out->status = 405;
        else
            out->status = r->ok_status;
        return out->route;
    }
    out->route = HB_ROUTE_NOT_FOUND;
    out->status = 404;
    return out->route;
}
