/* A virtqueue seen from the device, split or packed (vq->packed, from the
 * negotiated features): pop a descriptor chain as scatter lists, push it
 * used, notify the driver under EVENT_IDX. Devices do not know which
 * layout is under them: only split_ring.c and packed_ring.c do. The vhost-user core (vhost-user/queues.c) fills in the
 * configuration and is the queue's transport (its fds and whether it is
 * started are the core's); devices only pop, push and notify.
 *
 * Everything the ring holds was written by the guest and may change under
 * us at any time: each descriptor is read once into a local copy and
 * validated there. A chain that is malformed (loops, is longer than the
 * queue, points outside guest memory, has a readable descriptor after a
 * writable one, nests indirect tables, or an avail index that moved by more
 * than the queue size) marks the queue broken: it is logged once, naming
 * the queue and the descriptor index, and the queue stops serving until the
 * VMM resets it. */
#ifndef VMIO_VIRTIO_VIRTQUEUE_H
#define VMIO_VIRTIO_VIRTQUEUE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "virtio/memory.h"
#include "virtio/ring.h"
#include "virtio/vq_signal.h"
#include "virtio/vq_state.h"

/* Resets everything to the state of a queue the VMM has not touched. */
void vmio_vq_init(struct vmio_vq *vq, unsigned index);
/* Frees scratch memory; does not close fds (the core owns them). */
void vmio_vq_release(struct vmio_vq *vq);

/* Translates the ring addresses through mem. Returns 0, or -EFAULT if a
 * ring does not lie inside one region (or is misaligned, or size is not a
 * power of two up to VIRTQ_MAX_SIZE), leaving the rings unmapped. Called
 * on SET_VRING_ADDR and after every memory table change. */
int vmio_vq_map(struct vmio_vq *vq, const struct vmio_mem *mem);
void vmio_vq_unmap(struct vmio_vq *vq);

/* Mapped and not broken: the rings can be served (whether the transport
 * serves them is the transport's). */
bool vmio_vq_ready(const struct vmio_vq *vq);

/* Pops the next available chain into *chain. Returns 1 if one was popped,
 * 0 if the ring is empty (or the queue not ready), -1 if the queue is (now)
 * broken. */
int vmio_vq_pop(struct vmio_vq *vq, const struct vmio_mem *mem,
		struct vmio_chain *chain);

/* Gives back the last n popped chains, unused, in reverse order of pop
 * (at most the queue size, and none pushed since). */
void vmio_vq_unpop(struct vmio_vq *vq, unsigned n);

/* Writes a used element (head: the chain's head, or its buffer id on a
 * packed ring; written bytes). A split ring publishes it at the flush; a
 * packed ring's driver may see it at once. */
void vmio_vq_push(struct vmio_vq *vq, uint16_t head, uint32_t written);

/* The transport's notifications go somewhere new (vhost-user: a new call
 * fd): the next flush notifies whatever the driver's event index says.
 * The transport notifies the new place once itself, for whatever went to
 * the old one. */
void vmio_vq_notify_moved(struct vmio_vq *vq);

/* Publishes the pushed elements (used->idx) and, if the driver wants a
 * notification under its event index or flags, notifies it once (the
 * transport's notify: vhost-user writes the call fd). Call it
 * once per batch of work, not per chain. */
void vmio_vq_flush_and_notify(struct vmio_vq *vq);

/* Number of chains the driver has made available and we have not popped
 * (0 when not ready; the count is capped at the queue size). */
uint16_t vmio_vq_avail_pending(const struct vmio_vq *vq);

/* Where the driver and the device stand on the ring, as one value: a
 * kick that finds it as it was after the last kick brought the device
 * nothing it can use. Split: the driver's avail->idx and our next pop.
 * Packed, which has no driver index: our next pop and the run of
 * descriptors available past it (a walk of their flags). 0 when not
 * mapped. */
uint32_t vmio_vq_progress(const struct vmio_vq *vq);

/* Turns driver->device notifications (kicks) on or off. Turning them on
 * returns true if buffers arrived meanwhile, so the caller must poll again
 * before sleeping (the race the spec describes in 2.7.10). */
bool vmio_vq_enable_kicks(struct vmio_vq *vq, bool enable);


/* The first len bytes of iov (a chain's writable part, or frames a
 * port wrote into guest buffers), written by the device, marked while
 * logging: before the push that hands them to the driver. Off, one
 * predictable branch; the mark is out of line (vmio_vq_mark_iov). */
static inline void vmio_vq_log_iov(struct vmio_vq *vq, const struct iovec *iov,
				   unsigned niov, uint64_t len)
{
	if (__builtin_expect(vq->log != NULL, 0))
		vmio_vq_mark_iov(vq, iov, niov, len);
}

/* Copies from a chain's readable part, starting `offset` bytes in. Returns
 * bytes copied (short if the chain is shorter). */
size_t vmio_chain_read(const struct vmio_chain *c, uint64_t offset, void *dst,
		       size_t len);
/* Copies into a chain's writable part, starting `offset` bytes in. Returns
 * bytes copied. */
size_t vmio_chain_write(const struct vmio_chain *c, uint64_t offset,
			const void *src, size_t len);

#endif
