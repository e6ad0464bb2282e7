/* The control queue: each chain is one command (readable) and its ack
 * byte (writable). The command is copied out, bounded, and checked whole
 * by ctrl.c before anything changes; the answer goes in the first
 * writable byte. A chain with no writable byte is given back unanswered;
 * the queue goes on either way.
 *
 * An ack waits until every pair has applied the steering published so
 * far, the command's own included (steering.c states the rule); until
 * then the queue takes no other command. The ack byte is written at
 * once: what waits is the chain's head and length, no pointer into
 * guest memory. A stop gives the command back unused (vmio_vq_unpop), to
 * the queue's restart or whoever runs the ring next: a command run again
 * changes nothing. */
#include "devices/net/ctrl_queue.h"

#include "devices/net/steering.h"

static uint8_t ctrl_one(struct vnet_device *d)
{
	const struct vmio_chain *c = &d->chain;
	const char *why = NULL;
	struct vnet_ctrl_state before = d->ctrl_state;
	uint8_t ack;

	if (c->out_len > sizeof(d->ctrl_buf)) {
		ack = VIRTIO_NET_ERR;
		why = "command too long";
	} else {
		size_t len = vmio_chain_read(c, 0, d->ctrl_buf, c->out_len);

		ack = vnet_ctrl_apply(&d->ctrl_state, d->ctrl_buf, len, &why);
	}
	if (ack != VIRTIO_NET_OK) {
		d->stats.ctrl_err++;
		log_ratelimited(&d->rl, VMIO_LOG_WARN,
				"net: control queue: refused a command: %s", why);
		return ack;
	}
	d->stats.ctrl_ok++;
	if (before.pairs != d->ctrl_state.pairs)
		log_info("net: the guest uses %u queue pair(s)",
			 d->ctrl_state.pairs);
	return ack;
}

/* Runs the command in d->chain and writes its ack, which then waits;
 * the steering changes if the command changed the pairs. */
static void answer(struct vnet_device *d)
{
	uint16_t pairs = d->ctrl_state.pairs;
	uint8_t ack = ctrl_one(d);

	d->ack_head = d->chain.head;
	d->ack_written = 0;
	if (d->chain.in_len)
		d->ack_written =
			(uint32_t)vmio_chain_write(&d->chain, 0, &ack, 1);
	vmio_vq_log_iov(d->ctrl, vmio_chain_in(&d->chain), d->chain.nin,
			d->ack_written);
	d->ack_waits = true;
	if (pairs != d->ctrl_state.pairs)
		vnet_update_steering(d);
	if (ack == VIRTIO_NET_OK && d->changed)
		d->changed(d->changed_opaque);
}

/* Pushes the waiting ack if every pair has the steering. */
static bool ack_pushed(struct vnet_device *d)
{
	if (!vnet_steering_applied(d))
		return false;
	vmio_vq_push(d->ctrl, d->ack_head, d->ack_written);
	d->ack_waits = false;
	return true;
}

void vnet_ctrl_run(struct vnet_device *d)
{
	unsigned budget = VNET_CTRL_BUDGET, pushed = 0;
	int got = 0;

	if (!d->ctrl || !d->mem)
		return;
	if (d->ack_waits) {
		if (!ack_pushed(d))
			return;
		pushed++;
	}
	while (budget--) {
		got = vmio_vq_pop(d->ctrl, d->mem, &d->chain);
		if (got <= 0)
			break;
		answer(d);
		if (!ack_pushed(d))
			break;
		pushed++;
	}
	if (pushed)
		vmio_vq_flush_and_notify(d->ctrl);
	/* A waiting ack is woken by the pairs. */
	if (got > 0 && !d->ack_waits)
		vmio_defer_schedule(&d->ctrl_again);
}

void vnet_ctrl_stop(struct vnet_device *d, struct vmio_vq *vq)
{
	if (d->ack_waits) {
		vmio_vq_unpop(vq, 1);
		d->ack_waits = false;
	}
	d->ctrl = NULL;
}

/* The next turn a budget or the pairs asked for: what a kick calls. */
static void on_again(void *opaque)
{
	vnet_ctrl_run(opaque);
}

void vnet_ctrl_queue_init(struct vnet_device *d)
{
	vmio_defer_init(&d->ctrl_again, d->loop, on_again, d);
}

void vnet_ctrl_queue_fini(struct vnet_device *d)
{
	vmio_defer_cancel(&d->ctrl_again);
}
