/* hb_content.h - the deterministic content of generated bodies, and CRC-32.
 *
 * Byte i of every body the embedded server generates is
 *     HB_CONTENT_ALPHABET[(i % HB_CONTENT_PERIOD) % 62]
 * (65521 is prime, so a dropped or repeated span shows up even when it is a
 * multiple of 62). Clients check bodies with hb_content_fill() or by CRC.
 * Thread-safe: the shared tables are built once, on first use.
 */
#ifndef HB_CONTENT_H
#define HB_CONTENT_H

#include <stddef.h>
#include <stdint.h>

#define HB_CONTENT_ALPHABET "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
#define HB_CONTENT_PERIOD 65521
/* The longest contiguous run hb_content_buf() offers from any offset. */
#define HB_CONTENT_WIN 65536

/* Content bytes [offset, offset + n) into dst. */
void hb_content_fill(void *dst, size_t n, uint64_t offset);

/* A shared read-only buffer of HB_CONTENT_PERIOD + HB_CONTENT_WIN content
 * bytes: buf + offset % HB_CONTENT_PERIOD starts HB_CONTENT_WIN bytes of
 * content at `offset`. Lives for the process; callers may queue pointers
 * into it for writev. */
const char *hb_content_buf(void);

/* CRC-32 (IEEE, zlib's crc32()): crc = hb_crc32(0, p, n); chainable. */
uint32_t hb_crc32(uint32_t crc, const void *p, size_t n);

#endif
