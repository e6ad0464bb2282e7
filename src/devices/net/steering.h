/* Which queue pairs get frames from the backend. */
#ifndef VMIO_DEVICES_NET_STEERING_H
#define VMIO_DEVICES_NET_STEERING_H

#include "devices/net/state.h"

/* Tells the backend which pairs' channels should get frames: the active
 * ones whose rx queue the guest serves. */
void vnet_update_steering(struct vnet_device *d);

#endif
