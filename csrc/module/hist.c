/* hist.c - bindings for the hist component (not yet implemented). */
#include "module.h"

int hb_mod_hist_init(PyObject *m, hb_modstate *st)
{
    (void)m;
    (void)st;
    return 0;
}
