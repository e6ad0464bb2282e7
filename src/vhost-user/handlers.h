/* The message handlers of the backend core: what each vhost-user request
 * does to the negotiated state, the memory table and the rings. */
#ifndef VMIO_VHOST_USER_HANDLERS_H
#define VMIO_VHOST_USER_HANDLERS_H

#include "vhost-user/backend_state.h"

/* Handles one message (its fds owned by the call). Returns 1 with a reply
 * to send in *reply, 0 when none is due, or -errno when the connection
 * must be closed. The fuzzer and the unit tests call it without a
 * socket. */
int vmio_backend_handle_msg(struct vmio_backend *be, struct vhost_user_msg *msg,
			    struct vhost_user_msg *reply);

#endif
