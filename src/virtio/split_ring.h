/* The split virtqueue (virtio 1.x, 2.7) under virtqueue.h: an avail ring
 * of heads into a descriptor table, a used ring of (id, len) published by
 * its index. */
#ifndef VMIO_VIRTIO_SPLIT_RING_H
#define VMIO_VIRTIO_SPLIT_RING_H

#include <stdbool.h>
#include <stdint.h>

#include "virtio/memory.h"
#include "virtio/vq_state.h"

int vmio_split_map(struct vmio_vq *vq, const struct vmio_mem *mem);
int vmio_split_pop(struct vmio_vq *vq, const struct vmio_mem *mem,
		   struct vmio_chain *chain);
void vmio_split_unpop(struct vmio_vq *vq, unsigned n);
void vmio_split_push(struct vmio_vq *vq, uint16_t head, uint32_t written);
/* In order: head joins the open batch (the used index moves, no entry is
 * written); end_batch writes the batch's one entry. */
void vmio_split_push_batched(struct vmio_vq *vq, uint16_t head);
void vmio_split_end_batch(struct vmio_vq *vq);
void vmio_split_flush_and_notify(struct vmio_vq *vq);
uint16_t vmio_split_avail_pending(const struct vmio_vq *vq);
/* vmio_vq_progress: the driver's avail->idx and our next pop. */
uint32_t vmio_split_progress(const struct vmio_vq *vq);
bool vmio_split_enable_kicks(struct vmio_vq *vq, bool enable);

#endif
