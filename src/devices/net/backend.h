/* Where the net device's frames go and come from. The device validates
 * every frame before a backend sees it, and hands frames over as scatter
 * lists: a transmitted frame is its (validated, local) virtio-net header
 * followed by the guest's buffers; a received frame is written, header
 * first, straight into the guest's buffers. A backend never sees a
 * descriptor or a ring: TAP hands guest buffers to readv/writev, AF_XDP
 * in copy mode copies through a UMEM of its own.
 *
 * Not there yet: AF_XDP without a copy, guest memory registered as the
 * UMEM. It needs what this table does not have: on tx, a way to keep a
 * chain from the guest until the kernel completes it (tx answering "taken,
 * still in use" with a cookie, the device holding the chain instead of
 * pushing it, and a tx_done(pair, cookie) callback from the backend's
 * completion reaping, with the TX ring's size bounding the chains held);
 * on rx, guest buffers posted before any frame arrives (rx_post(pair,
 * iov, cookie) onto the fill ring, and a completion giving back cookie
 * and length, the device writing the header in front). And a new memory
 * table means re-creating every XSK.
 *
 * Queue pairs are numbered from 0; a backend has one channel (TAP queue,
 * XSK) per pair. Everything runs on the loop thread. */
#ifndef VMIO_DEVICES_NET_BACKEND_H
#define VMIO_DEVICES_NET_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

struct vnet_backend;

struct vnet_backend_ops {
	const char *name; /* "null", "tap", "xdp": for log lines */

	/* The guest negotiated features (virtio-net bits) and the header
	 * size that goes with them: set the channel up to match (TAP: vnet
	 * header size and offloads). Returns 0 or -errno. */
	int (*configure)(struct vnet_backend *b, uint64_t features,
			 size_t hdr_len);

	/* Sends one frame. Returns 0, or -errno if it was dropped (the
	 * device counts it; -EAGAIN: the channel is full). The frame's
	 * bytes are the backend's to copy or send now: once tx returns,
	 * the device gives the guest its buffers back. */
	int (*tx)(struct vnet_backend *b, unsigned pair,
		  const struct iovec *iov, unsigned niov);

	/* The device sent a batch of frames on pair and is about to wait:
	 * a backend that queues frames (AF_XDP's TX ring) hands them to
	 * the kernel now. NULL if tx sends at once. */
	void (*tx_flush)(struct vnet_backend *b, unsigned pair);

	/* A descriptor that polls readable while pair has a frame waiting,
	 * or -1 if frames never come (null). */
	int (*rx_fd)(struct vnet_backend *b, unsigned pair);

	/* Receives one frame, header first, into iov. Returns its length,
	 * -EAGAIN if none waits, or another -errno (the frame is lost). */
	ssize_t (*rx)(struct vnet_backend *b, unsigned pair,
		      const struct iovec *iov, unsigned niov);

	/* Whether frames for the host's side of pair may be steered to its
	 * channel: only pairs the guest serves should get any, or a flow
	 * the kernel hashes onto an unused queue is lost. Pair 0 is always
	 * on. Returns 0 or -errno. NULL if the backend has one fixed path. */
	int (*set_pair_enabled)(struct vnet_backend *b, unsigned pair, bool on);

	/* How pair's frames move, for the log and --stats ("copy (native
	 * XDP)"). NULL if there is one way only. */
	const char *(*pair_mode)(struct vnet_backend *b, unsigned pair);

	void (*free)(struct vnet_backend *b);
};

/* Backends embed this first. */
struct vnet_backend {
	const struct vnet_backend_ops *ops;
	/* virtio-net offload bits the backend can carry (CSUM, TSO...);
	 * the device offers them only if the backend has them. */
	uint64_t offloads;
	unsigned pairs;
};

/* Writes len bytes of src at offset into the scatter list iov (as far as
 * it reaches): for the device's header fields and copying backends. */
void vnet_iov_write(const struct iovec *iov, unsigned niov, size_t offset,
		    const void *src, size_t len);

/* Drops everything sent, receives nothing: the device measured alone. */
struct vnet_backend *vnet_backend_null_new(unsigned pairs);

/* Attaches pairs queues of the TAP interface name, creating it
 * (multi-queue, vnet header) if it does not exist. Returns NULL with
 * *err = -errno and *why a static string saying what failed. */
struct vnet_backend *vnet_backend_tap_new(const char *name, unsigned pairs,
					  int *err, const char **why);

/* One XSK per pair, bound to queues queue, queue + 1... of the interface
 * name, each with a UMEM of its own that frames are copied through; the
 * XDP program that redirects to them is attached native where the driver
 * has it, else generic. No offloads. Returns NULL with *err = -errno and
 * *why a static string saying what failed. */
struct vnet_backend *vnet_backend_xdp_new(const char *name, unsigned queue,
					  unsigned pairs, int *err,
					  const char **why);

/* The largest --mtu with --xdp: a frame and the XDP headroom fit one
 * 4 KiB UMEM frame, and veth's native XDP takes no more. */
#define VNET_XDP_MAX_MTU 3500

static inline void vnet_backend_free(struct vnet_backend *b)
{
	if (b)
		b->ops->free(b);
}

#endif
