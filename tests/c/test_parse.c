/* test_parse.c - unit tests of every accept/reject rule of hb_parse. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "http/hb_parse.h"
#include "hb_test.h"

static hb_header hdrs[160];
static hb_response_head rh;
static hb_request_head qh;

static int resp_n(const char *s, size_t n, const hb_parse_limits *lim)
{
    memset(&rh, 0, sizeof rh);
    rh.headers = hdrs;
    rh.num_headers = sizeof hdrs / sizeof hdrs[0];
    return hb_parse_response_head(s, n, &rh, lim);
}
static int resp(const char *s)
{
    return resp_n(s, strlen(s), NULL);
}
/* Response head under HB_PARSE_LENIENT_LF (bare LF tolerated and counted). */
static int resp_lenient_n(const char *s, size_t n)
{
    memset(&rh, 0, sizeof rh);
    rh.headers = hdrs;
    rh.num_headers = sizeof hdrs / sizeof hdrs[0];
    return hb_parse_response_head_ex(s, n, &rh, NULL, HB_PARSE_LENIENT_LF);
}
static int resp_lenient(const char *s)
{
    return resp_lenient_n(s, strlen(s));
}
static int req_n(const char *s, size_t n, const hb_parse_limits *lim)
{
    memset(&qh, 0, sizeof qh);
    qh.headers = hdrs;
    qh.num_headers = sizeof hdrs / sizeof hdrs[0];
    return hb_parse_request_head(s, n, &qh, lim);
}
static int req(const char *s)
{
    return req_n(s, strlen(s), NULL);
}

/* Response error code, also checking every prefix is AGAIN or the same error. */
static int resp_err(const char *s)
{
    size_t n = strlen(s);
    for (size_t k = 0; k < n; k++) {
        int rc = resp_n(s, k, NULL);
        if (rc != HB_AGAIN && !(rc == HB_ERROR)) {
            fprintf(stderr, "prefix %zu of %s parsed (%d)\n", k, s, rc);
            return 1;
        }
    }
    int rc = resp_n(s, n, NULL);
    return rc == HB_ERROR ? rh.error : rc;
}
static int req_err(const char *s)
{
    int rc = req(s);
    return rc == HB_ERROR ? qh.error : rc;
}

/* A complete head must be AGAIN for every strict prefix. */
static void check_prefixes_resp(const char *s)
{
    size_t n = strlen(s);
    int bad = 0;
    for (size_t k = 0; k < n; k++)
        if (resp_n(s, k, NULL) != HB_AGAIN) bad++;
    CHECK_EQ_INT(bad, 0);
    CHECK_EQ_INT(resp_n(s, n, NULL), (int)n);
}
static void check_prefixes_resp_lenient(const char *s)
{
    size_t n = strlen(s);
    int bad = 0;
    for (size_t k = 0; k < n; k++)
        if (resp_lenient_n(s, k) != HB_AGAIN) bad++;
    CHECK_EQ_INT(bad, 0);
    CHECK_EQ_INT(resp_lenient_n(s, n), (int)n);
}
static void check_prefixes_req(const char *s)
{
    size_t n = strlen(s);
    int bad = 0;
    for (size_t k = 0; k < n; k++)
        if (req_n(s, k, NULL) != HB_AGAIN) bad++;
    CHECK_EQ_INT(bad, 0);
    CHECK_EQ_INT(req_n(s, n, NULL), (int)n);
}

static void test_basic_response(void)
{
    const char *s = "HTTP/1.1 200 OK\r\nServer: x\r\nContent-Length: 13\r\n"
                    "Content-Type: text/plain\r\n\r\nHello, World!";
    int n = resp(s);
    CHECK_EQ_INT(n, (int)(strstr(s, "\r\n\r\n") - s + 4));
    CHECK_EQ_INT(rh.minor_version, 1);
    CHECK_EQ_INT(rh.status, 200);
    CHECK_MEM(rh.reason, rh.reason_len, "OK");
    CHECK_EQ_INT(rh.num_headers, 3);
    CHECK_MEM(hdrs[0].name, hdrs[0].name_len, "Server");
    CHECK_MEM(hdrs[0].value, hdrs[0].value_len, "x");
    CHECK_MEM(hdrs[2].name, hdrs[2].name_len, "Content-Type");
    CHECK_MEM(hdrs[2].value, hdrs[2].value_len, "text/plain");
    CHECK_EQ_INT(rh.framing.content_length, 13);
    CHECK_EQ_INT(rh.framing.chunked, 0);
    CHECK_EQ_INT(rh.framing.connection_close, 0);
    CHECK_EQ_INT(rh.error, HB_PE_NONE);
    CHECK_EQ_INT(hb_response_body_kind(&rh, 0), HB_BODY_LENGTH);
    CHECK_EQ_INT(hb_response_body_kind(&rh, 1), HB_BODY_NONE);
    CHECK_EQ_INT(hb_response_is_interim(&rh), 0);
    check_prefixes_resp("HTTP/1.1 200 OK\r\nServer: x\r\nContent-Length: 13\r\n\r\n");
    /* bare LF line ends: only under the lenient flag, each one counted */
    check_prefixes_resp_lenient("HTTP/1.0 404 Not Found\nA: b\n\n");
    CHECK_EQ_INT(rh.tolerated, 3);
    CHECK_EQ_INT(resp_err("HTTP/1.0 404 Not Found\nA: b\n\n"), HB_PE_BAD_LINE_ENDING);
    CHECK(resp("HTTP/1.1 200 OK\r\nServer: x\r\n\r\n") > 0);
    CHECK_EQ_INT(rh.tolerated, 0);
    /* an empty buffer, even a NULL one, is just incomplete */
    memset(&rh, 0, sizeof rh);
    CHECK_EQ_INT(hb_parse_response_head(NULL, 0, &rh, NULL), HB_AGAIN);
    memset(&qh, 0, sizeof qh);
    CHECK_EQ_INT(hb_parse_request_head(NULL, 0, &qh, NULL), HB_AGAIN);
    hb_chunked c;
    const char *d;
    size_t dl;
    hb_chunked_init(&c);
    CHECK_EQ_INT(hb_chunked_feed(&c, NULL, 0, &d, &dl), 0);
    CHECK_EQ_INT(dl, 0);
}

static void test_tolerated(void)
{
    /* case-insensitive names, OWS around values, empty/missing reason */
    CHECK(resp("HTTP/1.1 200 OK\r\ncOnTeNt-LeNgTh:   7 \t\r\n\r\n") > 0);
    CHECK_EQ_INT(rh.framing.content_length, 7);
    CHECK_MEM(hdrs[0].value, hdrs[0].value_len, "7");
    CHECK(resp("HTTP/1.1 200 \r\n\r\n") > 0);
    CHECK_EQ_INT(rh.reason_len, 0);
    CHECK(resp("HTTP/1.1 204\r\n\r\n") > 0);
    CHECK_EQ_INT(rh.status, 204);
    CHECK_EQ_INT(rh.reason_len, 0);
    CHECK(resp("HTTP/1.1 200 It is\tfine \xc3\xa9\r\nX-Empty:\r\nY:  \r\n\r\n") > 0);
    CHECK_MEM(rh.reason, rh.reason_len, "It is\tfine \xc3\xa9");
    CHECK_EQ_INT(rh.num_headers, 2);
    CHECK_EQ_INT(hdrs[0].value_len, 0);
    CHECK_EQ_INT(hdrs[1].value_len, 0);
    /* value with inner whitespace and obs-text kept verbatim */
    CHECK(resp("HTTP/1.1 200 OK\r\nX: a  b\tc\x80\xff\r\n\r\n") > 0);
    CHECK_MEM(hdrs[0].value, hdrs[0].value_len, "a  b\tc\x80\xff");
    /* leading empty lines are skipped */
    CHECK_EQ_INT(resp("\r\n\r\nHTTP/1.1 200 OK\r\n\r\n"), 23);
    CHECK_EQ_INT(resp_lenient("\r\n\nHTTP/1.1 200 OK\r\n\r\n"), 22);
    CHECK_EQ_INT(rh.tolerated, 1);
    CHECK_EQ_INT(resp_err("\r\n\nHTTP/1.1 200 OK\r\n\r\n"), HB_PE_BAD_LINE_ENDING);
    /* long value crossing the 8-byte scanner with a TAB inside */
    CHECK(resp("HTTP/1.1 200 OK\r\nX: 0123456789abcdef\t0123456789abcdef0123\r\n\r\n") > 0);
    CHECK_EQ_INT(hdrs[0].value_len, 37);
}

static void test_version_status(void)
{
    CHECK_EQ_INT(resp_err("HTTP/2.0 200 OK\r\n\r\n"), HB_PE_BAD_VERSION);
    CHECK_EQ_INT(resp_err("HTTP/1.x 200 OK\r\n\r\n"), HB_PE_BAD_VERSION);
    CHECK_EQ_INT(resp_err("http/1.1 200 OK\r\n\r\n"), HB_PE_BAD_VERSION);
    CHECK_EQ_INT(resp_err("HTTP/1.10 200 OK\r\n\r\n"), HB_PE_BAD_VERSION);
    CHECK_EQ_INT(resp_err("ICY 200 OK\r\n\r\n"), HB_PE_BAD_VERSION);
    CHECK_EQ_INT(resp_err("HTTP/1.1 20 OK\r\n\r\n"), HB_PE_BAD_STATUS);
    CHECK_EQ_INT(resp_err("HTTP/1.1 2000 OK\r\n\r\n"), HB_PE_BAD_STATUS);
    CHECK_EQ_INT(resp_err("HTTP/1.1 abc OK\r\n\r\n"), HB_PE_BAD_STATUS);
    CHECK_EQ_INT(resp_err("HTTP/1.1 099 OK\r\n\r\n"), HB_PE_BAD_STATUS);
    CHECK_EQ_INT(resp_err("HTTP/1.1 \r\n\r\n"), HB_PE_BAD_STATUS);
    CHECK_EQ_INT(resp_err("HTTP/1.1 200 O\x01K\r\n\r\n"), HB_PE_BAD_HEADER_CHAR);
    /* early rejection: junk is an error before any line end arrives */
    CHECK_EQ_INT(resp_n("XTTP", 4, NULL), HB_ERROR);
    CHECK_EQ_INT(rh.error, HB_PE_BAD_VERSION);
    CHECK_EQ_INT(resp_n("HTTP/1.1 2x", 11, NULL), HB_ERROR);
    CHECK_EQ_INT(rh.error, HB_PE_BAD_STATUS);
    CHECK(resp("HTTP/1.0 999 X\r\n\r\n") > 0);
    CHECK_EQ_INT(rh.minor_version, 0);
    CHECK_EQ_INT(rh.status, 999);
}

static void test_header_errors(void)
{
    CHECK_EQ_INT(resp_err("HTTP/1.1 200 OK\r\nNoColon\r\n\r\n"), HB_PE_NO_COLON);
    CHECK_EQ_INT(resp_err("HTTP/1.1 200 OK\r\nNo colon here\r\n\r\n"), HB_PE_NO_COLON);
    CHECK_EQ_INT(resp_err("HTTP/1.1 200 OK\r\nName : v\r\n\r\n"), HB_PE_SPACE_BEFORE_COLON);
    CHECK_EQ_INT(resp_err("HTTP/1.1 200 OK\r\nName\t: v\r\n\r\n"), HB_PE_SPACE_BEFORE_COLON);
    CHECK_EQ_INT(resp_err("HTTP/1.1 200 OK\r\nNa me: v\r\n\r\n"), HB_PE_SPACE_BEFORE_COLON);
    CHECK_EQ_INT(resp_err("HTTP/1.1 200 OK\r\n: v\r\n\r\n"), HB_PE_BAD_HEADER_CHAR);
    CHECK_EQ_INT(resp_err("HTTP/1.1 200 OK\r\nX(y): v\r\n\r\n"), HB_PE_BAD_HEADER_CHAR);
    CHECK_EQ_INT(resp_err("HTTP/1.1 200 OK\r\nX: a\x01"
                          "b\r\n\r\n"),
                 HB_PE_BAD_HEADER_CHAR);
    CHECK_EQ_INT(resp_err("HTTP/1.1 200 OK\r\nX: a\x7f\r\n\r\n"), HB_PE_BAD_HEADER_CHAR);
    CHECK_EQ_INT(resp_err("HTTP/1.1 200 OK\r\nX: a\x1b[0m\r\n\r\n"), HB_PE_BAD_HEADER_CHAR);
    CHECK_EQ_INT(resp_err("HTTP/1.1 200 OK\r\nX: a\rb\r\n\r\n"), HB_PE_BAD_LINE_ENDING);
    CHECK_EQ_INT(resp_err("HTTP/1.1 200 OK\rX: a\r\n\r\n"), HB_PE_BAD_LINE_ENDING);
    CHECK_EQ_INT(resp_err("HTTP/1.1 200 OK\r\nX: a\r\n\rZ"), HB_PE_BAD_LINE_ENDING);
    CHECK_EQ_INT(resp_err("HTTP/1.1 200 OK\r\nX: a\r\n folded\r\n\r\n"), HB_PE_OBS_FOLD);
    CHECK_EQ_INT(resp_err("HTTP/1.1 200 OK\r\n\tX: a\r\n\r\n"), HB_PE_OBS_FOLD);
    CHECK_EQ_INT(resp_err("\r\n\rHTTP/1.1 200 OK\r\n\r\n"), HB_PE_BAD_LINE_ENDING);
    CHECK_EQ_INT(req_err("\rGET / HTTP/1.1\r\n\r\n"), HB_PE_BAD_LINE_ENDING);
    /* NUL in a name and in a value (strlen cannot be used here) */
    static const char nul_name[] = "HTTP/1.1 200 OK\r\nX\0Y: a\r\n\r\n";
    CHECK_EQ_INT(resp_n(nul_name, sizeof nul_name - 1, NULL), HB_ERROR);
    CHECK_EQ_INT(rh.error, HB_PE_BAD_HEADER_CHAR);
    static const char nul_val[] = "HTTP/1.1 200 OK\r\nX: a\0b\r\n\r\n";
    CHECK_EQ_INT(resp_n(nul_val, sizeof nul_val - 1, NULL), HB_ERROR);
    CHECK_EQ_INT(rh.error, HB_PE_BAD_HEADER_CHAR);
    /* the same rules in requests */
    CHECK_EQ_INT(req_err("GET / HTTP/1.1\r\nHost : x\r\n\r\n"), HB_PE_SPACE_BEFORE_COLON);
    CHECK_EQ_INT(req_err("GET / HTTP/1.1\r\nHost\r\n\r\n"), HB_PE_NO_COLON);
}

/* The word-at-a-time scanners: an odd byte at every offset of long names,
 * values and targets is found exactly. */
static void test_scanner_offsets(void)
{
    char buf[256];
    const char *pre = "HTTP/1.1 200 OK\r\nX-Name-Long-Enough-To-Span-Words: ";
    size_t pl = strlen(pre);
    int bad = 0;
    for (size_t i = 0; i < 40; i++) {
        static const unsigned char odd[] = {0x00, 0x01, 0x08, 0x0b, 0x1f, 0x7f, '\t', 0x80, 0xff};
        for (size_t k = 0; k < sizeof odd; k++) {
            memcpy(buf, pre, pl);
            memset(buf + pl, 'v', 40);
            buf[pl + i] = (char)odd[k];
            memcpy(buf + pl + 40, "\r\n\r\n", 4);
            int rc = resp_n(buf, pl + 44, NULL);
            int ok = odd[k] == '\t' || odd[k] >= 0x80;
            if (ok) {
                /* a TAB at either end is OWS and trimmed */
                int edge = odd[k] == '\t' && (i == 0 || i == 39);
                size_t vl = edge ? 39 : 40, vo = edge && i == 0 ? 1 : 0;
                if (rc != (int)(pl + 44) || hdrs[0].value_len != vl ||
                    memcmp(hdrs[0].value, buf + pl + vo, vl) != 0)
                    bad++;
            } else if (rc != HB_ERROR || rh.error != HB_PE_BAD_HEADER_CHAR) {
                bad++;
            }
        }
        /* names: a separator at every offset */
        const char *hp = "HTTP/1.1 200 OK\r\n";
        size_t hl = strlen(hp);
        memcpy(buf, hp, hl);
        memset(buf + hl, 'n', 40);
        buf[hl + i] = i % 2 ? '@' : '\x01';
        memcpy(buf + hl + 40, ": v\r\n\r\n", 7);
        if (resp_n(buf, hl + 47, NULL) != HB_ERROR || rh.error != HB_PE_BAD_HEADER_CHAR) bad++;
        buf[hl + i] = '-';
        if (resp_n(buf, hl + 47, NULL) != (int)(hl + 47) || hdrs[0].name_len != 40) bad++;
        /* request targets: a control byte at every offset */
        memcpy(buf, "GET /", 5);
        memset(buf + 5, 't', 40);
        buf[5 + i] = i % 2 ? '\x7f' : '\x02';
        memcpy(buf + 45, " HTTP/1.1\r\n\r\n", 13);
        if (req_n(buf, 58, NULL) != HB_ERROR || qh.error != HB_PE_BAD_REQUEST_LINE) bad++;
        buf[5 + i] = '%';
        if (req_n(buf, 58, NULL) != 58 || qh.target_len != 41) bad++;
    }
    CHECK_EQ_INT(bad, 0);
}

static void test_content_length(void)
{
    CHECK_EQ_INT(resp_err("HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n"),
                 HB_PE_BAD_CONTENT_LENGTH);
    CHECK_EQ_INT(resp_err("HTTP/1.1 200 OK\r\nContent-Length: +5\r\n\r\n"),
                 HB_PE_BAD_CONTENT_LENGTH);
    CHECK_EQ_INT(resp_err("HTTP/1.1 200 OK\r\nContent-Length: 12a\r\n\r\n"),
                 HB_PE_BAD_CONTENT_LENGTH);
    CHECK_EQ_INT(resp_err("HTTP/1.1 200 OK\r\nContent-Length: 0x10\r\n\r\n"),
                 HB_PE_BAD_CONTENT_LENGTH);
    CHECK_EQ_INT(resp_err("HTTP/1.1 200 OK\r\nContent-Length:\r\n\r\n"), HB_PE_BAD_CONTENT_LENGTH);
    CHECK_EQ_INT(resp_err("HTTP/1.1 200 OK\r\nContent-Length: 1 2\r\n\r\n"),
                 HB_PE_BAD_CONTENT_LENGTH);
    CHECK_EQ_INT(resp_err("HTTP/1.1 200 OK\r\nContent-Length: 9223372036854775808\r\n\r\n"),
                 HB_PE_BAD_CONTENT_LENGTH);
    CHECK_EQ_INT(resp_err("HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999999\r\n\r\n"),
                 HB_PE_BAD_CONTENT_LENGTH);
    CHECK(resp("HTTP/1.1 200 OK\r\nContent-Length: 9223372036854775807\r\n\r\n") > 0);
    CHECK_EQ_INT(rh.framing.content_length, INT64_MAX);
    CHECK_EQ_INT(resp_err("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n"),
                 HB_PE_DUP_CONTENT_LENGTH);
    CHECK_EQ_INT(resp_err("HTTP/1.1 200 OK\r\nContent-Length: 5, 6\r\n\r\n"),
                 HB_PE_DUP_CONTENT_LENGTH);
    CHECK(resp("HTTP/1.1 200 OK\r\nContent-Length: 5\r\ncontent-length: 5\r\n\r\n") > 0);
    CHECK_EQ_INT(rh.framing.content_length, 5);
    CHECK(resp("HTTP/1.1 200 OK\r\nContent-Length: 5, 5\r\n\r\n") > 0);
    CHECK_EQ_INT(rh.framing.content_length, 5);
    CHECK(resp("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n") > 0);
    CHECK_EQ_INT(rh.framing.content_length, 0);
    CHECK_EQ_INT(hb_response_body_kind(&rh, 0), HB_BODY_LENGTH);
    CHECK(resp("HTTP/1.1 200 OK\r\nContent-Length: 007\r\n\r\n") > 0);
    CHECK_EQ_INT(rh.framing.content_length, 7);
    CHECK_EQ_INT(req_err("POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n"),
                 HB_PE_DUP_CONTENT_LENGTH);
}

static void test_framing(void)
{
    /* no body for 1xx, 204, 304 and HEAD */
    CHECK(resp("HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n") > 0);
    CHECK_EQ_INT(hb_response_body_kind(&rh, 0), HB_BODY_NONE);
    CHECK(resp("HTTP/1.1 304 Not Modified\r\nTransfer-Encoding: chunked\r\n\r\n") > 0);
    CHECK_EQ_INT(hb_response_body_kind(&rh, 0), HB_BODY_NONE);
    CHECK(resp("HTTP/1.1 100 Continue\r\n\r\n") > 0);
    CHECK_EQ_INT(hb_response_body_kind(&rh, 0), HB_BODY_NONE);
    CHECK_EQ_INT(hb_response_is_interim(&rh), 1);
    CHECK(resp("HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n") > 0);
    CHECK_EQ_INT(hb_response_is_interim(&rh), 1);
    CHECK(resp("HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\n") > 0);
    CHECK_EQ_INT(hb_response_is_interim(&rh), 0);
    CHECK_EQ_INT(hb_response_body_kind(&rh, 0), HB_BODY_NONE);
    CHECK(resp("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n") > 0);
    CHECK_EQ_INT(hb_response_body_kind(&rh, 1), HB_BODY_NONE);
    /* chunked, TE overriding CL, until close */
    CHECK(resp("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n") > 0);
    CHECK_EQ_INT(rh.framing.chunked, 1);
    CHECK_EQ_INT(rh.framing.transfer_encoding, 1);
    CHECK_EQ_INT(hb_response_body_kind(&rh, 0), HB_BODY_CHUNKED);
    CHECK(resp("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, CHUNKED\r\n\r\n") > 0);
    CHECK_EQ_INT(hb_response_body_kind(&rh, 0), HB_BODY_CHUNKED);
    CHECK(resp("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n") >
          0);
    CHECK_EQ_INT(hb_response_body_kind(&rh, 0), HB_BODY_CHUNKED);
    CHECK(resp("HTTP/1.1 200 OK\r\nContent-Length: 10\r\nTransfer-Encoding: chunked\r\n\r\n") > 0);
    CHECK_EQ_INT(hb_response_body_kind(&rh, 0), HB_BODY_CHUNKED);
    CHECK_EQ_INT(rh.framing.content_length, -1);
    CHECK_EQ_INT(rh.framing.connection_close, 1);
    CHECK(resp("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n") > 0);
    CHECK_EQ_INT(hb_response_body_kind(&rh, 0), HB_BODY_UNTIL_CLOSE);
    CHECK(resp("HTTP/1.1 200 OK\r\nTransfer-Encoding: identity\r\nContent-Length: 3\r\n\r\n") > 0);
    CHECK_EQ_INT(hb_response_body_kind(&rh, 0), HB_BODY_UNTIL_CLOSE);
    CHECK_EQ_INT(resp_err("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, chunked\r\n\r\n"),
                 HB_PE_BAD_TRANSFER_ENCODING);
    CHECK_EQ_INT(resp_err("HTTP/1.1 200 OK\r\nTransfer-Encoding: \r\n\r\n"),
                 HB_PE_BAD_TRANSFER_ENCODING);
    CHECK(resp("HTTP/1.1 200 OK\r\n\r\n") > 0);
    CHECK_EQ_INT(rh.framing.content_length, -1);
    CHECK_EQ_INT(hb_response_body_kind(&rh, 0), HB_BODY_UNTIL_CLOSE);
    /* connection management */
    CHECK(resp("HTTP/1.1 200 OK\r\nConnection: Keep-Alive, CLOSE\r\n\r\n") > 0);
    CHECK_EQ_INT(rh.framing.connection_close, 1);
    CHECK(resp("HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\n") > 0);
    CHECK_EQ_INT(rh.framing.connection_close, 1);
    CHECK(resp("HTTP/1.0 200 OK\r\nConnection: keep-alive\r\n\r\n") > 0);
    CHECK_EQ_INT(rh.framing.connection_close, 0);
    CHECK(resp("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n") > 0);
    CHECK_EQ_INT(rh.framing.connection_close, 1);
    CHECK(resp("HTTP/1.1 200 OK\r\nConnection: closed\r\n\r\n") > 0);
    CHECK_EQ_INT(rh.framing.connection_close, 0);
}

static void test_limits(void)
{
    /* head over max_head: rejected as soon as the buffer exceeds it */
    size_t big = 1 << 20;
    char *b = malloc(big);
    memcpy(b, "HTTP/1.1 200 OK\r\nX: ", 20);
    memset(b + 20, 'a', big - 20);
    CHECK_EQ_INT(resp_n(b, big, NULL), HB_ERROR);
    CHECK_EQ_INT(rh.error, HB_PE_HEAD_TOO_LARGE);
    CHECK_EQ_INT(rh.num_headers, sizeof hdrs / sizeof hdrs[0]); /* capacity kept */
    CHECK_EQ_INT(resp_n(b, HB_PARSE_DEFAULT_MAX_HEAD, NULL), HB_AGAIN);
    CHECK_EQ_INT(resp_n(b, HB_PARSE_DEFAULT_MAX_HEAD + 1, NULL), HB_ERROR);
    CHECK_EQ_INT(rh.error, HB_PE_HEAD_TOO_LARGE);
    /* a head of exactly max_head bytes fits; one more byte does not */
    hb_parse_limits lim = {.max_head = 100, .max_headers = 0};
    char h[200];
    memcpy(h, "HTTP/1.1 200 OK\r\nX: ", 20);
    memset(h + 20, 'a', 76);
    memcpy(h + 96, "\r\n\r\n", 4);
    CHECK_EQ_INT(resp_n(h, 100, &lim), 100);
    lim.max_head = 99;
    CHECK_EQ_INT(resp_n(h, 100, &lim), HB_ERROR);
    CHECK_EQ_INT(rh.error, HB_PE_HEAD_TOO_LARGE);
    CHECK_EQ_INT(req_n(b, big, NULL), HB_ERROR);
    CHECK_EQ_INT(qh.error, HB_PE_BAD_REQUEST_LINE);
    memcpy(b, "GET /", 5);
    memset(b + 5, 'a', big - 5);
    CHECK_EQ_INT(req_n(b, big, NULL), HB_ERROR);
    CHECK_EQ_INT(qh.error, HB_PE_HEAD_TOO_LARGE);

    /* header count: 128 ok, 129 too many; the array capacity also bounds it */
    size_t off = 0;
    off += (size_t)snprintf(b + off, big - off, "HTTP/1.1 200 OK\r\n");
    for (int i = 0; i < 128; i++)
        off += (size_t)snprintf(b + off, big - off, "H%d: v\r\n", i);
    size_t head128 = off + 2;
    memcpy(b + off, "\r\n", 2);
    CHECK_EQ_INT(resp_n(b, head128, NULL), (int)head128);
    CHECK_EQ_INT(rh.num_headers, 128);
    CHECK_MEM(hdrs[127].name, hdrs[127].name_len, "H127");
    off += (size_t)snprintf(b + off, big - off, "H128: v\r\n\r\n");
    CHECK_EQ_INT(resp_n(b, off, NULL), HB_ERROR);
    CHECK_EQ_INT(rh.error, HB_PE_TOO_MANY_HEADERS);
    lim.max_head = 0;
    lim.max_headers = 200;
    CHECK_EQ_INT(resp_n(b, off, &lim), (int)off);
    CHECK_EQ_INT(rh.num_headers, 129);
    lim.max_headers = 3;
    CHECK_EQ_INT(resp_n(b, off, &lim), HB_ERROR);
    CHECK_EQ_INT(rh.error, HB_PE_TOO_MANY_HEADERS);
    hb_header small[2];
    memset(&rh, 0, sizeof rh);
    rh.headers = small;
    rh.num_headers = 2;
    CHECK_EQ_INT(hb_parse_response_head(b, off, &rh, NULL), HB_ERROR);
    CHECK_EQ_INT(rh.error, HB_PE_TOO_MANY_HEADERS);
    CHECK_EQ_INT(rh.num_headers, 2);
    /* headers == NULL: counted, framing derived, nothing stored */
    memset(&rh, 0, sizeof rh);
    const char *s = "HTTP/1.1 200 OK\r\nA: 1\r\nContent-Length: 42\r\n\r\n";
    CHECK_EQ_INT(hb_parse_response_head(s, strlen(s), &rh, NULL), (int)strlen(s));
    CHECK_EQ_INT(rh.num_headers, 2);
    CHECK_EQ_INT(rh.framing.content_length, 42);
    free(b);
}

static void test_requests(void)
{
    const char *s = "POST /path?q=1 HTTP/1.1\r\nHost: example\r\nContent-Length: 3\r\n"
                    "Expect: 100-Continue\r\n\r\nabc";
    int n = req(s);
    CHECK_EQ_INT(n, (int)strlen(s) - 3);
    CHECK_MEM(qh.method, qh.method_len, "POST");
    CHECK_MEM(qh.target, qh.target_len, "/path?q=1");
    CHECK_EQ_INT(qh.minor_version, 1);
    CHECK_EQ_INT(qh.num_headers, 3);
    CHECK_EQ_INT(qh.framing.content_length, 3);
    CHECK_EQ_INT(qh.framing.expect_continue, 1);
    CHECK_EQ_INT(hb_request_body_kind(&qh), HB_BODY_LENGTH);
    check_prefixes_req("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    check_prefixes_req("\r\nGET /a HTTP/1.0\r\n\r\n");
    CHECK_EQ_INT(req_err("\r\nGET /a HTTP/1.0\n\n"), HB_PE_BAD_LINE_ENDING);
    CHECK(req("GET / HTTP/1.1\r\n\r\n") > 0);
    CHECK_EQ_INT(hb_request_body_kind(&qh), HB_BODY_NONE);
    CHECK_EQ_INT(qh.framing.connection_close, 0);
    CHECK(req("GET / HTTP/1.0\r\n\r\n") > 0);
    CHECK_EQ_INT(qh.framing.connection_close, 1);
    CHECK(req("PUT /u HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n") > 0);
    CHECK_EQ_INT(hb_request_body_kind(&qh), HB_BODY_CHUNKED);
    CHECK(req("PUT /u HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n") > 0);
    CHECK_EQ_INT(hb_request_body_kind(&qh), HB_BODY_CHUNKED);
    CHECK_EQ_INT(req_err("PUT /u HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n"),
                 HB_PE_BAD_TRANSFER_ENCODING);
    CHECK_EQ_INT(req_err("PUT /u HTTP/1.1\r\nTransfer-Encoding: chunked, gzip\r\n\r\n"),
                 HB_PE_BAD_TRANSFER_ENCODING);
    CHECK_EQ_INT(req_err("PUT /u HTTP/1.1\r\nTransfer-Encoding: chunked\r\n"
                         "Transfer-Encoding: chunked\r\n\r\n"),
                 HB_PE_BAD_TRANSFER_ENCODING);
    CHECK_EQ_INT(req_err("PUT /u HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n"),
                 HB_PE_BAD_TRANSFER_ENCODING);
    CHECK_EQ_INT(req_err("PUT /u HTTP/1.1\r\nContent-Length: 3\r\n"
                         "Transfer-Encoding: chunked\r\n\r\n"),
                 HB_PE_TE_AND_CONTENT_LENGTH);
    CHECK_EQ_INT(req_err("GET / HTTP/2.0\r\n\r\n"), HB_PE_BAD_VERSION);
    CHECK_EQ_INT(req_err("GET / HTTP/1.1 \r\n\r\n"), HB_PE_BAD_VERSION);
    CHECK_EQ_INT(req_err("GET /\r\n\r\n"), HB_PE_BAD_VERSION);
    CHECK_EQ_INT(req_err(" GET / HTTP/1.1\r\n\r\n"), HB_PE_BAD_REQUEST_LINE);
    CHECK_EQ_INT(req_err("G(T / HTTP/1.1\r\n\r\n"), HB_PE_BAD_REQUEST_LINE);
    CHECK_EQ_INT(req_err("GET /a\x01 HTTP/1.1\r\n\r\n"), HB_PE_BAD_REQUEST_LINE);
    CHECK_EQ_INT(req_err("GET\r\n\r\n"), HB_PE_BAD_REQUEST_LINE);
    CHECK_EQ_INT(req_err("GET / HTTP/1.1\rX\r\n\r\n"), HB_PE_BAD_LINE_ENDING);
}

/* ---- chunked ------------------------------------------------------------ */

/* Feed `in` in pieces of `step` bytes (0 = split once at `split`); collect the
 * body. Returns the total consumed, or HB_ERROR with *err set. */
static unsigned chunk_flags; /* HB_PARSE_* for the decoders decode() makes */
static unsigned chunk_tolerated;

static long decode(const char *in, size_t n, size_t step, size_t split, char *out, size_t *out_len,
                   int *err, int *done)
{
    hb_chunked c;
    hb_chunked_init_ex(&c, chunk_flags);
    size_t pos = 0, o = 0;
    long consumed = 0;
    while (pos < n && !c.done) {
        size_t piece = step ? step : (pos < split ? split - pos : n - pos);
        if (piece > n - pos) piece = n - pos;
        const char *p = in + pos;
        size_t left = piece;
        while (left > 0 && !c.done) {
            const char *d;
            size_t dl;
            ssize_t r = hb_chunked_feed(&c, p, left, &d, &dl);
            if (r < 0) {
                *err = c.error;
                return HB_ERROR;
            }
            if (dl) {
                CHECK(d >= p && d + dl <= p + r);
                memcpy(out + o, d, dl);
                o += dl;
            }
            CHECK(r > 0 || c.done);
            p += r;
            left -= (size_t)r;
            consumed += r;
        }
        pos += piece;
    }
    *out_len = o;
    *done = c.done;
    chunk_tolerated = c.tolerated;
    return consumed;
}

static void check_chunked(const char *in, size_t n, const char *body, size_t body_len,
                          size_t consumed)
{
    char out[4096];
    size_t ol;
    int err = 0, done = 0;
    int bad = 0;
    for (size_t step = 1; step <= n; step++) {
        long r = decode(in, n, step, 0, out, &ol, &err, &done);
        if (r != (long)consumed || ol != body_len || memcmp(out, body, ol) != 0 || !done) bad++;
    }
    for (size_t split = 0; split <= n; split++) {
        long r = decode(in, n, 0, split, out, &ol, &err, &done);
        if (r != (long)consumed || ol != body_len || memcmp(out, body, ol) != 0 || !done) bad++;
    }
    CHECK_EQ_INT(bad, 0);
}

static int chunked_err(const char *in)
{
    char out[4096];
    size_t ol;
    int err = 0, done = 0;
    size_t n = strlen(in);
    int first = 0;
    for (size_t step = 1; step <= n; step++) {
        long r = decode(in, n, step, 0, out, &ol, &err, &done);
        if (r != HB_ERROR) return 1;
        if (!first) first = err;
        if (err != first) return 2;
    }
    return first;
}

#define CHK_CHUNKED(in, body, extra)                                                               \
    check_chunked(in extra, sizeof(in extra) - 1, body, sizeof(body) - 1, sizeof(in) - 1)

static void test_chunked(void)
{
    CHK_CHUNKED("5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n", "hello world", "");
    CHK_CHUNKED("5\r\nhello\r\n0\r\n\r\n", "hello", "NEXT RESPONSE");
    CHK_CHUNKED("A;name=val;x\r\n0123456789\r\n0;last\r\n\r\n", "0123456789", "");
    CHK_CHUNKED("a \t;ext\r\n0123456789\r\n0\r\n\r\n", "0123456789", "");
    CHK_CHUNKED("000003\r\nabc\r\n0\r\nTrailer: v\r\nX-Sum:\r\n\r\n", "abc", "HTTP/1.1");
    /* bare LFs: only under the lenient flag, each one counted */
    chunk_flags = HB_PARSE_LENIENT_LF;
    CHK_CHUNKED("3\nabc\n0\n\n", "abc", "");
    CHECK_EQ_INT(chunk_tolerated, 4);
    CHK_CHUNKED("1;ext\nA\r\n0\r\nX: y\nZ: w\n\n", "A", "tail");
    CHECK_EQ_INT(chunk_tolerated, 4);
    CHK_CHUNKED("5\r\nhello\r\n0\r\n\r\n", "hello", "");
    CHECK_EQ_INT(chunk_tolerated, 0);
    chunk_flags = 0;
    CHECK_EQ_INT(chunked_err("3\nabc\n0\n\n"), HB_PE_BAD_LINE_ENDING);
    CHECK_EQ_INT(chunked_err("1;ext\nA\r\n0\r\nX: y\nZ: w\n\n"), HB_PE_BAD_LINE_ENDING);
    CHK_CHUNKED("0\r\n\r\n", "", "");
    CHK_CHUNKED("4\r\n\0\r\n\xff\r\n0\r\n\r\n", "\0\r\n\xff", "");
    CHK_CHUNKED("1F\r\n0123456789abcdef0123456789abcde\r\n0\r\n\r\n",
                "0123456789abcdef0123456789abcde", "");

    CHECK_EQ_INT(chunked_err("x\r\n"), HB_PE_BAD_CHUNK_SIZE);
    CHECK_EQ_INT(chunked_err("-1\r\n"), HB_PE_BAD_CHUNK_SIZE);
    CHECK_EQ_INT(chunked_err("0x5\r\n"), HB_PE_BAD_CHUNK_SIZE);
    CHECK_EQ_INT(chunked_err("5 5\r\n"), HB_PE_BAD_CHUNK_SIZE);
    CHECK_EQ_INT(chunked_err(";ext\r\n"), HB_PE_BAD_CHUNK_SIZE);
    CHECK_EQ_INT(chunked_err("\r\n"), HB_PE_BAD_CHUNK_SIZE);
    CHECK_EQ_INT(chunked_err("10000000000000000\r\n"), HB_PE_CHUNK_SIZE_OVERFLOW);
    CHECK_EQ_INT(chunked_err("8000000000000000\r\n"), HB_PE_CHUNK_SIZE_OVERFLOW);
    CHECK_EQ_INT(chunked_err("5\rX"), HB_PE_BAD_LINE_ENDING);
    CHECK_EQ_INT(chunked_err("5\r\nhelloX"), HB_PE_BAD_CHUNK);
    CHECK_EQ_INT(chunked_err("5\r\nhello\rX"), HB_PE_BAD_CHUNK);
    CHECK_EQ_INT(chunked_err("1;a\x01\r\n"), HB_PE_BAD_CHUNK);
    CHECK_EQ_INT(chunked_err("0\r\nNoColon\r\n\r\n"), HB_PE_BAD_CHUNK);
    CHECK_EQ_INT(chunked_err("0\r\n folded\r\n\r\n"), HB_PE_BAD_CHUNK);
    CHECK_EQ_INT(chunked_err("0\r\nX: a\x02\r\n\r\n"), HB_PE_BAD_CHUNK);
    CHECK_EQ_INT(chunked_err("0\r\nX: a\rb"), HB_PE_BAD_LINE_ENDING);
    CHECK_EQ_INT(chunked_err("0\r\n\rX"), HB_PE_BAD_LINE_ENDING);

    /* 7fffffffffffffff is the largest size: accepted, data pending */
    hb_chunked c;
    const char *d;
    size_t dl;
    hb_chunked_init(&c);
    CHECK_EQ_INT(hb_chunked_feed(&c, "7fffffffffffffff\r\nab", 20, &d, &dl), 20);
    CHECK_EQ_INT(dl, 2);
    CHECK(c.remaining == (uint64_t)INT64_MAX - 2);

    /* line bounds: a size line of leading zeros or a long extension */
    static char big[HB_CHUNK_MAX_LINE + 100];
    memset(big, '0', sizeof big);
    hb_chunked_init(&c);
    CHECK_EQ_INT(hb_chunked_feed(&c, big, sizeof big, &d, &dl), HB_ERROR);
    CHECK_EQ_INT(c.error, HB_PE_CHUNK_LINE_TOO_LONG);
    big[0] = '1';
    big[1] = ';';
    memset(big + 2, 'e', sizeof big - 2);
    hb_chunked_init(&c);
    CHECK_EQ_INT(hb_chunked_feed(&c, big, sizeof big, &d, &dl), HB_ERROR);
    CHECK_EQ_INT(c.error, HB_PE_CHUNK_LINE_TOO_LONG);
    /* errors are sticky */
    CHECK_EQ_INT(hb_chunked_feed(&c, "0\r\n\r\n", 5, &d, &dl), HB_ERROR);
    /* trailer line and trailer section bounds */
    memcpy(big, "0\r\nX: ", 6);
    memset(big + 6, 'v', sizeof big - 6);
    hb_chunked_init(&c);
    CHECK_EQ_INT(hb_chunked_feed(&c, big, sizeof big, &d, &dl), HB_ERROR);
    CHECK_EQ_INT(c.error, HB_PE_CHUNK_LINE_TOO_LONG);
    hb_chunked_init(&c);
    CHECK_EQ_INT(hb_chunked_feed(&c, "0\r\n", 3, &d, &dl), 3);
    int rc = 0;
    for (int i = 0; i < 10000 && rc >= 0; i++) {
        static const char line[] = "X-Trailer: 0123456789abcdef\r\n";
        rc = (int)hb_chunked_feed(&c, line, sizeof line - 1, &d, &dl);
    }
    CHECK_EQ_INT(rc, HB_ERROR);
    CHECK_EQ_INT(c.error, HB_PE_TRAILERS_TOO_LARGE);
    /* done: nothing more is consumed */
    hb_chunked_init(&c);
    CHECK_EQ_INT(hb_chunked_feed(&c, "0\r\n\r\nXYZ", 8, &d, &dl), 5);
    CHECK_EQ_INT(c.done, 1);
    CHECK_EQ_INT(hb_chunked_feed(&c, "XYZ", 3, &d, &dl), 0);
    /* a data run ends the call even with more input behind it */
    hb_chunked_init(&c);
    CHECK_EQ_INT(hb_chunked_feed(&c, "2\r\nab\r\n0\r\n\r\n", 12, &d, &dl), 5);
    CHECK_MEM(d, dl, "ab");
}

/* ---- strict RFC 9112 framing -------------------------------------------- */

/* A request head that parses as chunked, then its body through the decoder:
 * the decoder's error, or 0 when the body ended with bytes left over (the
 * next request) or 1 when it ended exactly. */
static int request_then_body(const char *s)
{
    size_t n = strlen(s);
    int h = req_n(s, n, NULL);
    if (h <= 0 || hb_request_body_kind(&qh) != HB_BODY_CHUNKED) return 2;
    hb_chunked c;
    hb_chunked_init(&c);
    size_t pos = (size_t)h;
    while (pos < n && !c.done) {
        const char *d;
        size_t dl;
        ssize_t r = hb_chunked_feed(&c, s + pos, n - pos, &d, &dl);
        if (r < 0) return c.error;
        pos += (size_t)r;
    }
    return pos == n ? 1 : 0;
}

static void test_strict_smuggling_vectors(void)
{
    /* bare LF after chunk data: a lenient proxy and a strict origin would
     * disagree on where the second request starts */
    CHECK_EQ_INT(request_then_body("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
                                   "3\r\nabc\n0\r\n\r\nGET /smuggled HTTP/1.1\r\n\r\n"),
                 HB_PE_BAD_LINE_ENDING);
    CHECK_EQ_INT(request_then_body("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
                                   "3\r\nabc\r\n0\r\n\r\nGET /next HTTP/1.1\r\n\r\n"),
                 0);
    CHECK_EQ_INT(chunked_err("3\r\nabc\n0\r\n\r\n"), HB_PE_BAD_LINE_ENDING);
    CHECK_EQ_INT(chunked_err("3\nabc\r\n0\r\n\r\n"), HB_PE_BAD_LINE_ENDING);
    CHECK_EQ_INT(chunked_err("0\n\r\n"), HB_PE_BAD_LINE_ENDING);
    CHECK_EQ_INT(chunked_err("0\r\n\n"), HB_PE_BAD_LINE_ENDING);
    CHECK_EQ_INT(chunked_err("0\r\nX: y\n\r\n"), HB_PE_BAD_LINE_ENDING);
    /* LF inside a chunk extension */
    CHECK_EQ_INT(chunked_err("1;a\nb\r\nX\r\n0\r\n\r\n"), HB_PE_BAD_LINE_ENDING);
    CHECK_EQ_INT(chunked_err("1;a=b\nX\r\n0\r\n\r\n"), HB_PE_BAD_LINE_ENDING);
    CHECK_EQ_INT(chunked_err("1;a=\"x\ny\"\r\nX\r\n0\r\n\r\n"), HB_PE_BAD_CHUNK);
    /* whitespace after the size is BWS only before a ';' */
    CHECK_EQ_INT(chunked_err("3 \r\nabc\r\n0\r\n\r\n"), HB_PE_BAD_CHUNK_SIZE);
    CHECK_EQ_INT(chunked_err("3\t\r\nabc\r\n0\r\n\r\n"), HB_PE_BAD_CHUNK_SIZE);
    CHECK_EQ_INT(chunked_err("0 \r\n\r\n"), HB_PE_BAD_CHUNK_SIZE);
    /* extensions by the grammar */
    CHECK_EQ_INT(chunked_err("2;\r\nab\r\n0\r\n\r\n"), HB_PE_BAD_CHUNK);
    CHECK_EQ_INT(chunked_err("2; \r\nab\r\n0\r\n\r\n"), HB_PE_BAD_CHUNK);
    CHECK_EQ_INT(chunked_err("2;;a\r\nab\r\n0\r\n\r\n"), HB_PE_BAD_CHUNK);
    CHECK_EQ_INT(chunked_err("2;a b\r\nab\r\n0\r\n\r\n"), HB_PE_BAD_CHUNK);
    CHECK_EQ_INT(chunked_err("2;a \r\nab\r\n0\r\n\r\n"), HB_PE_BAD_CHUNK);
    CHECK_EQ_INT(chunked_err("2;a=\r\nab\r\n0\r\n\r\n"), HB_PE_BAD_CHUNK);
    CHECK_EQ_INT(chunked_err("2;a==b\r\nab\r\n0\r\n\r\n"), HB_PE_BAD_CHUNK);
    CHECK_EQ_INT(chunked_err("2;=b\r\nab\r\n0\r\n\r\n"), HB_PE_BAD_CHUNK);
    CHECK_EQ_INT(chunked_err("2;a=b c\r\nab\r\n0\r\n\r\n"), HB_PE_BAD_CHUNK);
    CHECK_EQ_INT(chunked_err("2;a=b \r\nab\r\n0\r\n\r\n"), HB_PE_BAD_CHUNK);
    CHECK_EQ_INT(chunked_err("2;a=\"b\r\nab\r\n0\r\n\r\n"), HB_PE_BAD_CHUNK);
    CHECK_EQ_INT(chunked_err("2;a=\"b\"c\r\nab\r\n0\r\n\r\n"), HB_PE_BAD_CHUNK);
    CHECK_EQ_INT(chunked_err("2;a=\"\\\x01\"\r\nab\r\n0\r\n\r\n"), HB_PE_BAD_CHUNK);
    CHECK_EQ_INT(chunked_err("2;a(b)\r\nab\r\n0\r\n\r\n"), HB_PE_BAD_CHUNK);
    CHECK_EQ_INT(chunked_err("2;a=b\rX"), HB_PE_BAD_LINE_ENDING);
    /* valid extensions, BWS around ';' and '=' included */
    CHK_CHUNKED("2 ; a = b ;c= \"q\\\"d;\" ; e\r\nab\r\n0;f=\"\"\r\n\r\n", "ab", "");
    CHK_CHUNKED("2;a=\"\t \x80\"\r\nab\r\n0\r\n\r\n", "ab", "");

    /* Transfer-Encoding: codings by the grammar, "chunked" last and bare */
    static const char *bad_te[] = {
        "chunked x",
        "chunked;q=1",
        "chunked ;q=1",
        "gzip, chunked;x=\"y\"",
        "x y, chunked",
        "gzip;level, chunked",
        "gzip;level=, chunked",
        "gzip;=1, chunked",
        "gzip;a=\"b, chunked",
        "gzip;a=b c, chunked",
        "gzip;a=\"b\"c, chunked",
        "chunked\"",
        "chunked, chunked",
    };
    for (size_t i = 0; i < sizeof bad_te / sizeof bad_te[0]; i++) {
        char b[256];
        snprintf(b, sizeof b, "PUT / HTTP/1.1\r\nTransfer-Encoding: %s\r\n\r\n", bad_te[i]);
        int e = req_err(b);
        CHECK_EQ_INT(e, HB_PE_BAD_TRANSFER_ENCODING);
        if (e != HB_PE_BAD_TRANSFER_ENCODING) fprintf(stderr, "  accepted: %s\n", bad_te[i]);
        snprintf(b, sizeof b, "HTTP/1.1 200 OK\r\nTransfer-Encoding: %s\r\n\r\n", bad_te[i]);
        CHECK_EQ_INT(resp_err(b), HB_PE_BAD_TRANSFER_ENCODING);
    }
    static const char *good_te[] = {
        "chunked",
        "gzip, chunked",
        "gzip;level=1, chunked",
        "gzip ; level = \"a\\\"b,\" , chunked",
        "chunked,",
        ", chunked",
        "x;a=1;b=2 ,, CHUNKED",
    };
    for (size_t i = 0; i < sizeof good_te / sizeof good_te[0]; i++) {
        char b[256];
        snprintf(b, sizeof b, "PUT / HTTP/1.1\r\nTransfer-Encoding: %s\r\n\r\n", good_te[i]);
        CHECK(req(b) > 0);
        CHECK_EQ_INT(hb_request_body_kind(&qh), HB_BODY_CHUNKED);
        snprintf(b, sizeof b, "HTTP/1.1 200 OK\r\nTransfer-Encoding: %s\r\n\r\n", good_te[i]);
        CHECK(resp(b) > 0);
        CHECK_EQ_INT(hb_response_body_kind(&rh, 0), HB_BODY_CHUNKED);
    }
    /* a valid list not ending in chunked: a request is refused, a response is
     * read until close (and flagged so a client can refuse it) */
    CHECK_EQ_INT(req_err("PUT / HTTP/1.1\r\nTransfer-Encoding: gzip;level=1\r\n\r\n"),
                 HB_PE_BAD_TRANSFER_ENCODING);
    CHECK(resp("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip;level=1\r\n\r\n") > 0);
    CHECK_EQ_INT(hb_response_body_kind(&rh, 0), HB_BODY_UNTIL_CLOSE);
    CHECK(rh.framing.transfer_encoding && !rh.framing.chunked);

    /* a bare LF ending a header line must not hide the next field */
    CHECK_EQ_INT(req_err("POST / HTTP/1.1\r\nHost: a\nContent-Length: 5\r\n\r\nhello"),
                 HB_PE_BAD_LINE_ENDING);
    CHECK_EQ_INT(req_err("GET / HTTP/1.1\n\n"), HB_PE_BAD_LINE_ENDING);
    CHECK_EQ_INT(req_err("GET / HTTP/1.1\r\nHost: a\n\r\n"), HB_PE_BAD_LINE_ENDING);
    CHECK_EQ_INT(req_err("GET / HTTP/1.1\r\nHost: a\r\n\n"), HB_PE_BAD_LINE_ENDING);
    CHECK_EQ_INT(req_err("\nGET / HTTP/1.1\r\n\r\n"), HB_PE_BAD_LINE_ENDING);
    CHECK_EQ_INT(resp_err("HTTP/1.1 200 OK\r\nX: a\nContent-Length: 5\r\n\r\n"),
                 HB_PE_BAD_LINE_ENDING);
    CHECK_EQ_INT(resp_err("HTTP/1.1 200 OK\n\r\n"), HB_PE_BAD_LINE_ENDING);
    CHECK(resp_lenient("HTTP/1.1 200 OK\r\nX: a\nContent-Length: 5\r\n\r\n") > 0);
    CHECK_EQ_INT(rh.framing.content_length, 5);
    CHECK_EQ_INT(rh.num_headers, 2);
    CHECK_EQ_INT(rh.tolerated, 1);
    /* the flag relaxes line ends only */
    CHECK_EQ_INT(resp_lenient("HTTP/1.1 200 OK\r\nX: a\rb\r\n\r\n"), HB_ERROR);
    CHECK_EQ_INT(rh.error, HB_PE_BAD_LINE_ENDING);
    CHECK_EQ_INT(resp_lenient("HTTP/1.1  200 OK\n\n"), HB_ERROR);
    CHECK_EQ_INT(rh.error, HB_PE_BAD_STATUS);

    /* start lines: exactly one SP between the parts */
    CHECK_EQ_INT(resp_err("HTTP/1.1  200 OK\r\n\r\n"), HB_PE_BAD_STATUS);
    CHECK_EQ_INT(resp_err("HTTP/1.1\t200 OK\r\n\r\n"), HB_PE_BAD_VERSION);
    CHECK_EQ_INT(resp_err("HTTP/1.1 200\tOK\r\n\r\n"), HB_PE_BAD_STATUS);
    CHECK(resp("HTTP/1.1 200  OK\r\n\r\n") > 0); /* the reason is " OK" */
    CHECK_MEM(rh.reason, rh.reason_len, " OK");
    CHECK_EQ_INT(req_err("GET  / HTTP/1.1\r\n\r\n"), HB_PE_BAD_REQUEST_LINE);
    CHECK_EQ_INT(req_err("GET /  HTTP/1.1\r\n\r\n"), HB_PE_BAD_VERSION);
    CHECK_EQ_INT(req_err("GET\t/ HTTP/1.1\r\n\r\n"), HB_PE_BAD_REQUEST_LINE);
    /* request-target is URI syntax: ASCII only, a non-ASCII byte at any offset fails */
    char buf[64];
    int bad = 0;
    for (size_t i = 0; i < 30; i++) {
        memcpy(buf, "GET /", 5);
        memset(buf + 5, 'p', 30);
        buf[5 + i] = i % 2 ? '\x80' : '\xff';
        memcpy(buf + 35, " HTTP/1.1\r\n\r\n", 13);
        if (req_n(buf, 48, NULL) != HB_ERROR || qh.error != HB_PE_BAD_REQUEST_LINE) bad++;
    }
    CHECK_EQ_INT(bad, 0);
}

static void test_strerror(void)
{
    int codes[] = {HB_PE_BAD_VERSION,
                   HB_PE_BAD_STATUS,
                   HB_PE_BAD_CONTENT_LENGTH,
                   HB_PE_DUP_CONTENT_LENGTH,
                   HB_PE_BAD_CHUNK_SIZE,
                   HB_PE_CHUNK_SIZE_OVERFLOW,
                   HB_PE_NO_COLON,
                   HB_PE_SPACE_BEFORE_COLON,
                   HB_PE_BAD_HEADER_CHAR,
                   HB_PE_HEAD_TOO_LARGE,
                   HB_PE_TOO_MANY_HEADERS,
                   HB_PE_BAD_REQUEST_LINE,
                   HB_PE_BAD_CHUNK,
                   HB_PE_BAD_TRANSFER_ENCODING,
                   HB_PE_BAD_LINE_ENDING,
                   HB_PE_OBS_FOLD,
                   HB_PE_TE_AND_CONTENT_LENGTH,
                   HB_PE_CHUNK_LINE_TOO_LONG,
                   HB_PE_TRAILERS_TOO_LARGE};
    size_t n = sizeof codes / sizeof codes[0];
    for (size_t i = 0; i < n; i++) {
        CHECK(hb_is_protocol_error(codes[i]));
        CHECK(strcmp(hb_parse_strerror(codes[i]), "protocol error") != 0);
        CHECK(strcmp(hb_strerror(codes[i]), hb_parse_strerror(codes[i])) == 0);
        for (size_t j = 0; j < i; j++)
            CHECK(strcmp(hb_parse_strerror(codes[i]), hb_parse_strerror(codes[j])) != 0);
    }
    CHECK(strcmp(hb_parse_strerror(-5099), "protocol error") == 0);
}

int main(void)
{
    test_basic_response();
    test_tolerated();
    test_version_status();
    test_header_errors();
    test_scanner_offsets();
    test_content_length();
    test_framing();
    test_limits();
    test_requests();
    test_chunked();
    test_strict_smuggling_vectors();
    test_strerror();
    HB_TEST_MAIN_END();
}
