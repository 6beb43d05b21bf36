/* server.c - bindings for the server component (not yet implemented). */
#include "module.h"

int hb_mod_server_init(PyObject *m, hb_modstate *st)
{
    (void)m;
    (void)st;
    return 0;
}
