/* hb_sse.c - server-sent events; the contract is in hb_sse.h. */
#include "http/hb_sse.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define LINE_WIRE 71 /* "data: " + 64 + "\n" */
#define BLOCK_LINES (HB_SSE_MAX_SIZE / 65 + 1)

/* BLOCK_LINES wire lines back to back: an event's full lines are one run of it. */
static char block[BLOCK_LINES * LINE_WIRE];
static pthread_once_t block_once = PTHREAD_ONCE_INIT;

static void block_fill(void)
{
    for (size_t i = 0; i < BLOCK_LINES; i++) {
        char *p = block + i * LINE_WIRE;
        memcpy(p, "data: ", 6);
        memcpy(p + 6, HB_SSE_LINE, 64);
        p[70] = '\n';
    }
}

static size_t id_head(char *scratch, uint64_t id)
{
    /* "id: <digits>\nevent: tick\n" */
    char d[24];
    size_t n = 0;
    do {
        d[n++] = (char)('0' + id % 10);
        id /= 10;
    } while (id);
    size_t at = 4;
    memcpy(scratch, "id: ", 4);
    while (n)
        scratch[at++] = d[--n];
    memcpy(scratch + at, "\nevent: tick\n", 13);
    return at + 13;
}

int hb_sse_event_iov(struct iovec *iov, char *scratch, uint64_t id, size_t size, size_t *len)
{
    pthread_once(&block_once, block_fill);
    if (size > HB_SSE_MAX_SIZE) size = HB_SSE_MAX_SIZE;
    size_t k = size / 65, r = size % 65;
    int n = 0;
    iov[n].iov_base = scratch;
    iov[n++].iov_len = id_head(scratch, id);
    if (k) {
        iov[n].iov_base = block;
        iov[n++].iov_len = k * LINE_WIRE;
    }
    /* the last line: "data: " + r bytes (a prefix of a wire line), then its end and the blank */
    iov[n].iov_base = block;
    iov[n++].iov_len = 6 + r;
    iov[n].iov_base = (void *)"\n\n";
    iov[n++].iov_len = 2;
    size_t t = 0;
    for (int i = 0; i < n; i++)
        t += iov[i].iov_len;
    *len = t;
    return n;
}

size_t hb_sse_event_len(uint64_t id, size_t size)
{
    char scratch[HB_SSE_SCRATCH];
    if (size > HB_SSE_MAX_SIZE) size = HB_SSE_MAX_SIZE;
    return id_head(scratch, id) + size / 65 * LINE_WIRE + 6 + size % 65 + 2;
}

void hb_sse_event_data(char *out, size_t size)
{
    for (size_t i = 0; i < size; i++)
        out[i] = i % 65 == 64 ? '\n' : HB_SSE_LINE[i % 65];
}

void hb_sse_scan_init(hb_sse_scan *s, uint64_t max_line)
{
    memset(s, 0, sizeof *s);
    s->max_line = max_line ? max_line : 1024 * 1024;
}

/* A line ended: classify it. 1 when it dispatched an event. */
static int line_end(hb_sse_scan *s)
{
    int dispatched = 0;
    s->lines++;
    if (s->line_len == 0) {
        dispatched = s->has_data;
        s->has_data = 0;
    } else if (s->colon && s->name_len == 0) {
        s->comments++;
    } else if (s->name_len == 4 && memcmp(s->name, "data", 4) == 0) {
        s->has_data = 1;
    }
    s->line_len = 0;
    s->name_len = 0;
    s->colon = 0;
    return dispatched;
}

/* The first CR or LF in [p, end), or end: memchr for the LF, then for a CR before it. */
static const char *find_eol(const char *p, const char *end)
{
    const char *lf = memchr(p, '\n', (size_t)(end - p));
    const char *stop = lf ? lf : end;
    const char *cr = memchr(p, '\r', (size_t)(stop - p));
    return cr ? cr : stop;
}

int64_t hb_sse_scan_feed(hb_sse_scan *s, const char *buf, size_t len, size_t *first_end)
{
    if (first_end) *first_end = len;
    if (s->error) return s->error;
    const char *p = buf, *end = buf + len;
    int64_t found = 0;
    while (p < end) {
        if (s->after_cr) {
            s->after_cr = 0;
            if (*p == '\n') { /* the LF of a CRLF */
                p++;
                continue;
            }
        }
        const char *e = find_eol(p, end);
        size_t seg = (size_t)(e - p);
        if (!s->colon) {
            /* the field name runs up to ':' (or the line's end) */
            for (size_t i = 0; i < seg; i++) {
                if (p[i] == ':') {
                    s->colon = 1;
                    break;
                }
                if (s->name_len < sizeof s->name) s->name[s->name_len] = (uint8_t)p[i];
                if (++s->name_len == 7) {
                    s->colon = 1; /* (the name is decided: too long for any field) */
                    break;
                }
            }
        }
        s->line_len += seg;
        if (s->line_len > s->max_line) {
            s->error = HB_SSE_E_LINE;
            return s->error;
        }
        if (e == end) break;
        if (*e == '\r') s->after_cr = 1;
        p = e + 1;
        if (line_end(s)) {
            if (!found && first_end) *first_end = (size_t)(p - buf);
            found++;
            s->events++;
        }
    }
    return found;
}
