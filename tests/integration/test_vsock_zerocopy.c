/* Guest-to-host data by reference (devices/vsock/tx_splice.h): `vmio
 * vsock` in another process, the in-tree front end as the guest with
 * tx_scribble on (every tx buffer is overwritten the moment it comes back
 * used), host readers in threads of this process:
 *   - the host reads exactly what was sent, byte for byte, though it
 *     reads slowly and in pieces smaller than a packet: a chain given
 *     back before its bytes were read would show as 0xa5 bytes
 *   - a host reader that stalls holds no more tx chains than --tx-hold
 *     allows one connection, and another connection on the same tx ring
 *     carries its data meanwhile
 *   - --tx-copy (the copy path) carries the same, and says so (-v)
 * Each checks from the device's counters (-vv, at the guest's reset)
 * which path carried the bytes.
 *
 * cmocka's assertions are not thread-safe: host threads only record. */
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

#include "frontend/vsock_guest.h"
#include "harness.h"

#define WAIT HARNESS_WAIT_MS
#define CHUNK 65536

struct vm {
	const char *extra[8];
	char sock[256], uds[256];
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

static void vm_start(struct vm *vm, const struct vg_opts *o)
{
	const char *args[24] = { "vsock", "--guest-cid", "3", "--socket",
				 vm->sock, "--uds-path", vm->uds, "-v", "-v" };
	unsigned n = 9;
	char err[256];

	vm_seq++;
	snprintf(vm->sock, sizeof(vm->sock), "%s/zc%u.sock", harness_tmpdir(),
		 vm_seq);
	snprintf(vm->uds, sizeof(vm->uds), "%s/zc%u.vsock", harness_tmpdir(),
		 vm_seq);
	for (unsigned i = 0; vm->extra[i]; i++)
		args[n++] = vm->extra[i];
	args[n] = NULL;
	harness_log_clear();
	vm->pid = harness_spawn(args);
	assert_true(vm->pid > 0);
	if (!harness_wait_socket(vm->sock, WAIT))
		fail_msg("vmio vsock did not listen on %s", vm->sock);
	vm->g = vg_open(vm->sock, WAIT, o, err, sizeof(err));
	if (!vm->g)
		fail_msg("%s", err);
}

/* The counter `name` (a "NAME N" in the stats line the device logs when
 * the guest goes), after the guest went. */
static uint64_t stat_after_reset(const char *name)
{
	char needle[64], line[1024];
	int64_t end;
	FILE *f;
	uint64_t v = UINT64_MAX;

	snprintf(needle, sizeof(needle), "%s ", name);
	for (end = now_ms() + WAIT; now_ms() < end;
	     usleep(10000))
		if (harness_log_contains("used-ring flushes"))
			break;
	f = fopen(harness_path("vmio.log"), "r");
	if (!f)
		return v;
	while (fgets(line, sizeof(line), f)) {
		const char *p = strstr(line, "used-ring flushes");

		if (p && (p = strstr(line, needle)))
			v = strtoull(p + strlen(needle), NULL, 10);
	}
	fclose(f);
	return v;
}

static void vm_stop(struct vm *vm)
{
	int st;

	if (vm->g && vm->g->violations)
		fail_msg("the device broke the protocol %" PRIu64
			 " times; last: %s", vm->g->violations,
			 vm->g->violation);
	vg_free(vm->g);
	vm->g = NULL;
	st = harness_stop(vm->pid, 5000);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
}

static int unix_listen(const char *path)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	assert_true(strlen(path) < sizeof(a.sun_path));
	memcpy(a.sun_path, path, strlen(path) + 1);
	unlink(path);
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(fd, 16), 0);
	return fd;
}

static bool readable(int fd, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	return poll(&p, 1, ms) == 1;
}

/* A host reader at <uds>_<port>: accepts one connection, waits until
 * released (if stall), then reads to EOF in reads of `piece` bytes,
 * checking the pattern of seed port. */
struct reader {
	uint32_t port;
	size_t piece;
	bool stall;
	bool release; /* __atomic */
	bool accepted; /* __atomic */
	int lfd;
	uint64_t got;
	bool eof;
	char error[160];
	pthread_t thread;
};

static void *reader_main(void *arg)
{
	struct reader *r = arg;
	static __thread uint8_t buf[CHUNK];
	int fd;

	if (!readable(r->lfd, WAIT)) {
		snprintf(r->error, sizeof(r->error), "no connection");
		return NULL;
	}
	fd = accept4(r->lfd, NULL, NULL, SOCK_CLOEXEC);
	if (fd < 0) {
		snprintf(r->error, sizeof(r->error), "accept: %s",
			 strerror(errno));
		return NULL;
	}
	__atomic_store_n(&r->accepted, true, __ATOMIC_RELEASE);
	if (r->stall) {
		int64_t end = now_ms() + 60000;

		while (!__atomic_load_n(&r->release, __ATOMIC_ACQUIRE) &&
		       now_ms() < end)
			usleep(5000);
	}
	for (unsigned reads = 0;; reads++) {
		ssize_t n;
		size_t i;

		if (!readable(fd, WAIT)) {
			snprintf(r->error, sizeof(r->error),
				 "read stalled after %" PRIu64 " bytes",
				 r->got);
			break;
		}
		n = read(fd, buf, r->piece);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			r->eof = n == 0;
			if (n < 0)
				snprintf(r->error, sizeof(r->error),
					 "read: %s", strerror(errno));
			break;
		}
		i = vg_pattern_check(r->port, r->got, buf, (size_t)n);
		if (i != (size_t)n) {
			snprintf(r->error, sizeof(r->error),
				 "wrong byte 0x%02x at offset %" PRIu64,
				 buf[i], r->got + i);
			break;
		}
		r->got += (uint64_t)n;
		/* Slow now and then, so the guest runs ahead of it. */
		if (reads % 64 == 63)
			usleep(200);
	}
	close(fd);
	return NULL;
}

static void reader_start(struct reader *r, struct vm *vm, uint32_t port,
			 size_t piece, bool stall)
{
	char path[300];

	memset(r, 0, sizeof(*r));
	r->port = port;
	r->piece = piece;
	r->stall = stall;
	snprintf(path, sizeof(path), "%s_%u", vm->uds, port);
	r->lfd = unix_listen(path);
	assert_int_equal(pthread_create(&r->thread, NULL, reader_main, r), 0);
}

static void reader_join(struct reader *r)
{
	pthread_join(r->thread, NULL);
	close(r->lfd);
	if (r->error[0])
		fail_msg("host reader of port %u: %s", r->port, r->error);
	assert_true(r->eof);
}

/* Writes len bytes of the pattern of port s was connected to, from off. */
static void guest_send(struct vg_sock *s, uint32_t port, uint64_t off,
		       uint64_t len)
{
	static uint8_t buf[CHUNK];

	while (len) {
		size_t k = len < sizeof(buf) ? (size_t)len : sizeof(buf);
		ssize_t n;

		vg_pattern_fill(port, off, buf, k);
		n = vg_write(s, buf, k, WAIT);
		if (n != (ssize_t)k)
			fail_msg("guest write at %" PRIu64 ": %zd", off, n);
		off += k;
		len -= k;
	}
}

static struct vg_opts scribble_opts(void)
{
	struct vg_opts o;

	vg_opts_init(&o);
	o.tx_scribble = true;
	return o;
}

/* 64 MiB to a host that reads 1000 bytes at a time (pieces of an skb:
 * its memory is freed only once read through) and pauses. */
static void one_transfer(struct vm *vm, uint32_t port)
{
	static struct reader r;
	struct vg_sock *s;
	int err = 0;

	reader_start(&r, vm, port, 1000, false);
	s = vg_connect(vm->g, port, WAIT, &err);
	if (!s)
		fail_msg("connect: %s", strerror(-err));
	guest_send(s, port, 0, 64ull << 20);
	assert_int_equal(vg_shutdown(s, VSOCK_SHUTDOWN_SEND), 0);
	reader_join(&r);
	assert_int_equal(r.got, 64ull << 20);
	vg_close(s);
}

static void test_spliced_bytes_survive_reuse(void **state)
{
	struct vm vm = { 0 };
	struct vg_opts o = scribble_opts();

	(void)state;
	vm_start(&vm, &o);
	if (!harness_log_contains("guest-to-host data: spliced"))
		fail_msg("vmio does not splice here (kernel before 6.5?)");
	one_transfer(&vm, 5100);
	vm_stop(&vm);
	/* By reference, but for what a full socket did not take (copied
	 * into the connection's buffer, then sent from there). */
	{
		uint64_t sp = stat_after_reset("tx spliced");

		uint64_t cp = stat_after_reset("copied");

		if (!sp || sp == UINT64_MAX || sp + cp != (64ull << 20))
			fail_msg("%" PRIu64 " bytes spliced, %" PRIu64
				 " copied, of 64 MiB", sp, cp);
	}
}

static void test_copy_path(void **state)
{
	struct vm vm = { .extra = { "--tx-copy" } };
	struct vg_opts o = scribble_opts();

	(void)state;
	vm_start(&vm, &o);
	assert_true(harness_log_contains("guest-to-host data: copied "
					 "(--tx-copy)"));
	one_transfer(&vm, 5101);
	vm_stop(&vm);
	assert_int_equal(stat_after_reset("tx spliced"), 0);
	assert_int_equal(stat_after_reset("copied"), 64ull << 20);
}

/* Tx slots the device has not given back. */
static unsigned tx_in_flight(struct vm *vm)
{
	vg_poll(vm->g, 0);
	return vm->g->o.tx_slots - vm->g->tx_nfree;
}

/* --tx-hold 4: one connection holds at most 2. Port A's reader stalls
 * with A's credit spent in 4 KiB packets (dozens would fit the socket);
 * port B then carries 16 MiB through the same tx ring, and A's bytes are
 * all there, in order, once its reader goes on. */
static void test_stalled_reader_bounded(void **state)
{
	struct vm vm = { .extra = { "--tx-hold", "4" } };
	struct vg_opts o = scribble_opts();
	static struct reader ra, rb;
	struct vg_sock *a, *b;
	uint8_t buf[4096];
	uint64_t sent = 0;
	unsigned most = 0;
	int err = 0;

	(void)state;
	o.tx_pkt_max = 4096;
	vm_start(&vm, &o);
	reader_start(&ra, &vm, 5200, CHUNK, true);
	a = vg_connect(vm.g, 5200, WAIT, &err);
	if (!a)
		fail_msg("connect A: %s", strerror(-err));
	/* Until the credit is spent: the device holds what it spliced and
	 * copies the rest into A's buffer. */
	for (;;) {
		ssize_t n;

		vg_pattern_fill(5200, sent, buf, sizeof(buf));
		n = vg_write(a, buf, sizeof(buf), 300);
		if (n > 0)
			sent += (uint64_t)n;
		if (n != (ssize_t)sizeof(buf))
			break;
		if (sent > (64ull << 20))
			fail_msg("A never ran out of credit");
	}
	/* The device had 300 ms to take every chain posted. */
	most = tx_in_flight(&vm);
	if (most > 2)
		fail_msg("%u tx chains held for one connection (at most 2)",
			 most);
	assert_true(sent >= 256 * 1024 - 4096);

	reader_start(&rb, &vm, 5201, CHUNK, false);
	b = vg_connect(vm.g, 5201, WAIT, &err);
	if (!b)
		fail_msg("connect B: %s", strerror(-err));
	guest_send(b, 5201, 0, 16ull << 20);
	assert_int_equal(vg_shutdown(b, VSOCK_SHUTDOWN_SEND), 0);
	reader_join(&rb);
	assert_int_equal(rb.got, 16ull << 20);
	if (tx_in_flight(&vm) > 2)
		fail_msg("%u tx chains still held with only A stalled",
			 tx_in_flight(&vm));

	__atomic_store_n(&ra.release, true, __ATOMIC_RELEASE);
	assert_int_equal(vg_shutdown(a, VSOCK_SHUTDOWN_SEND), 0);
	reader_join(&ra);
	assert_int_equal(ra.got, sent);
	vg_close(a);
	vg_close(b);
	vm_stop(&vm);
	assert_true(stat_after_reset("tx spliced") > 0);
	assert_true(stat_after_reset("at most") <= 4);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_spliced_bytes_survive_reuse),
		cmocka_unit_test(test_stalled_reader_bounded),
		cmocka_unit_test(test_copy_path),
	};

	signal(SIGPIPE, SIG_IGN);
	harness_test_filter();
	return cmocka_run_group_tests(tests, NULL, harness_group_teardown);
}
