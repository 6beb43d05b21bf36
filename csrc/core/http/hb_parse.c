/* hb_parse.c - HTTP/1.1 head parser and incremental chunked decoder.
 *
 * Single pass over the caller's bytes with 256-entry class tables; no
 * allocation, no strlen, no per-byte calls (the scanners are forced inline).
 * Values and targets are scanned 8 bytes at a time (SWAR + ctz), names 8
 * table lookups per step, and the framing headers are recognised by length
 * first, then one or two word compares. Policy (see hb_parse.h): CRLF only
 * unless HB_PARSE_LENIENT_LF, one SP between start-line parts, obs-fold and
 * whitespace before ':' rejected, ambiguous request framing rejected.
 */
#include "http/hb_parse.h"

#include <limits.h>
#include <string.h>

/* tchar (RFC 9110 5.6.2): the bytes allowed in method and field names. */
static const unsigned char tok_tab[256] = {
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 1, 0, 1, 1, 1, 1, 1, 0, 0, 1, 1, 0, 1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0,
    0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 0, 1, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
};

/* field-content bytes: HTAB, SP, VCHAR, obs-text. CR/LF end a line; the rest
 * (other controls, NUL, DEL) are errors. */
static const unsigned char val_tab[256] = {
    0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
};

#define IS_WS(c) ((c) == ' ' || (c) == '\t')
/* The scanners run per header on the load generator's hot path: force them
 * inline (clang otherwise leaves scan_value and the name dispatch as calls). */
#define HB_HOT static inline __attribute__((always_inline))

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define HB_SWAR_LE 1
#endif

/* Bit 7 of each byte of w that is below `lo` (a byte value <= 0x80) or DEL.
 * The lowest set bit is always exact (borrows only disturb higher bytes), so
 * on little-endian ctz/8 is the offset of the first such byte. */
HB_HOT uint64_t swar_stop(uint64_t w, uint64_t lo)
{
    const uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
    uint64_t lt = (w - lo * ones) & ~w & highs;
    uint64_t x = w ^ 0x7f7f7f7f7f7f7f7fULL;
    uint64_t del = (x - ones) & ~x & highs;
    return lt | del;
}

#if defined(__SSE2__)
/* 16-byte scanners (SSE2 is baseline on x86-64). Signed byte compares: bytes
 * >= 0x80 are negative, so they are never "below 0x20" and never in a tchar
 * range, matching val_tab (obs-text allowed) and tok_tab (rejected). */
#include <emmintrin.h>
#define HB_SSE2 1

/* Bit i set when p[i] is not field-content (control other than TAB, DEL). */
HB_HOT unsigned sse_nonval16(const char *p)
{
    __m128i v = _mm_loadu_si128((const __m128i *)(const void *)p);
    __m128i ctl =
        _mm_and_si128(_mm_cmplt_epi8(v, _mm_set1_epi8(0x20)), _mm_cmpgt_epi8(v, _mm_set1_epi8(-1)));
    ctl = _mm_andnot_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('\t')), ctl);
    ctl = _mm_or_si128(ctl, _mm_cmpeq_epi8(v, _mm_set1_epi8(0x7f)));
    return (unsigned)_mm_movemask_epi8(ctl);
}

/* in (lo, hi) exclusive, signed */
#define HB_IN(v, lo, hi)                                                                           \
    _mm_and_si128(_mm_cmpgt_epi8(v, _mm_set1_epi8(lo)), _mm_cmplt_epi8(v, _mm_set1_epi8(hi)))

/* Bit i set when p[i] is not a tchar: outside 0x21..0x7e, or one of the
 * delimiters "(),/:;<=>?@[\]{} (RFC 9110 5.6.2). */
HB_HOT unsigned sse_nontok16(const char *p)
{
    __m128i v = _mm_loadu_si128((const __m128i *)(const void *)p);
    /* signed: SP, controls and every byte >= 0x80 are below 0x21 */
    __m128i bad = _mm_cmplt_epi8(v, _mm_set1_epi8(0x21));
    bad = _mm_or_si128(bad, _mm_cmpeq_epi8(v, _mm_set1_epi8(0x7f)));
    bad = _mm_or_si128(bad, _mm_cmpeq_epi8(v, _mm_set1_epi8('"')));
    bad = _mm_or_si128(bad, HB_IN(v, 0x27, 0x2a)); /* ( ) */
    bad = _mm_or_si128(bad, _mm_cmpeq_epi8(v, _mm_set1_epi8(',')));
    bad = _mm_or_si128(bad, _mm_cmpeq_epi8(v, _mm_set1_epi8('/')));
    bad = _mm_or_si128(bad, HB_IN(v, 0x39, 0x41)); /* : ; < = > ? @ */
    bad = _mm_or_si128(bad, HB_IN(v, 0x5a, 0x5e)); /* [ \ ] */
    bad = _mm_or_si128(bad, _mm_cmpeq_epi8(v, _mm_set1_epi8('{')));
    bad = _mm_or_si128(bad, _mm_cmpeq_epi8(v, _mm_set1_epi8('}')));
    return (unsigned)_mm_movemask_epi8(bad);
}
#endif

/* First byte at or after p that is not field-content (or end): 16 (SSE2) or
 * 8 (SWAR) bytes per step; a TAB (a control byte that is allowed) just
 * resumes the scan. */
HB_HOT const char *scan_value(const char *p, const char *end)
{
#ifdef HB_SSE2
    while (end - p >= 16) {
        unsigned m = sse_nonval16(p);
        if (m) return p + __builtin_ctz(m);
        p += 16;
    }
#endif
    for (;;) {
        while (end - p >= 8) {
            uint64_t w;
            memcpy(&w, p, 8);
            uint64_t m = swar_stop(w, 0x20);
            if (m) {
#ifdef HB_SWAR_LE
                p += __builtin_ctzll(m) >> 3;
                if (*p != '\t') return p;
                p++;
                continue;
#else
                break;
#endif
            }
            p += 8;
        }
        const char *stop = end - p >= 8 ? p + 8 : end;
        for (; p < stop; p++)
            if (!val_tab[(unsigned char)*p]) return p;
        if (p == end) return p;
    }
}

/* End of a request-target: the first byte outside 0x21..0x7e (SP, control,
 * DEL, or non-ASCII, which URI syntax never has) or end. */
HB_HOT const char *scan_target(const char *p, const char *end)
{
#ifdef HB_SWAR_LE
    while (end - p >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        uint64_t m = swar_stop(w, 0x21) | (w & 0x8080808080808080ULL);
        if (m) return p + (__builtin_ctzll(m) >> 3);
        p += 8;
    }
#endif
    while (p < end && (unsigned)((unsigned char)*p - 0x21) < 0x5e)
        p++;
    return p;
}

/* Case-insensitive compare against a lowercase literal of letters, digits and
 * '-'. OR-ing 0x20 is exact here: only letters, and controls the tables have
 * already rejected, map onto the literal's bytes. Compares whole words (two
 * overlapping loads cover 4..16 bytes) since n and lit are constants. */
HB_HOT uint64_t load64(const char *p)
{
    uint64_t w;
    memcpy(&w, p, 8);
    return w;
}
HB_HOT uint32_t load32(const char *p)
{
    uint32_t w;
    memcpy(&w, p, 4);
    return w;
}
HB_HOT int ci_eq(const char *p, const char *lit, size_t n)
{
    const uint64_t m8 = 0x2020202020202020ULL;
    const uint32_t m4 = 0x20202020U;
    if (n >= 8) {
        size_t i = 0;
        for (; i + 8 < n; i += 8)
            if ((load64(p + i) | m8) != load64(lit + i)) return 0;
        return (load64(p + n - 8) | m8) == load64(lit + n - 8);
    }
    if (n >= 4)
        return (load32(p) | m4) == load32(lit) && (load32(p + n - 4) | m4) == load32(lit + n - 4);
    for (size_t i = 0; i < n; i++)
        if (((unsigned char)p[i] | 0x20) != (unsigned char)lit[i]) return 0;
    return 1;
}

/* End of a run of tchar bytes: 16 bytes per SSE2 step, else 8 table lookups
 * per step while far from end. */
HB_HOT const char *scan_token(const char *p, const char *end)
{
#ifdef HB_SSE2
    while (end - p >= 16) {
        unsigned m = sse_nontok16(p);
        if (m) return p + __builtin_ctz(m);
        p += 16;
    }
#endif
    while (end - p >= 8) {
        const unsigned char *u = (const unsigned char *)p;
        if (!(tok_tab[u[0]] & tok_tab[u[1]] & tok_tab[u[2]] & tok_tab[u[3]] & tok_tab[u[4]] &
              tok_tab[u[5]] & tok_tab[u[6]] & tok_tab[u[7]]))
            break;
        p += 8;
    }
    while (p < end && tok_tab[(unsigned char)*p])
        p++;
    return p;
}

/* Facts gathered from the framing headers while walking the head. */
typedef struct fr_state {
    int64_t cl;
    int has_cl;
    int has_te;
    int te_chunked; /* how many times "chunked" was listed */
    int te_codings; /* how many codings were listed, chunked included */
    int te_last_chunked;
    int close;
    int keep_alive;
    int expect;
} fr_state;

/* Content-Length: 1*DIGIT, or a list of identical values ("5, 5"). */
static int parse_cl(const char *v, size_t n, fr_state *f)
{
    size_t i = 0;
    int any = 0;
    while (i < n) {
        if (IS_WS(v[i]) || v[i] == ',') {
            i++;
            continue;
        }
        if ((unsigned)(v[i] - '0') > 9) return HB_PE_BAD_CONTENT_LENGTH;
        int64_t x = 0;
        while (i < n && (unsigned)(v[i] - '0') <= 9) {
            int d = v[i] - '0';
            if (x > (INT64_MAX - d) / 10) return HB_PE_BAD_CONTENT_LENGTH;
            x = x * 10 + d;
            i++;
        }
        while (i < n && IS_WS(v[i]))
            i++;
        if (i < n && v[i] != ',') return HB_PE_BAD_CONTENT_LENGTH;
        if (f->has_cl && f->cl != x) return HB_PE_DUP_CONTENT_LENGTH;
        f->has_cl = 1;
        f->cl = x;
        any = 1;
    }
    return any ? 0 : HB_PE_BAD_CONTENT_LENGTH;
}

static size_t skip_ws(const char *v, size_t i, size_t n)
{
    while (i < n && IS_WS(v[i]))
        i++;
    return i;
}

static size_t skip_token(const char *v, size_t i, size_t n)
{
    while (i < n && tok_tab[(unsigned char)v[i]])
        i++;
    return i;
}

/* token / quoted-string at v[i] (the field value has no CR, LF or other
 * controls but TAB); the index after it, or 0 when there is none. */
static size_t te_param_value(const char *v, size_t i, size_t n)
{
    if (i < n && v[i] == '"') {
        for (i++; i < n; i++) {
            if (v[i] == '"') return i + 1;
            if (v[i] == '\\' && ++i == n) return 0;
        }
        return 0;
    }
    size_t e = skip_token(v, i, n);
    return e > i ? e : 0;
}

/* Transfer-Encoding = #( token *( OWS ";" OWS token BWS "=" BWS value ) )
 * (RFC 9112 6.1, RFC 9110 10.1.4). Empty list elements are ignored (RFC 9110
 * 5.6.1); "chunked" takes no parameters. */
static int parse_te(const char *v, size_t n, fr_state *f)
{
    size_t i = 0;
    int any = 0;
    f->has_te = 1;
    while (i < n) {
        if (IS_WS(v[i]) || v[i] == ',') {
            i++;
            continue;
        }
        size_t s = i;
        i = skip_token(v, i, n);
        if (i == s) return HB_PE_BAD_TRANSFER_ENCODING;
        int is_chunked = i - s == 7 && ci_eq(v + s, "chunked", 7);
        for (;;) {
            i = skip_ws(v, i, n);
            if (i == n || v[i] == ',') break;
            /* anything but ';' here is a second word ("chunked x") */
            if (v[i] != ';' || is_chunked) return HB_PE_BAD_TRANSFER_ENCODING;
            size_t ns = skip_ws(v, i + 1, n);
            i = skip_token(v, ns, n);
            if (i == ns) return HB_PE_BAD_TRANSFER_ENCODING;
            i = skip_ws(v, i, n);
            if (i == n || v[i] != '=') return HB_PE_BAD_TRANSFER_ENCODING;
            i = te_param_value(v, skip_ws(v, i + 1, n), n);
            if (i == 0) return HB_PE_BAD_TRANSFER_ENCODING;
        }
        f->te_chunked += is_chunked;
        f->te_codings++;
        f->te_last_chunked = is_chunked;
        any = 1;
    }
    return any ? 0 : HB_PE_BAD_TRANSFER_ENCODING;
}

static void parse_connection(const char *v, size_t n, fr_state *f)
{
    /* the two values nearly every peer sends */
    if (n == 10 && ci_eq(v, "keep-alive", 10)) {
        f->keep_alive = 1;
        return;
    }
    if (n == 5 && ci_eq(v, "close", 5)) {
        f->close = 1;
        return;
    }
    size_t i = 0;
    while (i < n) {
        if (IS_WS(v[i]) || v[i] == ',') {
            i++;
            continue;
        }
        size_t s = i;
        while (i < n && v[i] != ',' && !IS_WS(v[i]))
            i++;
        if (i - s == 5 && ci_eq(v + s, "close", 5))
            f->close = 1;
        else if (i - s == 10 && ci_eq(v + s, "keep-alive", 10))
            f->keep_alive = 1;
    }
}

/* Dispatch on length first: most names are rejected by one compare. */
HB_HOT int framing_header(const char *name, size_t nl, const char *v, size_t vl, fr_state *f)
{
    switch (nl) {
    case 6:
        if (ci_eq(name, "expect", 6) && vl == 12 && ci_eq(v, "100-continue", 12)) f->expect = 1;
        return 0;
    case 10:
        if (ci_eq(name, "connection", 10)) parse_connection(v, vl, f);
        return 0;
    case 14:
        if (ci_eq(name, "content-length", 14)) return parse_cl(v, vl, f);
        return 0;
    case 17:
        if (ci_eq(name, "transfer-encoding", 17)) return parse_te(v, vl, f);
        return 0;
    default:
        return 0;
    }
}

/* Per-call parser state: the error code, the flags and what leniency let by. */
typedef struct pctx {
    int err;
    int lenient; /* HB_PARSE_LENIENT_LF */
    unsigned tolerated;
} pctx;

/* A line end at p: 2 for CRLF; a bare LF is 1 when lenient (counted), else
 * HB_ERROR like a bare CR. 0 if p is no line end, HB_AGAIN at a CR that ends
 * the input. */
HB_HOT int line_end(const char *p, const char *end, pctx *x)
{
    if (*p == '\r') {
        if (p + 1 == end) return HB_AGAIN;
        return p[1] == '\n' ? 2 : HB_ERROR;
    }
    if (*p != '\n') return 0;
    if (!x->lenient) return HB_ERROR;
    x->tolerated++;
    return 1;
}

/* Leading empty lines before a start line are skipped (RFC 9112 2.2). */
static int skip_empty_lines(const char **pp, const char *end, pctx *x)
{
    int *err = &x->err;
    const char *p = *pp;
    while (p < end) {
        int le = line_end(p, end, x);
        if (le == 0) break;
        if (le == HB_AGAIN) return HB_AGAIN;
        if (le == HB_ERROR) {
            *err = HB_PE_BAD_LINE_ENDING;
            return HB_ERROR;
        }
        p += le;
    }
    *pp = p;
    return p == end ? HB_AGAIN : 0;
}

#define FAIL(code)                                                                                 \
    do {                                                                                           \
        *err = (code);                                                                             \
        return HB_ERROR;                                                                           \
    } while (0)

/* Header fields up to and including the empty line. On success *pp points
 * past the head and *count is the number of fields. */
static int parse_headers(const char **pp, const char *end, hb_header *hdrs, size_t max,
                         size_t *count, fr_state *f, pctx *x)
{
    int *err = &x->err;
    const char *p = *pp;
    size_t n = 0;
    for (;;) {
        if (p == end) return HB_AGAIN;
        int le;
        /* CR, LF, SP and TAB are all <= ' ': one compare for a name's first byte */
        if ((unsigned char)*p <= ' ') {
            le = line_end(p, end, x);
            if (le > 0) {
                p += le;
                break;
            }
            if (le == HB_AGAIN) return HB_AGAIN;
            if (le == HB_ERROR) FAIL(HB_PE_BAD_LINE_ENDING);
            if (IS_WS(*p)) FAIL(HB_PE_OBS_FOLD);
        }

        const char *name = p;
        p = scan_token(p, end);
        if (p == end) return HB_AGAIN;
        if (*p != ':') {
            unsigned char c = (unsigned char)*p;
            if (c == '\r' || c == '\n') FAIL(HB_PE_NO_COLON);
            if (IS_WS(c)) {
                /* "Name : v" or "Na me: v" vs a line with no colon at all. */
                while (p < end && *p != ':' && *p != '\r' && *p != '\n')
                    p++;
                if (p == end) return HB_AGAIN;
                FAIL(*p == ':' ? HB_PE_SPACE_BEFORE_COLON : HB_PE_NO_COLON);
            }
            FAIL(HB_PE_BAD_HEADER_CHAR);
        }
        size_t name_len = (size_t)(p - name);
        if (name_len == 0) FAIL(HB_PE_BAD_HEADER_CHAR);
        if (n >= max) FAIL(HB_PE_TOO_MANY_HEADERS);
        p++;
        if (p < end && *p == ' ') p++; /* the usual single SP, then any more OWS */
        while (p < end && IS_WS(*p))
            p++;
        const char *value = p;
        p = scan_value(p, end);
        if (p == end) return HB_AGAIN;
        const char *vend = p;
        le = line_end(p, end, x);
        if (le == 0) FAIL(HB_PE_BAD_HEADER_CHAR);
        if (le == HB_AGAIN) return HB_AGAIN;
        if (le == HB_ERROR) FAIL(HB_PE_BAD_LINE_ENDING);
        p += le;
        while (vend > value && IS_WS(vend[-1]))
            vend--;
        size_t value_len = (size_t)(vend - value);
        if (hdrs) {
            hdrs[n].name = name;
            hdrs[n].name_len = name_len;
            hdrs[n].value = value;
            hdrs[n].value_len = value_len;
        }
        n++;
        int rc = framing_header(name, name_len, value, value_len, f);
        if (rc) FAIL(rc);
    }
    *pp = p;
    *count = n;
    return 0;
}

/* "HTTP/1.x" at p; checks whatever prefix is present so junk fails early.
 * Returns the minor version, HB_AGAIN or HB_ERROR. */
static inline int parse_version(const char *p, const char *end, int *err)
{
    size_t avail = (size_t)(end - p);
    if (avail >= 8) {
        if (memcmp(p, "HTTP/1.", 7) != 0 || (unsigned)(p[7] - '0') > 9) FAIL(HB_PE_BAD_VERSION);
        return p[7] - '0';
    }
    if (memcmp(p, "HTTP/1.", avail < 7 ? avail : 7) != 0) FAIL(HB_PE_BAD_VERSION);
    return HB_AGAIN;
}

static void limits_of(const hb_parse_limits *limits, hb_header *hdrs, size_t cap, size_t *max_head,
                      size_t *max_hdrs)
{
    *max_head = limits && limits->max_head ? limits->max_head : HB_PARSE_DEFAULT_MAX_HEAD;
    if (*max_head > INT_MAX) *max_head = INT_MAX; /* the return value is an int */
    *max_hdrs = limits && limits->max_headers ? limits->max_headers : HB_PARSE_DEFAULT_MAX_HEADERS;
    if (hdrs && cap < *max_hdrs) *max_hdrs = cap;
}

static void framing_of(const fr_state *f, int minor, hb_framing *out)
{
    out->content_length = f->has_cl && !f->has_te ? f->cl : -1;
    out->chunked = f->has_te && f->te_last_chunked;
    out->connection_close =
        f->close || (minor == 0 && !f->keep_alive) || (f->has_te && (f->has_cl || minor == 0));
    out->expect_continue = f->expect;
    out->transfer_encoding = f->has_te;
    out->transfer_codings = f->te_codings;
}

static int response_head(const char *buf, const char *end, hb_response_head *out, size_t max_hdrs,
                         pctx *x)
{
    int *err = &x->err;
    const char *p = buf;
    int rc = skip_empty_lines(&p, end, x);
    if (rc) return rc;
    rc = parse_version(p, end, err);
    if (rc < 0) return rc;
    out->minor_version = rc;
    p += 8;
    if (p == end) return HB_AGAIN;
    /* status-line = HTTP-version SP 3DIGIT SP [ reason-phrase ]: one SP each */
    if (*p++ != ' ') FAIL(HB_PE_BAD_VERSION);
    int status = 0;
    for (int i = 0; i < 3; i++, p++) {
        if (p == end) return HB_AGAIN;
        if ((unsigned)(*p - '0') > 9) FAIL(HB_PE_BAD_STATUS);
        status = status * 10 + (*p - '0');
    }
    if (p == end) return HB_AGAIN;
    if (status < 100) FAIL(HB_PE_BAD_STATUS);
    out->status = status;
    /* the SP before an empty reason is commonly left out: tolerated */
    if (*p == ' ')
        p++;
    else if (*p != '\r' && *p != '\n')
        FAIL(HB_PE_BAD_STATUS);
    const char *reason = p;
    p = scan_value(p, end);
    if (p == end) return HB_AGAIN;
    out->reason = reason;
    out->reason_len = (size_t)(p - reason);
    int le = line_end(p, end, x);
    if (le == 0) FAIL(HB_PE_BAD_HEADER_CHAR);
    if (le == HB_AGAIN) return HB_AGAIN;
    if (le == HB_ERROR) FAIL(HB_PE_BAD_LINE_ENDING);
    p += le;

    fr_state f = {0};
    size_t n;
    rc = parse_headers(&p, end, out->headers, max_hdrs, &n, &f, x);
    if (rc) return rc;
    if (f.te_chunked > 1) FAIL(HB_PE_BAD_TRANSFER_ENCODING);
    out->num_headers = n;
    framing_of(&f, out->minor_version, &out->framing);
    return (int)(p - buf);
}

int hb_parse_response_head_ex(const char *buf, size_t len, hb_response_head *out,
                              const hb_parse_limits *limits, unsigned flags)
{
    size_t max_head, max_hdrs, cap = out->num_headers;
    limits_of(limits, out->headers, cap, &max_head, &max_hdrs);
    pctx x = {.err = 0, .lenient = (flags & HB_PARSE_LENIENT_LF) != 0, .tolerated = 0};
    /* len 0 may come with buf NULL, where even NULL + 0 is undefined */
    int rc = len == 0
                 ? HB_AGAIN
                 : response_head(buf, buf + (len < max_head ? len : max_head), out, max_hdrs, &x);
    if (rc == HB_AGAIN && len > max_head) {
        rc = HB_ERROR;
        x.err = HB_PE_HEAD_TOO_LARGE;
    }
    if (rc < 0) out->num_headers = cap; /* callers retry with the same struct */
    out->error = rc == HB_ERROR ? x.err : HB_PE_NONE;
    out->tolerated = x.tolerated;
    return rc;
}

int hb_parse_response_head(const char *buf, size_t len, hb_response_head *out,
                           const hb_parse_limits *limits)
{
    return hb_parse_response_head_ex(buf, len, out, limits, 0);
}

static int request_head(const char *buf, const char *end, hb_request_head *out, size_t max_hdrs,
                        pctx *x)
{
    int *err = &x->err;
    const char *p = buf;
    int rc = skip_empty_lines(&p, end, x);
    if (rc) return rc;
    const char *method = p;
    while (p < end && tok_tab[(unsigned char)*p])
        p++;
    if (p == end) return HB_AGAIN;
    if (*p != ' ' || p == method) FAIL(HB_PE_BAD_REQUEST_LINE);
    /* request-line = method SP request-target SP HTTP-version: one SP each
     * (RFC 9112 3; whitespace-word parsing is the smuggling-prone leniency) */
    out->method = method;
    out->method_len = (size_t)(p - method);
    p++;
    const char *target = p;
    p = scan_target(p, end);
    if (p == end) return HB_AGAIN;
    if (p == target) FAIL(HB_PE_BAD_REQUEST_LINE);
    if (*p == '\r' || *p == '\n') FAIL(HB_PE_BAD_VERSION); /* HTTP/0.9 */
    if (*p != ' ') FAIL(HB_PE_BAD_REQUEST_LINE);
    out->target = target;
    out->target_len = (size_t)(p - target);
    p++;
    if (p == end) return HB_AGAIN;
    rc = parse_version(p, end, err);
    if (rc < 0) return rc;
    out->minor_version = rc;
    p += 8;
    if (p == end) return HB_AGAIN;
    int le = line_end(p, end, x);
    if (le == 0) FAIL(HB_PE_BAD_VERSION);
    if (le == HB_AGAIN) return HB_AGAIN;
    if (le == HB_ERROR) FAIL(HB_PE_BAD_LINE_ENDING);
    p += le;

    fr_state f = {0};
    size_t n;
    rc = parse_headers(&p, end, out->headers, max_hdrs, &n, &f, x);
    if (rc) return rc;
    if (f.has_te) {
        /* A server that cannot tell where the body ends must refuse it. */
        if (f.has_cl) FAIL(HB_PE_TE_AND_CONTENT_LENGTH);
        if (f.te_chunked != 1 || !f.te_last_chunked || out->minor_version == 0)
            FAIL(HB_PE_BAD_TRANSFER_ENCODING);
    }
    out->num_headers = n;
    framing_of(&f, out->minor_version, &out->framing);
    return (int)(p - buf);
}

int hb_parse_request_head(const char *buf, size_t len, hb_request_head *out,
                          const hb_parse_limits *limits)
{
    size_t max_head, max_hdrs, cap = out->num_headers;
    limits_of(limits, out->headers, cap, &max_head, &max_hdrs);
    pctx x = {0}; /* requests are never lenient: a server must not guess */
    /* len 0 may come with buf NULL, where even NULL + 0 is undefined */
    int rc = len == 0
                 ? HB_AGAIN
                 : request_head(buf, buf + (len < max_head ? len : max_head), out, max_hdrs, &x);
    if (rc == HB_AGAIN && len > max_head) {
        rc = HB_ERROR;
        x.err = HB_PE_HEAD_TOO_LARGE;
    }
    if (rc < 0) out->num_headers = cap;
    out->error = rc == HB_ERROR ? x.err : HB_PE_NONE;
    return rc;
}

enum hb_body_kind hb_response_body_kind(const hb_response_head *h, int request_was_head)
{
    if (request_was_head || h->status < 200 || h->status == 204 || h->status == 304)
        return HB_BODY_NONE;
    if (h->framing.transfer_encoding)
        return h->framing.chunked ? HB_BODY_CHUNKED : HB_BODY_UNTIL_CLOSE;
    if (h->framing.content_length >= 0) return HB_BODY_LENGTH;
    return HB_BODY_UNTIL_CLOSE;
}

enum hb_body_kind hb_request_body_kind(const hb_request_head *h)
{
    if (h->framing.chunked) return HB_BODY_CHUNKED;
    if (h->framing.content_length > 0) return HB_BODY_LENGTH;
    return HB_BODY_NONE;
}

int hb_response_is_interim(const hb_response_head *h)
{
    return h->status >= 100 && h->status < 200 && h->status != 101;
}

/* ---- chunked decoder ---------------------------------------------------- */

/* The states before CS_SIZE_LF make up a size line and count towards
 * HB_CHUNK_MAX_LINE. */
enum {
    CS_SIZE0 = 0, /* start of a size line: a hex digit must follow */
    CS_SIZE,      /* in the hex digits */
    CS_SIZE_WS,   /* BWS after the digits: only more of it or ';' may follow */
    CS_EXT_NAME0, /* after ';': BWS, then the first byte of a name */
    CS_EXT_NAME,  /* in an extension name */
    CS_EXT_EQ,    /* BWS after a name: '=' or ';' must follow */
    CS_EXT_VAL0,  /* after '=': BWS, then a token or a quoted-string */
    CS_EXT_TOKEN, /* in a token value */
    CS_EXT_QS,    /* in a quoted-string */
    CS_EXT_QP,    /* after a backslash in a quoted-string */
    CS_EXT_END,   /* right after a quoted-string */
    CS_EXT_WS,    /* BWS after a value: only more of it or ';' may follow */
    CS_SIZE_LF,
    CS_DATA,
    CS_DATA_CR,
    CS_DATA_LF,
    CS_TRL_START, /* start of a trailer line (an empty one ends the body) */
    CS_TRL_NAME,
    CS_TRL_VALUE,
    CS_TRL_LF,
    CS_END_LF,
    CS_DONE,
    CS_ERROR,
};

void hb_chunked_init_ex(hb_chunked *c, unsigned flags)
{
    memset(c, 0, sizeof *c);
    c->state = CS_SIZE0;
    c->flags = flags;
}

void hb_chunked_init(hb_chunked *c)
{
    hb_chunked_init_ex(c, 0);
}

static ssize_t ch_fail(hb_chunked *c, int code)
{
    c->state = CS_ERROR;
    c->error = code;
    return HB_ERROR;
}

static inline int hexval(unsigned char ch)
{
    if ((unsigned)(ch - '0') <= 9) return ch - '0';
    ch |= 0x20;
    if ((unsigned)(ch - 'a') <= 5) return ch - 'a' + 10;
    return -1;
}

/* A bare LF where a line may end: 1 when lenient (counted), else 0. */
static inline int ch_bare_lf(hb_chunked *c)
{
    if (!(c->flags & HB_PARSE_LENIENT_LF)) return 0;
    c->tolerated++;
    return 1;
}

ssize_t hb_chunked_feed(hb_chunked *c, const char *buf, size_t len, const char **data,
                        size_t *data_len)
{
    *data = NULL;
    *data_len = 0;
    if (c->state == CS_ERROR) return HB_ERROR;
    size_t i = 0;
    while (i < len) {
        if (c->state == CS_DATA) {
            size_t take = len - i;
            if (c->remaining < take) take = (size_t)c->remaining;
            *data = buf + i;
            *data_len = take;
            c->remaining -= take;
            i += take;
            if (c->remaining == 0) c->state = CS_DATA_CR;
            return (ssize_t)i;
        }
        if (c->state == CS_DONE) return (ssize_t)i;
        unsigned char ch = (unsigned char)buf[i++];
        if (c->state < CS_SIZE_LF && ++c->line_len > HB_CHUNK_MAX_LINE)
            return ch_fail(c, HB_PE_CHUNK_LINE_TOO_LONG);
        if (c->state >= CS_TRL_START && c->state <= CS_END_LF) {
            if (++c->trailer_bytes > HB_CHUNK_MAX_TRAILERS)
                return ch_fail(c, HB_PE_TRAILERS_TOO_LARGE);
            if (c->state <= CS_TRL_VALUE && ++c->line_len > HB_CHUNK_MAX_LINE)
                return ch_fail(c, HB_PE_CHUNK_LINE_TOO_LONG);
        }
        switch (c->state) {
        case CS_SIZE0:
        case CS_SIZE: {
            int d = hexval(ch);
            if (d >= 0) {
                if (c->remaining > ((uint64_t)INT64_MAX >> 4))
                    return ch_fail(c, HB_PE_CHUNK_SIZE_OVERFLOW);
                c->remaining = c->remaining << 4 | (uint64_t)d;
                c->state = CS_SIZE;
                break;
            }
            if (c->state == CS_SIZE0) return ch_fail(c, HB_PE_BAD_CHUNK_SIZE);
            /* the digits ended: ';', BWS before one, or the line end */
            if (ch == ';')
                c->state = CS_EXT_NAME0;
            else if (IS_WS(ch))
                c->state = CS_SIZE_WS;
            else if (ch == '\r')
                c->state = CS_SIZE_LF;
            else if (ch == '\n')
                goto size_bare_lf;
            else
                return ch_fail(c, HB_PE_BAD_CHUNK_SIZE);
            break;
        }
        case CS_SIZE_WS:
            /* "3 \r\n": BWS is only allowed before a ';' */
            if (ch == ';')
                c->state = CS_EXT_NAME0;
            else if (!IS_WS(ch))
                return ch_fail(c, HB_PE_BAD_CHUNK_SIZE);
            break;
        case CS_EXT_NAME0:
            if (tok_tab[ch])
                c->state = CS_EXT_NAME;
            else if (!IS_WS(ch))
                return ch_fail(c, HB_PE_BAD_CHUNK);
            break;
        case CS_EXT_NAME:
            if (tok_tab[ch]) break;
            if (ch == '=')
                c->state = CS_EXT_VAL0;
            else if (IS_WS(ch))
                c->state = CS_EXT_EQ;
            else
                goto ext_next;
            break;
        case CS_EXT_EQ:
            if (ch == '=')
                c->state = CS_EXT_VAL0;
            else if (ch == ';')
                c->state = CS_EXT_NAME0;
            else if (!IS_WS(ch))
                return ch_fail(c, HB_PE_BAD_CHUNK);
            break;
        case CS_EXT_VAL0:
            if (ch == '"')
                c->state = CS_EXT_QS;
            else if (tok_tab[ch])
                c->state = CS_EXT_TOKEN;
            else if (!IS_WS(ch))
                return ch_fail(c, HB_PE_BAD_CHUNK);
            break;
        case CS_EXT_TOKEN:
            if (tok_tab[ch]) break;
            goto ext_next;
        case CS_EXT_QS:
            /* qdtext is field-content but '"' and '\\'; no CR or LF inside */
            if (ch == '"')
                c->state = CS_EXT_END;
            else if (ch == '\\')
                c->state = CS_EXT_QP;
            else if (!val_tab[ch])
                return ch_fail(c, HB_PE_BAD_CHUNK);
            break;
        case CS_EXT_QP:
            if (!val_tab[ch]) return ch_fail(c, HB_PE_BAD_CHUNK);
            c->state = CS_EXT_QS;
            break;
        case CS_EXT_END:
        ext_next:
            /* after a name or value: the next extension, BWS or the line end */
            if (ch == ';')
                c->state = CS_EXT_NAME0;
            else if (IS_WS(ch))
                c->state = CS_EXT_WS;
            else if (ch == '\r')
                c->state = CS_SIZE_LF;
            else if (ch == '\n')
                goto size_bare_lf;
            else
                return ch_fail(c, HB_PE_BAD_CHUNK);
            break;
        case CS_EXT_WS:
            if (ch == ';')
                c->state = CS_EXT_NAME0;
            else if (!IS_WS(ch))
                return ch_fail(c, HB_PE_BAD_CHUNK);
            break;
        size_bare_lf:
            if (!ch_bare_lf(c)) return ch_fail(c, HB_PE_BAD_LINE_ENDING);
            goto size_line_done;
        case CS_SIZE_LF:
            if (ch != '\n') return ch_fail(c, HB_PE_BAD_LINE_ENDING);
        size_line_done:
            c->line_len = 0;
            c->state = c->remaining ? CS_DATA : CS_TRL_START;
            break;
        case CS_DATA_CR:
            if (ch == '\r')
                c->state = CS_DATA_LF;
            else if (ch != '\n')
                return ch_fail(c, HB_PE_BAD_CHUNK);
            else if (ch_bare_lf(c))
                c->state = CS_SIZE0;
            else
                return ch_fail(c, HB_PE_BAD_LINE_ENDING);
            break;
        case CS_DATA_LF:
            if (ch != '\n') return ch_fail(c, HB_PE_BAD_CHUNK);
            c->state = CS_SIZE0;
            break;
        case CS_TRL_START:
            if (ch == '\r')
                c->state = CS_END_LF;
            else if (tok_tab[ch])
                c->state = CS_TRL_NAME;
            else if (ch != '\n')
                return ch_fail(c, HB_PE_BAD_CHUNK);
            else if (ch_bare_lf(c))
                goto body_done;
            else
                return ch_fail(c, HB_PE_BAD_LINE_ENDING);
            break;
        case CS_TRL_NAME:
            if (ch == ':')
                c->state = CS_TRL_VALUE;
            else if (!tok_tab[ch])
                return ch_fail(c, HB_PE_BAD_CHUNK);
            break;
        case CS_TRL_VALUE:
            if (ch == '\r')
                c->state = CS_TRL_LF;
            else if (val_tab[ch])
                break;
            else if (ch != '\n')
                return ch_fail(c, HB_PE_BAD_CHUNK);
            else if (ch_bare_lf(c))
                goto trailer_line_done;
            else
                return ch_fail(c, HB_PE_BAD_LINE_ENDING);
            break;
        case CS_TRL_LF:
            if (ch != '\n') return ch_fail(c, HB_PE_BAD_LINE_ENDING);
        trailer_line_done:
            c->line_len = 0;
            c->state = CS_TRL_START;
            break;
        case CS_END_LF:
            if (ch != '\n') return ch_fail(c, HB_PE_BAD_LINE_ENDING);
        body_done:
            c->state = CS_DONE;
            c->done = 1;
            return (ssize_t)i;
        default:
            return ch_fail(c, HB_PE_BAD_CHUNK); /* corrupted state */
        }
    }
    return (ssize_t)i;
}
