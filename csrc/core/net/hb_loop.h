/* hb_loop.h - THE per-thread epoll event loop (load generator and embedded
 * server alike), with timers in a binary min-heap.
 *
 * One loop per thread, never shared. I/O watchers (hb_io) and timers
 * (hb_timer) are caller-owned structs embedded in the caller's objects (use
 * container_of-style casts in the callbacks); the loop stores only pointers.
 * The timer heap's array is allocated at init with a fixed capacity, so
 * starting/stopping a timer never allocates (O(log n)); a loop whose timer
 * count has no bound sets grow_timers, and then a start on a full heap
 * doubles it once (never in steady state).
 * Interest is passed to epoll as given, so each user picks its triggering:
 * the engine registers plain sockets edge-triggered (once per connection)
 * and TLS sockets level-triggered; the server registers connections
 * edge-triggered (EPOLLET, with EPOLLRDHUP) and its listener and stop
 * eventfd level-triggered; the loop's own timerfd is edge-triggered.
 * Interest is changed only when it differs from the current one (hb_loop_mod
 * is a no-op otherwise), so callers can keep epoll_ctl off their per-request
 * path. Waits go through hb_waiter (below).
 *
 * Return codes per hb_common.h: 0 / -errno / HB_E_NOMEM / HB_E_INVALID.
 */
#ifndef HB_LOOP_H
#define HB_LOOP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/epoll.h>

#include "base/hb_common.h"

typedef struct hb_loop hb_loop;
typedef struct hb_io hb_io;
typedef struct hb_timer hb_timer;

/* events: the EPOLL* bits as reported (EPOLLRDHUP too when registered). */
typedef void (*hb_io_fn)(hb_loop *loop, hb_io *io, uint32_t events);
/* now: the loop's clock reading (hb_now_ns) taken just before firing. */
typedef void (*hb_timer_fn)(hb_loop *loop, hb_timer *t, uint64_t now);
/* Called after every wait, before any callback of that round. */
typedef void (*hb_wake_fn)(hb_loop *loop);

struct hb_io {
    int fd;          /* -1 when not registered */
    uint32_t events; /* current epoll interest */
    hb_io_fn fn;
};

struct hb_timer {
    uint64_t deadline; /* hb_now_ns() time */
    size_t slot;       /* heap index + 1; 0 = not armed */
    hb_timer_fn fn;
    int precise; /* fire on time, not when the kernel wakes us (see hb_loop) */
};

/* A wait for epoll events until a deadline (hb_loop_run_once's). A
 * deadline at least HB_WAIT_TFD_MIN_NS away goes on a timerfd registered in
 * the epoll set (re-armed only when it must fire sooner; firing early is
 * harmless, the caller just loops) and the wait itself has no timeout, so a
 * loop that sleeps often does not arm and cancel a kernel hrtimer on every
 * wait (engine vs nginx at -c16: 7.72 -> 7.21 us of CPU per request). A
 * nearer deadline the timerfd does not cover uses epoll_pwait2's ns timeout
 * (epoll_wait's ms, rounded up, without it). */
typedef struct hb_waiter {
    int tfd;        /* -1: none (every deadline is a wait timeout) */
    uint64_t armed; /* when the timerfd fires (hb_now_ns time); 0 = not armed */
} hb_waiter;

#define HB_WAIT_TFD_MIN_NS 2000000ull

/* Create the timerfd and add it to epfd with data.ptr = tag (edge-triggered).
 * Never fails: without a timerfd waits fall back to timeouts. */
void hb_waiter_init(hb_waiter *w, int epfd, void *tag);
/* The tag's event arrived: drain the timerfd. */
void hb_waiter_fired(hb_waiter *w);
void hb_waiter_free(hb_waiter *w);
/* epoll_wait on epfd until an event or `until` (UINT64_MAX: no deadline);
 * now = hb_now_ns(). Returns the event count (the timerfd's own included)
 * or -1 with errno. */
int hb_waiter_wait(hb_waiter *w, int epfd, struct epoll_event *ev, int max, uint64_t now,
                   uint64_t until);

struct hb_loop {
    int epfd;
    int max_events;
    struct epoll_event *events;
    hb_timer **heap;
    size_t heap_len, heap_cap;
    int grow_timers;    /* 1: a start on a full heap doubles it (set after init) */
    hb_wake_fn on_wake; /* NULL, or set after init */
    uint64_t now;       /* updated after every wait */
    hb_waiter waiter;   /* its timerfd's events carry &waiter as data.ptr */
    /* Precise timers: the loop's wait ends early_ns before one is due and the
     * rest is polled (zero-timeout waits, I/O still dispatched as it comes),
     * because a sleeping thread wakes 30-100 us late on a VM. early_ns
     * follows the observed wake-up lateness (up by a quarter of the excess, down by a sixteenth),
     * capped at HB_LOOP_EARLY_MAX_NS. */
    uint64_t early_ns;
};

#define HB_LOOP_EARLY_MAX_NS 150000ull

/* max_events: epoll_wait batch size; max_timers: heap capacity (armed timers
 * at once; the initial one with grow_timers). Allocates once. 0 or -errno /
 * HB_E_NOMEM with detail in err. */
int hb_loop_init(hb_loop *l, int max_events, size_t max_timers, char *err);
/* Closes the epoll fd and frees the arrays; watchers' fds are not closed. */
void hb_loop_free(hb_loop *l);

static inline void hb_io_init(hb_io *io, hb_io_fn fn)
{
    io->fd = -1;
    io->events = 0;
    io->fn = fn;
}
/* Register fd with the given interest (add EPOLLET for edge-triggered). */
int hb_loop_add(hb_loop *l, hb_io *io, int fd, uint32_t events);
/* Change interest; no syscall when it is unchanged. */
int hb_loop_mod(hb_loop *l, hb_io *io, uint32_t events);
/* Unregister (the fd stays open); safe when not registered. Closing an fd
 * also unregisters it: then just call hb_io_forget(). */
int hb_loop_del(hb_loop *l, hb_io *io);
static inline void hb_io_forget(hb_io *io)
{
    io->fd = -1;
    io->events = 0;
}

static inline void hb_timer_init(hb_timer *t, hb_timer_fn fn)
{
    t->deadline = 0;
    t->slot = 0;
    t->fn = fn;
    t->precise = 0;
}
static inline int hb_timer_armed(const hb_timer *t)
{
    return t->slot != 0;
}
/* Arm (or re-arm) t to fire once at deadline. HB_E_NOMEM when the heap is
 * full (with grow_timers: when doubling it fails). */
int hb_timer_start(hb_loop *l, hb_timer *t, uint64_t deadline);
/* Disarm; safe when not armed. */
void hb_timer_stop(hb_loop *l, hb_timer *t);
/* Deadline of the earliest armed timer, or UINT64_MAX. */
static inline uint64_t hb_loop_next_deadline(const hb_loop *l)
{
    return l->heap_len ? l->heap[0]->deadline : UINT64_MAX;
}

/* Wait for I/O at most max_wait_ns (less when a timer is due sooner), run the
 * I/O callbacks, then every timer whose deadline has passed. Returns the
 * number of I/O events dispatched, or -errno (EINTR is retried as 0). */
int hb_loop_run_once(hb_loop *l, uint64_t max_wait_ns);

#endif
