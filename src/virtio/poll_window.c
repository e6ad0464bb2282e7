#include "virtio/poll_window.h"

bool vmio_poll_window_dry(struct vmio_poll_window *p, uint64_t now)
{
	bool worked = p->worked;

	p->worked = false;
	if (!p->window_ns) {
		p->polling = false;
		return false;
	}
	if (worked) {
		/* Work since the ring last ran dry: a new window from now. */
		p->until_ns = now + p->window_ns;
		p->polling = true;
		return true;
	}
	if (p->polling && now < p->until_ns)
		return true;
	p->polling = false;
	return false;
}
