/* A record and its fds across a seqpacket socket (fd_transfer.h). */
#include "handover/fd_transfer.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

enum { STAGE_HEADER, STAGE_FDS, STAGE_RECORD, STAGE_DONE, STAGE_FAILED };

static void put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get32(const uint8_t *p)
{
	return p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

/* ---- Sending ----------------------------------------------------------- */

void vmio_fd_sender_init(struct vmio_fd_sender *s, int sock,
			 const uint8_t *rec, size_t len, const int *fds,
			 size_t nfds)
{
	*s = (struct vmio_fd_sender){ .sock = sock, .rec = rec, .len = len,
				      .fds = fds, .nfds = nfds };
}

int vmio_fd_send_message(int sock, const void *data, size_t len,
			 const int *fds, size_t nfds)
{
	union {
		char buf[CMSG_SPACE(VMIO_FD_CHUNK * sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = { (void *)data, len };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };

	if (nfds) {
		struct cmsghdr *c;

		memset(&u, 0, sizeof(u));
		msg.msg_control = u.buf;
		msg.msg_controllen = CMSG_SPACE(nfds * sizeof(int));
		c = CMSG_FIRSTHDR(&msg);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(nfds * sizeof(int));
		memcpy(CMSG_DATA(c), fds, nfds * sizeof(int));
	}
	for (;;) {
		if (sendmsg(sock, &msg, MSG_DONTWAIT | MSG_NOSIGNAL) >= 0)
			return 0;
		if (errno == EINTR)
			continue;
		return errno == EWOULDBLOCK ? -EAGAIN : -errno;
	}
}

int vmio_fd_sender_step(struct vmio_fd_sender *s)
{
	uint8_t hdr[12];
	int rc = 0;

	while (!rc && s->stage != STAGE_DONE) {
		size_t n;

		switch (s->stage) {
		case STAGE_HEADER:
			put32(hdr, VMIO_FD_MAGIC);
			put32(hdr + 4, (uint32_t)s->len);
			put32(hdr + 8, (uint32_t)s->nfds);
			rc = vmio_fd_send_message(s->sock, hdr, sizeof(hdr), NULL, 0);
			if (!rc)
				s->stage = STAGE_FDS;
			break;
		case STAGE_FDS:
			if (s->fds_sent == s->nfds) {
				s->stage = STAGE_RECORD;
				break;
			}
			n = s->nfds - s->fds_sent;
			if (n > VMIO_FD_CHUNK)
				n = VMIO_FD_CHUNK;
			put32(hdr, (uint32_t)n);
			rc = vmio_fd_send_message(s->sock, hdr, 4, s->fds + s->fds_sent, n);
			if (!rc)
				s->fds_sent += n;
			break;
		case STAGE_RECORD:
			if (s->off == s->len) {
				s->stage = STAGE_DONE;
				break;
			}
			n = s->len - s->off;
			if (n > VMIO_FD_PIECE)
				n = VMIO_FD_PIECE;
			rc = vmio_fd_send_message(s->sock, s->rec + s->off, n, NULL, 0);
			if (!rc)
				s->off += n;
			break;
		default:
			return -EPROTO;
		}
	}
	return rc;
}

/* ---- Receiving --------------------------------------------------------- */

void vmio_fd_receiver_init(struct vmio_fd_receiver *r, int sock,
			   size_t max_len, size_t max_fds)
{
	*r = (struct vmio_fd_receiver){ .sock = sock, .max_len = max_len,
					.max_fds = max_fds };
}

static int fail(struct vmio_fd_receiver *r, char *why, size_t size,
		const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static int fail(struct vmio_fd_receiver *r, char *why, size_t size,
		const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, size, fmt, ap);
	va_end(ap);
	for (size_t i = 0; i < r->got; i++)
		if (r->fds[i] >= 0)
			close(r->fds[i]);
	r->got = 0;
	r->stage = STAGE_FAILED;
	return -1;
}

/* The fds of one message, into got[] (at most cap; *n how many). Any fd
 * in a control message that is not SCM_RIGHTS is not ours to keep either:
 * every fd that came is counted, so the caller closes them all on a
 * failure. */
static void collect_fds(struct msghdr *msg, int *got, size_t cap, size_t *n,
			bool *other)
{
	*n = 0;
	*other = false;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(msg); c;
	     c = CMSG_NXTHDR(msg, c)) {
		size_t k;

		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) {
			*other = true;
			continue;
		}
		k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < k; i++) {
			int fd;

			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(fd));
			if (*n < cap)
				got[(*n)++] = fd;
			else
				close(fd);
		}
	}
}

/* One message into data (size bytes at most) and its fds into fds[]
 * (VMIO_FD_CHUNK at most, *nfds how many). Returns its length, 0 at end
 * of stream, -EAGAIN, or -errno (-EMSGSIZE: cut; its fds closed). */
static ssize_t recv_one(int sock, void *data, size_t size, int *fds,
			size_t *nfds)
{
	union {
		char buf[CMSG_SPACE(VMIO_FD_CHUNK * sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = { data, size };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1,
			      .msg_control = u.buf,
			      .msg_controllen = sizeof(u.buf) };
	bool other;
	ssize_t n;

	*nfds = 0;
	do
		n = recvmsg(sock, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return errno == EWOULDBLOCK ? -EAGAIN : -errno;
	collect_fds(&msg, fds, VMIO_FD_CHUNK, nfds, &other);
	if (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC) || other) {
		for (size_t i = 0; i < *nfds; i++)
			close(fds[i]);
		*nfds = 0;
		return -EMSGSIZE;
	}
	return n;
}

static int take_header(struct vmio_fd_receiver *r, const uint8_t *m,
		       ssize_t n, char *why, size_t size)
{
	if (n != 12 || get32(m) != VMIO_FD_MAGIC)
		return fail(r, why, size, "the hand-over's first message is not its header");
	r->len = get32(m + 4);
	r->nfds = get32(m + 8);
	if (r->len > r->max_len || r->nfds > r->max_fds)
		return fail(r, why, size,
			    "the hand-over announces %zu bytes and %zu fds: at most %zu and %zu",
			    r->len, r->nfds, r->max_len, r->max_fds);
	r->rec = malloc(r->len ? r->len : 1);
	r->fds = malloc((r->nfds ? r->nfds : 1) * sizeof(int));
	if (!r->rec || !r->fds)
		return fail(r, why, size, "out of memory for the hand-over");
	r->stage = r->nfds ? STAGE_FDS : STAGE_RECORD;
	if (!r->len && !r->nfds)
		r->stage = STAGE_DONE;
	return 0;
}

static int take_fds(struct vmio_fd_receiver *r, const uint8_t *m, ssize_t n,
		    const int *fds, size_t nfds, char *why, size_t size)
{
	/* Counted first: whatever happens next, these are closed with the
	 * rest on a failure. The list has room: nfds <= VMIO_FD_CHUNK and
	 * the check below comes before any are kept past r->nfds. */
	if (nfds > r->nfds - r->got) {
		for (size_t i = 0; i < nfds; i++)
			close(fds[i]);
		return fail(r, why, size, "more fds arrived than announced (%zu)",
			    r->nfds);
	}
	memcpy(r->fds + r->got, fds, nfds * sizeof(int));
	r->got += nfds;
	if (n != 4 || get32(m) != nfds || !nfds)
		return fail(r, why, size,
			    "an fd message's count does not match its fds");
	if (r->got == r->nfds)
		r->stage = r->len ? STAGE_RECORD : STAGE_DONE;
	return 0;
}

int vmio_fd_receiver_step(struct vmio_fd_receiver *r, char *why,
			  size_t why_size)
{
	uint8_t small[16];
	int fds[VMIO_FD_CHUNK];

	while (r->stage != STAGE_DONE) {
		bool rec = r->stage == STAGE_RECORD;
		uint8_t *into = rec ? r->rec + r->off : small;
		size_t room = rec ? r->len - r->off : sizeof(small), nfds;
		ssize_t n;

		if (r->stage == STAGE_FAILED)
			return -1;
		n = recv_one(r->sock, into, room, fds, &nfds);
		if (n == -EAGAIN)
			return -EAGAIN;
		if (n == -EMSGSIZE)
			return fail(r, why, why_size,
				    "a hand-over message was larger than its place");
		if (n < 0)
			return fail(r, why, why_size, "hand-over socket: %s",
				    strerror((int)-n));
		if (n == 0 && !nfds)
			return fail(r, why, why_size,
				    "the hand-over ended early (%zu of %zu bytes, %zu of %zu fds)",
				    r->off, r->len, r->got, r->nfds);
		if (r->stage == STAGE_FDS) {
			if (take_fds(r, small, n, fds, nfds, why, why_size))
				return -1;
			continue;
		}
		if (nfds) {
			for (size_t i = 0; i < nfds; i++)
				close(fds[i]);
			return fail(r, why, why_size,
				    "fds arrived where none were due");
		}
		if (r->stage == STAGE_HEADER) {
			if (take_header(r, small, n, why, why_size))
				return -1;
			continue;
		}
		r->off += (size_t)n;
		if (r->off == r->len)
			r->stage = STAGE_DONE;
	}
	return 0;
}

void vmio_fd_receiver_fini(struct vmio_fd_receiver *r)
{
	for (size_t i = 0; i < r->got; i++)
		if (r->fds[i] >= 0)
			close(r->fds[i]);
	free(r->fds);
	free(r->rec);
	*r = (struct vmio_fd_receiver){ .sock = -1 };
}
