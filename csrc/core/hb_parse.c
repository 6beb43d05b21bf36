/* hb_parse.c - placeholder until the parser lands. */
#include "hb_parse.h"

const char *hb_parse_strerror(int code)
{
    (void)code;
    return "protocol error";
}
