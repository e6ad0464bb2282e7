/* `vmio net --fd-store` killed with SIGKILL and started again with what
 * systemd's fd store kept (issue 36), with the in-tree front end as the
 * guest on a TAP vmio created, in a network namespace of the test's own,
 * and a stand-in for systemd's store (fake_fdstore.h). Ten kills in a
 * row: the front end's session goes on (it is never told, and never
 * reconnects), the TAP is the same interface with its address (the store
 * kept its queues), frames sent into the TAP while no vmio ran wait
 * there and reach the guest after, frames flow both ways on both queue
 * pairs after each restart (the control queue's state came back: the
 * guest uses two pairs), none twice, and the store keeps as many fds
 * after the last kill as after the first. A kept state the next command
 * line does not match is refused: the device starts fresh and the VMM
 * sees its session end. A stop (SIGTERM) whose store outlives it, as
 * FileDescriptorStorePreserve=yes keeps it, is a restart to the guest.
 * On AF_XDP the same but the XSKs, which the next vmio opens anew.
 * Needs root (a namespace, a TAP, a veth pair). */
#include <net/if.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "fake_fdstore.h"
#include "harness.h"
#include "harness_handover.h"
#include "net_guest.h"
#include "netns.h"

#define WAIT HARNESS_WAIT_MS
#define KILLS 10
#define BURST 32 /* frames each way, per pair */
#define DEAD 16  /* frames into the TAP while no vmio runs */

static struct fake_fdstore *store;
static pid_t serving = -1;

static const char *ctl(void)
{
	return harness_path("ctl");
}

static void start_net(const char *tap, const char *mac)
{
	const char *args[] = { "net", "--fd-store", "--socket",
			       harness_path("vhost.sock"), "--control", ctl(),
			       "--tap", tap, "--queues", "2", "--threads",
			       "2", "--mac", mac, NULL };

	serving = fake_fdstore_start(store, args, ctl());
}

/* The same on AF_XDP (one pair: --xdp runs on one thread), on iface. */
static void start_net_xdp(const char *iface, const char *copy)
{
	const char *args[] = { "net", "--fd-store", "--socket",
			       harness_path("vhost.sock"), "--control", ctl(),
			       "--xdp", iface, copy, NULL };

	serving = fake_fdstore_start(store, args, ctl());
}

static void kill_net(void)
{
	fake_fdstore_kill(store, serving);
	serving = -1;
}

/* Until vmio has kept what its session and device are now (a control
 * round trip is a turn of worker 0's loop, where both are written; a
 * send the notify socket had no room for is tried again on a timer). */
static void kept_now(void)
{
	for (int waited = 0; waited < WAIT; waited += 10) {
		if (harness_control_num(ctl(), "devices.0.fd_store.owed") == 0 &&
		    harness_control_num(ctl(), "devices.0.fd_store.writes") > 0)
			return;
		usleep(10000);
	}
	fail_msg("vmio net did not keep its session in the store");
}

/* Frames both ways on every pair, all of them arrived once. */
static void frames_both_ways(struct guest *g, int pfd, const char *tap)
{
	memset(g->h2g_per_pair, 0, sizeof(g->h2g_per_pair));
	for (unsigned p = 0; p < g->pairs; p++)
		guest_send(g, p, BURST);
	for (unsigned k = 0; k < BURST * g->pairs; k++)
		host_send(pfd, tap, g->h2g_seq++);
	settle(g, pfd);
	/* The steering is the guest's choice, two pairs: each gets flows. */
	for (unsigned p = 0; p < g->pairs; p++)
		if (!g->h2g_per_pair[p])
			fail_msg("no frame reached the guest on pair %u", p);
}

static int cmp_ll(const void *a, const void *b)
{
	long long x = *(const long long *)a, y = *(const long long *)b;

	return (x > y) - (x < y);
}

static void test_kill_keeps_session(void **state)
{
	const char *tap = "vmioc0", *mac = "52:54:00:12:34:56";
	static struct guest g;
	long long took[KILLS];
	unsigned kept_first = 0, ifindex;
	struct timespec t0;
	char addr[64];
	int pfd;

	(void)state;
	netns_enter();
	start_net(tap, mac);
	ifindex = if_nametoindex(tap);
	assert_true(ifindex > 0);
	tap_up(tap, "10.78.0.1");
	pfd = netns_packet_socket(tap);
	guest_open(&g, harness_path("vhost.sock"), 2);
	for (unsigned k = 0; k < KILLS; k++) {
		frames_both_ways(&g, pfd, tap);
		kept_now();
		if (fake_fdstore_find(store, "vmio.net.0.s0") < 0 ||
		    fake_fdstore_find(store, "vmio.net.0.f0") < 0)
			fail_msg("the session is not in the store (%u fds)",
				 fake_fdstore_count(store));
		if (!k)
			kept_first = fake_fdstore_count(store);
		else
			assert_int_equal(fake_fdstore_count(store), kept_first);
		clock_gettime(CLOCK_MONOTONIC, &t0);
		kill_net();
		/* No vmio: these wait in the TAP's queues, which the store
		 * keeps. */
		for (unsigned i = 0; i < DEAD; i++)
			host_send(pfd, tap, g.h2g_seq++);
		start_net(tap, mac);
		settle(&g, pfd);
		took[k] = ms_since(&t0);
		/* The front end was never told: its first session goes on. */
		assert_int_equal(harness_control_num(ctl(), "devices.0.sessions"),
				 1);
		assert_int_equal(if_nametoindex(tap), ifindex);
	}
	frames_both_ways(&g, pfd, tap);
	tap_addr(tap, addr, sizeof(addr));
	assert_string_equal(addr, "10.78.0.1");
	assert_true(harness_log_contains("session taken back from the fd store"));
	/* From the kill to the frames sent meanwhile in the guest: the dead
	 * process's wait, the start, the session taken back, the TAP's
	 * queues read. */
	qsort(took, KILLS, sizeof(took[0]), cmp_ll);
	printf("# kill -9 to the frames sent meanwhile in the guest: median %lld ms, worst %lld ms (of %u); %u frames into the guest, none lost\n",
	       took[KILLS / 2], took[KILLS - 1], KILLS, g.h2g_seq);
	close(pfd);
	vmio_fe_close(g.fe);
	assert_int_equal(WEXITSTATUS(harness_stop(serving, WAIT)), 0);
	serving = -1;
}

/* A stop and a start with the store kept (systemd 254+ with
 * FileDescriptorStorePreserve=yes): the stop leaves the session, the
 * TAP's queues and the control state as they ran, so the start takes
 * them back as after a kill: one session all along, the same TAP, both
 * pairs, and what was sent into the TAP in between arrives. */
static void test_stop_start_keeps_session(void **state)
{
	const char *tap = "vmioc2", *mac = "52:54:00:12:34:58";
	static struct guest g;
	unsigned ifindex;
	int pfd;

	(void)state;
	netns_enter();
	start_net(tap, mac);
	ifindex = if_nametoindex(tap);
	tap_up(tap, "10.78.2.1");
	pfd = netns_packet_socket(tap);
	guest_open(&g, harness_path("vhost.sock"), 2);
	frames_both_ways(&g, pfd, tap);
	kept_now();
	fake_fdstore_stop(store, serving);
	serving = -1;
	for (unsigned i = 0; i < DEAD; i++)
		host_send(pfd, tap, g.h2g_seq++);
	start_net(tap, mac);
	settle(&g, pfd);
	assert_int_equal(harness_control_num(ctl(), "devices.0.sessions"), 1);
	assert_int_equal(if_nametoindex(tap), ifindex);
	frames_both_ways(&g, pfd, tap);
	close(pfd);
	vmio_fe_close(g.fe);
	assert_int_equal(WEXITSTATUS(harness_stop(serving, WAIT)), 0);
	serving = -1;
}

/* AF_XDP over a veth pair (vmio's XSK on a, the host's packet socket on
 * b), killed three times: an XSK is not kept (the next vmio opens its
 * own once the kernel let go of the dead one's queue), the session and
 * the control state are; frames both ways after each restart, on the
 * front end's first session. Frames sent while no XSK is bound go to
 * the host's stack, so none is sent then. */
static void kill_xdp(const char *a, const char *b, const char *copy)
{
	static struct guest g;
	int pfd;

	netns_enter();
	veth_up(a, b);
	start_net_xdp(a, copy);
	pfd = netns_packet_socket(b);
	guest_open(&g, harness_path("vhost.sock"), 1);
	for (unsigned k = 0;; k++) {
		xdp_frames_both_ways(&g, ctl(), pfd, b, copy, BURST);
		if (k == 3)
			break;
		kept_now();
		kill_net();
		start_net_xdp(a, copy);
		assert_int_equal(harness_control_num(ctl(), "devices.0.sessions"),
				 1);
	}
	assert_true(harness_log_contains("session taken back from the fd store"));
	close(pfd);
	vmio_fe_close(g.fe);
	assert_int_equal(WEXITSTATUS(harness_stop(serving, WAIT)), 0);
	serving = -1;
}

static void test_xdp_kill_keeps_session(void **state)
{
	(void)state;
	kill_xdp("vmiocx0", "vmiocx1", NULL);
}

static void test_xdp_copy_kill_keeps_session(void **state)
{
	(void)state;
	kill_xdp("vmiocx2", "vmiocx3", "--xdp-copy");
}

/* Restarted with another --mac: the kept device is refused, said, and
 * the device starts fresh; the front end's socket, which nobody serves,
 * is closed everywhere, so its VMM sees the session end. */
static void test_kept_state_refused(void **state)
{
	const char *tap = "vmioc1";
	static struct guest g;
	struct pollfd p;
	int pfd;

	(void)state;
	netns_enter();
	start_net(tap, "52:54:00:12:34:56");
	tap_up(tap, NULL);
	pfd = netns_packet_socket(tap);
	guest_open(&g, harness_path("vhost.sock"), 2);
	frames_both_ways(&g, pfd, tap);
	kept_now();
	kill_net();
	start_net(tap, "52:54:00:12:34:57");
	assert_true(harness_log_contains("is not taken back"));
	p = (struct pollfd){ .fd = g.fe->sock, .events = POLLIN };
	assert_int_equal(poll(&p, 1, WAIT), 1);
	assert_true(p.revents & (POLLHUP | POLLIN));
	assert_int_equal(fake_fdstore_find(store, "vmio.net.0.f0"), -1);
	assert_int_equal(harness_control_num(ctl(), "devices.0.sessions"), 0);
	close(pfd);
	vmio_fe_close(g.fe);
	assert_int_equal(WEXITSTATUS(harness_stop(serving, WAIT)), 0);
	serving = -1;
}

static int case_setup(void **state)
{
	(void)state;
	store = fake_fdstore_case_begin();
	return 0;
}

static int case_teardown(void **state)
{
	(void)state;
	fake_fdstore_case_end(&store, &serving);
	unlink(harness_path("vhost.sock"));
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_kill_keeps_session,
						case_setup, case_teardown),
		cmocka_unit_test_setup_teardown(test_xdp_kill_keeps_session,
						case_setup, case_teardown),
		cmocka_unit_test_setup_teardown(test_xdp_copy_kill_keeps_session,
						case_setup, case_teardown),
		cmocka_unit_test_setup_teardown(test_stop_start_keeps_session,
						case_setup, case_teardown),
		cmocka_unit_test_setup_teardown(test_kept_state_refused,
						case_setup, case_teardown),
	};

	if (!getenv("VMIO_BIN"))
		return 1;
	signal(SIGPIPE, SIG_IGN);
	harness_test_filter();
	return cmocka_run_group_tests(tests, NULL, harness_group_teardown);
}
