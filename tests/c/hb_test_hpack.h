/* hb_test_hpack.h - helpers shared by the HPACK unit tests: a fixed-seed PRNG, hex
 * input, and a decoder run that collects fields as text. */
#ifndef HB_TEST_HPACK_H
#define HB_TEST_HPACK_H
#include <stdlib.h>
#include <string.h>

#include "h2/hb_h2_hpack.h"
#include "hb_test.h"

static uint64_t rng_state __attribute__((unused)) = 0x2545f4914f6cdd1dull;
static inline uint64_t rnd(void) /* xorshift64* */
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545f4914f6cdd1dull;
}

static inline size_t unhex(const char *hex, uint8_t *out)
{
    size_t n = 0;
    int hi = -1;
    for (const char *c = hex; *c; c++) {
        int v;
        if (*c >= '0' && *c <= '9')
            v = *c - '0';
        else if (*c >= 'a' && *c <= 'f')
            v = *c - 'a' + 10;
        else
            continue;
        if (hi < 0) {
            hi = v;
        } else {
            out[n++] = (uint8_t)(hi << 4 | v);
            hi = -1;
        }
    }
    return n;
}

/* Collected fields as "name: value\n" lines, plus a count. */
typedef struct {
    char text[70000];
    size_t len;
    int n;
} collect;

static inline void on_field(void *ud, const char *name, size_t nlen, const char *value, size_t vlen)
{
    collect *c = ud;
    c->n++;
    if (c->len + nlen + vlen + 3 > sizeof c->text) return;
    memcpy(c->text + c->len, name, nlen);
    c->len += nlen;
    memcpy(c->text + c->len, ": ", 2);
    c->len += 2;
    memcpy(c->text + c->len, value, vlen);
    c->len += vlen;
    c->text[c->len++] = '\n';
}

/* Decode one block with exactly the scratch the header asks for (ASan sees overruns). */
static inline int decode(hb_h2_hpack_dec *d, const uint8_t *in, size_t len, size_t max_list,
                         collect *c, char *err)
{
    uint8_t *scratch = malloc(hb_h2_hpack_scratch_need(len));
    c->len = 0;
    c->n = 0;
    err[0] = 0;
    int rc = hb_h2_hpack_decode(d, in, len, scratch, max_list, on_field, c, err);
    free(scratch);
    return rc;
}

static inline int decode_hex(hb_h2_hpack_dec *d, const char *hex, collect *c, char *err)
{
    uint8_t buf[512];
    size_t n = unhex(hex, buf);
    return decode(d, buf, n, 0, c, err);
}

#define CHECK_TEXT(c, lit) CHECK_MEM((c)->text, (c)->len, lit)

/* The dynamic table as the RFC lists it: "[1] name: value\n..." read back
 * through indexed fields, which leave the table as it is. */
static inline void check_table(hb_h2_hpack_dec *d, uint32_t size, const char *want)
{
    char text[4096];
    size_t len = 0;
    char err[HB_ERR_LEN];
    collect *c = malloc(sizeof *c);
    CHECK_EQ_INT(d->size, size);
    for (uint32_t i = 0; i < d->ent_n; i++) {
        uint8_t blk[8];
        size_t n = 0;
        uint32_t idx = 62 + i;
        if (idx < 127) {
            blk[n++] = (uint8_t)(0x80 | idx);
        } else {
            blk[n++] = 0xff;
            blk[n++] = (uint8_t)(idx - 127);
        }
        CHECK_EQ_INT(decode(d, blk, n, 0, c, err), 0);
        len += (size_t)snprintf(text + len, sizeof text - len, "[%u] %.*s", i + 1, (int)c->len,
                                c->text);
    }
    CHECK(strlen(want) == len && memcmp(want, text, len) == 0);
    if (!(strlen(want) == len && memcmp(want, text, len) == 0))
        fprintf(stderr, "table:\n%.*s\nwant:\n%s\n", (int)len, text, want);
    free(c);
}

#endif
