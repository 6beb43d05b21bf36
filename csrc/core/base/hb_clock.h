/* hb_clock.h - monotonic nanoseconds and thread CPU time. Header-only. */
#ifndef HB_CLOCK_H
#define HB_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t hb_clock_ns_of(clockid_t id)
{
    struct timespec ts;
    if (clock_gettime(id, &ts) != 0) return 0;
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Monotonic wall clock (vDSO, no syscall). */
static inline uint64_t hb_now_ns(void)
{
    return hb_clock_ns_of(CLOCK_MONOTONIC);
}
/* CPU time of the calling thread. */
static inline uint64_t hb_thread_cpu_ns(void)
{
    return hb_clock_ns_of(CLOCK_THREAD_CPUTIME_ID);
}

#endif
