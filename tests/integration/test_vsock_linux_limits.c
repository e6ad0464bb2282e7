/* `vmio vsock` against a guest driver that keeps the limits of a Linux
 * 6.12 guest (frontend/vsock_guest_limits.h): the in-tree driver refuses
 * an RW one packet past what Linux queues and resets the connection, as
 * 6.12.94 does, and keeps what it sends within its own 256 KiB buffer
 * whatever credit the device gives, as 6.12.69 does. The cases are the
 * ones a real guest failed (issue 21):
 *
 *   - a host program trickles 300-byte writes (2000, 0.2 ms apart) to a
 *     guest connection whose application reads nothing yet: every byte
 *     must arrive, in order, without a reset; the same with 2000
 *     seqpacket messages of 300 bytes, each its own message;
 *   - a guest-to-host stream of 64 MiB through `--tx-buffer-size` 1 MiB
 *     and 512 KiB: it must not stall when the guest never has more than
 *     its own buffer in flight;
 *
 * and, between two sibling guests, where the packets are the sending
 * guest's own, the refusal itself: RST to the sender, ENOBUFS and then
 * the queued bytes to the reader.
 *
 * Run with VG_RX_PKT_OVERHEAD=0 VG_TX_CAP=0 (the _limits_off variant)
 * the driver counts bytes only and sends all the credit allows: the same
 * cases then show what the limits, not the scenario, catch.
 *
 * The host sides run in threads that only record what happened (cmocka's
 * assertions are not thread-safe); every wait is bounded, and a stall
 * fails the case at once with what each side saw. */
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
#include <time.h>
#include <unistd.h>

#include "devices/vsock/hybrid.h"
#include "frontend/vsock_guest.h"
#include "harness.h"

#define WAIT HARNESS_WAIT_MS

/* The trickle of issue 21. */
#define TRICKLE_WRITES 2000u
#define TRICKLE_SIZE 300u
#define TRICKLE_GAP_NS 200000L
/* The guest application holds off reading while the host writes, at most
 * this long (the guest read after 4 s), and no longer than the
 * host stays blocked: QUIET_MS without a write or a byte arriving means
 * the guest holds all it may be sent. */
#define HOLD_MS 4000
#define QUIET_MS 1000

/* The guest-to-host bulk run, and how long without credit is a stall. */
#define BULK (64ull << 20)
#define CHUNK 65536u
#define STALL_MS 5000
#define BULK_MS 120000

struct vm {
	const char *extra[4]; /* more vmio options, NULL-terminated */
	char sock[256], uds[256], ctl[256];
	pid_t pid;
	struct vg *g;
};

static unsigned vm_seq;

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int vm_setup(void **state)
{
	struct vm *vm = *state;
	const char *args[16] = { "vsock", "--guest-cid", "3", "--socket",
				 vm->sock, "--uds-path", vm->uds,
				 "--control", vm->ctl };
	unsigned n = 9;
	char err[256];

	vm_seq++;
	snprintf(vm->sock, sizeof(vm->sock), "%s/lim-vhost%u.sock",
		 harness_tmpdir(), vm_seq);
	snprintf(vm->uds, sizeof(vm->uds), "%s/lim%u.vsock", harness_tmpdir(),
		 vm_seq);
	snprintf(vm->ctl, sizeof(vm->ctl), "%s/lim%u.ctl", harness_tmpdir(),
		 vm_seq);
	for (unsigned i = 0; vm->extra[i]; i++)
		args[n++] = vm->extra[i];
	args[n] = NULL;
	vm->pid = harness_spawn(args);
	assert_true(vm->pid > 0);
	if (!harness_wait_socket(vm->sock, WAIT))
		fail_msg("vmio vsock did not listen on %s", vm->sock);
	/* The driver's defaults: Linux's 256 KiB buffer and 4 KiB rx
	 * buffers, and its limits unless the environment turns them off. */
	vm->g = vg_open(vm->sock, WAIT, NULL, err, sizeof(err));
	if (!vm->g)
		fail_msg("%s", err);
	print_message("# driver limits: packet overhead %u (0: bytes only), "
		      "tx cap %s\n", vm->g->o.rx_pkt_overhead,
		      vm->g->o.tx_cap ? "on" : "off");
	return 0;
}

static int vm_teardown(void **state)
{
	struct vm *vm = *state;
	int st;

	vg_free(vm->g);
	vm->g = NULL;
	st = harness_stop(vm->pid, 5000);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
	return 0;
}

static long long device_num(struct vm *vm, const char *key)
{
	char path[128];

	snprintf(path, sizeof(path), "vms.0.totals.%s", key);
	return harness_control_num(vm->ctl, path);
}

/* ---- host side ---- */

static int unix_connect(const char *path, int type)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, type | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -1;
	if (snprintf(a.sun_path, sizeof(a.sun_path), "%s", path) >=
		    (int)sizeof(a.sun_path) ||
	    connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* A trickling host program, host to guest: CONNECT through the hybrid
 * socket (the stream one, or the seqpacket one and a CONNECT message),
 * then TRICKLE_WRITES writes of TRICKLE_SIZE bytes of the pattern, one
 * every TRICKLE_GAP_NS (each a message of its own on seqpacket), and a
 * shutdown of its sending side. Writes block, as a plain program's do,
 * on a full socket; stop ends the wait early. */
struct trickle {
	struct vm *vm;
	uint32_t port;
	bool seqpacket;
	int fd;
	unsigned writes; /* __atomic: done so far */
	bool done;       /* __atomic: finished, all or not */
	bool stop;       /* __atomic: the test gives up */
	int err;         /* errno of the write that failed */
	char error[160];
	pthread_t thread;
};

static bool trickle_connect(struct trickle *t)
{
	char path[300], line[64];
	int n;

	snprintf(path, sizeof(path), "%s%s", t->vm->uds,
		 t->seqpacket ? VSOCK_HYBRID_SEQPACKET_SUFFIX : "");
	t->fd = unix_connect(path, t->seqpacket ? SOCK_SEQPACKET
						: SOCK_STREAM);
	if (t->fd < 0) {
		snprintf(t->error, sizeof(t->error), "connect to the hybrid "
			 "socket: %s", strerror(errno));
		return false;
	}
	n = snprintf(line, sizeof(line), "CONNECT %u\n", t->port);
	if (send(t->fd, line, (size_t)n, MSG_NOSIGNAL) != n) {
		snprintf(t->error, sizeof(t->error), "CONNECT: %s",
			 strerror(errno));
		return false;
	}
	/* "OK <port>\n": one message on seqpacket, read byte by byte on a
	 * stream so that nothing after it is taken. */
	for (size_t k = 0; k < sizeof(line) - 1;) {
		ssize_t r;

		if (!harness_wait_fd(t->fd, POLLIN, WAIT))
			break;
		r = recv(t->fd, line + k, t->seqpacket ? sizeof(line) - 1 : 1,
			 0);
		if (r <= 0)
			break;
		k += (size_t)r;
		if (line[k - 1] == '\n') {
			line[k] = '\0';
			if (strncmp(line, "OK ", 3) == 0)
				return true;
			break;
		}
	}
	snprintf(t->error, sizeof(t->error), "no OK for CONNECT %u", t->port);
	return false;
}

/* Sends all of buf, waiting for room in slices so that stop is seen.
 * Returns 0 or an errno. */
static int send_blocking(struct trickle *t, const uint8_t *buf, size_t len)
{
	int64_t end = now_ms() + WAIT;

	while (len) {
		ssize_t r;

		if (__atomic_load_n(&t->stop, __ATOMIC_ACQUIRE))
			return ECANCELED;
		if (!harness_wait_fd(t->fd, POLLOUT, 100)) {
			if (now_ms() >= end)
				return ETIMEDOUT;
			continue;
		}
		r = send(t->fd, buf, len, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (r < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (r < 0)
			return errno;
		/* A stream may take part; a message goes whole. */
		buf += r;
		len -= (size_t)r;
		end = now_ms() + WAIT;
	}
	return 0;
}

static void *trickle_main(void *arg)
{
	struct trickle *t = arg;
	uint8_t buf[TRICKLE_SIZE];
	struct timespec next = { 0 }, now;

	if (!trickle_connect(t))
		goto out;
	for (unsigned i = 0; i < TRICKLE_WRITES; i++) {
		/* The gap counts from the last write, not from the start: a
		 * write that blocked is not made up for by a burst. Absolute,
		 * so the write itself does not stretch it. */
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (i == 0 || now.tv_sec > next.tv_sec ||
		    (now.tv_sec == next.tv_sec && now.tv_nsec > next.tv_nsec))
			next = now;
		next.tv_nsec += TRICKLE_GAP_NS;
		if (next.tv_nsec >= 1000000000L) {
			next.tv_sec++;
			next.tv_nsec -= 1000000000L;
		}
		clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
		vg_pattern_fill(t->port, (uint64_t)i * TRICKLE_SIZE, buf,
				sizeof(buf));
		t->err = send_blocking(t, buf, sizeof(buf));
		if (t->err)
			break;
		__atomic_store_n(&t->writes, i + 1, __ATOMIC_RELEASE);
	}
	if (!t->err)
		shutdown(t->fd, SHUT_WR);
out:
	__atomic_store_n(&t->done, true, __ATOMIC_RELEASE);
	return NULL;
}

static void trickle_start(struct trickle *t, struct vm *vm, uint32_t port,
			  bool seqpacket)
{
	*t = (struct trickle){ .vm = vm, .port = port, .seqpacket = seqpacket,
			       .fd = -1 };
	assert_int_equal(pthread_create(&t->thread, NULL, trickle_main, t), 0);
}

/* Joins the writer, after it had up to ms to finish by itself: what the
 * host program sees of a connection that broke (EPIPE) is part of the
 * report. */
static void trickle_join(struct vm *vm, struct trickle *t, int ms)
{
	for (int64_t end = now_ms() + ms;
	     !__atomic_load_n(&t->done, __ATOMIC_ACQUIRE) && now_ms() < end;)
		vg_poll(vm->g, 20);
	__atomic_store_n(&t->stop, true, __ATOMIC_RELEASE);
	pthread_join(t->thread, NULL);
	if (t->fd >= 0)
		close(t->fd);
	t->fd = -1;
}

/* The guest application reads nothing while the host writes: until the
 * writer is done, or has been blocked QUIET_MS with nothing arriving, or
 * the connection broke; HOLD_MS at most. */
static void hold_unread(struct vm *vm, struct vg_sock *s, struct trickle *t)
{
	int64_t start = now_ms(), moved = start;
	unsigned writes = 0;
	uint32_t unread = 0;

	for (;;) {
		struct vg_sock_info i;
		unsigned w = __atomic_load_n(&t->writes, __ATOMIC_ACQUIRE);
		int64_t now;

		vg_poll(vm->g, 20);
		vg_sock_info(s, &i);
		now = now_ms();
		if (__atomic_load_n(&t->done, __ATOMIC_ACQUIRE) || i.reset ||
		    now - start >= HOLD_MS)
			return;
		if (w != writes || i.unread != unread) {
			writes = w;
			unread = i.unread;
			moved = now;
		} else if (now - moved >= QUIET_MS) {
			return;
		}
	}
}

/* Why a trickle failed, with what each side saw. Joins the writer. */
static void trickle_fail(struct vm *vm, struct trickle *t, const char *what,
			 uint64_t got, ssize_t r)
{
	struct vg *g = vm->g;
	char guest[96];

	trickle_join(vm, t, 2000);
	if (r < 0)
		snprintf(guest, sizeof(guest), "guest read failed with %s",
			 strerror((int)-r));
	else
		snprintf(guest, sizeof(guest), "%s", what);
	fail_msg("%s after %" PRIu64 " of %u bytes. Driver: %s; refused %"
		 PRIu64 " packets for the count and %" PRIu64 " for the "
		 "credit, %" PRIu64 " resets, at most %u packets queued. "
		 "Device: %lld packets and %lld bytes to the guest, %lld RSTs "
		 "from it. Host: %u of %u writes%s%s%s",
		 guest, got, TRICKLE_WRITES * TRICKLE_SIZE,
		 g->refusal[0] ? g->refusal : "no refusal", g->rx_refused_pkts,
		 g->rx_refused_bytes, g->rx_resets, g->rx_queue_peak,
		 device_num(vm, "packets_to_guest"),
		 device_num(vm, "bytes_to_guest"),
		 device_num(vm, "rsts_received"),
		 __atomic_load_n(&t->writes, __ATOMIC_ACQUIRE), TRICKLE_WRITES,
		 t->err ? ", then " : "", t->err ? strerror(t->err) : "",
		 t->error[0] ? t->error : "");
}

static void trickle_end(struct vm *vm, struct trickle *t, const char *kind)
{
	struct vg *g = vm->g;

	trickle_join(vm, t, WAIT);
	if (t->error[0] || t->err)
		fail_msg("%s trickle: host: %s %s after %u writes", kind,
			 t->error, t->err ? strerror(t->err) : "", t->writes);
	assert_int_equal(t->writes, TRICKLE_WRITES);
	print_message("# %s trickle: %u bytes in %lld packets to the guest, "
		      "at most %u queued (%" PRIu64 " copied into the one "
		      "before)\n", kind, TRICKLE_WRITES * TRICKLE_SIZE,
		      device_num(vm, "packets_to_guest"), g->rx_queue_peak,
		      g->rx_coalesced);
	assert_int_equal(g->rx_refused_pkts + g->rx_refused_bytes, 0);
	assert_int_equal(g->rx_resets, 0);
	if (g->violations)
		fail_msg("the device broke the protocol %" PRIu64
			 " times; last: %s", g->violations, g->violation);
}

/* ---- cases ---- */

static void test_trickle_stream(void **state)
{
	struct vm *vm = *state;
	static struct trickle t; /* outlives a failed assertion */
	static uint8_t buf[CHUNK];
	const uint32_t port = 5100;
	struct vg_sock *s;
	uint64_t got = 0;
	int err = 0;

	assert_int_equal(vg_listen(vm->g, port), 0);
	trickle_start(&t, vm, port, false);
	s = vg_accept(vm->g, port, false, WAIT, &err);
	if (!s) {
		trickle_join(vm, &t, 0);
		fail_msg("accept: %s (host: %s)", strerror(-err), t.error);
	}
	hold_unread(vm, s, &t);
	for (;;) {
		ssize_t r = vg_read(s, buf, sizeof(buf), WAIT);
		size_t i;

		if (r == 0)
			break;
		if (r < 0)
			trickle_fail(vm, &t, NULL, got, r);
		i = vg_pattern_check(port, got, buf, (size_t)r);
		if (i != (size_t)r)
			trickle_fail(vm, &t, "wrong byte", got + i, 0);
		got += (uint64_t)r;
	}
	if (got != TRICKLE_WRITES * TRICKLE_SIZE)
		trickle_fail(vm, &t, "end of stream", got, 0);
	trickle_end(vm, &t, "stream");
	vg_close(s);
}

static void test_trickle_seqpacket(void **state)
{
	struct vm *vm = *state;
	static struct trickle t; /* outlives a failed assertion */
	uint8_t buf[4096];
	const uint32_t port = 5101;
	struct vg_sock *s;
	uint64_t got = 0;
	unsigned flags;
	ssize_t r;
	int err = 0;

	assert_int_equal(vg_listen(vm->g, port), 0);
	trickle_start(&t, vm, port, true);
	s = vg_accept(vm->g, port, false, WAIT, &err);
	if (!s) {
		trickle_join(vm, &t, 0);
		fail_msg("accept: %s (host: %s)", strerror(-err), t.error);
	}
	hold_unread(vm, s, &t);
	for (unsigned i = 0; i < TRICKLE_WRITES; i++) {
		r = vg_recv_msg(s, buf, sizeof(buf), &flags, WAIT);
		if (r < 0)
			trickle_fail(vm, &t, NULL, got, r);
		if (r != TRICKLE_SIZE) {
			char what[64];

			snprintf(what, sizeof(what),
				 "message %u came as %zd bytes", i, r);
			trickle_fail(vm, &t, what, got, 0);
		}
		if (vg_pattern_check(port, got, buf, TRICKLE_SIZE) !=
		    TRICKLE_SIZE)
			trickle_fail(vm, &t, "wrong byte", got, 0);
		got += TRICKLE_SIZE;
	}
	r = vg_recv_msg(s, buf, sizeof(buf), &flags, WAIT);
	if (r != 0)
		trickle_fail(vm, &t, "no end of stream after the messages",
			     got, r);
	trickle_end(vm, &t, "seqpacket");
	vg_close(s);
}

/* A host reader of a guest-to-host stream: accepts at <uds>_<port>,
 * reads to the end checking the pattern. */
struct sink {
	int lfd, fd;
	uint32_t port;
	uint64_t got;     /* __atomic */
	bool done, stop;  /* __atomic: it finished; the test gives up */
	bool eof;         /* read after done */
	char error[160];
	pthread_t thread;
};

static void *sink_main(void *arg)
{
	static __thread uint8_t buf[CHUNK];
	struct sink *k = arg;
	int64_t quiet = now_ms() + WAIT;

	while (!__atomic_load_n(&k->stop, __ATOMIC_ACQUIRE)) {
		ssize_t r;

		if (now_ms() >= quiet) {
			snprintf(k->error, sizeof(k->error),
				 "nothing for %d ms", WAIT);
			break;
		}
		if (k->fd < 0) {
			if (harness_wait_fd(k->lfd, POLLIN, 100))
				k->fd = accept4(k->lfd, NULL, NULL,
						SOCK_CLOEXEC);
			continue;
		}
		if (!harness_wait_fd(k->fd, POLLIN, 100))
			continue;
		r = read(k->fd, buf, sizeof(buf));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			k->eof = r == 0;
			if (r < 0)
				snprintf(k->error, sizeof(k->error), "read: %s",
					 strerror(errno));
			break;
		}
		if (vg_pattern_check(k->port, k->got, buf, (size_t)r) !=
		    (size_t)r) {
			snprintf(k->error, sizeof(k->error),
				 "wrong byte after %" PRIu64, k->got);
			break;
		}
		__atomic_add_fetch(&k->got, (uint64_t)r, __ATOMIC_RELEASE);
		quiet = now_ms() + WAIT;
	}
	__atomic_store_n(&k->done, true, __ATOMIC_RELEASE);
	return NULL;
}

static void sink_join(struct sink *k)
{
	__atomic_store_n(&k->stop, true, __ATOMIC_RELEASE);
	pthread_join(k->thread, NULL);
	if (k->fd >= 0)
		close(k->fd);
	close(k->lfd);
	k->fd = k->lfd = -1;
}

/* 64 MiB guest to host through a device whose --tx-buffer-size is
 * larger than the guest's own buffer. */
static void bulk_to_host(struct vm *vm, uint32_t dev_buf)
{
	static struct sink k; /* outlives a failed assertion */
	static uint8_t buf[CHUNK];
	const uint32_t port = 1300;
	struct vg_sock_info info;
	struct vg_sock *s;
	char path[300];
	uint64_t off = 0;
	int64_t t0;
	int err = 0;

	snprintf(path, sizeof(path), "%s_%u", vm->uds, port);
	k = (struct sink){ .lfd = harness_unix_listen(path), .fd = -1, .port = port };
	assert_int_equal(pthread_create(&k.thread, NULL, sink_main, &k), 0);
	s = vg_connect(vm->g, port, WAIT, &err);
	if (!s) {
		sink_join(&k);
		fail_msg("connect to port %u: %s", port, strerror(-err));
	}
	vg_sock_info(s, &info);
	/* The device gives the credit it was told to. */
	assert_int_equal(info.peer_buf_alloc, dev_buf);
	t0 = now_ms();
	while (off < BULK) {
		ssize_t n;

		vg_pattern_fill(port, off, buf, sizeof(buf));
		n = vg_write(s, buf, sizeof(buf), STALL_MS);
		if (n > 0)
			off += (uint64_t)n;
		if (n == -ETIMEDOUT) {
			uint64_t host = __atomic_load_n(&k.got,
							__ATOMIC_ACQUIRE);

			vg_sock_info(s, &info);
			sink_join(&k);
			fail_msg("guest->host stalled after %" PRIu64 " bytes: "
				 "no credit from the device for %d ms. It "
				 "advertised buf_alloc %u; the guest keeps at "
				 "most its own %u in flight (%u credit left, "
				 "%" PRIu64 " waits on that cap); the host "
				 "read %" PRIu64 " bytes, the device counts "
				 "%lld from the guest",
				 off, STALL_MS, info.peer_buf_alloc,
				 vm->g->o.buf_alloc, info.peer_credit,
				 vm->g->tx_cap_waits, host,
				 device_num(vm, "bytes_from_guest"));
		}
		if (n <= 0) {
			sink_join(&k);
			fail_msg("write after %" PRIu64 " bytes: %s", off,
				 strerror((int)-n));
		}
		if (now_ms() - t0 > BULK_MS) {
			sink_join(&k);
			fail_msg("only %" PRIu64 " bytes in %d ms", off,
				 BULK_MS);
		}
	}
	/* The host reads to the end of stream, which follows the last
	 * byte; the sink gives up by itself after WAIT without a byte. */
	assert_int_equal(vg_shutdown(s, VSOCK_SHUTDOWN_SEND), 0);
	while (!__atomic_load_n(&k.done, __ATOMIC_ACQUIRE))
		vg_poll(vm->g, 50);
	sink_join(&k);
	print_message("# guest->host %" PRIu64 " MiB through a %u-byte device "
		      "buffer in %.2f s, %" PRIu64 " waits on the guest's own "
		      "buffer\n", off >> 20, dev_buf,
		      (double)(now_ms() - t0) / 1000, vm->g->tx_cap_waits);
	if (k.error[0])
		fail_msg("host side: %s", k.error);
	assert_int_equal(k.got, BULK);
	assert_true(k.eof);
	vg_close(s);
	if (vm->g->violations)
		fail_msg("the device broke the protocol %" PRIu64
			 " times; last: %s", vm->g->violations,
			 vm->g->violation);
}

static void test_g2h_tx_buffer_1m(void **state)
{
	bulk_to_host(*state, 1048576);
}

static void test_g2h_tx_buffer_512k(void **state)
{
	bulk_to_host(*state, 524288);
}

/* Two guests of one vmio, CIDs 3 and 4, in the default group. */
struct pair {
	char sock[2][256], uds[2][256];
	pid_t pid;
	struct vg *g[2];
};

static int pair_setup(void **state)
{
	static struct pair p;
	char vm[2][700], err[256];
	const char *args[6] = { "vsock" };
	struct vg_opts o;

	memset(&p, 0, sizeof(p));
	vm_seq++;
	for (unsigned i = 0; i < 2; i++) {
		snprintf(p.sock[i], sizeof(p.sock[i]), "%s/pair%u-vhost%u.sock",
			 harness_tmpdir(), vm_seq, i);
		snprintf(p.uds[i], sizeof(p.uds[i]), "%s/pair%u-vm%u.vsock",
			 harness_tmpdir(), vm_seq, i);
		snprintf(vm[i], sizeof(vm[i]),
			 "guest-cid=%u,socket=%s,uds-path=%s", 3 + i,
			 p.sock[i], p.uds[i]);
		args[1 + 2 * i] = "--vm";
		args[2 + 2 * i] = vm[i];
	}
	args[5] = NULL;
	p.pid = harness_spawn(args);
	assert_true(p.pid > 0);
	for (unsigned i = 0; i < 2; i++) {
		if (!harness_wait_socket(p.sock[i], WAIT))
			fail_msg("vmio did not listen on %s", p.sock[i]);
		vg_opts_init(&o);
		o.guest_cid = 3 + i;
		o.siblings = true;
		p.g[i] = vg_open(p.sock[i], WAIT, &o, err, sizeof(err));
		if (!p.g[i])
			fail_msg("VM %u: %s", i, err);
	}
	*state = &p;
	return 0;
}

static int pair_teardown(void **state)
{
	struct pair *p = *state;
	int st;

	for (unsigned i = 0; i < 2; i++) {
		vg_free(p->g[i]);
		p->g[i] = NULL;
	}
	st = harness_stop(p->pid, 5000);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
	return 0;
}

/* Between two guests the packets are the sender's own (vmio forwards
 * them as sent), so a 6.12 receiver resets a sender of 300-byte packets
 * whatever the device does: the driver's refusal, shown whole, where no
 * device change can take it away. The 456th packet is refused, the RST
 * reaches the sender through vmio, the reader gets ENOBUFS first and then
 * the 455 packets it had queued. Counting bytes only, the receiver takes
 * all the credit allows and the sender waits instead. */
static void test_sibling_trickle(void **state)
{
	struct pair *p = *state;
	struct vg *a = p->g[0], *b = p->g[1];
	const uint32_t port = 6000;
	uint8_t buf[CHUNK];
	struct vg_sock_info ia, ib;
	struct vg_sock *sa, *sb;
	unsigned sent = 0;
	uint64_t got = 0, written;
	ssize_t r = 0;
	int err = 0;

	assert_int_equal(vg_listen(b, port), 0);
	sa = vg_connect_cid_start(a, 4, port, &err);
	if (!sa)
		fail_msg("connect: %s", strerror(-err));
	sb = vg_accept(b, port, false, WAIT, &err);
	if (!sb)
		fail_msg("accept: %s", strerror(-err));
	assert_int_equal(vg_connect_wait(sa, WAIT), 0);
	for (; sent < TRICKLE_WRITES; sent++) {
		vg_pattern_fill(port, (uint64_t)sent * TRICKLE_SIZE, buf,
				TRICKLE_SIZE);
		/* Out of credit, the wait ends the trickle: B reads nothing. */
		r = vg_write(sa, buf, TRICKLE_SIZE, 1000);
		if (r != TRICKLE_SIZE)
			break;
		vg_poll(b, 0);
	}
	/* What is on its way lands (bytes only: all the sender wrote); a
	 * reset reaches the sender (packets counted). Waited for as such,
	 * not as a quiet spell: a loaded machine pauses vmio longer. */
	written = (uint64_t)sent * TRICKLE_SIZE + (r > 0 ? (uint64_t)r : 0);
	for (int64_t end = now_ms() + WAIT; now_ms() < end;) {
		struct vg *both[2] = { a, b };

		vg_sock_info(sa, &ia);
		vg_sock_info(sb, &ib);
		if (ia.reset ||
		    (!b->o.rx_pkt_overhead && ib.unread >= written))
			break;
		vg_poll_many(both, 2, 50);
	}
	vg_sock_info(sa, &ia);
	vg_sock_info(sb, &ib);
	print_message("# sibling trickle: %u writes, the receiver refused %"
		      PRIu64 " (%s), %u packets and %u bytes queued\n", sent,
		      b->rx_refused_pkts, b->refusal[0] ? b->refusal : "-",
		      ib.queued_pkts, ib.unread);
	if (!b->o.rx_pkt_overhead) {
		/* 6.1: bytes only; the credit stops the sender, with the
		 * receiver's buffer full to the byte. */
		assert_false(ia.reset || ib.reset);
		assert_int_equal(ia.peer_credit, 0);
		assert_int_equal(ib.unread, b->o.buf_alloc);
		assert_int_equal(b->rx_refused_pkts + b->rx_resets, 0);
		goto out;
	}
	assert_true(ib.refused);
	assert_int_equal(b->rx_refused_pkts, 1);
	assert_int_equal(b->rx_refused_bytes, 0);
	assert_int_equal(b->rx_resets, 1);
	assert_int_equal(ib.queued_pkts, 455);
	assert_int_equal(ib.unread, 455 * TRICKLE_SIZE);
	if (!ia.reset)
		fail_msg("the sender was not reset (%u writes, last %zd)", sent,
			 r);
	assert_int_equal(vg_write(sa, buf, 1, WAIT), -ECONNRESET);
	/* ENOBUFS first, once; then what was queued, in order; then the
	 * reset. */
	assert_int_equal(vg_read(sb, buf, sizeof(buf), WAIT), -ENOBUFS);
	for (;;) {
		r = vg_read(sb, buf, sizeof(buf), WAIT);
		if (r <= 0)
			break;
		assert_int_equal(vg_pattern_check(port, got, buf, (size_t)r),
				 (size_t)r);
		got += (uint64_t)r;
	}
	assert_int_equal(r, -ECONNRESET);
	assert_int_equal(got, 455 * TRICKLE_SIZE);
out:
	vg_close(sa);
	vg_close(sb);
	if (a->violations || b->violations)
		fail_msg("protocol violations: %s / %s", a->violation,
			 b->violation);
}

static struct vm vm_trickle, vm_trickle_seq,
	vm_g2h_1m = { .extra = { "--tx-buffer-size", "1048576" } },
	vm_g2h_512k = { .extra = { "--tx-buffer-size", "524288" } };

#define VM_CASE(f, vm)                                                     \
	cmocka_unit_test_prestate_setup_teardown(f, vm_setup, vm_teardown, \
						 &(vm))

int main(void)
{
	const struct CMUnitTest tests[] = {
		VM_CASE(test_trickle_stream, vm_trickle),
		VM_CASE(test_trickle_seqpacket, vm_trickle_seq),
		VM_CASE(test_g2h_tx_buffer_1m, vm_g2h_1m),
		VM_CASE(test_g2h_tx_buffer_512k, vm_g2h_512k),
		cmocka_unit_test_setup_teardown(test_sibling_trickle,
						pair_setup, pair_teardown),
	};

	/* A host socket the device closed must not kill us with SIGPIPE. */
	signal(SIGPIPE, SIG_IGN);
	harness_test_filter();
	return cmocka_run_group_tests(tests, NULL, harness_group_teardown);
}
