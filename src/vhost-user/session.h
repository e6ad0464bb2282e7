/* A session is what one front end set up on the backend: negotiated
 * features, the memory table, the rings and their fds. */
#ifndef VMIO_VHOST_USER_SESSION_H
#define VMIO_VHOST_USER_SESSION_H

#include "vhost-user/backend_state.h"

/* Gives the device back in the state a new front end expects: queues
 * stopped, device reset, memory dropped, every fd closed, nothing
 * negotiated (disconnect, RESET_OWNER). */
void vmio_session_reset(struct vmio_backend *be);

#endif
