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

/* A message a hostile sender writes: the transfer's header (record
 * length a, fd count b), an fd message's count (a), or b bytes of
 * record; with nfds copies of an fd attached. */
enum kind { HDR, COUNT, BYTES, END };
struct msg {
	enum kind kind;
	uint32_t a, b;
	unsigned nfds;
};

static void send_script(int sock, int fd, const struct msg *m)
{
	for (; m->kind != END; m++) {
		uint32_t v[3] = { VMIO_FD_MAGIC, m->a, m->b };
		uint8_t zeros[64] = { 0 };
		int fds[8];
		const void *data = v;
		size_t len = sizeof(v);

		for (unsigned i = 0; i < m->nfds; i++)
			fds[i] = fd;
		if (m->kind == COUNT) {
			data = &m->a; /* the tests run little-endian */
			len = 4;
		} else if (m->kind == BYTES) {
			data = zeros;
			len = m->b;
		}
		assert_int_equal(vmio_fd_send_message(sock, data, len, fds,
						      m->nfds), 0);
	}
}

/* One hostile exchange: the receiver must fail saying why, with no fd
 * left open. */
static void hostile(const struct msg *script, const char *why_part)
{
	int sv[2], pfd[2], base, rc;
	struct vmio_fd_receiver rx;
	char why[256] = "";

	pair(sv);
	assert_int_equal(pipe(pfd), 0);
	base = open_fds();
	vmio_fd_receiver_init(&rx, sv[1], 1000, 4);
	send_script(sv[0], pfd[0], script);
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

static void test_hostile_senders(void **state)
{
	static const struct {
		struct msg script[4];
		const char *why;
	} cases[] = {
		{ { { HDR, 10, 2, 0 }, { COUNT, 3, 0, 3 }, { END, 0, 0, 0 } },
		  "more fds arrived than announced" },
		{ { { HDR, 10, 1, 0 }, { COUNT, 1, 0, 1 }, { BYTES, 0, 10, 2 },
		    { END, 0, 0, 0 } },
		  "fds arrived where none were due" },
		{ { { HDR, 10, 4, 0 }, { COUNT, 1, 0, 2 }, { END, 0, 0, 0 } },
		  "count does not match" },
		{ { { HDR, 1u << 30, 1, 0 }, { END, 0, 0, 0 } }, "at most 1000 and 4" },
		{ { { HDR, 10, 2, 0 }, { COUNT, 2, 0, 2 }, { BYTES, 0, 20, 0 },
		    { END, 0, 0, 0 } },
		  "larger than its place" },
		{ { { HDR, 10, 4, 0 }, { COUNT, 2, 0, 2 }, { END, 0, 0, 0 } },
		  "ended early (0 of 10 bytes, 2 of 4 fds)" },
		{ { { HDR, 10, 1, 1 }, { END, 0, 0, 0 } }, "where none were due" },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		hostile(cases[i].script, cases[i].why);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_record_and_many_fds),
		cmocka_unit_test(test_hostile_senders),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
