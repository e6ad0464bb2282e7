/* `vmio net` handed over to a successor (issue 36), with the in-tree
 * front end as the guest, over a TAP vmio creates in a network namespace
 * of the test's own: frames cross both ways through ten reloads (and
 * while a reload runs), none twice, none lost (those that arrive during
 * a pause, or that wait for rx buffers, wait in the TAP's queues, which
 * go across); the front end's session goes on (it never reconnects); the TAP
 * keeps its index and its address; the counters and the control queue's
 * state (the queue pairs in use: two pairs on two workers stay steered
 * to) come across; a reload that must fail (no binary at the path)
 * leaves the old process serving, saying why; and an AF_XDP port hands
 * over too, its successor opening its own XSKs.
 * Needs root (a namespace, a TAP, a veth pair). vmio runs from a copy in
 * the test's directory (harness_handover.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <jansson.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "devices/net/virtio_net.h"
#include "frontend/frontend.h"
#include "harness.h"
#include "harness_handover.h"
#include "net_guest.h"
#include "netns.h"
#include "virtio/features.h"

#define WAIT HARNESS_WAIT_MS
#define RELOADS 10
#define BURST 32    /* frames each way, per pair, before each reload */
#define DURING_MAX 64 /* frames sent into the TAP while a reload runs */

static pid_t serving = -1; /* stopped by the teardown whatever happened */

/* ---- vmio ------------------------------------------------------------------ */

static const char *ctl(void)
{
	return harness_path("ctl");
}

/* vmio net on the vhost-user socket vhost.sock with backend args. */
static pid_t start_net(const char *const *backend)
{
	const char *args[32] = { "net", "--socket", harness_path("vhost.sock"),
				 "--control", ctl(), "--handover-timeout",
				 "5000" };
	unsigned n = 7;

	while (*backend)
		args[n++] = *backend++;
	args[n] = NULL;
	serving = harness_handover_spawn(args);
	if (!harness_wait_socket(harness_path("vhost.sock"), WAIT))
		fail_msg("vmio net did not listen");
	assert_true(harness_wait_socket(ctl(), WAIT));
	return serving;
}

/* The serving process stopped: it exits 0 (under the sanitizers: with
 * nothing to report). */
static void stop_net(pid_t pid)
{
	assert_int_equal(harness_stop(pid, WAIT), 0);
	serving = -1;
}

/* Frames into the TAP, one a millisecond, while a reload runs. */
struct during {
	pthread_t thread;
	const char *tap;
	int fd;
	uint32_t first;
	atomic_uint sent;
	atomic_bool stop;
};

static void *send_during(void *opaque)
{
	struct during *d = opaque;

	while (!atomic_load(&d->stop) && atomic_load(&d->sent) < DURING_MAX) {
		host_send(d->fd, d->tap, d->first + atomic_load(&d->sent));
		atomic_fetch_add(&d->sent, 1);
		poll(NULL, 0, 1);
	}
	return NULL;
}

/* A reload with frames going both ways before it and into the TAP
 * while it runs; then all of them must arrive (those sent during it
 * waited in the TAP's queues). Returns the new pid; *ms how long `vmio
 * reload` took. */
static pid_t reload_under_frames(struct guest *g, const char *tap, int pfd,
				 pid_t pid, long long *ms)
{
	struct during d = { .tap = tap, .fd = pfd };
	struct timespec t0;

	for (unsigned p = 0; p < g->pairs; p++)
		guest_send(g, p, BURST);
	for (unsigned k = 0; k < BURST * g->pairs; k++)
		host_send(pfd, tap, g->h2g_seq++);
	d.first = g->h2g_seq;
	assert_int_equal(pthread_create(&d.thread, NULL, send_during, &d), 0);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	pid = harness_reload_ok(ctl(), pid);
	*ms = ms_since(&t0);
	atomic_store(&d.stop, true);
	pthread_join(d.thread, NULL);
	serving = pid;
	g->h2g_seq += atomic_load(&d.sent);
	settle(g, pfd);
	return pid;
}

/* More frames into the TAP than the guest has rx buffers, and a reload
 * before it takes any: those vmio has no buffer for wait in the TAP's
 * queues (on every pair: the flows spread), and the successor, which
 * has the queues, delivers them once the guest posts buffers again. */
static pid_t reload_frames_waiting(struct guest *g, const char *tap, int pfd,
				   pid_t pid)
{
	for (unsigned k = 0; k < (g->pairs + 1) * RX_BUFS; k++)
		host_send(pfd, tap, g->h2g_seq++);
	pid = harness_reload_ok(ctl(), pid);
	serving = pid;
	settle(g, pfd);
	return pid;
}

static int cmp_ll(const void *a, const void *b)
{
	long long x = *(const long long *)a, y = *(const long long *)b;

	return (x > y) - (x < y);
}

/* The front end's session is the one it opened: it answers on it. */
static void expect_same_session(struct guest *g)
{
	uint64_t features = 0;

	json_t *doc;

	assert_int_equal(vmio_fe_request(g->fe, VHOST_USER_GET_FEATURES, NULL,
					 0, NULL, 0, false, &features,
					 sizeof(features)),
			 0);
	assert_true(features & VMIO_BIT(VIRTIO_F_VERSION_1));
	doc = harness_control_get(ctl());
	assert_true(json_is_true(json_object_get(
		json_array_get(json_object_get(doc, "devices"), 0),
		"connected")));
	json_decref(doc);
}

static long long pair_num(unsigned pair, const char *key)
{
	char path[96];

	snprintf(path, sizeof(path), "queue_pairs.%u.%s", pair, key);
	return harness_control_num(ctl(), path);
}

/* Ten reloads under frames both ways on pairs queue pairs of a TAP vmio
 * created, more args after --tap. */
static void reload_tap(const char *tap, unsigned pairs, const char *threads)
{
	char queues[8], addr[64];
	const char *backend[] = { "--tap", tap, "--queues", queues,
				  "--threads", threads, NULL };
	static struct guest g;
	long long ms[RELOADS];
	unsigned ifindex;
	int pfd;
	pid_t pid;

	netns_enter();
	snprintf(queues, sizeof(queues), "%u", pairs);
	assert_int_equal(if_nametoindex(tap), 0);
	pid = start_net(backend);
	ifindex = if_nametoindex(tap);
	assert_true(ifindex > 0);
	tap_up(tap, "10.77.0.1");
	pfd = netns_packet_socket(tap);
	guest_open(&g, harness_path("vhost.sock"), pairs);
	for (unsigned k = 0; k < RELOADS; k++)
		pid = reload_under_frames(&g, tap, pfd, pid, &ms[k]);
	pid = reload_frames_waiting(&g, tap, pfd, pid);
	/* The TAP vmio created is the same interface, address and all. */
	assert_int_equal(if_nametoindex(tap), ifindex);
	tap_addr(tap, addr, sizeof(addr));
	assert_string_equal(addr, "10.77.0.1");
	expect_same_session(&g);
	/* The successor took the TAP's queues, never opening it again. */
	assert_true(harness_log_contains("taken over with its"));
	/* Frames still flow, both ways, on every pair. */
	memset(g.h2g_per_pair, 0, sizeof(g.h2g_per_pair));
	for (unsigned p = 0; p < pairs; p++)
		guest_send(&g, p, BURST);
	for (unsigned k = 0; k < BURST * pairs; k++)
		host_send(pfd, tap, g.h2g_seq++);
	settle(&g, pfd);
	for (unsigned p = 0; p < pairs; p++) {
		printf("# pair %u: %u frames into the guest after the reloads\n",
		       p, g.h2g_per_pair[p]);
		/* The steering came across: every pair gets flows. */
		assert_true(g.h2g_per_pair[p] > 0);
	}
	/* The counters came across every time: each frame counted once. */
	{
		long long tx = 0, rx = 0;

		for (unsigned p = 0; p < pairs; p++) {
			tx += pair_num(p, "tx_frames");
			rx += pair_num(p, "rx_frames");
		}
		assert_int_equal(tx, g.g2h_seq);
		assert_true(rx >= count_seen(g.seen_h2g, g.h2g_seq));
		assert_int_equal(harness_control_num(
					 ctl(), "devices.0.control_queue.ctrl_ok"),
				 pairs > 1 ? 2 : 1);
	}
	qsort(ms, RELOADS, sizeof(ms[0]), cmp_ll);
	printf("# %u reloads (%u pair%s): vmio reload took %lld ms median, %lld ms at most; %u of %u frames into the guest lost\n",
	       RELOADS, pairs, pairs == 1 ? "" : "s", ms[RELOADS / 2],
	       ms[RELOADS - 1], g.h2g_seq - count_seen(g.seen_h2g, g.h2g_seq),
	       g.h2g_seq);
	close(pfd);
	vmio_fe_close(g.fe);
	stop_net(pid);
	/* vmio created the TAP, and it goes with the last queue. */
	assert_int_equal(if_nametoindex(tap), 0);
}

static void test_reload_tap(void **state)
{
	(void)state;
	reload_tap("vmioh0", 1, "1");
}

/* Two pairs on two workers, both in use: the successor steers to both. */
static void test_reload_tap_two_pairs(void **state)
{
	(void)state;
	reload_tap("vmioh1", 2, "2");
}

/* The null port: its counters come across. */
static void test_reload_null(void **state)
{
	const char *backend[] = { "--null", NULL };
	static struct guest g;
	pid_t pid;

	(void)state;
	pid = start_net(backend);
	guest_open(&g, harness_path("vhost.sock"), 1);
	for (unsigned k = 0; k < 3; k++) {
		guest_send(&g, 0, BURST);
		pid = harness_reload_ok(ctl(), pid);
		serving = pid;
		for (int i = 0; i < WAIT / 10 && g.tx_out[0]; i++) {
			guest_poll(&g);
			poll(NULL, 0, 10);
		}
		assert_int_equal(g.tx_out[0], 0);
	}
	expect_same_session(&g);
	assert_int_equal(pair_num(0, "tx_frames"), 3 * BURST);
	vmio_fe_close(g.fe);
	stop_net(pid);
}

/* No binary at the path: the reload says so, the old process serves
 * on, frames flowing both ways; once the binary is back it goes. */
static void test_reload_refused(void **state)
{
	const char *tap = "vmioh2";
	const char *backend[] = { "--tap", tap, NULL };
	static struct guest g;
	char out[2048];
	pid_t pid;
	int pfd;

	(void)state;
	netns_enter();
	pid = start_net(backend);
	tap_up(tap, NULL);
	pfd = netns_packet_socket(tap);
	guest_open(&g, harness_path("vhost.sock"), 1);
	assert_int_equal(unlink(harness_handover_copy()), 0);
	guest_send(&g, 0, BURST);
	for (unsigned k = 0; k < BURST; k++)
		host_send(pfd, tap, g.h2g_seq++);
	assert_int_not_equal(harness_reload(ctl(), out, sizeof(out)), 0);
	if (!strstr(out, harness_handover_copy()))
		fail_msg("the refusal does not name the binary: %s", out);
	settle(&g, pfd);
	assert_int_equal(harness_control_num(ctl(), "pid"), pid);
	expect_same_session(&g);
	harness_handover_install();
	guest_send(&g, 0, BURST);
	pid = harness_reload_ok(ctl(), pid);
	serving = pid;
	settle(&g, pfd);
	close(pfd);
	vmio_fe_close(g.fe);
	stop_net(pid);
}

/* AF_XDP over a veth pair (vmio's XSK on a, the host's packet socket on
 * b): the old process closes its XSKs as it hands over and the successor
 * opens its own, once the kernel has let go of the queue. Frames both
 * ways before and after each of three reloads, every one arrives, on
 * the front end's first session; none is sent while a reload runs,
 * since those go to the host's stack while no XSK is bound (README). */
static void reload_xdp(const char *a, const char *b, const char *copy)
{
	const char *backend[] = { "--xdp", a, copy, NULL };
	static struct guest g;
	pid_t pid;
	int pfd;

	netns_enter();
	veth_up(a, b);
	pid = start_net(backend);
	pfd = netns_packet_socket(b);
	guest_open(&g, harness_path("vhost.sock"), 1);
	for (unsigned k = 0;; k++) {
		xdp_frames_both_ways(&g, ctl(), pfd, b, copy, BURST);
		if (k == 3)
			break;
		pid = harness_reload_ok(ctl(), pid);
		serving = pid;
	}
	expect_same_session(&g);
	assert_true(harness_log_contains("XSKs closed for the successor"));
	assert_int_equal(pair_num(0, "tx_frames"), g.g2h_seq);
	close(pfd);
	vmio_fe_close(g.fe);
	stop_net(pid);
}

static void test_reload_xdp(void **state)
{
	(void)state;
	reload_xdp("vmiohx0", "vmiohx1", NULL);
}

static void test_reload_xdp_copy(void **state)
{
	(void)state;
	reload_xdp("vmiohx2", "vmiohx3", "--xdp-copy");
}

/* What a case left, gone: the next starts afresh (the log too). */
static int case_teardown(void **state)
{
	(void)state;
	harness_handover_end(&serving);
	unlink(harness_path("vhost.sock"));
	harness_log_clear();
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_reload_tap, case_teardown),
		cmocka_unit_test_teardown(test_reload_tap_two_pairs, case_teardown),
		cmocka_unit_test_teardown(test_reload_null, case_teardown),
		cmocka_unit_test_teardown(test_reload_refused, case_teardown),
		cmocka_unit_test_teardown(test_reload_xdp, case_teardown),
		cmocka_unit_test_teardown(test_reload_xdp_copy, case_teardown),
	};

	if (harness_handover_init())
		return 1;
	harness_test_filter();
	return cmocka_run_group_tests(tests, NULL, harness_group_teardown);
}
