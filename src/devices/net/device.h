/* The vhost-user virtio-net device: queue pairs (rx 2i, tx 2i+1) and a
 * control queue, wired to a backend (backend.h). Every frame the guest
 * sends is validated (header.h) before the backend sees it; a bad one is
 * dropped, counted and its buffer given back, and the queue goes on. */
#ifndef VMIO_DEVICES_NET_DEVICE_H
#define VMIO_DEVICES_NET_DEVICE_H

#include <stdint.h>

#include "devices/net/backend.h"
#include "devices/net/header.h"
#include "event/loop.h"
#include "vhost-user/device.h"

/* The most queue pairs a device may have: the virtio-net limit is
 * 0x8000; this keeps a typo from opening thousands of TAP queues, and
 * the kernel's TAP allows 256. */
#define VNET_MAX_PAIRS 256

struct vnet_device_config {
	uint8_t mac[6];
	uint16_t mtu;
	unsigned pairs;            /* 1 to VNET_MAX_PAIRS */
	uint16_t max_queue_size;
	/* How long a queue that ran dry is looked at again before the
	 * device waits for a notification (0: not at all). */
	uint32_t poll_ns;
	struct vnet_backend *backend; /* the caller's; outlives the device */
};

/* What --stats prints: every frame is counted once, in one place. */
struct vnet_stats {
	uint64_t tx_frames, tx_bytes;     /* handed to the backend */
	uint64_t tx_invalid[VNET_HDR_NVERDICTS]; /* dropped: header/size */
	uint64_t tx_bad_chain;  /* dropped: shorter than the header, or
				 * more segments than writev takes */
	uint64_t tx_backend_errors;        /* dropped by the backend */
	uint64_t rx_frames, rx_bytes;      /* given to the guest */
	uint64_t rx_errors;                /* lost between backend and guest */
	uint64_t ctrl_ok, ctrl_err;
};

struct vnet_device;

struct vnet_device *vnet_device_new(struct vmio_loop *loop,
				    const struct vnet_device_config *cfg);
void vnet_device_free(struct vnet_device *d);
const struct vmio_device_ops *vnet_device_ops(const struct vnet_device *d);
const struct vnet_stats *vnet_device_stats(const struct vnet_device *d);

/* The counters on one line, "name=N" each (the tests read it). */
void vnet_stats_format(const struct vnet_stats *s, char *buf, size_t size);

#endif
