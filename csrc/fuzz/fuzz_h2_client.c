/* libFuzzer harness for the HTTP/2 client session (hb_h2_client): the input is
 * what a server sends, cut into reads at points the input chooses, while the
 * client keeps opening streams (plain, HEAD, with a body). Traps on a broken
 * contract: a stream closed twice, events after its close, a response
 * without a status, a clean end without a response, or the open count
 * drifting from what was submitted minus what was closed.
 *
 * Input: byte 0 picks the window size and the read split; the rest is
 * server bytes (a valid start is SETTINGS, see corpus_h2_client).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "h2/hb_h2_client.h"

#define NREC 64

typedef struct rec {
    int used, responses, closes, end;
    uint64_t data;
} rec;

static rec recs[NREC];
static int closed;

static void on_header(void *ud, void *sud, const char *n, size_t nl, const char *v, size_t vl)
{
    (void)ud, (void)v, (void)vl;
    rec *r = sud;
    if (r->closes || !nl || n[0] == ':') __builtin_trap();
}
static void on_response(void *ud, void *sud, int status)
{
    (void)ud;
    rec *r = sud;
    if (r->closes || r->responses || status < 200 || status > 999) __builtin_trap();
    r->responses++;
}
static void on_data(void *ud, void *sud, const uint8_t *d, size_t n)
{
    (void)ud, (void)d;
    rec *r = sud;
    if (r->closes || !r->responses || n == 0) __builtin_trap();
    r->data += n;
}
static void on_close(void *ud, void *sud, int end, uint32_t code)
{
    (void)ud;
    rec *r = sud;
    if (r->closes) __builtin_trap();
    if (end == HB_H2_END_OK && (!r->responses || code != 0)) __builtin_trap();
    r->closes++;
    r->end = end;
    closed++;
}
static void on_goaway(void *ud, int32_t last, uint32_t code)
{
    (void)ud, (void)code;
    if (last < 0) __builtin_trap();
}
static const hb_h2_client_callbacks CBS = {on_header, on_response, on_data, on_close, on_goaway};

static const hb_header GET[] = {{":method", 7, "GET", 3},
                                {":scheme", 7, "http", 4},
                                {":authority", 10, "h", 1},
                                {":path", 5, "/", 1}};
static const hb_header HEAD[] = {{":method", 7, "HEAD", 4},
                                 {":scheme", 7, "http", 4},
                                 {":authority", 10, "h", 1},
                                 {":path", 5, "/x", 2}};
static char body_bytes[70000];
static hb_h2_body bodies[NREC];

static int submitted;

static void open_streams(hb_h2_client *c)
{
    char err[HB_ERR_LEN];
    while (submitted < NREC && hb_h2_client_room(c) > 0) {
        int k = submitted;
        rec *r = &recs[k];
        memset(r, 0, sizeof *r);
        hb_h2_body *b = NULL;
        const hb_header *f = GET;
        if (k % 3 == 1) {
            bodies[k].data = body_bytes;
            bodies[k].len = (size_t)(k * 7919) % sizeof body_bytes;
            b = &bodies[k];
        } else if (k % 3 == 2) {
            f = HEAD;
        }
        int id = hb_h2_client_submit(c, f, 4, b, r, err);
        if (id <= 0) return;
        if (id != 2 * k + 1) __builtin_trap();
        r->used = 1;
        submitted++;
    }
}

static void drain(int fd)
{
    char sink[65536];
    while (read(fd, sink, sizeof sink) > 0) {
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    int fds[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds) != 0) return 0;
    int big = 1 << 20;
    (void)setsockopt(fds[1], SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
    hb_sock s;
    hb_sock_init(&s);
    s.fd = fds[0];
    hb_h2_client_settings st = {0};
    st.max_streams = 8; /* small table: slots and the id index wrap and shift */
    st.window_bits = (data[0] & 1) ? 16 : 0;
    size_t step = 1 + (size_t)(data[0] >> 1) * 37; /* how the input is cut into reads */
    data++;
    size--;
    hb_h2_client c;
    char err[HB_ERR_LEN];
    submitted = closed = 0;
    if (hb_h2_client_init(&c, &s, &st, &CBS, NULL, err) != 0) __builtin_trap();
    c.short_read_drains = 0;
    open_streams(&c);
    size_t off = 0;
    int rc = HB_AGAIN;
    while (rc == HB_AGAIN && off < size) {
        size_t n = size - off < step ? size - off : step;
        if (write(fds[1], data + off, n) != (ssize_t)n) break;
        off += n;
        rc = hb_h2_client_read(&c);
        if ((int)c.nopen != submitted - closed) __builtin_trap();
        if (rc != HB_AGAIN) break;
        open_streams(&c);
        for (int k = 0; k < 4 && hb_h2_client_wants_write(&c); k++) {
            int w = hb_h2_client_write(&c);
            drain(fds[1]);
            if (w != HB_AGAIN) break;
        }
        if ((int)c.nopen != submitted - closed) __builtin_trap();
    }
    /* the session ends only with a documented code (or -errno from the socket) */
    if (rc != HB_AGAIN && rc != HB_E_H2 && rc != HB_E_CLOSED && rc != HB_E_NO_H2 &&
        rc != HB_E_NOMEM && !(rc < 0 && rc > -4096))
        __builtin_trap();
    for (int k = 0; k < submitted; k++)
        if (recs[k].closes > 1) __builtin_trap();
    hb_h2_client_free(&c);
    close(fds[0]);
    close(fds[1]);
    return 0;
}
