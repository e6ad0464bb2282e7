/* The driver side of a virtqueue, split or packed, as a guest's virtio
 * driver runs it: post buffers (guest physical addresses) as descriptor
 * chains, publish them, kick, and reap used entries (driver_packed.c has
 * the packed layout's side). Test and benchmark equipment: the
 * fields are public so a test can also write a malformed ring by hand. */
#ifndef VMIO_FRONTEND_DRIVER_VQ_H
#define VMIO_FRONTEND_DRIVER_VQ_H

#include <stdbool.h>
#include <stdint.h>

#include "virtio/ring.h"

struct vmio_dbuf {
	uint64_t gpa;
	uint32_t len;
	bool writable; /* device writes it (VIRTQ_DESC_F_WRITE) */
};

struct vmio_dvq {
	unsigned index;
	uint16_t size;
	bool event_idx; /* VIRTIO_RING_F_EVENT_IDX negotiated */

	/* Rings, in guest memory: local pointers and guest addresses. */
	struct virtq_desc *desc;
	struct virtq_avail *avail;
	struct virtq_used *used;
	uint64_t desc_gpa, avail_gpa, used_gpa;

	/* Free descriptor list, linked through next_free. */
	uint16_t free_head;
	uint16_t num_free;
	uint16_t *next_free;
	void **tokens;        /* per head: what add() was given */
	uint16_t *chain_len;  /* per head: descriptors in the chain */

	uint16_t avail_idx;     /* shadow of avail->idx incl. unpublished */
	uint16_t kicked_idx;    /* avail->idx at the last kick decision */
	uint16_t last_used_idx; /* next used entry to reap */

	int kick_fd; /* we write it to notify the device */
	int call_fd; /* the device writes it to notify us */

	/* Packed (desc_gpa the ring, avail_gpa the driver's event area,
	 * used_gpa the device's). Buffer ids come from the free list above;
	 * chain_len counts the ring descriptors of each. */
	bool packed;
	struct pvirtq_desc *pdesc;
	struct pvirtq_event_suppress *driver_event; /* we write it */
	struct pvirtq_event_suppress *device_event; /* we read it */
	uint16_t next_avail, next_used, kicked_pos;
	bool avail_wrap, used_wrap, kicked_wrap;
	/* Chains added, not yet made available: their first descriptor and
	 * the flags that will make it so, at the next kick. */
	uint16_t *unpublished;
	uint16_t *unpublished_flags;
	unsigned n_unpublished;
};

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
