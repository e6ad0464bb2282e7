/* Which queue pairs get frames: a flow the backend hashes onto a pair the
 * guest does not serve would be lost, so only the active pairs whose rx
 * queue runs are steered to. */
#include "devices/net/steering.h"

#include "devices/net/rx.h"

/* On the pair's loop: whether it gets frames follows what the device's
 * loop published and whether its rx queue runs, both known here. */
void vnet_steer_pair(struct vnet_pair *p)
{
	struct vnet_device *d = p->d;
	bool on = p->index < atomic_load_explicit(&d->steer_pairs,
						  memory_order_relaxed) &&
		  p->served;

	if (!d->be->ops->set_pair_enabled)
		return;
	d->be->ops->set_pair_enabled(d->be, p->index, on);
	if (on)
		vnet_rx_run(p);
	else
		vnet_rx_unwatch(p);
}

static void on_steer(void *opaque)
{
	vnet_steer_pair(opaque);
}

void vnet_steering_init(struct vnet_pair *p)
{
	vmio_defer_init(&p->steer, p->loop, on_steer, p);
}

void vnet_steering_fini(struct vnet_pair *p)
{
	vmio_defer_cancel(&p->steer);
}

void vnet_update_steering(struct vnet_device *d)
{
	atomic_store_explicit(&d->steer_pairs, vnet_active_pairs(d),
			      memory_order_relaxed);
	for (unsigned i = 0; i < d->npairs; i++) {
		struct vnet_pair *p = &d->pairs[i];

		if (p->loop == d->loop)
			vnet_steer_pair(p);
		else
			vmio_defer_post(&p->steer);
	}
}
