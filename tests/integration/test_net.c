/* `vmio net` against DPDK's testpmd, a vhost-user front end no one here
 * wrote: with --null, vmio counts every frame testpmd sends; with --tap,
 * in a network namespace of the test's own, frames cross the TAP both
 * ways and are counted on the other side; with --xdp, the same across a
 * veth pair, vmio's XSK on one end. The TAP and XDP cases need root (a
 * namespace, a TAP, a veth pair); they fail saying so otherwise. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "devices/net/virtio_net.h"
#include "frontend/frontend.h"
#include "harness.h"
#include "netns.h"
#include "testpmd.h"
#include "util/clock.h"
#include "virtio/features.h"

/* Enough frames to be sure they flowed, few enough to take well under a
 * second at the rates seen here (0.5 to 20 Mpps). */
#define TX_FRAMES 100000
#define RX_FRAMES 500
#define RX_BURST 250

static char out[8192], err[8192];

static int exit_code(int status)
{
	assert_true(status >= 0);
	assert_true(WIFEXITED(status));
	return WEXITSTATUS(status);
}

/* The --control socket of the vmio net running now, and its last
 * document, taken as the case stopped it (stop_net). */
static char net_ctl[300];
static unsigned net_seq;
static json_t *net_doc;

/* A device counter ("tx_frames") as vmio net's control socket gave it
 * when the case stopped it. */
/* A counter of the whole device: the control queue's and every queue
 * pair's (each pair counts on its own worker). */
static long long vmio_stat(const char *name)
{
	char key[96];
	long long sum, v;
	size_t pairs;

	assert_non_null(net_doc);
	snprintf(key, sizeof(key), "devices.0.control_queue.%s", name);
	sum = harness_json_num(net_doc, key);
	assert_true(sum >= 0);
	pairs = json_array_size(json_object_get(net_doc, "queue_pairs"));
	assert_true(pairs > 0);
	for (size_t i = 0; i < pairs; i++) {
		snprintf(key, sizeof(key), "queue_pairs.%zu.%s", i, name);
		v = harness_json_num(net_doc, key);
		sum += v;
	}
	return sum;
}

/* The features the front end acked, read live from --control. */
static long long vmio_features(void)
{
	json_t *doc = harness_control_get(net_ctl);
	long long f = harness_json_num(doc, "devices.0.features");

	json_decref(doc);
	assert_true(f >= 0);
	return f;
}

/* Whether vmio's log has a line containing text. */
static bool log_has(const char *text)
{
	FILE *f = fopen(harness_path("vmio.log"), "r");
	char line[2048];
	bool found = false;

	assert_non_null(f);
	while (!found && fgets(line, sizeof(line), f))
		found = strstr(line, text) != NULL;
	fclose(f);
	return found;
}

/* For a failure's message: what vmio said. */
static void dump_log(void)
{
	FILE *f = fopen(harness_path("vmio.log"), "r");
	char line[1024];

	while (f && fgets(line, sizeof(line), f))
		fprintf(stderr, "vmio.log: %s", line);
	if (f)
		fclose(f);
}

/* vmio net with backend (and its name, NULL for --null) on queues pairs,
 * and up to two more options: extra, then extra2 (each if not NULL). */
static pid_t start_net_queues2(const char *sock, const char *backend,
			       const char *name, const char *queues,
			       const char *extra, const char *extra2)
{
	const char *args[13] = { "net", "--socket", sock, "--stats", backend };
	unsigned n = 5;
	pid_t pid;

	if (name)
		args[n++] = name;
	args[n++] = "--queues";
	args[n++] = queues;
	snprintf(net_ctl, sizeof(net_ctl), "%s/net%u.ctl", harness_tmpdir(),
		 ++net_seq);
	args[n++] = "--control";
	args[n++] = net_ctl;
	args[n++] = extra;
	if (extra)
		args[n++] = extra2;
	pid = harness_spawn(args);

	if (!harness_wait_socket(sock, HARNESS_WAIT_MS))
		fail_msg("vmio net did not listen on %s", sock);
	return pid;
}

static pid_t start_net_queues(const char *sock, const char *backend,
			      const char *name, const char *queues,
			      const char *extra)
{
	return start_net_queues2(sock, backend, name, queues, extra, NULL);
}

static pid_t start_net(const char *sock, const char *backend,
		       const char *name)
{
	return start_net_queues(sock, backend, name, "1", NULL);
}

/* Takes the counters from the control socket, then stops vmio net. A
 * front end that has just gone may still be being reset: its last
 * frames are counted once vmio has seen it go (connected false), which
 * it is given a bounded while to. */
static void stop_net(pid_t pid)
{
	json_decref(net_doc);
	net_doc = harness_control_get(net_ctl);
	for (unsigned i = 0; i < 200; i++) {
		json_t *c = json_object_get(
			json_array_get(json_object_get(net_doc, "devices"), 0),
			"connected");

		if (!json_is_true(c))
			break;
		json_decref(net_doc);
		poll(NULL, 0, 10);
		net_doc = harness_control_get(net_ctl);
	}
	assert_int_equal(exit_code(harness_stop(pid, HARNESS_WAIT_MS)), 0);
}

/* ---- command line ---------------------------------------------------- */

/* Case i: vmio with args exits with code, saying want on stderr. */
static void expect_failure(size_t i, const char *const *args, int code,
			   const char *want)
{
	assert_int_equal(exit_code(harness_run(args, 10000, out, sizeof(out),
					       err, sizeof(err))),
			 code);
	if (!strstr(err, want))
		fail_msg("case %zu: stderr lacks '%s': %s", i, want, err);
}

static void test_cli(void **state)
{
	static const char *const usage[][10] = {
		{ "net", "--socket", "/tmp/x", NULL },
		{ "net", "--socket", "/tmp/x", "--null", "--tap", "t0", NULL },
		{ "net", "--socket", "/tmp/x", "--xdp", "eth0,q=1", NULL },
		{ "net", "--socket", "/tmp/x", "--xdp", "eth0,queue=x", NULL },
		{ "net", "--socket", "/tmp/x", "--null", "--xdp-copy", NULL },
		{ "net", "--socket", "/tmp/x", "--xdp", "eth0", "--mtu", "9000", NULL },
		{ "net", "--socket", "/tmp/x", "--null", "--queues", "0", NULL },
		{ "net", "--socket", "/tmp/x", "--null", "--queues", "257", NULL },
		{ "net", "--socket", "/tmp/x", "--null", "--mac", "52:54:00:12:34", NULL },
		{ "net", "--socket", "/tmp/x", "--null", "--mac", "01:00:5e:00:00:01", NULL },
		{ "net", "--socket", "/tmp/x", "--null", "--mac", "00:00:00:00:00:00", NULL },
		{ "net", "--socket", "/tmp/x", "--null", "--mtu", "67", NULL },
		{ "net", "--socket", "/tmp/x", "--null", "--poll-us", "1001", NULL },
		{ "net", "--socket", "/tmp/x", "--tap", "a/b", NULL },
		{ "net", "--null", NULL },
		{ "net", "--socket", "/tmp/x", "--null", "--null-source", "59", NULL },
		{ "net", "--socket", "/tmp/x", "--null", "--null-source", "1515", NULL },
		{ "net", "--socket", "/tmp/x", "--tap", "t0", "--null-source", "64", NULL },
		{ "net", "--socket", "/tmp/x", "--null", "--null-source", "200", "--mtu", "100", NULL },
		{ "net", "--socket", "/tmp/x", "--xdp", "eth0", "--threads", "2", NULL },
		{ "net", "--socket", "/tmp/x", "--null", "--threads", "0", NULL },
		{ "net", "--socket", "/tmp/x", "--null", "--xdp-reserve", "8", NULL },
		{ "net", "--socket", "/tmp/x", "--xdp", "eth0", "--xdp-reserve", "16385", NULL },
	};
	static const char *const expect[] = {
		"--null is required", "--null is required",
		"only ',queue=Q'", "--xdp queue", "goes with --xdp",
		"at most 3500 with --xdp", "--queues", "--queues", "--mac",
		"multicast", "zero address", "--mtu", "--poll-us",
		"interface name", "--socket-path", "from 60 to 1514",
		"from 60 to 1514", "--null-source goes with --null",
		"more than --mtu 100", "from one thread", "--threads",
		"--xdp-reserve goes with --xdp", "--xdp-reserve",
	};
	for (size_t i = 0; i < sizeof(usage) / sizeof(usage[0]); i++)
		expect_failure(i, usage[i], 2, expect[i]);
	/* A runtime error, at start: "lo" is no TAP (and without root,
	 * there is no permission either way). */
	assert_int_equal(exit_code(harness_run(
				 (const char *[]){ "net", "--socket",
						   harness_path("lo.sock"),
						   "--tap", "lo", NULL },
				 10000, out, sizeof(out), err, sizeof(err))),
			 1);
	assert_non_null(strstr(err, "cannot use tap lo"));
	assert_int_equal(exit_code(harness_run(
				 (const char *[]){ "net", "--print-capabilities",
						   NULL },
				 10000, out, sizeof(out), err, sizeof(err))),
			 0);
	assert_non_null(strstr(out, "\"net\""));
}

/* ---- --null ------------------------------------------------------------ */

/* testpmd in mode on `vmio net --null` (and extra, if not NULL) until its
 * counter passes TX_FRAMES; returns that counter, and vmio's stat in
 * *vmio. */
static long long null_testpmd(const char *extra, const char *mode,
			      const char *counter, const char *stat,
			      long long *vmio)
{
	const char *sock = harness_path(mode); /* one socket per case */
	pid_t pid = start_net_queues(sock, "--null", NULL, "1", extra);
	struct testpmd t;
	long long front, features;

	testpmd_start(&t, sock, mode);
	if (!testpmd_wait_counter(&t, counter, TX_FRAMES, HARNESS_WAIT_MS))
		printf("# testpmd %s: %s below %d in time\n", mode, counter,
		       TX_FRAMES);
	features = vmio_features();
	front = testpmd_stop(&t, counter);
	stop_net(pid);
	*vmio = vmio_stat(stat);
	printf("# testpmd %s: %s %lld, vmio %s %lld\n", mode, counter, front,
	       stat, *vmio);
	assert_true(front >= TX_FRAMES);
	/* virtio-user takes IN_ORDER by default (in_order=1), and the null
	 * backend gives chains back in order, so it is offered. */
	assert_true(features & (long long)VMIO_BIT(VIRTIO_F_IN_ORDER));
	return front;
}

/* Every frame testpmd sends is counted, with extra (or NULL) on vmio. */
static void null_txonly(const char *extra)
{
	long long got, sent = null_testpmd(extra, "txonly", "TX-packets",
					   "tx_frames", &got);

	/* Frames still in the ring when testpmd stopped are not seen. */
	assert_true(got <= sent);
	assert_true(sent - got <= 1024);
	assert_int_equal(vmio_stat("tx_dropped"), 0);
}

static void test_null_txonly(void **state)
{
	null_txonly(NULL);
}

/* The default polls a ring that ran dry for a while (--poll-us 50);
 * --poll-us 0 waits for the driver's notification at once. */
static void test_null_txonly_no_poll(void **state)
{
	null_txonly("--poll-us=0");
}

/* testpmd rxonly on `--null --null-source 64`: frames come as fast as it
 * posts buffers; only those in the ring when it stopped are not seen. */
static void null_source_rxonly(void)
{
	long long delivered, received = null_testpmd(
		"--null-source=64", "rxonly", "RX-packets", "rx_frames",
		&delivered);

	/* testpmd's forward statistics stop with its forwarding, while
	 * vmio fills what is posted and what it fetches meanwhile: at 5
	 * Mpps and more, a few milliseconds' worth (24k seen under load). */
	assert_true(delivered >= received);
	assert_true(delivered - received <= 1024 + received / 50);
	assert_int_equal(vmio_stat("rx_errors"), 0);
	/* Each turn that is counted gave a frame at least. */
	assert_true(vmio_stat("rx_turns") > 0);
	assert_true(vmio_stat("rx_turns") <= delivered);
	assert_true(vmio_stat("rx_buffers_exhausted") <= vmio_stat("rx_turns"));
}

static void test_null_source_rxonly(void **state)
{
	null_source_rxonly();
}

/* The same two ways on a packed ring: testpmd's virtio-user with
 * packed_vq=1 (the tap and xdp cases below run again so too). */
static int use_packed(void **state)
{
	testpmd_use_packed(true);
	return 0;
}

static int use_split(void **state)
{
	testpmd_use_packed(false);
	return 0;
}

static void test_null_packed_txonly(void **state)
{
	null_txonly(NULL);
}

static void test_null_packed_rxonly(void **state)
{
	null_source_rxonly();
}

/* ---- hostile input, through the in-tree front end ---------------------- */

#define ROBUST_PAIRS 2
#define ROBUST_TX_QUEUE 1
#define ROBUST_CTRL_QUEUE (2 * ROBUST_PAIRS) /* MQ negotiated */

/* Connects as a front end that acks exactly want (fails the test if the
 * device does not offer all of it) and sets up queue q, and queue q2 if
 * it is not 0. */
static struct vmio_fe *fe_connect_mem(const char *sock, uint64_t want,
				      unsigned q, unsigned q2, uint64_t size,
				      unsigned regions)
{
	struct vmio_fe *fe = vmio_fe_connect(sock, HARNESS_WAIT_MS);

	assert_non_null(fe);
	assert_int_equal(vmio_fe_negotiate(fe, want,
					   VMIO_BIT(VHOST_USER_PROTOCOL_F_REPLY_ACK) |
						   VMIO_BIT(VHOST_USER_PROTOCOL_F_MQ)),
			 0);
	assert_int_equal(fe->features & want, want);
	assert_int_equal(vmio_fe_mem_create(fe, size, regions), 0);
	assert_int_equal(vmio_fe_queue_setup(fe, q, 64), 0);
	if (q2)
		assert_int_equal(vmio_fe_queue_setup(fe, q2, 64), 0);
	return fe;
}

/* 1 MiB of guest memory in one region. */
static struct vmio_fe *fe_connect(const char *sock, uint64_t want,
				  unsigned q, unsigned q2)
{
	return fe_connect_mem(sock, want, q, q2, 1 << 20, 1);
}

static struct vmio_fe *robust_connect(const char *sock)
{
	const uint64_t want =
		VMIO_BIT(VIRTIO_F_VERSION_1) | VMIO_BIT(VIRTIO_RING_F_EVENT_IDX) |
		VMIO_BIT(VIRTIO_NET_F_MRG_RXBUF) | VMIO_BIT(VIRTIO_NET_F_CTRL_VQ) |
		VMIO_BIT(VIRTIO_NET_F_CTRL_RX) | VMIO_BIT(VIRTIO_NET_F_MQ) |
		VMIO_BIT(VIRTIO_NET_F_CTRL_MAC_ADDR);

	return fe_connect(sock, want, ROBUST_TX_QUEUE, ROBUST_CTRL_QUEUE);
}

/* Copies len bytes into fresh guest memory; returns the gpa. */
static uint64_t put(struct vmio_fe *fe, const void *data, uint32_t len)
{
	uint64_t gpa = vmio_fe_alloc(fe, len ? len : 1, 8);

	assert_true(gpa != UINT64_MAX);
	memcpy(vmio_fe_ptr(fe, gpa), data, len);
	return gpa;
}

/* Posts a frame on tx queue q as two descriptors: header, then
 * frame_len bytes. */
static void post_frame_on(struct vmio_fe *fe, unsigned q,
			  struct virtio_net_hdr h, uint32_t frame_len)
{
	static uint8_t frame[2048];
	struct vmio_dbuf b[2] = {
		{ .gpa = put(fe, &h, sizeof(h)), .len = sizeof(h) },
		{ .gpa = put(fe, frame, frame_len), .len = frame_len },
	};

	assert_true(vmio_dvq_add(vmio_fe_queue(fe, q), b, frame_len ? 2 : 1,
				 (void *)1) >= 0);
}

static void post_frame(struct vmio_fe *fe, struct virtio_net_hdr h,
		       uint32_t frame_len)
{
	post_frame_on(fe, ROBUST_TX_QUEUE, h, frame_len);
}

/* Waits for the next used chain of q: its length and token. */
static void reap_token(struct vmio_dvq *q, uint32_t *len, void **token)
{
	for (int rounds = 0; rounds < HARNESS_WAIT_MS / 100; rounds++) {
		vmio_dvq_want_interrupt(q);
		if ((*token = vmio_dvq_get_used(q, len)))
			return;
		vmio_dvq_wait(q, 100);
		if ((*token = vmio_dvq_get_used(q, len)))
			return;
	}
	dump_log();
	fail_msg("queue %u: no chain came back", q->index);
}

/* Waits until n chains come back used on q (each posted with a non-NULL
 * token: NULL is how vmio_dvq_get_used says "none"). */
static void reap(struct vmio_dvq *q, unsigned n, uint32_t *lens)
{
	unsigned got = 0;

	for (int rounds = 0; got < n && rounds < HARNESS_WAIT_MS / 100;
	     rounds++) {
		uint32_t len;

		vmio_dvq_want_interrupt(q);
		while (got < n && vmio_dvq_get_used(q, &len)) {
			if (lens)
				lens[got] = len;
			got++;
		}
		if (got < n)
			vmio_dvq_wait(q, 100);
	}
	if (got < n) {
		dump_log();
		fail_msg("queue %u: %u of %u chains came back", q->index, got,
			 n);
	}
}

/* Every kind of bad frame is dropped and counted, and the queue goes on
 * serving the good ones around them. */
static void post_tx_mix(struct vmio_fe *fe)
{
	/* A header field by field, and the frame length after it. */
	const struct {
		struct virtio_net_hdr h;
		uint32_t frame_len;
	} bad[] = {
		{ { .flags = VIRTIO_NET_HDR_F_DATA_VALID }, 64 },
		/* NEEDS_CSUM, but CSUM is not negotiated */
		{ { .flags = 1, .csum_start = htole16(34),
		    .csum_offset = htole16(6) }, 64 },
		{ { .flags = 1, .gso_type = VIRTIO_NET_HDR_GSO_TCPV4,
		    .hdr_len = htole16(54), .gso_size = htole16(1448),
		    .csum_start = htole16(34), .csum_offset = htole16(16) },
		  1500 },
		{ { .flags = 0x40 }, 64 },
		{ { .gso_size = htole16(1448) }, 64 }, /* without GSO */
		{ { .hdr_len = htole16(65) }, 64 },    /* beyond the frame */
		{ { 0 }, 13 },                        /* shorter than Ethernet */
		{ { 0 }, 1519 },                      /* above the MTU */
	};
	const struct virtio_net_hdr good = { 0 };
	struct vmio_dvq *q = vmio_fe_queue(fe, ROBUST_TX_QUEUE);
	uint8_t half_hdr[5] = { 0 };
	struct vmio_dbuf shortc = { .gpa = put(fe, half_hdr, 5), .len = 5 };

	post_frame(fe, good, 64);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		post_frame(fe, bad[i].h, bad[i].frame_len);
		post_frame(fe, good, 60 + (uint32_t)i);
	}
	/* A chain shorter than the header itself. */
	assert_true(vmio_dvq_add(q, &shortc, 1, (void *)1) >= 0);
	vmio_dvq_kick(q);
	reap(q, 1 + 2 * 8 + 1, NULL);
	/* And the queue still works. */
	post_frame(fe, good, 1518);
	vmio_dvq_kick(q);
	reap(q, 1, NULL);
}

/* Waits for the command's chain to come back as Linux's driver does
 * (virtnet_send_command spins on the used ring): the driver's next step
 * follows the device's push at once. */
static void spin_used(struct vmio_dvq *q, uint32_t *len)
{
	uint64_t end = vmio_now_ns() + HARNESS_WAIT_MS * 1000000ull;

	while (!vmio_dvq_get_used(q, len)) {
		if (vmio_now_ns() > end) {
			dump_log();
			fail_msg("queue %u: the command did not come back",
				 q->index);
		}
		sched_yield();
	}
}

/* One command with its ack byte; returns the ack (0xee if unwritten). */
static uint8_t ctrl_cmd(struct vmio_fe *fe, const uint8_t *cmd, uint32_t len,
			bool with_ack)
{
	struct vmio_dvq *q = vmio_fe_queue(fe, ROBUST_CTRL_QUEUE);
	uint8_t init = 0xee;
	uint64_t ack_gpa = put(fe, &init, 1);
	struct vmio_dbuf b[2] = {
		{ .gpa = put(fe, cmd, len), .len = len },
		{ .gpa = ack_gpa, .len = 1, .writable = true },
	};
	uint32_t written = 99;

	assert_true(vmio_dvq_add(q, b, with_ack ? 2 : 1, (void *)1) >= 0);
	vmio_dvq_kick(q);
	spin_used(q, &written);
	assert_int_equal(written, with_ack ? 1 : 0);
	return *(uint8_t *)vmio_fe_ptr(fe, ack_gpa);
}

#define CTRL_CMD(fe, ...)                                                          \
	ctrl_cmd(fe, (const uint8_t[]){ __VA_ARGS__ },                        \
		 sizeof((const uint8_t[]){ __VA_ARGS__ }), true)

static void post_ctrl_mix(struct vmio_fe *fe)
{
	assert_int_equal(CTRL_CMD(fe, VIRTIO_NET_CTRL_MQ, 0, 2, 0), VIRTIO_NET_OK);
	assert_int_equal(CTRL_CMD(fe, VIRTIO_NET_CTRL_MQ, 0, 3, 0), VIRTIO_NET_ERR);
	assert_int_equal(CTRL_CMD(fe, VIRTIO_NET_CTRL_MQ, 0, 0, 0), VIRTIO_NET_ERR);
	assert_int_equal(CTRL_CMD(fe, VIRTIO_NET_CTRL_RX, 0, 0), VIRTIO_NET_OK);
	assert_int_equal(CTRL_CMD(fe, VIRTIO_NET_CTRL_RX, 0, 2), VIRTIO_NET_ERR);
	assert_int_equal(CTRL_CMD(fe, VIRTIO_NET_CTRL_MAC, 0, 5, 0, 0, 0, 0, 0, 0,
			      0),
			 VIRTIO_NET_ERR);
	assert_int_equal(CTRL_CMD(fe, 0x77, 0), VIRTIO_NET_ERR);
	/* No ack byte to write: given back, unanswered, and counted. */
	assert_int_equal(ctrl_cmd(fe, (const uint8_t[]){ VIRTIO_NET_CTRL_RX, 1,
							 1 },
				  3, false),
			 0xee);
	/* A command longer than any the device takes. */
	{
		static uint8_t big[8192] = { VIRTIO_NET_CTRL_MAC, 0 };

		assert_int_equal(ctrl_cmd(fe, big, sizeof(big), true),
				 VIRTIO_NET_ERR);
	}
}

static void test_null_hostile_guest(void **state)
{
	const char *sock = harness_path("robust.sock");
	pid_t pid = start_net_queues(sock, "--null", NULL, "2", NULL);
	struct vmio_fe *fe;

	fe = robust_connect(sock);
	post_tx_mix(fe);
	post_ctrl_mix(fe);
	vmio_fe_close(fe);
	stop_net(pid);
	assert_int_equal(vmio_stat("tx_frames"), 1 + 8 + 1);
	assert_int_equal(vmio_stat("tx_dropped"), 8 + 1);
	assert_int_equal(vmio_stat("tx_bad_chain"), 1);
	assert_int_equal(vmio_stat("ctrl_ok"), 3);
	assert_int_equal(vmio_stat("ctrl_err"), 6);
}

/* A front end of our own: with no rx buffers the source leaves vmio
 * idle (the eventfd stays readable, the device stops watching it); the
 * frames that fill posted buffers are as documented. */
static void test_null_source_idle(void **state)
{
	enum { BUF = 2048, NBUF = 16, SIZE = 64 };
	const char *sock = harness_path("source-idle.sock");
	const uint64_t want = VMIO_BIT(VIRTIO_F_VERSION_1) |
			      VMIO_BIT(VIRTIO_RING_F_EVENT_IDX) |
			      VMIO_BIT(VIRTIO_NET_F_MRG_RXBUF);
	static const uint8_t eth[14] = {
		0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
		0x02, 0, 0, 0, 0, 0x01, 0x88, 0xb5,
	};
	pid_t pid = start_net_queues(sock, "--null", NULL, "1",
				     "--null-source=64");
	struct vmio_fe *fe = fe_connect(sock, want, 0, 0);
	struct vmio_dvq *q = vmio_fe_queue(fe, 0);
	uint64_t gpa[NBUF];
	uint32_t lens[NBUF];

	harness_expect_idle(pid, "with no buffers");
	for (unsigned i = 0; i < NBUF; i++) {
		struct vmio_dbuf b = { .gpa = vmio_fe_alloc(fe, BUF, 8),
				       .len = BUF, .writable = true };

		gpa[i] = b.gpa;
		memset(vmio_fe_ptr(fe, b.gpa), 0xaa, BUF);
		assert_true(vmio_dvq_add(q, &b, 1, (void *)1) >= 0);
	}
	vmio_dvq_kick(q);
	reap(q, NBUF, lens);
	for (unsigned i = 0; i < NBUF; i++) {
		const uint8_t *b = vmio_fe_ptr(fe, gpa[i]);
		const struct virtio_net_hdr *h = (const void *)b;
		static const uint8_t zero[SIZE - 14];

		assert_int_equal(lens[i], sizeof(*h) + SIZE);
		assert_int_equal(h->flags, 0);
		assert_int_equal(h->gso_type, 0);
		assert_int_equal(le16toh(h->num_buffers), 1);
		assert_memory_equal(b + sizeof(*h), eth, sizeof(eth));
		assert_memory_equal(b + sizeof(*h) + 14, zero, sizeof(zero));
	}
	/* The buffers are used up, the source never is: idle again. */
	harness_expect_idle(pid, "once the buffers ran out");
	vmio_fe_close(fe);
	stop_net(pid);
	assert_int_equal(vmio_stat("rx_frames"), NBUF);
	/* One kick, one turn: it filled every buffer and stopped for want
	 * of more, the source still full. */
	assert_int_equal(vmio_stat("rx_turns"), 1);
	assert_int_equal(vmio_stat("rx_buffers_exhausted"), 1);
}

/* Rounds of traffic on both queues of a pair, then a connected front end
 * that sends and posts nothing: with extra (NULL: the default polling
 * window) every frame is counted (from --control), and once the traffic
 * stops vmio's CPU over IDLE_MS, read from /proc, stays under
 * IDLE_TICKS_MAX: polling ends after its window, it does not go on
 * while the front end is idle. A vmio that kept polling would use every
 * tick of the window. */
static void poll_then_idle(const char *poll_us)
{
	enum { ROUNDS = 40, NTX = 32, NRX = 16, BUF = 2048, SIZE = 64 };
	enum { IDLE_MS = 3000, IDLE_TICKS_MAX = 15 };
	const char *sock = harness_path("poll-idle.sock");
	const uint64_t want = VMIO_BIT(VIRTIO_F_VERSION_1) |
			      VMIO_BIT(VIRTIO_RING_F_EVENT_IDX) |
			      VMIO_BIT(VIRTIO_NET_F_MRG_RXBUF);
	const struct virtio_net_hdr hdr = { 0 };
	static const uint8_t frame[SIZE];
	pid_t pid = start_net_queues2(sock, "--null", NULL, "1",
				      "--null-source=64", poll_us);
	struct vmio_fe *fe = fe_connect(sock, want, 0, 1);
	struct vmio_dvq *rxq = vmio_fe_queue(fe, 0), *txq = vmio_fe_queue(fe, 1);
	struct vmio_dbuf tx[2] = {
		{ .gpa = put(fe, &hdr, sizeof(hdr)), .len = sizeof(hdr) },
		{ .gpa = put(fe, frame, SIZE), .len = SIZE },
	};
	struct vmio_dbuf rx[NRX];
	long t0, t1;

	for (unsigned i = 0; i < NRX; i++)
		rx[i] = (struct vmio_dbuf){ .gpa = vmio_fe_alloc(fe, BUF, 8),
					    .len = BUF, .writable = true };
	for (unsigned r = 0; r < ROUNDS; r++) {
		for (unsigned i = 0; i < NTX; i++)
			assert_true(vmio_dvq_add(txq, tx, 2, (void *)1) >= 0);
		for (unsigned i = 0; i < NRX; i++)
			assert_true(vmio_dvq_add(rxq, &rx[i], 1, (void *)1) >= 0);
		vmio_dvq_kick(txq);
		vmio_dvq_kick(rxq);
		reap(txq, NTX, NULL);
		reap(rxq, NRX, NULL);
	}
	t0 = harness_cpu_ticks(pid);
	poll(NULL, 0, IDLE_MS);
	t1 = harness_cpu_ticks(pid);
	assert_true(t0 >= 0 && t1 >= 0);
	printf("# %s: vmio used %ld ticks in the %d ms after the traffic\n",
	       poll_us ? poll_us : "default", t1 - t0, IDLE_MS);
	vmio_fe_close(fe);
	stop_net(pid);
	assert_true(t1 - t0 <= IDLE_TICKS_MAX);
	assert_int_equal(vmio_stat("tx_frames"), ROUNDS * NTX);
	assert_int_equal(vmio_stat("rx_frames"), ROUNDS * NRX);
}

/* The default window. */
static void test_null_poll_default_idle(void **state)
{
	poll_then_idle(NULL);
}

/* The longest window --poll-us allows ends too. */
static void test_null_poll_longest_idle(void **state)
{
	poll_then_idle("--poll-us=1000");
}

/* ---- worker threads ---------------------------------------------------- */

/* `vmio net --null --queues 2 --threads 2` with testpmd on both pairs in
 * mode, until its counter passes TX_FRAMES. */
static pid_t threads_start(const char *sock, struct testpmd *t,
			   const char *mode)
{
	pid_t pid = start_net_queues(sock, "--null", NULL, "2", "--threads=2");

	testpmd_start_queues(t, sock, mode, 2);
	if (!testpmd_wait_counter(t, "TX-packets", TX_FRAMES, HARNESS_WAIT_MS)) {
		testpmd_stop(t, "TX-packets");
		fail_msg("testpmd sent fewer than %d frames in time",
			 TX_FRAMES);
	}
	return pid;
}

/* Each pair's CPU time in the counters: pair 1 is all worker 1 serves,
 * so its figure is at least that thread's CPU time (read before the
 * document, in clock ticks of 10 ms, and charged at most 10 ms late),
 * and the device's figure holds both pairs'. */
static void pair_cpu_matches_worker(const struct harness_thread *th,
				    unsigned n)
{
	long long pair0 = harness_json_num(net_doc, "queue_pairs.0.cpu_us"),
		  pair1 = harness_json_num(net_doc, "queue_pairs.1.cpu_us"),
		  vm = harness_json_num(net_doc, "devices.0.cpu_us");
	long w1 = harness_thread_ticks(th, n, "vmio-w1");

	printf("# cpu_us: pair 0 %lld, pair 1 %lld, device %lld; worker 1 "
	       "%ld ticks\n",
	       pair0, pair1, vm, w1);
	assert_true(pair0 > 0);
	assert_true(pair1 >= (w1 - 3) * 10000);
	/* The device's own part (its session, the control queue) is small
	 * beside the pairs' traffic: their kicks are theirs. */
	assert_true(vm >= pair0 + pair1);
	assert_true(vm - pair0 - pair1 <= (pair0 + pair1) / 20);
}

/* Pair 1 runs on worker 1, and every frame of both pairs is counted. */
static void test_threads_two_pairs(void **state)
{
	const char *sock = harness_path("threads.sock");
	struct harness_thread th[8];
	struct testpmd t;
	pid_t pid = threads_start(sock, &t, "txonly");
	long long sent = testpmd_stop(&t, "TX-packets"), got;
	/* After testpmd (which must not outlive a failed assertion). */
	unsigned n = harness_threads(pid, th, 8), workers = 0;

	/* (A sanitizer may add a thread of its own.) */
	for (unsigned i = 0; i < n; i++)
		workers += !strncmp(th[i].name, "vmio-w", 6);
	assert_int_equal(workers, 1);
	assert_true(harness_thread_ticks(th, n, "vmio-w1") > 0);
	stop_net(pid);
	got = vmio_stat("tx_frames");
	printf("# testpmd sent %lld on two queues, vmio counted %lld\n", sent,
	       got);
	/* What was in the two rings when testpmd stopped is not seen. */
	assert_true(got <= sent && sent - got <= 2 * 1024);
	assert_int_equal(vmio_stat("tx_dropped"), 0);
	pair_cpu_matches_worker(th, n);
}

/* SIGTERM while both workers are busy: a clean exit, the socket gone. */
static void test_threads_sigterm_busy(void **state)
{
	const char *sock = harness_path("threads-term.sock");
	struct testpmd t;
	pid_t pid = threads_start(sock, &t, "txonly");

	assert_int_equal(exit_code(harness_stop(pid, HARNESS_WAIT_MS)), 0);
	assert_int_equal(access(sock, F_OK), -1);
	testpmd_stop(&t, "TX-packets");
}

/* A second front end after the first: the pairs on worker 1 stop with the
 * first session and serve the second. */
static void test_threads_reconnect(void **state)
{
	const char *sock = harness_path("threads-again.sock");
	struct testpmd t;
	pid_t pid = threads_start(sock, &t, "txonly");
	long long first, second, got;

	first = testpmd_stop(&t, "TX-packets");
	testpmd_start_queues(&t, sock, "txonly", 2);
	if (!testpmd_wait_counter(&t, "TX-packets", TX_FRAMES, HARNESS_WAIT_MS)) {
		testpmd_stop(&t, "TX-packets");
		fail_msg("the second testpmd sent fewer than %d frames",
			 TX_FRAMES);
	}
	second = testpmd_stop(&t, "TX-packets");
	stop_net(pid);
	got = vmio_stat("tx_frames");
	printf("# sessions sent %lld and %lld, vmio counted %lld\n", first,
	       second, got);
	assert_true(got <= first + second);
	assert_true(first + second - got <= 4 * 1024);
	assert_true(got > first);
}

/* The memory table re-sent while pair 1's tx queue, on worker 1, has
 * chains out: the queue stops there before the table changes, gives
 * every chain back used, and serves the next ones from the new table. */
static void test_threads_mem_table_under_traffic(void **state)
{
	enum { ROUNDS = 24, BATCH = 32, PAIR1_TX = 3 };
	const char *sock = harness_path("threads-remap.sock");
	const uint64_t want = VMIO_BIT(VIRTIO_F_VERSION_1) |
			      VMIO_BIT(VIRTIO_NET_F_MQ) |
			      VMIO_BIT(VIRTIO_NET_F_CTRL_VQ);
	pid_t pid = start_net_queues(sock, "--null", NULL, "2", "--threads=2");
	struct vmio_fe *fe =
		fe_connect_mem(sock, want, PAIR1_TX, 0, 4 << 20, 2);
	struct vmio_dvq *q = vmio_fe_queue(fe, PAIR1_TX);
	const struct virtio_net_hdr good = { 0 };

	for (unsigned r = 0; r < ROUNDS; r++) {
		for (unsigned i = 0; i < BATCH; i++)
			post_frame_on(fe, PAIR1_TX, good, 60 + i);
		vmio_dvq_kick(q);
		assert_int_equal(vmio_fe_mem_resend(fe, 1 + r % 3), 0);
		reap(q, BATCH, NULL);
	}
	vmio_fe_close(fe);
	stop_net(pid);
	assert_int_equal(vmio_stat("tx_frames"), ROUNDS * BATCH);
	assert_int_equal(vmio_stat("tx_dropped"), 0);
}

/* ---- --tap ------------------------------------------------------------- */

/* The interface's counter from /proc/net/dev (this namespace's):
 * field 1 is rx packets, 9 tx packets. */
static long long dev_counter(const char *name, int field)
{
	FILE *f = fopen("/proc/net/dev", "r");
	char line[512];
	long long v = -1;
	size_t n = strlen(name);

	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		char *p = line;

		while (*p == ' ')
			p++;
		if (strncmp(p, name, n) || p[n] != ':')
			continue;
		p += n + 1;
		for (int i = 0; i <= field; i++)
			v = strtoll(p, &p, 10);
	}
	fclose(f);
	return v;
}

/* testpmd's txonly frames: 64 bytes, IPv4, UDP. */
static void check_txonly_frame(int fd)
{
	uint8_t buf[2048];
	ssize_t n = recv(fd, buf, sizeof(buf), 0);

	if (n < 0)
		fail_msg("no frame on the TAP's packet socket: %s",
			 strerror(errno));
	assert_int_equal(n, 64);
	assert_int_equal(buf[12], 0x08);
	assert_int_equal(buf[13], 0x00);
	assert_int_equal(buf[14 + 9], 17);
}

/* testpmd txonly through vmio's backend (name: the TAP, or the veth end
 * with the XSK) to peer (the TAP itself, or the veth's other end), where
 * the frames are counted and one is checked. */
static void guest_to_host(const char *backend, const char *name,
			  const char *peer, const char *queues,
			  const char *extra)
{
	const char *sock = harness_path(name);
	struct testpmd t;
	long long sent, got, arrived, before;
	pid_t pid;
	int pfd;

	netns_enter();
	pid = start_net_queues(sock, backend, name, queues, extra);
	netns_link_up(peer);
	/* A veth peer outlives a case: count from here. */
	before = dev_counter(peer, 1);
	pfd = netns_packet_socket(peer);
	testpmd_start(&t, sock, "txonly");
	if (!testpmd_wait_counter(&t, "TX-packets", TX_FRAMES, HARNESS_WAIT_MS))
		printf("# testpmd sent fewer than %d frames in time\n",
			      TX_FRAMES);
	sent = testpmd_stop(&t, "TX-packets");
	arrived = dev_counter(peer, 1) - before;
	check_txonly_frame(pfd);
	close(pfd);
	stop_net(pid);
	got = vmio_stat("tx_frames");
	printf("# testpmd sent %lld, vmio wrote %lld (dropped %lld), %s "
	       "received %lld\n", sent, got, vmio_stat("tx_dropped"), peer,
	       arrived);
	assert_true(sent >= TX_FRAMES);
	assert_true(got <= sent && sent - got <= 1024);
	assert_int_equal(arrived, got);
}

static void test_tap_guest_to_host(void **state)
{
	guest_to_host("--tap", "vmiot0", "vmiot0", "1", NULL);
}

/* n frames out of the TAP (towards the guest), through fd, a
 * packet_socket of it. With flows set, each is a UDP datagram from its
 * own source port, so that the kernel's flow hash spreads them over
 * every queue it may use. */
static void send_frames_on(int fd, const char *name, int n, bool flows)
{
	struct sockaddr_ll to = {
		.sll_family = AF_PACKET,
		.sll_protocol = htons(flows ? ETH_P_IP : 0x88b5),
		.sll_ifindex = (int)if_nametoindex(name),
		.sll_halen = 6,
	};
	uint8_t frame[60] = {
		0xff, 0xff, 0xff, 0xff, 0xff, 0xff, /* broadcast */
		0x02, 0, 0, 0, 0, 0x01, 0x88, 0xb5, /* local experimental */
	};
	static const uint8_t ip_udp[28] = {
		0x45, 0, 0, 46, 0, 0, 0x40, 0, 64, 17, 0, 0, /* IPv4, UDP */
		10, 0, 0, 1, 10, 0, 0, 2,                    /* addresses */
		0, 0, 0, 9, 0, 26, 0, 0,                     /* ports, len */
	};

	memset(to.sll_addr, 0xff, 6);
	if (flows) {
		frame[12] = 0x08;
		frame[13] = 0x00;
		memcpy(frame + 14, ip_udp, sizeof(ip_udp));
	}
	for (int i = 0; i < n; i++) {
		if (flows) {
			frame[34] = (uint8_t)(0x80 | i >> 8);
			frame[35] = (uint8_t)i;
		} else {
			memcpy(frame + 14, &i, sizeof(i));
		}
		assert_int_equal(sendto(fd, frame, sizeof(frame), 0,
					(struct sockaddr *)&to, sizeof(to)),
				 (ssize_t)sizeof(frame));
	}
}

static void send_frames(const char *name, int n, bool flows)
{
	int fd = netns_packet_socket(name);

	send_frames_on(fd, name, n, flows);
	close(fd);
}

/* RX_FRAMES sent into peer (the TAP itself, or the veth end across from
 * the XSK's) with vmio's backend on name in `queues` pairs reach testpmd
 * rxonly (one pair) through vmio; every one of them, and nothing else. */
static void host_to_guest(const char *backend, const char *name,
			  const char *peer, const char *queues, bool flows,
			  const char *extra)
{
	const char *sock = harness_path(name);
	struct testpmd t;
	long long received, delivered;
	pid_t pid;

	netns_enter();
	pid = start_net_queues(sock, backend, name, queues, extra);
	netns_link_up(peer);
	testpmd_start(&t, sock, "rxonly");
	/* Its first statistics mean its port is started. */
	if (!testpmd_wait_counter(&t, "RX-packets", 0, HARNESS_WAIT_MS))
		fail_msg("testpmd did not start");
	/* In bursts smaller than the guest's ring (256 buffers): without a
	 * copy, the guest's buffers (and the pair's reserve) are all the
	 * room there is, and like a NIC's an XSK drops what finds none. Two
	 * bursts: each waits for testpmd's counters, printed once a second. */
	for (int sent = 0; sent < RX_FRAMES; sent += RX_BURST) {
		send_frames(peer, RX_BURST, flows);
		if (!testpmd_wait_counter(&t, "RX-packets", sent + RX_BURST,
					  HARNESS_WAIT_MS)) {
			printf("# testpmd received fewer than %d frames in "
			       "time\n", sent + RX_BURST);
			break;
		}
	}
	received = testpmd_stop(&t, "RX-packets");
	stop_net(pid);
	delivered = vmio_stat("rx_frames");
	printf("# %d %s into %s (%s %s, %s queue(s)), vmio delivered %lld, "
	       "testpmd received %lld\n", RX_FRAMES, flows ? "flows" : "frames",
	       peer, backend, name, queues, delivered, received);
	assert_int_equal(received, RX_FRAMES);
	assert_int_equal(delivered, RX_FRAMES);
	assert_int_equal(vmio_stat("rx_errors"), 0);
}

static void test_tap_host_to_guest(void **state)
{
	host_to_guest("--tap", "vmiot1", "vmiot1", "1", false, NULL);
}

/* Two queue pairs on the TAP, a front end that serves one: the kernel
 * must not steer any flow to the queue no one reads. */
static void test_tap_multiqueue_one_served(void **state)
{
	host_to_guest("--tap", "vmiot2", "vmiot2", "2", true, NULL);
}

/* `vmio net` with backend on name (up) in the test's namespace, and the
 * in-tree front end on it with features want, guest memory of size bytes
 * in regions regions, and queue set up. */
struct net_fe {
	pid_t pid;
	struct vmio_fe *fe;
	struct vmio_dvq *q;
};

static void net_fe_start_opt(struct net_fe *t, const char *backend,
			     const char *name, uint64_t want, unsigned queue,
			     uint64_t size, unsigned regions,
			     const char *extra)
{
	const char *sock = harness_path(name);

	netns_enter();
	t->pid = start_net_queues(sock, backend, name, "1", extra);
	netns_link_up(name);
	t->fe = fe_connect_mem(sock, want, queue, 0, size, regions);
	t->q = vmio_fe_queue(t->fe, queue);
}

static void net_fe_start(struct net_fe *t, const char *backend,
			 const char *name, uint64_t want, unsigned queue,
			 uint64_t size, unsigned regions)
{
	net_fe_start_opt(t, backend, name, want, queue, size, regions, NULL);
}

static void tap_fe_start(struct net_fe *t, const char *tap, uint64_t want,
			 unsigned queue)
{
	net_fe_start(t, "--tap", tap, want, queue, 1 << 20, 1);
}

static void net_fe_stop(struct net_fe *t)
{
	vmio_fe_close(t->fe);
	stop_net(t->pid);
}

/* One frame into the TAP, and its bytes and num_buffers as a front end
 * with MRG_RXBUF sees them in small rx buffers. */
static void check_mrg_frame(struct vmio_fe *fe, const uint64_t *gpa,
			    uint32_t buf_len, uint32_t frame_len,
			    unsigned nbufs, const uint32_t *lens)
{
	const struct virtio_net_hdr *h = vmio_fe_ptr(fe, gpa[0]);
	uint32_t left = frame_len + (uint32_t)sizeof(*h);

	assert_int_equal(le16toh(h->num_buffers), nbufs);
	assert_int_equal(h->flags, 0);
	for (unsigned i = 0; i < nbufs; i++) {
		uint32_t want = left < buf_len ? left : buf_len;

		assert_int_equal(lens[i], want);
		left -= want;
	}
	assert_int_equal(left, 0);
}

/* A frame larger than one rx buffer spans several (MRG_RXBUF); with too
 * few buffers for the largest frame, vmio waits for more rather than
 * reading into them and losing the frame, and the guest's next post
 * wakes it. A buffer smaller than the header is given back unused. */
static void test_tap_mrg_rxbuf(void **state)
{
	enum { BUF = 256, NBUF = 16, FIRST_POST = 4 };
	const uint64_t want = VMIO_BIT(VIRTIO_F_VERSION_1) |
			      VMIO_BIT(VIRTIO_RING_F_EVENT_IDX) |
			      VMIO_BIT(VIRTIO_NET_F_MRG_RXBUF);
	const char *tap = "vmiot3";
	uint64_t gpa[NBUF];
	uint32_t lens[NBUF];
	struct net_fe t;
	struct vmio_fe *fe;
	struct vmio_dvq *q;
	int pfd;

	tap_fe_start(&t, tap, want, 0);
	fe = t.fe;
	q = t.q;
	/* First a buffer too small for the header: given back empty. */
	{
		struct vmio_dbuf tiny = { .gpa = vmio_fe_alloc(fe, 4, 8),
					  .len = 4, .writable = true };

		assert_true(vmio_dvq_add(q, &tiny, 1, (void *)2) >= 0);
	}
	for (unsigned i = 0; i < NBUF; i++) {
		struct vmio_dbuf b = { .len = BUF, .writable = true };

		gpa[i] = b.gpa = vmio_fe_alloc(fe, BUF, 8);
		assert_true(gpa[i] != UINT64_MAX);
		if (i < FIRST_POST)
			assert_true(vmio_dvq_add(q, &b, 1, (void *)1) >= 0);
	}
	vmio_dvq_kick(q);
	pfd = netns_packet_socket(tap);
	{
		struct sockaddr_ll to = {
			.sll_family = AF_PACKET,
			.sll_protocol = htons(0x88b5),
			.sll_ifindex = (int)if_nametoindex(tap),
			.sll_halen = 6,
		};
		static uint8_t frame[1000] = { 0xff, 0xff, 0xff, 0xff, 0xff,
					       0xff, 2,    0,    0,    0,
					       0,    1,    0x88, 0xb5 };

		assert_int_equal(sendto(pfd, frame, sizeof(frame), 0,
					(struct sockaddr *)&to, sizeof(to)),
				 (ssize_t)sizeof(frame));
	}
	close(pfd);
	reap(q, 1, lens);
	assert_int_equal(lens[0], 0);
	/* 4 x 256 bytes cannot hold the largest frame (1518 + 12): nothing
	 * more comes back. Absence has no event to wait for: a short
	 * bound. */
	vmio_dvq_want_interrupt(q);
	vmio_dvq_wait(q, 200);
	assert_null(vmio_dvq_get_used(q, NULL));
	for (unsigned i = FIRST_POST; i < NBUF; i++) {
		struct vmio_dbuf b = { .gpa = gpa[i], .len = BUF,
				       .writable = true };

		assert_true(vmio_dvq_add(q, &b, 1, (void *)1) >= 0);
	}
	vmio_dvq_kick(q);
	reap(q, 4, lens);
	check_mrg_frame(fe, gpa, BUF, 1000, 4, lens);
	net_fe_stop(&t);
	assert_int_equal(vmio_stat("rx_frames"), 1);
	assert_int_equal(vmio_stat("rx_errors"), 1);
}

/* A TCP/IPv4 frame of len bytes for TSO: Ethernet, IP and TCP headers
 * (54 bytes, the checksum left to the kernel), then zeros. */
static void tso_frame(uint8_t *f, uint32_t len)
{
	static const uint8_t hdrs[54] = {
		0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x01, 0x08, 0x00,
		0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 6, 0, 0, 10, 0, 0, 1, 10, 0,
		0, 2, 0x30, 0x39, 0, 80, 0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x10,
		0xff, 0xff, 0, 0, 0, 0,
	};

	memset(f, 0, len);
	memcpy(f, hdrs, sizeof(hdrs));
	f[16] = (uint8_t)((len - 14) >> 8); /* IP total length */
	f[17] = (uint8_t)(len - 14);
}

/* With --tap the offloads are offered, and the kernel takes a TSO frame
 * whose header vmio checked; a bad GSO header never reaches it. */
static void test_tap_offloads(void **state)
{
	enum { LEN = 3000 };
	const char *tap = "vmiot4";
	const uint64_t want = VMIO_BIT(VIRTIO_F_VERSION_1) |
			      VMIO_BIT(VIRTIO_RING_F_EVENT_IDX) |
			      VMIO_BIT(VIRTIO_NET_F_CSUM) |
			      VMIO_BIT(VIRTIO_NET_F_HOST_TSO4) |
			      VMIO_BIT(VIRTIO_NET_F_GUEST_CSUM) |
			      VMIO_BIT(VIRTIO_NET_F_GUEST_TSO4);
	static uint8_t frame[LEN];
	struct virtio_net_hdr tso = {
		.flags = VIRTIO_NET_HDR_F_NEEDS_CSUM,
		.gso_type = VIRTIO_NET_HDR_GSO_TCPV4,
		.hdr_len = htole16(54),
		.gso_size = htole16(1448),
		.csum_start = htole16(34),
		.csum_offset = htole16(16),
	};
	struct virtio_net_hdr bad = tso;
	struct net_fe t;

	tap_fe_start(&t, tap, want, 1);
	tso_frame(frame, LEN);
	bad.gso_size = 0;
	for (unsigned i = 0; i < 2; i++) {
		struct vmio_dbuf b[2] = {
			{ .gpa = put(t.fe, i ? &bad : &tso, sizeof(tso)),
			  .len = sizeof(tso) },
			{ .gpa = put(t.fe, frame, LEN), .len = LEN },
		};

		assert_true(vmio_dvq_add(t.q, b, 2, (void *)1) >= 0);
	}
	vmio_dvq_kick(t.q);
	reap(t.q, 2, NULL);
	assert_int_equal(dev_counter(tap, 1), 1);
	net_fe_stop(&t);
	assert_int_equal(vmio_stat("tx_frames"), 1);
	assert_int_equal(vmio_stat("tx_dropped"), 1);
	assert_int_equal(vmio_stat("tx_backend_errors"), 0);
}

/* Frames waiting in the TAP and a guest with no rx buffers: vmio stops
 * watching the TAP (it would poll readable forever) and sleeps until the
 * guest posts some, then delivers. */
static void test_tap_no_rx_buffers_idle(void **state)
{
	enum { BUF = 2048, NBUF = 16 };
	const char *tap = "vmiot5";
	const uint64_t want = VMIO_BIT(VIRTIO_F_VERSION_1) |
			      VMIO_BIT(VIRTIO_RING_F_EVENT_IDX) |
			      VMIO_BIT(VIRTIO_NET_F_MRG_RXBUF);
	struct net_fe t;

	tap_fe_start(&t, tap, want, 0);
	send_frames(tap, 200, false);
	harness_expect_idle(t.pid, "with frames and no buffers");
	for (unsigned i = 0; i < NBUF; i++) {
		struct vmio_dbuf b = { .gpa = vmio_fe_alloc(t.fe, BUF, 8),
				       .len = BUF, .writable = true };

		assert_true(vmio_dvq_add(t.q, &b, 1, (void *)1) >= 0);
	}
	vmio_dvq_kick(t.q);
	reap(t.q, NBUF, NULL);
	/* The buffers are used up and frames still wait: idle again. */
	harness_expect_idle(t.pid, "with frames, once the buffers ran out");
	net_fe_stop(&t);
	assert_int_equal(vmio_stat("rx_frames"), NBUF);
}

/* One len-byte receive buffer on q; its gpa is the token. */
static uint64_t post_rx(struct vmio_fe *fe, struct vmio_dvq *q, uint32_t len)
{
	struct vmio_dbuf b = { .gpa = vmio_fe_alloc(fe, len, 64), .len = len,
			       .writable = true };

	assert_true(b.gpa != UINT64_MAX);
	assert_true(vmio_dvq_add(q, &b, 1, (void *)(uintptr_t)b.gpa) >= 0);
	return b.gpa;
}

/* Takes what came back on q (buffers of len bytes, posted by post_rx)
 * and posts each buffer again, as a guest keeps its rx ring full.
 * Returns how many came back. */
static unsigned reap_repost(struct vmio_dvq *q, uint32_t len)
{
	unsigned got = 0;
	void *token;

	while ((token = vmio_dvq_get_used(q, NULL))) {
		struct vmio_dbuf b = { .gpa = (uintptr_t)token, .len = len,
				       .writable = true };

		assert_true(vmio_dvq_add(q, &b, 1, token) >= 0);
		got++;
	}
	if (got)
		vmio_dvq_kick(q);
	return got;
}

/* Waits until n frames came back on a and b together, in buffers of len
 * bytes that it posts again; returns how many on a. */
static unsigned reap_two(struct vmio_dvq *a, struct vmio_dvq *b, unsigned n,
			 uint32_t len)
{
	unsigned on_a = 0, got = 0;

	for (int rounds = 0; got < n && rounds < HARNESS_WAIT_MS / 50;
	     rounds++) {
		unsigned now_a;

		vmio_dvq_want_interrupt(a);
		vmio_dvq_want_interrupt(b);
		now_a = reap_repost(a, len);
		on_a += now_a;
		got += now_a + reap_repost(b, len);
		if (got < n)
			vmio_dvq_wait(a, 50);
	}
	if (got != n) {
		dump_log();
		fail_msg("%u of %u frames came back on queues %u and %u", got,
			 n, a->index, b->index);
	}
	return on_a;
}

/* Two pairs on a TAP, the control queue in vmio's hands, pair 1 on a
 * worker thread of its own or not (workers: vmio's threads besides the
 * main one, with extra, its --threads). The guest starts on one pair
 * (every flow on queue 0). The ack of VQ_PAIRS_SET says how vmio steers
 * from then on (virtio 1.2, 5.1.6.5.5): the first frames sent after the
 * ack of VQ_PAIRS_SET 2 spread over both pairs, and after the ack of
 * VQ_PAIRS_SET 1 every one comes to the first (one sent to the second's
 * TAP queue, being detached, would be lost). Several rounds: a device
 * that acks before it steers loses that race often, not always. */
static void mq_pairs_set(const char *tap, const char *extra,
			 unsigned workers)
{
	enum { BUF = 2048, NBUF = 120, FLOWS = 40, ROUNDS = 10 };
	const char *sock = harness_path(tap);
	const uint64_t want = VMIO_BIT(VIRTIO_F_VERSION_1) |
			      VMIO_BIT(VIRTIO_RING_F_EVENT_IDX) |
			      VMIO_BIT(VIRTIO_NET_F_MRG_RXBUF) |
			      VMIO_BIT(VIRTIO_NET_F_CTRL_VQ) |
			      VMIO_BIT(VIRTIO_NET_F_MQ);
	struct harness_thread th[8];
	struct vmio_fe *fe;
	struct vmio_dvq *rx0, *rx1;
	unsigned n, threads = 0;
	pid_t pid;
	int fd;

	netns_enter();
	pid = start_net_queues(sock, "--tap", tap, "2", extra);
	netns_link_up(tap);
	fe = vmio_fe_connect(sock, HARNESS_WAIT_MS);
	assert_non_null(fe);
	assert_int_equal(vmio_fe_negotiate(fe, want,
					   VMIO_BIT(VHOST_USER_PROTOCOL_F_MQ)),
			 0);
	assert_int_equal(fe->features & want, want);
	assert_int_equal(vmio_fe_mem_create(fe, 4 << 20, 1), 0);
	assert_int_equal(vmio_fe_queue_setup(fe, 0, 128), 0);
	assert_int_equal(vmio_fe_queue_setup(fe, 2, 128), 0);
	assert_int_equal(vmio_fe_queue_setup(fe, ROBUST_CTRL_QUEUE, 64), 0);
	rx0 = vmio_fe_queue(fe, 0);
	rx1 = vmio_fe_queue(fe, 2);
	for (unsigned i = 0; i < NBUF; i++) {
		post_rx(fe, rx0, BUF);
		post_rx(fe, rx1, BUF);
	}
	vmio_dvq_kick(rx0);
	vmio_dvq_kick(rx1);
	/* (A sanitizer may add a thread of its own.) */
	n = harness_threads(pid, th, 8);
	for (unsigned i = 0; i < n; i++)
		threads += !strncmp(th[i].name, "vmio-w", 6);
	assert_int_equal(threads, workers);

	/* Made before: the frames follow the ack at once. */
	fd = netns_packet_socket(tap);
	send_frames_on(fd, tap, FLOWS, true);
	assert_int_equal(reap_two(rx0, rx1, FLOWS, BUF), FLOWS);
	for (unsigned r = 0; r < ROUNDS; r++) {
		unsigned on0;

		assert_int_equal(CTRL_CMD(fe, VIRTIO_NET_CTRL_MQ, 0, 2, 0),
				 VIRTIO_NET_OK);
		send_frames_on(fd, tap, FLOWS, true);
		on0 = reap_two(rx0, rx1, FLOWS, BUF);
		printf("# round %u, 2 pairs: %u of %d flows on the first\n",
		       r, on0, FLOWS);
		assert_true(on0 > 0 && on0 < FLOWS);

		assert_int_equal(CTRL_CMD(fe, VIRTIO_NET_CTRL_MQ, 0, 1, 0),
				 VIRTIO_NET_OK);
		send_frames_on(fd, tap, FLOWS, true);
		assert_int_equal(reap_two(rx0, rx1, FLOWS, BUF), FLOWS);
	}
	close(fd);

	vmio_fe_close(fe);
	stop_net(pid);
	assert_int_equal(vmio_stat("rx_frames"), (1 + 2 * ROUNDS) * FLOWS);
}

/* By default each pair has a worker thread: pair 1 is steered on
 * worker 1 while the control queue runs on the main thread. */
static void test_tap_mq_pairs_set(void **state)
{
	mq_pairs_set("vmiot6", NULL, 1);
}

/* Both pairs and the control queue on one thread. */
static void test_tap_mq_pairs_set_one_thread(void **state)
{
	mq_pairs_set("vmiot7", "--threads=1", 0);
}

/* ---- --xdp --------------------------------------------------------- */

/* A veth pair of `queues` queues each way in the test's namespace, both
 * ends up: vmio's XSKs go on a, the test talks through b. */
static void veth_pair(const char *a, const char *b, unsigned queues)
{
	char cmd[256];

	netns_enter();
	if (if_nametoindex(a))
		return;
	snprintf(cmd, sizeof(cmd),
		 "ip link add %s numtxqueues %u numrxqueues %u type veth peer "
		 "name %s numtxqueues %u numrxqueues %u >&2",
		 a, queues, queues, b, queues, queues);
	if (system(cmd) != 0)
		fail_msg("cannot create the veth pair %s/%s (%s)", a, b, cmd);
	netns_link_up(a);
	netns_link_up(b);
}

/* The log says how the pair ran: want, and not the other way. */
static void expect_mode(const char *want, const char *not)
{
	if (!log_has(want) || log_has(not)) {
		dump_log();
		fail_msg("the log lacks '%s' or has '%s'", want, not);
	}
}

/* iface's pair 0 ran without a copy: said when it went onto guest
 * memory, and no word of falling back. */
static void expect_nocopy(const char *iface)
{
	char want[96], not[96];

	snprintf(want, sizeof(want), "%s queue 0 (pair 0): no-copy (native XDP)",
		 iface);
	snprintf(not, sizeof(not), "xdp %s: no copy-free path", iface);
	expect_mode(want, not);
}

/* The default: guest memory is the UMEM, frames go out of it as they
 * lie. */
static void test_xdp_guest_to_host(void **state)
{
	veth_pair("vmiox0", "vmiox1", 1);
	guest_to_host("--xdp", "vmiox0", "vmiox1", "1", NULL);
	expect_nocopy("vmiox0");
}

static void test_xdp_guest_to_host_copy(void **state)
{
	veth_pair("vmiox8", "vmiox9", 1);
	guest_to_host("--xdp", "vmiox8", "vmiox9", "1", "--xdp-copy");
	expect_mode("pair 0: xdp copy (native XDP)",
		    "vmiox8 queue 0 (pair 0): no-copy");
}

/* Frames above 1518 bytes do not fit the smallest buffer a Linux guest
 * posts: with --mtu above 1500 the pair copies, and says why, once. */
static void test_xdp_big_mtu_copies(void **state)
{
	veth_pair("vmioxi", "vmioxj", 1);
	guest_to_host("--xdp", "vmioxi", "vmioxj", "1", "--mtu=3000");
	expect_mode("xdp vmioxi: no copy-free path: a frame above 1518 bytes",
		    "vmioxi queue 0 (pair 0): no-copy");
}

/* Two XSKs, on queues 0 and 1 of a two-queue veth; testpmd sends on the
 * first pair. */
static void test_xdp_two_pairs(void **state)
{
	veth_pair("vmiox6", "vmiox7", 2);
	guest_to_host("--xdp", "vmiox6", "vmiox7", "2", NULL);
	if (!log_has("vmiox6 queue 1 (pair 1): native XDP"))
		fail_msg("no XSK on the second queue");
}

/* Frames a packet socket on name has seen arrive, added to *seen. */
static void count_arrived(int fd, int *seen)
{
	uint8_t buf[256];
	struct sockaddr_ll from;
	socklen_t len = sizeof(from);

	while (recvfrom(fd, buf, sizeof(buf), 0, (struct sockaddr *)&from,
			&len) > 0) {
		if (from.sll_pkttype != PACKET_OUTGOING)
			(*seen)++;
		len = sizeof(from);
	}
}

/* Two XSKs on a two-queue veth, a front end that serves one pair: the
 * flows the veth puts on the second queue are not left in an XSK no one
 * reads but go up to the host's stack (a packet socket on the interface
 * sees them), and every other one reaches the guest. Unlike TAP, where
 * the kernel steers flows to the queues attached, which queue a frame
 * arrives on is the interface's choice. */
static void test_xdp_multiqueue_one_served(void **state)
{
	const char *sock = harness_path("vmioxg");
	long long received = 0;
	struct testpmd t;
	int seen = 0, pfd;
	pid_t pid;

	veth_pair("vmioxg", "vmioxh", 2);
	pid = start_net_queues(sock, "--xdp", "vmioxg", "2", NULL);
	pfd = netns_packet_socket("vmioxg");
	testpmd_start(&t, sock, "rxonly");
	if (!testpmd_wait_counter(&t, "RX-packets", 0, HARNESS_WAIT_MS))
		fail_msg("testpmd did not start");
	count_arrived(pfd, &seen);
	seen = 0;
	send_frames("vmioxh", RX_BURST, true);
	for (int i = 0; i < HARNESS_WAIT_MS / 1000; i++) {
		count_arrived(pfd, &seen);
		if (testpmd_wait_counter(&t, "RX-packets", RX_BURST - seen,
					 1000))
			break;
	}
	received = testpmd_stop(&t, "RX-packets");
	count_arrived(pfd, &seen);
	close(pfd);
	stop_net(pid);
	printf("# %d flows into vmioxh, 2 XSKs, pair 0 served: testpmd "
	       "received %lld, the host's stack %d\n", RX_BURST, received,
	       seen);
	assert_int_equal(received + seen, RX_BURST);
	assert_true(received > 0);
	assert_true(seen > 0);
	assert_int_equal(vmio_stat("rx_errors"), 0);
}

/* The guest's receive buffers on the fill ring: the kernel writes frames
 * straight into them. */
static void test_xdp_host_to_guest(void **state)
{
	veth_pair("vmiox2", "vmiox3", 1);
	host_to_guest("--xdp", "vmiox2", "vmiox3", "1", false, NULL);
	expect_nocopy("vmiox2");
}

static void test_xdp_host_to_guest_copy(void **state)
{
	veth_pair("vmioxa", "vmioxb", 1);
	host_to_guest("--xdp", "vmioxa", "vmioxb", "1", false, "--xdp-copy");
	expect_mode("pair 0: xdp copy (native XDP)",
		    "vmioxa queue 0 (pair 0): no-copy");
}

/* A 1000-byte frame numbered seq, into the veth end name. */
static void send_numbered(int fd, const char *name, uint8_t seq,
			  uint8_t *frame, size_t len)
{
	struct sockaddr_ll to = {
		.sll_family = AF_PACKET,
		.sll_protocol = htons(0x88b5),
		.sll_ifindex = (int)if_nametoindex(name),
		.sll_halen = 6,
	};
	static const uint8_t eth[14] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
					 2,    0,    0,    0,    0,    1,
					 0x88, 0xb5 };

	memcpy(frame, eth, sizeof(eth));
	for (size_t i = sizeof(eth); i < len; i++)
		frame[i] = (uint8_t)(seq + i);
	assert_int_equal(sendto(fd, frame, len, 0, (struct sockaddr *)&to,
				sizeof(to)),
			 (ssize_t)len);
}

/* The device's avail_event (EVENT_IDX): the avail index it has read up
 * to, as it last told the driver. */
static uint16_t avail_event(const struct vmio_dvq *q)
{
	const uint16_t *ev = (const uint16_t *)&q->used->ring[q->size];

	return le16toh(__atomic_load_n(ev, __ATOMIC_ACQUIRE));
}

/* Waits until vmio has handed every rx buffer published on q to the
 * kernel. A no-copy pair posts them with kicks off and turns kicks back on
 * (avail_event = its avail index) only once it has posted all there are,
 * each on the fill ring as it goes: avail_event at avail->idx proves the
 * buffers are there for the next frame, which then cannot be dropped. */
static void wait_rx_posted(struct vmio_dvq *q)
{
	assert_true(q->event_idx);
	for (int waited = 0; waited < HARNESS_WAIT_MS; waited++) {
		if (avail_event(q) == q->avail_idx)
			return;
		usleep(1000);
	}
	dump_log();
	fail_msg("queue %u: vmio took rx buffers up to %u of %u", q->index,
		 avail_event(q), q->avail_idx);
}

/* Sends frame seq into name once, its buffer posted (wait_rx_posted), and
 * waits for the buffer of q that comes back with it. Sent once: a frame
 * sent again would take another buffer that the test counts on coming
 * back empty. Returns the buffer's length and its token. */
static void send_and_receive(int fd, const char *name, uint8_t seq,
			     uint8_t *frame, size_t len, struct vmio_dvq *q,
			     uint32_t *got_len, void **token)
{
	wait_rx_posted(q);
	send_numbered(fd, name, seq, frame, len);
	for (int waited = 0; waited < HARNESS_WAIT_MS; waited += 100) {
		vmio_dvq_want_interrupt(q);
		if ((*token = vmio_dvq_get_used(q, got_len)))
			return;
		vmio_dvq_wait(q, 100);
		if ((*token = vmio_dvq_get_used(q, got_len)))
			return;
	}
	dump_log();
	fail_msg("frame %u, sent once onto posted buffers, never reached "
		 "queue %u", seq, q->index);
}

/* Receive without a copy, driven by a front end of ours over guest memory
 * in two regions: a buffer too small for a frame in place comes back
 * empty and counted; frames land in the others behind the header, byte
 * for byte; the kernel's buffers come back when the memory table is sent
 * again (and frames flow after), and when the queue stops. */
static void test_xdp_nocopy_rx_buffers(void **state)
{
	enum { FRAME = 1000, BUF = 2048 };
	const uint64_t want = VMIO_BIT(VIRTIO_F_VERSION_1) |
			      VMIO_BIT(VIRTIO_RING_F_EVENT_IDX) |
			      VMIO_BIT(VIRTIO_NET_F_MRG_RXBUF);
	static uint8_t frame[FRAME];
	uint32_t lens[4];
	void *tokens[4];
	struct net_fe t;
	struct vmio_fe *fe;
	struct vmio_dvq *q;
	uint16_t base;
	int pfd;

	veth_pair("vmioxc", "vmioxd", 1);
	net_fe_start(&t, "--xdp", "vmioxc", want, 0, 4 << 20, 2);
	fe = t.fe;
	q = t.q;
	pfd = netns_packet_socket("vmioxd");

	post_rx(fe, q, 100);
	vmio_dvq_kick(q);
	reap(q, 1, lens);
	assert_int_equal(lens[0], 0);

	for (int i = 0; i < 3; i++)
		post_rx(fe, q, BUF);
	vmio_dvq_kick(q);
	for (uint8_t seq = 0; seq < 2; seq++) {
		const struct virtio_net_hdr *h;

		send_and_receive(pfd, "vmioxd", seq, frame, FRAME, q, lens,
				    tokens);
		assert_int_equal(lens[0], sizeof(*h) + FRAME);
		h = vmio_fe_ptr(fe, (uint64_t)(uintptr_t)tokens[0]);
		assert_int_equal(le16toh(h->num_buffers), 1);
		assert_int_equal(h->flags, 0);
		assert_int_equal(h->gso_type, 0);
		assert_memory_equal(h + 1, frame, FRAME);
	}

	/* One buffer is with the kernel: a new table takes it back
	 * (empty), and the pair works on the new one. */
	assert_int_equal(vmio_fe_mem_resend(fe, 2), 0);
	reap(q, 1, lens);
	assert_int_equal(lens[0], 0);
	post_rx(fe, q, BUF);
	vmio_dvq_kick(q);
	send_and_receive(pfd, "vmioxd", 7, frame, FRAME, q, lens, tokens);
	assert_int_equal(lens[0], sizeof(struct virtio_net_hdr) + FRAME);
	assert_memory_equal((const struct virtio_net_hdr *)vmio_fe_ptr(
				    fe, (uint64_t)(uintptr_t)tokens[0]) + 1,
			    frame, FRAME);

	/* Three more with the kernel (every frame above was sent once):
	 * the queue's stop gives them back before its index is read. */
	for (int i = 0; i < 3; i++)
		post_rx(fe, q, BUF);
	vmio_dvq_kick(q);
	assert_int_equal(vmio_fe_queue_stop(fe, 0, &base), 0);
	assert_int_equal(base, 8);
	reap(q, 3, lens);
	for (int i = 0; i < 3; i++)
		assert_int_equal(lens[i], 0);
	close(pfd);
	net_fe_stop(&t);
	assert_int_equal(vmio_stat("rx_frames"), 3);
	/* The small buffer; the ones taken back are not errors. */
	assert_int_equal(vmio_stat("rx_errors"), 1);
	expect_nocopy("vmioxc");
}

/* A counter of pair 0's backend ("rx_reserve"), read now from the
 * --control socket ("name=N" words of backend_counters). */
static long long backend_counter(const char *name)
{
	json_t *doc = harness_control_get(net_ctl);
	const char *s = json_string_value(json_object_get(
		json_array_get(json_object_get(doc, "queue_pairs"), 0),
		"backend_counters"));
	size_t n = strlen(name);
	long long v = -1;

	for (const char *p = s; p && *p; p = strchr(p, ' '), p = p ? p + 1 : p)
		if (!strncmp(p, name, n) && p[n] == '=') {
			v = strtoll(p + n + 1, NULL, 10);
			break;
		}
	json_decref(doc);
	if (v < 0)
		fail_msg("no %s in backend_counters '%s'", name, s ? s : "");
	return v;
}

/* Frame seq of the reserve case: its length, 60 to 1459 bytes. */
static size_t seq_len(uint32_t seq)
{
	return 60 + (seq * 97u) % 1400;
}

static void seq_frame(uint32_t seq, uint8_t *frame)
{
	static const uint8_t eth[14] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
					 2,    0,    0,    0,    0,    1,
					 0x88, 0xb5 };

	memcpy(frame, eth, sizeof(eth));
	memcpy(frame + 14, &seq, sizeof(seq));
	for (size_t i = 18; i < seq_len(seq); i++)
		frame[i] = (uint8_t)(seq * 31 + i);
}

static void send_seq(int fd, const char *name, uint32_t seq)
{
	struct sockaddr_ll to = {
		.sll_family = AF_PACKET,
		.sll_protocol = htons(0x88b5),
		.sll_ifindex = (int)if_nametoindex(name),
		.sll_halen = 6,
	};
	uint8_t frame[1514];

	seq_frame(seq, frame);
	assert_int_equal(sendto(fd, frame, seq_len(seq), 0,
				(struct sockaddr *)&to, sizeof(to)),
			 (ssize_t)seq_len(seq));
}

/* The next used buffer of q carries frame seq, byte for byte, behind
 * the header. */
static void expect_seq(struct vmio_fe *fe, struct vmio_dvq *q, uint32_t seq)
{
	uint8_t want[1514];
	uint32_t len;
	void *token;
	const struct virtio_net_hdr *h;
	uint32_t got_seq;

	reap_token(q, &len, &token);
	seq_frame(seq, want);
	h = vmio_fe_ptr(fe, (uint64_t)(uintptr_t)token);
	memcpy(&got_seq, (const uint8_t *)(h + 1) + 14, sizeof(got_seq));
	if (len != sizeof(*h) + seq_len(seq) || got_seq != seq)
		fail_msg("expected frame %u (%zu bytes), got frame %u in a "
			 "%u-byte buffer",
			 seq, seq_len(seq), got_seq, len);
	assert_int_equal(le16toh(h->num_buffers), 1);
	assert_memory_equal(h + 1, want, seq_len(seq));
}

/* Receive without a copy while the guest is slow to post buffers: frames
 * that find no guest buffer wait in vmio's reserve (--xdp-reserve 32)
 * and reach the guest in order, byte for byte, as it posts; a guest that
 * posts ahead gets frames in place again; and the reserve never holds
 * more than its 32 frames: the kernel drops what comes beyond. */
static void test_xdp_nocopy_reserve(void **state)
{
	enum { BUF = 2048, RESERVE = 32, BURST3 = 100 };
	const uint64_t want = VMIO_BIT(VIRTIO_F_VERSION_1) |
			      VMIO_BIT(VIRTIO_RING_F_EVENT_IDX) |
			      VMIO_BIT(VIRTIO_NET_F_MRG_RXBUF);
	struct net_fe t;
	struct vmio_fe *fe;
	struct vmio_dvq *q;
	uint32_t seq = 0, next = 0;
	long long dropped0, dropped = 0;
	int pfd;

	veth_pair("vmioxm", "vmioxn", 1);
	net_fe_start_opt(&t, "--xdp", "vmioxm", want, 0, 4 << 20, 1,
			 "--xdp-reserve=32");
	fe = t.fe;
	q = t.q;
	pfd = netns_packet_socket("vmioxn");
	assert_int_equal(backend_counter("reserve_frames"), RESERVE);

	/* 1. Two buffers posted, 30 frames at once: they all wait in the
	 * reserve, and come out in order as the guest posts one buffer at
	 * a time. */
	for (int i = 0; i < 2; i++)
		post_rx(fe, q, BUF);
	vmio_dvq_kick(q);
	wait_rx_posted(q);
	for (; seq < 30; seq++)
		send_seq(pfd, "vmioxn", seq);
	expect_seq(fe, q, next++);
	expect_seq(fe, q, next++);
	while (next < seq) {
		post_rx(fe, q, BUF);
		vmio_dvq_kick(q);
		expect_seq(fe, q, next++);
	}
	assert_int_equal(backend_counter("rx_reserve"), 30);
	assert_int_equal(backend_counter("rx_direct"), 0);

	/* 2. The guest posts more than the reserve has out: frames land
	 * in its buffers again once the reserve's are used, in order. */
	for (int i = 0; i < 40; i++)
		post_rx(fe, q, BUF);
	vmio_dvq_kick(q);
	wait_rx_posted(q);
	for (; seq < 70; seq++)
		send_seq(pfd, "vmioxn", seq);
	while (next < seq)
		expect_seq(fe, q, next++);
	assert_true(backend_counter("rx_direct") > 0);
	assert_int_equal(backend_counter("rx_direct") +
				 backend_counter("rx_reserve"),
			 70);

	/* 3. Nothing posted, 100 frames: the reserve takes 32, the kernel
	 * drops the rest; the 32 come out in order as buffers come. */
	dropped0 = backend_counter("xsk_rx_dropped");
	for (; seq < 70 + BURST3; seq++)
		send_seq(pfd, "vmioxn", seq);
	for (int waited = 0; waited < HARNESS_WAIT_MS; waited += 10) {
		dropped = backend_counter("xsk_rx_dropped") - dropped0;
		if (dropped >= BURST3 - RESERVE)
			break;
		poll(NULL, 0, 10);
	}
	assert_int_equal(dropped, BURST3 - RESERVE);
	for (int i = 0; i < RESERVE; i++) {
		post_rx(fe, q, BUF);
		vmio_dvq_kick(q);
		expect_seq(fe, q, next++);
	}
	assert_int_equal(backend_counter("reserve_peak"), RESERVE);
	assert_int_equal(backend_counter("reserve_lost"), 0);
	assert_int_equal(backend_counter("rx_reordered"), 0);
	close(pfd);
	net_fe_stop(&t);
	assert_int_equal(vmio_stat("rx_frames"), 70 + RESERVE);
	assert_int_equal(vmio_stat("rx_errors"), 0);
	expect_nocopy("vmioxm");
}

/* testpmd as a guest that stops taking frames for a while (SIGSTOP)
 * while 700 come: without a copy its 256 buffers are all it has, and the
 * reserve (--xdp-reserve 768) keeps the rest, as the copy path's frames
 * would; all 700 reach it once it runs again, none dropped. */
static void test_xdp_nocopy_reserve_testpmd(void **state)
{
	enum { FRAMES = 700 };
	const char *sock = harness_path("vmioxo");
	struct testpmd t;
	long long received, reserve = 0;
	pid_t pid;

	veth_pair("vmioxo", "vmioxp", 1);
	pid = start_net_queues(sock, "--xdp", "vmioxo", "1",
			       "--xdp-reserve=768");
	testpmd_start(&t, sock, "rxonly");
	if (!testpmd_wait_counter(&t, "RX-packets", 0, HARNESS_WAIT_MS))
		fail_msg("testpmd did not start");
	assert_int_equal(kill(t.pid, SIGSTOP), 0);
	send_frames("vmioxp", FRAMES, false);
	/* The guest's own buffers take what they can; the rest waits. */
	for (int waited = 0; waited < HARNESS_WAIT_MS; waited += 10) {
		reserve = backend_counter("rx_reserve") +
			  backend_counter("rx_direct");
		if (reserve >= 256)
			break;
		poll(NULL, 0, 10);
	}
	assert_int_equal(kill(t.pid, SIGCONT), 0);
	if (!testpmd_wait_counter(&t, "RX-packets", FRAMES, HARNESS_WAIT_MS))
		printf("# testpmd received fewer than %d frames in time\n",
		       FRAMES);
	received = testpmd_stop(&t, "RX-packets");
	stop_net(pid);
	printf("# %d frames while testpmd was stopped: testpmd received "
	       "%lld, vmio delivered %lld\n",
	       FRAMES, received, vmio_stat("rx_frames"));
	assert_int_equal(received, FRAMES);
	assert_int_equal(vmio_stat("rx_frames"), FRAMES);
	expect_nocopy("vmioxo");
}

/* Transmit without a copy: a frame in one descriptor behind the header's
 * goes as it lies, one the guest split in two is copied; both reach the
 * peer whole, and the chains come back once the kernel is done. */
static void test_xdp_nocopy_tx_layouts(void **state)
{
	enum { FRAME = 1000 };
	const uint64_t want = VMIO_BIT(VIRTIO_F_VERSION_1) |
			      VMIO_BIT(VIRTIO_RING_F_EVENT_IDX);
	struct virtio_net_hdr h = { 0 };
	static uint8_t frame[FRAME], got[2048];
	struct net_fe t;
	struct vmio_fe *fe;
	struct vmio_dvq *q;
	int pfd;

	veth_pair("vmioxe", "vmioxf", 1);
	net_fe_start(&t, "--xdp", "vmioxe", want, 1, 1 << 20, 1);
	fe = t.fe;
	q = t.q;
	pfd = netns_packet_socket("vmioxf");
	for (size_t i = 0; i < FRAME; i++)
		frame[i] = (uint8_t)(i * 7);
	memset(frame, 0xff, 6);
	frame[12] = 0x88;
	frame[13] = 0xb5;
	for (unsigned split = 0; split < 2; split++) {
		struct vmio_dbuf b[3] = {
			{ .gpa = put(fe, &h, sizeof(h)), .len = sizeof(h) },
			{ .gpa = put(fe, frame, FRAME), .len = FRAME },
		};
		unsigned n = 2;
		struct pollfd p = { .fd = pfd, .events = POLLIN };

		if (split) {
			b[1].len = 100;
			b[2] = (struct vmio_dbuf){ .gpa = put(fe, frame + 100,
							      FRAME - 100),
						   .len = FRAME - 100 };
			n = 3;
		}
		assert_true(vmio_dvq_add(q, b, n, (void *)1) >= 0);
		vmio_dvq_kick(q);
		reap(q, 1, NULL);
		assert_int_equal(poll(&p, 1, HARNESS_WAIT_MS), 1);
		assert_int_equal(recv(pfd, got, sizeof(got), 0), FRAME);
		assert_memory_equal(got, frame, FRAME);
	}
	close(pfd);
	net_fe_stop(&t);
	assert_int_equal(vmio_stat("tx_frames"), 2);
	assert_int_equal(vmio_stat("tx_dropped"), 0);
	expect_nocopy("vmioxe");
}

/* An interface without native XDP (lo): generic XDP, said in the log,
 * and the mode of each pair in --stats. */
static void test_xdp_generic_fallback(void **state)
{
	const char *sock = harness_path("xdp-lo.sock");
	pid_t pid;

	netns_enter();
	netns_link_up("lo");
	pid = start_net(sock, "--xdp", "lo");
	stop_net(pid);
	if (!log_has("using generic (SKB) XDP") ||
	    !log_has("pair 0: xdp copy (generic XDP)")) {
		dump_log();
		fail_msg("no word of generic XDP on lo");
	}
}

/* Errors at start, exit 1 with the reason: no such interface, a queue
 * the interface does not have (a veth has one). */
static void test_xdp_errors(void **state)
{
	static const char *const args[][8] = {
		{ "net", "--socket", "/tmp/x", "--xdp", "vmionone0", NULL },
		{ "net", "--socket", "/tmp/x", "--xdp", "vmiox4,queue=1", NULL },
		{ "net", "--socket", "/tmp/x", "--xdp", "vmiox4", "--queues",
		  "2", NULL },
	};
	static const char *const expect[] = {
		"no such interface",
		"queue out of range",
		"queue out of range",
	};

	veth_pair("vmiox4", "vmiox5", 1);
	for (size_t i = 0; i < sizeof(args) / sizeof(args[0]); i++)
		expect_failure(i, args[i], 1, expect[i]);
}

/* testpmd on packed rings (use_packed) through --tap and --xdp. */
static void test_tap_guest_to_host_packed(void **state)
{
	test_tap_guest_to_host(state);
}

static void test_tap_host_to_guest_packed(void **state)
{
	test_tap_host_to_guest(state);
}

static void test_xdp_guest_to_host_packed(void **state)
{
	test_xdp_guest_to_host(state);
}

static void test_xdp_host_to_guest_packed(void **state)
{
	test_xdp_host_to_guest(state);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cli),
		cmocka_unit_test(test_null_txonly),
		cmocka_unit_test(test_null_txonly_no_poll),
		cmocka_unit_test(test_null_source_rxonly),
		cmocka_unit_test(test_null_source_idle),
		cmocka_unit_test(test_null_poll_default_idle),
		cmocka_unit_test(test_null_poll_longest_idle),
		cmocka_unit_test_setup_teardown(test_null_packed_txonly,
						use_packed, use_split),
		cmocka_unit_test_setup_teardown(test_null_packed_rxonly,
						use_packed, use_split),
		cmocka_unit_test(test_null_hostile_guest),
		cmocka_unit_test(test_threads_two_pairs),
		cmocka_unit_test(test_threads_sigterm_busy),
		cmocka_unit_test(test_threads_reconnect),
		cmocka_unit_test(test_threads_mem_table_under_traffic),
		cmocka_unit_test(test_tap_guest_to_host),
		cmocka_unit_test_setup_teardown(test_tap_guest_to_host_packed, use_packed,
						use_split),
		cmocka_unit_test(test_tap_host_to_guest),
		cmocka_unit_test_setup_teardown(test_tap_host_to_guest_packed, use_packed,
						use_split),
		cmocka_unit_test(test_tap_multiqueue_one_served),
		cmocka_unit_test(test_tap_mrg_rxbuf),
		cmocka_unit_test(test_tap_offloads),
		cmocka_unit_test(test_tap_no_rx_buffers_idle),
		cmocka_unit_test(test_tap_mq_pairs_set),
		cmocka_unit_test(test_tap_mq_pairs_set_one_thread),
		cmocka_unit_test(test_xdp_guest_to_host),
		cmocka_unit_test_setup_teardown(test_xdp_guest_to_host_packed, use_packed,
						use_split),
		cmocka_unit_test(test_xdp_guest_to_host_copy),
		cmocka_unit_test(test_xdp_host_to_guest),
		cmocka_unit_test_setup_teardown(test_xdp_host_to_guest_packed, use_packed,
						use_split),
		cmocka_unit_test(test_xdp_host_to_guest_copy),
		cmocka_unit_test(test_xdp_nocopy_rx_buffers),
		cmocka_unit_test(test_xdp_nocopy_tx_layouts),
		cmocka_unit_test(test_xdp_nocopy_reserve),
		cmocka_unit_test(test_xdp_nocopy_reserve_testpmd),
		cmocka_unit_test(test_xdp_big_mtu_copies),
		cmocka_unit_test(test_xdp_two_pairs),
		cmocka_unit_test(test_xdp_multiqueue_one_served),
		cmocka_unit_test(test_xdp_generic_fallback),
		cmocka_unit_test(test_xdp_errors),
	};

	harness_test_filter();
	return cmocka_run_group_tests(tests, NULL, harness_group_teardown);
}
