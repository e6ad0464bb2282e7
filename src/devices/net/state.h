/* The net device's state, shared by its files: device.c (callbacks and
 * queue roles), tx.c, rx.c, rx_posted.c and ctrl_queue.c (serving each
 * kind of queue), held_chains.c (chains a no-copy backend keeps).
 * With a backend that copies (or hands buffers over only for a call), no
 * chain is held between callbacks. A no-copy backend keeps chains across
 * them; held_chains.c gets them all back before a queue stops for good or
 * the memory table changes, so that then too there are only pointers to
 * drop. */
#ifndef VMIO_DEVICES_NET_DEVICE_INTERNAL_H
#define VMIO_DEVICES_NET_DEVICE_INTERNAL_H

#include <stdbool.h>
#include <sys/uio.h>

#include "devices/net/ctrl.h"
#include "devices/net/device.h"
#include "util/log.h"

/* Frames or commands served in one callback before we yield to the rest
 * of the loop: a guest that keeps a ring full must not starve the
 * vhost-user socket or the other queues. */
#define VNET_TX_BUDGET 256
#define VNET_RX_BUDGET 256
#define VNET_CTRL_BUDGET 64

/* readv and writev take at most this many segments (IOV_MAX). */
#define VNET_MAX_IOV 1024

/* How often a pair looks again at a backend that is busy (a full TX
 * ring) or keeps frames it sent (completions come with no event). */
#define VNET_RETRY_NS (200 * 1000)

struct vnet_pair {
	struct vnet_device *d;
	unsigned index;
	struct vmio_vq *rx, *tx;
	int rx_fd;        /* the backend's when watched, -1 if it never receives */
	bool rx_watched;  /* rx_fd is on the loop */
	bool served;      /* its rx queue started since the last reset */
	/* Chains a no-copy backend keeps, and the queues they came from
	 * (the core's, alive as long as the device). */
	unsigned tx_held, rx_held;
	struct vmio_vq *tx_held_vq, *rx_held_vq;
	struct vmio_timer retry; /* look at tx again */
	/* Serve rx or tx again on the loop's next turn, as a kick would: a
	 * queue that stopped at its budget lets the rest of the loop go
	 * first. */
	struct vmio_defer rx_again, tx_again;
};

struct vnet_device {
	struct vmio_device_ops ops;
	struct vmio_loop *loop;
	struct vnet_device_config cfg;
	struct vnet_backend *be;

	uint64_t features; /* negotiated */
	size_t hdr_len;    /* virtio-net header size for them */
	struct vmio_mem *mem;
	struct vmio_vq *ctrl;
	struct vmio_defer ctrl_again; /* the control queue's next turn */
	struct vnet_ctrl_state ctrl_state;
	struct vnet_stats stats;
	struct vmio_ratelimit rl;

	/* Large: kept here, not on the stack. One chain being served (by
	 * one queue at a time: nothing that serves a queue may be called
	 * while another holds it), and the segments handed to the backend
	 * (a header and a chain's). */
	struct vmio_chain chain;
	struct iovec iov[VNET_MAX_IOV];
	uint8_t ctrl_buf[VNET_CTRL_MAX_LEN];
	/* rx with MRG_RXBUF: the heads and sizes of the chains one frame
	 * is spread over. */
	uint16_t rx_heads[VNET_MAX_IOV];
	uint32_t rx_sizes[VNET_MAX_IOV];
	/* What a no-copy backend gives back, a batch at a time. */
	struct vnet_done done[VNET_RX_BUDGET];
	uint32_t cookies[VNET_TX_BUDGET];

	unsigned npairs;
	struct vnet_pair pairs[];
};

static inline bool vnet_has(const struct vnet_device *d, unsigned bit)
{
	return d->features & (1ull << bit);
}

/* Queue pairs the guest may receive on: what VQ_PAIRS_SET chose when
 * the control queue is ours (MQ negotiated), else every pair (the VMM
 * answers the control queue and enables the pairs' queues itself). */
unsigned vnet_active_pairs(const struct vnet_device *d);
/* Tells the backend which pairs' channels should get frames: the active
 * ones whose rx queue the guest serves. */
void vnet_update_steering(struct vnet_device *d);

/* Serves the guest's transmitted frames on pair p. */
void vnet_tx_run(struct vnet_pair *p);
/* Gives the guest back the tx chains the backend is done with; returns
 * how many. */
unsigned vnet_tx_reap(struct vnet_pair *p);
/* Makes the loop call vnet_tx_run on p again in VNET_RETRY_NS. */
void vnet_tx_retry_later(struct vnet_pair *p);
/* The retry timer's descriptor, on the loop for the device's life. */
int vnet_tx_retry_watch(struct vnet_pair *p);
void vnet_tx_retry_unwatch(struct vnet_pair *p);
/* Receive into posted buffers (a no-copy backend): post what the guest
 * offers, give back what came. */
void vnet_rx_posted_run(struct vnet_pair *p);
/* Gives the guest back the rx buffers the backend is done with (frames,
 * or unused after detach), without notifying it; returns how many. */
unsigned vnet_rx_reap(struct vnet_pair *p);
/* Pair p runs on guest memory mem from now on (a queue started). */
void vnet_pair_attach(struct vnet_pair *p, struct vmio_mem *mem);
/* Pair p stops touching guest memory: every held chain goes back to its
 * queue (a queue stops for good, the table changes, reset). */
void vnet_pair_detach(struct vnet_pair *p);
/* Moves frames from the backend into the guest's rx buffers on pair p. */
void vnet_rx_run(struct vnet_pair *p);
/* Starts or stops watching the backend's rx descriptor of pair p. */
void vnet_rx_watch(struct vnet_pair *p);
void vnet_rx_unwatch(struct vnet_pair *p);
/* Answers the commands on the control queue. */
void vnet_ctrl_run(struct vnet_device *d);

/* Looks at vq for new buffers for up to the device's poll_ns, while its
 * kicks are still off (the driver then need not make a system call to
 * notify us). Returns true as soon as some are there. */
bool vnet_poll_avail(const struct vnet_device *d, const struct vmio_vq *vq);

#endif
