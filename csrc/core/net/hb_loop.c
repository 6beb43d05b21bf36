#include "net/hb_loop.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "base/hb_clock.h"

int hb_loop_init(hb_loop *l, int max_events, size_t max_timers, char *err)
{
    memset(l, 0, sizeof *l);
    l->epfd = -1;
    l->waiter.tfd = -1;
    l->early_ns = 50000;
    if (max_events < 1) max_events = 64;
    if (max_timers < 1) max_timers = 1;
    l->events = calloc((size_t)max_events, sizeof *l->events);
    l->heap = calloc(max_timers, sizeof *l->heap);
    if (!l->events || !l->heap) {
        hb_loop_free(l);
        return hb_fail(err, HB_E_NOMEM, "loop: out of memory");
    }
    l->max_events = max_events;
    l->heap_cap = max_timers;
    l->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (l->epfd < 0) {
        int e = errno;
        hb_loop_free(l);
        return hb_fail(err, -e, "epoll_create1: %s", strerror(e));
    }
    hb_waiter_init(&l->waiter, l->epfd, &l->waiter);
    l->now = hb_now_ns();
    return 0;
}

void hb_loop_free(hb_loop *l)
{
    hb_waiter_free(&l->waiter);
    if (l->epfd >= 0) close(l->epfd);
    l->epfd = -1;
    free(l->events);
    free(l->heap);
    l->events = NULL;
    l->heap = NULL;
    l->heap_len = l->heap_cap = 0;
}

int hb_loop_add(hb_loop *l, hb_io *io, int fd, uint32_t events)
{
    struct epoll_event ev;
    ev.events = events;
    ev.data.ptr = io;
    if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev) != 0) return -errno;
    io->fd = fd;
    io->events = events;
    return 0;
}

int hb_loop_mod(hb_loop *l, hb_io *io, uint32_t events)
{
    if (io->fd < 0) return HB_E_INVALID;
    if (io->events == events) return 0;
    struct epoll_event ev;
    ev.events = events;
    ev.data.ptr = io;
    if (epoll_ctl(l->epfd, EPOLL_CTL_MOD, io->fd, &ev) != 0) return -errno;
    io->events = events;
    return 0;
}

int hb_loop_del(hb_loop *l, hb_io *io)
{
    if (io->fd < 0) return 0;
    int rc = 0;
    if (epoll_ctl(l->epfd, EPOLL_CTL_DEL, io->fd, NULL) != 0) rc = -errno;
    hb_io_forget(io);
    return rc;
}

/* Heap helpers: slot = index + 1 so a zeroed timer reads as "not armed". */
static void heap_set(hb_loop *l, size_t i, hb_timer *t)
{
    l->heap[i] = t;
    t->slot = i + 1;
}

static void sift_up(hb_loop *l, size_t i)
{
    hb_timer *t = l->heap[i];
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (l->heap[p]->deadline <= t->deadline) break;
        heap_set(l, i, l->heap[p]);
        i = p;
    }
    heap_set(l, i, t);
}

static void sift_down(hb_loop *l, size_t i)
{
    hb_timer *t = l->heap[i];
    size_t n = l->heap_len;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && l->heap[c + 1]->deadline < l->heap[c]->deadline) c++;
        if (l->heap[c]->deadline >= t->deadline) break;
        heap_set(l, i, l->heap[c]);
        i = c;
    }
    heap_set(l, i, t);
}

int hb_timer_start(hb_loop *l, hb_timer *t, uint64_t deadline)
{
    if (t->slot) {
        size_t i = t->slot - 1;
        uint64_t old = t->deadline;
        t->deadline = deadline;
        if (deadline < old)
            sift_up(l, i);
        else if (deadline > old)
            sift_down(l, i);
        return 0;
    }
    if (l->heap_len >= l->heap_cap) {
        if (!l->grow_timers) return HB_E_NOMEM;
        /* doubling: reallocates only past the most timers ever armed */
        hb_timer **h = realloc(l->heap, 2 * l->heap_cap * sizeof *h);
        if (!h) return HB_E_NOMEM;
        l->heap = h;
        l->heap_cap *= 2;
    }
    t->deadline = deadline;
    l->heap[l->heap_len] = t;
    t->slot = ++l->heap_len;
    sift_up(l, l->heap_len - 1);
    return 0;
}

void hb_timer_stop(hb_loop *l, hb_timer *t)
{
    if (!t->slot) return;
    size_t i = t->slot - 1;
    t->slot = 0;
    l->heap_len--;
    if (i == l->heap_len) return;
    hb_timer *last = l->heap[l->heap_len];
    heap_set(l, i, last);
    /* The moved element may need to go either way. */
    if (i > 0 && l->heap[(i - 1) / 2]->deadline > last->deadline)
        sift_up(l, i);
    else
        sift_down(l, i);
}

/* ---- hb_waiter ---- */

void hb_waiter_init(hb_waiter *w, int epfd, void *tag)
{
    w->armed = 0;
    w->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (w->tfd < 0) return;
    struct epoll_event ev = {.events = EPOLLIN | EPOLLET, .data.ptr = tag};
    if (epoll_ctl(epfd, EPOLL_CTL_ADD, w->tfd, &ev) != 0) {
        close(w->tfd);
        w->tfd = -1;
    }
}

void hb_waiter_fired(hb_waiter *w)
{
    uint64_t ticks;
    /* EAGAIN: a re-arm already reset the count. Anything else: stop using it
     * (closing it also removes it from the epoll set). */
    if (w->tfd >= 0 && read(w->tfd, &ticks, sizeof ticks) < 0 && errno != EAGAIN) hb_waiter_free(w);
}

void hb_waiter_free(hb_waiter *w)
{
    if (w->tfd >= 0) close(w->tfd);
    w->tfd = -1;
    w->armed = 0;
}

/* Make the timerfd fire no later than deadline. 0, or -1 when it is not used. */
static int tfd_arm(hb_waiter *w, uint64_t now, uint64_t deadline)
{
    if (w->tfd < 0) return -1;
    if (w->armed > now && w->armed <= deadline) return 0; /* already covered */
    if (deadline - now < HB_WAIT_TFD_MIN_NS) return -1;   /* not worth a syscall */
    struct itimerspec its;
    memset(&its, 0, sizeof its);
    its.it_value.tv_sec = (time_t)(deadline / 1000000000ull);
    its.it_value.tv_nsec = (long)(deadline % 1000000000ull);
    if (timerfd_settime(w->tfd, TFD_TIMER_ABSTIME, &its, NULL) != 0) return -1;
    w->armed = deadline;
    return 0;
}

/* Set once when epoll_pwait2 is missing (kernel < 5.11, valgrind). */
static _Atomic int no_pwait2;

int hb_waiter_wait(hb_waiter *w, int epfd, struct epoll_event *ev, int max, uint64_t now,
                   uint64_t until)
{
    if (until == UINT64_MAX) return epoll_wait(epfd, ev, max, -1);
    uint64_t wait = until > now ? until - now : 0;
    if (wait && tfd_arm(w, now, until) == 0) return epoll_wait(epfd, ev, max, -1);
    if (!no_pwait2) {
        struct timespec ts = {(time_t)(wait / 1000000000ull), (long)(wait % 1000000000ull)};
        int n = epoll_pwait2(epfd, ev, max, &ts, NULL);
        if (n >= 0 || errno != ENOSYS) return n;
        /* Fall back to ms timeouts, rounded up so a timer never fires early. */
        no_pwait2 = 1;
    }
    uint64_t ms = (wait + 999999) / 1000000;
    return epoll_wait(epfd, ev, max, ms > 60000 ? 60000 : (int)ms);
}

/* ---- the loop ---- */

int hb_loop_run_once(hb_loop *l, uint64_t max_wait_ns)
{
    uint64_t now = hb_now_ns();
    uint64_t until = hb_loop_next_deadline(l);
    int precise = l->heap_len && l->heap[0]->precise && until > now;
    if (precise) until = until - now > l->early_ns ? until - l->early_ns : now; /* poll the rest */
    if (max_wait_ns <= UINT64_MAX - now && now + max_wait_ns < until) {
        until = now + max_wait_ns;
        precise = 0;
    }
    int n = hb_waiter_wait(&l->waiter, l->epfd, l->events, l->max_events, now, until);
    if (precise && n == 0 && until > now) {
        /* A timed-out sleep: how late did the kernel wake us? */
        uint64_t woke = hb_now_ns();
        uint64_t late = woke > until ? woke - until : 0;
        if (late > HB_LOOP_EARLY_MAX_NS) late = HB_LOOP_EARLY_MAX_NS;
        if (late > l->early_ns)
            l->early_ns += (late - l->early_ns) / 4;
        else
            l->early_ns -= (l->early_ns - late) / 16;
    }
    if (n < 0) {
        if (errno != EINTR) return -errno;
        n = 0;
    }
    if (l->on_wake) l->on_wake(l);
    int dispatched = n;
    for (int i = 0; i < n; i++) {
        hb_io *io = l->events[i].data.ptr;
        if ((void *)io == (void *)&l->waiter) {
            hb_waiter_fired(&l->waiter);
            dispatched--; /* the loop's own, not a caller's I/O event */
            continue;
        }
        /* A callback earlier in this batch may have closed this watcher. */
        if (io->fd >= 0) io->fn(l, io, l->events[i].events);
    }
    now = hb_now_ns();
    l->now = now;
    while (l->heap_len && l->heap[0]->deadline <= now) {
        hb_timer *t = l->heap[0];
        hb_timer_stop(l, t);
        t->fn(l, t, now);
    }
    return dispatched;
}
