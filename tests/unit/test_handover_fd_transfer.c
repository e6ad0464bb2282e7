/* A record and fds across a seqpacket socketpair: more fds than one
 * message takes arrive, each the same file; a hostile sender's surplus
 * or misplaced fds, cut messages and an early end fail the transfer and
 * leave no fd open. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "handover/fd_transfer.h"

#define NFDS 600u /* three messages' worth */

static unsigned open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	unsigned n = 0;

	assert_non_null(d);
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

static void pair(int sv[2])
{
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK |
						    SOCK_CLOEXEC, 0, sv), 0);
}

/* Steps both sides until the receiver is done or fails: returns its
 * last result. Bounded: every step either moves or waits in poll. */
static int run(struct vmio_fd_sender *tx, struct vmio_fd_receiver *rx,
	       char *why, size_t size)
{
	int srx = -EAGAIN, stx = -EAGAIN;

	for (unsigned turns = 0; turns < 100000; turns++) {
		if (stx == -EAGAIN && tx)
			stx = vmio_fd_sender_step(tx);
		if (!stx)
			tx = NULL;
		srx = vmio_fd_receiver_step(rx, why, size);
		if (srx != -EAGAIN)
			return srx;
		if (stx && stx != -EAGAIN)
			tx = NULL; /* its peer's turn to see the end */
		struct pollfd p[2] = {
			{ .fd = rx->sock, .events = POLLIN },
			{ .fd = tx && stx == -EAGAIN ? tx->sock : -1,
			  .events = POLLOUT },
		};
		if (poll(p, 2, 5000) < 1)
			return -ETIMEDOUT;
		if (p[1].revents)
			stx = -EAGAIN; /* room again: its step */
	}
	return -ELOOP;
}

static void test_record_and_many_fds(void **state)
{
	static uint8_t rec[200000];
	int fds[NFDS], sv[2], base = open_fds(), rc;
	struct vmio_fd_sender tx;
	struct vmio_fd_receiver rx;
	struct stat a, b;
	char why[256];

	(void)state;
	for (size_t i = 0; i < sizeof(rec); i++)
		rec[i] = (uint8_t)(i * 7);
	for (unsigned i = 0; i < NFDS; i++) {
		int p[2];

		assert_int_equal(pipe(p), 0);
		close(p[1]);
		fds[i] = p[0];
	}
	pair(sv);
	vmio_fd_sender_init(&tx, sv[0], rec, sizeof(rec), fds, NFDS);
	vmio_fd_receiver_init(&rx, sv[1], 1u << 20, 4096);
	rc = run(&tx, &rx, why, sizeof(why));
	if (rc)
		fail_msg("%s", why);
	assert_int_equal(rx.len, sizeof(rec));
	assert_memory_equal(rx.rec, rec, sizeof(rec));
	assert_int_equal(rx.nfds, NFDS);
	for (unsigned i = 0; i < NFDS; i++) {
		assert_int_equal(fstat(fds[i], &a), 0);
		assert_int_equal(fstat(rx.fds[i], &b), 0);
		assert_true(a.st_ino == b.st_ino && rx.fds[i] != fds[i]);
	}
	for (unsigned i = 0; i < NFDS; i++)
		close(fds[i]);
	vmio_fd_receiver_fini(&rx);
	close(sv[0]);
	close(sv[1]);
	assert_int_equal(open_fds(), base);
}

/* Sends one raw message with n copies of fd. */
static void send_raw(int sock, const void *data, size_t len, int fd,
		     unsigned n)
{
	union {
		char buf[CMSG_SPACE(8 * sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = { (void *)data, len };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };

	if (n) {
		struct cmsghdr *c;

		memset(&u, 0, sizeof(u));
		msg.msg_control = u.buf;
		msg.msg_controllen = CMSG_SPACE(n * sizeof(int));
		c = CMSG_FIRSTHDR(&msg);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(n * sizeof(int));
		for (unsigned i = 0; i < n; i++)
			memcpy(CMSG_DATA(c) + i * sizeof(int), &fd, sizeof(int));
	}
	assert_true(sendmsg(sock, &msg, 0) == (ssize_t)len);
}

static void header(uint8_t h[12], uint32_t len, uint32_t nfds)
{
	uint32_t v[3] = { VMIO_FD_MAGIC, len, nfds };

	memcpy(h, v, 12); /* the tests run little-endian */
}

/* One hostile exchange: what the sender writes, then the receiver must
 * fail saying why, with no fd left open. */
static void hostile(void (*send_fn)(int sock, int fd), const char *why_part)
{
	int sv[2], pfd[2], base, rc;
	struct vmio_fd_receiver rx;
	char why[256] = "";

	pair(sv);
	assert_int_equal(pipe(pfd), 0);
	base = open_fds();
	vmio_fd_receiver_init(&rx, sv[1], 1000, 4);
	send_fn(sv[0], pfd[0]);
	close(sv[0]);
	rc = run(NULL, &rx, why, sizeof(why));
	assert_int_equal(rc, -1);
	if (!strstr(why, why_part))
		fail_msg("failed with '%s', not '%s'", why, why_part);
	vmio_fd_receiver_fini(&rx);
	/* Less sv[0], closed above: every fd received is closed. */
	assert_int_equal(open_fds(), base - 1);
	close(sv[1]);
	close(pfd[0]);
	close(pfd[1]);
}

static void too_many(int sock, int fd)
{
	uint8_t h[12], c[4] = { 3, 0, 0, 0 };

	header(h, 10, 2);
	send_raw(sock, h, 12, -1, 0);
	send_raw(sock, c, 4, fd, 3);
}

static void fds_in_record(int sock, int fd)
{
	uint8_t h[12], c[4] = { 1, 0, 0, 0 }, r[10] = { 0 };

	header(h, 10, 1);
	send_raw(sock, h, 12, -1, 0);
	send_raw(sock, c, 4, fd, 1);
	send_raw(sock, r, 10, fd, 2);
}

static void count_lies(int sock, int fd)
{
	uint8_t h[12], c[4] = { 1, 0, 0, 0 };

	header(h, 10, 4);
	send_raw(sock, h, 12, -1, 0);
	send_raw(sock, c, 4, fd, 2);
}

static void announces_too_much(int sock, int fd)
{
	uint8_t h[12];

	(void)fd;
	header(h, 1u << 30, 1);
	send_raw(sock, h, 12, -1, 0);
}

static void record_too_long(int sock, int fd)
{
	uint8_t h[12], c[4] = { 2, 0, 0, 0 }, r[20] = { 0 };

	header(h, 10, 2);
	send_raw(sock, h, 12, -1, 0);
	send_raw(sock, c, 4, fd, 2);
	send_raw(sock, r, 20, -1, 0);
}

static void ends_early(int sock, int fd)
{
	uint8_t h[12], c[4] = { 2, 0, 0, 0 };

	header(h, 10, 4);
	send_raw(sock, h, 12, -1, 0);
	send_raw(sock, c, 4, fd, 2);
}

static void fds_with_header(int sock, int fd)
{
	uint8_t h[12];

	header(h, 10, 1);
	send_raw(sock, h, 12, fd, 1);
}

static void test_hostile_senders(void **state)
{
	(void)state;
	hostile(too_many, "more fds arrived than announced");
	hostile(fds_in_record, "fds arrived where none were due");
	hostile(count_lies, "count does not match");
	hostile(announces_too_much, "at most 1000 and 4");
	hostile(record_too_long, "larger than its place");
	hostile(ends_early, "ended early (0 of 10 bytes, 2 of 4 fds)");
	hostile(fds_with_header, "where none were due");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_record_and_many_fds),
		cmocka_unit_test(test_hostile_senders),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
