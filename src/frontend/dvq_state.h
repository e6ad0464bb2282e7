/* The driver's side of a virtqueue: the types driver_vq.c (the interface
 * and the split layout) and driver_packed.c (the packed layout) share. */
#ifndef VMIO_FRONTEND_DVQ_STATE_H
#define VMIO_FRONTEND_DVQ_STATE_H

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

	/* Free descriptor list, linked through next_free. Split: a chain
	 * given back goes to the tail, so that under IN_ORDER descriptors
	 * are taken in ring order (2.7.9). */
	uint16_t free_head, free_tail;
	uint16_t num_free;
	uint16_t *next_free;
	void **tokens;        /* per head: what add() was given */
	uint16_t *chain_len;  /* per head: descriptors in the chain */

	uint16_t avail_idx;     /* shadow of avail->idx incl. unpublished */
	uint16_t kicked_idx;    /* avail->idx at the last kick decision */
	uint16_t last_used_idx; /* next used entry to reap */

	/* VIRTIO_F_IN_ORDER (driver_in_order.h): the ids made available,
	 * oldest first (order, a ring of size entries), and the one used entry the
	 * device wrote for its current batch (2.7.9, 2.8.20): every chain
	 * before batch_id in order is used too, with no length. */
	bool in_order;
	uint16_t *order;
	uint16_t order_head, order_count;
	bool batch_seen;
	uint16_t batch_id;
	uint32_t batch_len;

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
	bool avail_wrap, used_wrap;
	/* Chains added, not yet made available: their first descriptor and
	 * the flags that will make it so, at the next kick. */
	uint16_t *unpublished;
	uint16_t *unpublished_flags;
	unsigned n_unpublished;
};

#endif
