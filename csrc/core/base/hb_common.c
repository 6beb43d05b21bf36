#include "base/hb_common.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

const char *hb_strerror(int rc)
{
    if (rc > -4096 && rc < 0 && rc != HB_ERROR && rc != HB_AGAIN) return strerror(-rc);
    if (rc == HB_E_H2) return "HTTP/2 connection error";
    if (rc == HB_E_NO_H2) return "the server does not speak HTTP/2";
    if (rc == HB_E_H3) return "QUIC or HTTP/3 protocol error";
    if (rc == HB_E_H3_HANDSHAKE) return "QUIC handshake failed (TLS)";
    if (rc == HB_E_H3_TIMEOUT) return "QUIC handshake or idle timeout";
    if (rc == HB_E_H3_CLOSED) return "the peer closed the QUIC connection";
    if (hb_is_protocol_error(rc)) return hb_parse_strerror(rc);
    switch (rc) {
    case HB_OK:
        return "ok";
    case HB_ERROR:
        return "error";
    case HB_AGAIN:
        return "try again";
    case HB_E_TLS:
        return "TLS error";
    case HB_E_TLS_VERIFY:
        return "TLS certificate verification failed";
    case HB_E_TIMEOUT:
        return "timed out";
    case HB_E_CLOSED:
        return "connection closed by peer";
    case HB_E_CONNECT:
        return "connect failed";
    case HB_E_NOMEM:
        return "out of memory";
    case HB_E_INVALID:
        return "invalid argument";
    case HB_E_INTERRUPTED:
        return "interrupted";
    case HB_E_TOO_LARGE:
        return "response body too large";
    case HB_E_UNSUPPORTED:
        return "not in this build";
    default:
        return hb_is_tls_error(rc) ? "TLS error" : "unknown error";
    }
}

int hb_fail(char *err, int rc, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, HB_ERR_LEN, fmt, ap);
        va_end(ap);
    }
    return rc;
}

const char *hb_parse_strerror(int code)
{
    switch (code) {
    case HB_PE_NONE:
        return "ok";
    case HB_PE_BAD_VERSION:
        return "bad protocol version (expected HTTP/1.x)";
    case HB_PE_BAD_STATUS:
        return "status code is not 3 digits";
    case HB_PE_BAD_CONTENT_LENGTH:
        return "invalid Content-Length";
    case HB_PE_DUP_CONTENT_LENGTH:
        return "conflicting Content-Length values";
    case HB_PE_BAD_CHUNK_SIZE:
        return "invalid chunk size";
    case HB_PE_CHUNK_SIZE_OVERFLOW:
        return "chunk size overflows";
    case HB_PE_NO_COLON:
        return "header line without colon";
    case HB_PE_SPACE_BEFORE_COLON:
        return "whitespace before colon in header";
    case HB_PE_BAD_HEADER_CHAR:
        return "invalid character in header";
    case HB_PE_HEAD_TOO_LARGE:
        return "head too large";
    case HB_PE_TOO_MANY_HEADERS:
        return "too many headers";
    case HB_PE_BAD_REQUEST_LINE:
        return "malformed request line";
    case HB_PE_BAD_CHUNK:
        return "malformed chunk framing or trailer";
    case HB_PE_BAD_TRANSFER_ENCODING:
        return "unsupported Transfer-Encoding";
    case HB_PE_BAD_LINE_ENDING:
        return "bad line ending";
    case HB_PE_OBS_FOLD:
        return "obsolete header line folding";
    case HB_PE_TE_AND_CONTENT_LENGTH:
        return "both Transfer-Encoding and Content-Length";
    case HB_PE_CHUNK_LINE_TOO_LONG:
        return "chunk line too long";
    case HB_PE_TRAILERS_TOO_LARGE:
        return "chunked trailers too large";
    default:
        return "protocol error";
    }
}
