#include "vhost-user/outbox.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "vhost-user/message.h"

static void ring_write(struct vhost_user_outbox *o, const void *src, size_t n)
{
	size_t tail = (o->head + o->len) % VHOST_USER_OUTBOX_SIZE;
	size_t first = VHOST_USER_OUTBOX_SIZE - tail;

	if (first > n)
		first = n;
	memcpy(o->buf + tail, src, first);
	memcpy(o->buf, (const uint8_t *)src + first, n - first);
	o->len += n;
}

int vhost_user_outbox_put(struct vhost_user_outbox *o,
			  const struct vhost_user_msg *msg)
{
	if (msg->hdr.size > VHOST_USER_MAX_PAYLOAD ||
	    vhost_user_msg_wire_size(msg) > vhost_user_outbox_room(o))
		return -ENOBUFS;
	ring_write(o, &msg->hdr, sizeof(msg->hdr));
	ring_write(o, &msg->payload, msg->hdr.size);
	return 0;
}

int vhost_user_outbox_flush(struct vhost_user_outbox *o, int sock)
{
	while (o->len) {
		struct iovec iov[2];
		size_t first = VHOST_USER_OUTBOX_SIZE - o->head;
		int niov = 1;

		if (first >= o->len) {
			iov[0] = (struct iovec){ o->buf + o->head, o->len };
		} else {
			iov[0] = (struct iovec){ o->buf + o->head, first };
			iov[1] = (struct iovec){ o->buf, o->len - first };
			niov = 2;
		}
		struct msghdr mh = { .msg_iov = iov, .msg_iovlen = niov };
		ssize_t n = sendmsg(sock, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return 0;
			return -errno;
		}
		o->head = (o->head + (size_t)n) % VHOST_USER_OUTBOX_SIZE;
		o->len -= (size_t)n;
	}
	o->head = 0;
	return 0;
}
