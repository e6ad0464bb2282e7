/* A session is what one front end set up on the backend: negotiated
 * features, the memory table, the rings and their fds. */
#ifndef VMIO_VHOST_USER_SESSION_H
#define VMIO_VHOST_USER_SESSION_H

#include "vhost-user/backend_state.h"

/* Gives the device back in the state a new front end expects: queues
 * stopped, device reset, memory dropped, every fd closed, nothing
 * negotiated (disconnect, RESET_OWNER). */
void vmio_session_reset(struct vmio_backend *be);

/* The same without the device's reset, for a session another process
 * took over (session_state.h): this process's copies of its fds are
 * closed and its mappings dropped, and nothing the front end or the guest
 * can see changes (a device's reset might: a vsock device's shuts its
 * host sockets down, which the successor shares). Every queue must have
 * stopped for good. */
void vmio_session_drop(struct vmio_backend *be);

#endif
