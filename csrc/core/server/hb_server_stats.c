/* hb_server_stats.c - the embedded server's statistics: the workers' counters
 * summed (hb_server_stats_read) and the /__stats JSON document every protocol
 * serves (hb__stats_json). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/hb_clock.h"
#include "server/hb_server_int.h"

void hb_server_stats_read(const hb_server *s, hb_server_stats *out)
{
    memset(out, 0, sizeof *out);
    out->threads = s->nworkers;
    out->h2_max_concurrent_streams = s->o.h2_max_concurrent_streams;
    out->h2_initial_window_size = s->o.h2_initial_window_size;
    out->h2_max_frame_size = s->o.h2_max_frame_size;
    out->http3 = s->o.http3;
    for (int i = 0; i < s->nworkers; i++) {
        hb__worker *w = &s->w[i];
        hb__wstats *st = &w->st;
        for (int r = 0; r < HB_ROUTE_COUNT; r++) {
            uint64_t v = HB__LOAD(st->by_route[r]), v2 = HB__LOAD(st->h2.by_route[r]),
                     v3 = HB__LOAD(st->h3.by_route[r]);
            out->by_route[r] += v + v2 + v3;
            out->requests += v + v2 + v3;
            out->requests_h2 += v2;
            out->requests_h3 += v3;
        }
        for (int k = 0; k < 600; k++)
            out->by_status[k] += HB__LOAD(st->by_status[k]) + HB__LOAD(st->h2.by_status[k]) +
                                 HB__LOAD(st->h3.by_status[k]);
        const hb_h3_server_stats *h3 = &st->h3;
        out->connections_h3 += HB__LOAD(h3->connections);
        out->h3_connections_closed += HB__LOAD(h3->closed);
        out->h3_handshakes += HB__LOAD(h3->handshakes);
        out->h3_resumed += HB__LOAD(h3->resumed);
        out->h3_early_data += HB__LOAD(h3->early_data);
        out->h3_early_rejected += HB__LOAD(h3->early_rejected);
        out->h3_handshake_errors += HB__LOAD(h3->handshake_errors);
        out->h3_idle_timeouts += HB__LOAD(h3->idle_timeouts);
        out->h3_errors += HB__LOAD(h3->errors);
        out->h3_streams += HB__LOAD(h3->streams);
        out->h3_rst_sent += HB__LOAD(h3->rst_sent);
        out->h3_rst_received += HB__LOAD(h3->rst_recv);
        out->h3_refused += HB__LOAD(h3->refused);
        out->h3_packets_in += HB__LOAD(h3->packets_in);
        out->h3_packets_out += HB__LOAD(h3->packets_out);
        out->h3_bytes_in += HB__LOAD(h3->bytes_in);
        out->h3_bytes_out += HB__LOAD(h3->bytes_out);
        out->h3_dropped += HB__LOAD(h3->dropped);
        out->h3_version_negotiations += HB__LOAD(h3->version_negotiations);
        out->h3_early_replays += HB__LOAD(h3->early_replays);
        out->h3_retries += HB__LOAD(h3->retries);
        out->h3_half_open += HB__LOAD(h3->half_open);
        out->h3_stream_timeouts += HB__LOAD(h3->stream_timeouts);
        out->h3_body_buffered += HB__LOAD(h3->body_buffered);
        out->h3_closes_limited += HB__LOAD(h3->closes_limited);
        out->h3_cid_slots += HB__LOAD(h3->cid_slots);
        out->h3_streams_cut += HB__LOAD(h3->streams_cut);
        out->sm.sse_streams += HB__LOAD(h3->sse_streams);
        out->sm.sse_events += HB__LOAD(h3->sse_events);
        out->sm.sse_bytes += HB__LOAD(h3->sse_bytes);
        out->sm.stream_streams += HB__LOAD(h3->stream_streams);
        out->sm.stream_chunks += HB__LOAD(h3->stream_chunks);
        out->sm.stream_bytes += HB__LOAD(h3->stream_bytes);
        /* every member of these two is a uint64_t counter */
        for (size_t k = 0; k < sizeof st->sm / 8; k++)
            ((uint64_t *)&out->sm)[k] += HB__LOAD(((uint64_t *)&st->sm)[k]);
        for (size_t k = 0; k < sizeof st->ws / 8; k++)
            ((uint64_t *)&out->ws)[k] += HB__LOAD(((uint64_t *)&st->ws)[k]);
        out->connections_h1 += HB__LOAD(st->conns_h1);
        out->connections_h2 += HB__LOAD(st->conns_h2);
        out->h2_streams += HB__LOAD(st->h2.streams);
        out->h2_rst_sent += HB__LOAD(st->h2.rst_sent);
        out->h2_rst_received += HB__LOAD(st->h2.rst_recv);
        out->h2_goaway_sent += HB__LOAD(st->h2.goaway_sent);
        out->h2_protocol_errors += HB__LOAD(st->h2.protocol_errors);
        out->h2_refused_streams += HB__LOAD(st->h2.refused);
        out->h2_floods += HB__LOAD(st->h2.floods);
        out->connections_refused += HB__LOAD(w->refused);
        out->bytes_in += HB__LOAD(st->bytes_in);
        out->bytes_out += HB__LOAD(st->bytes_out);
        out->connections_accepted += HB__LOAD(st->accepted);
        out->connections_closed += HB__LOAD(st->closed);
        out->tls_handshakes += HB__LOAD(st->hs);
        out->tls_resumed += HB__LOAD(st->hs_resumed);
        out->tls_handshake_errors += HB__LOAD(st->hs_err);
        out->idle_timeouts += HB__LOAD(st->idle_timeouts);
        out->body_bytes_in +=
            HB__LOAD(st->body_in) + HB__LOAD(st->h2.body_in) + HB__LOAD(st->h3.body_in);
        out->client_gone +=
            HB__LOAD(st->client_gone) + HB__LOAD(st->h2.client_gone) + HB__LOAD(st->h3.client_gone);
        uint64_t cpu = 0;
        if (!__atomic_load_n(&w->exited, __ATOMIC_ACQUIRE) &&
            __atomic_load_n(&w->has_cpu_clock, __ATOMIC_ACQUIRE))
            cpu = hb_clock_ns_of(w->cpu_clock);
        if (cpu == 0) cpu = __atomic_load_n(&w->final_cpu_ns, __ATOMIC_RELAXED);
        out->thread_cpu_ns[i] = cpu;
        out->cpu_ns += cpu;
    }
}

/* The document is rendered into its own buffer of HB__SRV_STATS_MAX bytes
 * (queued by reference and freed once written), so it is never cut short
 * whatever was queued before it. Reading stats is not a benchmark path: the
 * one malloc per /__stats keeps the per-connection buffers small. */
char *hb__stats_json(void *arg, size_t *len)
{
    hb_server_stats st;
    hb_server_stats_read(arg, &st);
    char *body = malloc(HB__SRV_STATS_MAX);
    if (!body) return NULL;
    size_t n = 0, cap = HB__SRV_STATS_MAX;
#define J(...)                                                                                     \
    do {                                                                                           \
        int k_ = snprintf(body + n, cap - n, __VA_ARGS__);                                         \
        if (k_ > 0) n = n + (size_t)k_ < cap ? n + (size_t)k_ : cap - 1;                           \
    } while (0)
    J("{\"requests\": %llu, \"by_route\": {", (unsigned long long)st.requests);
    for (int i = 0; i < HB_ROUTE_COUNT; i++)
        J("%s\"%s\": %llu", i ? ", " : "", hb_server_route_name(i),
          (unsigned long long)st.by_route[i]);
    J("}, \"by_status\": {");
    int first = 1;
    for (int i = 0; i < 600; i++) {
        if (!st.by_status[i]) continue;
        J("%s\"%d\": %llu", first ? "" : ", ", i, (unsigned long long)st.by_status[i]);
        first = 0;
    }
    J("}, \"bytes_in\": %llu, \"bytes_out\": %llu, \"connections_accepted\": %llu, "
      "\"connections_closed\": %llu, \"tls_handshakes\": %llu, \"tls_resumed\": %llu, "
      "\"tls_handshake_errors\": %llu, \"idle_timeouts\": %llu, \"body_bytes_in\": %llu, "
      "\"client_gone\": %llu, \"connections_refused\": %llu, ",
      (unsigned long long)st.bytes_in, (unsigned long long)st.bytes_out,
      (unsigned long long)st.connections_accepted, (unsigned long long)st.connections_closed,
      (unsigned long long)st.tls_handshakes, (unsigned long long)st.tls_resumed,
      (unsigned long long)st.tls_handshake_errors, (unsigned long long)st.idle_timeouts,
      (unsigned long long)st.body_bytes_in, (unsigned long long)st.client_gone,
      (unsigned long long)st.connections_refused);
    /* the h3 members only when HTTP/3 is on, like the Python stats() */
    J("\"by_protocol\": {\"http/1.1\": %llu, \"h2\": %llu",
      (unsigned long long)(st.requests - st.requests_h2 - st.requests_h3),
      (unsigned long long)st.requests_h2);
    if (st.http3) J(", \"h3\": %llu", (unsigned long long)st.requests_h3);
    J("}, \"connections_by_protocol\": {\"http/1.1\": %llu, \"h2\": %llu",
      (unsigned long long)st.connections_h1, (unsigned long long)st.connections_h2);
    if (st.http3) J(", \"h3\": %llu", (unsigned long long)st.connections_h3);
    J("}, \"h2\": {\"streams\": %llu, \"streams_reset_sent\": %llu, "
      "\"streams_reset_received\": %llu, \"goaway_sent\": %llu, \"protocol_errors\": %llu, "
      "\"refused_streams\": %llu, \"floods\": %llu, \"settings\": {\"max_concurrent_streams\": %d, "
      "\"initial_window_size\": %d, \"max_frame_size\": %d}}, ",
      (unsigned long long)st.h2_streams, (unsigned long long)st.h2_rst_sent,
      (unsigned long long)st.h2_rst_received, (unsigned long long)st.h2_goaway_sent,
      (unsigned long long)st.h2_protocol_errors, (unsigned long long)st.h2_refused_streams,
      (unsigned long long)st.h2_floods, st.h2_max_concurrent_streams, st.h2_initial_window_size,
      st.h2_max_frame_size);
    if (st.http3)
        J("\"h3\": {\"streams\": %llu, \"connections_closed\": %llu, "
          "\"handshakes\": %llu, \"resumed\": %llu, \"early_data\": %llu, "
          "\"early_rejected\": %llu, \"handshake_errors\": %llu, "
          "\"idle_timeouts\": %llu, \"errors\": %llu, \"streams_reset_sent\": %llu, "
          "\"streams_reset_received\": %llu, "
          "\"refused\": %llu, \"packets_in\": %llu, \"packets_out\": %llu, \"bytes_in\": %llu, "
          "\"bytes_out\": %llu, \"dropped\": %llu, \"version_negotiations\": %llu}, ",
          (unsigned long long)st.h3_streams, (unsigned long long)st.h3_connections_closed,
          (unsigned long long)st.h3_handshakes, (unsigned long long)st.h3_resumed,
          (unsigned long long)st.h3_early_data, (unsigned long long)st.h3_early_rejected,
          (unsigned long long)st.h3_handshake_errors, (unsigned long long)st.h3_idle_timeouts,
          (unsigned long long)st.h3_errors, (unsigned long long)st.h3_rst_sent,
          (unsigned long long)st.h3_rst_received, (unsigned long long)st.h3_refused,
          (unsigned long long)st.h3_packets_in, (unsigned long long)st.h3_packets_out,
          (unsigned long long)st.h3_bytes_in, (unsigned long long)st.h3_bytes_out,
          (unsigned long long)st.h3_dropped, (unsigned long long)st.h3_version_negotiations);
    J("\"sse\": {\"streams\": %llu, \"events\": %llu, \"bytes\": %llu, \"write_timeouts\": %llu}, "
      "\"stream\": {\"streams\": %llu, \"chunks\": %llu, \"bytes\": %llu, "
      "\"write_timeouts\": %llu}, ",
      (unsigned long long)st.sm.sse_streams, (unsigned long long)st.sm.sse_events,
      (unsigned long long)st.sm.sse_bytes, (unsigned long long)st.sm.sse_write_timeouts,
      (unsigned long long)st.sm.stream_streams, (unsigned long long)st.sm.stream_chunks,
      (unsigned long long)st.sm.stream_bytes, (unsigned long long)st.sm.stream_write_timeouts);
    hb__ws_stats_json(&st.ws, body, cap, &n);
    J("\"threads\": %d, \"cpu_ns\": %llu, \"thread_cpu_ns\": [", st.threads,
      (unsigned long long)st.cpu_ns);
    for (int i = 0; i < st.threads; i++)
        J("%s%llu", i ? ", " : "", (unsigned long long)st.thread_cpu_ns[i]);
    J("]}\n");
#undef J
    *len = n;
    return body;
}
