/* A demonstration and test device: what the driver posts on the tx queue
 * (queue 1) comes back, as a byte stream, in the buffers it posts on the rx
 * queue (queue 0). It exercises every part of the core a real device uses
 * and carries nothing of its own, so tests and benchmarks measure the core.
 * Virtio device ID 0xffff is not a real device type: no guest driver binds
 * to it; only the in-tree front end does. */
#ifndef VMIO_DEVICES_LOOPBACK_H
#define VMIO_DEVICES_LOOPBACK_H

#include <stdint.h>

#include "event/loop.h"
#include "vhost-user/device.h"

#define VMIO_LOOPBACK_RX_QUEUE 0
#define VMIO_LOOPBACK_TX_QUEUE 1

struct vmio_loopback;

/* The device runs on loop (its work left at a budget resumes on the
 * loop's next turn). */
struct vmio_loopback *vmio_loopback_new(struct vmio_loop *loop,
					uint16_t max_queue_size);
void vmio_loopback_free(struct vmio_loopback *lb);
const struct vmio_device_ops *vmio_loopback_ops(const struct vmio_loopback *lb);

#endif
