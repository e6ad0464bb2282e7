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
	bool avail_wrap, used_wrap;
	/* Chains added, not yet made available: their first descriptor and
	 * the flags that will make it so, at the next kick. */
	uint16_t *unpublished;
	uint16_t *unpublished_flags;
	unsigned n_unpublished;
};

#endif
