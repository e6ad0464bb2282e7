/* Guest to port: the tx queue of a pair. */
#ifndef VMIO_DEVICES_NET_TX_H
#define VMIO_DEVICES_NET_TX_H

#include "devices/net/state.h"

/* Sets up and takes down p's tx waiting (its retry timer and its next
 * turn). init returns 0 or -ENOMEM. */
int vnet_tx_init(struct vnet_pair *p);
void vnet_tx_fini(struct vnet_pair *p);
/* Serves the guest's transmitted frames on pair p. */
void vnet_tx_run(struct vnet_pair *p);
/* Gives the guest back the tx chains the port is done with; returns
 * how many. */
unsigned vnet_tx_reap(struct vnet_pair *p);

#endif
