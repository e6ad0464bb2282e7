/* The net device's callbacks: feature negotiation, config space, and which
 * queue is what. Queue 2i is pair i's rx and 2i+1 its tx; the control
 * queue follows the last pair when MQ is negotiated, and is queue 2
 * otherwise (5.1.2). */
#include "devices/net/device.h"

#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "devices/net/announce.h"
#include "devices/net/ctrl_queue.h"
#include "devices/net/held_chains.h"
#include "devices/net/rx.h"
#include "devices/net/state.h"
#include "devices/net/steering.h"
#include "devices/net/tx.h"
#include "virtio/features.h"

enum vnet_role { ROLE_NONE, ROLE_RX, ROLE_TX, ROLE_CTRL };

static unsigned ctrl_index(const struct vnet_device *d)
{
	return vnet_has(d, VIRTIO_NET_F_MQ) ? 2 * d->npairs : 2;
}

static enum vnet_role queue_role(const struct vnet_device *d, unsigned index,
				 struct vnet_pair **pair)
{
	unsigned data_queues = vnet_has(d, VIRTIO_NET_F_MQ) ? 2 * d->npairs : 2;

	if (index < data_queues) {
		*pair = (struct vnet_pair *)&d->pairs[index / 2];
		return index % 2 ? ROLE_TX : ROLE_RX;
	}
	if (index == ctrl_index(d) && vnet_has(d, VIRTIO_NET_F_CTRL_VQ))
		return ROLE_CTRL;
	return ROLE_NONE;
}

static void net_queue_start(void *dev, struct vmio_vq *vq, struct vmio_mem *mem)
{
	struct vnet_device *d = dev;
	struct vnet_pair *p = NULL;

	/* Its size is at most d->cfg.max_queue_size: the core refused any
	 * other (ops.max_queue_size). The driver may have posted buffers before the start and will not
	 * kick for them again: serve each queue once now. */
	switch (queue_role(d, vq->index, &p)) {
	case ROLE_RX:
		vq->name = "rx";
		p->rx = vq;
		p->mem = mem;
		p->served = true;
		atomic_store_explicit(&p->kept, false, memory_order_relaxed);
		vnet_pair_attach(p, mem);
		vnet_steer_pair(p);
		vnet_rx_run(p);
		break;
	case ROLE_TX:
		vq->name = "tx";
		p->tx = vq;
		p->mem = mem;
		vnet_pair_attach(p, mem);
		vnet_rx_run(p); /* attach dropped the rx watch (and may post) */
		vnet_tx_run(p);
		break;
	case ROLE_CTRL:
		vq->name = "ctrl";
		d->ctrl = vq;
		d->mem = mem;
		vnet_ctrl_run(d);
		break;
	case ROLE_NONE:
		vmio_vq_set_broken(vq, "not a queue of this device with the "
				       "negotiated features");
		break;
	}
}

/* On the queue's loop. A pause (the VMM changing a call fd, say) keeps
 * what a no-copy port holds: the rings and the memory stay. A stop for
 * good (GET_VRING_BASE, or SET_VRING_ENABLE 0 from a VMM that answers the
 * control queue itself dropping pairs) or for a memory table change gives
 * the guest every chain back; a stop for good also takes the pair's flows
 * elsewhere, but not a hold for a hand-over, after which the guest's
 * queue is served on (by the successor, which takes the port's queues
 * with the frames waiting in them). The chains come back by detaching
 * the whole pair from a no-copy port, so the pair's other queue, if it
 * runs on, attaches it again. A queue only paused may be stopped again
 * for the chains. */
static void net_queue_stop(void *dev, struct vmio_vq *vq,
			   enum vmio_queue_stop how)
{
	struct vnet_device *d = dev;
	struct vnet_pair *p = NULL;

	switch (queue_role(d, vq->index, &p)) {
	case ROLE_RX:
	case ROLE_TX:
		if (how != VMIO_QUEUE_PAUSE)
			vnet_pair_detach(p);
		if (p->rx == vq) {
			vnet_rx_unwatch(p);
			vmio_poll_window_end(&p->rx_poll);
			p->rx = NULL;
		}
		if (p->tx == vq) {
			vmio_poll_window_end(&p->tx_poll);
			p->tx = NULL;
		}
		if (how == VMIO_QUEUE_HOLD && vq->index % 2 == 0 &&
		    p->served) {
			p->served = false;
			atomic_store_explicit(&p->kept, true,
					      memory_order_relaxed);
		}
		if (how == VMIO_QUEUE_HALT && vq->index % 2 == 0 &&
		    p->served) {
			p->served = false;
			vnet_steer_pair(p);
		}
		if (how == VMIO_QUEUE_HALT)
			vnet_pair_reattach(p);
		break;
	case ROLE_CTRL:
		vnet_ctrl_stop(d, vq);
		break;
	case ROLE_NONE:
		break;
	}
}

/* Pair i's queues on pair i's loop; the control queue on the device's. */
static struct vmio_loop *net_queue_loop(void *dev, unsigned index)
{
	struct vnet_device *d = dev;
	struct vnet_pair *p = NULL;
	enum vnet_role role = queue_role(d, index, &p);

	return role == ROLE_RX || role == ROLE_TX ? p->loop : NULL;
}

static struct vmio_cpu_account *net_queue_account(void *dev, unsigned index)
{
	struct vnet_device *d = dev;
	struct vnet_pair *p = NULL;
	enum vnet_role role = queue_role(d, index, &p);

	return role == ROLE_RX || role == ROLE_TX ? &p->cpu : NULL;
}

static void net_queue_kick(void *dev, struct vmio_vq *vq)
{
	struct vnet_device *d = dev;
	struct vnet_pair *p = NULL;

	switch (queue_role(d, vq->index, &p)) {
	case ROLE_RX:
		if (p->rx == vq)
			vnet_rx_run(p);
		break;
	case ROLE_TX:
		if (p->tx == vq)
			vnet_tx_run(p);
		break;
	case ROLE_CTRL:
		if (d->ctrl == vq)
			vnet_ctrl_run(d);
		break;
	case ROLE_NONE:
		break;
	}
}

/* At the device's end (no loop runs any more): every pointer into guest
 * memory goes, nothing goes back. */
static void forget_queues(struct vnet_device *d)
{
	for (unsigned i = 0; i < d->npairs; i++) {
		vnet_rx_unwatch(&d->pairs[i]);
		d->pairs[i].rx = d->pairs[i].tx = NULL;
	}
	d->ctrl = NULL;
	d->mem = NULL;
}

/* The state before any front end's, steered so. */
static void reset_state(struct vnet_device *d)
{
	d->features = 0;
	d->hdr_len = vnet_hdr_len(0);
	vnet_ctrl_init(&d->ctrl_state, 0, (uint16_t)d->npairs, d->cfg.mac);
	vnet_update_steering(d);
}

/* Every queue has stopped for good on its loop (and given back what the
 * port held); what is left is the negotiated state. The session is over:
 * no pair is kept for one (a front end that left while held). */
static void net_reset(void *dev)
{
	struct vnet_device *d = dev;

	for (unsigned i = 0; i < d->npairs; i++)
		atomic_store_explicit(&d->pairs[i].kept, false,
				      memory_order_relaxed);
	reset_state(d);
}

/* Feature dependencies the spec states (5.1.3.1): an offload needs the
 * checksum offload under it. Not those of the control queue's users
 * (CTRL_RX, CTRL_MAC_ADDR, MQ) on CTRL_VQ: QEMU and DPDK's virtio-user
 * answer the control queue themselves, keep CTRL_VQ to themselves and
 * pass the rest on to a vhost-user device. */
static const char *bad_feature_combination(uint64_t f)
{
	uint64_t host_tso = VMIO_BIT(VIRTIO_NET_F_HOST_TSO4) |
			    VMIO_BIT(VIRTIO_NET_F_HOST_TSO6);
	uint64_t guest_tso = VMIO_BIT(VIRTIO_NET_F_GUEST_TSO4) |
			     VMIO_BIT(VIRTIO_NET_F_GUEST_TSO6);

	if ((f & host_tso) && !(f & VMIO_BIT(VIRTIO_NET_F_CSUM)))
		return "HOST_TSO without CSUM";
	if ((f & guest_tso) && !(f & VMIO_BIT(VIRTIO_NET_F_GUEST_CSUM)))
		return "GUEST_TSO without GUEST_CSUM";
	return NULL;
}

static int net_features_set(void *dev, uint64_t features)
{
	struct vnet_device *d = dev;
	const char *why = bad_feature_combination(features);
	int rc;

	if (why) {
		log_err("net: the driver's features are inconsistent: %s", why);
		return -EINVAL;
	}
	d->features = features;
	d->hdr_len = vnet_hdr_len(features);
	vnet_ctrl_init(&d->ctrl_state, features, (uint16_t)d->npairs,
		       d->cfg.mac);
	rc = d->be->ops->configure(d->be, features, d->hdr_len);
	if (rc)
		return rc;
	log_info("net: features 0x%llx, %zu-byte header, %s backend",
		 (unsigned long long)features, d->hdr_len, d->be->ops->name);
	/* With MQ the guest starts on one pair (5.1.6.5.5). */
	vnet_update_steering(d);
	return 0;
}

static int net_get_config(void *dev, uint8_t *buf, uint32_t offset,
			  uint32_t len)
{
	const struct vnet_device *d = dev;
	struct virtio_net_config c;

	/* The core checked the range against ops.config_size. */
	memcpy(c.mac, d->cfg.mac, sizeof(c.mac));
	c.status = htole16(VIRTIO_NET_S_LINK_UP);
	c.max_virtqueue_pairs = htole16((uint16_t)d->npairs);
	c.mtu = htole16(d->cfg.mtu);
	memcpy(buf, (const uint8_t *)&c + offset, len);
	return 0;
}

/* What every net device offers; the port's offloads are added. The
 * control queue's users (CTRL_RX, CTRL_MAC_ADDR, GUEST_ANNOUNCE) come
 * with it. */
#define VNET_BASE_FEATURES                                                    \
	(VMIO_BIT(VIRTIO_F_VERSION_1) | VMIO_BIT(VIRTIO_RING_F_EVENT_IDX) |   \
	 VMIO_BIT(VIRTIO_RING_F_INDIRECT_DESC) |                              \
	 VMIO_BIT(VIRTIO_F_RING_PACKED) |                                     \
	 VMIO_BIT(VIRTIO_NET_F_MRG_RXBUF) | VMIO_BIT(VIRTIO_NET_F_MAC) |      \
	 VMIO_BIT(VIRTIO_NET_F_MTU) | VMIO_BIT(VIRTIO_NET_F_STATUS) |         \
	 VMIO_BIT(VIRTIO_NET_F_CTRL_VQ) | VMIO_BIT(VIRTIO_NET_F_CTRL_RX) |    \
	 VMIO_BIT(VIRTIO_NET_F_CTRL_MAC_ADDR) | VMIO_BIT(VIRTIO_NET_F_MQ) |   \
	 VMIO_BIT(VIRTIO_NET_F_GUEST_ANNOUNCE))

static void net_send_rarp(void *dev, const uint8_t mac[6])
{
	vnet_announce_rarp(dev, mac);
}

static const struct vmio_device_ops net_ops_template = {
	.name = "net",
	.features = VNET_BASE_FEATURES,
	/* Every write into guest memory is marked while QEMU migrates:
	 * frames received (rx.c, rx_posted.c), the control queue's ack
	 * (ctrl_queue.c), the rings (virtio/). */
	.logs_writes = true,
	.send_rarp = net_send_rarp,
	.max_queue_size = VIRTQ_MAX_SIZE,
	.config_size = sizeof(struct virtio_net_config),
	.get_config = net_get_config,
	.features_set = net_features_set,
	.queue_start = net_queue_start,
	.queue_stop = net_queue_stop,
	.queue_kick = net_queue_kick,
	.queue_loop = net_queue_loop,
	.queue_account = net_queue_account,
	.reset = net_reset,
};

struct vnet_device *vnet_device_new(struct vmio_loop *loop,
				    const struct vnet_device_config *cfg)
{
	struct vnet_device *d;

	if (!cfg->pairs || cfg->pairs > VNET_MAX_PAIRS || !cfg->port ||
	    cfg->port->pairs < cfg->pairs)
		return NULL;
	d = calloc(1, sizeof(*d) + cfg->pairs * sizeof(d->pairs[0]));
	if (!d)
		return NULL;
	d->loop = loop;
	d->cfg = *cfg;
	if (!d->cfg.max_queue_size || d->cfg.max_queue_size > VIRTQ_MAX_SIZE)
		d->cfg.max_queue_size = VIRTQ_MAX_SIZE;
	d->be = cfg->port;
	d->npairs = cfg->pairs;
	d->rl = (struct vmio_ratelimit)VMIO_RATELIMIT_INIT(5);
	d->ops = net_ops_template;
	d->ops.features |= d->be->offloads;
	/* A port that holds transmitted chains or receives into posted
	 * buffers gives them back in the order the kernel finishes them, not
	 * the order the guest made them available. */
	if (!d->be->ops->tx_reap && !d->be->ops->rx_posts)
		d->ops.features |= VMIO_BIT(VIRTIO_F_IN_ORDER);
	d->ops.num_queues = 2 * d->npairs + 1;
	d->ops.max_queue_size = d->cfg.max_queue_size;
	d->be->max_frame = vnet_max_frame(d->cfg.mtu);
	/* An attach the port finishes later comes back here. */
	d->be->loop = loop;
	d->be->attached = vnet_pair_attached;
	d->be->attached_opaque = d;
	vnet_ctrl_queue_init(d);
	for (unsigned i = 0; i < d->npairs; i++) {
		struct vnet_pair *p = &d->pairs[i];
		struct vmio_cpu_account *outer;

		/* A part of the VM's, current while the device is made. */
		vmio_cpu_account_init(&p->cpu, vmio_cpu_account_current());
		outer = vmio_cpu_account_enter(&p->cpu);
		p->d = d;
		p->index = i;
		p->loop = cfg->pair_loops ? cfg->pair_loops[i] : loop;
		p->rx_fd = -1;
		atomic_init(&p->kept, d->be->handed_over);
		p->rl = (struct vmio_ratelimit)VMIO_RATELIMIT_INIT(5);
		vmio_poll_window_init(&p->rx_poll, cfg->poll_ns);
		vmio_poll_window_init(&p->tx_poll, cfg->poll_ns);
		vnet_rx_init(p);
		vnet_steering_init(p);
		vmio_cpu_account_leave(outer);
	}
	for (unsigned i = 0; i < d->npairs; i++) {
		struct vmio_cpu_account *outer =
			vmio_cpu_account_enter(&d->pairs[i].cpu);
		int rc = vnet_tx_init(&d->pairs[i]);

		vmio_cpu_account_leave(outer);
		if (rc) {
			log_err("net: cannot create a timer: %s", strerror(-rc));
			vnet_device_free(d);
			return NULL;
		}
	}
	vnet_announce_init(d);
	reset_state(d);
	return d;
}

void vnet_device_free(struct vnet_device *d)
{
	if (!d)
		return;
	/* The core (and its queues) may be gone: nothing goes back. */
	forget_queues(d);
	/* An attach still under way gives up: it touches no queue. */
	for (unsigned i = 0; i < d->npairs; i++)
		if (d->pairs[i].attaching && d->be->ops->detach)
			d->be->ops->detach(d->be, i);
	d->be->attached = NULL;
	d->be->loop = NULL;
	vnet_ctrl_queue_fini(d);
	vnet_announce_fini(d);
	for (unsigned i = 0; i < d->npairs; i++) {
		vnet_tx_fini(&d->pairs[i]);
		vnet_rx_fini(&d->pairs[i]);
		vnet_steering_fini(&d->pairs[i]);
		vmio_cpu_account_fini(&d->pairs[i].cpu);
	}
	free(d);
}

void vnet_device_watch_state(struct vnet_device *d, void (*cb)(void *opaque),
			     void *opaque)
{
	d->changed = cb;
	d->changed_opaque = opaque;
}

const struct vmio_device_ops *vnet_device_ops(const struct vnet_device *d)
{
	return &d->ops;
}

void vnet_device_stats(const struct vnet_device *d, struct vnet_stats *out)
{
	*out = d->stats;
	for (unsigned i = 0; i < d->npairs; i++)
		vnet_stats_add(out, &d->pairs[i].stats);
}

const struct vnet_stats *vnet_ctrl_stats(const struct vnet_device *d)
{
	return &d->stats;
}

const struct vnet_stats *vnet_pair_stats(const struct vnet_device *d,
					 unsigned pair)
{
	return pair < d->npairs ? &d->pairs[pair].stats : NULL;
}

uint64_t vnet_pair_cpu_ns(const struct vnet_device *d, unsigned pair)
{
	return pair < d->npairs ? vmio_cpu_account_ns(&d->pairs[pair].cpu) : 0;
}
