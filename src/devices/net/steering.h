/* Which queue pairs get frames from the port. */
#ifndef VMIO_DEVICES_NET_STEERING_H
#define VMIO_DEVICES_NET_STEERING_H

#include "devices/net/state.h"

void vnet_steering_init(struct vnet_pair *p);
void vnet_steering_fini(struct vnet_pair *p);
/* On the device's loop, after the active pairs changed: tells the port,
 * on each pair's loop, which pairs' channels should get frames (the
 * active ones whose rx queue the guest serves). A pair on the device's
 * loop is told at once, the others on their loops' next turn; each of
 * those then posts ctrl_again. */
void vnet_update_steering(struct vnet_device *d);
/* The same for one pair, on its loop (its rx queue started or stopped). */
void vnet_steer_pair(struct vnet_pair *p);
/* On the device's loop: whether every pair has applied the last
 * vnet_update_steering. */
bool vnet_steering_applied(const struct vnet_device *d);

#endif
