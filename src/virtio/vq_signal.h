/* What a virtqueue tells the other side outside the rings: a broken
 * queue (logged, and the VMM's error fd), and notifications (eventfds). */
#ifndef VMIO_VIRTIO_VQ_SIGNAL_H
#define VMIO_VIRTIO_VQ_SIGNAL_H

#include "virtio/vq_state.h"

/* Writes 1 to an eventfd (-1: none); a saturated counter wakes the reader
 * anyway. */
void vmio_vq_signal(int fd);

/* Marks the queue broken and logs why (once). Devices call it too, for
 * chains whose layout they cannot accept. */
void vmio_vq_set_broken(struct vmio_vq *vq, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#endif
