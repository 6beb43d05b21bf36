/* hb_engine_result.c - the engine's results: a thread's counters and
 * histograms (set up per thread and for the merged result) and their sum. */
#include <stdlib.h>
#include <string.h>

#include "engine/hb_engine_int.h"

/* The result's histograms, in one order for init, free and merge. */
#define NHISTS 9
static void hists(hb_engine_result *r, hb_hist *hs[NHISTS])
{
    hb_hist *all[NHISTS] = {&r->latency,    &r->latency_uncorrected,
                            &r->processing, &r->ttfb,
                            &r->connect,    &r->tls,
                            &r->setup,      &r->ttfe,
                            &r->gap};
    memcpy(hs, all, sizeof all);
}

int hb__eng_result_init(hb_engine_result *r, uint32_t nsec, char *err)
{
    memset(r, 0, sizeof *r);
    r->doc_length = -1;
    hb_hist_config hc = hb_hist_default_config();
    hb_hist *hs[NHISTS];
    hists(r, hs);
    for (size_t i = 0; i < NHISTS; i++) {
        int rc = hb_hist_init(hs[i], &hc, err);
        if (rc < 0) return rc;
    }
    r->nseconds = nsec;
    if (nsec) {
        r->sec_ok = calloc(nsec, sizeof *r->sec_ok);
        r->sec_err = calloc(nsec, sizeof *r->sec_err);
        /* calloc: a long -n run's rows stay untouched (unmapped) until a second uses them */
        r->sec_lat = calloc((size_t)nsec * HB_ENG_SEC_BUCKETS, sizeof *r->sec_lat);
        if (!r->sec_ok || !r->sec_err || !r->sec_lat)
            return hb_fail(err, HB_E_NOMEM, "out of memory (per-second series)");
    }
    return 0;
}

void hb_engine_result_free(hb_engine_result *r)
{
    hb_hist *hs[NHISTS];
    hists(r, hs);
    for (size_t i = 0; i < NHISTS; i++)
        hb_hist_free(hs[i]);
    free(r->sec_ok);
    free(r->sec_err);
    free(r->sec_lat);
    r->sec_ok = r->sec_err = NULL;
    r->sec_lat = NULL;
    r->nseconds = 0;
}

void hb__eng_result_add(hb_engine_result *r, hb_engine_result *x)
{
    r->completed += x->completed;
    r->responses += x->responses;
    r->ok += x->ok;
    r->non2xx += x->non2xx;
    for (int i = 0; i < 6; i++)
        r->status_class[i] += x->status_class[i];
    for (int i = 0; i < 1000; i++)
        r->status[i] += x->status[i];
    for (int i = 0; i < HB_ENG_NERR; i++)
        r->errors[i] += x->errors[i];
    r->errors_total += x->errors_total;
    r->bytes_in += x->bytes_in;
    r->bytes_out += x->bytes_out;
    r->body_bytes += x->body_bytes;
    r->connections_opened += x->connections_opened;
    r->reconnects += x->reconnects;
    r->tls_resumed += x->tls_resumed;
    r->inflight_at_stop += x->inflight_at_stop;
    r->warmup_requests += x->warmup_requests;
    r->cpu_user_ns += x->cpu_user_ns;
    r->cpu_sys_ns += x->cpu_sys_ns;
    for (uint32_t s = 0; s < r->nseconds && s < x->nseconds; s++) {
        r->sec_ok[s] += x->sec_ok[s];
        r->sec_err[s] += x->sec_err[s];
        if (!x->sec_ok[s] && !x->sec_err[s]) continue; /* an unused row: never touched */
        uint32_t *dst = r->sec_lat + (size_t)s * HB_ENG_SEC_BUCKETS;
        const uint32_t *src = x->sec_lat + (size_t)s * HB_ENG_SEC_BUCKETS;
        for (uint32_t b = 0; b < HB_ENG_SEC_BUCKETS; b++)
            dst[b] += src[b];
    }
    if (!r->server[0] && x->server[0]) memcpy(r->server, x->server, sizeof r->server);
    if (r->doc_length < 0) r->doc_length = x->doc_length;
    if (!r->tls_info[0] && x->tls_info[0]) memcpy(r->tls_info, x->tls_info, sizeof r->tls_info);
    if (!r->first_error[0] && x->first_error[0])
        memcpy(r->first_error, x->first_error, sizeof r->first_error);
    if (!r->fatal_rc && x->fatal_rc) {
        r->fatal_rc = x->fatal_rc;
        memcpy(r->fatal, x->fatal, sizeof r->fatal);
    }
    hb_hist *rh[NHISTS], *xh[NHISTS];
    hists(r, rh);
    hists(x, xh);
    for (size_t i = 0; i < NHISTS; i++)
        hb_hist_merge(rh[i], xh[i], NULL);
    r->sends += x->sends;
    r->sends_late += x->sends_late;
    r->unsent += x->unsent;
    r->connect_attempts += x->connect_attempts;
    r->connect_failures += x->connect_failures;
    r->connect_fd_exhausted += x->connect_fd_exhausted;
    r->quic_dgrams_sent += x->quic_dgrams_sent;
    r->quic_dgrams_recv += x->quic_dgrams_recv;
    r->quic_pto += x->quic_pto;
    r->events += x->events;
}

uint64_t hb_engine_sec_percentile(const hb_engine_result *r, uint32_t s, double p)
{
    if (!r->sec_lat || s >= r->nseconds) return 0;
    const uint32_t *row = r->sec_lat + (size_t)s * HB_ENG_SEC_BUCKETS;
    uint64_t total = 0;
    for (uint32_t b = 0; b < HB_ENG_SEC_BUCKETS; b++)
        total += row[b];
    if (!total) return 0;
    if (p < 0) p = 0;
    if (p > 100) p = 100;
    uint64_t rank = (uint64_t)(p / 100.0 * (double)total + 0.5);
    if (rank < 1) rank = 1;
    if (rank > total) rank = total;
    uint64_t acc = 0;
    for (uint32_t b = 0; b < HB_ENG_SEC_BUCKETS; b++) {
        acc += row[b];
        if (acc < rank) continue;
        if (b < HB_ENG_SEC_SUB) return b;
        uint32_t e = b / HB_ENG_SEC_SUB + 3, sub = b % HB_ENG_SEC_SUB;
        uint64_t lo = (uint64_t)(HB_ENG_SEC_SUB + sub) << (e - 4), width = (uint64_t)1 << (e - 4);
        return lo + width / 2;
    }
    return 0;
}
