/* hb_calib.c - the ping-pong and the working-set probe behind hb_calib.h. */
#include "base/hb_calib.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/hb_clock.h"

/* untimed round trips first: both threads reach their CPUs and steady state */
#define WARMUP_TRIPS 20

typedef struct side {
    int cpu;
    int rfd, wfd;
    int trips;     /* total, warm-up included */
    uint64_t *rtt; /* pinger only: one entry per timed trip */
    uint64_t cpu_ns;
    int rc;
    char err[HB_ERR_LEN];
} side;

static int pin_self(int cpu, char *err)
{
    if (cpu < 0) return 0;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    int e = pthread_setaffinity_np(pthread_self(), sizeof set, &set);
    if (e != 0) return hb_fail(err, -e, "cannot run a thread on CPU %d: %s", cpu, strerror(e));
    return 0;
}

static int xread(int fd, char *err)
{
    char b;
    for (;;) {
        ssize_t r = read(fd, &b, 1);
        if (r == 1) return 0;
        if (r == 0) return hb_fail(err, HB_E_CLOSED, "ping-pong peer stopped");
        if (errno != EINTR) return hb_fail(err, -errno, "read: %s", strerror(errno));
    }
}

static int xwrite(int fd, char *err)
{
    char b = 'x';
    for (;;) {
        ssize_t r = write(fd, &b, 1);
        if (r == 1) return 0;
        if (r < 0 && errno != EINTR) return hb_fail(err, -errno, "write: %s", strerror(errno));
    }
}

/* The pinger: writes, waits for the echo, times each round trip. */
static void *ping_main(void *arg)
{
    side *s = arg;
    s->rc = pin_self(s->cpu, s->err);
    uint64_t c0 = hb_thread_cpu_ns();
    for (int i = 0; s->rc == 0 && i < s->trips; i++) {
        uint64_t t0 = hb_now_ns();
        s->rc = xwrite(s->wfd, s->err);
        if (s->rc == 0) s->rc = xread(s->rfd, s->err);
        if (i >= WARMUP_TRIPS) s->rtt[i - WARMUP_TRIPS] = hb_now_ns() - t0;
        if (i == WARMUP_TRIPS - 1) c0 = hb_thread_cpu_ns();
    }
    s->cpu_ns = hb_thread_cpu_ns() - c0;
    close(s->wfd); /* EOF tells the echo thread to stop, also after an error */
    s->wfd = -1;
    return NULL;
}

/* The echo: waits, answers; ends at EOF. */
static void *pong_main(void *arg)
{
    side *s = arg;
    s->rc = pin_self(s->cpu, s->err);
    uint64_t c0 = hb_thread_cpu_ns();
    for (int i = 0; s->rc == 0 && i < s->trips; i++) {
        s->rc = xread(s->rfd, s->err);
        if (s->rc == 0) s->rc = xwrite(s->wfd, s->err);
        if (i == WARMUP_TRIPS - 1) c0 = hb_thread_cpu_ns();
    }
    s->cpu_ns = hb_thread_cpu_ns() - c0;
    close(s->wfd); /* the pinger's read ends at EOF when this side failed */
    s->wfd = -1;
    return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static void close_fd(int *fd)
{
    if (*fd >= 0) close(*fd);
    *fd = -1;
}

int hb_calib_pingpong(int cpu_a, int cpu_b, int round_trips, hb_calib_result *out, char *err)
{
    if (round_trips < 1 || round_trips > HB_CALIB_MAX_TRIPS)
        return hb_fail(err, -EINVAL, "round_trips must be in 1..%d", HB_CALIB_MAX_TRIPS);
    memset(out, 0, sizeof *out);
    int to[2] = {-1, -1}, back[2] = {-1, -1};
    if (pipe2(to, O_CLOEXEC) != 0) return hb_fail(err, -errno, "pipe2: %s", strerror(errno));
    if (pipe2(back, O_CLOEXEC) != 0) {
        int e = errno;
        close_fd(&to[0]);
        close_fd(&to[1]);
        return hb_fail(err, -e, "pipe2: %s", strerror(e));
    }
    side a = {.cpu = cpu_a, .rfd = back[0], .wfd = to[1], .trips = round_trips + WARMUP_TRIPS};
    side b = {.cpu = cpu_b, .rfd = to[0], .wfd = back[1], .trips = a.trips};
    int rc = 0;
    a.rtt = malloc(sizeof(uint64_t) * (size_t)round_trips);
    if (!a.rtt) {
        rc = hb_fail(err, HB_E_NOMEM, "out of memory");
        goto done;
    }
    pthread_t ta, tb;
    int e = pthread_create(&tb, NULL, pong_main, &b);
    if (e != 0) {
        rc = hb_fail(err, -e, "pthread_create: %s", strerror(e));
        goto done;
    }
    e = pthread_create(&ta, NULL, ping_main, &a);
    if (e != 0) {
        close_fd(&to[1]); /* the echo thread reads EOF and ends */
        a.wfd = -1;
        pthread_join(tb, NULL);
        rc = hb_fail(err, -e, "pthread_create: %s", strerror(e));
        goto done;
    }
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    if (a.rc != 0 || (b.rc != 0 && b.rc != HB_E_CLOSED)) {
        side *bad = a.rc != 0 && !(a.rc == HB_E_CLOSED && b.rc != 0) ? &a : &b;
        rc = bad->rc;
        if (err) memcpy(err, bad->err, HB_ERR_LEN);
        goto done;
    }
    qsort(a.rtt, (size_t)round_trips, sizeof(uint64_t), cmp_u64);
    out->round_trips = (uint64_t)round_trips;
    out->rtt_median_ns = a.rtt[round_trips / 2];
    out->rtt_min_ns = a.rtt[0];
    out->cpu_ns = (a.cpu_ns + b.cpu_ns) / (uint64_t)round_trips;
done:
    free(a.rtt);
    close_fd(&to[0]);
    close_fd(&back[0]);
    if (a.wfd >= 0) close_fd(&to[1]);
    if (b.wfd >= 0) close_fd(&back[1]);
    return rc;
}

/* one cache line: the index of the next line in the chain, padding to 64 bytes */
typedef struct ws_line {
    size_t next;
    char pad[64 - sizeof(size_t)];
} ws_line;

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

int hb_calib_working_set(size_t bytes, uint64_t accesses, uint64_t seed, double *ns_per_access,
                         char *err)
{
    if (bytes < 4096 || bytes > HB_CALIB_MAX_WS_BYTES || accesses < 1)
        return hb_fail(err, -EINVAL,
                       "working set of %zu bytes and %llu accesses: need 4096.."
                       "%zu bytes and at least one access",
                       bytes, (unsigned long long)accesses, HB_CALIB_MAX_WS_BYTES);
    size_t n = bytes / sizeof(ws_line);
    ws_line *lines = NULL;
    if (posix_memalign((void **)&lines, 64, n * sizeof(ws_line)) != 0)
        return hb_fail(err, -ENOMEM, "cannot allocate a %zu-byte working set", bytes);
    /* Sattolo's shuffle: one cycle through every line, in random order */
    for (size_t i = 0; i < n; i++)
        lines[i].next = i;
    for (size_t i = n - 1; i > 0; i--) {
        size_t j = (size_t)(splitmix64(&seed) % i);
        size_t t = lines[i].next;
        lines[i].next = lines[j].next;
        lines[j].next = t;
    }
    size_t at = 0;
    for (size_t i = 0; i < n; i++)
        at = lines[at].next; /* untimed lap: all lines touched */
    uint64_t t0 = hb_now_ns();
    for (uint64_t i = 0; i < accesses; i++)
        at = lines[at].next;
    uint64_t dt = hb_now_ns() - t0;
    /* `at` feeds the result so the chase cannot be optimised away */
    *ns_per_access = (double)dt / (double)accesses + (double)(at >= n);
    free(lines);
    return 0;
}
