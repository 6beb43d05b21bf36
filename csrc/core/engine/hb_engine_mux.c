/* hb_engine_mux.c - the stream slots of the multiplexed protocols (HTTP/2 and
 * HTTP/3 alike) and their request fields: what hb_engine_h2.c and
 * hb_engine_h3.c share, out of line (the per-request parts are inline in
 * hb_engine_int.h). */
#include <stdlib.h>
#include <string.h>

#include "engine/hb_engine_int.h"
#include "http/hb_parse.h"

int hb__eng_streams_init(hb__eng_streams *t, uint32_t m, char *err)
{
    t->slots = calloc(m, sizeof *t->slots);
    t->free = calloc(m, sizeof *t->free);
    if (!t->slots || !t->free) return hb_fail(err, HB_E_NOMEM, "out of memory");
    t->m = m;
    for (uint32_t i = 0; i < m; i++)
        t->free[i] = m - 1 - i;
    t->nfree = m;
    t->pending = 0;
    return 0;
}

void hb__eng_streams_free(hb__eng_streams *t)
{
    free(t->slots);
    free(t->free);
    t->slots = NULL;
    t->free = NULL;
}

void hb__eng_streams_reset(hb__eng_streams *t, econn *c, int keep_unsent)
{
    int keep = keep_unsent && c->rcount && c->rcount == t->pending;
    t->nfree = 0;
    for (uint32_t i = t->m; i-- > 0;) {
        if (!keep) t->slots[i].used = 0;
        if (!t->slots[i].used) t->free[t->nfree++] = i;
    }
    if (!keep) t->pending = 0;
    c->rcount = t->pending;
}

void hb__eng_streams_fail(hb__eng_streams *t, econn *c, int type, uint64_t now)
{
    for (uint32_t i = 0; i < t->m && c->rcount; i++) {
        hb__eng_stream *sl = &t->slots[i];
        if (!sl->used) continue;
        int ty = sl->ev_err ? HB_ENG_ERR_PROTOCOL : type; /* set in stream mode only */
        hb__eng_account_error(c->th, &sl->q, ty, now);
        if (!sl->submitted) t->pending--;
        sl->used = 0;
        t->free[t->nfree++] = i;
        c->rcount--;
    }
}

int hb__eng_streams_timed_out(const hb__eng_streams *t, uint64_t now, uint64_t tmo)
{
    for (uint32_t i = 0; i < t->m; i++) {
        const hb__eng_stream *sl = &t->slots[i];
        /* a read from the connection's timer may have started it after `now` */
        if (sl->used && now > sl->q.start && now - sl->q.start > tmo) return 1;
    }
    return 0;
}

uint64_t hb__eng_streams_measured(const hb__eng_streams *t)
{
    uint64_t n = 0;
    for (uint32_t i = 0; i < t->m; i++)
        n += t->slots[i].used && !t->slots[i].q.warm;
    return n;
}

void hb__eng_mux_issue(econn *c, uint64_t intended, uint64_t now, int warm)
{
    (void)hb__eng_stream_issue(&((hb__eng_mconn *)c)->st, c, intended, now, warm);
}

void hb__eng_mux_fail(econn *c, int type, uint64_t now)
{
    hb__eng_streams_fail(&((hb__eng_mconn *)c)->st, c, type, now);
}

int hb__eng_mux_timed_out(const econn *c, uint64_t now, uint64_t tmo)
{
    return hb__eng_streams_timed_out(&((const hb__eng_mconn *)c)->st, now, tmo);
}

uint64_t hb__eng_mux_measured(const econn *c)
{
    return hb__eng_streams_measured(&((const hb__eng_mconn *)c)->st);
}

void hb__eng_mux_on_header(void *ud, void *sud, const char *n, size_t nl, const char *v, size_t vl)
{
    (void)sud;
    ethread *th = ((econn *)ud)->th;
    hb__eng_header(th, n, nl, v, vl);
    if (th->e->cfg.stream) hb__eng_events_header(th, n, nl, v, vl);
}

void hb__eng_mux_events(econn *c, hb__eng_stream *sl, const uint8_t *d, size_t len, int chunk_end,
                        uint64_t now)
{
    ethread *th = c->th;
    if (sl->ev_err || !sl->used) return;
    if (hb__eng_events_data(th, &sl->q, &sl->ev, (const char *)d, len, chunk_end, now) < 0) {
        sl->ev_err = 1;
        hb__eng_note_error(th, HB_ENG_ERR_PROTOCOL, HB_E_PROTOCOL,
                           "a server-sent event line over the stream's line bound");
    }
}

int hb__eng_mux_check(const hb_engine_config *cfg, const char *proto, char *err)
{
    if (!cfg->fields || cfg->nfields < 4)
        return hb_fail(err, HB_E_INVALID, "%s needs the request's header fields", proto);
    if (cfg->body_fd >= 0)
        return hb_fail(err, HB_E_INVALID, "%s sends a body from memory only, not from a file",
                       proto);
    return 0;
}

int hb__eng_fields_prepare(hb_engine *e, char *err)
{
    hb_engine_config *cf = &e->cfg;
    size_t tot = 0;
    for (size_t i = 0; i < cf->nfields; i++)
        tot += cf->fields[i].name_len + cf->fields[i].value_len;
    e->fields = calloc(cf->nfields, sizeof *e->fields);
    e->fbuf = malloc(tot + 1);
    if (!e->fields || !e->fbuf) return hb_fail(err, HB_E_NOMEM, "out of memory");
    size_t o = 0;
    for (size_t i = 0; i < cf->nfields; i++) {
        const hb_header *f = &cf->fields[i];
        memcpy(e->fbuf + o, f->name, f->name_len);
        e->fields[i].name = e->fbuf + o;
        e->fields[i].name_len = f->name_len;
        o += f->name_len;
        memcpy(e->fbuf + o, f->value, f->value_len);
        e->fields[i].value = e->fbuf + o;
        e->fields[i].value_len = f->value_len;
        o += f->value_len;
    }
    cf->fields = e->fields;
    cf->head = NULL;
    cf->head_len = 0;
    e->req_len = cf->body_len;
    return 0;
}

void hb__eng_fields_cleanup(hb_engine *e)
{
    free(e->fields);
    free(e->fbuf);
}
