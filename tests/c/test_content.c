/* test_content.c - the deterministic content (fill and shared buffer agree
 * with the formula, across the period wrap) and CRC-32 vectors. */
#include <string.h>

#include "base/hb_content.h"
#include "hb_test.h"

static void test_fill(void)
{
    static const char alpha[] = HB_CONTENT_ALPHABET;
    char buf[1000];
    hb_content_fill(buf, sizeof buf, 65000);
    int ok = 1;
    for (size_t i = 0; i < sizeof buf; i++)
        if (buf[i] != alpha[((65000 + i) % HB_CONTENT_PERIOD) % 62]) ok = 0;
    CHECK(ok);
}

static void test_buf(void)
{
    static char want[HB_CONTENT_WIN];
    const char *b = hb_content_buf();
    CHECK(b == hb_content_buf());
    uint64_t offs[] = {0, 1, 65000, HB_CONTENT_PERIOD - 1, 3ull * HB_CONTENT_PERIOD + 17};
    for (size_t k = 0; k < sizeof offs / sizeof offs[0]; k++) {
        hb_content_fill(want, sizeof want, offs[k]);
        CHECK(memcmp(b + offs[k] % HB_CONTENT_PERIOD, want, sizeof want) == 0);
    }
}

static void test_crc(void)
{
    CHECK_EQ_INT(hb_crc32(0, "123456789", 9), 0xCBF43926u);
    CHECK_EQ_INT(hb_crc32(0, "", 0), 0);
    CHECK_EQ_INT(hb_crc32(hb_crc32(0, "1234", 4), "56789", 5), 0xCBF43926u);
    /* the 8-byte fast path and the bytewise tail agree */
    char buf[37];
    hb_content_fill(buf, sizeof buf, 5);
    uint32_t whole = hb_crc32(0, buf, sizeof buf), parts = 0;
    for (size_t i = 0; i < sizeof buf; i++)
        parts = hb_crc32(parts, buf + i, 1);
    CHECK_EQ_INT(whole, parts);
}

int main(void)
{
    test_fill();
    test_buf();
    test_crc();
    HB_TEST_MAIN_END();
}
