/* Which queue pairs get frames: a flow the port hashes onto a pair the
 * guest does not serve would be lost, so only the active pairs whose rx
 * queue runs are steered to.
 *
 * The rule: once the control queue has answered a command, every pair
 * steers as that command left it (virtio 1.2, 5.1.6.5.5: no frame on a
 * receive queue beyond virtqueue_pairs after the ack of VQ_PAIRS_SET is
 * in the used ring). The device's loop publishes each change as a round;
 * a pair on another loop applies it there, records the round and wakes
 * the control queue (ctrl_again), which holds its ack until every pair
 * has applied the last round (vnet_steering_applied). */
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
	/* Across a hand-over the pair's frames wait in the port for the
	 * process that serves its rx queue next: taking them elsewhere (a
	 * TAP queue detached) would drop those waiting. */
	if (!atomic_load_explicit(&p->kept, memory_order_relaxed))
		d->be->ops->set_pair_enabled(d->be, p->index, on);
	if (on)
		vnet_rx_run(p);
	else
		vnet_rx_unwatch(p);
}

/* The round is read before steer_pairs: a pair that sees a steer_pairs
 * newer than the round it records has been posted again for the newer
 * round, and records it on that run. */
static void on_steer(void *opaque)
{
	struct vnet_pair *p = opaque;
	unsigned round = atomic_load_explicit(&p->d->steer_round,
					      memory_order_acquire);

	vnet_steer_pair(p);
	atomic_store_explicit(&p->steered, round, memory_order_release);
	vmio_defer_post(&p->d->ctrl_again);
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
	unsigned round = atomic_load_explicit(&d->steer_round,
					      memory_order_relaxed) + 1;

	atomic_store_explicit(&d->steer_pairs, vnet_active_pairs(d),
			      memory_order_relaxed);
	atomic_store_explicit(&d->steer_round, round, memory_order_release);
	for (unsigned i = 0; i < d->npairs; i++) {
		struct vnet_pair *p = &d->pairs[i];

		if (p->loop == d->loop) {
			vnet_steer_pair(p);
			atomic_store_explicit(&p->steered, round,
					      memory_order_relaxed);
		} else {
			vmio_defer_post(&p->steer);
		}
	}
}

bool vnet_steering_applied(const struct vnet_device *d)
{
	unsigned round = atomic_load_explicit(&d->steer_round,
					      memory_order_relaxed);

	for (unsigned i = 0; i < d->npairs; i++)
		if (atomic_load_explicit(&d->pairs[i].steered,
					 memory_order_acquire) != round)
			return false;
	return true;
}
