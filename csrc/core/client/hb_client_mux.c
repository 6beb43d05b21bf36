/* hb_client_mux.c - the batch bookkeeping the native client's HTTP/2 and
 * HTTP/3 glue share (see hb_client_mux.h and hb_client_int.h): response
 * header records, the body sink, the callbacks both protocol clients call. */
#include "client/hb_client_mux.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/hb_clock.h"
#include "client/hb_client_int.h"

/* Smallest growth of a memory sink whose final size is unknown, and its first size. */
#define MX_SINK_CHUNK (64 * 1024)
#define MX_SINK_FIRST 1024

void hb__mx_fail(hb_mx *x, int rc, const char *msg)
{
    if (x->rc == 0) {
        x->rc = rc;
        snprintf(x->err, sizeof x->err, "%s", msg);
    }
}

void hb__mx_reset(hb_mx *x, uint64_t now)
{
    x->head_len = 0;
    x->status = 0;
    x->rc = 0;
    x->err[0] = '\0';
    x->body_bytes = 0;
    x->content_length = UINT64_MAX;
    x->t_start = now;
    x->t_first_byte = x->t_done = 0;
    x->state = 0;
    x->end = 0;
    x->b.data = x->body;
    x->b.len = x->body_len;
    x->b.sent = 0;
    if (x->sink) x->sink->len = 0;
}

int hb__mx_start(hb_mx *xs, size_t n, const char *proto, char *err)
{
    for (size_t i = 0; i < n; i++)
        if (!xs[i].head || xs[i].head_cap == 0)
            return hb_fail(err, HB_E_INVALID, "%s exchange %zu has no head buffer", proto, i);
    uint64_t now = hb_now_ns();
    for (size_t i = 0; i < n; i++)
        hb__mx_reset(&xs[i], now);
    return 0;
}

size_t hb__mx_attempt(hb__mx_batch *b, int reused)
{
    size_t before = 0;
    for (size_t i = 0; i < b->n; i++) {
        if (b->xs[i].state == 2)
            before++;
        else
            b->xs[i].reused = reused;
    }
    b->done = before;
    b->any_byte = 0;
    return before;
}

void hb__mx_fail_open(hb_mx *xs, size_t n, int rc, const char *err)
{
    for (size_t i = 0; i < n; i++)
        if (xs[i].state != 2) {
            xs[i].state = 2;
            xs[i].rc = rc;
            snprintf(xs[i].err, sizeof xs[i].err, "%s", err && err[0] ? err : "");
        }
}

static void mx_header(hb_mx *x, const char *name, size_t nl, const char *value, size_t vl)
{
    if (nl > HB_MX_FIELD_MAX || vl > HB_MX_FIELD_MAX ||
        x->head_len + HB_MX_FIELD_HDR + nl + vl > x->head_cap) {
        hb__mx_fail(x, HB_E_TOO_LARGE, "response header block larger than the head buffer");
        return;
    }
    uint16_t l[2] = {(uint16_t)nl, (uint16_t)vl};
    char *o = x->head + x->head_len;
    memcpy(o, l, HB_MX_FIELD_HDR);
    memcpy(o + HB_MX_FIELD_HDR, name, nl);
    memcpy(o + HB_MX_FIELD_HDR + nl, value, vl);
    x->head_len += HB_MX_FIELD_HDR + nl + vl;
    if (nl == 14 && memcmp(name, "content-length", 14) == 0) {
        uint64_t v = 0;
        size_t i = 0;
        for (; i < vl && value[i] >= '0' && value[i] <= '9' && v < UINT64_MAX / 10; i++)
            v = v * 10 + (uint64_t)(value[i] - '0');
        if (i == vl && vl > 0) x->content_length = v;
    }
}

static int sink_put(hb_mx *x, const uint8_t *p, size_t len)
{
    hb_sink *s = x->sink;
    if (s->fd >= 0) {
        while (len > 0) {
            ssize_t w = write(s->fd, p, len);
            if (w < 0) {
                if (errno == EINTR) continue;
                return -errno;
            }
            p += w;
            len -= (size_t)w;
        }
        return 0;
    }
    size_t need = s->len + len;
    if (need > s->cap) {
        if (!s->grow) return HB_E_NOMEM;
        size_t want = need;
        if (x->content_length != UINT64_MAX && x->content_length <= HB_CLIENT_BODY_WHOLE &&
            x->content_length >= need)
            want = (size_t)x->content_length; /* the whole announced body at once */
        else {
            size_t step = s->cap == 0              ? MX_SINK_FIRST
                          : s->len < MX_SINK_CHUNK ? MX_SINK_CHUNK
                                                   : s->len;
            if (step > HB_CLIENT_BODY_STEP) step = HB_CLIENT_BODY_STEP;
            if (want < s->len + step) want = s->len + step;
        }
        if (x->max_body && want > x->max_body && need <= x->max_body) want = (size_t)x->max_body;
        int rc = s->grow(s, want, x->err);
        if (rc < 0) return rc;
    }
    memcpy(s->buf + s->len, p, len);
    s->len += len;
    return 0;
}

static void mx_data(hb_mx *x, const uint8_t *data, size_t len)
{
    x->body_bytes += len;
    if (x->rc) return; /* failed already: the rest is dropped */
    if (x->max_body && x->body_bytes > x->max_body) {
        char msg[96];
        snprintf(msg, sizeof msg, "response body over max_body (%llu bytes)",
                 (unsigned long long)x->max_body);
        hb__mx_fail(x, HB_E_TOO_LARGE, msg);
        return;
    }
    int rc = sink_put(x, data, len);
    if (rc < 0) {
        if (x->rc == 0 && x->err[0]) /* grow wrote the detail */
            x->rc = rc;
        else
            hb__mx_fail(x, rc, rc == HB_E_NOMEM ? "body sink is full" : "writing the body failed");
    }
}

static inline hb__mx_batch *batch_of(void *ud)
{
    return *(hb__mx_batch **)ud;
}

void hb__mx_on_header(void *ud, void *sud, const char *name, size_t nl, const char *value,
                      size_t vl)
{
    batch_of(ud)->any_byte = 1;
    mx_header(sud, name, nl, value, vl);
}

void hb__mx_on_response(void *ud, void *sud, int status)
{
    hb_mx *x = sud;
    batch_of(ud)->any_byte = 1;
    if (x->status == 0) x->t_first_byte = hb_now_ns();
    x->status = status;
}

void hb__mx_on_data(void *ud, void *sud, const uint8_t *data, size_t len)
{
    batch_of(ud)->any_byte = 1;
    mx_data(sud, data, len);
}

hb_mx *hb__mx_closed(void *ud, void *sud, int end)
{
    hb_mx *x = sud;
    x->state = 2;
    x->end = end;
    x->t_done = hb_now_ns();
    batch_of(ud)->done++;
    return x;
}
