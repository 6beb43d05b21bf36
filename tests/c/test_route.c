/* test_route.c - hb_route_parse, the pure mapping of method + target onto
 * the route table: every route, parameter defaults and limits, the
 * 400-before-405 order, absolute-form targets, and the stats names. */
#include <string.h>

#include "hb_route.h"
#include "hb_test.h"

static hb_route_req rq;

/* Parse and return the status; rq holds the rest. */
static int parse(const char *method, const char *target)
{
    hb_route_parse(method, strlen(method), target, strlen(target), &rq);
    return rq.status;
}

static void test_simple_routes(void)
{
    CHECK_EQ_INT(parse("GET", "/"), 200);
    CHECK_EQ_INT(rq.route, HB_ROUTE_ROOT);
    CHECK_EQ_INT(parse("HEAD", "/"), 200);
    CHECK_EQ_INT(parse("POST", "/"), 405);
    CHECK_EQ_INT(rq.route, HB_ROUTE_ROOT);

    CHECK_EQ_INT(parse("POST", "/sink"), 200);
    CHECK_EQ_INT(rq.route, HB_ROUTE_SINK);
    CHECK_EQ_INT(parse("PUT", "/echo"), 200);
    CHECK_EQ_INT(rq.route, HB_ROUTE_ECHO);
    CHECK_EQ_INT(parse("GET", "/echo"), 405);
    CHECK_EQ_INT(parse("HEAD", "/sink"), 405);

    CHECK_EQ_INT(parse("GET", "/nope"), 404);
    CHECK_EQ_INT(rq.route, HB_ROUTE_NOT_FOUND);
    CHECK_EQ_INT(parse("GET", "/sink/"), 404);
    CHECK_EQ_INT(parse("GET", "/bytes/"), 404); /* no number: not the bytes route */
    CHECK_EQ_INT(rq.route, HB_ROUTE_NOT_FOUND);
    CHECK_EQ_INT(parse("GET", ""), 404);
}

static void test_numbers(void)
{
    CHECK_EQ_INT(parse("GET", "/bytes/1234?x=1"), 200);
    CHECK_EQ_INT(rq.route, HB_ROUTE_BYTES);
    CHECK_EQ_INT(rq.p.bytes.n, 1234);
    CHECK_EQ_INT(parse("GET", "/bytes/999999999999999"), 200); /* 15 digits */
    CHECK_EQ_INT(parse("GET", "/bytes/1000000000000000"), 400);
    CHECK_EQ_INT(parse("GET", "/bytes/12a"), 400);
    CHECK_EQ_INT(rq.route, HB_ROUTE_BYTES);
    CHECK_EQ_INT(parse("GET", "/bytes/-1"), 400);
    CHECK_EQ_INT(parse("POST", "/bytes/5"), 405);
    CHECK_EQ_INT(parse("POST", "/bytes/x"), 400); /* a bad parameter beats a wrong method */

    CHECK_EQ_INT(parse("GET", "/chunked/100"), 200);
    CHECK_EQ_INT(rq.route, HB_ROUTE_CHUNKED);
    CHECK_EQ_INT(rq.p.chunked.n, 100);
    CHECK_EQ_INT(rq.p.chunked.chunk, 4096);
    CHECK_EQ_INT(parse("GET", "/chunked/100?a=b&chunk=7"), 200);
    CHECK_EQ_INT(rq.p.chunked.chunk, 7);
    CHECK_EQ_INT(parse("GET", "/chunked/100?chunk=0"), 400);
    CHECK_EQ_INT(parse("GET", "/chunked/100?chunk=16777216"), 200);
    CHECK_EQ_INT(parse("GET", "/chunked/100?chunk=16777217"), 400);
    CHECK_EQ_INT(parse("GET", "/chunked/100?chunk="), 400);
    CHECK_EQ_INT(parse("GET", "/chunked/100?chunky=3"), 200);
    CHECK_EQ_INT(rq.p.chunked.chunk, 4096);
    CHECK_EQ_INT(parse("PUT", "/chunked/1"), 405);

    CHECK_EQ_INT(parse("POST", "/delay/250?bytes=10"), 200); /* any method */
    CHECK_EQ_INT(rq.route, HB_ROUTE_DELAY);
    CHECK_EQ_INT(rq.p.delay.ms, 250);
    CHECK_EQ_INT(rq.p.delay.bytes, 10);
    CHECK_EQ_INT(parse("GET", "/delay/0"), 200);
    CHECK_EQ_INT(rq.p.delay.bytes, 0);
    CHECK_EQ_INT(parse("GET", "/delay/600000"), 200);
    CHECK_EQ_INT(parse("GET", "/delay/600001"), 400);
    CHECK_EQ_INT(parse("GET", "/delay/1?bytes=x"), 400);

    CHECK_EQ_INT(parse("DELETE", "/status/418"), 200);
    CHECK_EQ_INT(rq.route, HB_ROUTE_STATUS);
    CHECK_EQ_INT(rq.p.status.code, 418);
    CHECK_EQ_INT(parse("GET", "/status/199"), 400);
    CHECK_EQ_INT(parse("GET", "/status/600"), 400);
    CHECK_EQ_INT(parse("GET", "/status/599"), 200);

    CHECK_EQ_INT(parse("GET", "/drip/10"), 200);
    CHECK_EQ_INT(rq.route, HB_ROUTE_DRIP);
    CHECK_EQ_INT(rq.p.drip.n, 10);
    CHECK_EQ_INT(rq.p.drip.interval_ms, 10);
    CHECK_EQ_INT(rq.p.drip.chunk, 1);
    CHECK_EQ_INT(parse("GET", "/drip/10?interval_ms=0&chunk=65536"), 200);
    CHECK_EQ_INT(rq.p.drip.interval_ms, 0);
    CHECK_EQ_INT(rq.p.drip.chunk, 65536);
    CHECK_EQ_INT(parse("GET", "/drip/10?chunk=65537"), 400);
    CHECK_EQ_INT(parse("GET", "/drip/10?chunk=0"), 400);
    CHECK_EQ_INT(parse("GET", "/drip/10?interval_ms=60001"), 400);
    CHECK_EQ_INT(parse("GET", "/drip/67108864"), 200);
    CHECK_EQ_INT(parse("GET", "/drip/67108865"), 400);
    CHECK_EQ_INT(parse("POST", "/drip/1"), 405);
}

static void test_faults(void)
{
    CHECK_EQ_INT(parse("GET", "/fault/close-after-headers"), 200);
    CHECK_EQ_INT(rq.route, HB_ROUTE_CLOSE_AFTER_HEADERS);
    CHECK_EQ_INT(rq.p.fault.bytes, 1024);
    CHECK_EQ_INT(parse("POST", "/fault/close-mid-body?bytes=100"), 200);
    CHECK_EQ_INT(rq.route, HB_ROUTE_CLOSE_MID_BODY);
    CHECK_EQ_INT(rq.p.fault.bytes, 100);
    CHECK_EQ_INT(parse("GET", "/fault/reset"), 200);
    CHECK_EQ_INT(rq.route, HB_ROUTE_RESET);
    CHECK_EQ_INT(parse("GET", "/fault/reset?bytes=1099511627776"), 200); /* 1 TiB */
    CHECK_EQ_INT(parse("GET", "/fault/reset?bytes=1099511627777"), 400);

    CHECK_EQ_INT(parse("GET", "/fault/stall/20?bytes=8"), 200);
    CHECK_EQ_INT(rq.route, HB_ROUTE_STALL);
    CHECK_EQ_INT(rq.p.stall.ms, 20);
    CHECK_EQ_INT(rq.p.stall.bytes, 8);
    CHECK_EQ_INT(parse("GET", "/fault/stall/600001"), 400);
    CHECK_EQ_INT(parse("GET", "/fault/stall/x"), 400);
    CHECK_EQ_INT(rq.route, HB_ROUTE_STALL);

    CHECK_EQ_INT(parse("POST", "/fault/early-response"), 200);
    CHECK_EQ_INT(rq.route, HB_ROUTE_EARLY_RESPONSE);
    CHECK_EQ_INT(rq.p.early.status, 413);
    CHECK_EQ_INT(parse("POST", "/fault/early-response?status=503"), 200);
    CHECK_EQ_INT(rq.p.early.status, 503);
    CHECK_EQ_INT(parse("POST", "/fault/early-response?status=99"), 400);
    CHECK_EQ_INT(parse("POST", "/fault/early-response?bytes=z"), 400); /* checked, unused */

    /* an unknown fault is a 404, but a bad bytes= there is still a 400 */
    CHECK_EQ_INT(parse("GET", "/fault/nope"), 404);
    CHECK_EQ_INT(rq.route, HB_ROUTE_NOT_FOUND);
    CHECK_EQ_INT(parse("GET", "/fault/nope?bytes=z"), 400);
    CHECK_EQ_INT(rq.route, HB_ROUTE_NOT_FOUND);
    CHECK_EQ_INT(parse("GET", "/fault/stall/"), 404);
    CHECK_EQ_INT(parse("GET", "/fault/?bytes=z"), 404); /* "/fault/" itself: plain 404 */
}

static void test_stats_page_and_forms(void)
{
    CHECK_EQ_INT(parse("GET", "/__stats"), 200);
    CHECK_EQ_INT(rq.stats_page, 1);
    CHECK_EQ_INT(rq.route, HB_ROUTE_NOT_FOUND);
    CHECK_EQ_INT(parse("POST", "/__stats"), 405);
    CHECK_EQ_INT(rq.stats_page, 1);
    CHECK_EQ_INT(parse("GET", "/"), 200);
    CHECK_EQ_INT(rq.stats_page, 0);

    CHECK_EQ_INT(parse("GET", "http://example.com:8080/bytes/3?x"), 200);
    CHECK_EQ_INT(rq.route, HB_ROUTE_BYTES);
    CHECK_EQ_INT(rq.p.bytes.n, 3);
    CHECK_EQ_INT(parse("GET", "https://example.com/status/201"), 200);
    CHECK_EQ_INT(rq.p.status.code, 201);
    CHECK_EQ_INT(parse("GET", "http://example.com"), 200); /* no path: "/" */
    CHECK_EQ_INT(rq.route, HB_ROUTE_ROOT);
    CHECK_EQ_INT(parse("GET", "/?a=1"), 200);
    CHECK_EQ_INT(rq.route, HB_ROUTE_ROOT);
}

static void test_names(void)
{
    static const char *const names[HB_ROUTE_COUNT] = {
        "root",           "bytes",     "chunked",
        "sink",           "echo",      "delay",
        "status",         "drip",      "close_after_headers",
        "close_mid_body", "reset",     "stall",
        "early_response", "not_found", "bad_request",
        "timeout",
    };
    for (int i = 0; i < HB_ROUTE_COUNT; i++)
        CHECK(strcmp(hb_server_route_name(i), names[i]) == 0);
    CHECK(strcmp(hb_server_route_name(-1), "?") == 0);
    CHECK(strcmp(hb_server_route_name(HB_ROUTE_COUNT), "?") == 0);
}

int main(void)
{
    test_simple_routes();
    test_numbers();
    test_faults();
    test_stats_page_and_forms();
    test_names();
    HB_TEST_MAIN_END();
}
