/* test_request.c - URL splitting and request-head building: every rule, every error. */
#include <stdint.h>
#include <string.h>

#include "http/hb_request.h"
#include "hb_test.h"

#define CHECK_STR(p, n, lit) CHECK_MEM((p), (n), lit)

static int split(const char *url, hb_url *u, char *err)
{
    err[0] = '\0';
    return hb_url_split(url, strlen(url), u, err);
}

static void check_err(const char *url, const char *why)
{
    hb_url u;
    char err[HB_ERR_LEN];
    CHECK_EQ_INT(split(url, &u, err), HB_E_INVALID);
    if (!strstr(err, why)) fprintf(stderr, "  %s -> %s (want %s)\n", url, err, why);
    CHECK(strstr(err, why) != NULL);
}

static void test_url_basic(void)
{
    hb_url u;
    char err[HB_ERR_LEN], t[256];
    CHECK_EQ_INT(split("http://example.com", &u, err), 0);
    CHECK(!u.tls);
    CHECK_EQ_INT(u.port, 80);
    CHECK_STR(u.host, u.host_len, "example.com");
    CHECK_STR(u.host_header, u.host_header_len, "example.com");
    CHECK_EQ_INT(u.target_len, 0);
    CHECK(u.target_slash);
    CHECK_EQ_INT(hb_url_target(&u, t, sizeof t, err), 1);
    CHECK(strcmp(t, "/") == 0);
    CHECK(u.user == NULL && u.pass == NULL);

    CHECK_EQ_INT(split("HTTPS://Host.Example:8443/a/b?x=1&y#frag", &u, err), 0);
    CHECK(u.tls);
    CHECK_EQ_INT(u.port, 8443);
    CHECK_STR(u.host, u.host_len, "Host.Example");
    CHECK_STR(u.host_header, u.host_header_len, "Host.Example:8443");
    CHECK_STR(u.target, u.target_len, "/a/b?x=1&y");
    CHECK(!u.target_slash);
    CHECK_EQ_INT(hb_url_target_len(&u), 10);

    /* Query without a path: "/" is prepended. */
    CHECK_EQ_INT(split("http://h?a=1", &u, err), 0);
    CHECK_EQ_INT(hb_url_target(&u, t, sizeof t, err), 5);
    CHECK(strcmp(t, "/?a=1") == 0);
    CHECK_EQ_INT(hb_url_target(&u, t, 5, err), HB_E_INVALID);
    /* Fragment only. */
    CHECK_EQ_INT(split("http://h#f", &u, err), 0);
    CHECK_EQ_INT(hb_url_target(&u, t, sizeof t, err), 1);
}

static void test_url_ports(void)
{
    hb_url u;
    char err[HB_ERR_LEN];
    /* The default port is left out of Host, whether written or not. */
    CHECK_EQ_INT(split("http://h:80/", &u, err), 0);
    CHECK_EQ_INT(u.port, 80);
    CHECK_STR(u.host_header, u.host_header_len, "h");
    CHECK_EQ_INT(split("https://h:443/", &u, err), 0);
    CHECK_EQ_INT(u.port, 443);
    CHECK_STR(u.host_header, u.host_header_len, "h");
    CHECK_EQ_INT(split("https://h:80/", &u, err), 0);
    CHECK_STR(u.host_header, u.host_header_len, "h:80");
    CHECK_EQ_INT(split("https://h/", &u, err), 0);
    CHECK_EQ_INT(u.port, 443);
    /* An empty port is the default. */
    CHECK_EQ_INT(split("http://h:/x", &u, err), 0);
    CHECK_EQ_INT(u.port, 80);
    CHECK_STR(u.host_header, u.host_header_len, "h");
    CHECK_EQ_INT(split("http://h:65535", &u, err), 0);
    CHECK_EQ_INT(u.port, 65535);
    CHECK_EQ_INT(split("http://h:1", &u, err), 0);
    CHECK_EQ_INT(u.port, 1);
}

static void test_url_ipv6(void)
{
    hb_url u;
    char err[HB_ERR_LEN];
    CHECK_EQ_INT(split("https://[::1]:8443/p", &u, err), 0);
    CHECK_STR(u.host, u.host_len, "::1");
    CHECK_STR(u.host_header, u.host_header_len, "[::1]:8443");
    CHECK_EQ_INT(u.port, 8443);
    CHECK_EQ_INT(split("http://[::ffff:127.0.0.1]/", &u, err), 0);
    CHECK_STR(u.host, u.host_len, "::ffff:127.0.0.1");
    CHECK_STR(u.host_header, u.host_header_len, "[::ffff:127.0.0.1]");
    CHECK_EQ_INT(u.port, 80);
}

static void test_url_userinfo(void)
{
    hb_url u;
    char err[HB_ERR_LEN], b[128];
    CHECK_EQ_INT(split("https://user:pw@[::1]:8443/p?q=1#frag", &u, err), 0);
    CHECK_STR(u.user, u.user_len, "user");
    CHECK_STR(u.pass, u.pass_len, "pw");
    CHECK_STR(u.host, u.host_len, "::1");
    CHECK_STR(u.host_header, u.host_header_len, "[::1]:8443");
    CHECK_STR(u.target, u.target_len, "/p?q=1");
    int n = hb_url_basic_auth(&u, b, sizeof b, err);
    CHECK_STR(b, (size_t)n, "Basic dXNlcjpwdw==");
    CHECK((size_t)n < hb_url_basic_auth_len(&u));
    /* Too small a buffer. */
    CHECK_EQ_INT(hb_url_basic_auth(&u, b, 5, err), HB_E_INVALID);
    /* User only: an empty password. */
    CHECK_EQ_INT(split("http://u@h/", &u, err), 0);
    CHECK(u.pass == NULL);
    n = hb_url_basic_auth(&u, b, sizeof b, err);
    CHECK_STR(b, (size_t)n, "Basic dTo="); /* "u:" */
    /* Percent-decoded; the last '@' ends the userinfo; bad escapes stay. */
    CHECK_EQ_INT(split("http://a%40b:p@ss@h/", &u, err), 0);
    CHECK_STR(u.host, u.host_len, "h");
    CHECK_STR(u.pass, u.pass_len, "p@ss");
    n = hb_url_basic_auth(&u, b, sizeof b, err);
    CHECK_STR(b, (size_t)n, "Basic YUBiOnBAc3M="); /* "a@b:p@ss" */
    CHECK_EQ_INT(split("http://%zz:%4@h/", &u, err), 0);
    n = hb_url_basic_auth(&u, b, sizeof b, err);
    CHECK_STR(b, (size_t)n, "Basic JXp6OiU0"); /* "%zz:%4" */
    /* 3-byte multiple: no padding. */
    CHECK_EQ_INT(split("http://ab:cd@h/", &u, err), 0);
    n = hb_url_basic_auth(&u, b, sizeof b, err);
    CHECK_STR(b, (size_t)n, "Basic YWI6Y2Q="); /* "ab:cd" */
    CHECK_EQ_INT(split("http://abc:de@h/", &u, err), 0);
    n = hb_url_basic_auth(&u, b, sizeof b, err);
    CHECK_STR(b, (size_t)n, "Basic YWJjOmRl");
    /* No userinfo. */
    CHECK_EQ_INT(split("http://h/", &u, err), 0);
    CHECK_EQ_INT(hb_url_basic_auth_len(&u), 0);
    CHECK_EQ_INT(hb_url_basic_auth(&u, b, sizeof b, err), 0);
}

static void test_url_errors(void)
{
    check_err("", "non-empty");
    check_err("127.0.0.1:80/", "missing scheme");
    check_err("ftp://x/", "scheme must be http or https");
    check_err("http:/x", "missing scheme");
    check_err("http://", "no host");
    check_err("http://:80/", "no host");
    check_err("http://u:p@/", "no host");
    check_err("http://[]/", "no host");
    check_err("http://h:99999/", "port must be in 1..65535");
    check_err("http://h:0/", "port must be in 1..65535");
    check_err("http://h:99999999999999999999/", "port must be in 1..65535");
    check_err("http://h:x/", "invalid port");
    check_err("http://h:8a/", "invalid port");
    check_err("http://h/a b", "whitespace");
    check_err("http://h/a\tb", "whitespace");
    check_err("http://h/\r\nX: y", "whitespace");
    check_err("http://h/\xc3\xa9", "non-ASCII");
    check_err("http://h/\x7f", "control");
    check_err("http://[::1/", "invalid IPv6 host");
    check_err("http://[::1]x/", "invalid IPv6 host");
    check_err("http://[g::1]/", "invalid IPv6 host");
    check_err("http://h]/", "invalid IPv6 host");
    /* The text names the URL, quoted and escaped. */
    hb_url u;
    char err[HB_ERR_LEN];
    split("http://h/\n", &u, err);
    CHECK(strstr(err, "invalid URL 'http://h/\\n'") != NULL);
    /* Long URLs are cut, never overflowing err. */
    char big[2000];
    memset(big, 'a', sizeof big);
    memcpy(big, "http://h:0/", 11);
    CHECK_EQ_INT(hb_url_split(big, sizeof big, &u, err), HB_E_INVALID);
    CHECK(strlen(err) < HB_ERR_LEN && strstr(err, "...") != NULL);
    /* A NULL err is fine. */
    CHECK_EQ_INT(hb_url_split("x", 1, &u, NULL), HB_E_INVALID);
}

static int head(const char *method, const char *url, const hb_header *hs, size_t nh,
                int64_t body_len, int keepalive, const char *ua, char *buf, size_t cap, char *err)
{
    hb_url u;
    int rc = split(url, &u, err);
    if (rc < 0) return rc;
    hb_head_spec s = {method, strlen(method), &u, hs, nh, body_len, keepalive, ua};
    size_t bound = hb_build_head_bound(&s);
    rc = hb_build_head(buf, cap, &s, err);
    if (rc >= 0) CHECK((size_t)rc < bound);
    return rc;
}

#define H(n, v)                                                                                    \
    {                                                                                              \
        n, sizeof(n) - 1, v, sizeof(v) - 1                                                         \
    }

static void test_head_basic(void)
{
    char buf[1024], err[HB_ERR_LEN];
    int n =
        head("GET", "http://h:8080/x?q=1", NULL, 0, HB_REQ_NO_BODY, 1, NULL, buf, sizeof buf, err);
    CHECK_STR(buf, (size_t)n, "GET /x?q=1 HTTP/1.1\r\nHost: h:8080\r\n\r\n");
    CHECK(buf[n] == '\0');
    /* Body length, Connection: close (what the engine's builder did). */
    n = head("POST", "http://h:1/a?b=1", NULL, 0, 3, 0, NULL, buf, sizeof buf, err);
    CHECK_STR(
        buf, (size_t)n,
        "POST /a?b=1 HTTP/1.1\r\nHost: h:1\r\nContent-Length: 3\r\nConnection: close\r\n\r\n");
    /* POST/PUT/PATCH without a body get Content-Length: 0 (any case). */
    n = head("put", "http://h/", NULL, 0, HB_REQ_NO_BODY, 1, NULL, buf, sizeof buf, err);
    CHECK_STR(buf, (size_t)n, "put / HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n");
    n = head("PATCH", "http://h/", NULL, 0, HB_REQ_NO_BODY, 1, NULL, buf, sizeof buf, err);
    CHECK(strstr(buf, "Content-Length: 0\r\n") != NULL);
    n = head("DELETE", "http://h/", NULL, 0, HB_REQ_NO_BODY, 1, NULL, buf, sizeof buf, err);
    CHECK(strstr(buf, "Content-Length") == NULL);
    /* Chunked. */
    n = head("POST", "http://h/", NULL, 0, HB_REQ_CHUNKED, 1, NULL, buf, sizeof buf, err);
    CHECK_STR(buf, (size_t)n, "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n");
    /* Query-only and IPv6 URLs. */
    n = head("GET", "http://[::1]:81?z", NULL, 0, HB_REQ_NO_BODY, 1, NULL, buf, sizeof buf, err);
    CHECK_STR(buf, (size_t)n, "GET /?z HTTP/1.1\r\nHost: [::1]:81\r\n\r\n");
    /* Bad body lengths. */
    CHECK_EQ_INT(head("GET", "http://h/", NULL, 0, -3, 1, NULL, buf, sizeof buf, err),
                 HB_E_INVALID);
    CHECK(strstr(err, "body length") != NULL);
}

static void test_head_headers(void)
{
    char buf[1024], err[HB_ERR_LEN];
    hb_header hs[] = {H("X-A", "1"), H("x-b", "two\twords"), H("Empty", "")};
    int n = head("GET", "http://h/", hs, 3, HB_REQ_NO_BODY, 1, "httpbench/1", buf, sizeof buf, err);
    CHECK_STR(buf, (size_t)n,
              "GET / HTTP/1.1\r\nHost: h\r\nX-A: 1\r\nx-b: two\twords\r\nEmpty: \r\n"
              "User-Agent: httpbench/1\r\n\r\n");
    /* The caller's Host, Authorization and User-Agent replace the defaults. */
    hb_header own[] = {H("host", "other"), H("AUTHORIZATION", "Bearer t"), H("User-agent", "me")};
    n = head("GET", "http://u:p@h/", own, 3, HB_REQ_NO_BODY, 1, "httpbench/1", buf, sizeof buf,
             err);
    CHECK_STR(buf, (size_t)n,
              "GET / HTTP/1.1\r\nhost: other\r\nAUTHORIZATION: Bearer t\r\nUser-agent: me\r\n\r\n");
    /* Userinfo becomes Basic credentials, after the caller's headers. */
    n = head("GET", "http://user:pw@h/", hs, 1, HB_REQ_NO_BODY, 1, NULL, buf, sizeof buf, err);
    CHECK_STR(buf, (size_t)n,
              "GET / HTTP/1.1\r\nHost: h\r\nX-A: 1\r\nAuthorization: Basic dXNlcjpwdw==\r\n\r\n");
    /* Connection is fine with keep-alive on. */
    hb_header conn[] = {H("Connection", "close")};
    n = head("GET", "http://h/", conn, 1, HB_REQ_NO_BODY, 1, NULL, buf, sizeof buf, err);
    CHECK(n > 0);
}

static void head_err(const char *method, const hb_header *h, int keepalive, const char *why)
{
    char buf[1024], err[HB_ERR_LEN] = "";
    CHECK_EQ_INT(head(method, "http://h/", h, h ? 1 : 0, HB_REQ_NO_BODY, keepalive, NULL, buf,
                      sizeof buf, err),
                 HB_E_INVALID);
    if (!strstr(err, why)) fprintf(stderr, "  -> %s (want %s)\n", err, why);
    CHECK(strstr(err, why) != NULL);
}

static void test_head_errors(void)
{
    head_err("GE T", NULL, 1, "invalid HTTP method 'GE T'");
    head_err("", NULL, 1, "invalid HTTP method ''");
    head_err("G\r\nET", NULL, 1, "invalid HTTP method 'G\\r\\nET'");
    hb_header bad_names[] = {H("X\r\nY", "1"), H("Bad Name", "v"), H("", "v"), H("X:", "v"),
                             H("X\x80", "v")};
    for (size_t i = 0; i < sizeof bad_names / sizeof bad_names[0]; i++)
        head_err("GET", &bad_names[i], 1, "invalid header name");
    hb_header bad_values[] = {H("X", "a\r\nInjected: 1"), H("X", "a\nb"),  H("X", "a\rb"),
                              {"X", 1, "a\0b", 3},        H("X", "a\x7f"), H("X", "\x01")};
    for (size_t i = 0; i < sizeof bad_values / sizeof bad_values[0]; i++)
        head_err("GET", &bad_values[i], 1, "has a control character (CR/LF/NUL) in its value");
    hb_header cl[] = {H("content-length", "5"), H("Transfer-Encoding", "chunked")};
    head_err("GET", &cl[0], 1, "header 'content-length' is set from the body");
    head_err("GET", &cl[1], 1, "header 'Transfer-Encoding' is set from the body");
    hb_header conn[] = {H("connection", "keep-alive")};
    head_err("GET", conn, 0, "do not pass Connection");

    /* Too small a buffer: every size short of the head fails cleanly. */
    char buf[256], err[HB_ERR_LEN];
    int full = head("GET", "http://u:p@h/", NULL, 0, 7, 0, "ua", buf, sizeof buf, err);
    CHECK(full > 0);
    for (int cap = 0; cap <= full; cap++)
        CHECK_EQ_INT(head("GET", "http://u:p@h/", NULL, 0, 7, 0, "ua", buf, (size_t)cap, err),
                     HB_E_INVALID);
    CHECK(strstr(err, "request head too large") != NULL);
    CHECK_EQ_INT(
        head("GET", "http://h/", NULL, 0, HB_REQ_NO_BODY, 1, "a\r\nb", buf, sizeof buf, err),
        HB_E_INVALID);
    /* Bad URLs are reported by the splitter. */
    CHECK_EQ_INT(head("GET", "http://h/a\r\nX: y", NULL, 0, -1, 1, NULL, buf, sizeof buf, err),
                 HB_E_INVALID);
}

static void test_methods(void)
{
    char err[HB_ERR_LEN];
    CHECK_EQ_INT(hb_check_method("M-SEARCH", 8, err), 0);
    CHECK_EQ_INT(hb_check_method("A(B", 3, err), HB_E_INVALID);
    CHECK(hb_method_is_head("HEAD", 4));
    CHECK(!hb_method_is_head("head", 4));
    CHECK(!hb_method_is_head("GET", 3));
    const char *idem[] = {"GET", "HEAD", "PUT", "DELETE", "OPTIONS", "TRACE"};
    for (size_t i = 0; i < 6; i++)
        CHECK(hb_method_idempotent(idem[i], strlen(idem[i])));
    CHECK(!hb_method_idempotent("POST", 4));
    CHECK(!hb_method_idempotent("PATCH", 5));
    CHECK(!hb_method_idempotent("GETX", 4));
}

/* The h2 field list as "name: value\n" lines, for whole-list comparisons. */
static int h2(const char *method, const char *url, const hb_header *hs, size_t nh, int64_t body_len,
              const char *ua, char *out, size_t cap, char *err)
{
    hb_url u;
    int rc = split(url, &u, err);
    if (rc < 0) return rc;
    hb_head_spec s = {method, strlen(method), &u, hs, nh, body_len, 1, ua};
    hb_header f[32];
    char scratch[512];
    size_t nf;
    size_t bound = hb_build_h2_bound(&s, &nf);
    CHECK(bound <= sizeof scratch);
    rc = hb_build_h2_fields(f, nf, scratch, bound, &s, err);
    if (rc < 0) return rc;
    CHECK((size_t)rc <= nf);
    size_t o = 0;
    for (int i = 0; i < rc; i++)
        o += (size_t)snprintf(out + o, cap - o, "%.*s: %.*s\n", (int)f[i].name_len, f[i].name,
                              (int)f[i].value_len, f[i].value);
    return (int)o;
}

static void test_h2_fields(void)
{
    char out[1024], err[HB_ERR_LEN];
    int n = h2("GET", "https://h:8443/x?q=1", NULL, 0, HB_REQ_NO_BODY, NULL, out, sizeof out, err);
    CHECK_STR(out, (size_t)n, ":method: GET\n:scheme: https\n:authority: h:8443\n:path: /x?q=1\n");
    n = h2("GET", "http://h?a", NULL, 0, HB_REQ_NO_BODY, "hb/1", out, sizeof out, err);
    CHECK_STR(out, (size_t)n,
              ":method: GET\n:scheme: http\n:authority: h\n:path: /?a\nuser-agent: hb/1\n");
    hb_header hs[] = {H("X-Thing", "A b"), H("Host", "other:1"), H("User-Agent", "mine")};
    n = h2("POST", "http://u:p@h/", hs, 3, 5, "hb/1", out, sizeof out, err);
    CHECK_STR(out, (size_t)n,
              ":method: POST\n:scheme: http\n:authority: other:1\n:path: /\nx-thing: A b\n"
              "user-agent: mine\nauthorization: Basic dTpw\ncontent-length: 5\n");
    /* Same length rule as HTTP/1.1: POST without a body says 0; chunked says nothing. */
    n = h2("PUT", "http://h/", NULL, 0, HB_REQ_NO_BODY, NULL, out, sizeof out, err);
    CHECK(n > 0 && strstr(out, "content-length: 0\n") != NULL);
    n = h2("POST", "http://h/", NULL, 0, HB_REQ_CHUNKED, NULL, out, sizeof out, err);
    CHECK(n > 0 && strstr(out, "content-length") == NULL);
    hb_header te[] = {H("TE", "trailers")};
    CHECK(h2("GET", "http://h/", te, 1, HB_REQ_NO_BODY, NULL, out, sizeof out, err) > 0);
    /* Connection-specific headers are refused, and hb_build_head's checks apply. */
    const char *bad[] = {"Connection", "Keep-Alive", "Proxy-Connection", "Upgrade"};
    for (size_t i = 0; i < 4; i++) {
        hb_header b = {bad[i], strlen(bad[i]), "x", 1};
        CHECK_EQ_INT(h2("GET", "http://h/", &b, 1, HB_REQ_NO_BODY, NULL, out, sizeof out, err),
                     HB_E_INVALID);
        CHECK(strstr(err, "not allowed in HTTP/2") != NULL);
    }
    hb_header te2[] = {H("te", "gzip")};
    CHECK_EQ_INT(h2("GET", "http://h/", te2, 1, HB_REQ_NO_BODY, NULL, out, sizeof out, err),
                 HB_E_INVALID);
    hb_header cl[] = {H("Content-Length", "3")};
    CHECK_EQ_INT(h2("GET", "http://h/", cl, 1, HB_REQ_NO_BODY, NULL, out, sizeof out, err),
                 HB_E_INVALID);
    CHECK(strstr(err, "set from the body") != NULL);
    hb_header crlf[] = {H("X", "a\r\nb")};
    CHECK_EQ_INT(h2("GET", "http://h/", crlf, 1, HB_REQ_NO_BODY, NULL, out, sizeof out, err),
                 HB_E_INVALID);
    CHECK_EQ_INT(h2("G T", "http://h/", NULL, 0, HB_REQ_NO_BODY, NULL, out, sizeof out, err),
                 HB_E_INVALID);
    /* Buffers below the bound are refused, not overrun. */
    hb_url u;
    split("http://h/abc", &u, err);
    hb_head_spec s = {"GET", 3, &u, NULL, 0, HB_REQ_NO_BODY, 1, NULL};
    hb_header f[8];
    char small[4];
    CHECK_EQ_INT(hb_build_h2_fields(f, 8, small, sizeof small, &s, err), HB_E_INVALID);
    CHECK_EQ_INT(hb_build_h2_fields(f, 2, out, sizeof out, &s, err), HB_E_INVALID);
}

int main(void)
{
    test_url_basic();
    test_url_ports();
    test_url_ipv6();
    test_url_userinfo();
    test_url_errors();
    test_head_basic();
    test_head_headers();
    test_head_errors();
    test_methods();
    test_h2_fields();
    HB_TEST_MAIN_END();
}
