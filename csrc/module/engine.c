/* engine.c - bindings for the engine component (not yet implemented). */
#include "module.h"

int hb_mod_engine_init(PyObject *m, hb_modstate *st)
{
    (void)m;
    (void)st;
    return 0;
}
