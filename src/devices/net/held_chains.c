/* Chains a no-copy port keeps across callbacks, and the two moments
 * that bound their life: a queue pair starts on guest memory (attach), and
 * it stops for good or the memory table changes (detach). At detach the
 * port lets go of guest memory and every chain goes back to the queue
 * it came from: frames received with their length, the rest empty. A
 * mere pause (the VMM changing a call fd, say) keeps them: the rings and
 * the memory stay the same.
 *
 * A port may finish an attach later (VNET_ATTACH_LATER: AF_XDP waiting
 * for the kernel to let go of a queue): the pair then serves neither
 * queue until the port says it is done. */
#include "devices/net/held_chains.h"

#include "devices/net/rx.h"
#include "devices/net/rx_posted.h"
#include "devices/net/tx.h"

void vnet_pair_attach(struct vnet_pair *p, struct vmio_mem *mem)
{
	struct vnet_device *d = p->d;

	if (!d->be->ops->attach)
		return;
	/* The port may replace the descriptor we watch. */
	vnet_rx_unwatch(p);
	p->attaching = d->be->ops->attach(d->be, p->index, mem) ==
		       VNET_ATTACH_LATER;
}

void vnet_pair_attached(void *opaque, unsigned pair)
{
	struct vnet_device *d = opaque;
	struct vnet_pair *p;

	if (pair >= d->npairs || !d->pairs[pair].attaching)
		return;
	p = &d->pairs[pair];
	p->attaching = false;
	/* What a queue start does after attach: frames may wait on both
	 * sides. */
	vnet_rx_run(p);
	vnet_tx_run(p);
}

void vnet_pair_detach(struct vnet_pair *p)
{
	struct vnet_device *d = p->d;

	if (!d->be->ops->detach)
		return;
	p->attaching = false; /* the port gives up what it was doing */
	vnet_rx_unwatch(p);
	d->be->ops->detach(d->be, p->index);
	while (p->tx_held && vnet_tx_reap(p))
		;
	while (p->rx_held && vnet_rx_reap(p))
		;
	if (p->rx_held_vq)
		vmio_vq_flush_and_notify(p->rx_held_vq);
	if (p->tx_held || p->rx_held)
		log_err("net: pair %u: the %s backend did not give back %u tx "
			"and %u rx chains",
			p->index, d->be->ops->name, p->tx_held, p->rx_held);
	p->tx_held = p->rx_held = 0;
}

/* Without it the running queue would be left on a detached pair, with
 * its kicks off if it was waiting for an attach the detach gave up: a
 * guest that still sends with its rx queue disabled would wait for
 * ever. */
void vnet_pair_reattach(struct vnet_pair *p)
{
	if (!p->d->be->ops->attach || !p->mem || (!p->rx && !p->tx))
		return;
	vnet_pair_attach(p, p->mem);
	vnet_rx_run(p);
	vnet_tx_run(p);
}
