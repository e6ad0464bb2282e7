/* The message handlers of the backend core: what each vhost-user request
 * does to the negotiated state, the memory table and the rings. */
#ifndef VMIO_VHOST_USER_HANDLERS_H
#define VMIO_VHOST_USER_HANDLERS_H

#include "vhost-user/backend_state.h"

/* handle_msg's answer when the queues the message changes are stopping
 * on other threads: call again with the same message (its fds are still
 * the caller's) once vmio_home_busy() is false. */
#define VMIO_MSG_WAIT 2

/* Handles one message (its fds owned by the call unless VMIO_MSG_WAIT).
 * Returns 1 with a reply to send in *reply, 0 when none is due,
 * VMIO_MSG_WAIT, or -errno when the connection must be closed. The
 * fuzzer and the unit tests call it without a socket. */
int vmio_backend_handle_msg(struct vmio_backend *be, struct vhost_user_msg *msg,
			    struct vhost_user_msg *reply);

#endif
