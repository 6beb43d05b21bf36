/* client.c - bindings for the client component (not yet implemented). */
#include "module.h"

int hb_mod_client_init(PyObject *m, hb_modstate *st)
{
    (void)m;
    (void)st;
    return 0;
}
