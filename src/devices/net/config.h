/* How a net device is set up: the --mac, --mtu, --pairs... of `vmio net`
 * and the port it runs on. Types only. */
#ifndef VMIO_DEVICES_NET_CONFIG_H
#define VMIO_DEVICES_NET_CONFIG_H

#include <stdint.h>

#include "devices/net/port.h"
#include "event/loop.h"

/* The most queue pairs a device may have: the virtio-net limit is
 * 0x8000; this keeps a typo from opening thousands of TAP queues, and
 * the kernel's TAP allows 256. */
#define VNET_MAX_PAIRS 256

/* What `vmio net` uses when --poll-us is not given. */
#define VNET_POLL_DEFAULT_NS (50 * 1000)

struct vnet_device_config {
	uint8_t mac[6];
	uint16_t mtu;
	unsigned pairs;            /* 1 to VNET_MAX_PAIRS */
	uint16_t max_queue_size;
	/* How long a queue that ran dry after work is looked at again,
	 * once a turn of its loop, before the device waits for a
	 * notification (0: not at all; virtio/poll_window.h). */
	uint32_t poll_ns;
	struct vnet_port *port; /* the caller's; outlives the device */
	/* The loop each pair runs on (NULL: all on the device's loop). A
	 * port that keeps guest buffers (attach) needs them all on the
	 * device's loop. */
	struct vmio_loop **pair_loops;
};

#endif
