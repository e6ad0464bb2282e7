/* The packed virtqueue (virtio 1.x, 2.8) under virtqueue.h: one ring of
 * descriptors that the driver makes available and the device marks used
 * in place, each side with a wrap counter, and an event suppression area
 * each way. */
#ifndef VMIO_VIRTIO_PACKED_RING_H
#define VMIO_VIRTIO_PACKED_RING_H

#include <stdbool.h>
#include <stdint.h>

#include "virtio/memory.h"
#include "virtio/vq_state.h"

int vmio_packed_map(struct vmio_vq *vq, const struct vmio_mem *mem);
int vmio_packed_pop(struct vmio_vq *vq, const struct vmio_mem *mem,
		    struct vmio_chain *chain);
void vmio_packed_unpop(struct vmio_vq *vq, unsigned n);
void vmio_packed_push(struct vmio_vq *vq, uint16_t id, uint32_t written);
/* In order: id joins the open batch (the used position skips its
 * descriptors, none is written); end_batch writes the batch's one used
 * descriptor at its first position (2.8.20). */
void vmio_packed_push_batched(struct vmio_vq *vq, uint16_t id);
void vmio_packed_end_batch(struct vmio_vq *vq);
void vmio_packed_flush_and_notify(struct vmio_vq *vq);
uint16_t vmio_packed_avail_pending(const struct vmio_vq *vq);
/* vmio_vq_progress: our next pop and how many descriptors the driver
 * made available past it. */
uint32_t vmio_packed_progress(const struct vmio_vq *vq);
bool vmio_packed_enable_kicks(struct vmio_vq *vq, bool enable);

/* A packed ring's position for SET_VRING_BASE and GET_VRING_BASE: the
 * offset in bits 0-14 and the wrap counter in bit 15. */
static inline uint16_t vmio_packed_position(uint16_t offset, bool wrap)
{
	return (uint16_t)(offset | (unsigned)wrap << VIRTQ_EVENT_WRAP_SHIFT);
}

#endif
