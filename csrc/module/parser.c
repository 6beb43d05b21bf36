/* parser.c - bindings for the parser component (not yet implemented). */
#include "module.h"

int hb_mod_parser_init(PyObject *m, hb_modstate *st)
{
    (void)m;
    (void)st;
    return 0;
}
