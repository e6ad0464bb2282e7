/* The net device's state, shared by its files; types only (and two
 * questions of the negotiated state). The files, lowest first, each with a
 * header of its own declaring what it defines:
 *   tx.c           guest to port (and the retry timer)
 *   rx_posted.c    port to guest into posted buffers (no copy)
 *   rx.c           port to guest, copying; the port's rx watch
 *   held_chains.c  attach and detach: chains a no-copy port keeps
 *   steering.c     which pairs get frames
 * Each pair runs on a loop of its own (vnet_device_config.pair_loops),
 * perhaps another thread's: its queues' callbacks come there (the core
 * asks device.c's queue_loop), and its state is that loop's. The
 * control queue and the device-wide callbacks run on the device's
 * loop.
 *   ctrl_queue.c   the control queue
 *   device.c       the device callbacks and queue roles (device.h)
 * With a port that copies (or hands buffers over only for a call), no
 * chain is held between callbacks. A no-copy port keeps chains across
 * them; held_chains.c gets them all back before a queue stops for good or
 * the memory table changes, so that then too there are only pointers to
 * drop. */
#ifndef VMIO_DEVICES_NET_STATE_H
#define VMIO_DEVICES_NET_STATE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <sys/uio.h>

#include "devices/net/port.h"
#include "devices/net/config.h"
#include "devices/net/ctrl.h"
#include "virtio/poll_window.h"
#include "devices/net/stats.h"
#include "event/loop.h"
#include "util/log.h"
#include "vhost-user/device.h"
#include "virtio/virtqueue.h"

/* Frames or commands served in one callback before we yield to the rest
 * of the loop: a guest that keeps a ring full must not starve the
 * vhost-user socket or the other queues. */
#define VNET_TX_BUDGET 256
#define VNET_RX_BUDGET 256
#define VNET_CTRL_BUDGET 64

/* readv and writev take at most this many segments (IOV_MAX). */
#define VNET_MAX_IOV 1024

/* How often a pair looks again at a port that is busy (a full TX
 * ring) or keeps frames it sent (completions come with no event). */
#define VNET_RETRY_NS (200 * 1000)

struct vnet_pair {
	struct vnet_device *d;
	unsigned index;
	/* What the pair costs vmio: its queues' kicks and everything made
	 * for it (ops->queue_account). */
	struct vmio_cpu_account cpu;
	struct vmio_vq *rx, *tx;
	int rx_fd;        /* the port's when watched, -1 if it never receives */
	bool rx_watched;  /* rx_fd is on the loop */
	bool served;      /* its rx queue started since the last reset */
	/* The port's steering of the pair is left as it is (a TAP queue
	 * stays attached, the frames waiting in it kept) from a hold for a
	 * hand-over (VMIO_QUEUE_HOLD), or from the start on a port a
	 * predecessor handed over, until the rx queue starts again or the
	 * session ends (reset). Written on the pair's loop, or on the
	 * device's while every queue is stopped. */
	atomic_bool kept;
	bool attaching;   /* the port finishes attach later: wait */
	/* Chains a no-copy port keeps, and the queues they came from
	 * (the core's, alive as long as the device). */
	unsigned tx_held, rx_held;
	struct vmio_vq *tx_held_vq, *rx_held_vq;
	/* The steering round (vnet_device.steer_round) it applied last:
	 * written on its loop, read on the device's. */
	atomic_uint steered;
	/* The loop that serves the pair (both queues), and what it owns:
	 * everything below, which nothing on another thread touches. */
	struct vmio_loop *loop;
	struct vmio_mem *mem; /* guest memory its queues run on */
	struct vnet_stats stats;
	struct vmio_ratelimit rl;
	struct vmio_defer steer; /* apply the steering on the pair's loop */
	struct vmio_timer retry; /* look at tx again */
	/* Serve rx or tx again on the loop's next turn, as a kick would: a
	 * queue that stopped at its budget lets the rest of the loop go
	 * first. */
	struct vmio_defer rx_again, tx_again;
	/* Each queue's polling window (poll.h), from cfg.poll_ns. */
	struct vmio_poll_window rx_poll, tx_poll;

	/* Large: kept here, not on the stack. One chain being served (by
	 * one queue at a time: nothing that serves a queue may be called
	 * while another of the pair holds it), and the segments handed to
	 * the port (a header and a chain's). */
	struct vmio_chain chain;
	struct iovec iov[VNET_MAX_IOV];
	/* rx with MRG_RXBUF: the heads and sizes of the chains one frame
	 * is spread over. */
	uint16_t rx_heads[VNET_MAX_IOV];
	uint32_t rx_sizes[VNET_MAX_IOV];
	/* What a no-copy port gives back, a batch at a time. */
	struct vnet_done done[VNET_RX_BUDGET];
	uint32_t cookies[VNET_TX_BUDGET];
};

struct vnet_device {
	struct vmio_device_ops ops;
	struct vmio_loop *loop;
	struct vnet_device_config cfg;
	struct vnet_port *be;

	/* Written on the device's loop only while every queue is stopped
	 * (features_set, reset), so the pairs' loops read them freely. */
	uint64_t features; /* negotiated */
	size_t hdr_len;    /* virtio-net header size for them */
	/* How many pairs get frames (vnet_active_pairs), for the pairs'
	 * loops: the control queue changes it while they run; and the round
	 * of that change (steering.c). */
	atomic_uint steer_pairs, steer_round;

	/* The control queue's, on the device's loop. */
	struct vmio_mem *mem;
	struct vmio_vq *ctrl;
	/* The control queue's next turn: after its budget, or posted by a
	 * pair that applied the steering. */
	struct vmio_defer ctrl_again;
	struct vnet_ctrl_state ctrl_state;
	struct vnet_stats stats; /* ctrl_ok, ctrl_err */
	struct vmio_ratelimit rl;
	struct vmio_chain chain;
	/* The answered command whose ack waits for the pairs' steering:
	 * its head and the bytes written (its ack is in guest memory). */
	bool ack_waits;
	uint16_t ack_head;
	uint32_t ack_written;
	uint8_t ctrl_buf[VNET_CTRL_MAX_LEN];
	/* A predecessor's control-queue state and features, applied once
	 * the session is restored (device_handover.h). */
	bool restoring;
	uint64_t restored_features;
	struct vnet_ctrl_state restored;
	/* SEND_RARP's MAC, and its frame's turn on pair 0's loop
	 * (announce.h). */
	uint8_t rarp_mac[6];
	struct vmio_defer rarp;
	/* vnet_device_watch_state's: told on the device's loop after a
	 * command changed the control state, before its ack is pushed. */
	void (*changed)(void *opaque);
	void *changed_opaque;

	unsigned npairs;
	struct vnet_pair pairs[];
};

static inline bool vnet_has(const struct vnet_device *d, unsigned bit)
{
	return d->features & (1ull << bit);
}

/* Queue pairs the guest may receive on: what VQ_PAIRS_SET chose when
 * the control queue is ours (MQ negotiated), else every pair (the VMM
 * answers the control queue and enables the pairs' queues itself: MQ
 * without CTRL_VQ, as QEMU does, tells pairs apart with
 * SET_VRING_ENABLE). */
static inline unsigned vnet_active_pairs(const struct vnet_device *d)
{
	if (!vnet_has(d, VIRTIO_NET_F_MQ) || !vnet_has(d, VIRTIO_NET_F_CTRL_VQ))
		return d->npairs;
	return d->ctrl_state.pairs < d->npairs ? d->ctrl_state.pairs
					       : d->npairs;
}

/* Kicks off for a drain. Already off (a queue polling, or back for its
 * next budget), the ring is not written again: the driver reads that
 * word beside the one it polls. */
static inline void vnet_kicks_off(struct vmio_vq *vq)
{
	if (!vq->kicks_disabled)
		vmio_vq_enable_kicks(vq, false);
}

#endif
