/* client_h2.c - a Client's HTTP/2: one hb_client_h2 session per origin (the
 * batches that run on it are client_mux.c's; see client_int.h). */
#include "client_int.h"

h2origin *hb__cl_h2_origin(ClientObject *self, const hb_url *u)
{
    return (h2origin *)hb__cl_origin(&self->h2, u, sizeof(h2origin)); /* zeroed: no session */
}

void hb__cl_h2_close_all(ClientObject *self, int free_entries)
{
    for (mxorigin *e = self->h2, *nx; e; e = nx) {
        nx = e->next;
        hb_h2conn_close(&self->pool, &((h2origin *)e)->hc);
        if (free_entries) PyMem_Free(e);
    }
    if (free_entries) self->h2 = NULL;
}
