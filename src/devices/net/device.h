/* The vhost-user virtio-net device: queue pairs (rx 2i, tx 2i+1) and a
 * control queue, wired to a port (port.h). Every frame the guest
 * sends is validated (header.h) before the port sees it; a bad one is
 * dropped, counted and its buffer given back, and the queue goes on. */
#ifndef VMIO_DEVICES_NET_DEVICE_H
#define VMIO_DEVICES_NET_DEVICE_H

#include <stdint.h>

#include "devices/net/config.h"
#include "devices/net/stats.h"
#include "event/loop.h"
#include "vhost-user/device.h"

struct vnet_device;

struct vnet_device *vnet_device_new(struct vmio_loop *loop,
				    const struct vnet_device_config *cfg);
void vnet_device_free(struct vnet_device *d);
const struct vmio_device_ops *vnet_device_ops(const struct vnet_device *d);
/* The counters of the whole device, and of one pair (NULL beyond the
 * last). A pair's are written on its loop: read them there, or once no
 * loop runs. */
void vnet_device_stats(const struct vnet_device *d, struct vnet_stats *out);
/* The control queue's (ctrl_ok, ctrl_err), on the device's loop. */
const struct vnet_stats *vnet_ctrl_stats(const struct vnet_device *d);
const struct vnet_stats *vnet_pair_stats(const struct vnet_device *d,
					 unsigned pair);
/* The CPU time pair cost vmio so far (its queues' account), in ns; from
 * any thread. */
uint64_t vnet_pair_cpu_ns(const struct vnet_device *d, unsigned pair);
/* cb(opaque) on the device's loop whenever a command of the guest's
 * control queue changed its state, before the guest sees the ack (what
 * is kept for a restart, cli/net_kept.h, follows it). */
void vnet_device_watch_state(struct vnet_device *d, void (*cb)(void *opaque),
			     void *opaque);

#endif
