/* Which queue pairs get frames: a flow the backend hashes onto a pair the
 * guest does not serve would be lost, so only the active pairs whose rx
 * queue runs are steered to. */
#include "devices/net/steering.h"

#include "devices/net/rx.h"

void vnet_update_steering(struct vnet_device *d)
{
	unsigned active = vnet_active_pairs(d);

	if (!d->be->ops->set_pair_enabled)
		return;
	for (unsigned i = 0; i < d->npairs; i++) {
		struct vnet_pair *p = &d->pairs[i];
		bool on = i < active && p->served;

		d->be->ops->set_pair_enabled(d->be, i, on);
		if (on)
			vnet_rx_run(p);
		else
			vnet_rx_unwatch(p);
	}
}
