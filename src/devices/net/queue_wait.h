/* How a queue of the net device waits for the guest. */
#ifndef VMIO_DEVICES_NET_QUEUE_WAIT_H
#define VMIO_DEVICES_NET_QUEUE_WAIT_H

#include <stdbool.h>

#include "devices/net/state.h"

/* Looks at vq for new buffers for up to the device's poll_ns, while its
 * kicks are still off (the driver then need not make a system call to
 * notify us). Returns true as soon as some are there. */
bool vnet_poll_avail(const struct vnet_device *d, const struct vmio_vq *vq);

#endif
