/* The split virtqueue's memory layout (virtio 1.x, section 2.7), shared by
 * the device side (virtqueue.c) and the in-tree driver (frontend/). All
 * fields are little-endian in guest memory. */
#ifndef VMIO_VIRTIO_RING_H
#define VMIO_VIRTIO_RING_H

#include <stdint.h>

#define VIRTQ_DESC_F_NEXT 1
#define VIRTQ_DESC_F_WRITE 2
#define VIRTQ_DESC_F_INDIRECT 4

#define VIRTQ_AVAIL_F_NO_INTERRUPT 1
#define VIRTQ_USED_F_NO_NOTIFY 1

/* The largest queue a split ring can have. */
#define VIRTQ_MAX_SIZE 32768

struct virtq_desc {
	uint64_t addr;
	uint32_t len;
	uint16_t flags;
	uint16_t next;
};

struct virtq_avail {
	uint16_t flags;
	uint16_t idx;
	uint16_t ring[];
	/* uint16_t used_event follows ring[size] (VIRTIO_RING_F_EVENT_IDX) */
};

struct virtq_used_elem {
	uint32_t id;
	uint32_t len;
};

struct virtq_used {
	uint16_t flags;
	uint16_t idx;
	struct virtq_used_elem ring[];
	/* uint16_t avail_event follows ring[size] (VIRTIO_RING_F_EVENT_IDX) */
};

/* Sizes in bytes of the three parts for a queue of `num` entries. */
static inline uint64_t virtq_desc_bytes(unsigned num)
{
	return 16ull * num;
}
static inline uint64_t virtq_avail_bytes(unsigned num)
{
	return 6ull + 2ull * num; /* flags, idx, ring, used_event */
}
static inline uint64_t virtq_used_bytes(unsigned num)
{
	return 6ull + 8ull * num; /* flags, idx, ring, avail_event */
}

/* The event-index rule (virtio 1.x, 2.7.7.2): notify if new_idx has moved
 * past event_idx since old_idx, in wrapping 16-bit arithmetic. */
static inline int virtq_need_event(uint16_t event_idx, uint16_t new_idx,
				   uint16_t old_idx)
{
	return (uint16_t)(new_idx - event_idx - 1) <
	       (uint16_t)(new_idx - old_idx);
}

#endif
