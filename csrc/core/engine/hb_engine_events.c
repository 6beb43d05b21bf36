/* hb_engine_events.c - the load generator's stream mode (cfg.stream): each
 * response is a stream of events, timed as they arrive. An event is a
 * server-sent event dispatch when the first response of the run was
 * text/event-stream (hb_sse's scanner), else the end of a chunk of a chunked
 * body (or, for a body delimited otherwise, each read's data). Recorded per
 * measured stream: time to first event (from the stream's intended start, so
 * coordinated-omission corrected at a constant rate of new streams: `ttfe`),
 * every gap between two events (`gap`), and the event count (`events`). */
#include <string.h>
#include <strings.h>

#include "engine/hb_engine_int.h"

void hb__eng_events_header(ethread *th, const char *name, size_t nl, const char *value, size_t vl)
{
    if (nl == 12 && strncasecmp(name, "content-type", 12) == 0 && vl >= 17 &&
        strncasecmp(value, "text/event-stream", 17) == 0)
        th->stream_sse = 1;
}

void hb__eng_events_begin(ethread *th, hb__eng_events *s)
{
    hb_sse_scan_init(&s->scan, th->e->cfg.stream_max_line);
    s->events = 0;
    s->last = 0;
}

/* One event at `now`. */
static void event(ethread *th, const req_slot *q, hb__eng_events *s, uint64_t now)
{
    if (!q->warm) {
        if (s->events == 0)
            hb_hist_record(&th->r.ttfe, now > q->intended ? now - q->intended : 0);
        else
            hb_hist_record(&th->r.gap, now - s->last);
        th->r.events++;
    }
    s->events++;
    s->last = now;
}

int hb__eng_events_data(ethread *th, const req_slot *q, hb__eng_events *s, const char *p, size_t n,
                        int chunk_end, uint64_t now)
{
    if (!th->stream_sse) {
        if (chunk_end || (n && chunk_end < 0)) event(th, q, s, now);
        return 0;
    }
    int64_t k = hb_sse_scan_feed(&s->scan, p, n, NULL);
    if (k < 0) return (int)k;
    while (k-- > 0)
        event(th, q, s, now); /* events in one read arrive together */
    return 0;
}
