/* Seqpacket through `vmio vsock`, with the in-tree front end as the
 * guest's driver and AF_UNIX SOCK_SEQPACKET sockets as the host side:
 * every message from 1 byte up to the largest allowed crosses whole in
 * both directions (sizes around the packet and rx buffer sizes, several
 * messages queued behind a host that does not read), a larger one is
 * refused (by the driver with EMSGSIZE as Linux does, by the device with
 * an RST when a guest ignores that, and a too large host message resets
 * the connection with a log line instead of being split), the CONNECT
 * message of the seqpacket listener, and seqpacket refused when it was
 * not negotiated or the host service has the other type; and a bulk run
 * both ways at once, messages of every size behind credit stalls.
 *
 * The host sockets are driven from the test between calls into the
 * driver, except in the bulk run, where a host thread only records what
 * it saw (cmocka's assertions are not thread-safe); every wait is
 * bounded. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "devices/vsock/hybrid.h"
#include "frontend/frontend.h"
#include "frontend/vsock_guest.h"
#include "harness.h"

#define WAIT HARNESS_WAIT_MS
#define PORT 7100
/* The device's --tx-buffer-size and the driver's buf_alloc: both the
 * largest message either way. */
#define BUF (128u * 1024u)

struct seqvm {
	bool no_seqpacket;
	bool mergeable; /* the driver takes mergeable rx buffers */
	bool cut;       /* packets and rx buffers cut in pieces of 1000
			 * bytes, the rx header itself cut */
	char sock[256], uds[256];
	pid_t pid;
	struct vg *g;
};

static unsigned vm_seq;

static int seq_setup(void **state)
{
	struct seqvm *vm = *state;
	char buf_arg[16], err[256];
	const char *args[] = { "vsock", "--guest-cid", "3", "--socket",
			       vm->sock, "--uds-path", vm->uds,
			       "--tx-buffer-size", buf_arg, NULL };
	struct vg_opts o;

	vm_seq++;
	snprintf(vm->sock, sizeof(vm->sock), "%s/seq-vhost%u.sock",
		 harness_tmpdir(), vm_seq);
	snprintf(vm->uds, sizeof(vm->uds), "%s/seq%u.vsock", harness_tmpdir(),
		 vm_seq);
	snprintf(buf_arg, sizeof(buf_arg), "%u", BUF);
	harness_log_clear();
	vm->pid = harness_spawn(args);
	assert_true(vm->pid > 0);
	if (!harness_wait_socket(vm->sock, WAIT))
		fail_msg("vmio vsock did not listen on %s", vm->sock);
	vg_opts_init(&o);
	o.buf_alloc = BUF;
	o.seqpacket = !vm->no_seqpacket;
	o.mergeable = vm->mergeable;
	/* Messages of more than one packet from 4 KiB up. */
	o.tx_pkt_max = 4096;
	if (vm->cut) {
		o.queue_size = 1024;
		o.tx_slots = 15; /* 67 descriptors each, as sized for 64 KiB */
		o.tx_cut = (struct vg_cut){ .first = VSOCK_HDR_SIZE,
					    .piece = 1000 };
		o.rx_cut = (struct vg_cut){ .first = 20, .piece = 1000 };
	}
	vm->g = vg_open(vm->sock, WAIT, &o, err, sizeof(err));
	if (!vm->g)
		fail_msg("%s", err);
	return 0;
}

static int seq_teardown(void **state)
{
	struct seqvm *vm = *state;
	int st;

	vg_free(vm->g);
	vm->g = NULL;
	st = harness_stop(vm->pid, 5000);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
	return 0;
}

static void no_violations(const struct seqvm *vm)
{
	if (vm->g->violations)
		fail_msg("the device broke the protocol %" PRIu64
			 " times; last: %s", vm->g->violations,
			 vm->g->violation);
}

/* ---- host side ---- */

static int unix_socket(const char *path, int type, bool do_listen)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, type | SOCK_CLOEXEC, 0);
	int big = 1 << 20;

	assert_true(fd >= 0);
	/* Room for the largest message in one send. */
	setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
	if (do_listen) {
		unlink(path);
		assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
		assert_int_equal(listen(fd, 16), 0);
	} else if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		fail_msg("connect %s: %s", path, strerror(errno));
	}
	return fd;
}

static int seq_socket(const char *path, bool do_listen)
{
	return unix_socket(path, SOCK_SEQPACKET, do_listen);
}

/* A host service of this type for guest port `port`: <uds>_<port>. */
static int service(const struct seqvm *vm, uint32_t port, int type)
{
	char path[300];

	snprintf(path, sizeof(path), "%s_%u", vm->uds, port);
	return unix_socket(path, type, true);
}

static int seq_service(const struct seqvm *vm, uint32_t port)
{
	return service(vm, port, SOCK_SEQPACKET);
}

/* One host message, or -1 after ms (0: EOF, < 0 -errno); *trunc is set
 * when it did not fit in size. */
static ssize_t host_recv(int fd, void *buf, size_t size, int ms,
			 bool *trunc)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	struct iovec iov = { .iov_base = buf, .iov_len = size };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };
	ssize_t r;

	if (poll(&p, 1, ms) != 1)
		return -ETIMEDOUT;
	r = recvmsg(fd, &m, MSG_TRUNC | MSG_DONTWAIT);
	if (trunc)
		*trunc = m.msg_flags & MSG_TRUNC;
	return r < 0 ? -errno : r;
}

/* The host end of a host-initiated connection to guest port `port`:
 * connects to the seqpacket listener, sends the CONNECT message and has
 * the guest accept. */
static int host_connect(struct seqvm *vm, uint32_t port, struct vg_sock **s)
{
	char path[300], line[64], ok[64];
	int fd, err = 0, n;
	ssize_t r;
	bool trunc = false;

	snprintf(path, sizeof(path), "%s%s", vm->uds,
		 VSOCK_HYBRID_SEQPACKET_SUFFIX);
	fd = seq_socket(path, false);
	n = snprintf(line, sizeof(line), "CONNECT %u\n", port);
	assert_int_equal(send(fd, line, (size_t)n, 0), n);
	*s = vg_accept(vm->g, port, false, WAIT, &err);
	if (!*s)
		fail_msg("guest accept: %s", strerror(-err));
	/* The answer is one message: the line and nothing else. */
	r = host_recv(fd, ok, sizeof(ok) - 1, WAIT, &trunc);
	assert_true(r > 0);
	assert_false(trunc);
	ok[r] = '\0';
	assert_int_equal(strncmp(ok, "OK ", 3), 0);
	assert_int_equal(ok[r - 1], '\n');
	return fd;
}

/* After a message too large for one side: the guest's socket was reset,
 * the host's ended, the backend said why in its log, and nothing broke
 * the protocol. Closes both ends and frees the buffers. */
static void expect_refused(struct seqvm *vm, struct vg_sock *s, int fd,
			   const char *log_says, uint8_t *buf, uint8_t *got)
{
	struct vg_sock_info info;
	ssize_t r;

	vg_sock_info(s, &info);
	assert_true(info.reset);
	r = host_recv(fd, got, BUF + 16, WAIT, NULL);
	assert_true(r == 0 || r == -ECONNRESET);
	assert_true(harness_log_contains(log_says));
	no_violations(vm);
	vg_close(s);
	close(fd);
	free(buf);
	free(got);
}

/* Sizes around every edge: one byte, a 4 KiB packet and rx buffer (4052
 * payload bytes after the header), 64 KiB, and the limit. */
static const uint32_t sizes[] = { 1,     2,     43,    44,    4051,
				  4052,  4053,  4095,  4096,  4097,
				  8192,  12345, 65535, 65536, 65537,
				  99999, BUF - 1, BUF };
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

/* ---- guest -> host ---- */

static void test_guest_to_host_messages(void **state)
{
	struct seqvm *vm = *state;
	int lfd = seq_service(vm, PORT), fd, err = 0;
	uint8_t *buf = malloc(BUF + 16), *got = malloc(BUF + 16);
	struct vg_sock *s;
	struct vg_sock_info info;
	bool trunc;
	ssize_t r;

	assert_non_null(buf);
	assert_non_null(got);
	s = vg_connect_type(vm->g, VSOCK_TYPE_SEQPACKET, PORT, WAIT, &err);
	if (!s)
		fail_msg("connect: %s", strerror(-err));
	fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	assert_true(fd >= 0);
	vg_sock_info(s, &info);
	/* The device's buffer is the largest message, and it said so. */
	assert_int_equal(info.peer_buf_alloc, BUF);

	/* One at a time. */
	for (unsigned i = 0; i < NSIZES; i++) {
		vg_pattern_fill(i, 0, buf, sizes[i]);
		assert_int_equal(vg_send_msg(s, buf, sizes[i], 0, WAIT),
				 sizes[i]);
		r = host_recv(fd, got, BUF + 16, WAIT, &trunc);
		if (r != (ssize_t)sizes[i])
			fail_msg("message of %u bytes arrived as %zd", sizes[i],
				 r);
		assert_false(trunc);
		assert_int_equal(vg_pattern_check(i, 0, got, sizes[i]),
				 sizes[i]);
	}
	/* Many, behind a host that does not read: they wait in the host
	 * socket and the device's buffer, whole, and come out in order
	 * (about 98 KiB: within the credit, which is all a guest may send
	 * to a host that reads nothing). */
	for (unsigned i = 0; i < 2000; i++) {
		uint32_t n = 1 + i % 97;

		vg_pattern_fill(1000 + i, 0, buf, n);
		assert_int_equal(vg_send_msg(s, buf, n, i % 2 ? VG_MSG_EOR : 0,
					     WAIT),
				 n);
	}
	for (unsigned i = 0; i < 2000; i++) {
		uint32_t n = 1 + i % 97;

		r = host_recv(fd, got, BUF + 16, WAIT, &trunc);
		if (r != (ssize_t)n)
			fail_msg("queued message %u of %u bytes arrived as %zd",
				 i, n, r);
		assert_int_equal(vg_pattern_check(1000 + i, 0, got, n), n);
	}

	/* Larger than the limit: the driver refuses, as Linux does... */
	assert_int_equal(vg_send_msg(s, buf, BUF + 1, 0, WAIT), -EMSGSIZE);
	/* ...and a guest that sends it anyway overruns the credit: reset,
	 * and the host gets nothing of it, only the end. */
	r = vg_send_msg(s, buf, BUF + 1, VG_MSG_FORCE, 2000);
	for (int64_t k = 0; k < 100; k++) {
		vg_sock_info(s, &info);
		if (info.reset)
			break;
		vg_poll(vm->g, 100);
	}
	expect_refused(vm, s, fd, "guest message longer than", buf, got);
	close(lfd);
}

/* ---- host -> guest ---- */

static void test_host_to_guest_messages(void **state)
{
	struct seqvm *vm = *state;
	uint8_t *buf = malloc(BUF + 16), *got = malloc(BUF + 16);
	struct vg_sock *s;
	unsigned flags;
	ssize_t r;
	int fd;

	assert_non_null(buf);
	assert_non_null(got);
	assert_int_equal(vg_listen(vm->g, PORT), 0);
	fd = host_connect(vm, PORT, &s);

	for (unsigned i = 0; i < NSIZES; i++) {
		vg_pattern_fill(i, 0, buf, sizes[i]);
		assert_int_equal(send(fd, buf, sizes[i], 0), sizes[i]);
		r = vg_recv_msg(s, got, BUF + 16, &flags, WAIT);
		if (r != (ssize_t)sizes[i])
			fail_msg("message of %u bytes arrived as %zd", sizes[i],
				 r);
		assert_int_equal(flags, 0);
		assert_int_equal(vg_pattern_check(i, 0, got, sizes[i]),
				 sizes[i]);
	}
	/* Several queued before the guest reads. */
	for (unsigned i = 0; i < 200; i++) {
		uint32_t n = 1 + i * 37 % 5000;

		vg_pattern_fill(500 + i, 0, buf, n);
		assert_int_equal(send(fd, buf, n, 0), n);
	}
	for (unsigned i = 0; i < 200; i++) {
		uint32_t n = 1 + i * 37 % 5000;

		r = vg_recv_msg(s, got, BUF + 16, &flags, WAIT);
		if (r != (ssize_t)n)
			fail_msg("queued message %u of %u bytes arrived as %zd",
				 i, n, r);
		assert_int_equal(vg_pattern_check(500 + i, 0, got, n), n);
	}
	/* A message the guest cannot take whole: refused, never split. */
	assert_int_equal(send(fd, buf, BUF + 1, 0), BUF + 1);
	r = vg_recv_msg(s, got, BUF + 16, &flags, WAIT);
	assert_int_equal(r, -ECONNRESET);
	expect_refused(vm, s, fd, "larger than the", buf, got);
}

/* End of stream both ways: messages sent before a close all arrive. */
static void test_seqpacket_close(void **state)
{
	struct seqvm *vm = *state;
	int lfd = seq_service(vm, PORT), fd, err = 0;
	struct vg_sock *s;
	char got[64];
	ssize_t r;

	assert_int_equal(vg_listen(vm->g, PORT + 1), 0);
	/* Host closes after two messages. */
	fd = host_connect(vm, PORT + 1, &s);
	assert_int_equal(send(fd, "one", 3, 0), 3);
	assert_int_equal(send(fd, "two!", 4, 0), 4);
	close(fd);
	assert_int_equal(vg_recv_msg(s, got, sizeof(got), NULL, WAIT), 3);
	assert_int_equal(vg_recv_msg(s, got, 2, NULL, WAIT), 4);
	assert_int_equal(vg_recv_msg(s, got, sizeof(got), NULL, WAIT), 0);
	vg_close(s);

	/* Guest shuts down sending after a message. */
	s = vg_connect_type(vm->g, VSOCK_TYPE_SEQPACKET, PORT, WAIT, &err);
	assert_non_null(s);
	fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(vg_send_msg(s, "last", 4, 0, WAIT), 4);
	assert_int_equal(vg_shutdown(s, VSOCK_SHUTDOWN_SEND), 0);
	r = host_recv(fd, got, sizeof(got), WAIT, NULL);
	assert_int_equal(r, 4);
	assert_int_equal(host_recv(fd, got, sizeof(got), WAIT, NULL), 0);
	no_violations(vm);
	vg_close(s);
	close(fd);
	close(lfd);
}

/* The first message on the seqpacket listener must be exactly the line. */
static void test_seqpacket_connect_message(void **state)
{
	struct seqvm *vm = *state;
	static const char *const bad[] = { "CONNECT 7100", "CONNECT 7100\nx",
					   "CONNECT x\n", "HELLO\n" };
	char path[300], got[16];

	snprintf(path, sizeof(path), "%s%s", vm->uds,
		 VSOCK_HYBRID_SEQPACKET_SUFFIX);
	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int fd = seq_socket(path, false);

		assert_int_equal(send(fd, bad[i], strlen(bad[i]), 0),
				 (ssize_t)strlen(bad[i]));
		/* Closed at once, never answered. */
		assert_int_equal(host_recv(fd, got, sizeof(got), WAIT, NULL),
				 0);
		close(fd);
	}
	no_violations(vm);
}

/* Seqpacket to a stream service (and the reverse) is refused. */
static void test_seqpacket_type_mismatch(void **state)
{
	struct seqvm *vm = *state;
	int lfd = service(vm, PORT, SOCK_STREAM), err = 0;
	int sfd = seq_service(vm, PORT + 1);

	assert_null(vg_connect_type(vm->g, VSOCK_TYPE_SEQPACKET, PORT, WAIT,
				    &err));
	assert_int_equal(err, -ECONNREFUSED);
	assert_null(vg_connect(vm->g, PORT + 1, WAIT, &err));
	assert_int_equal(err, -ECONNREFUSED);
	no_violations(vm);
	close(lfd);
	close(sfd);
}

/* Without VIRTIO_VSOCK_F_SEQPACKET a seqpacket REQUEST is an RST. */
static void test_seqpacket_not_negotiated(void **state)
{
	struct seqvm *vm = *state;
	int lfd = seq_service(vm, PORT), err = 0;

	/* Offered, not acked. */
	assert_true(vm->g->fe->device_features &
		    (1ull << VIRTIO_VSOCK_F_SEQPACKET));
	assert_false(vm->g->fe->features & (1ull << VIRTIO_VSOCK_F_SEQPACKET));
	assert_null(vg_connect_type(vm->g, VSOCK_TYPE_SEQPACKET, PORT, WAIT,
				    &err));
	assert_int_equal(err, -ECONNREFUSED);
	no_violations(vm);
	close(lfd);
}

/* ---- both ways at once ---- */

#define BULK_MSGS 300

/* Message i of a bulk run: 1 to BUF bytes, small ones often. */
static uint32_t bulk_size(unsigned i)
{
	uint32_t h = i * 2654435761u;

	return i % 4 == 0 ? 1 + h % 64 : 1 + h % BUF;
}

struct bulk {
	int fd;
	unsigned done;
	char error[160];
};

/* Host side: receives BULK_MSGS messages and checks each, then sends as
 * many back (other sizes), so both directions stall on credit in turn. */
static void *bulk_host(void *arg)
{
	struct bulk *b = arg;
	uint8_t *buf = malloc(BUF + 16);
	bool trunc = false;

	for (unsigned i = 0; buf && i < BULK_MSGS; i++) {
		ssize_t r = host_recv(b->fd, buf, BUF + 16, WAIT, &trunc);

		if (r != (ssize_t)bulk_size(i) || trunc ||
		    vg_pattern_check(i, 0, buf, (size_t)r) != (size_t)r) {
			snprintf(b->error, sizeof(b->error),
				 "host: message %u of %u bytes came as %zd%s", i,
				 bulk_size(i), r, trunc ? " (truncated)" : "");
			goto out;
		}
		b->done++;
	}
	for (unsigned i = 0; buf && i < BULK_MSGS; i++) {
		uint32_t n = bulk_size(i + 7);

		vg_pattern_fill(9000 + i, 0, buf, n);
		if (send(b->fd, buf, n, 0) != (ssize_t)n) {
			snprintf(b->error, sizeof(b->error),
				 "host: send of message %u: %s", i,
				 strerror(errno));
			goto out;
		}
	}
out:
	free(buf);
	return NULL;
}

static void test_bulk_both_ways(void **state)
{
	struct seqvm *vm = *state;
	int lfd = seq_service(vm, PORT), err = 0;
	uint8_t *buf = malloc(BUF + 16);
	struct bulk b = { .fd = -1 };
	struct vg_sock *s;
	pthread_t t;
	ssize_t r;

	assert_non_null(buf);
	s = vg_connect_type(vm->g, VSOCK_TYPE_SEQPACKET, PORT, WAIT, &err);
	assert_non_null(s);
	b.fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	assert_true(b.fd >= 0);
	assert_int_equal(pthread_create(&t, NULL, bulk_host, &b), 0);
	for (unsigned i = 0; i < BULK_MSGS; i++) {
		uint32_t n = bulk_size(i);

		vg_pattern_fill(i, 0, buf, n);
		r = vg_send_msg(s, buf, n, 0, WAIT);
		if (r != (ssize_t)n)
			break;
	}
	for (unsigned i = 0; i < BULK_MSGS; i++) {
		uint32_t n = bulk_size(i + 7);

		r = vg_recv_msg(s, buf, BUF + 16, NULL, WAIT);
		if (r != (ssize_t)n ||
		    vg_pattern_check(9000 + i, 0, buf, n) != n) {
			pthread_join(t, NULL);
			fail_msg("guest: message %u of %u bytes came as %zd (%s)",
				 i, n, r, b.error);
		}
	}
	pthread_join(t, NULL);
	if (b.error[0])
		fail_msg("%s", b.error);
	assert_int_equal(b.done, BULK_MSGS);
	no_violations(vm);
	vg_close(s);
	close(b.fd);
	close(lfd);
	free(buf);
}

static struct seqvm vm_g2h, vm_h2g, vm_close, vm_line, vm_mismatch,
	vm_bulk, vm_nofeat = { .no_seqpacket = true },
	/* Messages over packets that span rx buffers: EOM and EOR stay on
	 * the last packet of each message. */
	vm_mrg_h2g = { .mergeable = true }, vm_mrg_bulk = { .mergeable = true },
	vm_mrg_close = { .mergeable = true },
	/* Messages over packets cut into many descriptors. */
	vm_cut_g2h = { .cut = true }, vm_cut_bulk = { .cut = true };

#define SEQ_CASE(f, vm)                                                    \
	cmocka_unit_test_prestate_setup_teardown(f, seq_setup, seq_teardown, \
						 &(vm))

int main(void)
{
	const struct CMUnitTest tests[] = {
		SEQ_CASE(test_guest_to_host_messages, vm_g2h),
		SEQ_CASE(test_host_to_guest_messages, vm_h2g),
		SEQ_CASE(test_seqpacket_close, vm_close),
		SEQ_CASE(test_seqpacket_connect_message, vm_line),
		SEQ_CASE(test_seqpacket_type_mismatch, vm_mismatch),
		SEQ_CASE(test_bulk_both_ways, vm_bulk),
		SEQ_CASE(test_seqpacket_not_negotiated, vm_nofeat),
		SEQ_CASE(test_host_to_guest_messages, vm_mrg_h2g),
		SEQ_CASE(test_bulk_both_ways, vm_mrg_bulk),
		SEQ_CASE(test_seqpacket_close, vm_mrg_close),
		SEQ_CASE(test_guest_to_host_messages, vm_cut_g2h),
		SEQ_CASE(test_bulk_both_ways, vm_cut_bulk),
	};

	signal(SIGPIPE, SIG_IGN);
	if (getenv("VSOCK_TEST"))
		cmocka_set_test_filter(getenv("VSOCK_TEST"));
	return cmocka_run_group_tests(tests, NULL, harness_group_teardown);
}
