/* What a virtqueue tells the other side outside the rings, through its
 * transport (vq_state.h): notifications, and that it broke (logged here,
 * told to the VMM by the transport). */
#ifndef VMIO_VIRTIO_VQ_SIGNAL_H
#define VMIO_VIRTIO_VQ_SIGNAL_H

#include "virtio/vq_state.h"

/* Writes 1 to an eventfd (-1: none); a saturated counter wakes the reader
 * anyway. */
void vmio_vq_signal(int fd);

/* Makes t (NULL: none) the queue's transport, called with opaque.
 * vmio_vq_init forgets it. */
void vmio_vq_set_transport(struct vmio_vq *vq,
			   const struct vmio_vq_transport *t, void *opaque);

/* A transport for a queue served without vhost-user (tests, fuzzers): its
 * notification writes the eventfd *(int *)opaque. */
extern const struct vmio_vq_transport vmio_vq_eventfd_transport;

/* Sends the driver a used buffer notification through the transport. */
void vmio_vq_notify(struct vmio_vq *vq);

/* Marks the queue broken and logs why (once). Devices call it too, for
 * chains whose layout they cannot accept. */
void vmio_vq_set_broken(struct vmio_vq *vq, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#endif
