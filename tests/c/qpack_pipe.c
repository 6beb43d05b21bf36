/* qpack_pipe.c - hb_qpack over stdin/stdout, for tests/core/test_qpack_interop.py
 * (a cross-check against pylsqpack). Not a unit test itself (no test_ prefix).
 *
 * Requests (integers are 4-byte big-endian):
 *   'D' len section        -> count, then per field: nlen name vlen value;
 *                             or 0xffffffff and the negated error code
 *   'E' count fields...    -> len section (hb_qpack_encode's output)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/hb_common.h"
#include "h3codec/hb_qpack.h"

static uint8_t in[1 << 20], scratch[(1 << 20) / 5 * 8 + 16], out[1 << 20];
static hb_header fields[4096];
static size_t out_n, n_fields;

static int get_u32(uint32_t *v)
{
    uint8_t b[4];
    if (fread(b, 1, 4, stdin) != 4) return -1;
    *v = (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
    return 0;
}

static void put(const void *p, size_t n)
{
    if (out_n + n > sizeof out) exit(3);
    memcpy(out + out_n, p, n);
    out_n += n;
}

static void put_u32(uint32_t v)
{
    uint8_t b[4] = {(uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v};
    put(b, 4);
}

static void on_field(void *ud, const char *name, size_t nl, const char *value, size_t vl)
{
    (void)ud;
    n_fields++;
    put_u32((uint32_t)nl);
    put(name, nl);
    put_u32((uint32_t)vl);
    put(value, vl);
}

int main(void)
{
    int op;
    while ((op = getchar()) != EOF) {
        uint32_t n;
        if (get_u32(&n) || n > sizeof in) return 2;
        out_n = 4; /* the count or length goes first */
        if (op == 'D') {
            if (fread(in, 1, n, stdin) != n) return 2;
            char err[HB_ERR_LEN];
            n_fields = 0;
            int rc = hb_qpack_decode(in, n, scratch, 0, on_field, NULL, err);
            if (rc) {
                out_n = 4;
                put_u32((uint32_t)-rc);
                n_fields = 0xffffffffu;
            }
            size_t end = out_n;
            out_n = 0;
            put_u32((uint32_t)n_fields);
            out_n = end;
        } else if (op == 'E') {
            if (n > sizeof fields / sizeof fields[0]) return 2;
            uint8_t *p = in;
            for (uint32_t i = 0; i < n; i++) {
                uint32_t nl, vl;
                if (get_u32(&nl) || nl > (size_t)(in + sizeof in - p) ||
                    fread(p, 1, nl, stdin) != nl)
                    return 2;
                fields[i].name = (const char *)p;
                fields[i].name_len = nl;
                p += nl;
                if (get_u32(&vl) || vl > (size_t)(in + sizeof in - p) ||
                    fread(p, 1, vl, stdin) != vl)
                    return 2;
                fields[i].value = (const char *)p;
                fields[i].value_len = vl;
                p += vl;
            }
            size_t bound = hb_qpack_encode_bound(fields, n);
            if (bound > sizeof out - 4) return 2;
            ssize_t k = hb_qpack_encode(fields, n, out + 4, bound);
            if (k < 0) return 4;
            out_n = 0;
            put_u32((uint32_t)k);
            out_n = 4 + (size_t)k;
        } else {
            return 2;
        }
        if (fwrite(out, 1, out_n, stdout) != out_n) return 2;
        fflush(stdout);
    }
    return 0;
}
