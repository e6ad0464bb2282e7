/* The driver side of a virtqueue, split or packed, as a guest's virtio
 * driver runs it: post buffers (guest physical addresses) as descriptor
 * chains, publish them, kick, and reap used entries (driver_packed.c has
 * the packed layout's side). Test and benchmark equipment: the
 * fields are public so a test can also write a malformed ring by hand. */
#ifndef VMIO_FRONTEND_DRIVER_VQ_H
#define VMIO_FRONTEND_DRIVER_VQ_H

#include <stdbool.h>
#include <stdint.h>

#include "frontend/dvq_state.h"
#include "virtio/ring.h"

/* Lays out the rings in memory the caller provides: desc at desc_mem,
 * avail at avail_mem, used at used_mem (each with its local pointer and gpa).
 * Allocates the bookkeeping arrays. Returns 0 or -ENOMEM. */
int vmio_dvq_init(struct vmio_dvq *q, unsigned index, uint16_t size,
		  void *desc_mem, uint64_t desc_gpa, void *avail_mem,
		  uint64_t avail_gpa, void *used_mem, uint64_t used_gpa);
/* The same for a packed ring: the descriptor ring at desc_mem, the
 * driver's event suppression area at driver_mem, the device's at
 * device_mem. */
int vmio_dvq_init_packed(struct vmio_dvq *q, unsigned index, uint16_t size,
			 void *desc_mem, uint64_t desc_gpa, void *driver_mem,
			 uint64_t driver_gpa, void *device_mem,
			 uint64_t device_gpa);
void vmio_dvq_release(struct vmio_dvq *q);

/* Adds one chain of n buffers (readable ones first), remembering token.
 * Returns the head index, or -ENOSPC if fewer than n descriptors are
 * free. The chain is not visible to the device until vmio_dvq_kick. */
int vmio_dvq_add(struct vmio_dvq *q, const struct vmio_dbuf *bufs, unsigned n,
		 void *token);

/* Adds one chain of n buffers through an indirect table: the table (16 *
 * n bytes at table, guest address table_gpa) is written in the ring's
 * layout and one descriptor points to it. Returns as vmio_dvq_add. */
int vmio_dvq_add_indirect(struct vmio_dvq *q, void *table, uint64_t table_gpa,
			  const struct vmio_dbuf *bufs, unsigned n,
			  void *token);

/* Whether a used entry waits to be reaped. */
bool vmio_dvq_used_pending(struct vmio_dvq *q);

/* Publishes added chains and writes kick_fd if the device asked for a
 * notification (used->flags or avail_event). Returns true if it kicked. */
bool vmio_dvq_kick(struct vmio_dvq *q);

/* Reaps one used entry: returns its token and sets *len to the bytes the
 * device wrote, or returns NULL if none is pending. */
void *vmio_dvq_get_used(struct vmio_dvq *q, uint32_t *len);

/* Asks the device to notify us after the next used entry (used_event, or
 * clears NO_INTERRUPT). */
void vmio_dvq_want_interrupt(struct vmio_dvq *q);

/* Waits up to timeout_ms for call_fd and drains it. 1 if signalled, 0 on
 * timeout, -errno on error. */
int vmio_dvq_wait(struct vmio_dvq *q, int timeout_ms);

#endif
