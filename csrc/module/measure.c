/* measure.c - bindings for the measure component (not yet implemented). */
#include "module.h"

int hb_mod_measure_init(PyObject *m, hb_modstate *st)
{
    (void)m;
    (void)st;
    return 0;
}
