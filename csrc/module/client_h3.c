/* client_h3.c - a Client's HTTP/3: one hb_client_h3 connection per origin and
 * the TLS trust they share; batches run through client_mux.c
 * (see client_int.h). */
#include "client_int.h"

#include <string.h>

h3origin *hb__cl_h3_origin(ClientObject *self, const hb_url *u)
{
    return (h3origin *)hb__cl_origin(&self->h3, u, sizeof(h3origin)); /* zeroed: no connection */
}

int hb__cl_ensure_h3_tls(ClientObject *self)
{
    if (self->h3tls) return 0;
    hb_h3_tls_opts o = {self->ca_file, NULL, !self->verify};
    char err[HB_ERR_LEN] = "";
    int rc = hb_h3_tls_new(&self->h3tls, &o, err);
    if (rc < 0) {
        self->h3tls = NULL;
        hb_raise(self->st, rc, err);
        return -1;
    }
    return 0;
}

void hb__cl_h3_close_all(ClientObject *self, int free_entries)
{
    for (mxorigin *e = self->h3, *nx; e; e = nx) {
        nx = e->next;
        h3origin *o = (h3origin *)e;
        if (free_entries) {
            hb_h3conn_free(&o->hc);
            PyMem_Free(o);
        } else {
            hb_h3conn_close(&o->hc);
        }
    }
    if (free_entries) {
        self->h3 = NULL;
        if (self->h3tls) hb_h3_tls_free(self->h3tls);
        self->h3tls = NULL;
    }
}
