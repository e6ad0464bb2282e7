/* One vhost-user message at a time off a unix stream socket, without ever
 * waiting: a reader keeps what has arrived of a message (header, payload,
 * the SCM_RIGHTS fds) between calls, so a front end that sends half a
 * message holds up only itself. The wire format is protocol.h's. */
#ifndef VMIO_VHOST_USER_MESSAGE_H
#define VMIO_VHOST_USER_MESSAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vhost-user/protocol.h"

/* What became of a message: the one answer of whoever handles one (the
 * backend's handlers, the channel's owner). */
enum vhost_user_result {
	VHOST_USER_DONE,  /* handled, nothing to send */
	VHOST_USER_REPLY, /* handled, the reply made beside it is to be sent */
	/* Not handled yet: it waits (its fds still in it) until the one who
	 * said so hands it in again; no further message is read meanwhile. */
	VHOST_USER_WAIT,
	/* Refused in a way only closing the connection answers (its fds
	 * closed). */
	VHOST_USER_CLOSE,
};

/* Name of a request for log lines ("SET_MEM_TABLE"), or "unknown". */
const char *vhost_user_request_name(uint32_t request);

/* Closes and forgets every fd in msg. */
void vhost_user_msg_close_fds(struct vhost_user_msg *msg);

/* Whether a header can start a message: the version is ours and the size
 * is at most VHOST_USER_MAX_PAYLOAD. Returns NULL, or why not. Checked on
 * the header alone, before any payload is read. */
const char *vhost_user_header_problem(const struct vhost_user_header *hdr);

/* Bytes of msg on the wire: header and payload. */
static inline size_t vhost_user_msg_wire_size(const struct vhost_user_msg *msg)
{
	return sizeof(msg->hdr) + msg->hdr.size;
}

struct vhost_user_reader {
	struct vhost_user_msg msg; /* the message being read */
	size_t got;                /* bytes of it so far */
	const char *problem;       /* why the last call failed, if it did */
};

void vhost_user_reader_init(struct vhost_user_reader *r);
/* Closes the fds of a message read in part and starts afresh. */
void vhost_user_reader_reset(struct vhost_user_reader *r);
/* Whether part of a message has arrived. */
static inline bool vhost_user_reader_started(const struct vhost_user_reader *r)
{
	return r->got > 0 || r->msg.nfds > 0;
}
/* Bytes the current message will have in all: 12 until its header is in. */
size_t vhost_user_reader_expected(const struct vhost_user_reader *r);

/* The bytes of a message read in part, header then payload, into out
 * (room for a whole message): what a hand-over carries. Returns how
 * many (r->got). */
size_t vhost_user_reader_copy(const struct vhost_user_reader *r, void *out);
/* A fresh reader set to where another process's stopped: got bytes of a
 * message and the nfds fds that came with them (taken, or closed on
 * refusal). Refused (-EINVAL, *problem): a header that cannot start a
 * message, more fds than a message carries, or bytes that make a whole
 * message (a reader never stops at one). */
int vhost_user_reader_preload(struct vhost_user_reader *r, const void *bytes,
			      size_t got, int *fds, unsigned nfds,
			      const char **problem);

/* Takes what the socket has of the current message, never more, in one
 * recvmsg at most per part. Returns
 *   1         a message is complete in r->msg: the caller owns its fds
 *             and calls vhost_user_reader_init before the next one;
 *   -EAGAIN   nothing more to read now (a message may be under way);
 *   0         orderly end of stream between messages;
 *   -EIO      end of stream inside a message;
 *   -EPROTO   a header that cannot start a message, more fds than
 *             VHOST_USER_MAX_FDS, or truncated fds (r->problem says which);
 *   -errno    the socket failed.
 * On every error the fds read so far are closed. The socket must be
 * non-blocking, or the call may wait. */
int vhost_user_reader_recv(struct vhost_user_reader *r, int sock);

#endif
