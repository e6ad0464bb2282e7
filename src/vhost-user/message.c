/* Moving vhost-user messages over a unix stream socket: the header, the
 * payload and the SCM_RIGHTS file descriptors that ride on them. Everything
 * that arrives here comes from an untrusted peer, so a message is checked
 * for shape before anyone looks at it and a peer that stops half-way
 * through a message cannot stall the caller for longer than
 * VHOST_USER_MSG_TIMEOUT_MS. */
#include "vhost-user/protocol.h"

#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static const char *const request_names[VHOST_USER_REQUEST_MAX] = {
	[VHOST_USER_NONE] = "NONE",
	[VHOST_USER_GET_FEATURES] = "GET_FEATURES",
	[VHOST_USER_SET_FEATURES] = "SET_FEATURES",
	[VHOST_USER_SET_OWNER] = "SET_OWNER",
	[VHOST_USER_RESET_OWNER] = "RESET_OWNER",
	[VHOST_USER_SET_MEM_TABLE] = "SET_MEM_TABLE",
	[VHOST_USER_SET_LOG_BASE] = "SET_LOG_BASE",
	[VHOST_USER_SET_LOG_FD] = "SET_LOG_FD",
	[VHOST_USER_SET_VRING_NUM] = "SET_VRING_NUM",
	[VHOST_USER_SET_VRING_ADDR] = "SET_VRING_ADDR",
	[VHOST_USER_SET_VRING_BASE] = "SET_VRING_BASE",
	[VHOST_USER_GET_VRING_BASE] = "GET_VRING_BASE",
	[VHOST_USER_SET_VRING_KICK] = "SET_VRING_KICK",
	[VHOST_USER_SET_VRING_CALL] = "SET_VRING_CALL",
	[VHOST_USER_SET_VRING_ERR] = "SET_VRING_ERR",
	[VHOST_USER_GET_PROTOCOL_FEATURES] = "GET_PROTOCOL_FEATURES",
	[VHOST_USER_SET_PROTOCOL_FEATURES] = "SET_PROTOCOL_FEATURES",
	[VHOST_USER_GET_QUEUE_NUM] = "GET_QUEUE_NUM",
	[VHOST_USER_SET_VRING_ENABLE] = "SET_VRING_ENABLE",
	[VHOST_USER_SEND_RARP] = "SEND_RARP",
	[VHOST_USER_NET_SET_MTU] = "NET_SET_MTU",
	[VHOST_USER_SET_BACKEND_REQ_FD] = "SET_BACKEND_REQ_FD",
	[VHOST_USER_IOTLB_MSG] = "IOTLB_MSG",
	[VHOST_USER_SET_VRING_ENDIAN] = "SET_VRING_ENDIAN",
	[VHOST_USER_GET_CONFIG] = "GET_CONFIG",
	[VHOST_USER_SET_CONFIG] = "SET_CONFIG",
	[VHOST_USER_GET_INFLIGHT_FD] = "GET_INFLIGHT_FD",
	[VHOST_USER_SET_INFLIGHT_FD] = "SET_INFLIGHT_FD",
	[VHOST_USER_GET_MAX_MEM_SLOTS] = "GET_MAX_MEM_SLOTS",
	[VHOST_USER_ADD_MEM_REG] = "ADD_MEM_REG",
	[VHOST_USER_REM_MEM_REG] = "REM_MEM_REG",
	[VHOST_USER_SET_STATUS] = "SET_STATUS",
	[VHOST_USER_GET_STATUS] = "GET_STATUS",
};

const char *vhost_user_request_name(uint32_t request)
{
	if (request < VHOST_USER_REQUEST_MAX && request_names[request])
		return request_names[request];
	return "unknown";
}

void vhost_user_msg_close_fds(struct vhost_user_msg *msg)
{
	for (unsigned i = 0; i < msg->nfds && i < VHOST_USER_MAX_FDS; i++) {
		if (msg->fds[i] >= 0)
			close(msg->fds[i]);
		msg->fds[i] = -1;
	}
	msg->nfds = 0;
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Waits for the socket to become ready for `events`, no later than
 * deadline (CLOCK_MONOTONIC ms). */
static int wait_ready(int sock, short events, int64_t deadline)
{
	for (;;) {
		int64_t left = deadline - now_ms();
		if (left <= 0)
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

/* Collects the fds of every SCM_RIGHTS block into msg. Fds beyond what msg
 * can hold are closed here and reported as -EPROTO, so none leak. */
static int take_fds(struct msghdr *mh, struct vhost_user_msg *msg)
{
	int rc = 0;

	for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c; c = CMSG_NXTHDR(mh, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		const unsigned char *data = CMSG_DATA(c);
		for (size_t i = 0; i < n; i++) {
			int fd;
			memcpy(&fd, data + i * sizeof(int), sizeof(fd));
			if (msg->nfds < VHOST_USER_MAX_FDS) {
				msg->fds[msg->nfds++] = fd;
			} else {
				close(fd);
				rc = -EPROTO;
			}
		}
	}
	if (mh->msg_flags & MSG_CTRUNC)
		rc = -EPROTO;
	return rc;
}

/* Reads exactly len bytes into buf. `started` says whether part of the
 * message has arrived already: before that, a non-blocking socket with
 * nothing to read gives -EAGAIN and a closed one gives 0 (orderly EOF);
 * after it, the rest must come within the deadline. */
static int read_exact(int sock, void *buf, size_t len,
		      struct vhost_user_msg *msg, bool *started,
		      int64_t *deadline)
{
	union {
		char buf[CMSG_SPACE(VHOST_USER_MAX_FDS * sizeof(int))];
		struct cmsghdr align;
	} control;
	size_t got = 0;

	while (got < len) {
		struct iovec iov = { .iov_base = (char *)buf + got,
				     .iov_len = len - got };
		struct msghdr mh = {
			.msg_iov = &iov,
			.msg_iovlen = 1,
			.msg_control = control.buf,
			.msg_controllen = sizeof(control.buf),
		};
		ssize_t n = recvmsg(sock, &mh,
				    MSG_CMSG_CLOEXEC | (*started ? MSG_DONTWAIT : 0));
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				return -errno;
			if (!*started)
				return -EAGAIN;
			int rc = wait_ready(sock, POLLIN, *deadline);
			if (rc)
				return rc;
			continue;
		}
		int rc = take_fds(&mh, msg);
		if (rc)
			return rc;
		if (n == 0)
			return *started ? -EIO : 0;
		if (!*started) {
			*started = true;
			*deadline = now_ms() + VHOST_USER_MSG_TIMEOUT_MS;
		}
		got += (size_t)n;
	}
	return 1;
}

static int check_header(const struct vhost_user_header *hdr)
{
	if ((hdr->flags & VHOST_USER_VERSION_MASK) != VHOST_USER_VERSION)
		return -EPROTO;
	if (hdr->size > VHOST_USER_MAX_PAYLOAD)
		return -EPROTO;
	return 0;
}

int vhost_user_msg_recv(int sock, struct vhost_user_msg *msg)
{
	bool started = false;
	int64_t deadline = 0;
	int rc;

	memset(&msg->hdr, 0, sizeof(msg->hdr));
	msg->nfds = 0;
	for (unsigned i = 0; i < VHOST_USER_MAX_FDS; i++)
		msg->fds[i] = -1;

	rc = read_exact(sock, &msg->hdr, sizeof(msg->hdr), msg, &started,
			&deadline);
	if (rc <= 0)
		goto fail;
	rc = check_header(&msg->hdr);
	if (rc)
		goto fail;
	if (msg->hdr.size) {
		rc = read_exact(sock, &msg->payload, msg->hdr.size, msg,
				&started, &deadline);
		if (rc <= 0)
			goto fail;
	}
	return 1;

fail:
	vhost_user_msg_close_fds(msg);
	return rc;
}

int vhost_user_msg_send(int sock, const struct vhost_user_msg *msg)
{
	union {
		char buf[CMSG_SPACE(VHOST_USER_MAX_FDS * sizeof(int))];
		struct cmsghdr align;
	} control;
	size_t total, sent = 0;
	int64_t deadline = now_ms() + VHOST_USER_MSG_TIMEOUT_MS;

	if (msg->hdr.size > VHOST_USER_MAX_PAYLOAD ||
	    msg->nfds > VHOST_USER_MAX_FDS)
		return -EINVAL;
	total = sizeof(msg->hdr) + msg->hdr.size;

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
