/* hb_common.h - the one error scheme of the httpbench C core.
 *
 * Every core function returns >= 0 on success (or a count), HB_ERROR (-1) or
 * HB_AGAIN (-2), a system error as -errno (like libuv's UV__ERR), or one of the
 * HB_E_* codes below, which sit below -4096 so they never collide with -errno.
 * Detail text goes into a caller's `char err[HB_ERR_LEN]`. Never includes Python.h.
 */
#ifndef HB_COMMON_H
#define HB_COMMON_H

#include <stddef.h>
#include <stdint.h>

#define HB_OK 0
#define HB_ERROR (-1)
#define HB_AGAIN (-2)
#define HB_ERR_LEN 256

enum hb_errcode {
    /* -5000 .. -5099: HTTP protocol (parse) errors: enum hb_parse_error below. */
    HB_E_PROTOCOL = -5000,
    HB_E_PROTOCOL_LAST = -5099,
    /* -5100 .. -5149: TLS. */
    HB_E_TLS = -5100,
    HB_E_TLS_VERIFY = -5101,
    HB_E_TLS_LAST = -5149,
    /* Transport-level outcomes that are not a single errno. */
    HB_E_TIMEOUT = -5200, /* a deadline passed */
    HB_E_CLOSED = -5201,  /* peer closed before or during a response */
    HB_E_CONNECT = -5202, /* connect failed without a usable errno (e.g. resolution) */
    HB_E_NOMEM = -5300,
    HB_E_INVALID = -5301,     /* bad argument or configuration */
    HB_E_INTERRUPTED = -5302, /* stopped by a stop flag / signal */
    HB_E_TOO_LARGE = -5303,   /* a response body over the caller's limit */
    HB_E_UNSUPPORTED = -5304, /* this build lacks the feature (compiled out) */
    /* -5400 .. -5449: HTTP/2 (hb_h2_client.h, hb_h2_hpack.h). */
    HB_E_H2 = -5400,    /* HTTP/2 connection error (a bad frame, a GOAWAY with an error) */
    HB_E_NO_H2 = -5401, /* the peer does not speak HTTP/2 (ALPN, or an HTTP/1.x answer) */
    HB_E_H2_LAST = -5449,
    /* -5450 .. -5479: the HTTP/3 client (hb_h3_client.h). */
    HB_E_H3 = -5450,           /* QUIC or HTTP/3 protocol error */
    HB_E_H3_HANDSHAKE = -5451, /* TLS inside QUIC failed: certificate, ALPN, alert */
    HB_E_H3_TIMEOUT = -5452,   /* no answer within the handshake or idle timeout */
    HB_E_H3_CLOSED = -5453,    /* the peer closed the QUIC connection */
    HB_E_H3_LAST = -5479,
    /* -5480 .. -5499: the HTTP/3 server. */
    /* -5500 .. -5549: WebSocket framing (ws/hb_ws.h); -5550 .. -5559: server-sent events
     * (http/hb_sse.h). */
};

/* Distinct HTTP/1.x parse error codes (http/hb_parse.h), in HB_E_PROTOCOL's range. */
enum hb_parse_error {
    HB_PE_NONE = 0,
    HB_PE_BAD_VERSION = -5001,        /* not HTTP/1.x */
    HB_PE_BAD_STATUS = -5002,         /* status code is not 3 digits */
    HB_PE_BAD_CONTENT_LENGTH = -5003, /* negative, non-numeric or overflowing */
    HB_PE_DUP_CONTENT_LENGTH = -5004, /* conflicting duplicate Content-Length */
    HB_PE_BAD_CHUNK_SIZE = -5005,     /* chunk size not hex / malformed chunk line */
    HB_PE_CHUNK_SIZE_OVERFLOW = -5006,
    HB_PE_NO_COLON = -5007,              /* header line without ':' */
    HB_PE_SPACE_BEFORE_COLON = -5008,    /* whitespace between name and ':' */
    HB_PE_BAD_HEADER_CHAR = -5009,       /* control character or NUL in a name or value */
    HB_PE_HEAD_TOO_LARGE = -5010,        /* head exceeds max_head */
    HB_PE_TOO_MANY_HEADERS = -5011,      /* more headers than the limit / capacity */
    HB_PE_BAD_REQUEST_LINE = -5012,      /* malformed method / target / request line */
    HB_PE_BAD_CHUNK = -5013,             /* missing CRLF after chunk data, bad trailer */
    HB_PE_BAD_TRANSFER_ENCODING = -5014, /* not a list of codings ending in exactly "chunked",
                                            or malformed (requests: answer 400 and close,
                                            RFC 9112 6.3) */
    HB_PE_BAD_LINE_ENDING = -5015,       /* bare CR, or garbage where CRLF expected */
    HB_PE_OBS_FOLD = -5016,              /* header line starting with whitespace (obs-fold) */
    HB_PE_TE_AND_CONTENT_LENGTH = -5017, /* request with both (a smuggling vector) */
    HB_PE_CHUNK_LINE_TOO_LONG = -5018,   /* chunk size/extension or trailer line too long */
    HB_PE_TRAILERS_TOO_LARGE = -5019,    /* trailer section larger than HB_CHUNK_MAX_TRAILERS */
};

static inline int hb_is_protocol_error(int rc)
{
    return rc <= HB_E_PROTOCOL && rc >= HB_E_PROTOCOL_LAST;
}
static inline int hb_is_tls_error(int rc)
{
    return rc <= HB_E_TLS && rc >= HB_E_TLS_LAST;
}
static inline int hb_is_h2_error(int rc)
{
    return rc <= HB_E_H2 && rc >= HB_E_H2_LAST;
}

static inline int hb_is_h3_error(int rc)
{
    return rc <= HB_E_H3 && rc >= HB_E_H3_LAST;
}

/* Short static text for a code (errno or HB_E_*); never NULL. */
const char *hb_strerror(int rc);
/* Static text for an HB_PE_* code. */
const char *hb_parse_strerror(int code);

/* snprintf into err (if non-NULL), returns rc so callers can `return hb_fail(...)`. */
int hb_fail(char *err, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
