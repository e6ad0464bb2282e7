/* The vhost-user wire format: messages with and without fds over a
 * socketpair, and the ways a peer can send something malformed or stop
 * half-way; the backend's reader that never waits (a message split at
 * every byte), its outbox, and the channel's deadlines in a loop. The
 * front end's blocking I/O (frontend/msg_io.h) is the other end. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <dirent.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "event/loop.h"
#include "frontend/msg_io.h"
#include "util/clock.h"
#include "vhost-user/channel.h"
#include "vhost-user/message.h"
#include "vhost-user/outbox.h"

struct pair {
	int a, b;
};

static int setup(void **state)
{
	static struct pair p;
	int sv[2];

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return -1;
	p.a = sv[0];
	p.b = sv[1];
	*state = &p;
	return 0;
}

static int teardown(void **state)
{
	struct pair *p = *state;

	close(p->a);
	if (p->b >= 0)
		close(p->b);
	return 0;
}

static void set_nonblock(int fd)
{
	assert_int_equal(fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK), 0);
}

static int memfd_with(uint8_t tag)
{
	int fd = memfd_create("test", MFD_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, &tag, 1), 1);
	return fd;
}

static uint8_t memfd_tag(int fd)
{
	uint8_t tag = 0;
	assert_int_equal(pread(fd, &tag, 1, 0), 1);
	return tag;
}

static void roundtrip(struct pair *p, unsigned nfds)
{
	struct vhost_user_msg out = {
		.hdr = { .request = VHOST_USER_SET_MEM_TABLE,
			 .flags = VHOST_USER_VERSION,
			 .size = sizeof(struct vhost_user_memory) },
	};
	struct vhost_user_msg in;

	out.payload.memory.nregions = nfds;
	for (unsigned i = 0; i < VHOST_USER_MEM_TABLE_MAX_REGIONS; i++)
		out.payload.memory.regions[i].gpa = 0x1000ull * (i + 1);
	for (unsigned i = 0; i < nfds; i++)
		out.fds[i] = memfd_with((uint8_t)(0xa0 + i));
	out.nfds = nfds;

	assert_int_equal(vhost_user_msg_send(p->a, &out), 0);
	vhost_user_msg_close_fds(&out);
	assert_int_equal(vhost_user_msg_recv(p->b, &in), 1);

	assert_int_equal(in.hdr.request, VHOST_USER_SET_MEM_TABLE);
	assert_int_equal(in.hdr.size, sizeof(struct vhost_user_memory));
	assert_int_equal(in.payload.memory.nregions, nfds);
	for (unsigned i = 0; i < VHOST_USER_MEM_TABLE_MAX_REGIONS; i++)
		assert_int_equal(in.payload.memory.regions[i].gpa,
				 0x1000ull * (i + 1));
	assert_int_equal(in.nfds, nfds);
	/* The fds arrive as new descriptors for the same files. */
	for (unsigned i = 0; i < nfds; i++)
		assert_int_equal(memfd_tag(in.fds[i]), 0xa0 + i);
	vhost_user_msg_close_fds(&in);
	assert_int_equal(in.nfds, 0);
}

static void test_roundtrip_no_fds(void **state)
{
	roundtrip(*state, 0);
}

static void test_roundtrip_one_fd(void **state)
{
	roundtrip(*state, 1);
}

static void test_roundtrip_eight_fds(void **state)
{
	roundtrip(*state, 8);
}

static void test_eventfd_works_after_transfer(void **state)
{
	struct pair *p = *state;
	struct vhost_user_msg out = {
		.hdr = { .request = VHOST_USER_SET_VRING_KICK,
			 .flags = VHOST_USER_VERSION, .size = 8 },
		.payload.u64 = 1,
		.nfds = 1,
	};
	struct vhost_user_msg in;
	uint64_t v = 0;

	out.fds[0] = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	assert_true(out.fds[0] >= 0);
	assert_int_equal(vhost_user_msg_send(p->a, &out), 0);
	assert_int_equal(vhost_user_msg_recv(p->b, &in), 1);
	assert_int_equal(in.nfds, 1);
	assert_int_equal(in.payload.u64, 1);
	v = 5;
	assert_int_equal(write(in.fds[0], &v, 8), 8);
	v = 0;
	assert_int_equal(read(out.fds[0], &v, 8), 8);
	assert_int_equal(v, 5);
	vhost_user_msg_close_fds(&out);
	vhost_user_msg_close_fds(&in);
}

static void send_raw(int fd, const void *buf, size_t len)
{
	assert_int_equal(write(fd, buf, len), (ssize_t)len);
}

static void test_oversize_payload(void **state)
{
	struct pair *p = *state;
	struct vhost_user_header h = { .request = VHOST_USER_SET_FEATURES,
				       .flags = VHOST_USER_VERSION,
				       .size = VHOST_USER_MAX_PAYLOAD + 1 };
	struct vhost_user_msg in;

	send_raw(p->a, &h, sizeof(h));
	assert_int_equal(vhost_user_msg_recv(p->b, &in), -EPROTO);
	assert_int_equal(in.nfds, 0);
}

static void test_bad_version(void **state)
{
	struct pair *p = *state;
	struct vhost_user_header h = { .request = VHOST_USER_GET_FEATURES,
				       .flags = 0x2 };
	struct vhost_user_msg in;

	send_raw(p->a, &h, sizeof(h));
	assert_int_equal(vhost_user_msg_recv(p->b, &in), -EPROTO);
}

static int count_open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	assert_non_null(d);
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

static void test_bad_header_closes_fds(void **state)
{
	struct pair *p = *state;
	struct vhost_user_msg out = {
		.hdr = { .request = VHOST_USER_SET_VRING_CALL, .flags = 0 },
		.nfds = 1,
	};
	struct vhost_user_msg in;

	out.fds[0] = eventfd(0, EFD_CLOEXEC);
	assert_int_equal(vhost_user_msg_send(p->a, &out), 0);
	vhost_user_msg_close_fds(&out);
	int before = count_open_fds();
	assert_int_equal(vhost_user_msg_recv(p->b, &in), -EPROTO);
	assert_int_equal(in.nfds, 0);
	assert_int_equal(count_open_fds(), before);
}

static double elapsed_s(const struct timespec *t0)
{
	struct timespec t1;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	return (double)(t1.tv_sec - t0->tv_sec) +
	       (double)(t1.tv_nsec - t0->tv_nsec) / 1e9;
}

static void test_header_then_silence_times_out(void **state)
{
	struct pair *p = *state;
	struct vhost_user_header h = { .request = VHOST_USER_SET_FEATURES,
				       .flags = VHOST_USER_VERSION, .size = 8 };
	struct vhost_user_msg in;
	struct timespec t0;

	send_raw(p->a, &h, sizeof(h));
	clock_gettime(CLOCK_MONOTONIC, &t0);
	assert_int_equal(vhost_user_msg_recv(p->b, &in), -ETIMEDOUT);
	double s = elapsed_s(&t0);
	assert_true(s >= 0.9 && s < 3.0);
}

static void test_partial_header_times_out_nonblocking(void **state)
{
	struct pair *p = *state;
	struct vhost_user_msg in;
	uint8_t half[6] = { 1, 0, 0, 0, 1, 0 };

	set_nonblock(p->b);
	/* Nothing at all: the caller's socket is non-blocking, so say so. */
	assert_int_equal(vhost_user_msg_recv(p->b, &in), -EAGAIN);
	send_raw(p->a, half, sizeof(half));
	assert_int_equal(vhost_user_msg_recv(p->b, &in), -ETIMEDOUT);
}

static void test_eof(void **state)
{
	struct pair *p = *state;
	struct vhost_user_msg in;

	close(p->a);
	p->a = -1;
	assert_int_equal(vhost_user_msg_recv(p->b, &in), 0);
	p->a = open("/dev/null", O_RDONLY | O_CLOEXEC); /* for teardown */
}

static void test_eof_mid_message(void **state)
{
	struct pair *p = *state;
	struct vhost_user_header h = { .request = VHOST_USER_SET_FEATURES,
				       .flags = VHOST_USER_VERSION, .size = 8 };
	struct vhost_user_msg in;

	send_raw(p->a, &h, sizeof(h));
	close(p->a);
	p->a = open("/dev/null", O_RDONLY | O_CLOEXEC);
	assert_int_equal(vhost_user_msg_recv(p->b, &in), -EIO);
}

/* The reader takes a message however it is cut: split at every byte,
 * with its fds on the first byte, it says "not yet" until the last one
 * arrives and then gives the message whole. */
static void test_reader_split_at_every_byte(void **state)
{
	struct pair *p = *state;
	struct vhost_user_msg out = {
		.hdr = { .request = VHOST_USER_SET_MEM_TABLE,
			 .flags = VHOST_USER_VERSION,
			 .size = sizeof(struct vhost_user_memory) },
	};
	const size_t total = vhost_user_msg_wire_size(&out);
	uint8_t wire[sizeof(struct vhost_user_header) + VHOST_USER_MAX_PAYLOAD];
	struct vhost_user_reader r;

	out.payload.memory.nregions = 2;
	for (unsigned i = 0; i < VHOST_USER_MEM_TABLE_MAX_REGIONS; i++)
		out.payload.memory.regions[i].gpa = 0x1000ull * (i + 1);
	memcpy(wire, &out.hdr, sizeof(out.hdr));
	memcpy(wire + sizeof(out.hdr), &out.payload, out.hdr.size);
	set_nonblock(p->b);
	for (size_t cut = 1; cut < total; cut++) {
		int fds[2] = { memfd_with(0x11), memfd_with(0x22) };
		union {
			char buf[CMSG_SPACE(2 * sizeof(int))];
			struct cmsghdr align;
		} control;
		struct iovec iov = { wire, cut };
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
				     .msg_control = control.buf,
				     .msg_controllen = sizeof(control.buf) };
		struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(fds));
		memcpy(CMSG_DATA(c), fds, sizeof(fds));
		assert_int_equal(sendmsg(p->a, &mh, 0), (ssize_t)cut);
		close(fds[0]);
		close(fds[1]);

		vhost_user_reader_init(&r);
		assert_int_equal(vhost_user_reader_recv(&r, p->b), -EAGAIN);
		assert_true(vhost_user_reader_started(&r));
		assert_int_equal(vhost_user_reader_recv(&r, p->b), -EAGAIN);
		/* The rest a byte at a time. */
		for (size_t k = cut; k < total; k++) {
			send_raw(p->a, wire + k, 1);
			int rc = vhost_user_reader_recv(&r, p->b);
			assert_int_equal(rc, k + 1 == total ? 1 : -EAGAIN);
		}
		assert_memory_equal(&r.msg.hdr, &out.hdr, sizeof(out.hdr));
		assert_memory_equal(&r.msg.payload, &out.payload, out.hdr.size);
		assert_int_equal(r.msg.nfds, 2);
		assert_int_equal(memfd_tag(r.msg.fds[0]), 0x11);
		assert_int_equal(memfd_tag(r.msg.fds[1]), 0x22);
		vhost_user_msg_close_fds(&r.msg);
	}
}

/* Two messages in one write are two messages, each with its own fds. */
static void test_reader_back_to_back(void **state)
{
	struct pair *p = *state;
	struct vhost_user_msg a = {
		.hdr = { .request = VHOST_USER_SET_VRING_KICK,
			 .flags = VHOST_USER_VERSION, .size = 8 },
		.payload.u64 = 0,
		.fds = { memfd_with(0x33) },
		.nfds = 1,
	};
	struct vhost_user_msg b = {
		.hdr = { .request = VHOST_USER_GET_FEATURES,
			 .flags = VHOST_USER_VERSION },
	};
	struct vhost_user_reader r;

	set_nonblock(p->b);
	assert_int_equal(vhost_user_msg_send(p->a, &a), 0);
	assert_int_equal(vhost_user_msg_send(p->a, &b), 0);
	close(a.fds[0]);
	vhost_user_reader_init(&r);
	assert_int_equal(vhost_user_reader_recv(&r, p->b), 1);
	assert_int_equal(r.msg.hdr.request, VHOST_USER_SET_VRING_KICK);
	assert_int_equal(r.msg.nfds, 1);
	assert_int_equal(memfd_tag(r.msg.fds[0]), 0x33);
	vhost_user_msg_close_fds(&r.msg);
	vhost_user_reader_init(&r);
	assert_int_equal(vhost_user_reader_recv(&r, p->b), 1);
	assert_int_equal(r.msg.hdr.request, VHOST_USER_GET_FEATURES);
	assert_int_equal(r.msg.nfds, 0);
	vhost_user_reader_init(&r);
	assert_int_equal(vhost_user_reader_recv(&r, p->b), -EAGAIN);
	assert_false(vhost_user_reader_started(&r));
}

/* A size field of 2 GiB is refused on the header alone: no payload is
 * waited for, nothing is allocated. */
static void test_reader_refuses_huge_size_at_header(void **state)
{
	struct pair *p = *state;
	struct vhost_user_header h = { .request = VHOST_USER_SET_MEM_TABLE,
				       .flags = VHOST_USER_VERSION,
				       .size = 0x80000000u };
	struct vhost_user_reader r;

	set_nonblock(p->b);
	send_raw(p->a, &h, sizeof(h));
	vhost_user_reader_init(&r);
	assert_int_equal(vhost_user_reader_recv(&r, p->b), -EPROTO);
	assert_non_null(strstr(r.problem, "payload size"));
	assert_int_equal(r.msg.nfds, 0);
}

static void test_outbox_bounded(void **state)
{
	struct pair *p = *state;
	struct vhost_user_outbox o;
	struct vhost_user_msg m = {
		.hdr = { .request = VHOST_USER_GET_CONFIG,
			 .flags = VHOST_USER_VERSION | VHOST_USER_REPLY_MASK,
			 .size = sizeof(struct vhost_user_config) },
	};
	int small = 4096;
	unsigned put = 0;

	/* A peer that reads nothing: the socket fills, then the outbox. */
	assert_int_equal(setsockopt(p->a, SOL_SOCKET, SO_SNDBUF, &small,
				    sizeof(small)), 0);
	assert_int_equal(setsockopt(p->b, SOL_SOCKET, SO_RCVBUF, &small,
				    sizeof(small)), 0);
	vhost_user_outbox_init(&o);
	for (unsigned i = 0; i < 10000; i++) {
		memset(m.payload.config.payload, (int)(i & 0xff), 16);
		m.payload.config.offset = i;
		int rc = vhost_user_outbox_put(&o, &m);
		if (rc) {
			assert_int_equal(rc, -ENOBUFS);
			break;
		}
		put++;
		assert_int_equal(vhost_user_outbox_flush(&o, p->a), 0);
	}
	assert_true(put < 10000);
	assert_true(vmio_byte_ring_len(&o.ring) <= VHOST_USER_OUTBOX_SIZE);
	size_t held = vmio_byte_ring_len(&o.ring);
	assert_int_equal(vhost_user_outbox_put(&o, &m), -ENOBUFS);
	assert_int_equal(vmio_byte_ring_len(&o.ring), held);

	/* The peer reads: everything arrives, in order, each message whole. */
	for (unsigned i = 0; i < put; i++) {
		struct vhost_user_msg in;
		assert_int_equal(vhost_user_outbox_flush(&o, p->a), 0);
		assert_int_equal(vhost_user_msg_recv(p->b, &in), 1);
		assert_int_equal(in.hdr.request, VHOST_USER_GET_CONFIG);
		assert_int_equal(in.payload.config.offset, i);
		assert_int_equal(in.payload.config.payload[15], i & 0xff);
	}
	assert_true(vhost_user_outbox_empty(&o));
}

/* ---- The channel, in a loop ------------------------------------------ */

struct chan_fix {
	struct vmio_loop *loop;
	struct vhost_user_channel ch;
	int peer;
	unsigned messages;
	bool closed;
	enum vhost_user_end end;
	char why[256];
};

static enum vhost_user_result chan_message(void *opaque,
					   struct vhost_user_msg *msg,
					   struct vhost_user_msg *reply)
{
	struct chan_fix *f = opaque;

	*reply = (struct vhost_user_msg){
		.hdr = { .request = msg->hdr.request,
			 .flags = VHOST_USER_VERSION | VHOST_USER_REPLY_MASK,
			 .size = 8 },
		.payload.u64 = ++f->messages,
	};
	vhost_user_msg_close_fds(msg);
	if (msg->hdr.request == VHOST_USER_GET_FEATURES)
		return VHOST_USER_REPLY;
	return VHOST_USER_DONE;
}

static void chan_closed(void *opaque, enum vhost_user_end end,
			const char *why)
{
	struct chan_fix *f = opaque;

	f->closed = true;
	f->end = end;
	snprintf(f->why, sizeof(f->why), "%s", why ? why : "(hang up)");
}

static const struct vhost_user_channel_ops chan_ops = {
	.message = chan_message,
	.closed = chan_closed,
};

static void chan_open(struct chan_fix *f, unsigned timeout_ms)
{
	int sv[2];

	memset(f, 0, sizeof(*f));
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv),
			 0);
	f->loop = vmio_loop_new();
	assert_non_null(f->loop);
	f->peer = sv[0];
	assert_int_equal(vhost_user_channel_open(&f->ch, f->loop, sv[1],
						 timeout_ms, &chan_ops, f),
			 0);
}

static void chan_close(struct chan_fix *f)
{
	vhost_user_channel_close(&f->ch);
	close(f->peer);
	vmio_loop_free(f->loop);
}

/* Runs the loop until cond holds or 10 s pass. */
#define RUN_UNTIL(f, cond)                                                     \
	({                                                                     \
		uint64_t end_ = vmio_now_ns() + 10000000000u;                  \
		while (!(cond) && vmio_now_ns() < end_)                        \
			vmio_loop_run_once((f)->loop, 50);                     \
		(bool)(cond);                                                  \
	})

static void send_get_features(int fd)
{
	struct vhost_user_msg m = {
		.hdr = { .request = VHOST_USER_GET_FEATURES,
			 .flags = VHOST_USER_VERSION },
	};
	assert_int_equal(vhost_user_msg_send(fd, &m), 0);
}

/* Half a message does not hold the loop: every turn returns at once, the
 * rest completes it, and a reply comes. */
static void test_channel_partial_message_waits_without_blocking(void **state)
{
	struct chan_fix f;
	struct vhost_user_header h = { .request = VHOST_USER_GET_FEATURES,
				       .flags = VHOST_USER_VERSION };

	chan_open(&f, 10000);
	send_raw(f.peer, &h, 6);
	for (int i = 0; i < 20; i++) {
		uint64_t t0 = vmio_now_ns();
		vmio_loop_run_once(f.loop, 0);
		/* Far below the 10 s timeout the old reader waited for. */
		assert_true(vmio_now_ns() - t0 < 2000000000u);
	}
	assert_int_equal(f.messages, 0);
	assert_false(f.closed);
	send_raw(f.peer, (uint8_t *)&h + 6, sizeof(h) - 6);
	assert_true(RUN_UNTIL(&f, f.messages == 1));
	struct vhost_user_msg in;
	assert_int_equal(vhost_user_msg_recv(f.peer, &in), 1);
	assert_int_equal(in.payload.u64, 1);
	assert_false(f.closed);
	chan_close(&f);
}

static void test_channel_unfinished_message_closes(void **state)
{
	struct chan_fix f;
	struct vhost_user_header h = { .request = VHOST_USER_SET_FEATURES,
				       .flags = VHOST_USER_VERSION, .size = 8 };

	chan_open(&f, 100);
	send_raw(f.peer, &h, sizeof(h));
	uint64_t t0 = vmio_now_ns();
	assert_true(RUN_UNTIL(&f, f.closed));
	assert_true(vmio_now_ns() - t0 >= 100000000u);
	assert_non_null(strstr(f.why, "did not finish it within 100 ms"));
	assert_int_equal(f.end, VHOST_USER_END_TIMEOUT);
	assert_false(f.ch.open);
	chan_close(&f);
}

/* A front end that sends requests and never reads the replies: input
 * stops once the outbox has no room for another reply, and the deadline
 * closes the connection. Memory stays within the outbox. */
static void test_channel_unread_replies_close(void **state)
{
	struct chan_fix f;
	int small = 4096;

	chan_open(&f, 200);
	assert_int_equal(setsockopt(f.ch.fd, SOL_SOCKET, SO_SNDBUF, &small,
				    sizeof(small)), 0);
	assert_int_equal(setsockopt(f.peer, SOL_SOCKET, SO_RCVBUF, &small,
				    sizeof(small)), 0);
	set_nonblock(f.peer);
	unsigned sent = 0;
	/* Send until the backend stops taking requests. */
	while (!f.closed && sent < 100000) {
		struct vhost_user_msg m = {
			.hdr = { .request = VHOST_USER_GET_FEATURES,
				 .flags = VHOST_USER_VERSION },
		};
		if (send(f.peer, &m.hdr, sizeof(m.hdr), MSG_DONTWAIT) !=
		    (ssize_t)sizeof(m.hdr))
			break;
		sent++;
		vmio_loop_run_once(f.loop, 0);
	}
	assert_true(sent < 100000);
	assert_true(vmio_byte_ring_len(&f.ch.out.ring) <= VHOST_USER_OUTBOX_SIZE);
	assert_true(RUN_UNTIL(&f, f.closed));
	assert_non_null(strstr(f.why, "did not take its replies within 200 ms"));
	assert_int_equal(f.end, VHOST_USER_END_TIMEOUT);
	chan_close(&f);
}

static void test_channel_huge_size_closes_at_once(void **state)
{
	struct chan_fix f;
	struct vhost_user_header h = { .request = VHOST_USER_SET_MEM_TABLE,
				       .flags = VHOST_USER_VERSION,
				       .size = 0x80000000u };

	chan_open(&f, 10000);
	send_raw(f.peer, &h, sizeof(h));
	assert_true(RUN_UNTIL(&f, f.closed));
	assert_non_null(strstr(f.why, "payload size"));
	assert_int_equal(f.end, VHOST_USER_END_FAULT);
	chan_close(&f);
}

static void test_channel_hang_up_and_batch(void **state)
{
	struct chan_fix f;

	chan_open(&f, 1000);
	for (int i = 0; i < 5; i++)
		send_get_features(f.peer);
	assert_true(RUN_UNTIL(&f, f.messages == 5));
	shutdown(f.peer, SHUT_WR);
	assert_true(RUN_UNTIL(&f, f.closed));
	assert_string_equal(f.why, "(hang up)");
	assert_int_equal(f.end, VHOST_USER_END_HANGUP);
	for (unsigned i = 1; i <= 5; i++) {
		struct vhost_user_msg in;
		assert_int_equal(vhost_user_msg_recv(f.peer, &in), 1);
		assert_int_equal(in.payload.u64, i);
	}
	chan_close(&f);
}

static void test_send_rejects_oversize(void **state)
{
	struct pair *p = *state;
	struct vhost_user_msg out = {
		.hdr = { .size = VHOST_USER_MAX_PAYLOAD + 1 },
	};

	assert_int_equal(vhost_user_msg_send(p->a, &out), -EINVAL);
	out.hdr.size = 0;
	out.nfds = VHOST_USER_MAX_FDS + 1;
	assert_int_equal(vhost_user_msg_send(p->a, &out), -EINVAL);
}

static void test_request_names(void **state)
{
	assert_string_equal(vhost_user_request_name(VHOST_USER_SET_MEM_TABLE),
			    "SET_MEM_TABLE");
	assert_string_equal(vhost_user_request_name(VHOST_USER_GET_STATUS),
			    "GET_STATUS");
	assert_string_equal(vhost_user_request_name(26), "unknown");
	assert_string_equal(vhost_user_request_name(0xffffffffu), "unknown");
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_roundtrip_no_fds),
		T(test_roundtrip_one_fd),
		T(test_roundtrip_eight_fds),
		T(test_eventfd_works_after_transfer),
		T(test_oversize_payload),
		T(test_bad_version),
		T(test_bad_header_closes_fds),
		T(test_header_then_silence_times_out),
		T(test_partial_header_times_out_nonblocking),
		T(test_eof),
		T(test_eof_mid_message),
		T(test_reader_split_at_every_byte),
		T(test_reader_back_to_back),
		T(test_reader_refuses_huge_size_at_header),
		T(test_outbox_bounded),
		cmocka_unit_test(test_channel_partial_message_waits_without_blocking),
		cmocka_unit_test(test_channel_unfinished_message_closes),
		cmocka_unit_test(test_channel_unread_replies_close),
		cmocka_unit_test(test_channel_huge_size_closes_at_once),
		cmocka_unit_test(test_channel_hang_up_and_batch),
		T(test_send_rejects_oversize),
		T(test_request_names),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
