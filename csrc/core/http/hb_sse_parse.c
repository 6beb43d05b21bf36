/* hb_sse_parse.c - the event stream parser; the contract is in hb_sse_parse.h. */
#include "http/hb_sse_parse.h"

#include <string.h>

void hb_sse_parser_init(hb_sse_parser *p, uint64_t max_line, hb_sse_grow_fn grow, void *ctx)
{
    memset(p, 0, sizeof *p);
    p->max_line = max_line ? max_line : HB_SSE_DEFAULT_MAX_LINE;
    p->grow = grow;
    p->ctx = ctx;
    p->retry = -1;
    p->reconnect = -1;
}

static int fail(hb_sse_parser *p, int rc)
{
    p->error = rc;
    return rc;
}

/* b = b + s[0, n), within max_line bytes (plus one: data's final LF). */
static int append(hb_sse_parser *p, hb_sse_buf *b, const char *s, size_t n, size_t extra)
{
    size_t need = b->len + n + extra;
    if (need > p->max_line + extra) return fail(p, HB_SSE_E_LINE);
    if (need > b->cap) {
        int rc = p->grow ? p->grow(p, b, need) : HB_E_NOMEM;
        if (rc < 0) return fail(p, rc);
    }
    if (n) memcpy(b->p + b->len, s, n);
    b->len += n;
    return 0;
}

static int is_name(const char *l, size_t n, const char *name, size_t nl)
{
    return n == nl && memcmp(l, name, nl) == 0;
}

/* One line (its end removed): 1 when it dispatches an event, 0, or an error. */
static int line(hb_sse_parser *p, const char *l, size_t n)
{
    if (n == 0) {
        if (p->has_data) return 1;
        p->type.len = 0;
        p->retry = -1;
        return 0;
    }
    if (l[0] == ':') {
        p->comments++;
        return 0;
    }
    const char *c = memchr(l, ':', n);
    size_t nl = c ? (size_t)(c - l) : n;
    const char *v = c ? c + 1 : l + n;
    size_t vl = (size_t)(l + n - v);
    if (vl && v[0] == ' ') {
        v++;
        vl--;
    }
    int rc = 0;
    if (is_name(l, nl, "data", 4)) {
        if ((rc = append(p, &p->data, v, vl, 1)) < 0) return rc;
        p->data.p[p->data.len++] = '\n';
        p->has_data = 1;
    } else if (is_name(l, nl, "event", 5)) {
        p->type.len = 0;
        rc = append(p, &p->type, v, vl, 0);
    } else if (is_name(l, nl, "id", 2)) {
        if (!memchr(v, '\0', vl)) {
            p->id.len = 0;
            rc = append(p, &p->id, v, vl, 0);
        }
    } else if (is_name(l, nl, "retry", 5) && vl) {
        int64_t ms = 0;
        for (size_t i = 0; i < vl; i++) {
            if (v[i] < '0' || v[i] > '9') return 0;
            if (ms < INT64_MAX / 100) ms = ms * 10 + (v[i] - '0');
        }
        p->retry = p->reconnect = ms;
    }
    return rc;
}

static void dispatch(hb_sse_parser *p, hb_sse_event *ev)
{
    if (p->type.len) {
        ev->type = p->type.p;
        ev->type_len = p->type.len;
    } else {
        ev->type = "message";
        ev->type_len = 7;
    }
    ev->data = p->data.p;
    ev->data_len = p->data.len - 1; /* the last data line's LF */
    ev->id = p->id.len ? p->id.p : "";
    ev->id_len = p->id.len;
    ev->retry = p->retry;
    p->events++;
    p->reset = 1;
}

int64_t hb_sse_parse(hb_sse_parser *p, const char *buf, size_t len, hb_sse_event *ev, int *got)
{
    *got = 0;
    if (p->error) return p->error;
    if (p->reset) {
        p->reset = 0;
        p->has_data = 0;
        p->data.len = p->type.len = 0;
        p->retry = -1;
    }
    size_t i = 0;
    while (i < len) {
        if (p->after_cr) {
            p->after_cr = 0;
            if (buf[i] == '\n' && ++i == len) break;
        }
        const char *s = buf + i;
        size_t n = len - i;
        const char *lf = memchr(s, '\n', n);
        const char *end = memchr(s, '\r', lf ? (size_t)(lf - s) : n);
        if (!end) end = lf;
        if (!end) { /* no line end yet: keep the piece */
            if (append(p, &p->line, s, n, 0) < 0) return p->error;
            return (int64_t)len;
        }
        size_t ll = (size_t)(end - s);
        const char *l = s;
        if (p->line.len) {
            if (append(p, &p->line, s, ll, 0) < 0) return p->error;
            l = p->line.p;
            ll = p->line.len;
        } else if (ll > p->max_line) {
            return fail(p, HB_SSE_E_LINE);
        }
        i += (size_t)(end - s) + 1;
        if (*end == '\r') {
            if (i < len) {
                if (buf[i] == '\n') i++;
            } else {
                p->after_cr = 1;
            }
        }
        if (!p->started) {
            p->started = 1;
            if (ll >= 3 && memcmp(l, "\xef\xbb\xbf", 3) == 0) {
                l += 3;
                ll -= 3;
            }
        }
        int rc = line(p, l, ll);
        p->line.len = 0;
        if (rc < 0) return rc;
        if (rc == 1) {
            dispatch(p, ev);
            *got = 1;
            return (int64_t)i;
        }
    }
    return (int64_t)i;
}
