/* The message handlers of the backend core: what each vhost-user request
 * does to the negotiated state, the memory table and the rings. */
#ifndef VMIO_VHOST_USER_HANDLERS_H
#define VMIO_VHOST_USER_HANDLERS_H

#include "vhost-user/backend_state.h"

/* Handles one message (its fds owned by the call unless VHOST_USER_WAIT,
 * which it answers while the queues the message changes are stopping on
 * other threads: call again with the same message once vmio_home_busy()
 * is false). VHOST_USER_REPLY: *reply is to be sent. The fuzzer calls it
 * without a socket. */
enum vhost_user_result vmio_backend_handle_msg(struct vmio_backend *be,
					       struct vhost_user_msg *msg,
					       struct vhost_user_msg *reply);

/* msg as if the front end had sent it (the same checks, the same handler,
 * the queues it changes stopped and synced), with no reply: how a session
 * restored from its record (session_state.c) is set up, so that every
 * value in the record passes the checks a message would. Returns 0 or
 * -errno (refused: logged as the message would be, and the state as it
 * was); msg's fds are consumed either way. Not for a request with a reply
 * of its own (-EPROTO). */
int vmio_backend_apply_msg(struct vmio_backend *be, struct vhost_user_msg *msg);

#endif
