/* Where the net device's frames go and come from. The device validates
 * every frame before a port sees it, and hands frames over as scatter
 * lists: a transmitted frame is its (validated, local) virtio-net header
 * followed by the guest's buffers; a received frame is written, header
 * first, straight into the guest's buffers. A port never sees a
 * descriptor or a ring.
 *
 * Two ways of working. Within a call: TAP hands guest buffers to
 * readv/writev, AF_XDP in copy mode copies through a UMEM of its own; the
 * buffers are the guest's again when the call returns. Or without a copy
 * (AF_XDP on guest memory): the kernel keeps guest buffers for a while. A
 * transmitted frame's buffers stay with the port (tx answers
 * VNET_TX_HELD) until tx_reap gives back its cookie; receive buffers are
 * posted before any frame comes (rx_post) and come back filled through
 * rx_reap. Such a port is told which guest memory its pairs run on
 * (attach) and when they must stop touching it (detach).
 *
 * Queue pairs are numbered from 0; a port has one channel (TAP queue,
 * XSK) per pair. Everything runs on the loop thread, and no call waits: a
 * channel that cannot be set up yet (an XSK whose queue the kernel has not
 * released) is retried from a timer on the device's loop, and attach says
 * so (VNET_ATTACH_LATER); the device leaves the pair alone until the
 * port calls attached. */
#ifndef VMIO_DEVICES_NET_PORT_H
#define VMIO_DEVICES_NET_PORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "event/loop.h"
#include "util/wire.h"
#include "virtio/memory.h"

struct vnet_port;

/* tx's answer for a frame whose guest buffers the port keeps. */
#define VNET_TX_HELD 1

/* attach's answer when the pair's channel is not ready yet: the port
 * finishes on its own and then calls vnet_port.attached. */
#define VNET_ATTACH_LATER 1

/* A guest buffer given back by rx_reap: the cookie and pointer it was
 * posted with, and the length of the frame written at buf + header
 * (0: given back unused). */
struct vnet_done {
	void *buf;
	uint32_t cookie;
	uint32_t len;
};

struct vnet_port_ops {
	const char *name; /* "null", "tap", "xdp": for log lines */

	/* The guest negotiated features (virtio-net bits) and the header
	 * size that goes with them: set the channel up to match (TAP: vnet
	 * header size and offloads). Returns 0 or -errno. */
	int (*configure)(struct vnet_port *b, uint64_t features,
			 size_t hdr_len);

	/* Sends one frame. Returns 0 if the guest's buffers may go back
	 * now, VNET_TX_HELD if they stay with the port until tx_reap
	 * gives back cookie, -EAGAIN if the channel is full (the device
	 * tries the frame again later), or another -errno if it was dropped
	 * (the device counts it). The header iov[0] is the device's: it
	 * lives only for the call. */
	int (*tx)(struct vnet_port *b, unsigned pair,
		  const struct iovec *iov, unsigned niov, uint32_t cookie);

	/* Writes up to max cookies of held frames the kernel is done with
	 * into cookies; returns how many. NULL if tx never holds. */
	unsigned (*tx_reap)(struct vnet_port *b, unsigned pair,
			    uint32_t *cookies, unsigned max);

	/* The device sent a batch of frames on pair and is about to wait:
	 * a port that queues frames (AF_XDP's TX ring) hands them to
	 * the kernel now. NULL if tx sends at once. */
	void (*tx_flush)(struct vnet_port *b, unsigned pair);

	/* A descriptor that polls readable while pair has a frame waiting,
	 * or -1 if frames never come (null). */
	int (*rx_fd)(struct vnet_port *b, unsigned pair);

	/* Receives one frame, header first, into iov. Returns its length,
	 * -EAGAIN if none waits, or another -errno (the frame is lost). */
	ssize_t (*rx)(struct vnet_port *b, unsigned pair,
		      const struct iovec *iov, unsigned niov);

	/* Whether pair receives into posted guest buffers (rx_post and
	 * rx_reap) rather than through rx. NULL: never. */
	bool (*rx_posts)(struct vnet_port *b, unsigned pair);

	/* Gives the port the guest buffer [buf, buf + len) for a frame
	 * to come: the frame lands at buf + the header's size, and the
	 * header is the device's to write. Returns 0, -ENOSPC if the
	 * port holds all it can (post again after a reap), or -EMSGSIZE
	 * or -EFAULT if this buffer cannot take a frame without a copy. */
	int (*rx_post)(struct vnet_port *b, unsigned pair, void *buf,
		       size_t len, uint32_t cookie);

	/* Writes up to max filled (or, after detach, unused) buffers into
	 * done, in the order the frames came; returns how many. */
	unsigned (*rx_reap)(struct vnet_port *b, unsigned pair,
			    struct vnet_done *done, unsigned max);

	/* Pair's queues run on guest memory mem from now on: a port
	 * that hands guest buffers to the kernel sets itself up for it
	 * (and may change rx_fd). Called at every queue start; cheap when
	 * nothing changed. Returns 0 when pair is ready (set up, or left
	 * as it was after a failure the port has logged), or
	 * VNET_ATTACH_LATER: the pair is not to be used (no tx, rx or
	 * rx_post) until the port calls attached for it, which it does
	 * from a callback of the loop, never from within attach; another
	 * attach meanwhile answers VNET_ATTACH_LATER again, and detach
	 * gives the attempt up (attached is then not called; the device
	 * does so when it is freed, so that nothing of the port's stays
	 * on its loop). NULL if the port never holds buffers. */
	int (*attach)(struct vnet_port *b, unsigned pair,
		      const struct vmio_mem *mem);

	/* Pair must stop touching guest memory before this returns: its
	 * queues stop, or the memory table changes. What it holds comes
	 * back through tx_reap and rx_reap (frames already received with
	 * their length, the rest unused). rx_fd may change. */
	void (*detach)(struct vnet_port *b, unsigned pair);

	/* Whether frames for the host's side of pair may be steered to its
	 * channel: only pairs the guest serves should get any, or a flow
	 * the kernel hashes onto an unused queue is lost. Pair 0 is always
	 * on. Returns 0 or -errno. NULL if the port has one fixed path. */
	int (*set_pair_enabled)(struct vnet_port *b, unsigned pair, bool on);

	/* How pair's frames move, for the log and --stats ("copy (native
	 * XDP)"). NULL if there is one way only. */
	const char *(*pair_mode)(struct vnet_port *b, unsigned pair);

	/* The port's own counters for pair, "name=N" each, for --stats.
	 * NULL if it has none. */
	void (*pair_counters)(struct vnet_port *b, unsigned pair, char *buf,
			      size_t size);

	/* The hand-over (issue 36): appends what a successor's port needs
	 * beside the command line to w, and the descriptors it must keep to
	 * fds (at most max; *nfds in: those there, out: after; they stay
	 * the port's). Called with every queue stopped for good. Returns 0,
	 * or -1 with *why. Every port has one. */
	int (*save)(struct vnet_port *b, struct vmio_wire_writer *w, int fds[],
		    unsigned max, unsigned *nfds, const char **why);
	/* The hand-over's last step here, its queues stopped for good:
	 * lets go of what the successor opens anew rather than takes over
	 * (an interface queue takes one XSK at a time). If the hand-over
	 * fails, the next attach of each pair opens it again. NULL: nothing
	 * to let go. */
	void (*release)(struct vnet_port *b);

	void (*free)(struct vnet_port *b);
};

/* Ports embed this first. */
struct vnet_port {
	const struct vnet_port_ops *ops;
	/* virtio-net offload bits the port can carry (CSUM, TSO...);
	 * the device offers them only if the port has them. */
	uint64_t offloads;
	unsigned pairs;
	/* The largest frame (without virtio-net header) the guest may send
	 * or receive: set by the device from its MTU before any call. */
	size_t max_frame;
	/* Set by the device before any call: the loop a port may arm
	 * timers on, and what it calls once an attach it answered
	 * VNET_ATTACH_LATER is done (attached NULL: nobody to tell). */
	struct vmio_loop *loop;
	void (*attached)(void *opaque, unsigned pair);
	void *attached_opaque;
	/* Taken from a predecessor (a hand-over): its pairs steered as the
	 * predecessor left them until the guest's rx queues start here. */
	bool handed_over;
};

static inline void vnet_port_free(struct vnet_port *b)
{
	if (b)
		b->ops->free(b);
}

#endif
