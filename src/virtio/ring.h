/* The virtqueues' memory layouts (virtio 1.x, sections 2.7 split and 2.8
 * packed), shared by the device side (src/virtio) and the in-tree driver
 * (frontend/). All fields are little-endian in guest memory. */
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

/* ---- Packed (2.8) ------------------------------------------------------ */

#define VIRTQ_DESC_F_AVAIL (1u << 7)
#define VIRTQ_DESC_F_USED (1u << 15)

/* Event suppression flags (both directions). */
#define VIRTQ_EVENT_F_ENABLE 0
#define VIRTQ_EVENT_F_DISABLE 1
#define VIRTQ_EVENT_F_DESC 2 /* at off_wrap; only with EVENT_IDX */
/* off_wrap: the ring offset in bits 0-14, the wrap counter in bit 15. */
#define VIRTQ_EVENT_WRAP_SHIFT 15

struct pvirtq_desc {
	uint64_t addr;
	uint32_t len;
	uint16_t id;
	uint16_t flags;
};

struct pvirtq_event_suppress {
	uint16_t off_wrap;
	uint16_t flags;
};

/* The largest packed queue (2.8: up to 2^15 entries). */
#define PVIRTQ_MAX_SIZE 32768

/* Moves a packed ring position by `by` slots, flipping its wrap counter
 * when it passes the end. */
static inline void pvirtq_advance(uint16_t *pos, _Bool *wrap, unsigned by,
				  unsigned size)
{
	unsigned p = *pos + by;

	if (p >= size) {
		p -= size;
		*wrap = !*wrap;
	}
	*pos = (uint16_t)p;
}

/* The event-index rule on a packed ring (2.8.10), for either side: the
 * other side asked (off_wrap: offset and wrap counter) to hear of the
 * descriptor there; since it was last told at position old we moved to
 * new, whose wrap counter is wrap. Offsets wrap at the ring's size, so
 * both are put on one scale first: what lies before a wrap counts from
 * -size. Good for less than a ring's worth of slots between decisions. */
static inline int pvirtq_need_event(uint16_t off_wrap, int new_pos, int old,
				    _Bool wrap, unsigned size)
{
	int off = off_wrap & (PVIRTQ_MAX_SIZE - 1);

	if (new_pos <= old)
		old -= (int)size;
	if ((_Bool)(off_wrap >> VIRTQ_EVENT_WRAP_SHIFT) != wrap)
		off -= (int)size;
	return virtq_need_event((uint16_t)off, (uint16_t)new_pos,
				(uint16_t)old);
}

#endif
