/* One front end's connection: its messages read as they come, its replies
 * written as the socket takes them, and the deadlines that keep a front
 * end from holding either half open for ever. Nothing here waits: a
 * message that has not all arrived waits for its socket's next event
 * while the loop serves everyone else.
 *
 * What closes a channel, each with a line naming the reason: the front
 * end's end of stream; a header that cannot start a message (checked
 * before any payload is read); a message started and not finished within
 * the timeout; replies not taken within the timeout; a message the owner
 * refuses; a socket error. */
#ifndef VMIO_VHOST_USER_CHANNEL_H
#define VMIO_VHOST_USER_CHANNEL_H

#include <stdbool.h>

#include "event/loop.h"
#include "vhost-user/message.h"
#include "vhost-user/outbox.h"

/* How a channel ended, as the owner counts its sessions' ends. */
enum vhost_user_end {
	VHOST_USER_END_HANGUP,  /* the front end closed (or reset) its end */
	VHOST_USER_END_TIMEOUT, /* it left a message or its replies too long */
	VHOST_USER_END_FAULT,   /* a bad message, one refused, a socket error */
	VHOST_USER_END_KINDS
};

struct vhost_user_channel_ops {
	/* A whole message; its fds are the callee's. Its answer goes to
	 * vhost_user_channel_conclude, with reply if it made one. */
	enum vhost_user_result (*message)(void *opaque,
					  struct vhost_user_msg *msg,
					  struct vhost_user_msg *reply);
	/* The channel has closed (fd out of the loop and closed). why is
	 * NULL when the front end hung up between messages. Called last: it
	 * may free the channel. */
	void (*closed)(void *opaque, enum vhost_user_end end, const char *why);
};

struct vhost_user_channel {
	struct vmio_loop *loop;
	int fd;
	const struct vhost_user_channel_ops *ops;
	void *opaque;
	unsigned timeout_ms;
	bool open;
	bool paused;      /* the owner is not ready for the next message */
	bool frozen;      /* held for a hand-over: out of the loop */
	uint32_t watched; /* the events the loop watches fd for */
	struct vhost_user_reader in;
	struct vhost_user_outbox out;
	struct vmio_timer in_deadline;  /* a started message must finish */
	struct vmio_timer out_deadline; /* waiting replies must be taken */
	char why[192];                  /* the reason being closed */
};

/* Serves fd (connected, made non-blocking here). Returns 0 or -errno; on
 * failure fd is left to the caller. */
int vhost_user_channel_open(struct vhost_user_channel *ch,
			    struct vmio_loop *loop, int fd, unsigned timeout_ms,
			    const struct vhost_user_channel_ops *ops,
			    void *opaque);
/* Closes it without calling ops->closed (the owner is going away). */
void vhost_user_channel_close(struct vhost_user_channel *ch);
/* Reads no further message until vhost_user_channel_resume (the owner
 * needs time before the next one). */
void vhost_user_channel_pause(struct vhost_user_channel *ch);
/* Reads messages again after a pause, a freeze or a VHOST_USER_WAIT
 * (deadlines run afresh for what is in flight). Returns false if that
 * closed the channel (ops->closed has run). */
bool vhost_user_channel_resume(struct vhost_user_channel *ch);
/* Held for a hand-over: out of the loop altogether (no read, no reply
 * sent, no deadline running, no event reported), so that what it holds,
 * a message half read and replies not yet taken, stays exactly as it is
 * for the record. vhost_user_channel_resume undoes it. */
void vhost_user_channel_freeze(struct vhost_user_channel *ch);
/* A frozen channel's bytes in flight set to where a predecessor's were:
 * got bytes of a message with its nfds fds (vhost_user_reader_preload),
 * and n bytes of replies. Returns 0, or -EINVAL / -ENOBUFS with
 * *problem; the fds are consumed either way. */
int vhost_user_channel_preload(struct vhost_user_channel *ch,
			       const void *partial, size_t got, int *fds,
			       unsigned nfds, const void *replies, size_t n,
			       const char **problem);

/* Acts on what became of msg: sends reply (VHOST_USER_REPLY), pauses
 * (VHOST_USER_WAIT), or closes the channel for it (VHOST_USER_CLOSE, or a
 * reply it could not send), the one way a message closes it. Called by
 * the channel for each message it reads, and by the owner for one it
 * kept waiting. Returns false if the channel closed (ops->closed has
 * run). */
bool vhost_user_channel_conclude(struct vhost_user_channel *ch,
				 const struct vhost_user_msg *msg,
				 enum vhost_user_result result,
				 const struct vhost_user_msg *reply);

#endif
