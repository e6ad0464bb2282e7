/* A guest on `vmio net` in the test's process (the in-tree front end),
 * and the host's end of the TAP it is on: see net_guest.h. */
#include "net_guest.h"

#include <arpa/inet.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "devices/net/virtio_net.h"
#include "netns.h"
#include "virtio/features.h"

#define WAIT HARNESS_WAIT_MS

/* ---- The namespace and the TAP -------------------------------------------- */

static void ifreq_for(struct ifreq *ifr, const char *name)
{
	memset(ifr, 0, sizeof(*ifr));
	snprintf(ifr->ifr_name, sizeof(ifr->ifr_name), "%s", name);
}

/* Up, with the IPv4 address addr if not NULL. */
void tap_up(const char *name, const char *addr)
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
void tap_addr(const char *name, char *out, size_t size)
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

void host_send(int fd, const char *tap, uint32_t seq)
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
void ctrl_command(struct guest *g, uint8_t class, uint8_t cmd,
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
void guest_open(struct guest *g, const char *sock, unsigned pairs)
{
	guest_open_with(g, sock, pairs, 0, 0);
}

void guest_open_with(struct guest *g, const char *sock, unsigned pairs,
		     uint64_t features, uint64_t protocol)
{
	uint64_t want = VMIO_BIT(VIRTIO_F_VERSION_1) |
			VMIO_BIT(VIRTIO_RING_F_EVENT_IDX) |
			VMIO_BIT(VIRTIO_NET_F_MRG_RXBUF) |
			VMIO_BIT(VIRTIO_NET_F_CTRL_VQ) |
			VMIO_BIT(VIRTIO_NET_F_CTRL_RX) | features;

	memset(g, 0, sizeof(*g));
	g->pairs = pairs;
	if (pairs > 1)
		want |= VMIO_BIT(VIRTIO_NET_F_MQ);
	g->fe = vmio_fe_connect(sock, WAIT);
	assert_non_null(g->fe);
	assert_int_equal(vmio_fe_negotiate(g->fe, want,
					   VMIO_BIT(VHOST_USER_PROTOCOL_F_REPLY_ACK) |
						   VMIO_BIT(VHOST_USER_PROTOCOL_F_MQ) |
						   protocol),
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
void guest_send(struct guest *g, unsigned pair, unsigned n)
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
void guest_poll(struct guest *g)
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

unsigned count_seen(const uint8_t *seen, uint32_t upto)
{
	unsigned n = 0;

	for (uint32_t i = 0; i < upto; i++)
		n += seen[i] != 0;
	return n;
}

/* Frames from the guest on the TAP's packet socket, recorded. */
void host_poll(struct guest *g, int pfd)
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

long long ms_since(const struct timespec *t0)
{
	struct timespec t1;

	clock_gettime(CLOCK_MONOTONIC, &t1);
	return (t1.tv_sec - t0->tv_sec) * 1000 +
	       (t1.tv_nsec - t0->tv_nsec) / 1000000;
}

/* Until every tx chain is back, every frame from the guest arrived and
 * every frame into the TAP reached the guest, for WAIT ms at most. */
void settle(struct guest *g, int pfd)
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

void wait_pair_mode(const char *ctl, const char *want)
{
	const char *mode = NULL;

	for (int waited = 0; waited < WAIT; waited += 10) {
		json_t *doc = harness_control_get(ctl);
		json_t *p = json_array_get(json_object_get(doc, "queue_pairs"), 0);

		mode = json_string_value(json_object_get(p, "mode"));
		if (mode && !strncmp(mode, want, strlen(want))) {
			json_decref(doc);
			return;
		}
		json_decref(doc);
		poll(NULL, 0, 10);
	}
	fail_msg("pair 0 does not run '%s'", want);
}

void veth_up(const char *a, const char *b)
{
	char cmd[160];

	snprintf(cmd, sizeof(cmd), "ip link add %s type veth peer name %s >&2",
		 a, b);
	if (system(cmd) != 0)
		fail_msg("cannot create the veth pair %s/%s", a, b);
	tap_up(a, NULL);
	tap_up(b, NULL);
}

void xdp_frames_both_ways(struct guest *g, const char *ctl, int pfd,
			  const char *peer, bool copy, unsigned n)
{
	wait_pair_mode(ctl, copy ? "copy" : "no-copy");
	guest_send(g, 0, n);
	for (unsigned i = 0; i < n; i++)
		host_send(pfd, peer, g->h2g_seq++);
	settle(g, pfd);
}
