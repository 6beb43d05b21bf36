/* hb_request.c - URL splitting and request-head building (see hb_request.h). */
#include "http/hb_request.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#define QUOTE_MAX 120 /* characters of a quoted URL or name kept in an error text */

/* s[0..n) in single quotes for an error text, non-printables escaped like
 * Python's repr, cut at QUOTE_MAX characters. */
static const char *quote(char *out, size_t cap, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;
    out[o++] = '\'';
    for (size_t i = 0; i < n && o + 8 < cap; i++) {
        unsigned char c = (unsigned char)s[i];
        if (i == QUOTE_MAX) {
            memcpy(out + o, "...", 3);
            o += 3;
            break;
        }
        if (c == '\r' || c == '\n' || c == '\t' || c == '\\' || c == '\'') {
            out[o++] = '\\';
            out[o++] = c == '\r' ? 'r' : c == '\n' ? 'n' : c == '\t' ? 't' : (char)c;
        } else if (c < 0x20 || c >= 0x7f) {
            out[o++] = '\\';
            out[o++] = 'x';
            out[o++] = hex[c >> 4];
            out[o++] = hex[c & 15];
        } else {
            out[o++] = (char)c;
        }
    }
    out[o++] = '\'';
    out[o] = '\0';
    return out;
}

static int is_tchar(unsigned char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c && strchr("!#$%&'*+-.^_`|~", c));
}

static int is_token(const char *s, size_t n)
{
    if (n == 0) return 0;
    for (size_t i = 0; i < n; i++)
        if (!is_tchar((unsigned char)s[i])) return 0;
    return 1;
}

static int name_is(const char *s, size_t n, const char *lit)
{
    return strlen(lit) == n && strncasecmp(s, lit, n) == 0;
}

/* ---- URLs ---- */

static int url_fail(char *err, const char *url, size_t len, const char *why)
{
    char q[4 * QUOTE_MAX + 16];
    return hb_fail(err, HB_E_INVALID, "invalid URL %s: %s", quote(q, sizeof q, url, len), why);
}

int hb_url_split(const char *url, size_t len, hb_url *u, char *err)
{
    memset(u, 0, sizeof *u);
    if (len == 0)
        return hb_fail(err, HB_E_INVALID,
                       "URL must be a non-empty string such as http://127.0.0.1:8080/");
    size_t i;
    if (len >= 7 && strncasecmp(url, "http://", 7) == 0) {
        i = 7;
        u->port = 80;
    } else if (len >= 8 && strncasecmp(url, "https://", 8) == 0) {
        i = 8;
        u->tls = 1;
        u->port = 443;
    } else {
        const char *sep = NULL;
        for (size_t k = 0; k + 2 < len && !sep; k++)
            if (memcmp(url + k, "://", 3) == 0) sep = url + k;
        if (!sep) return url_fail(err, url, len, "missing scheme; use http://host[:port]/path");
        return url_fail(err, url, len, "scheme must be http or https");
    }
    for (size_t k = 0; k < len; k++) {
        unsigned char c = (unsigned char)url[k];
        if (c <= 0x20 || c >= 0x7f)
            return url_fail(err, url, len,
                            "contains whitespace, control or non-ASCII characters "
                            "(percent-encode them)");
    }
    size_t a = i;
    while (i < len && url[i] != '/' && url[i] != '?' && url[i] != '#')
        i++;
    size_t aend = i;

    /* Userinfo ends at the authority's last '@' (a password may hold one). */
    size_t hs = a;
    for (size_t k = a; k < aend; k++)
        if (url[k] == '@') hs = k + 1;
    if (hs > a) {
        const char *ui = url + a;
        size_t ui_len = hs - 1 - a;
        const char *colon = memchr(ui, ':', ui_len);
        u->user = ui;
        u->user_len = colon ? (size_t)(colon - ui) : ui_len;
        if (colon) {
            u->pass = colon + 1;
            u->pass_len = ui_len - u->user_len - 1;
        }
    }

    size_t p = hs, he;
    u->host_header = url + hs;
    if (p < aend && url[p] == '[') {
        const char *rb = memchr(url + p, ']', aend - p);
        if (!rb) return url_fail(err, url, len, "invalid IPv6 host");
        for (const char *c = url + p + 1; c < rb; c++)
            if (!(*c == ':' || *c == '.' || (*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'f') ||
                  (*c >= 'A' && *c <= 'F')))
                return url_fail(err, url, len, "invalid IPv6 host");
        u->host = url + p + 1;
        u->host_len = (size_t)(rb - u->host);
        p = (size_t)(rb - url) + 1;
        if (p < aend && url[p] != ':') return url_fail(err, url, len, "invalid IPv6 host");
        if (u->host_len == 0) return url_fail(err, url, len, "no host");
    } else {
        while (p < aend && url[p] != ':')
            p++;
        u->host = url + hs;
        u->host_len = p - hs;
        if (u->host_len == 0) return url_fail(err, url, len, "no host");
        if (memchr(u->host, '[', u->host_len) || memchr(u->host, ']', u->host_len))
            return url_fail(err, url, len, "invalid IPv6 host");
    }
    he = p; /* end of the host as written */
    u->host_header_len = he - hs;
    if (p < aend) { /* ':' then the port, which may be empty */
        long port = 0;
        for (p++; p < aend; p++) {
            if (url[p] < '0' || url[p] > '9') return url_fail(err, url, len, "invalid port");
            if (port <= 65535) port = port * 10 + (url[p] - '0');
        }
        if (aend > he + 1) {
            if (port < 1 || port > 65535)
                return url_fail(err, url, len, "port must be in 1..65535");
            if (port != u->port) u->host_header_len = aend - hs;
            u->port = (int)port;
        }
    }
    size_t pe = i;
    while (pe < len && url[pe] != '#')
        pe++;
    u->target = url + i;
    u->target_len = pe - i;
    u->target_slash = u->target_len == 0 || url[i] == '?';
    return 0;
}

size_t hb_url_target_len(const hb_url *u)
{
    return u->target_len + (u->target_slash ? 1 : 0);
}

int hb_url_target(const hb_url *u, char *buf, size_t cap, char *err)
{
    size_t n = hb_url_target_len(u);
    if (cap < n + 1) return hb_fail(err, HB_E_INVALID, "request target too long");
    size_t o = 0;
    if (u->target_slash) buf[o++] = '/';
    if (u->target_len) memcpy(buf + o, u->target, u->target_len);
    buf[n] = '\0';
    return (int)n;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Percent-decode s[0..n) into out (n bytes always suffice); "%zz" stays as is. */
static size_t pct_decode(const char *s, size_t n, unsigned char *out)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        int h, l;
        if (s[i] == '%' && i + 2 < n && (h = hexval(s[i + 1])) >= 0 &&
            (l = hexval(s[i + 2])) >= 0) {
            out[o++] = (unsigned char)(h * 16 + l);
            i += 2;
        } else {
            out[o++] = (unsigned char)s[i];
        }
    }
    return o;
}

static size_t b64_len(size_t n)
{
    return (n + 2) / 3 * 4;
}

static size_t b64_encode(const unsigned char *in, size_t n, char *out)
{
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t o = 0, i = 0;
    for (; i + 2 < n; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 | in[i + 2];
        out[o++] = tab[v >> 18];
        out[o++] = tab[(v >> 12) & 63];
        out[o++] = tab[(v >> 6) & 63];
        out[o++] = tab[v & 63];
    }
    if (i < n) {
        uint32_t v = (uint32_t)in[i] << 16 | (i + 1 < n ? (uint32_t)in[i + 1] << 8 : 0);
        out[o++] = tab[v >> 18];
        out[o++] = tab[(v >> 12) & 63];
        out[o++] = i + 1 < n ? tab[(v >> 6) & 63] : '=';
        out[o++] = '=';
    }
    return o;
}

#define BASIC_PREFIX "Basic "

size_t hb_url_basic_auth_len(const hb_url *u)
{
    if (!u->user) return 0;
    return sizeof BASIC_PREFIX - 1 + b64_len(u->user_len + 1 + u->pass_len) + 1;
}

int hb_url_basic_auth(const hb_url *u, char *buf, size_t cap, char *err)
{
    if (!u->user) {
        if (cap) buf[0] = '\0';
        return 0;
    }
    size_t need = hb_url_basic_auth_len(u);
    if (cap < need) return hb_fail(err, HB_E_INVALID, "URL credentials too long");
    /* Decode "user:password" into the tail of buf, then encode it group by
     * group to the front: the output never reaches input not yet read. */
    unsigned char *raw = (unsigned char *)buf + need - (u->user_len + 1 + u->pass_len);
    size_t n = pct_decode(u->user, u->user_len, raw);
    raw[n++] = ':';
    n += pct_decode(u->pass ? u->pass : "", u->pass_len, raw + n);
    memcpy(buf, BASIC_PREFIX, sizeof BASIC_PREFIX - 1);
    size_t o = sizeof BASIC_PREFIX - 1;
    for (size_t i = 0; i < n; i += 3) {
        unsigned char grp[3];
        size_t k = n - i < 3 ? n - i : 3;
        memcpy(grp, raw + i, k);
        o += b64_encode(grp, k, buf + o);
    }
    buf[o] = '\0';
    return (int)o;
}

/* ---- request heads ---- */

int hb_check_method(const char *m, size_t n, char *err)
{
    char q[4 * QUOTE_MAX + 16];
    if (!is_token(m, n))
        return hb_fail(err, HB_E_INVALID, "invalid HTTP method %s", quote(q, sizeof q, m, n));
    return 0;
}

int hb_method_is_head(const char *m, size_t n)
{
    return n == 4 && memcmp(m, "HEAD", 4) == 0;
}

int hb_method_idempotent(const char *m, size_t n)
{
    static const char *const idem[] = {"GET", "HEAD", "PUT", "DELETE", "OPTIONS", "TRACE"};
    for (size_t i = 0; i < sizeof idem / sizeof idem[0]; i++)
        if (strlen(idem[i]) == n && memcmp(idem[i], m, n) == 0) return 1;
    return 0;
}

/* Methods whose requests normally carry content: servers may insist on a length. */
static int method_wants_length(const char *m, size_t n)
{
    return name_is(m, n, "POST") || name_is(m, n, "PUT") || name_is(m, n, "PATCH");
}

/* Flags of headers the caller gave that the builder would otherwise add. */
enum { GIVEN_HOST = 1, GIVEN_AUTH = 2, GIVEN_UA = 4 };

static int check_header(const hb_header *h, int keepalive, int *given, char *err)
{
    char q[4 * QUOTE_MAX + 16];
    if (!is_token(h->name, h->name_len))
        return hb_fail(err, HB_E_INVALID, "invalid header name %s",
                       quote(q, sizeof q, h->name, h->name_len));
    for (size_t i = 0; i < h->value_len; i++) {
        unsigned char c = (unsigned char)h->value[i];
        if ((c < 0x20 && c != '\t') || c == 0x7f)
            return hb_fail(err, HB_E_INVALID,
                           "header %s has a control character (CR/LF/NUL) in its value",
                           quote(q, sizeof q, h->name, h->name_len));
    }
    if (name_is(h->name, h->name_len, "content-length") ||
        name_is(h->name, h->name_len, "transfer-encoding"))
        return hb_fail(err, HB_E_INVALID,
                       "header %s is set from the body; do not pass it as a header",
                       quote(q, sizeof q, h->name, h->name_len));
    if (!keepalive && name_is(h->name, h->name_len, "connection"))
        return hb_fail(err, HB_E_INVALID,
                       "keepalive is off, so the request sends 'Connection: close'; "
                       "do not pass Connection");
    if (name_is(h->name, h->name_len, "host")) *given |= GIVEN_HOST;
    if (name_is(h->name, h->name_len, "authorization")) *given |= GIVEN_AUTH;
    if (name_is(h->name, h->name_len, "user-agent")) *given |= GIVEN_UA;
    return 0;
}

#define LIT(s) (sizeof(s) - 1)

size_t hb_build_head_bound(const hb_head_spec *s)
{
    size_t n = s->method_len + 1 + hb_url_target_len(s->url) + LIT(" HTTP/1.1\r\n");
    n += LIT("Host: \r\n") + s->url->host_header_len;
    for (size_t i = 0; i < s->num_headers; i++)
        n += s->headers[i].name_len + LIT(": \r\n") + s->headers[i].value_len;
    n += LIT("Authorization: \r\n") + hb_url_basic_auth_len(s->url);
    if (s->user_agent) n += LIT("User-Agent: \r\n") + strlen(s->user_agent);
    n += LIT("Content-Length: 18446744073709551615\r\n") + LIT("Transfer-Encoding: chunked\r\n");
    n += LIT("Connection: close\r\n") + LIT("\r\n") + 1;
    return n;
}

typedef struct {
    char *p;
    size_t len, cap;
} out;

static void put(out *o, const char *s, size_t n)
{
    if (o->len + n <= o->cap) memcpy(o->p + o->len, s, n);
    o->len += n; /* counts on past cap so the caller learns it did not fit */
}
#define PUT_LIT(o, s) put((o), (s), LIT(s))

static void put_header(out *o, const char *name, size_t nlen, const char *v, size_t vlen)
{
    put(o, name, nlen);
    PUT_LIT(o, ": ");
    put(o, v, vlen);
    PUT_LIT(o, "\r\n");
}

int hb_build_head(char *buf, size_t cap, const hb_head_spec *s, char *err)
{
    int rc = hb_check_method(s->method, s->method_len, err);
    if (rc < 0) return rc;
    int given = 0;
    for (size_t i = 0; i < s->num_headers; i++) {
        rc = check_header(&s->headers[i], s->keepalive, &given, err);
        if (rc < 0) return rc;
    }
    if (s->body_len < HB_REQ_CHUNKED)
        return hb_fail(err, HB_E_INVALID, "invalid body length %lld", (long long)s->body_len);
    if (s->user_agent && strpbrk(s->user_agent, "\r\n"))
        return hb_fail(err, HB_E_INVALID, "User-Agent must not contain CR or LF");

    const hb_url *u = s->url;
    out o = {buf, 0, cap};
    put(&o, s->method, s->method_len);
    PUT_LIT(&o, " ");
    if (u->target_slash) PUT_LIT(&o, "/");
    put(&o, u->target, u->target_len);
    PUT_LIT(&o, " HTTP/1.1\r\n");
    if (!(given & GIVEN_HOST)) put_header(&o, "Host", 4, u->host_header, u->host_header_len);
    for (size_t i = 0; i < s->num_headers; i++) {
        const hb_header *h = &s->headers[i];
        put_header(&o, h->name, h->name_len, h->value, h->value_len);
    }
    if (u->user && !(given & GIVEN_AUTH)) {
        PUT_LIT(&o, "Authorization: ");
        size_t at = o.len, need = hb_url_basic_auth_len(u);
        if (at + need <= cap)
            o.len += (size_t)hb_url_basic_auth(u, buf + at, need, NULL);
        else
            o.len += need;
        PUT_LIT(&o, "\r\n");
    }
    if (s->user_agent && !(given & GIVEN_UA))
        put_header(&o, "User-Agent", LIT("User-Agent"), s->user_agent, strlen(s->user_agent));
    if (s->body_len == HB_REQ_CHUNKED) {
        PUT_LIT(&o, "Transfer-Encoding: chunked\r\n");
    } else if (s->body_len >= 0 || method_wants_length(s->method, s->method_len)) {
        char cl[48];
        int k = snprintf(cl, sizeof cl, "Content-Length: %lld\r\n",
                         (long long)(s->body_len >= 0 ? s->body_len : 0));
        put(&o, cl, (size_t)k);
    }
    if (!s->keepalive) PUT_LIT(&o, "Connection: close\r\n");
    PUT_LIT(&o, "\r\n");
    if (o.len >= cap || o.len > INT32_MAX)
        return hb_fail(err, HB_E_INVALID, "request head too large");
    buf[o.len] = '\0';
    return (int)o.len;
}

/* ---- HTTP/2 header fields ---- */

#define H2_FIXED_FIELDS 7 /* 4 pseudo-headers + authorization, user-agent, content-length */

size_t hb_build_h2_bound(const hb_head_spec *s, size_t *nfields)
{
    size_t n = hb_url_target_len(s->url) + 1 + hb_url_basic_auth_len(s->url) + 24;
    for (size_t i = 0; i < s->num_headers; i++)
        n += s->headers[i].name_len;
    if (nfields) *nfields = H2_FIXED_FIELDS + s->num_headers;
    return n;
}

/* Headers that only mean something for one HTTP/1.1 connection. */
static int h2_forbidden(const hb_header *h)
{
    if (name_is(h->name, h->name_len, "te"))
        return !(h->value_len == 8 && strncasecmp(h->value, "trailers", 8) == 0);
    return name_is(h->name, h->name_len, "connection") ||
           name_is(h->name, h->name_len, "keep-alive") ||
           name_is(h->name, h->name_len, "proxy-connection") ||
           name_is(h->name, h->name_len, "upgrade");
}

static void set_field(hb_header *f, const char *n, size_t nl, const char *v, size_t vl)
{
    f->name = n;
    f->name_len = nl;
    f->value = v;
    f->value_len = vl;
}

int hb_build_h2_fields(hb_header *fields, size_t fcap, char *buf, size_t bufcap,
                       const hb_head_spec *s, char *err)
{
    char q[4 * QUOTE_MAX + 16];
    int rc = hb_check_method(s->method, s->method_len, err);
    if (rc < 0) return rc;
    int given = 0;
    for (size_t i = 0; i < s->num_headers; i++) {
        const hb_header *h = &s->headers[i];
        rc = check_header(h, 1, &given, err);
        if (rc < 0) return rc;
        if (h2_forbidden(h))
            return hb_fail(err, HB_E_INVALID,
                           "header %s is connection-specific and not allowed in HTTP/2",
                           quote(q, sizeof q, h->name, h->name_len));
    }
    if (s->body_len < HB_REQ_CHUNKED)
        return hb_fail(err, HB_E_INVALID, "invalid body length %lld", (long long)s->body_len);
    if (s->user_agent && strpbrk(s->user_agent, "\r\n"))
        return hb_fail(err, HB_E_INVALID, "User-Agent must not contain CR or LF");
    size_t need_f;
    size_t need_b = hb_build_h2_bound(s, &need_f);
    if (fcap < need_f || bufcap < need_b)
        return hb_fail(err, HB_E_INVALID, "h2 header field buffers too small");

    const hb_url *u = s->url;
    size_t nf = 0, o = 0;
    set_field(&fields[nf++], ":method", 7, s->method, s->method_len);
    set_field(&fields[nf++], ":scheme", 7, u->tls ? "https" : "http", u->tls ? 5 : 4);
    const char *auth = u->host_header;
    size_t auth_len = u->host_header_len;
    for (size_t i = 0; i < s->num_headers; i++)
        if (name_is(s->headers[i].name, s->headers[i].name_len, "host")) {
            auth = s->headers[i].value;
            auth_len = s->headers[i].value_len;
        }
    set_field(&fields[nf++], ":authority", 10, auth, auth_len);
    size_t tl = hb_url_target_len(u);
    (void)hb_url_target(u, buf + o, bufcap - o, NULL);
    set_field(&fields[nf++], ":path", 5, buf + o, tl);
    o += tl;
    for (size_t i = 0; i < s->num_headers; i++) {
        const hb_header *h = &s->headers[i];
        if (name_is(h->name, h->name_len, "host")) continue;
        char *lname = buf + o;
        for (size_t k = 0; k < h->name_len; k++) {
            char c = h->name[k];
            lname[k] = (c >= 'A' && c <= 'Z') ? (char)(c + 32) : c;
        }
        o += h->name_len;
        set_field(&fields[nf++], lname, h->name_len, h->value, h->value_len);
    }
    if (u->user && !(given & GIVEN_AUTH)) {
        int n = hb_url_basic_auth(u, buf + o, bufcap - o, err);
        if (n < 0) return n;
        set_field(&fields[nf++], "authorization", 13, buf + o, (size_t)n);
        o += (size_t)n + 1;
    }
    if (s->user_agent && !(given & GIVEN_UA))
        set_field(&fields[nf++], "user-agent", 10, s->user_agent, strlen(s->user_agent));
    if (s->body_len >= 0 ||
        (s->body_len == HB_REQ_NO_BODY && method_wants_length(s->method, s->method_len))) {
        int n =
            snprintf(buf + o, bufcap - o, "%lld", (long long)(s->body_len >= 0 ? s->body_len : 0));
        set_field(&fields[nf++], "content-length", 14, buf + o, (size_t)n);
        o += (size_t)n + 1;
    }
    return (int)nf;
}
