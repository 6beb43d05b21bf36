/* test_calib.c - the wake-up ping-pong: counts and ordering of its figures,
 * unpinned and pinned, and its errors for bad arguments (nothing leaks: the
 * descriptors it opened are closed again). */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include "base/hb_calib.h"
#include "hb_test.h"

static int lowest_fd(void)
{
    int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) close(fd);
    return fd;
}

static int some_cpu(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0) return -1;
    for (int i = 0; i < CPU_SETSIZE; i++)
        if (CPU_ISSET(i, &set)) return i;
    return -1;
}

static void test_counts(void)
{
    hb_calib_result r;
    char err[HB_ERR_LEN] = "";
    int fd0 = lowest_fd();
    CHECK_EQ_INT(hb_calib_pingpong(-1, -1, 50, &r, err), 0);
    CHECK_EQ_INT(r.round_trips, 50);
    CHECK(r.rtt_min_ns > 0 && r.rtt_min_ns <= r.rtt_median_ns);
    CHECK(r.cpu_ns > 0);
    int cpu = some_cpu();
    CHECK(cpu >= 0);
    CHECK_EQ_INT(hb_calib_pingpong(cpu, cpu, 20, &r, err), 0);
    CHECK_EQ_INT(r.round_trips, 20);
    CHECK_EQ_INT(lowest_fd(), fd0); /* every pipe closed */
}

static void test_errors(void)
{
    hb_calib_result r;
    char err[HB_ERR_LEN] = "";
    int fd0 = lowest_fd();
    CHECK_EQ_INT(hb_calib_pingpong(-1, -1, 0, &r, err), -EINVAL);
    CHECK_EQ_INT(hb_calib_pingpong(-1, -1, HB_CALIB_MAX_TRIPS + 1, &r, err), -EINVAL);
    /* a CPU no process may use: the pinned thread fails, the other stops */
    CHECK_EQ_INT(hb_calib_pingpong(CPU_SETSIZE - 1, -1, 10, &r, err), -EINVAL);
    CHECK(strstr(err, "CPU") != NULL);
    CHECK_EQ_INT(hb_calib_pingpong(-1, CPU_SETSIZE - 1, 10, &r, err), -EINVAL);
    CHECK_EQ_INT(lowest_fd(), fd0);
}

static void test_working_set(void)
{
    char err[HB_ERR_LEN] = "";
    double small = 0, large = 0;
    CHECK_EQ_INT(hb_calib_working_set(16 * 1024, 100000, 1, &small, err), 0);
    CHECK(small > 0);
    CHECK_EQ_INT(hb_calib_working_set(64u << 20, 100000, 1, &large, err), 0);
    CHECK(large > small); /* 64 MiB walks out of every cache level, 16 KiB stays in L1 */
    CHECK_EQ_INT(hb_calib_working_set(100, 10, 1, &small, err), -EINVAL);
    CHECK(strstr(err, "4096") != NULL);
    CHECK_EQ_INT(hb_calib_working_set(8192, 0, 1, &small, err), -EINVAL);
    CHECK_EQ_INT(hb_calib_working_set(HB_CALIB_MAX_WS_BYTES + 1, 10, 1, &small, err), -EINVAL);
}

int main(void)
{
    test_counts();
    test_errors();
    test_working_set();
    HB_TEST_MAIN_END();
}
