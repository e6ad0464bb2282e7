/* Port to guest without a copy, into buffers posted before any frame. */
#ifndef VMIO_DEVICES_NET_RX_POSTED_H
#define VMIO_DEVICES_NET_RX_POSTED_H

#include "devices/net/state.h"

/* What the rx queue waits for after vnet_rx_posted_run. */
enum vnet_posted_wait {
	VNET_POSTED_WATCH,  /* the port's descriptor */
	VNET_POSTED_AGAIN,  /* the budget ran out, or polling: the next
			     * turn, and it */
	VNET_POSTED_BROKEN, /* nothing: the queue broke */
};

/* Post what the guest offers, give back what came. */
enum vnet_posted_wait vnet_rx_posted_run(struct vnet_pair *p);
/* Gives the guest back the rx buffers the port is done with (frames,
 * or unused after detach), without notifying it; returns how many. */
unsigned vnet_rx_reap(struct vnet_pair *p);

#endif
