/* `vmio net` and a VMM migrating its guest (issue 24), with the in-tree
 * front end as the guest on a TAP vmio creates, in a network namespace
 * of the test's own. Needs root (a namespace, a TAP).
 *
 * The dirty log: the front end starts logging as QEMU does when a
 * migration begins (SET_LOG_BASE, SET_FEATURES with VHOST_F_LOG_ALL,
 * every ring again with VHOST_VRING_F_LOG); then frames go both ways on
 * two queue pairs and the control queue takes a command. The oracle:
 * every page the device alone writes (the receive buffers, and the used
 * rings where no driver-written ring shares their page) whose bytes
 * changed since logging began has its bit in the log. A page the log
 * missed would reach the destination stale.
 *
 * The announcement: SEND_RARP with the guest's MAC puts a RARP from that
 * MAC on the TAP (for a guest that does not announce itself), counted in
 * rarps; a guest that does (GUEST_ANNOUNCE) gets its ANNOUNCE_ACK
 * answered on the control queue. */
#include <net/if.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "devices/net/virtio_net.h"
#include "harness.h"
#include "net_guest.h"
#include "netns.h"
#include "virtio/features.h"

#define WAIT HARNESS_WAIT_MS
#define MEM (4u << 20) /* guest_open's */
#define PAGE 4096u
#define BURST 32

static pid_t serving = -1;

#define VNET_RARP_FRAME 60

/* What a RARP announcing mac is on the wire (RFC 903: reverse request,
 * op 3, from and about mac), padded to 60 bytes. */
static void rarp_expected(const uint8_t mac[6], uint8_t *f)
{
	static const uint8_t head[] = { 0x80, 0x35, 0, 1, 8, 0, 6, 4, 0, 3 };

	memset(f, 0, VNET_RARP_FRAME);
	memset(f, 0xff, 6);
	memcpy(f + 6, mac, 6);
	memcpy(f + 12, head, sizeof(head));
	memcpy(f + 22, mac, 6);
	memcpy(f + 32, mac, 6);
}

static bool marked(const uint8_t *log, uint64_t gpa)
{
	uint64_t page = gpa / PAGE;

	return log[page / 8] & (1u << page % 8);
}

/* Pages only the device writes: where no descriptor table or avail ring
 * is (the driver writes those; the used ring may share a page with
 * them), and outside the transmit slots (the driver's frames). */
static void device_pages(const struct guest *g, bool *only_device)
{
	for (uint64_t p = 0; p < MEM / PAGE; p++)
		only_device[p] = false;
	for (unsigned pr = 0; pr < g->pairs; pr++)
		for (unsigned i = 0; i < RX_BUFS; i++)
			for (uint64_t a = g->rx_gpa[pr][i] / PAGE;
			     a <= (g->rx_gpa[pr][i] + RX_BUF - 1) / PAGE; a++)
				only_device[a] = true;
	for (unsigned q = 0; q < VMIO_FE_MAX_QUEUES; q++) {
		const struct vmio_dvq *d = &g->fe->queues[q];

		if (!g->fe->queue_set_up[q])
			continue;
		only_device[d->used_gpa / PAGE] = true;
	}
	for (unsigned q = 0; q < VMIO_FE_MAX_QUEUES; q++) {
		const struct vmio_dvq *d = &g->fe->queues[q];
		uint64_t desc_end = d->desc_gpa + 16ull * d->size;
		uint64_t avail_end = d->avail_gpa + 6 + 2ull * d->size;

		if (!g->fe->queue_set_up[q])
			continue;
		for (uint64_t a = d->desc_gpa / PAGE; a <= (desc_end - 1) / PAGE;
		     a++)
			only_device[a] = false;
		for (uint64_t a = d->avail_gpa / PAGE;
		     a <= (avail_end - 1) / PAGE; a++)
			only_device[a] = false;
	}
	for (unsigned pr = 0; pr < g->pairs; pr++)
		for (unsigned i = 0; i < TX_SLOTS; i++) {
			only_device[g->tx_gpa[pr][i] / PAGE] = false;
			only_device[(g->tx_gpa[pr][i] + HDR + FRAME - 1) /
				    PAGE] = false;
		}
}

/* vmio net on a TAP it creates, two pairs on two workers, --control;
 * returns the TAP's packet socket. */
static int start_net(const char *tap)
{
	const char *args[] = { "net", "--socket", harness_path("vhost.sock"),
			       "--control", harness_path("ctl"), "--tap", tap,
			       "--queues", "2", "--threads", "2", NULL };

	netns_enter();
	serving = harness_spawn(args);
	assert_true(harness_wait_socket(harness_path("vhost.sock"), WAIT));
	assert_true(harness_wait_socket(harness_path("ctl"), WAIT));
	tap_up(tap, NULL);
	return netns_packet_socket(tap);
}

static void test_marks_every_page_written(void **state)
{
	const char *tap = "vmiolg0";
	static struct guest g;
	static bool only_device[MEM / PAGE];
	uint8_t *before = malloc(MEM), *log;
	unsigned changed = 0, missed = 0;
	uint64_t first_missed = 0, log_size = MEM / PAGE / 8;
	int log_fd, pfd;

	(void)state;
	assert_non_null(before);
	pfd = start_net(tap);
	guest_open_with(&g, harness_path("vhost.sock"), 2, 0,
			VMIO_BIT(VHOST_USER_PROTOCOL_F_LOG_SHMFD));
	assert_true(g.fe->device_features & VMIO_BIT(VHOST_F_LOG_ALL));
	/* Some traffic before: the rings are warm, the pages not new. */
	for (unsigned p = 0; p < g.pairs; p++)
		guest_send(&g, p, BURST);
	for (unsigned k = 0; k < BURST * g.pairs; k++)
		host_send(pfd, tap, g.h2g_seq++);
	settle(&g, pfd);

	log_fd = memfd_create("dirty-log", MFD_CLOEXEC);
	assert_true(log_fd >= 0);
	assert_int_equal(ftruncate(log_fd, (off_t)log_size), 0);
	log = mmap(NULL, log_size, PROT_READ | PROT_WRITE, MAP_SHARED, log_fd,
		   0);
	assert_true(log != MAP_FAILED);
	assert_int_equal(vmio_fe_log_start(g.fe, log_fd, log_size), 0);
	/* What the guest's memory was as logging began; the log as QEMU
	 * clears it. */
	memcpy(before, g.fe->mem, MEM);
	memset(log, 0, log_size);

	for (unsigned p = 0; p < g.pairs; p++)
		guest_send(&g, p, BURST);
	for (unsigned k = 0; k < 3 * BURST * g.pairs; k++)
		host_send(pfd, tap, g.h2g_seq++);
	ctrl_command(&g, VIRTIO_NET_CTRL_RX, VIRTIO_NET_CTRL_RX_PROMISC, "\1",
		     1);
	settle(&g, pfd);

	device_pages(&g, only_device);
	for (uint64_t p = 0; p < MEM / PAGE; p++) {
		if (!only_device[p] ||
		    !memcmp(before + p * PAGE, g.fe->mem + p * PAGE, PAGE))
			continue;
		changed++;
		if (!marked(log, p * PAGE)) {
			if (!missed++)
				first_missed = p * PAGE;
		}
	}
	printf("# %u pages the device wrote since logging began, %u of them unmarked\n",
	       changed, missed);
	/* The frames reached receive buffers: the oracle saw writes. */
	assert_true(changed >= 8);
	if (missed)
		fail_msg("%u pages written and not marked, the first at gpa 0x%llx",
			 missed, (unsigned long long)first_missed);
	munmap(log, log_size);
	close(log_fd);
	close(pfd);
	vmio_fe_close(g.fe);
	assert_int_equal(WEXITSTATUS(harness_stop(serving, WAIT)), 0);
	serving = -1;
	free(before);
}

/* A RARP from mac on the TAP within WAIT: true if one came. */
static bool rarp_seen(int pfd, const uint8_t mac[6])
{
	uint8_t want[VNET_RARP_FRAME], buf[2048];

	rarp_expected(mac, want);
	for (int waited = 0; waited < WAIT; waited += 10) {
		ssize_t n;

		while ((n = recv(pfd, buf, sizeof(buf), MSG_DONTWAIT)) > 0)
			if (n >= VNET_RARP_FRAME &&
			    !memcmp(buf, want, VNET_RARP_FRAME))
				return true;
		usleep(10000);
	}
	return false;
}

static void test_announces_the_guest(void **state)
{
	static const uint8_t mac[6] = { 0x52, 0x54, 0x00, 0xab, 0xcd, 0xef };
	static struct guest g;
	uint64_t payload = 0;
	int pfd;

	(void)state;
	pfd = start_net("vmiolg1");
	guest_open_with(&g, harness_path("vhost.sock"), 1,
			VMIO_BIT(VIRTIO_NET_F_GUEST_ANNOUNCE),
			VMIO_BIT(VHOST_USER_PROTOCOL_F_RARP));
	assert_true(g.fe->features & VMIO_BIT(VIRTIO_NET_F_GUEST_ANNOUNCE));
	memcpy(&payload, mac, 6);
	assert_int_equal(vmio_fe_request(g.fe, VHOST_USER_SEND_RARP, &payload,
					 sizeof(payload), NULL, 0, true, NULL,
					 0),
			 0);
	if (!rarp_seen(pfd, mac))
		fail_msg("no RARP from the guest's MAC on the TAP");
	assert_int_equal(harness_control_num(harness_path("ctl"),
					     "queue_pairs.0.rarps"),
			 1);
	/* A guest that announces itself: its ack is answered (OK). */
	ctrl_command(&g, VIRTIO_NET_CTRL_ANNOUNCE,
		     VIRTIO_NET_CTRL_ANNOUNCE_ACK, "", 0);
	close(pfd);
	vmio_fe_close(g.fe);
	assert_int_equal(WEXITSTATUS(harness_stop(serving, WAIT)), 0);
	serving = -1;
}

static int case_teardown(void **state)
{
	(void)state;
	if (serving > 0)
		harness_stop(serving, WAIT);
	serving = -1;
	unlink(harness_path("vhost.sock"));
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_marks_every_page_written,
					  case_teardown),
		cmocka_unit_test_teardown(test_announces_the_guest,
					  case_teardown),
	};

	harness_test_filter();
	return cmocka_run_group_tests(tests, NULL, harness_group_teardown);
}
