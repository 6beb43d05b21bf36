/* test_sse_parse.c - the event stream parser: fields, multi-line data,
 * comments, retry, id persistence and NUL, a BOM, CR / LF / CRLF line ends, a
 * stream split at every offset giving the same events, blocks without data,
 * and the line and data bound with the buffers never grown past it. */
#include <stdlib.h>
#include <string.h>

#include "hb_test.h"
#include "http/hb_sse_parse.h"

static size_t grown_max;

static int grow(hb_sse_parser *p, hb_sse_buf *b, size_t need)
{
    (void)p;
    char *n = realloc(b->p, need);
    if (!n) return HB_E_NOMEM;
    b->p = n;
    b->cap = need;
    if (need > grown_max) grown_max = need;
    return 0;
}

static void release(hb_sse_parser *p)
{
    free(p->line.p);
    free(p->data.p);
    free(p->type.p);
    free(p->id.p);
}

/* Every event of in[0, len) fed in pieces of `step` bytes, as
 * "type|data|id|retry;" into out. Returns the events or an error. */
static int64_t parse_all(const char *in, size_t len, size_t step, char *out, size_t cap,
                         uint64_t max_line)
{
    hb_sse_parser p;
    hb_sse_parser_init(&p, max_line, grow, NULL);
    size_t o = 0;
    int64_t n = 0;
    out[0] = '\0';
    for (size_t at = 0; at < len;) {
        size_t piece = len - at < step ? len - at : step;
        const char *b = in + at;
        at += piece;
        while (piece) {
            hb_sse_event ev;
            int got;
            int64_t k = hb_sse_parse(&p, b, piece, &ev, &got);
            if (k < 0) {
                release(&p);
                return k;
            }
            CHECK(k > 0 || got);
            b += k;
            piece -= (size_t)k;
            if (got) {
                o += (size_t)snprintf(out + o, cap - o, "%.*s|%.*s|%.*s|%lld;", (int)ev.type_len,
                                      ev.type, (int)ev.data_len, ev.data, (int)ev.id_len, ev.id,
                                      (long long)ev.retry);
                n++;
            }
        }
    }
    CHECK_EQ_INT(p.events, (uint64_t)n);
    release(&p);
    return n;
}

static void check(const char *in, const char *want, int64_t events)
{
    static char whole[4096], split[4096];
    size_t len = strlen(in);
    CHECK_EQ_INT(parse_all(in, len, len ? len : 1, whole, sizeof whole, 0), events);
    CHECK(strcmp(whole, want) == 0);
    if (strcmp(whole, want) != 0) fprintf(stderr, "got  %s\nwant %s\n", whole, want);
    for (size_t step = 1; step < len; step++) { /* split anywhere: the same events */
        CHECK_EQ_INT(parse_all(in, len, step, split, sizeof split, 0), events);
        CHECK(strcmp(split, want) == 0);
    }
}

static void test_fields(void)
{
    check("", "", 0);
    check("data: a\n\n", "message|a||-1;", 1);
    check("data:a\n\n", "message|a||-1;", 1);    /* no space */
    check("data:  a\n\n", "message| a||-1;", 1); /* only one space dropped */
    check("data\n\n", "message|||-1;", 1);       /* a bare name: empty data, still dispatched */
    check("data: a\ndata: b\ndata\n\n", "message|a\nb\n||-1;", 1); /* multi-line */
    check("event: tick\nid: 7\ndata: x\n\n", "tick|x|7|-1;", 1);
    check("id: 7\ndata: x\n\ndata: y\n\n", "message|x|7|-1;message|y|7|-1;", 2); /* id persists */
    check("id: 7\ndata: x\n\nid\ndata: y\n\n", "message|x|7|-1;message|y||-1;", 2); /* reset */
    check("event: a\n\ndata: y\n\n", "message|y||-1;", 1); /* a block without data: no event */
    check(": comment\ndata: x\n: more\n\n", "message|x||-1;", 1);
    check("retry: 1000\ndata: x\n\ndata: y\n\n", "message|x||1000;message|y||-1;", 2);
    check("retry: 10x\ndata: x\n\n", "message|x||-1;", 1); /* not digits: ignored */
    check("datax: 1\ndat: 2\nDATA: 3\n\n", "", 0);         /* names are exact */
    check("data: a\r\ndata: b\rdata: c\n\r\n", "message|a\nb\nc||-1;", 1);
    check("data: a\r\r", "message|a||-1;", 1);
    check("\xef\xbb\xbf"
          "data: bom\n\n",
          "message|bom||-1;", 1);
    check("\xef\xbb\xbf\xef\xbb\xbf"
          "data: x\n\n",
          "", 0); /* only one BOM is skipped */
    check("data: x\n\ndata: unfinished", "message|x||-1;", 1);
    check(": httpbench\nretry: 1000\n\nid: 1\nevent: tick\ndata: 012\n\n", "tick|012|1|-1;", 1);
}

static void test_nul_id(void)
{
    char in[] = "id: a\0b\ndata: x\n\n";
    static char out[256];
    CHECK_EQ_INT(parse_all(in, sizeof in - 1, sizeof in - 1, out, sizeof out, 0), 1);
    CHECK(strcmp(out, "message|x||-1;") == 0);
}

static void test_bound(void)
{
    /* 10 MB without a newline: an error once past the bound, buffers never past it */
    static char out[64];
    size_t big = 10u * 1000 * 1000;
    char *in = malloc(big);
    CHECK(in != NULL);
    memset(in, 'x', big);
    grown_max = 0;
    CHECK_EQ_INT(parse_all(in, big, 65536, out, sizeof out, 0), HB_SSE_E_LINE);
    CHECK(grown_max <= HB_SSE_DEFAULT_MAX_LINE + 1);
    /* data lines each under the bound, together over it */
    grown_max = 0;
    for (size_t i = 0; i < big; i += 100)
        memcpy(in + i, "data: ", 6), in[i + 99] = '\n';
    CHECK_EQ_INT(parse_all(in, big, 4096, out, sizeof out, 1000), HB_SSE_E_LINE);
    CHECK(grown_max <= 1001);
    /* exactly the bound is fine */
    memset(in, 'x', 100);
    memcpy(in, "data: ", 6);
    in[100] = '\n';
    in[101] = '\n';
    CHECK_EQ_INT(parse_all(in, 102, 7, out, sizeof out, 100), 1);
    CHECK_EQ_INT(parse_all(in, 102, 7, out, sizeof out, 99), HB_SSE_E_LINE);
    free(in);
    /* sticky */
    hb_sse_parser p;
    hb_sse_parser_init(&p, 4, grow, NULL);
    hb_sse_event ev;
    int got;
    CHECK_EQ_INT(hb_sse_parse(&p, "data: toolong\n", 14, &ev, &got), HB_SSE_E_LINE);
    CHECK_EQ_INT(hb_sse_parse(&p, "\n", 1, &ev, &got), HB_SSE_E_LINE);
    release(&p);
}

int main(void)
{
    test_fields();
    test_nul_id();
    test_bound();
    HB_TEST_MAIN_END();
}
