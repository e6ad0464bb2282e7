/* A guest on `vmio net` in the test's process (the in-tree front end),
 * and the host's end of the TAP it is on, for the tests that change the
 * process behind the guest's socket (test_net_handover, test_net_crash):
 * frames carry a direction and a sequence number, so that each side
 * records which arrived, and none twice (fail_msg). Inside the test's
 * network namespace (netns.h). */
#ifndef VMIO_TESTS_NET_GUEST_H
#define VMIO_TESTS_NET_GUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "frontend/frontend.h"
#include "harness.h"

#define QSIZE 256
#define RX_BUFS 128 /* posted on each rx queue */
#define RX_BUF 2048
#define TX_SLOTS 64 /* per tx queue */
#define MAX_SEQ 4096
#define MAGIC 0x766d696fu
#define HDR 12 /* VERSION_1's virtio-net header */
#define FRAME 60

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

/* The TAP up, with the IPv4 address addr if not NULL; its address ("" if
 * none). */
void tap_up(const char *name, const char *addr);
void tap_addr(const char *name, char *out, size_t size);
/* Frame seq into the TAP from the host (fd: netns_packet_socket's). */
void host_send(int fd, const char *tap, uint32_t seq);

/* Connected to sock with pairs queue pairs (two: MQ, and the guest says
 * it uses both on the control queue), every rx buffer posted. */
void guest_open(struct guest *g, const char *sock, unsigned pairs);
/* The same, asking for features and protocol features beyond its own
 * (REPLY_ACK and MQ). */
void guest_open_with(struct guest *g, const char *sock, unsigned pairs,
		     uint64_t features, uint64_t protocol);
/* One control command (class, command, data) answered OK. */
void ctrl_command(struct guest *g, uint8_t class, uint8_t cmd,
		  const void *data, uint32_t len);
/* n frames on pair's tx queue. */
void guest_send(struct guest *g, unsigned pair, unsigned n);
/* Every tx chain back, and every rx buffer that came back reposted,
 * its frame recorded. */
void guest_poll(struct guest *g);
/* Frames from the guest on the TAP's packet socket, recorded. */
void host_poll(struct guest *g, int pfd);
unsigned count_seen(const uint8_t *seen, uint32_t upto);
/* Until every tx chain is back, every frame from the guest arrived and
 * every frame into the TAP reached the guest, for HARNESS_WAIT_MS at
 * most (then the test fails). */
void settle(struct guest *g, int pfd);
long long ms_since(const struct timespec *t0);
/* Until vmio's pair 0 runs as want says (--control's mode at ctl: an
 * AF_XDP pair's "no-copy", "copy"): a no-copy XSK is bound once the
 * guest's queues start, and frames that come before it go to the host's
 * stack. */
void wait_pair_mode(const char *ctl, const char *want);
/* A veth pair a/b in the test's namespace (netns_enter first), both
 * ends up: vmio's XSKs go on a, the test talks through b. */
void veth_up(const char *a, const char *b);
/* n frames each way on pair 0 of vmio's AF_XDP port (ctl its --control)
 * once it runs with a copy or without, as asked (wait_pair_mode): every
 * one arrives (settle). peer is b of veth_up, pfd its packet socket. */
void xdp_frames_both_ways(struct guest *g, const char *ctl, int pfd,
			  const char *peer, bool copy, unsigned n);

#endif
