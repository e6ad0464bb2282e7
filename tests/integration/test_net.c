/* `vmio net` against DPDK's testpmd, a vhost-user front end no one here
 * wrote: with --null, vmio counts every frame testpmd sends; with --tap,
 * in a network namespace of the test's own, frames cross the TAP both
 * ways and are counted on the other side. The TAP cases need root (a
 * namespace and a TAP); they fail saying so otherwise. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <sched.h>
#include <setjmp.h>
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

#include "harness.h"
#include "testpmd.h"

/* Enough frames to be sure they flowed, few enough to take well under a
 * second at the rates seen here (0.5 to 20 Mpps). */
#define TX_FRAMES 100000
#define RX_FRAMES 500

static char out[8192], err[8192];

static int exit_code(int status)
{
	assert_true(status >= 0);
	assert_true(WIFEXITED(status));
	return WEXITSTATUS(status);
}

/* The counter from the last "vmio net: stats:" line of the log. */
static long long vmio_stat(const char *name)
{
	FILE *f = fopen(harness_path("vmio.log"), "r");
	char line[2048], key[64], *p;
	long long v = -1;

	assert_non_null(f);
	snprintf(key, sizeof(key), " %s=", name);
	while (fgets(line, sizeof(line), f)) {
		if (!strstr(line, "vmio net: stats:"))
			continue;
		p = strstr(line, key);
		if (p)
			v = strtoll(p + strlen(key), NULL, 10);
	}
	fclose(f);
	return v;
}

static pid_t start_net(const char *sock, const char *backend,
		       const char *name)
{
	const char *args[] = { "net", "--socket", sock, "--stats", backend,
			       name, NULL };
	pid_t pid = harness_spawn(args);

	if (!harness_wait_socket(sock, HARNESS_WAIT_MS))
		fail_msg("vmio net did not listen on %s", sock);
	return pid;
}

static void stop_net(pid_t pid)
{
	assert_int_equal(exit_code(harness_stop(pid, HARNESS_WAIT_MS)), 0);
}

/* ---- command line ---------------------------------------------------- */

static void test_cli(void **state)
{
	static const char *const usage[][8] = {
		{ "net", "--socket", "/tmp/x", NULL },
		{ "net", "--socket", "/tmp/x", "--null", "--tap", "t0", NULL },
		{ "net", "--socket", "/tmp/x", "--xdp", "eth0", NULL },
		{ "net", "--socket", "/tmp/x", "--null", "--queues", "0", NULL },
		{ "net", "--socket", "/tmp/x", "--null", "--queues", "257", NULL },
		{ "net", "--socket", "/tmp/x", "--null", "--mac", "52:54:00:12:34", NULL },
		{ "net", "--socket", "/tmp/x", "--null", "--mac", "01:00:5e:00:00:01", NULL },
		{ "net", "--socket", "/tmp/x", "--null", "--mtu", "67", NULL },
		{ "net", "--socket", "/tmp/x", "--tap", "a/b", NULL },
		{ "net", "--null", NULL },
	};
	static const char *const expect[] = {
		"--tap NAME or --null", "--tap NAME or --null",
		"not supported yet", "--queues", "--queues", "--mac",
		"multicast", "--mtu", "interface name", "--socket-path",
	};
	for (size_t i = 0; i < sizeof(usage) / sizeof(usage[0]); i++) {
		assert_int_equal(exit_code(harness_run(usage[i], 10000, out,
						       sizeof(out), err,
						       sizeof(err))),
				 2);
		if (!strstr(err, expect[i]))
			fail_msg("case %zu: stderr lacks '%s': %s", i,
				 expect[i], err);
	}
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

static void test_null_txonly(void **state)
{
	const char *sock = harness_path("null.sock");
	pid_t pid = start_net(sock, "--null", NULL);
	struct testpmd t;
	long long sent, got;

	testpmd_start(&t, sock, "txonly");
	if (!testpmd_wait_counter(&t, "TX-packets", TX_FRAMES, HARNESS_WAIT_MS))
		printf("# testpmd sent fewer than %d frames in time\n",
			      TX_FRAMES);
	sent = testpmd_stop(&t, "TX-packets");
	stop_net(pid);
	got = vmio_stat("tx_frames");
	printf("# testpmd sent %lld frames, vmio counted %lld\n", sent,
		      got);
	assert_true(sent >= TX_FRAMES);
	/* Frames still in the ring when testpmd stopped are not seen. */
	assert_true(got <= sent);
	assert_true(sent - got <= 1024);
	assert_int_equal(vmio_stat("tx_dropped"), 0);
}

/* ---- --tap ------------------------------------------------------------- */

static void enter_netns(void)
{
	static bool done;

	if (done)
		return;
	if (geteuid() != 0)
		fail_msg("the TAP cases need root: they create a network "
			 "namespace and a TAP in it (run the suite as root)");
	if (unshare(CLONE_NEWNET) < 0)
		fail_msg("unshare(CLONE_NEWNET): %s", strerror(errno));
	done = true;
}

/* No IPv6 (no router solicitations in the counts), then up. */
static void link_up(const char *name)
{
	char path[128];
	struct ifreq ifr = { 0 };
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	FILE *f;

	snprintf(path, sizeof(path), "/proc/sys/net/ipv6/conf/%s/disable_ipv6",
		 name);
	f = fopen(path, "w");
	if (f) {
		fputs("1\n", f);
		fclose(f);
	}
	assert_true(fd >= 0);
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", name);
	assert_int_equal(ioctl(fd, SIOCGIFFLAGS, &ifr), 0);
	ifr.ifr_flags |= IFF_UP;
	assert_int_equal(ioctl(fd, SIOCSIFFLAGS, &ifr), 0);
	close(fd);
}

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

static int packet_socket(const char *name)
{
	struct sockaddr_ll sll = {
		.sll_family = AF_PACKET,
		.sll_protocol = htons(ETH_P_ALL),
		.sll_ifindex = (int)if_nametoindex(name),
	};
	int fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK,
			htons(ETH_P_ALL));

	assert_true(fd >= 0);
	assert_true(sll.sll_ifindex > 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&sll, sizeof(sll)), 0);
	return fd;
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

static void test_tap_guest_to_host(void **state)
{
	const char *sock = harness_path("tap-tx.sock");
	const char *tap = "vmiot0";
	struct testpmd t;
	long long sent, got, arrived;
	pid_t pid;
	int pfd;

	enter_netns();
	pid = start_net(sock, "--tap", tap);
	link_up(tap);
	pfd = packet_socket(tap);
	testpmd_start(&t, sock, "txonly");
	if (!testpmd_wait_counter(&t, "TX-packets", TX_FRAMES, HARNESS_WAIT_MS))
		printf("# testpmd sent fewer than %d frames in time\n",
			      TX_FRAMES);
	sent = testpmd_stop(&t, "TX-packets");
	arrived = dev_counter(tap, 1);
	check_txonly_frame(pfd);
	close(pfd);
	stop_net(pid);
	got = vmio_stat("tx_frames");
	printf("# testpmd sent %lld, vmio wrote %lld, the TAP received "
		      "%lld\n", sent, got, arrived);
	assert_true(sent >= TX_FRAMES);
	assert_true(got <= sent && sent - got <= 1024);
	assert_int_equal(arrived, got);
}

static void send_frames(const char *name, int n)
{
	int fd = packet_socket(name);
	struct sockaddr_ll to = {
		.sll_family = AF_PACKET,
		.sll_ifindex = (int)if_nametoindex(name),
		.sll_halen = 6,
	};
	uint8_t frame[60] = {
		0xff, 0xff, 0xff, 0xff, 0xff, 0xff, /* broadcast */
		0x02, 0, 0, 0, 0, 0x01, 0x88, 0xb5, /* local experimental */
	};

	memset(to.sll_addr, 0xff, 6);
	for (int i = 0; i < n; i++) {
		memcpy(frame + 14, &i, sizeof(i));
		assert_int_equal(sendto(fd, frame, sizeof(frame), 0,
					(struct sockaddr *)&to, sizeof(to)),
				 (ssize_t)sizeof(frame));
	}
	close(fd);
}

static void test_tap_host_to_guest(void **state)
{
	const char *sock = harness_path("tap-rx.sock");
	const char *tap = "vmiot1";
	struct testpmd t;
	long long received, delivered;
	pid_t pid;

	enter_netns();
	pid = start_net(sock, "--tap", tap);
	link_up(tap);
	testpmd_start(&t, sock, "rxonly");
	/* Its first statistics mean its port is started. */
	if (!testpmd_wait_counter(&t, "RX-packets", 0, HARNESS_WAIT_MS))
		fail_msg("testpmd did not start");
	/* Fewer than the TAP's queue holds (1000): none is dropped even if
	 * vmio has not started reading yet. */
	send_frames(tap, RX_FRAMES);
	if (!testpmd_wait_counter(&t, "RX-packets", RX_FRAMES, HARNESS_WAIT_MS))
		printf("# testpmd received fewer than %d frames in time\n",
			      RX_FRAMES);
	received = testpmd_stop(&t, "RX-packets");
	stop_net(pid);
	delivered = vmio_stat("rx_frames");
	printf("# sent %d into the TAP, vmio delivered %lld, testpmd "
		      "received %lld\n", RX_FRAMES, delivered, received);
	assert_true(received >= RX_FRAMES);
	assert_int_equal(received, delivered);
	assert_int_equal(vmio_stat("rx_errors"), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cli),
		cmocka_unit_test(test_null_txonly),
		cmocka_unit_test(test_tap_guest_to_host),
		cmocka_unit_test(test_tap_host_to_guest),
	};

	return cmocka_run_group_tests(tests, NULL, harness_group_teardown);
}
