/* The vsock device's callbacks: they only wire the core's queues to the
 * multiplexer. No chain is ever held between callbacks (the multiplexer
 * pushes every tx chain before returning and takes an rx chain only to
 * fill it), so a queue stop or a memory table change has nothing to give
 * back: the pointers are dropped and the queues come back through
 * queue_start. */
#include "devices/vsock/device.h"
#include "devices/vsock/device_internal.h"

#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "devices/vsock/hybrid.h"
#include "devices/vsock/muxer.h"
#include "util/json.h"
#include "devices/vsock/packet.h"
#include "vhost-user/protocol.h"
#include "virtio/features.h"


static void dev_wire(struct vsock_device *d)
{
	vsock_muxer_set_queues(d->mux, d->rx, d->tx, d->mem);
}

static void vs_queue_start(void *dev, struct vmio_vq *vq, struct vmio_mem *mem)
{
	struct vsock_device *d = dev;

	if (vq->index > VSOCK_TX_QUEUE)
		return;
	vq->name = vq->index == VSOCK_RX_QUEUE ? "rx" : "tx";
	if (vq->index == VSOCK_RX_QUEUE)
		d->rx = vq;
	else
		d->tx = vq;
	d->mem = mem;
	dev_wire(d);
	/* The driver may have posted buffers before the start and will not
	 * kick for them again; serving tx serves rx too. */
	vsock_muxer_kick(d->mux, d->tx);
}

static void vs_queue_stop(void *dev, struct vmio_vq *vq,
			  enum vmio_queue_stop how)
{
	struct vsock_device *d = dev;

	if (d->rx == vq)
		d->rx = NULL;
	if (d->tx == vq)
		d->tx = NULL;
	dev_wire(d);
}

static void vs_queue_kick(void *dev, struct vmio_vq *vq)
{
	struct vsock_device *d = dev;

	vsock_muxer_kick(d->mux, vq);
}

static void vs_memory_changing(void *dev)
{
	struct vsock_device *d = dev;

	d->rx = d->tx = NULL;
	d->mem = NULL;
	dev_wire(d);
}

/* The front end is gone, and the guest with it: its connections mean
 * nothing to the next one. The uds listener stays. */
static void vs_reset(void *dev)
{
	struct vsock_device *d = dev;

	d->rx = d->tx = NULL;
	d->mem = NULL;
	vsock_muxer_reset(d->mux);
	vsock_muxer_set_attached(d->mux, false);
}

static int vs_features_set(void *dev, uint64_t features)
{
	struct vsock_device *d = dev;

	vsock_muxer_set_types(d->mux, vsock_types_from_features(features));
	vsock_muxer_set_mergeable(
		d->mux, features & VMIO_BIT(VIRTIO_VSOCK_F_MRG_RXBUF));
	vsock_muxer_set_attached(d->mux, true);
	return 0;
}

static int vs_get_config(void *dev, uint8_t *buf, uint32_t offset,
			 uint32_t len)
{
	const struct vsock_device *d = dev;

	return vmio_config_read_le64(d->guest_cid, buf, offset, len);
}

/* Stream needs no bit (it is implied); seqpacket is offered, and accepted
 * from the guest only once negotiated (vsock_types_from_features).
 * Mergeable rx buffers are offered too: a driver that does not take the
 * bit sees the plain layout, unchanged. */
static const struct vmio_device_ops vsock_ops_template = {
	.name = "vsock",
	.features = VMIO_BIT(VIRTIO_F_VERSION_1) |
		    VMIO_BIT(VIRTIO_RING_F_EVENT_IDX) |
		    VMIO_BIT(VIRTIO_RING_F_INDIRECT_DESC) |
		    VMIO_BIT(VIRTIO_F_RING_PACKED) |
		    VMIO_BIT(VIRTIO_VSOCK_F_SEQPACKET) |
		    VMIO_BIT(VIRTIO_VSOCK_F_MRG_RXBUF),
	/* QEMU's vhost-user-vsock reads the CID with GET_CONFIG. */
	.protocol_features = VMIO_BIT(VHOST_USER_PROTOCOL_F_CONFIG),
	.num_queues = 2,
	.max_queue_size = VIRTQ_MAX_SIZE,
	.config_size = sizeof(uint64_t),
	.get_config = vs_get_config,
	.features_set = vs_features_set,
	.queue_start = vs_queue_start,
	.queue_stop = vs_queue_stop,
	.queue_kick = vs_queue_kick,
	.memory_changing = vs_memory_changing,
	.reset = vs_reset,
};

/* What the multiplexer and the hybrid listener are given of cfg. */
static struct vsock_muxer_config muxer_config(const struct vsock_device_config *cfg)
{
	return (struct vsock_muxer_config){
		.guest_cid = cfg->guest_cid,
		.uds_path = cfg->uds_path,
		.buf_size = cfg->buf_size,
		.max_conns = cfg->max_conns,
		.connect_timeout_ms = cfg->connect_timeout_ms,
		.poll_ns = cfg->poll_ns,
		.tx_copy = cfg->tx_copy,
		.tx_hold_max = cfg->tx_hold_max,
		.rx_pkt_overhead = cfg->rx_pkt_overhead,
		.port_first = cfg->port_first,
		.port_last = cfg->port_last,
		.router = cfg->router,
		.vm_index = cfg->vm_index,
	};
}

struct vsock_hybrid_config vsock_device_hybrid_config(
	const struct vsock_device_config *cfg)
{
	return (struct vsock_hybrid_config){
		.uds_path = cfg->uds_path,
		.max_pending = cfg->max_conns,
		.line_timeout_ms = cfg->connect_timeout_ms,
		.line_max = cfg->connect_line_max,
	};
}

struct vsock_device *vsock_device_alloc(struct vmio_loop *loop,
					const struct vsock_device_config *cfg)
{
	struct vsock_device *d = calloc(1, sizeof(*d));
	struct vsock_muxer_config mc = muxer_config(cfg);

	if (!d)
		return NULL;
	d->ops = vsock_ops_template;
	d->guest_cid = cfg->guest_cid;
	/* The core refuses a larger SET_VRING_NUM (handlers.c). */
	d->ops.max_queue_size = cfg->max_queue_size &&
					cfg->max_queue_size <= VIRTQ_MAX_SIZE
				? cfg->max_queue_size
				: VIRTQ_MAX_SIZE;
	/* Chains go back in the order they came, except those held for a
	 * splice (given back as the host reads each connection's). */
	if (cfg->tx_copy)
		d->ops.features |= VMIO_BIT(VIRTIO_F_IN_ORDER);
	d->mux = vsock_muxer_new(loop, &mc);
	if (!d->mux) {
		free(d);
		return NULL;
	}
	return d;
}

struct vsock_device *vsock_device_new(struct vmio_loop *loop,
				      const struct vsock_device_config *cfg,
				      int *err)
{
	struct vsock_device *d = vsock_device_alloc(loop, cfg);
	struct vsock_hybrid_config hc = vsock_device_hybrid_config(cfg);
	int rc = -ENOMEM;

	if (d) {
		d->hybrid = vsock_hybrid_new(loop, d->mux, &hc, &rc);
		if (d->hybrid)
			return d;
	}
	if (err)
		*err = rc;
	vsock_device_free(d);
	return NULL;
}

void vsock_device_free(struct vsock_device *d)
{
	if (!d)
		return;
	vsock_hybrid_free(d->hybrid);
	vsock_muxer_free(d->mux);
	free(d);
}

const struct vmio_device_ops *vsock_device_ops(const struct vsock_device *d)
{
	return &d->ops;
}

int vsock_device_journal_fd(const struct vsock_device *d)
{
	return vsock_muxer_journal_fd(d->mux);
}

void vsock_device_let_go_journal(struct vsock_device *d)
{
	vsock_muxer_let_go_journal(d->mux);
}

unsigned vsock_device_owe_rsts(struct vsock_device *d, int journal_fd)
{
	return vsock_muxer_owe_rsts(d->mux, journal_fd);
}

void vsock_device_write_stats(const struct vsock_device *d,
			      struct vmio_json *j)
{
	vmio_json_kv_uint(j, "guest_cid", d->guest_cid);
	vsock_muxer_write_stats(d->mux, j);
}
