/* hb_client_int.h - hb__ internals shared by client/'s files and nothing else. */
#ifndef HB_CLIENT_INT_H
#define HB_CLIENT_INT_H

#include <stdint.h>

/* hb_pool.c, used by the client's files: wait until fd is ready for `events`
 * (POLLIN/POLLOUT) or deadline_ns (absolute hb_now_ns): 0, HB_E_TIMEOUT or
 * -errno. EINTR: HB_E_INTERRUPTED when eintr_abort, else the wait resumes. */
int hb__wait_fd(int fd, short events, uint64_t deadline_ns, int eintr_abort);

#endif
