/* The front end's side of the vhost-user socket: whole messages, sent and
 * received with bounded waits. A VMM may wait for its backend; vmio's
 * backend never waits for a VMM (vhost-user/channel.h), so nothing in
 * src/vhost-user calls these. */
#ifndef VMIO_FRONTEND_MSG_IO_H
#define VMIO_FRONTEND_MSG_IO_H

#include "vhost-user/message.h"

/* Reads one message. Returns 1 on a message, 0 on orderly EOF, or -errno:
 * -EAGAIN when a non-blocking socket has nothing yet, -EPROTO for a
 * malformed header (bad version, payload larger than
 * VHOST_USER_MAX_PAYLOAD, more fds than VHOST_USER_MAX_FDS), -EIO for end
 * of stream inside a message, -ETIMEDOUT if the rest of a started message
 * does not arrive within VHOST_USER_MSG_TIMEOUT_MS. Received fds are
 * closed on every error return; on success the caller owns
 * msg->fds[0..nfds). */
int vhost_user_msg_recv(int sock, struct vhost_user_msg *msg);

/* Sends header, payload (hdr.size bytes) and msg->fds, waiting at most
 * VHOST_USER_MSG_TIMEOUT_MS for room. Returns 0 or -errno. */
int vhost_user_msg_send(int sock, const struct vhost_user_msg *msg);

#endif
