/* test_loop.c - hb_loop features the embedded server relies on: a growable
 * timer heap (order kept across growth), the wake hook, edge-triggered
 * watchers, and pausing a watcher with hb_loop_del / hb_loop_add. The fixed
 * heap and precise timers are covered in test_engine.c. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "base/hb_clock.h"
#include "net/hb_loop.h"
#include "hb_test.h"

#define NT 100

static hb_timer timers[NT];
static int order[NT], nfired;

static void tcb(hb_loop *l, hb_timer *t, uint64_t now)
{
    (void)l;
    (void)now;
    order[nfired++] = (int)(t - timers);
}

static void test_growth(void)
{
    hb_loop l;
    char err[HB_ERR_LEN];
    CHECK_EQ_INT(hb_loop_init(&l, 8, 2, err), 0);
    l.grow_timers = 1;
    uint64_t base = hb_now_ns();
    /* deadlines in the past, in a scrambled order: timer i is due at base - 1000 + (i*37 % NT) */
    for (int i = 0; i < NT; i++) {
        hb_timer_init(&timers[i], tcb);
        CHECK_EQ_INT(hb_timer_start(&l, &timers[i], base - 1000 + (uint64_t)((i * 37) % NT)), 0);
    }
    CHECK_EQ_INT(l.heap_len, NT);
    CHECK(l.heap_cap >= NT && l.heap_cap <= 2 * NT);
    size_t cap = l.heap_cap;
    hb_timer_stop(&l, &timers[5]);
    CHECK_EQ_INT(hb_timer_start(&l, &timers[5], base - 1000 + (5 * 37) % NT), 0);
    CHECK_EQ_INT(l.heap_cap, cap); /* steady state: no growth */
    CHECK(hb_loop_run_once(&l, 0) >= 0);
    CHECK_EQ_INT(nfired, NT);
    int sorted = 1;
    for (int k = 1; k < nfired; k++)
        if ((order[k - 1] * 37) % NT > (order[k] * 37) % NT) sorted = 0;
    CHECK(sorted);
    CHECK_EQ_INT(l.heap_len, 0);
    hb_loop_free(&l);
}

static int wakes, io_calls, io_saw_wake;
static void on_wake(hb_loop *l)
{
    (void)l;
    wakes++;
}

static void io_cb(hb_loop *l, hb_io *io, uint32_t events)
{
    (void)l;
    (void)io;
    (void)events;
    io_calls++;
    io_saw_wake = wakes;
}

static void test_wake_edge_and_del(void)
{
    hb_loop l;
    char err[HB_ERR_LEN];
    CHECK_EQ_INT(hb_loop_init(&l, 8, 2, err), 0);
    l.on_wake = on_wake;
    int pfd[2];
    CHECK_EQ_INT(pipe(pfd), 0);
    hb_io io;
    hb_io_init(&io, io_cb);
    CHECK_EQ_INT(hb_loop_add(&l, &io, pfd[0], EPOLLIN | EPOLLET), 0);
    CHECK_EQ_INT(write(pfd[1], "x", 1), 1);
    CHECK_EQ_INT(hb_loop_run_once(&l, 100000000), 1);
    CHECK_EQ_INT(io_calls, 1);
    CHECK_EQ_INT(io_saw_wake, 1); /* the hook ran before the callback */
    /* edge-triggered: the unread byte is not reported again */
    CHECK_EQ_INT(hb_loop_run_once(&l, 1000000), 0);
    CHECK_EQ_INT(io_calls, 1);
    CHECK_EQ_INT(wakes, 2);
    /* paused: nothing reported; registered again: the pending byte is */
    CHECK_EQ_INT(hb_loop_del(&l, &io), 0);
    CHECK_EQ_INT(io.fd, -1);
    CHECK_EQ_INT(hb_loop_del(&l, &io), 0); /* safe when not registered */
    CHECK_EQ_INT(write(pfd[1], "y", 1), 1);
    CHECK_EQ_INT(hb_loop_run_once(&l, 1000000), 0);
    CHECK_EQ_INT(hb_loop_add(&l, &io, pfd[0], EPOLLIN), 0);
    CHECK_EQ_INT(hb_loop_run_once(&l, 100000000), 1);
    CHECK_EQ_INT(io_calls, 2);
    close(pfd[0]);
    close(pfd[1]);
    hb_loop_free(&l);
}

int main(void)
{
    test_growth();
    test_wake_edge_and_del();
    HB_TEST_MAIN_END();
}
