/* hb_request.h - URL splitting and request-head building: the one place that
 * decides what a request looks like on the wire (the load generator, the
 * native Client and bench() all come here).
 *
 * Shaped like picohttpparser: the caller owns every buffer, results are
 * (const char *, len) pairs pointing into the caller's URL, nothing is
 * allocated. Functions return >= 0 (a length) or HB_E_INVALID with a
 * one-line reason in the caller's `char err[HB_ERR_LEN]` (err may be NULL).
 *
 * URLs: "http://" or "https://" (scheme case-insensitive), then
 * [user[:password]@]host[:port], then path, query and fragment. host is a name,
 * an IPv4 address or a bracketed IPv6 address; an empty port means the
 * scheme's default (80/443). The whole URL must be printable ASCII without
 * spaces (percent-encode anything else). The fragment is never sent.
 *
 * Userinfo follows curl: user:password@ becomes "Authorization: Basic ..."
 * (percent-decoded, then base64) unless the caller passes its own
 * Authorization header.
 */
#ifndef HB_REQUEST_H
#define HB_REQUEST_H

#include <stddef.h>
#include <stdint.h>

#include "base/hb_common.h"
#include "http/hb_parse.h"

typedef struct hb_url {
    int tls;          /* https */
    const char *host; /* without the IPv6 brackets */
    size_t host_len;
    int port; /* as given, else the scheme's default */
    /* Path and query as written (fragment dropped). When the URL has no path
     * (target_len == 0 or target starts with '?'), target_slash is set: the
     * request target is "/" followed by these bytes. */
    const char *target;
    size_t target_len;
    int target_slash;
    /* The Host header value: host as written (brackets kept), with ":port"
     * only when the port is not the scheme's default. */
    const char *host_header;
    size_t host_header_len;
    /* Userinfo, still percent-encoded. user == NULL: the URL has none;
     * pass == NULL: no ':' in it. */
    const char *user;
    size_t user_len;
    const char *pass;
    size_t pass_len;
} hb_url;

/* Split url[0..len) into *u. Returns 0 or HB_E_INVALID; the err text names
 * the URL and the reason ("missing scheme", "scheme must be http or https",
 * "contains whitespace, control or non-ASCII characters", "no host",
 * "invalid port", "port must be in 1..65535", "invalid IPv6 host"). */
int hb_url_split(const char *url, size_t len, hb_url *u, char *err);

/* Length of the request target (the "/" prefix included when target_slash). */
size_t hb_url_target_len(const hb_url *u);
/* Copy the request target into buf (cap >= hb_url_target_len + 1, NUL added).
 * Returns its length or HB_E_INVALID when it does not fit. */
int hb_url_target(const hb_url *u, char *buf, size_t cap, char *err);

/* Bytes hb_url_basic_auth needs (0 when the URL has no userinfo). */
size_t hb_url_basic_auth_len(const hb_url *u);
/* Write "Basic <base64(user:password)>" (user and password percent-decoded;
 * a missing password is empty) into buf, NUL-terminated. Returns its length,
 * 0 when the URL has no userinfo, HB_E_INVALID when cap is too small. */
int hb_url_basic_auth(const hb_url *u, char *buf, size_t cap, char *err);

/* body_len values beside a byte count (>= 0, sent as Content-Length). */
#define HB_REQ_NO_BODY (-1) /* no body; Content-Length: 0 for POST, PUT, PATCH */
#define HB_REQ_CHUNKED (-2) /* a body of unknown length: Transfer-Encoding: chunked */

typedef struct hb_head_spec {
    const char *method;
    size_t method_len;
    const hb_url *url;
    /* The caller's headers, sent in order after Host. A Host header replaces
     * the URL's; an Authorization header replaces the URL's userinfo; a
     * User-Agent header replaces user_agent. Content-Length and
     * Transfer-Encoding are refused (they come from body_len), and so is
     * Connection when keepalive is 0. */
    const hb_header *headers;
    size_t num_headers;
    int64_t body_len;       /* >= 0, HB_REQ_NO_BODY or HB_REQ_CHUNKED */
    int keepalive;          /* 0: "Connection: close" */
    const char *user_agent; /* default User-Agent value; NULL: none */
} hb_head_spec;

/* An upper bound of the head's length for buffer sizing (NUL included). */
size_t hb_build_head_bound(const hb_head_spec *s);

/* Serialize the head: "METHOD target HTTP/1.1", Host, the caller's headers,
 * Authorization (from userinfo), User-Agent, Content-Length or
 * Transfer-Encoding, "Connection: close" (keepalive 0), then the empty line.
 * Validates first: the method is a token, header names are tokens, values hold
 * no control characters but HTAB (so no CR, LF or NUL). Returns the length or
 * HB_E_INVALID ("invalid HTTP method ...", "invalid header name ...",
 * "header ... has a control character (CR/LF/NUL) in its value",
 * "header ... is set from the body", "... keepalive is off ...",
 * "request head too large"). */
int hb_build_head(char *buf, size_t cap, const hb_head_spec *s, char *err);

/* The same request as HTTP/2 header fields (RFC 9113 section 8.3), from the
 * same spec: ":method", ":scheme" (from the URL), ":authority" (the Host
 * header given, else the URL's), ":path", then the caller's headers in order
 * with lowercase names (Host dropped: it is :authority), "authorization"
 * from userinfo, "user-agent", and "content-length" on the same rule as the
 * HTTP/1.1 head. keepalive is ignored (connection reuse is the caller's).
 * Validation is hb_build_head's, plus connection-specific headers
 * (Connection, Keep-Alive, Proxy-Connection, Upgrade, and TE other than
 * "trailers") are refused, and HB_REQ_CHUNKED just means no content-length.
 * fields[i] point into the spec's strings or into buf (lowercased names, the
 * path, credentials, the length), so both must outlive their use.
 * Returns the field count, or HB_E_INVALID (a validation reason, or
 * "... too small" when fcap/bufcap are below the bounds). */
size_t hb_build_h2_bound(const hb_head_spec *s, size_t *nfields);
int hb_build_h2_fields(hb_header *fields, size_t fcap, char *buf, size_t bufcap,
                       const hb_head_spec *s, char *err);

/* A request body sent from memory by a multiplexed protocol: the caller's
 * bytes, which must stay valid and unchanged until the stream ends, and the
 * sender's cursor (`sent`, the protocol library's). */
typedef struct hb_body_src {
    const char *data;
    size_t len;
    size_t sent;
} hb_body_src;

/* 0 when m[0..n) is a valid method (a non-empty token), else HB_E_INVALID. */
int hb_check_method(const char *m, size_t n, char *err);

/* The response to this method has no body (exactly "HEAD"). */
int hb_method_is_head(const char *m, size_t n);
/* Safe to send again on a new connection (RFC 9110 9.2.2). */
int hb_method_idempotent(const char *m, size_t n);

#endif
