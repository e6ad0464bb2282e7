/* Port to guest: the rx queue of a pair, and the watch on the
 * port's descriptor. */
#ifndef VMIO_DEVICES_NET_RX_H
#define VMIO_DEVICES_NET_RX_H

#include "devices/net/state.h"

/* Sets up and takes down p's next turn. */
void vnet_rx_init(struct vnet_pair *p);
void vnet_rx_fini(struct vnet_pair *p);
/* Moves frames from the port into the guest's rx buffers on pair p. */
void vnet_rx_run(struct vnet_pair *p);
/* Stops watching the port's rx descriptor of pair p. */
void vnet_rx_unwatch(struct vnet_pair *p);

#endif
