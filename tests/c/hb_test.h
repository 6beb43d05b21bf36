/* hb_test.h - a tiny C unit-test harness: CHECK records a failure and goes on;
 * main() returns non-zero when anything failed. */
#ifndef HB_TEST_H
#define HB_TEST_H

#include <stdio.h>
#include <string.h>

static int hb_test_failures;
static int hb_test_checks;

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        hb_test_checks++;                                                                          \
        if (!(cond)) {                                                                             \
            hb_test_failures++;                                                                    \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);               \
        }                                                                                          \
    } while (0)

#define CHECK_EQ_INT(a, b)                                                                         \
    do {                                                                                           \
        long long va_ = (long long)(a), vb_ = (long long)(b);                                      \
        hb_test_checks++;                                                                          \
        if (va_ != vb_) {                                                                          \
            hb_test_failures++;                                                                    \
            fprintf(stderr, "%s:%d: CHECK_EQ failed: %s == %lld, expected %s == %lld\n", __FILE__, \
                    __LINE__, #a, va_, #b, vb_);                                                   \
        }                                                                                          \
    } while (0)

#define CHECK_MEM(p, n, lit) CHECK((n) == sizeof(lit) - 1 && memcmp((p), (lit), (n)) == 0)

#define HB_TEST_MAIN_END()                                                                         \
    do {                                                                                           \
        printf("%d checks, %d failed\n", hb_test_checks, hb_test_failures);                        \
        return hb_test_failures ? 1 : 0;                                                           \
    } while (0)

#endif
