/* test_route.c - hb_route_parse, the pure mapping of method + target onto
 * the route table: every route, parameter defaults and limits, the
 * 400-before-405 order, absolute-form targets, and the stats names; and
 * hb_route_plan, the protocol-free answer of every route. */
#include <string.h>

#include "http/hb_route.h"
#include "http/hb_route_plan.h"
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
        "root",
        "bytes",
        "chunked",
        "sink",
        "echo",
        "delay",
        "status",
        "drip",
        "close_after_headers",
        "close_mid_body",
        "reset",
        "stall",
        "early_response",
        "sse",
        "stream",
        "ws",
        "not_found",
        "bad_request",
        "timeout",
    };
    for (int i = 0; i < HB_ROUTE_COUNT; i++)
        CHECK(strcmp(hb_server_route_name(i), names[i]) == 0);
    CHECK(strcmp(hb_server_route_name(-1), "?") == 0);
    CHECK(strcmp(hb_server_route_name(HB_ROUTE_COUNT), "?") == 0);
}

static void test_streaming_routes(void)
{
    CHECK_EQ_INT(parse("GET", "/sse"), 200);
    CHECK_EQ_INT(rq.route, HB_ROUTE_SSE);
    CHECK_EQ_INT(rq.p.sse.events, 10);
    CHECK_EQ_INT(rq.p.sse.size, 16);
    CHECK_EQ_INT(rq.p.sse.interval_ms, 0);
    CHECK_EQ_INT(parse("GET", "/sse?events=100000000&size=65536&interval=60000"), 200);
    CHECK_EQ_INT(rq.p.sse.events, 100000000);
    CHECK_EQ_INT(rq.p.sse.size, 65536);
    CHECK_EQ_INT(rq.p.sse.interval_ms, 60000);
    CHECK_EQ_INT(parse("GET", "/sse?events=100000001"), 400);
    CHECK_EQ_INT(parse("GET", "/sse?size=65537"), 400);
    CHECK_EQ_INT(parse("GET", "/sse?interval=60001"), 400);
    CHECK_EQ_INT(parse("POST", "/sse"), 405);

    CHECK_EQ_INT(parse("GET", "/stream/1000"), 200);
    CHECK_EQ_INT(rq.route, HB_ROUTE_STREAM);
    CHECK_EQ_INT(rq.p.stream.n, 1000);
    CHECK_EQ_INT(rq.p.stream.chunk, 4096);
    CHECK_EQ_INT(parse("GET", "/stream/5?chunk=1048576&interval=7"), 200);
    CHECK_EQ_INT(rq.p.stream.chunk, 1048576);
    CHECK_EQ_INT(rq.p.stream.interval_ms, 7);
    CHECK_EQ_INT(parse("GET", "/stream/5?chunk=1048577"), 400);
    CHECK_EQ_INT(parse("GET", "/stream/5?chunk=0"), 400);
    CHECK_EQ_INT(parse("GET", "/stream/1099511627777"), 400);

    CHECK_EQ_INT(parse("GET", "/ws"), 200);
    CHECK_EQ_INT(rq.route, HB_ROUTE_WS);
    CHECK_EQ_INT(rq.p.ws.push, 0);
    CHECK_EQ_INT(rq.p.ws.size, 16);
    CHECK_EQ_INT(parse("GET", "/ws?push=3&size=9&interval=2&text=1"), 200);
    CHECK_EQ_INT(rq.p.ws.push, 3);
    CHECK_EQ_INT(rq.p.ws.size, 9);
    CHECK_EQ_INT(rq.p.ws.interval_ms, 2);
    CHECK_EQ_INT(rq.p.ws.text, 1);
    CHECK_EQ_INT(parse("GET", "/ws?text=2"), 400);
    CHECK_EQ_INT(parse("GET", "/ws?size=1048577"), 400);
    CHECK_EQ_INT(parse("GET", "/ws?size=1048576"), 200);
    CHECK_EQ_INT(parse("POST", "/ws"), 405);
}

static hb_route_answer ans;
static char jbuf[96];

/* Route and plan a request with `in` (NULL: no body, not HEAD); the act. */
static int plan_in(const char *method, const char *target, const hb_route_in *in)
{
    hb_route_in none = {0};
    none.jbuf = jbuf;
    none.jcap = sizeof jbuf;
    parse(method, target);
    memset(&ans, 0x5a, sizeof ans); /* every field must be written */
    hb_route_plan(&rq, in ? in : &none, &ans);
    return ans.act;
}

static int plan(const char *method, const char *target)
{
    return plan_in(method, target, NULL);
}

#define CHECK_STR(p, lit) CHECK((p) && strcmp((p), (lit)) == 0)

/* A text/plain answer from memory, whole, not paced. */
static void check_text(int status, const char *body)
{
    CHECK_EQ_INT(ans.act, HB_ACT_RESPOND);
    CHECK_EQ_INT(ans.status, status);
    CHECK_STR(ans.ct, "text/plain");
    CHECK_EQ_INT((int)ans.ct_len, 10);
    CHECK_EQ_INT(ans.src, HB_SRC_MEM);
    CHECK(ans.mem && ans.n == strlen(body) && memcmp(ans.mem, body, ans.n) == 0);
    CHECK_EQ_INT((int)ans.cl, (int)strlen(body));
    CHECK(ans.avail == ans.n);
    CHECK_EQ_INT(ans.wait, HB_WAIT_NONE);
    CHECK_EQ_INT(ans.no_eof, 0);
}

/* Generated content: cl announced, n in all, avail at once. */
static void check_content(int64_t cl, uint64_t n, uint64_t avail)
{
    CHECK_EQ_INT(ans.status, 200);
    CHECK_STR(ans.ct, "application/octet-stream");
    CHECK_EQ_INT((int)ans.ct_len, 24);
    CHECK_EQ_INT(ans.src, HB_SRC_CONTENT);
    CHECK(ans.cl == cl);
    CHECK(ans.n == n);
    CHECK(ans.avail == avail);
}

static void test_plan_errors_and_stats(void)
{
    plan("GET", "/nope");
    check_text(404, "not found\n");
    plan("POST", "/");
    check_text(405, "method not allowed\n");
    plan("GET", "/bytes/1234567890123456"); /* 16 digits: a bad parameter */
    check_text(400, "bad parameter\n");
    plan("GET", "/drip/10?chunk=0");
    check_text(400, "bad parameter\n");
    plan("GET", "/status/99");
    check_text(400, "bad parameter\n");
    plan("GET", "/fault/early-response?status=600");
    check_text(400, "bad parameter\n");
    plan("GET", "/delay/600001");
    check_text(400, "bad parameter\n");

    CHECK_EQ_INT(plan("GET", "/__stats"), HB_ACT_STATS);
    plan("POST", "/__stats");
    check_text(405, "method not allowed\n");

    /* a status the parser never gives, and a route out of range: 404 */
    hb_route_req odd = {.route = HB_ROUTE_BYTES, .status = 418};
    hb_route_in in = {0};
    hb_route_plan(&odd, &in, &ans);
    check_text(404, "not found\n");
    odd.route = HB_ROUTE_COUNT;
    odd.status = 200;
    hb_route_plan(&odd, &in, &ans);
    check_text(404, "not found\n");
}

static void test_plan_routes(void)
{
    plan("GET", "/");
    check_text(200, "httpbench test server\n");

    CHECK_EQ_INT(plan("GET", "/bytes/150"), HB_ACT_RESPOND);
    check_content(150, 150, 150);
    CHECK_EQ_INT(ans.wait, HB_WAIT_NONE);
    CHECK_EQ_INT(ans.no_eof, 0);
    plan("HEAD", "/bytes/0");
    check_content(0, 0, 0);

    CHECK_EQ_INT(plan("GET", "/chunked/5000?chunk=7"), HB_ACT_RESPOND);
    check_content(-1, 5000, 5000);

    hb_route_in sink = {.body_bytes = 12, .crc = 0xcafe01u, .jbuf = jbuf, .jcap = sizeof jbuf};
    CHECK_EQ_INT(plan_in("POST", "/sink", &sink), HB_ACT_RESPOND);
    CHECK_EQ_INT(ans.status, 200);
    CHECK_STR(ans.ct, "application/json");
    CHECK_EQ_INT((int)ans.ct_len, 16);
    CHECK(ans.mem == jbuf);
    CHECK_MEM(ans.mem, ans.n, "{\"bytes\": 12, \"crc32\": \"00cafe01\"}");
    CHECK(ans.cl == (int64_t)ans.n && ans.avail == ans.n);
    sink.jcap = 20; /* no room for the document: an error, never a cut one */
    plan_in("POST", "/sink", &sink);
    check_text(500, "internal error\n");
    sink.jbuf = NULL;
    plan_in("PUT", "/sink", &sink);
    check_text(500, "internal error\n");

    hb_route_in echo = {.echo = "hello", .echo_len = 5};
    CHECK_EQ_INT(plan_in("POST", "/echo", &echo), HB_ACT_RESPOND);
    CHECK_EQ_INT(ans.status, 200);
    CHECK_STR(ans.ct, "application/octet-stream");
    CHECK_EQ_INT(ans.src, HB_SRC_MEM);
    CHECK_MEM(ans.mem, ans.n, "hello");
    CHECK(ans.cl == 5);
    echo.echo_too_large = 1;
    plan_in("PUT", "/echo", &echo);
    check_text(413, "request body too large\n");

    CHECK_EQ_INT(plan("GET", "/delay/0?bytes=9"), HB_ACT_RESPOND);
    check_content(9, 9, 9);
    CHECK_EQ_INT(plan("GET", "/delay/250?bytes=9"), HB_ACT_DELAY);
    check_content(9, 9, 9);
    CHECK(ans.wait_ms == 250);
    CHECK_EQ_INT(ans.wait, HB_WAIT_NONE);

    plan("GET", "/status/503");
    CHECK_EQ_INT(ans.act, HB_ACT_RESPOND);
    CHECK_EQ_INT(ans.status, 503);
    CHECK_STR(ans.ct, "text/plain");
    CHECK(ans.cl == 0 && ans.n == 0);
    plan("GET", "/status/204"); /* no body, no content-length */
    CHECK_EQ_INT(ans.status, 204);
    CHECK(ans.cl == -1 && ans.n == 0 && ans.avail == 0);
    plan("GET", "/status/304");
    CHECK(ans.cl == -1 && ans.n == 0);

    CHECK_EQ_INT(plan("GET", "/drip/10?interval_ms=3&chunk=2"), HB_ACT_RESPOND);
    check_content(10, 10, 0);
    CHECK_EQ_INT(ans.wait, HB_WAIT_DRIP);
    CHECK(ans.wait_ms == 3);
    hb_route_in head = {.head_only = 1};
    plan_in("HEAD", "/drip/10", &head); /* HEAD: nothing to pace */
    check_content(10, 10, 0);
    CHECK_EQ_INT(ans.wait, HB_WAIT_NONE);
    plan("GET", "/drip/0");
    CHECK_EQ_INT(ans.wait, HB_WAIT_NONE);
    CHECK(ans.n == 0);
}

/* A server without event bodies: an unpaced /stream is its body; the rest is 501. */
static void test_plan_streaming(void)
{
    plan("GET", "/stream/300");
    CHECK_EQ_INT(ans.act, HB_ACT_RESPOND);
    CHECK_EQ_INT(ans.status, 200);
    CHECK_EQ_INT(ans.src, HB_SRC_CONTENT);
    CHECK_EQ_INT(ans.cl, -1);
    CHECK_EQ_INT(ans.n, 300);
    CHECK_EQ_INT(ans.avail, 300);
    plan("GET", "/stream/300?interval=5");
    CHECK_EQ_INT(ans.status, 501);
    plan("GET", "/sse");
    CHECK_EQ_INT(ans.status, 501);
    plan("GET", "/ws");
    CHECK_EQ_INT(ans.status, 501);
    /* a server that sends event bodies (HTTP/2): both routes are its events */
    hb_route_in ev = {0};
    ev.jbuf = jbuf;
    ev.jcap = sizeof jbuf;
    ev.events_ok = 1;
    plan_in("GET", "/sse?events=3&interval=7", &ev);
    CHECK_EQ_INT(ans.status, 200);
    CHECK_EQ_INT(ans.src, HB_SRC_EVENTS);
    CHECK_STR(ans.ct, "text/event-stream");
    CHECK_EQ_INT(ans.cl, -1);
    CHECK(ans.wait_ms == 7);
    plan_in("GET", "/stream/300?chunk=7", &ev);
    CHECK_EQ_INT(ans.src, HB_SRC_EVENTS);
    CHECK_STR(ans.ct, "application/octet-stream");
    CHECK(ans.n == 300 && ans.wait_ms == 0);
    plan_in("GET", "/ws", &ev);
    CHECK_EQ_INT(ans.status, 501);
}

static void test_plan_faults(void)
{
    CHECK_EQ_INT(plan("GET", "/fault/close-after-headers?bytes=100"), HB_ACT_RESPOND);
    check_content(100, 0, 0);
    CHECK_EQ_INT(ans.no_eof, 1);
    CHECK_EQ_INT(ans.wait, HB_WAIT_NONE);

    CHECK_EQ_INT(plan("GET", "/fault/close-mid-body?bytes=101"), HB_ACT_RESPOND);
    check_content(101, 50, 50);
    CHECK_EQ_INT(ans.no_eof, 1);
    plan("GET", "/fault/close-mid-body"); /* default ?bytes=1024 */
    check_content(1024, 512, 512);

    CHECK_EQ_INT(plan("GET", "/fault/reset"), HB_ACT_RESET);

    CHECK_EQ_INT(plan("GET", "/fault/stall/40?bytes=11"), HB_ACT_RESPOND);
    check_content(11, 11, 5);
    CHECK_EQ_INT(ans.wait, HB_WAIT_STALL);
    CHECK(ans.wait_ms == 40);
    CHECK_EQ_INT(ans.no_eof, 0);

    plan("POST", "/fault/early-response");
    check_text(413, "early response\n");
    plan("POST", "/fault/early-response?status=200");
    check_text(200, "early response\n");
}

static void test_head_digits(void)
{
    char st[3], cl[24];
    CHECK_EQ_INT((int)hb_route_head_digits(200, 0, st, cl), 1);
    CHECK_MEM(st, 3, "200");
    CHECK_MEM(cl, 1, "0");
    CHECK_EQ_INT((int)hb_route_head_digits(504, -1, st, cl), 0); /* no content-length */
    CHECK_MEM(st, 3, "504");
    size_t n = hb_route_head_digits(101, 1234567890123, st, cl);
    CHECK_MEM(st, 3, "101");
    CHECK_MEM(cl, n, "1234567890123");
    n = hb_route_head_digits(999, INT64_MAX, st, cl);
    CHECK_MEM(cl, n, "9223372036854775807");
}

int main(void)
{
    test_simple_routes();
    test_numbers();
    test_faults();
    test_stats_page_and_forms();
    test_names();
    test_streaming_routes();
    test_plan_errors_and_stats();
    test_plan_routes();
    test_plan_faults();
    test_plan_streaming();
    test_head_digits();
    HB_TEST_MAIN_END();
}
