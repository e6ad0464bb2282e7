#include "vhost-user/channel.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "util/fd.h"

/* Messages taken per wake-up: a front end that sends many at once lets
 * the loop serve the others between batches (level-triggered epoll brings
 * us back for the rest). */
#define CHANNEL_MSG_BUDGET 32

#define MAX_REPLY (sizeof(struct vhost_user_header) + VHOST_USER_MAX_PAYLOAD)

static void teardown(struct vhost_user_channel *ch)
{
	if (!ch->frozen)
		vmio_loop_remove(ch->loop, ch->fd);
	vmio_close_fd(&ch->fd);
	vhost_user_reader_reset(&ch->in);
	vmio_timer_fini(&ch->in_deadline);
	vmio_timer_fini(&ch->out_deadline);
	ch->open = false;
}

/* Closes the channel and tells the owner why; fmt NULL: an orderly hang
 * up. Nothing may touch ch afterwards. */
__attribute__((format(printf, 3, 4))) static void
close_because(struct vhost_user_channel *ch, enum vhost_user_end end,
	      const char *fmt, ...)
{
	if (fmt) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(ch->why, sizeof(ch->why), fmt, ap);
		va_end(ap);
	}
	teardown(ch);
	ch->ops->closed(ch->opaque, end, fmt ? ch->why : NULL);
}

/* A socket error that says the front end went away is a hang-up (one
 * that left a message or a reply behind); any other is a fault. */
static enum vhost_user_end end_of(int rc)
{
	return rc == -EPIPE || rc == -ECONNRESET ? VHOST_USER_END_HANGUP
						 : VHOST_USER_END_FAULT;
}

static void in_deadline_cb(void *opaque)
{
	struct vhost_user_channel *ch = opaque;

	close_because(ch, VHOST_USER_END_TIMEOUT,
		      "the front end started a message (%zu of %zu bytes, "
		      "request %u) and did not finish it within %u ms",
		      ch->in.got, vhost_user_reader_expected(&ch->in),
		      ch->in.got >= sizeof(ch->in.msg.hdr) ?
			      ch->in.msg.hdr.request : 0,
		      ch->timeout_ms);
}

static void out_deadline_cb(void *opaque)
{
	struct vhost_user_channel *ch = opaque;

	close_because(ch, VHOST_USER_END_TIMEOUT,
		      "the front end did not take its replies within %u ms "
		      "(%zu bytes waiting)",
		      ch->timeout_ms, vmio_byte_ring_len(&ch->out.ring));
}

/* Input is taken only while a reply to it would fit: a front end that
 * does not read its replies stops being read, and its deadline runs. */
static bool room_for_reply(const struct vhost_user_channel *ch)
{
	return vhost_user_outbox_room(&ch->out) >= MAX_REPLY;
}

/* Watches what the channel waits for, and runs the deadline of each half
 * that waits on the front end. */
static int update(struct vhost_user_channel *ch)
{
	uint32_t want = 0;

	if (room_for_reply(ch) && !ch->paused)
		want |= EPOLLIN;
	if (!vhost_user_outbox_empty(&ch->out))
		want |= EPOLLOUT;
	if (want != ch->watched) {
		int rc = vmio_loop_modify(ch->loop, ch->fd, want);
		if (rc)
			return rc;
		ch->watched = want;
	}
	if (!vhost_user_reader_started(&ch->in))
		vmio_timer_cancel(&ch->in_deadline);
	else if (!vmio_timer_armed(&ch->in_deadline))
		vmio_timer_arm_ms(&ch->in_deadline, ch->timeout_ms);
	if (vhost_user_outbox_empty(&ch->out))
		vmio_timer_cancel(&ch->out_deadline);
	else if (!vmio_timer_armed(&ch->out_deadline))
		vmio_timer_arm_ms(&ch->out_deadline, ch->timeout_ms);
	return 0;
}

/* Returns false if the channel closed. */
static bool take_messages(struct vhost_user_channel *ch)
{
	for (unsigned n = 0;
	     n < CHANNEL_MSG_BUDGET && room_for_reply(ch) && !ch->paused; n++) {
		int rc = vhost_user_reader_recv(&ch->in, ch->fd);
		if (rc == -EAGAIN)
			return true;
		if (rc == 0) {
			close_because(ch, VHOST_USER_END_HANGUP, NULL);
			return false;
		}
		if (rc < 0) {
			close_because(ch, end_of(rc),
				      "bad message from the front end: %s",
				      ch->in.problem ? ch->in.problem :
						       strerror(-rc));
			return false;
		}
		struct vhost_user_msg msg = ch->in.msg, reply;
		vhost_user_reader_init(&ch->in);
		if (!vhost_user_channel_conclude(
			    ch, &msg, ch->ops->message(ch->opaque, &msg, &reply),
			    &reply))
			return false;
	}
	return true;
}

static void fd_cb(void *opaque, int fd, uint32_t events)
{
	struct vhost_user_channel *ch = opaque;
	int rc;

	if (!vhost_user_outbox_empty(&ch->out)) {
		rc = vhost_user_outbox_flush(&ch->out, ch->fd);
		if (rc) {
			close_because(ch, end_of(rc),
				      "cannot write to the front end: %s",
				      strerror(-rc));
			return;
		}
	}
	/* Paused, the socket is not watched for input, but a hang up is
	 * reported anyway (and would be again and again): the front end is
	 * gone, and what it asked for with it. */
	if (ch->paused && (events & (EPOLLHUP | EPOLLERR))) {
		close_because(ch, VHOST_USER_END_HANGUP, NULL);
		return;
	}
	if ((events & (EPOLLIN | EPOLLHUP | EPOLLERR)) && !take_messages(ch))
		return;
	rc = update(ch);
	if (rc)
		close_because(ch, VHOST_USER_END_FAULT,
			      "cannot watch the connection: %s", strerror(-rc));
}

int vhost_user_channel_open(struct vhost_user_channel *ch,
			    struct vmio_loop *loop, int fd, unsigned timeout_ms,
			    const struct vhost_user_channel_ops *ops,
			    void *opaque)
{
	int rc = vmio_fd_set_nonblock(fd);

	if (rc)
		return rc;
	*ch = (struct vhost_user_channel){
		.loop = loop,
		.fd = fd,
		.ops = ops,
		.opaque = opaque,
		.timeout_ms = timeout_ms ? timeout_ms : VHOST_USER_MSG_TIMEOUT_MS,
		.watched = EPOLLIN,
	};
	vhost_user_reader_init(&ch->in);
	vhost_user_outbox_init(&ch->out);
	rc = vmio_timer_init(&ch->in_deadline, loop, in_deadline_cb, ch);
	if (rc)
		return rc;
	rc = vmio_timer_init(&ch->out_deadline, loop, out_deadline_cb, ch);
	if (!rc)
		rc = vmio_loop_add(loop, fd, EPOLLIN, fd_cb, ch);
	if (rc) {
		vmio_timer_fini(&ch->in_deadline);
		vmio_timer_fini(&ch->out_deadline);
		return rc;
	}
	ch->open = true;
	return 0;
}

void vhost_user_channel_close(struct vhost_user_channel *ch)
{
	if (ch->open)
		teardown(ch);
}

/* The channel reads a message only while there is room for its reply,
 * so -ENOBUFS means a second reply to one message. */
static int send_reply(struct vhost_user_channel *ch,
		      const struct vhost_user_msg *reply)
{
	int rc = vhost_user_outbox_put(&ch->out, reply);

	if (rc)
		return rc;
	/* Most replies go out at once; the rest wait for EPOLLOUT. */
	return vhost_user_outbox_flush(&ch->out, ch->fd);
}

bool vhost_user_channel_conclude(struct vhost_user_channel *ch,
				 const struct vhost_user_msg *msg,
				 enum vhost_user_result result,
				 const struct vhost_user_msg *reply)
{
	const char *name = vhost_user_request_name(msg->hdr.request);
	int rc;

	switch (result) {
	case VHOST_USER_DONE:
		return true;
	case VHOST_USER_WAIT:
		ch->paused = true;
		return true;
	case VHOST_USER_REPLY:
		rc = send_reply(ch, reply);
		if (!rc)
			return true;
		/* -EPIPE: the reply found the front end gone. */
		close_because(ch, end_of(rc),
			      "cannot send the reply to %s: %s; closing the "
			      "connection",
			      name, strerror(-rc));
		return false;
	case VHOST_USER_CLOSE:
		break;
	}
	close_because(ch, VHOST_USER_END_FAULT,
		      "closing the connection after a failed %s", name);
	return false;
}

void vhost_user_channel_pause(struct vhost_user_channel *ch)
{
	ch->paused = true;
}

/* Out of the loop rather than watched for nothing: epoll reports a hang
 * up whatever the events asked, and would again on every turn. */
void vhost_user_channel_freeze(struct vhost_user_channel *ch)
{
	ch->paused = true;
	if (ch->frozen)
		return;
	vmio_loop_remove(ch->loop, ch->fd);
	ch->watched = 0;
	ch->frozen = true;
	vmio_timer_cancel(&ch->in_deadline);
	vmio_timer_cancel(&ch->out_deadline);
}

int vhost_user_channel_preload(struct vhost_user_channel *ch,
			       const void *partial, size_t got, int *fds,
			       unsigned nfds, const void *replies, size_t n,
			       const char **problem)
{
	int rc = vhost_user_reader_preload(&ch->in, partial, got, fds, nfds,
					   problem);

	if (rc)
		return rc;
	if (vhost_user_outbox_preload(&ch->out, replies, n)) {
		*problem = "more reply bytes than an outbox holds";
		vhost_user_reader_reset(&ch->in);
		return -ENOBUFS;
	}
	return 0;
}

bool vhost_user_channel_resume(struct vhost_user_channel *ch)
{
	int rc;

	if (ch->frozen) {
		rc = vmio_loop_add(ch->loop, ch->fd, 0, fd_cb, ch);
		if (rc) {
			close_because(ch, VHOST_USER_END_FAULT,
				      "cannot watch the connection: %s",
				      strerror(-rc));
			return false;
		}
		ch->frozen = false;
	}
	ch->paused = false;
	/* Level-triggered: input that came meanwhile is reported now. */
	rc = update(ch);
	if (rc) {
		close_because(ch, VHOST_USER_END_FAULT,
			      "cannot watch the connection: %s", strerror(-rc));
		return false;
	}
	return true;
}
