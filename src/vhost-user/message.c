#include "vhost-user/message.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
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

const char *vhost_user_header_problem(const struct vhost_user_header *hdr)
{
	if ((hdr->flags & VHOST_USER_VERSION_MASK) != VHOST_USER_VERSION)
		return "unknown protocol version";
	if (hdr->size > VHOST_USER_MAX_PAYLOAD)
		return "payload size beyond the protocol's largest message";
	return NULL;
}

void vhost_user_reader_init(struct vhost_user_reader *r)
{
	memset(&r->msg.hdr, 0, sizeof(r->msg.hdr));
	r->msg.nfds = 0;
	for (unsigned i = 0; i < VHOST_USER_MAX_FDS; i++)
		r->msg.fds[i] = -1;
	r->got = 0;
	r->problem = NULL;
}

void vhost_user_reader_reset(struct vhost_user_reader *r)
{
	vhost_user_msg_close_fds(&r->msg);
	vhost_user_reader_init(r);
}

size_t vhost_user_reader_expected(const struct vhost_user_reader *r)
{
	if (r->got < sizeof(r->msg.hdr))
		return sizeof(r->msg.hdr);
	return vhost_user_msg_wire_size(&r->msg);
}

size_t vhost_user_reader_copy(const struct vhost_user_reader *r, void *out)
{
	const size_t hdr_len = sizeof(r->msg.hdr);
	uint8_t *o = out;

	memcpy(o, &r->msg.hdr, r->got < hdr_len ? r->got : hdr_len);
	if (r->got > hdr_len)
		memcpy(o + hdr_len, &r->msg.payload, r->got - hdr_len);
	return r->got;
}

int vhost_user_reader_preload(struct vhost_user_reader *r, const void *bytes,
			      size_t got, int *fds, unsigned nfds,
			      const char **problem)
{
	const size_t hdr_len = sizeof(r->msg.hdr);
	const uint8_t *b = bytes;

	vhost_user_reader_init(r);
	*problem = NULL;
	if (nfds > VHOST_USER_MAX_FDS)
		*problem = "more file descriptors than a message may carry";
	else if (got >= hdr_len + VHOST_USER_MAX_PAYLOAD)
		*problem = "more bytes than a message has";
	if (!*problem) {
		/* A session with no message half read has no bytes (NULL). */
		if (got)
			memcpy(&r->msg.hdr, b, got < hdr_len ? got : hdr_len);
		if (got > hdr_len)
			memcpy(&r->msg.payload, b + hdr_len, got - hdr_len);
		r->got = got;
		if (got >= hdr_len)
			*problem = vhost_user_header_problem(&r->msg.hdr);
		if (!*problem && got >= vhost_user_reader_expected(r))
			*problem = "the bytes make a whole message";
	}
	for (unsigned i = 0; i < nfds; i++) {
		if (!*problem)
			r->msg.fds[r->msg.nfds++] = fds[i];
		else if (fds[i] >= 0)
			close(fds[i]);
		fds[i] = -1;
	}
	if (*problem) {
		vhost_user_reader_reset(r);
		return -EINVAL;
	}
	return 0;
}

/* Collects the fds of every SCM_RIGHTS block into msg. Fds beyond what msg
 * can hold are closed here and reported, so none leak. */
static const char *take_fds(struct msghdr *mh, struct vhost_user_msg *msg)
{
	const char *problem = NULL;

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
				problem = "more file descriptors than a message "
					  "may carry";
			}
		}
	}
	if (mh->msg_flags & MSG_CTRUNC)
		problem = "file descriptors truncated";
	return problem;
}

static int fail(struct vhost_user_reader *r, int rc, const char *problem)
{
	vhost_user_msg_close_fds(&r->msg);
	r->problem = problem;
	return rc;
}

/* The header and the payload are separate parts: the header must be
 * checked before we know how much payload to ask for, and asking for no
 * more than the message keeps the next message's fds out of this one. */
int vhost_user_reader_recv(struct vhost_user_reader *r, int sock)
{
	union {
		char buf[CMSG_SPACE(VHOST_USER_MAX_FDS * sizeof(int))];
		struct cmsghdr align;
	} control;
	const size_t hdr_len = sizeof(r->msg.hdr);

	for (;;) {
		size_t want = vhost_user_reader_expected(r);
		if (r->got == want)
			return 1;
		struct iovec iov;
		if (r->got < hdr_len)
			iov = (struct iovec){ (char *)&r->msg.hdr + r->got,
					      hdr_len - r->got };
		else
			iov = (struct iovec){
				(char *)&r->msg.payload + (r->got - hdr_len),
				want - r->got
			};
		struct msghdr mh = {
			.msg_iov = &iov,
			.msg_iovlen = 1,
			.msg_control = control.buf,
			.msg_controllen = sizeof(control.buf),
		};
		ssize_t n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return -EAGAIN;
			return fail(r, -errno, "the socket failed");
		}
		const char *problem = take_fds(&mh, &r->msg);
		if (problem)
			return fail(r, -EPROTO, problem);
		if (n == 0) {
			if (!vhost_user_reader_started(r))
				return 0;
			return fail(r, -EIO, "end of stream inside a message");
		}
		r->got += (size_t)n;
		if (r->got == hdr_len) {
			problem = vhost_user_header_problem(&r->msg.hdr);
			if (problem)
				return fail(r, -EPROTO, problem);
		}
	}
}
