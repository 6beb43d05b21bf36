/* hb_content.c - deterministic content and slicing-by-8 CRC-32. */
#include "base/hb_content.h"

#include <pthread.h>
#include <string.h>

static char det[HB_CONTENT_PERIOD + HB_CONTENT_WIN];
static uint32_t crc_tab[8][256];
static pthread_once_t init_once = PTHREAD_ONCE_INIT;

static void content_init(void)
{
    static const char alpha[] = HB_CONTENT_ALPHABET;
    for (size_t i = 0; i < sizeof det; i++)
        det[i] = alpha[(i % HB_CONTENT_PERIOD) % 62];
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? (c >> 1) ^ 0xEDB88320u : c >> 1;
        crc_tab[0][i] = c;
    }
    for (int i = 0; i < 256; i++)
        for (int k = 1; k < 8; k++)
            crc_tab[k][i] = (crc_tab[k - 1][i] >> 8) ^ crc_tab[0][crc_tab[k - 1][i] & 0xff];
}

const char *hb_content_buf(void)
{
    pthread_once(&init_once, content_init);
    return det;
}

void hb_content_fill(void *dst, size_t n, uint64_t offset)
{
    pthread_once(&init_once, content_init);
    char *d = dst;
    while (n) {
        size_t at = (size_t)(offset % HB_CONTENT_PERIOD);
        size_t take = n < HB_CONTENT_WIN ? n : HB_CONTENT_WIN;
        memcpy(d, det + at, take);
        d += take;
        n -= take;
        offset += take;
    }
}

/* Slicing-by-8 (little-endian words; bytewise elsewhere). */
uint32_t hb_crc32(uint32_t crc, const void *data, size_t n)
{
    pthread_once(&init_once, content_init);
    const unsigned char *p = data;
    crc = ~crc;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    while (n >= 8) {
        uint32_t a, b;
        memcpy(&a, p, 4);
        memcpy(&b, p + 4, 4);
        a ^= crc;
        crc = crc_tab[7][a & 0xff] ^ crc_tab[6][(a >> 8) & 0xff] ^ crc_tab[5][(a >> 16) & 0xff] ^
              crc_tab[4][a >> 24] ^ crc_tab[3][b & 0xff] ^ crc_tab[2][(b >> 8) & 0xff] ^
              crc_tab[1][(b >> 16) & 0xff] ^ crc_tab[0][b >> 24];
        p += 8;
        n -= 8;
    }
#endif
    while (n--)
        crc = crc_tab[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
    return ~crc;
}
