/* hb_calib.h - the machine's wake-up cost, measured by a ping-pong; and a
 * working-set probe.
 *
 * Two threads, pinned to cpu_a and cpu_b (one CPU or two), pass one byte back
 * and forth over two pipes and block in read() between turns: every turn is a
 * sleep and a wake-up, as in a sequential request and response. A round trip
 * is two wake-ups. On a VM a wake-up on another CPU is an inter-processor
 * interrupt (a VM exit), which is what makes the two placements differ.
 * Never includes Python.h; the caller's thread and its affinity are untouched.
 */
#ifndef HB_CALIB_H
#define HB_CALIB_H

#include <stdint.h>

#include "base/hb_common.h"

#define HB_CALIB_MAX_TRIPS 100000

typedef struct hb_calib_result {
    uint64_t round_trips;   /* timed round trips (after a short warm-up) */
    uint64_t rtt_median_ns; /* median wall time of one round trip */
    uint64_t rtt_min_ns;    /* fastest round trip */
    uint64_t cpu_ns;        /* both threads' CPU time per round trip (user + system) */
} hb_calib_result;

/* Time `round_trips` (1..HB_CALIB_MAX_TRIPS) round trips between a thread on
 * cpu_a and one on cpu_b (< 0: not pinned). Returns 0, -EINVAL for a CPU this
 * process may not run on or a bad count, or another -errno; detail in err. */
int hb_calib_pingpong(int cpu_a, int cpu_b, int round_trips, hb_calib_result *out, char *err);

/* The working-set probe: a random cyclic chain through `bytes` of memory, one
 * link per 64-byte cache line, followed `accesses` times after one untimed lap.
 * Each step depends on the one before, so its time is the latency of the cache
 * level holding the working set: a probe the size of a client's hot memory runs
 * from the shared cache on a quiet machine and slows when other processes evict
 * it, which a small fixed-work loop never sees. `seed` fixes the chain.
 * Returns 0 with *ns_per_access, -EINVAL for bytes outside
 * [4096, HB_CALIB_MAX_WS_BYTES] or accesses < 1, -ENOMEM; detail in err. */
#define HB_CALIB_MAX_WS_BYTES ((size_t)1 << 30)
int hb_calib_working_set(size_t bytes, uint64_t accesses, uint64_t seed, double *ns_per_access,
                         char *err);

#endif
