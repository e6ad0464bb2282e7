/* `vmio net` handed over to a successor (issue 36), with the in-tree
 * front end as the guest, over a TAP vmio creates in a network namespace
 * of the test's own: frames cross both ways through ten reloads (and
 * while a reload runs), none twice, none lost (those that arrive during
 * a pause, or that wait for rx buffers, wait in the TAP's queues, which
 * go across); the front end's session goes on (it never reconnects); the TAP
 * keeps its index and its address; the counters and the control queue's
 * state (the queue pairs in use: two pairs on two workers stay steered
 * to) come across; and the reloads that must fail (no binary at the
 * path; an AF_XDP port) leave the old process serving, saying why.
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
#include "netns.h"
#include "virtio/features.h"

#define WAIT HARNESS_WAIT_MS
#define RELOADS 10
#define QSIZE 256
#define RX_BUFS 128 /* posted on each rx queue */
#define RX_BUF 2048
#define TX_SLOTS 64 /* per tx queue */
#define BURST 32    /* frames each way, per pair, before each reload */
#define DURING_MAX 64 /* frames sent into the TAP while a reload runs */
#define MAX_SEQ 4096
#define MAGIC 0x766d696fu
#define HDR 12 /* VERSION_1's virtio-net header */
#define FRAME 60

static pid_t serving = -1; /* stopped by the teardown whatever happened */

/* ---- The namespace and the TAP -------------------------------------------- */

static void ifreq_for(struct ifreq *ifr, const char *name)
{
	memset(ifr, 0, sizeof(*ifr));
	snprintf(ifr->ifr_name, sizeof(ifr->ifr_name), "%s", name);
}

/* Up, with the IPv4 address addr if not NULL. */
static void tap_up(const char *name, const char *addr)
{
	struct ifreq ifr;
	struct sockaddr_in *sin = (struct sockaddr_in *)&ifr.ifr_addr;
	int fd;

	netns_link_up(name);
	if (!addr)
		return;
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	assert_true(fd >= 0);
	ifreq_for(&ifr, name);
	sin->sin_family = AF_INET;
	assert_int_equal(inet_pton(AF_INET, addr, &sin->sin_addr), 1);
	assert_int_equal(ioctl(fd, SIOCSIFADDR, &ifr), 0);
	close(fd);
}

/* The interface's IPv4 address, "" if it has none. */
static void tap_addr(const char *name, char *out, size_t size)
{
	struct ifreq ifr;
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	ifreq_for(&ifr, name);
	out[0] = '\0';
	if (ioctl(fd, SIOCGIFADDR, &ifr) == 0)
		inet_ntop(AF_INET,
			  &((struct sockaddr_in *)&ifr.ifr_addr)->sin_addr,
			  out, (socklen_t)size);
	close(fd);
}

/* A broadcast IPv4/UDP frame whose source port is its own (so that the
 * kernel's flow hash spreads frames over the TAP's queues), carrying
 * MAGIC, dir and seq. */
static void make_frame(uint8_t *f, uint32_t dir, uint32_t seq)
{
	static const uint8_t head[42] = {
		0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0, 0, 0, 0, 0x01,
		0x08, 0x00, 0x45, 0, 0, 46, 0, 0, 0x40, 0, 64, 17, 0, 0,
		10, 0, 0, 1, 10, 0, 0, 2, 0, 0, 0, 9, 0, 26, 0, 0,
	};
	uint32_t v[3] = { htonl(MAGIC), htonl(dir), htonl(seq) };

	memset(f, 0, FRAME);
	memcpy(f, head, sizeof(head));
	f[34] = (uint8_t)(0x80 | (seq >> 8 & 0x7f));
	f[35] = (uint8_t)seq;
	memcpy(f + 42, v, sizeof(v));
}

/* The seq of one of ours going dir, or -1. */
static long frame_seq(const uint8_t *f, size_t len, uint32_t dir)
{
	uint32_t v[3];

	if (len < 42 + sizeof(v))
		return -1;
	memcpy(v, f + 42, sizeof(v));
	if (ntohl(v[0]) != MAGIC || ntohl(v[1]) != dir ||
	    ntohl(v[2]) >= MAX_SEQ)
		return -1;
	return (long)ntohl(v[2]);
}

static void host_send(int fd, const char *tap, uint32_t seq)
{
	struct sockaddr_ll to = {
		.sll_family = AF_PACKET,
		.sll_protocol = htons(ETH_P_IP),
		.sll_ifindex = (int)if_nametoindex(tap),
		.sll_halen = 6,
	};
	uint8_t f[FRAME];

	memset(to.sll_addr, 0xff, 6);
	make_frame(f, 2, seq);
	assert_int_equal(sendto(fd, f, sizeof(f), 0, (struct sockaddr *)&to,
				sizeof(to)),
			 (ssize_t)sizeof(f));
}

/* ---- The guest ----------------------------------------------------------- */

struct guest {
	struct vmio_fe *fe;
	unsigned pairs;
	uint64_t rx_gpa[2][RX_BUFS];
	uint64_t tx_gpa[2][TX_SLOTS];
	unsigned tx_next[2], tx_out[2];
	uint8_t seen_g2h[MAX_SEQ], seen_h2g[MAX_SEQ];
	unsigned h2g_per_pair[2];
	uint32_t g2h_seq, h2g_seq;
};

static unsigned ctrl_queue(const struct guest *g)
{
	return g->pairs > 1 ? 2 * g->pairs : 2;
}

static void post_rx(struct guest *g, unsigned pair, unsigned i)
{
	struct vmio_dbuf b = { .gpa = g->rx_gpa[pair][i], .len = RX_BUF,
			       .writable = true };

	assert_true(vmio_dvq_add(vmio_fe_queue(g->fe, 2 * pair), &b, 1,
				 (void *)(uintptr_t)(i + 1)) >= 0);
}

/* One control command (class, command, data) answered OK. */
static void ctrl_command(struct guest *g, uint8_t class, uint8_t cmd,
			 const void *data, uint32_t len)
{
	struct vmio_dvq *q = vmio_fe_queue(g->fe, ctrl_queue(g));
	uint64_t in = vmio_fe_alloc(g->fe, 2 + len, 8);
	uint64_t ack = vmio_fe_alloc(g->fe, 1, 8);
	uint8_t *p = vmio_fe_ptr(g->fe, in);
	struct vmio_dbuf b[2] = {
		{ .gpa = in, .len = 2 + len },
		{ .gpa = ack, .len = 1, .writable = true },
	};

	p[0] = class;
	p[1] = cmd;
	memcpy(p + 2, data, len);
	*(uint8_t *)vmio_fe_ptr(g->fe, ack) = 0xff;
	assert_true(vmio_dvq_add(q, b, 2, (void *)1) >= 0);
	vmio_dvq_kick(q);
	for (int i = 0; i < WAIT / 100 && !vmio_dvq_get_used(q, NULL); i++) {
		vmio_dvq_want_interrupt(q);
		vmio_dvq_wait(q, 100);
	}
	assert_int_equal(*(uint8_t *)vmio_fe_ptr(g->fe, ack), VIRTIO_NET_OK);
}

/* Connected with pairs queue pairs (two: MQ, and the guest says it uses
 * both on the control queue), every rx buffer posted. */
static void guest_open(struct guest *g, const char *sock, unsigned pairs)
{
	uint64_t want = VMIO_BIT(VIRTIO_F_VERSION_1) |
			VMIO_BIT(VIRTIO_RING_F_EVENT_IDX) |
			VMIO_BIT(VIRTIO_NET_F_MRG_RXBUF) |
			VMIO_BIT(VIRTIO_NET_F_CTRL_VQ) |
			VMIO_BIT(VIRTIO_NET_F_CTRL_RX);

	memset(g, 0, sizeof(*g));
	g->pairs = pairs;
	if (pairs > 1)
		want |= VMIO_BIT(VIRTIO_NET_F_MQ);
	g->fe = vmio_fe_connect(sock, WAIT);
	assert_non_null(g->fe);
	assert_int_equal(vmio_fe_negotiate(g->fe, want,
					   VMIO_BIT(VHOST_USER_PROTOCOL_F_REPLY_ACK) |
						   VMIO_BIT(VHOST_USER_PROTOCOL_F_MQ)),
			 0);
	assert_int_equal(g->fe->features & want, want);
	assert_int_equal(vmio_fe_mem_create(g->fe, 4 << 20, 1), 0);
	for (unsigned q = 0; q < 2 * pairs; q++)
		assert_int_equal(vmio_fe_queue_setup(g->fe, q, QSIZE), 0);
	assert_int_equal(vmio_fe_queue_setup(g->fe, ctrl_queue(g), 16), 0);
	for (unsigned p = 0; p < pairs; p++) {
		for (unsigned i = 0; i < RX_BUFS; i++) {
			g->rx_gpa[p][i] = vmio_fe_alloc(g->fe, RX_BUF, 64);
			assert_true(g->rx_gpa[p][i] != UINT64_MAX);
			post_rx(g, p, i);
		}
		for (unsigned i = 0; i < TX_SLOTS; i++) {
			g->tx_gpa[p][i] = vmio_fe_alloc(g->fe, HDR + FRAME, 8);
			assert_true(g->tx_gpa[p][i] != UINT64_MAX);
		}
		vmio_dvq_kick(vmio_fe_queue(g->fe, 2 * p));
	}
	if (pairs > 1) {
		uint16_t n = htole16((uint16_t)pairs);

		ctrl_command(g, VIRTIO_NET_CTRL_MQ,
			     VIRTIO_NET_CTRL_MQ_VQ_PAIRS_SET, &n, sizeof(n));
	}
	/* A state of the control queue's to carry: promiscuous off. */
	ctrl_command(g, VIRTIO_NET_CTRL_RX, VIRTIO_NET_CTRL_RX_PROMISC,
		     "\0", 1);
}

/* n frames on pair's tx queue. */
static void guest_send(struct guest *g, unsigned pair, unsigned n)
{
	struct vmio_dvq *q = vmio_fe_queue(g->fe, 2 * pair + 1);

	assert_true(g->tx_out[pair] + n <= TX_SLOTS);
	for (unsigned k = 0; k < n; k++) {
		unsigned i = g->tx_next[pair]++ % TX_SLOTS;
		uint8_t *p = vmio_fe_ptr(g->fe, g->tx_gpa[pair][i]);
		struct vmio_dbuf b = { .gpa = g->tx_gpa[pair][i],
				       .len = HDR + FRAME };

		memset(p, 0, HDR);
		make_frame(p + HDR, 1, g->g2h_seq++);
		assert_true(vmio_dvq_add(q, &b, 1, (void *)(uintptr_t)(i + 1)) >=
			    0);
	}
	g->tx_out[pair] += n;
	vmio_dvq_kick(q);
}

/* Every tx chain back, and every rx buffer that came back reposted,
 * its frame recorded. */
static void guest_poll(struct guest *g)
{
	for (unsigned p = 0; p < g->pairs; p++) {
		struct vmio_dvq *tx = vmio_fe_queue(g->fe, 2 * p + 1);
		struct vmio_dvq *rx = vmio_fe_queue(g->fe, 2 * p);
		unsigned reposted = 0;
		uint32_t len;
		void *tok;

		while (vmio_dvq_get_used(tx, NULL))
			g->tx_out[p]--;
		while ((tok = vmio_dvq_get_used(rx, &len))) {
			unsigned i = (unsigned)(uintptr_t)tok - 1;
			const uint8_t *f = vmio_fe_ptr(g->fe, g->rx_gpa[p][i]);
			long seq = len > HDR ? frame_seq(f + HDR, len - HDR, 2)
					     : -1;

			if (seq >= 0) {
				if (g->seen_h2g[seq]++)
					fail_msg("frame %ld reached the guest twice",
						 seq);
				g->h2g_per_pair[p]++;
			}
			post_rx(g, p, i);
			reposted++;
		}
		if (reposted)
			vmio_dvq_kick(rx);
		vmio_dvq_want_interrupt(tx);
		vmio_dvq_want_interrupt(rx);
	}
}

static unsigned count_seen(const uint8_t *seen, uint32_t upto)
{
	unsigned n = 0;

	for (uint32_t i = 0; i < upto; i++)
		n += seen[i] != 0;
	return n;
}

/* Frames from the guest on the TAP's packet socket, recorded. */
static void host_poll(struct guest *g, int pfd)
{
	uint8_t buf[2048];
	struct sockaddr_ll from;
	socklen_t fl = sizeof(from);
	ssize_t n;

	while ((n = recvfrom(pfd, buf, sizeof(buf), 0, (struct sockaddr *)&from,
			     &fl)) > 0) {
		long seq = from.sll_pkttype == PACKET_OUTGOING
				   ? -1
				   : frame_seq(buf, (size_t)n, 1);

		fl = sizeof(from);
		if (seq < 0)
			continue;
		if (g->seen_g2h[seq]++)
			fail_msg("frame %ld reached the host twice", seq);
	}
}

static long long ms_since(const struct timespec *t0)
{
	struct timespec t1;

	clock_gettime(CLOCK_MONOTONIC, &t1);
	return (t1.tv_sec - t0->tv_sec) * 1000 +
	       (t1.tv_nsec - t0->tv_nsec) / 1000000;
}

/* Until every tx chain is back, every frame from the guest arrived and
 * every frame into the TAP reached the guest, for WAIT ms at most. */
static void settle(struct guest *g, int pfd)
{
	unsigned tx_out = 0, g2h = 0, h2g = 0;
	struct timespec t0;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		guest_poll(g);
		host_poll(g, pfd);
		tx_out = 0;
		for (unsigned p = 0; p < g->pairs; p++)
			tx_out += g->tx_out[p];
		g2h = count_seen(g->seen_g2h, g->g2h_seq);
		h2g = count_seen(g->seen_h2g, g->h2g_seq);
		if (!tx_out && g2h == g->g2h_seq && h2g == g->h2g_seq)
			return;
		if (ms_since(&t0) >= WAIT)
			break;
		poll(NULL, 0, 10);
	}
	fail_msg("%u tx chains not back; %u of %u frames from the guest, %u of %u into it arrived",
		 tx_out, g2h, g->g2h_seq, h2g, g->h2g_seq);
}

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

/* AF_XDP: refused, saying so, the old process serving on. */
static void test_reload_xdp_refused(void **state)
{
	const char *backend[] = { "--xdp", "vmiohx0", NULL };
	char out[2048];
	pid_t pid;

	(void)state;
	netns_enter();
	if (system("ip link add vmiohx0 type veth peer name vmiohx1 >&2") != 0)
		fail_msg("cannot create the veth pair vmiohx0/vmiohx1");
	tap_up("vmiohx0", NULL);
	tap_up("vmiohx1", NULL);
	pid = start_net(backend);
	assert_int_not_equal(harness_reload(ctl(), out, sizeof(out)), 0);
	if (!strstr(out, "the AF_XDP port cannot hand over yet"))
		fail_msg("the refusal does not say why: %s", out);
	assert_int_equal(harness_control_num(ctl(), "pid"), pid);
	assert_true(harness_wait_socket(harness_path("vhost.sock"), WAIT));
	/* SIGHUP the same: logged, and the process goes on. */
	assert_int_equal(kill(pid, SIGHUP), 0);
	for (int i = 0; i < WAIT / 10 &&
			!harness_log_contains("the AF_XDP port cannot hand over yet");
	     i++)
		poll(NULL, 0, 10);
	assert_int_equal(harness_control_num(ctl(), "pid"), pid);
	stop_net(pid);
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
		cmocka_unit_test_teardown(test_reload_xdp_refused, case_teardown),
	};

	if (harness_handover_init())
		return 1;
	harness_test_filter();
	return cmocka_run_group_tests(tests, NULL, harness_group_teardown);
}
