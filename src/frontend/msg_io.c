#include "frontend/msg_io.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>

#include "util/clock.h"

/* Waits for the socket to become ready for `events`, no later than
 * deadline (ms on vmio_now_ms; -1: no deadline). */
static int wait_ready(int sock, short events, int64_t deadline)
{
	for (;;) {
		int64_t left = deadline < 0 ? -1 : deadline - vmio_now_ms();
		if (deadline >= 0 && left <= 0)
			return -ETIMEDOUT;
		struct pollfd pfd = { .fd = sock, .events = events };
		int rc = poll(&pfd, 1, (int)left);
		if (rc < 0 && errno == EINTR)
			continue;
		if (rc < 0)
			return -errno;
		if (rc == 0)
			return -ETIMEDOUT;
		return 0;
	}
}

int vhost_user_msg_recv(int sock, struct vhost_user_msg *msg)
{
	struct vhost_user_reader r;
	int fl = fcntl(sock, F_GETFL);
	bool blocking = fl >= 0 && !(fl & O_NONBLOCK);
	int64_t deadline = -1;
	int rc;

	vhost_user_reader_init(&r);
	for (;;) {
		rc = vhost_user_reader_recv(&r, sock);
		if (rc != -EAGAIN)
			break;
		if (!vhost_user_reader_started(&r) && !blocking)
			return -EAGAIN;
		if (vhost_user_reader_started(&r) && deadline < 0)
			deadline = vmio_now_ms() + VHOST_USER_MSG_TIMEOUT_MS;
		rc = wait_ready(sock, POLLIN, deadline);
		if (rc) {
			vhost_user_reader_reset(&r);
			*msg = r.msg;
			return rc;
		}
	}
	/* On failure the reader closed what it had; msg holds no fds. */
	*msg = r.msg;
	return rc;
}

int vhost_user_msg_send(int sock, const struct vhost_user_msg *msg)
{
	union {
		char buf[CMSG_SPACE(VHOST_USER_MAX_FDS * sizeof(int))];
		struct cmsghdr align;
	} control;
	size_t total, sent = 0;
	int64_t deadline = vmio_now_ms() + VHOST_USER_MSG_TIMEOUT_MS;

	if (msg->hdr.size > VHOST_USER_MAX_PAYLOAD ||
	    msg->nfds > VHOST_USER_MAX_FDS)
		return -EINVAL;
	total = vhost_user_msg_wire_size(msg);

	while (sent < total) {
		struct iovec iov[2];
		int niov = 0;
		if (sent < sizeof(msg->hdr)) {
			iov[niov++] = (struct iovec){
				.iov_base = (char *)&msg->hdr + sent,
				.iov_len = sizeof(msg->hdr) - sent,
			};
		}
		if (msg->hdr.size) {
			size_t off = sent > sizeof(msg->hdr) ?
					     sent - sizeof(msg->hdr) : 0;
			iov[niov++] = (struct iovec){
				.iov_base = (char *)&msg->payload + off,
				.iov_len = msg->hdr.size - off,
			};
		}
		struct msghdr mh = { .msg_iov = iov, .msg_iovlen = niov };
		/* The fds travel with the first byte, exactly once. */
		if (sent == 0 && msg->nfds) {
			size_t len = msg->nfds * sizeof(int);
			memset(control.buf, 0, sizeof(control.buf));
			mh.msg_control = control.buf;
			mh.msg_controllen = CMSG_SPACE(len);
			struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
			c->cmsg_level = SOL_SOCKET;
			c->cmsg_type = SCM_RIGHTS;
			c->cmsg_len = CMSG_LEN(len);
			memcpy(CMSG_DATA(c), msg->fds, len);
		}
		ssize_t n = sendmsg(sock, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				return -errno;
			int rc = wait_ready(sock, POLLOUT, deadline);
			if (rc)
				return rc;
			continue;
		}
		sent += (size_t)n;
	}
	return 0;
}
