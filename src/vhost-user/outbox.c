#include "vhost-user/outbox.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "vhost-user/message.h"

int vhost_user_outbox_put(struct vhost_user_outbox *o,
			  const struct vhost_user_msg *msg)
{
	if (msg->hdr.size > VHOST_USER_MAX_PAYLOAD ||
	    vhost_user_msg_wire_size(msg) > vhost_user_outbox_room(o))
		return -ENOBUFS;
	vmio_byte_ring_put(&o->ring, &msg->hdr, sizeof(msg->hdr));
	vmio_byte_ring_put(&o->ring, &msg->payload, msg->hdr.size);
	return 0;
}

size_t vhost_user_outbox_copy(const struct vhost_user_outbox *o, void *out)
{
	struct iovec iov[2];
	unsigned n = vmio_byte_ring_data(&o->ring, SIZE_MAX, iov);
	size_t len = 0;

	for (unsigned i = 0; i < n; i++) {
		memcpy((uint8_t *)out + len, iov[i].iov_base, iov[i].iov_len);
		len += iov[i].iov_len;
	}
	return len;
}

int vhost_user_outbox_preload(struct vhost_user_outbox *o, const void *bytes,
			      size_t n)
{
	if (n > vhost_user_outbox_room(o))
		return -ENOBUFS;
	vmio_byte_ring_put(&o->ring, bytes, n);
	return 0;
}

int vhost_user_outbox_flush(struct vhost_user_outbox *o, int sock)
{
	while (!vmio_byte_ring_empty(&o->ring)) {
		struct iovec iov[2];
		struct msghdr mh = { .msg_iov = iov };
		ssize_t n;

		mh.msg_iovlen = vmio_byte_ring_data(&o->ring, SIZE_MAX, iov);
		n = sendmsg(sock, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return 0;
			return -errno;
		}
		vmio_byte_ring_consumed(&o->ring, (size_t)n);
	}
	return 0;
}
