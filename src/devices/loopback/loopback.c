#include "devices/loopback/loopback.h"

#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/iov.h"
#include "util/log.h"
#include "vhost-user/protocol.h"
#include "virtio/features.h"

/* Chains handled in one call before we yield to the rest of the loop (the
 * vhost-user socket above all): a driver that keeps both rings full would
 * otherwise keep us here forever. */
#define LB_CHAIN_BUDGET 1024

/* How to resume a tx chain that was only partly delivered. Nothing is
 * held across returns to the loop: a partly consumed tx chain is given
 * back with vmio_vq_unpop, so memory_changing, queue_stop and reset find
 * no pointer into guest memory to drop, and we remember how many of its
 * bytes already went out. The next pop of the same ring slot returns the
 * same chain (the driver may not change an entry it made available), so
 * we skip that many bytes: no byte is lost or sent twice, even across a
 * memory table change or a queue stop and restart at the base we
 * reported. The slot and head are checked so that a ring restarted
 * elsewhere (SET_VRING_BASE) never has bytes of a different chain skipped.
 * An rx chain is never held: it is pushed with what it has when the tx
 * data runs out. */
struct lb_partial {
	bool valid;
	uint16_t avail_slot; /* last_avail_idx the chain was popped from */
	uint16_t head;
	uint64_t done; /* bytes of its readable part already delivered */
};

struct vmio_loopback {
	struct vmio_device_ops ops; /* the template with our queue limit */
	struct vmio_vq *rx, *tx;
	struct vmio_mem *mem;
	struct vmio_defer again; /* the next turn, after a budget ran out */
	uint64_t bytes;
	struct lb_partial partial;
	/* Large (one iovec array each): kept here, not on the stack. */
	struct vmio_chain rxc, txc;
};

/* Why a pump round stopped. */
enum lb_stop {
	LB_TX_EMPTY,
	LB_RX_EMPTY,
	LB_BROKEN,
	LB_BUDGET,
};

/* The state of one pump round: the chains in hand and how far into each. */
struct lb_round {
	bool have_tx, have_rx;
	uint64_t tx_done, rx_done;
	struct vmio_iov_cursor tx_cur, rx_cur;
	unsigned tx_pushed, rx_pushed;
	unsigned budget;
};

static uint64_t resume_offset(struct vmio_loopback *lb, uint16_t slot)
{
	struct lb_partial *p = &lb->partial;
	uint64_t done = 0;

	if (p->valid && p->avail_slot == slot && p->head == lb->txc.head)
		done = p->done < lb->txc.out_len ? p->done : lb->txc.out_len;
	p->valid = false;
	return done;
}

/* Returns 1 with a tx chain in hand, 0 if the ring is empty, -1 if the
 * queue broke. */
static int take_tx(struct vmio_loopback *lb, struct lb_round *r)
{
	uint16_t slot = lb->tx->last_avail_idx;
	int got = vmio_vq_pop(lb->tx, lb->mem, &lb->txc);

	if (got <= 0)
		return got;
	r->have_tx = true;
	r->tx_done = resume_offset(lb, slot);
	vmio_iov_cursor_init(&r->tx_cur, vmio_chain_out(&lb->txc), lb->txc.nout);
	vmio_iov_cursor_skip(&r->tx_cur, r->tx_done);
	r->budget--;
	return 1;
}

static int take_rx(struct vmio_loopback *lb, struct lb_round *r)
{
	int got = vmio_vq_pop(lb->rx, lb->mem, &lb->rxc);

	if (got <= 0)
		return got;
	r->have_rx = true;
	r->rx_done = 0;
	vmio_iov_cursor_init(&r->rx_cur, vmio_chain_in(&lb->rxc), lb->rxc.nin);
	r->budget--;
	return 1;
}

static void finish_tx(struct vmio_loopback *lb, struct lb_round *r)
{
	vmio_vq_push(lb->tx, lb->txc.head, 0);
	r->tx_pushed++;
	r->have_tx = false;
}

static void finish_rx(struct vmio_loopback *lb, struct lb_round *r)
{
	vmio_vq_push(lb->rx, lb->rxc.head, (uint32_t)r->rx_done);
	r->rx_pushed++;
	r->have_rx = false;
}

/* Moves bytes until a ring runs dry, a queue breaks or the budget ends. */
static enum lb_stop pump(struct vmio_loopback *lb, struct lb_round *r)
{
	int got;

	for (;;) {
		if (!r->have_tx) {
			if (!r->budget)
				return LB_BUDGET;
			got = take_tx(lb, r);
			if (got <= 0)
				return got < 0 ? LB_BROKEN : LB_TX_EMPTY;
		}
		if (r->tx_done == lb->txc.out_len) {
			finish_tx(lb, r);
			continue;
		}
		if (!r->have_rx) {
			if (!r->budget)
				return LB_BUDGET;
			got = take_rx(lb, r);
			if (got <= 0)
				return got < 0 ? LB_BROKEN : LB_RX_EMPTY;
		}
		uint64_t n = vmio_iov_cursor_copy(&r->rx_cur, &r->tx_cur);

		r->tx_done += n;
		r->rx_done += n;
		lb->bytes += n;
		if (r->rx_done == lb->rxc.in_len)
			finish_rx(lb, r);
	}
}

/* Resolves whatever the round still holds, so that nothing is held when
 * we return to the loop (see struct lb_partial). */
static void end_round(struct vmio_loopback *lb, struct lb_round *r)
{
	if (r->have_rx) {
		if (r->rx_done)
			finish_rx(lb, r);
		else
			vmio_vq_unpop(lb->rx, 1);
		r->have_rx = false;
	}
	if (r->have_tx) {
		vmio_vq_unpop(lb->tx, 1);
		lb->partial = (struct lb_partial){
			.valid = true,
			.avail_slot = lb->tx->last_avail_idx,
			.head = lb->txc.head,
			.done = r->tx_done,
		};
		r->have_tx = false;
	}
	if (r->tx_pushed)
		vmio_vq_flush_and_notify(lb->tx);
	if (r->rx_pushed)
		vmio_vq_flush_and_notify(lb->rx);
	r->tx_pushed = 0;
	r->rx_pushed = 0;
}

/* Moves data while there is any. Kicks are off while we drain (the driver
 * need not tell us about buffers we are about to find anyway); before
 * returning we turn on kicks for the one ring we are waiting on and look
 * again, since buffers posted before the driver saw kicks enabled would
 * otherwise never be announced. The other ring's kicks stay off: its
 * buffers are of no use until the one we wait on moves. */
static void run(struct vmio_loopback *lb)
{
	struct lb_round r = { .budget = LB_CHAIN_BUDGET };
	enum lb_stop why;

	if (!lb->rx || !lb->tx || !lb->mem)
		return;
	for (;;) {
		vmio_vq_enable_kicks(lb->tx, false);
		vmio_vq_enable_kicks(lb->rx, false);
		why = pump(lb, &r);
		end_round(lb, &r);
		if (why == LB_BROKEN)
			return;
		if (why == LB_BUDGET) {
			/* Once the loop has served everything else. */
			vmio_defer_schedule(&lb->again);
			return;
		}
		struct vmio_vq *wait_on = why == LB_TX_EMPTY ? lb->tx : lb->rx;
		if (!vmio_vq_enable_kicks(wait_on, true))
			return;
	}
}

static void lb_queue_start(void *dev, struct vmio_vq *vq, struct vmio_mem *mem)
{
	struct vmio_loopback *lb = dev;

	/* The core refused a size above ops.max_queue_size. */
	if (vq->index > VMIO_LOOPBACK_TX_QUEUE)
		return;
	vq->name = vq->index == VMIO_LOOPBACK_RX_QUEUE ? "rx" : "tx";
	if (vq->index == VMIO_LOOPBACK_RX_QUEUE)
		lb->rx = vq;
	else
		lb->tx = vq;
	lb->mem = mem;
	/* The driver may have posted buffers before the queue started, and
	 * will not kick again for them. */
	run(lb);
}

static void lb_queue_stop(void *dev, struct vmio_vq *vq,
			  enum vmio_queue_stop how)
{
	struct vmio_loopback *lb = dev;

	if (lb->rx == vq)
		lb->rx = NULL;
	if (lb->tx == vq)
		lb->tx = NULL;
}

static void lb_queue_kick(void *dev, struct vmio_vq *vq)
{
	run(dev);
}

static void lb_again(void *opaque)
{
	run(opaque);
}

static void lb_memory_changing(void *dev)
{
	struct vmio_loopback *lb = dev;

	/* No chain is held between calls; only the pointers go. The queues
	 * come back through queue_start with the new table. */
	lb->rx = NULL;
	lb->tx = NULL;
	lb->mem = NULL;
}

static void lb_reset(void *dev)
{
	struct vmio_loopback *lb = dev;

	lb->rx = NULL;
	lb->tx = NULL;
	lb->mem = NULL;
	lb->partial.valid = false;
}

static int lb_get_config(void *dev, uint8_t *buf, uint32_t offset,
			 uint32_t len)
{
	const struct vmio_loopback *lb = dev;

	return vmio_config_read_le64(lb->bytes, buf, offset, len);
}

/* Each device copies this and sets its own max_queue_size. */
static const struct vmio_device_ops loopback_ops_template = {
	.name = "loopback",
	.features = VMIO_BIT(VIRTIO_F_VERSION_1) |
		    VMIO_BIT(VIRTIO_RING_F_EVENT_IDX) |
		    VMIO_BIT(VIRTIO_RING_F_INDIRECT_DESC) |
		    VMIO_BIT(VIRTIO_F_RING_PACKED) | VMIO_BIT(VIRTIO_F_IN_ORDER),
	/* Its byte count is read with GET_CONFIG. */
	.protocol_features = VMIO_BIT(VHOST_USER_PROTOCOL_F_CONFIG),
	.num_queues = 2,
	.max_queue_size = VIRTQ_MAX_SIZE,
	.config_size = sizeof(uint64_t),
	.get_config = lb_get_config,
	.queue_start = lb_queue_start,
	.queue_stop = lb_queue_stop,
	.queue_kick = lb_queue_kick,
	.memory_changing = lb_memory_changing,
	.reset = lb_reset,
};

struct vmio_loopback *vmio_loopback_new(struct vmio_loop *loop,
					uint16_t max_queue_size)
{
	struct vmio_loopback *lb = calloc(1, sizeof(*lb));

	if (!lb)
		return NULL;
	if (max_queue_size == 0 || max_queue_size > VIRTQ_MAX_SIZE)
		max_queue_size = VIRTQ_MAX_SIZE;
	lb->ops = loopback_ops_template;
	lb->ops.max_queue_size = max_queue_size;
	vmio_defer_init(&lb->again, loop, lb_again, lb);
	return lb;
}

void vmio_loopback_free(struct vmio_loopback *lb)
{
	if (lb)
		vmio_defer_cancel(&lb->again);
	free(lb);
}

const struct vmio_device_ops *vmio_loopback_ops(const struct vmio_loopback *lb)
{
	return &lb->ops;
}
