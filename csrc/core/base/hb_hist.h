/* hb_hist.h - latency histogram: HDR-style log-linear buckets, mergeable,
 * coordinated-omission correction, compact versioned binary encoding.
 *
 * Layout (as HdrHistogram): values are grouped in buckets whose width doubles
 * every power of two; each bucket is split into 2^k linear sub-buckets, k
 * chosen so that any value >= lowest is represented with a relative error
 * below 10^-sigfigs. Values in [0, lowest) share the first sub-bucket(s).
 *
 * Contract:
 *  - hb_hist_init() allocates the counts array once (or hb_hist_init_buf()
 *    uses a caller buffer of hb_hist_counts_size() bytes); nothing after init
 *    allocates (record, merge, reset, percentiles, iteration, encode).
 *  - One histogram is owned by one thread: record is plain (no locks, no
 *    atomics). Engine threads each own one and hb_hist_merge() at the end.
 *  - The total count is kept <= INT64_MAX: bulk adds (record_n, corrected)
 *    beyond that are clamped, a merge that would pass it fails.
 *  - Values above `highest` are clamped to `highest` AND counted in
 *    `saturated`, so a clamped maximum is never silently reported as exact.
 *  - min/max are the exact (clamped) recorded values; percentiles return the
 *    highest value equivalent to the bucket (HdrHistogram semantics) clamped
 *    into [min, max]; mean/stddev are computed from bucket midpoints (relative
 *    error below 10^-sigfigs).
 *  - Return codes follow hb_common.h: >= 0 ok, HB_E_INVALID for a bad
 *    configuration/mismatch/corrupt encoding, HB_E_NOMEM; detail in err.
 *
 * Never includes Python.h.
 */
#ifndef HB_HIST_H
#define HB_HIST_H

#include <stddef.h>
#include <stdint.h>

#include "base/hb_common.h"

#define HB_HIST_DEFAULT_LOWEST 1ull
#define HB_HIST_DEFAULT_HIGHEST 3600000000000ull /* 1 h in ns */
#define HB_HIST_DEFAULT_SIGFIGS 3

/* Encoding: "HBH" + version byte, see hb_hist_encode(). */
#define HB_HIST_ENC_VERSION 1

typedef struct hb_hist_config {
    uint64_t lowest;  /* >= 1: smallest value distinguished from 0 */
    uint64_t highest; /* >= 2 * lowest, <= 2^62 */
    int sigfigs;      /* 1 .. 5 */
} hb_hist_config;

/* Fields are read-only for users; use the functions. */
typedef struct hb_hist {
    hb_hist_config cfg;
    /* Derived layout. */
    int unit_magnitude;       /* floor(log2(lowest)) */
    int sub_bucket_half_mag;  /* log2(sub_bucket_count / 2) */
    int32_t sub_bucket_count; /* 2^ceil(log2(2 * 10^sigfigs)) */
    int32_t sub_bucket_half;  /* sub_bucket_count / 2 */
    uint64_t sub_bucket_mask; /* (sub_bucket_count - 1) << unit_magnitude */
    int32_t bucket_count;
    int32_t counts_len;
    /* State. */
    uint64_t total;     /* number of recorded values (including saturated ones) */
    uint64_t saturated; /* values that were above highest and got clamped */
    uint64_t min;       /* UINT64_MAX when empty */
    uint64_t max;       /* 0 when empty */
    int32_t max_index;  /* highest counts index ever touched, -1 when empty */
    int owns_counts;
    uint64_t *counts;
} hb_hist;

/* The default configuration (1 ns .. 1 h, 3 digits). */
hb_hist_config hb_hist_default_config(void);

/* Bytes of counts storage a configuration needs (0 when the config is invalid). */
size_t hb_hist_counts_size(const hb_hist_config *cfg);

/* Initialise h, allocating its counts (calloc) once. 0 / HB_E_INVALID / HB_E_NOMEM. */
int hb_hist_init(hb_hist *h, const hb_hist_config *cfg, char *err);

/* Initialise h on a caller buffer of at least hb_hist_counts_size(cfg) bytes,
 * aligned for uint64_t; the buffer is zeroed; hb_hist_free() won't free it. */
int hb_hist_init_buf(hb_hist *h, const hb_hist_config *cfg, void *buf, size_t len, char *err);

/* Release owned storage; h can be re-initialised afterwards. Safe on a zeroed h. */
void hb_hist_free(hb_hist *h);

/* Initialise dst (allocating) as an exact copy of src. */
int hb_hist_init_copy(hb_hist *dst, const hb_hist *src, char *err);

/* Forget every recorded value; keeps the configuration and storage. */
void hb_hist_reset(hb_hist *h);

/* True (1) when both have the same lowest/highest/sigfigs. */
int hb_hist_same_config(const hb_hist *a, const hb_hist *b);

/* Record one value / n copies of a value. O(1), no allocation. */
void hb_hist_record(hb_hist *h, uint64_t value);
void hb_hist_record_n(hb_hist *h, uint64_t value, uint64_t n);

/* Record value and, when expected_interval > 0 and value > expected_interval,
 * the samples coordinated omission hid: value - k*interval for k = 1.. while
 * >= interval (HdrHistogram's recordValueWithExpectedInterval). Bucket-wise,
 * so the cost is bounded by the number of buckets spanned, not by
 * value / interval. */
void hb_hist_record_corrected(hb_hist *h, uint64_t value, uint64_t expected_interval);

/* A histogram read while its owner records (a progress display): the owner
 * records with hb_hist_record_relaxed, which stores only the bucket's count,
 * with a relaxed atomic (single writer: a load and a store, no locked
 * instruction), leaving total/min/max alone. Any thread may then take
 * hb_hist_add_relaxed(dst, src): dst += a relaxed snapshot of src's counts,
 * dst's total/min/max following from the buckets (min and max are bucket
 * lower bounds). HB_E_INVALID when the configurations differ. */
static inline void hb_hist_record_relaxed(hb_hist *h, uint64_t value);
int hb_hist_add_relaxed(hb_hist *dst, const hb_hist *src, char *err);

/* dst += src. HB_E_INVALID (nothing changed) when the configurations differ. */
int hb_hist_merge(hb_hist *dst, const hb_hist *src, char *err);

uint64_t hb_hist_count(const hb_hist *h);
uint64_t hb_hist_saturated(const hb_hist *h);
uint64_t hb_hist_min(const hb_hist *h);  /* 0 when empty */
uint64_t hb_hist_max(const hb_hist *h);  /* 0 when empty */
double hb_hist_mean(const hb_hist *h);   /* 0 when empty */
double hb_hist_stddev(const hb_hist *h); /* population stddev; 0 when empty */

/* Value at percentile p (0..100; clamped into range): the smallest recorded
 * bucket such that at least ceil(p/100 * count) values are <= it (at least
 * one), reported as that bucket's highest equivalent value, clamped into
 * [min, max]; p == 0 gives min exactly. 0 when empty. */
uint64_t hb_hist_value_at_percentile(const hb_hist *h, double p);

/* Bucket arithmetic (exposed for tests and plotting). */
int32_t hb_hist_index_of(const hb_hist *h, uint64_t value); /* value <= highest */
uint64_t hb_hist_lowest_equivalent(const hb_hist *h, uint64_t value);
uint64_t hb_hist_highest_equivalent(const hb_hist *h, uint64_t value);
uint64_t hb_hist_count_at(const hb_hist *h, uint64_t value); /* count in value's bucket */

/* Iteration over non-empty buckets, lowest first:
 *     hb_hist_iter it; hb_hist_iter_init(&it, h);
 *     while (hb_hist_iter_next(&it)) use(it.lo, it.hi, it.count);
 * [lo, hi] is the inclusive value range of the bucket; cumulative counts the
 * values in this and all lower buckets. */
typedef struct hb_hist_iter {
    const hb_hist *h;
    int32_t index;
    uint64_t lo, hi, count, cumulative;
} hb_hist_iter;

void hb_hist_iter_init(hb_hist_iter *it, const hb_hist *h);
int hb_hist_iter_next(hb_hist_iter *it); /* 1 with a bucket, 0 at the end */

/* Encoding (version 1), all integers LEB128 varints unless stated:
 *     "HBH" 0x01 | lowest | highest | sigfigs | total | saturated | min | max
 *     | ncounts | ncounts runs: zigzag varint, > 0 a count, < 0 -(zeros run)
 * Trailing zero buckets are omitted. Decoding validates everything.
 *
 * hb_hist_encoded_max() bounds the size; hb_hist_encode() writes into buf and
 * returns the number of bytes, or HB_E_INVALID when cap is too small. */
size_t hb_hist_encoded_max(const hb_hist *h);
int64_t hb_hist_encode(const hb_hist *h, uint8_t *buf, size_t cap, char *err);

/* Read the configuration from an encoding without decoding the counts. */
int hb_hist_decode_config(const uint8_t *buf, size_t len, hb_hist_config *cfg, char *err);

/* Decode into h, which must be uninitialised (or freed): on success h is
 * initialised (allocating) and must be hb_hist_free()d; on failure h holds
 * nothing. Returns 0 or HB_E_INVALID / HB_E_NOMEM with the reason in err. */
int hb_hist_decode(hb_hist *h, const uint8_t *buf, size_t len, char *err);

/* ---- inline ---- */

/* The counts index of v (<= highest): the bucket is v's power of two above
 * the sub-bucket range, the sub-bucket its top bits (HdrHistogram's layout). */
static inline int32_t hb__hist_index(const hb_hist *h, uint64_t v)
{
    int pow2ceiling = 64 - __builtin_clzll(v | h->sub_bucket_mask);
    int32_t b = pow2ceiling - h->unit_magnitude - (h->sub_bucket_half_mag + 1);
    int32_t sub = (int32_t)(v >> (b + h->unit_magnitude));
    return ((b + 1) << h->sub_bucket_half_mag) + (sub - h->sub_bucket_half);
}

/* Inline: it sits on the load generator's per-response path. */
static inline void hb_hist_record_relaxed(hb_hist *h, uint64_t value)
{
    if (value > h->cfg.highest) value = h->cfg.highest;
    uint64_t *b = &h->counts[hb__hist_index(h, value)];
    __atomic_store_n(b, __atomic_load_n(b, __ATOMIC_RELAXED) + 1, __ATOMIC_RELAXED);
}

#endif
