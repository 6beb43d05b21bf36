/* client_h2.c - a Client's HTTP/2: one hb_client_h2 session per origin (the
 * batches that run on it are client_mux.c's; see client_int.h). */
#include "client_int.h"

#include <string.h>

h2origin *hb__cl_h2_origin(ClientObject *self, const hb_url *u)
{
    for (h2origin *o = self->h2; o; o = o->next)
        if (o->tls == u->tls && o->port == u->port && o->host_len == u->host_len &&
            memcmp(o->host, u->host, u->host_len) == 0)
            return o;
    if (u->host_len > HB_POOL_MAX_HOST) {
        PyErr_SetString(PyExc_ValueError, "host name too long");
        return NULL;
    }
    h2origin *o = PyMem_Calloc(1, sizeof *o);
    if (!o) {
        PyErr_NoMemory();
        return NULL;
    }
    o->tls = u->tls;
    o->port = u->port;
    o->host_len = u->host_len;
    memcpy(o->host, u->host, u->host_len);
    hb_h2conn_init(&o->hc);
    o->next = self->h2;
    self->h2 = o;
    return o;
}

void hb__cl_h2_close_all(ClientObject *self, int free_entries)
{
    for (h2origin *o = self->h2, *nx; o; o = nx) {
        nx = o->next;
        hb_h2conn_close(&self->pool, &o->hc);
        if (free_entries) PyMem_Free(o);
    }
    if (free_entries) self->h2 = NULL;
}
