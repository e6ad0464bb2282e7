/* The control queue: each chain is one command (readable) and its ack
 * byte (writable). The command is copied out, bounded, and checked whole
 * by ctrl.c before anything changes; the answer goes in the first
 * writable byte. A chain with no writable byte is given back unanswered;
 * the queue goes on either way. */
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

void vnet_ctrl_run(struct vnet_device *d)
{
	unsigned budget = VNET_CTRL_BUDGET, pushed = 0;
	uint16_t pairs = d->ctrl_state.pairs;
	int got = 0;

	if (!d->ctrl || !d->mem)
		return;
	while (budget--) {
		uint8_t ack;
		uint32_t written = 0;

		got = vmio_vq_pop(d->ctrl, d->mem, &d->chain);
		if (got <= 0)
			break;
		ack = ctrl_one(d);
		if (d->chain.in_len)
			written = (uint32_t)vmio_chain_write(&d->chain, 0, &ack, 1);
		vmio_vq_push(d->ctrl, d->chain.head, written);
		pushed++;
	}
	if (pushed)
		vmio_vq_flush_and_notify(d->ctrl);
	if (got > 0)
		vmio_defer_schedule(&d->ctrl_again);
	/* Only now: steering serves rx rings, and with them d->chain,
	 * which held the commands. */
	if (pairs != d->ctrl_state.pairs)
		vnet_update_steering(d);
}

/* The next turn a budget asked for: what a kick calls. */
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
