/* `vmio vsock --fd-store` killed with SIGKILL and started again with
 * what systemd's fd store kept (issue 36), with the in-tree driver as
 * the guest and a stand-in for systemd's store (fake_fdstore.h): the
 * guest's device works again without its VMM reconnecting (new
 * connections both ways, every byte checked), every connection open at
 * the kill is reset on the guest's side and closed on the host's, the
 * store holds no more after ten kills than after one, and a kept state
 * that is cut or changed is refused: the VM starts fresh and its VMM
 * sees the end of its session; with --tx-splice nothing is kept. A stop
 * (SIGTERM) whose store outlives it, as FileDescriptorStorePreserve=yes
 * keeps it, is a crash to the guest. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fake_fdstore.h"
#include "frontend/frontend.h"
#include "frontend/vsock_guest.h"
#include "harness.h"
#include "harness_handover.h"
#include "util/clock.h"

#define WAIT HARNESS_WAIT_MS
#define G2H_PORT 1234
#define H2G_PORT 5000
#define PIECE (64u * 1024)
#define KILLS 10

static struct fake_fdstore *store;
static pid_t serving = -1;
static bool splice; /* --tx-splice too */

static const char *const *vsock_args(void)
{
	static const char *args[16];

	args[0] = "vsock";
	args[1] = "--fd-store";
	args[2] = "--control";
	args[3] = harness_path("ctl");
	args[4] = "--guest-cid";
	args[5] = "3";
	args[6] = "--socket";
	args[7] = harness_path("vhost.sock");
	args[8] = "--uds-path";
	args[9] = harness_path("v.sock");
	args[10] = splice ? "--tx-splice" : NULL;
	args[11] = NULL;
	return args;
}

static void start_vsock(void)
{
	serving = fake_fdstore_start(store, vsock_args(), harness_path("ctl"));
}

static void kill_vsock(void)
{
	fake_fdstore_kill(store, serving);
	serving = -1;
}

static long long vm_num(const char *key)
{
	char path[128];

	snprintf(path, sizeof(path), "vms.0.%s", key);
	return harness_control_num(harness_path("ctl"), path);
}

/* Until vmio has kept what its session is now: the snapshot follows the
 * last message on a later turn of the VM's loop, which a control round
 * trip is one of; a send the notify socket had no room for is tried
 * again on a timer, until "owed" is 0. */
static void settle(void)
{
	for (int waited = 0; waited < WAIT; waited += 10) {
		if (vm_num("fd_store.owed") == 0 &&
		    vm_num("fd_store.writes") > 0)
			return;
		usleep(10000);
	}
	fail_msg("vmio did not keep its session in the store");
}

/* ---- Connections ------------------------------------------------------------ */

struct conns {
	int lis; /* the host service at v.sock_G2H_PORT */
	struct vg_sock *g2h, *h2g;
	int g2h_host, h2g_host;
	unsigned long h2g_port; /* the host's port, as OK named it */
};

/* A connection each way carrying a piece each way, every byte checked:
 * the device serves. */
static void conns_open(struct conns *c, struct vg *g, uint64_t seed)
{
	static uint8_t buf[PIECE];
	char path[300], line[32], ok[32];
	int err = 0;
	size_t got = 0;

	memset(c, 0, sizeof(*c));
	snprintf(path, sizeof(path), "%s_%u", harness_path("v.sock"),
		 G2H_PORT);
	unlink(path);
	c->lis = harness_unix_listen(path);
	c->g2h = vg_connect(g, G2H_PORT, WAIT, &err);
	if (!c->g2h)
		fail_msg("guest connect: %s", strerror(-err));
	assert_true(harness_wait_fd(c->lis, POLLIN, WAIT));
	c->g2h_host = accept4(c->lis, NULL, NULL, SOCK_CLOEXEC);
	assert_true(c->g2h_host >= 0);
	vg_pattern_fill(seed, 0, buf, PIECE);
	assert_int_equal(vg_write(c->g2h, buf, PIECE, WAIT), PIECE);
	harness_read_exact(c->g2h_host, buf, PIECE);
	assert_int_equal(vg_pattern_check(seed, 0, buf, PIECE), PIECE);

	c->h2g_host = harness_unix_connect(harness_path("v.sock"),
					   SOCK_STREAM);
	assert_true(c->h2g_host >= 0);
	snprintf(line, sizeof(line), "CONNECT %u\n", H2G_PORT);
	assert_int_equal(write(c->h2g_host, line, strlen(line)),
			 (ssize_t)strlen(line));
	c->h2g = vg_accept(g, H2G_PORT, false, WAIT, &err);
	if (!c->h2g)
		fail_msg("guest accept: %s", strerror(-err));
	while (got < sizeof(ok) - 1 && (got == 0 || ok[got - 1] != '\n')) {
		assert_true(harness_wait_fd(c->h2g_host, POLLIN, WAIT));
		assert_int_equal(read(c->h2g_host, ok + got, 1), 1);
		got++;
	}
	assert_memory_equal(ok, "OK ", 3);
	c->h2g_port = strtoul(ok + 3, NULL, 10);
	vg_pattern_fill(seed + 1, 0, buf, 4096);
	assert_int_equal(write(c->h2g_host, buf, 4096), 4096);
	got = 0;
	while (got < 4096) {
		ssize_t n = vg_read(c->h2g, buf + got, 4096 - got, WAIT);

		if (n <= 0)
			fail_msg("guest read: %s", n ? strerror((int)-n)
						     : "EOF");
		got += (size_t)n;
	}
	assert_int_equal(vg_pattern_check(seed + 1, 0, buf, 4096), 4096);
}

/* After the kill: the guest's side of each reset by the new process, the
 * host's closed with the old one. */
static void conns_expect_ended(struct conns *c, struct vg *g)
{
	struct vg_sock *all[] = { c->g2h, c->h2g };
	int hosts[] = { c->g2h_host, c->h2g_host };
	char b;

	for (unsigned i = 0; i < 2; i++) {
		struct vg_sock_info info;
		ssize_t n = vg_read(all[i], &b, 1, WAIT);

		if (n != -ECONNRESET)
			fail_msg("connection %u: read gave %zd, not a reset",
				 i, n);
		vg_sock_info(all[i], &info);
		assert_true(info.reset);
		vg_close(all[i]);
		assert_true(harness_wait_fd(hosts[i], POLLIN, WAIT));
		assert_int_equal(read(hosts[i], &b, 1), 0);
		close(hosts[i]);
	}
	close(c->lis);
	(void)g;
}

/* vmio started under the store, and the driver as its guest, listening
 * on H2G_PORT. */
static struct vg *start_with_guest(void)
{
	char err[256];
	struct vg *g;

	start_vsock();
	g = vg_open(harness_path("vhost.sock"), WAIT, NULL, err, sizeof(err));
	if (!g)
		fail_msg("%s", err);
	assert_int_equal(vg_listen(g, H2G_PORT), 0);
	return g;
}

/* It serves: a last pair of connections, then the guest gone (no
 * protocol violation seen) and a clean stop. */
static void serves_then_stops(struct conns *c, struct vg *g, uint64_t seed)
{
	conns_open(c, g, seed);
	vg_close(c->g2h);
	vg_close(c->h2g);
	close(c->g2h_host);
	close(c->h2g_host);
	close(c->lis);
	if (g->violations)
		fail_msg("%llu violations, the last: %s",
			 (unsigned long long)g->violations, g->violation);
	vg_free(g);
	assert_int_equal(WEXITSTATUS(harness_stop(serving, WAIT)), 0);
	serving = -1;
}

static int cmp_ms(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

/* ---- Cases ------------------------------------------------------------------ */

static int case_setup(void **state)
{
	(void)state;
	splice = false;
	store = fake_fdstore_case_begin();
	return 0;
}

static int case_teardown(void **state)
{
	(void)state;
	fake_fdstore_case_end(&store, &serving);
	return 0;
}

/* Ten kills in a row, each with connections open both ways: the device
 * comes back each time, the connections end on both sides, and the
 * store keeps as many fds after the last as after the first. */
static void test_kill_keeps_device(void **state)
{
	struct vg *g;
	struct conns c = { .h2g_port = 0 };
	unsigned kept_first = 0;
	int64_t took[KILLS], t0;

	(void)state;
	g = start_with_guest();
	for (unsigned k = 0; k < KILLS; k++) {
		unsigned long before = c.h2g_port;

		conns_open(&c, g, 10 + 2 * k);
		/* A restarted vmio counts host ports on from the dead one's
		 * journal: the guest may still hold the reset socket. */
		if (k && c.h2g_port == before)
			fail_msg("host port %lu named again after the crash",
				 before);
		settle();
		if (fake_fdstore_find(store, "vmio.vm.0.s0") < 0 ||
		    fake_fdstore_find(store, "vmio.vm.0.f0") < 0)
			fail_msg("the session is not in the store (%u fds)",
				 fake_fdstore_count(store));
		if (!k)
			kept_first = fake_fdstore_count(store);
		else
			assert_int_equal(fake_fdstore_count(store), kept_first);
		t0 = vmio_now_ms();
		kill_vsock();
		start_vsock();
		conns_expect_ended(&c, g);
		took[k] = vmio_now_ms() - t0;
		assert_int_equal(vm_num("rsts_after_crash"), 2);
		/* The front end was never told: its first session goes on. */
		assert_int_equal(harness_control_num(harness_path("ctl"),
						     "vms.0.sessions"),
				 1);
	}
	/* From the kill to the guest's connections reset: the dead
	 * process's wait, the start, the session taken back, the RSTs. */
	qsort(took, KILLS, sizeof(took[0]), cmp_ms);
	printf("# kill -9 to the guest's connections reset: median %lld ms, worst %lld ms (of %u)\n",
	       (long long)took[KILLS / 2], (long long)took[KILLS - 1], KILLS);
	assert_true(harness_log_contains("session taken back from the fd store"));
	serves_then_stops(&c, g, 99);
}

/* A stop and a start with the store kept (systemd 254+ with
 * FileDescriptorStorePreserve=yes): what a stop leaves in the store is
 * the session as it ran, so the start takes it back as after a kill, and
 * the connections open at the stop are reset on the guest's side. */
static void test_stop_start_keeps_device(void **state)
{
	struct vg *g;
	struct conns c;

	(void)state;
	g = start_with_guest();
	conns_open(&c, g, 5);
	settle();
	fake_fdstore_stop(store, serving);
	serving = -1;
	start_vsock();
	conns_expect_ended(&c, g);
	assert_int_equal(vm_num("rsts_after_crash"), 2);
	assert_int_equal(harness_control_num(harness_path("ctl"),
					     "vms.0.sessions"),
			 1);
	serves_then_stops(&c, g, 6);
}

/* Both kept records cut: refused, said, and the VM starts fresh; the
 * front end's socket, which nobody serves, is closed everywhere, so its
 * VMM sees the session end. */
static void test_kept_state_refused(void **state)
{
	struct vg *g;
	struct conns c;
	struct pollfd p;

	(void)state;
	g = start_with_guest();
	conns_open(&c, g, 7);
	settle();
	kill_vsock();
	for (unsigned i = 0; i < 2; i++) {
		int fd = fake_fdstore_find(store, i ? "vmio.vm.0.s1"
						    : "vmio.vm.0.s0");

		if (fd >= 0)
			assert_int_equal(ftruncate(fd, 40), 0);
	}
	start_vsock();
	assert_true(harness_log_contains("is not taken back"));
	/* The VMM's end: the store let go of its socket too. */
	p = (struct pollfd){ .fd = g->fe->sock, .events = POLLIN };
	assert_int_equal(poll(&p, 1, WAIT), 1);
	assert_true(p.revents & (POLLHUP | POLLIN));
	assert_int_equal(fake_fdstore_find(store, "vmio.vm.0.f0"), -1);
	close(c.g2h_host);
	close(c.h2g_host);
	close(c.lis);
	vg_free(g);
	assert_int_equal(WEXITSTATUS(harness_stop(serving, WAIT)), 0);
	serving = -1;
}

/* With --tx-splice nothing is kept (its chains complete out of order,
 * so a used index is no place to serve a ring again from): the store
 * stays empty while a session runs, and a kill costs the device. */
static void test_tx_splice_keeps_nothing(void **state)
{
	struct vg *g;
	struct conns c;
	struct pollfd p;

	(void)state;
	splice = true;
	g = start_with_guest();
	conns_open(&c, g, 5);
	assert_int_equal(fake_fdstore_count(store), 0);
	kill_vsock();
	p = (struct pollfd){ .fd = g->fe->sock, .events = POLLIN };
	assert_int_equal(poll(&p, 1, WAIT), 1);
	assert_true(p.revents & (POLLHUP | POLLIN));
	close(c.g2h_host);
	close(c.h2g_host);
	close(c.lis);
	vg_free(g);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_kill_keeps_device,
						case_setup, case_teardown),
		cmocka_unit_test_setup_teardown(test_stop_start_keeps_device,
						case_setup, case_teardown),
		cmocka_unit_test_setup_teardown(test_kept_state_refused,
						case_setup, case_teardown),
		cmocka_unit_test_setup_teardown(test_tx_splice_keeps_nothing,
						case_setup, case_teardown),
	};

	if (!getenv("VMIO_BIN"))
		return 1;
	signal(SIGPIPE, SIG_IGN);
	harness_test_filter();
	return cmocka_run_group_tests(tests, NULL, harness_group_teardown);
}
