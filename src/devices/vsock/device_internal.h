/* The vsock device's state and its set-up, for its hand-over
 * (device_handover.c) alone. */
#ifndef VMIO_DEVICES_VSOCK_DEVICE_INTERNAL_H
#define VMIO_DEVICES_VSOCK_DEVICE_INTERNAL_H

#include "devices/vsock/device.h"
#include "devices/vsock/hybrid.h"
#include "devices/vsock/muxer.h"

struct vsock_device {
	struct vmio_device_ops ops;
	uint64_t guest_cid;
	struct vsock_muxer *mux;
	struct vsock_hybrid *hybrid;
	struct vmio_vq *rx, *tx;
	struct vmio_mem *mem;
};

/* A device with its multiplexer and no hybrid listener yet (NULL: no
 * memory). */
struct vsock_device *vsock_device_alloc(struct vmio_loop *loop,
					const struct vsock_device_config *cfg);
/* What the hybrid listener is given of cfg. */
struct vsock_hybrid_config vsock_device_hybrid_config(
	const struct vsock_device_config *cfg);

#endif
