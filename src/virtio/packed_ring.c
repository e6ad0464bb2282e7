/* A packed ring as the device sees it. The driver makes a chain
 * available by writing its descriptors in ring order and the first one's
 * flags last; we read those flags with acquire, then snapshot each
 * descriptor once. A used descriptor goes where the next one is due,
 * carries the buffer id, and skips as many ring slots as the chain took
 * (remembered per id at pop). Everything the guest wrote is checked: a
 * chain longer than the ring, a descriptor in a chain that is not
 * available, an indirect descriptor in a chain of several, or a buffer id
 * beyond the queue breaks the queue. */
#include "virtio/packed_ring.h"

#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "virtio/chain_walk.h"
#include "virtio/ring_access.h"
#include "virtio/vq_signal.h"

static int grow(uint16_t **array, unsigned n)
{
	uint16_t *p = realloc(*array, n * sizeof(**array));

	if (!p)
		return -ENOMEM;
	*array = p;
	return 0;
}

/* Kept across a remap like the arrays above, though it is empty then:
 * every callback that pushes flushes before it returns. The count is
 * bounded by the new size all the same, so that the array is never
 * overrun. */
static int grow_shadow(struct vmio_vq *vq, unsigned n)
{
	struct vmio_packed_used *p = realloc(vq->shadow, n * sizeof(*p));

	if (!p)
		return -ENOMEM;
	vq->shadow = p;
	if (vq->nshadow > n)
		vq->nshadow = n;
	return 0;
}

int vmio_packed_map(struct vmio_vq *vq, const struct vmio_mem *mem)
{
	unsigned n = vq->size;
	void *desc, *driver, *device;

	if (!n || n > PVIRTQ_MAX_SIZE)
		return -EFAULT;
	desc = vmio_ring_area(mem, vq->desc_uva,
			      (uint64_t)n * sizeof(struct pvirtq_desc), 16);
	driver = vmio_ring_area(mem, vq->avail_uva,
				sizeof(struct pvirtq_event_suppress), 4);
	device = vmio_ring_area(mem, vq->used_uva,
				sizeof(struct pvirtq_event_suppress), 4);
	if (!desc || !driver || !device)
		return -EFAULT;
	/* Kept across a remap: chains still out keep their counts. */
	if (grow(&vq->buf_ndesc, n) || grow(&vq->pop_from, n) ||
	    grow_shadow(vq, n))
		return -ENOMEM;
	vq->pdesc = desc;
	vq->driver_event = driver;
	vq->device_event = device;
	return 0;
}

static bool is_avail(uint16_t flags, bool wrap)
{
	return !!(flags & VIRTQ_DESC_F_AVAIL) == wrap &&
	       !!(flags & VIRTQ_DESC_F_USED) != wrap;
}

static void read_desc(struct pvirtq_desc *d, const struct pvirtq_desc *src)
{
	struct pvirtq_desc raw;

	memcpy(&raw, src, sizeof(raw));
	/* Once, here: see split_ring.c's read_desc. */
	__asm__ __volatile__("" ::: "memory");
	d->addr = le64toh(raw.addr);
	d->len = le32toh(raw.len);
	d->id = le16toh(raw.id);
	d->flags = le16toh(raw.flags);
}

/* An indirect table: its entries in order, only WRITE meaning anything. */
static int walk_table(struct vmio_walk *w, const struct pvirtq_desc *d,
		      unsigned at)
{
	if (vmio_walk_enter_table(w, d->addr, d->len, at))
		return -1;
	for (unsigned k = 0; k < w->table_size; k++) {
		struct pvirtq_desc e;

		read_desc(&e, (const struct pvirtq_desc *)w->table + k);
		if (vmio_walk_add(w, e.addr, e.len, e.flags & VIRTQ_DESC_F_WRITE,
				  k))
			return -1;
	}
	return 0;
}

/* Walks the chain at the queue's next position into w's chain. Returns
 * the ring descriptors it took, 0 if none is available, -1 if broken; the
 * buffer id in *id. */
static int walk_chain(struct vmio_walk *w, uint16_t *id)
{
	struct vmio_vq *vq = w->vq;
	uint16_t pos = vq->last_avail_idx;
	bool wrap = vq->avail_wrap;
	unsigned n = 0;
	struct pvirtq_desc d;

	/* Acquire: the chain's other descriptors were written before the
	 * driver made the first one available. */
	if (!is_avail(vmio_ld16_acquire(&vq->pdesc[pos].flags), wrap))
		return 0;
	for (;;) {
		read_desc(&d, &vq->pdesc[pos]);
		if (!is_avail(d.flags, wrap)) {
			vmio_vq_set_broken(vq, "descriptor %u: part of a chain but not available (flags 0x%x)",
					   pos, d.flags);
			return -1;
		}
		if (++n > vq->size) {
			vmio_vq_set_broken(vq, "chain at %u is longer than the queue of %u",
					   vq->last_avail_idx, vq->size);
			return -1;
		}
		if (d.flags & VIRTQ_DESC_F_INDIRECT) {
			if (n > 1 || (d.flags & VIRTQ_DESC_F_NEXT)) {
				vmio_vq_set_broken(vq, "descriptor %u: an indirect descriptor in a chain of several",
						   pos);
				return -1;
			}
			if (walk_table(w, &d, pos))
				return -1;
		} else if (vmio_walk_add(w, d.addr, d.len,
					 d.flags & VIRTQ_DESC_F_WRITE, pos)) {
			return -1;
		}
		if (!(d.flags & VIRTQ_DESC_F_NEXT))
			break;
		pvirtq_advance(&pos, &wrap, 1, vq->size);
	}
	if (d.id >= vq->size) {
		vmio_vq_set_broken(vq, "descriptor %u: buffer id %u beyond the queue size %u",
				   pos, d.id, vq->size);
		return -1;
	}
	*id = d.id;
	return (int)n;
}

/* The chain at the queue's next position if it is one plain descriptor
 * (vmio_walk_one), into chain with its id in *id: 0. -1 for anything
 * else, nothing available included: walk_chain looks again. */
static int pop_one(struct vmio_vq *vq, const struct vmio_mem *mem,
		   struct vmio_chain *chain, uint16_t *id)
{
	const struct pvirtq_desc *at = &vq->pdesc[vq->last_avail_idx];
	struct pvirtq_desc d;

	/* Acquire, as walk_chain's. */
	if (!is_avail(vmio_ld16_acquire(&at->flags), vq->avail_wrap))
		return -1;
	read_desc(&d, at);
	if (!is_avail(d.flags, vq->avail_wrap) ||
	    (d.flags & (VIRTQ_DESC_F_NEXT | VIRTQ_DESC_F_INDIRECT)) ||
	    d.id >= vq->size ||
	    vmio_walk_one(vq, mem, chain, d.id, d.addr, d.len,
			  d.flags & VIRTQ_DESC_F_WRITE))
		return -1;
	*id = d.id;
	return 0;
}

/* How far ahead a pop asks for lines, as split_ring.c's: the buffer of
 * the descriptor PACKED_AHEAD_BUF slots on, and the slot PACKED_AHEAD_DESC
 * on. */
#define PACKED_AHEAD_BUF 2
#define PACKED_AHEAD_DESC 4

/* Asks the CPU for the lines the next pops will read and write (see
 * split_ring.c's prefetch_ahead). A slot ahead is read without acquire
 * and may not be available yet: its buffer is asked for only if its
 * flags say it is, and nothing read here is used but for a prefetch. */
static inline void prefetch_ahead(const struct vmio_vq *vq,
				  const struct vmio_mem *mem)
{
	unsigned pos = vq->last_avail_idx + PACKED_AHEAD_DESC;
	bool wrap = vq->avail_wrap;
	const struct pvirtq_desc *d;
	uint16_t flags;

	if (vq->size <= PACKED_AHEAD_DESC)
		return;
	/* A compare, not pop_slot's mask: as cheap here, and right for
	 * any size. */
	__builtin_prefetch(&vq->pdesc[pos < vq->size ? pos : pos - vq->size]);
	pos = vq->last_avail_idx + PACKED_AHEAD_BUF;
	if (pos >= vq->size) {
		pos -= vq->size;
		wrap = !wrap;
	}
	d = &vq->pdesc[pos];
	flags = vmio_ld16(&d->flags);
	if (!is_avail(flags, wrap))
		return;
	vmio_mem_prefetch_hinted(mem, vq->mem_hint, vmio_ld64(&d->addr),
				 flags & VIRTQ_DESC_F_WRITE);
}

/* pop_from's entry for the pop numbered n. A mask where % took a
 * division a chain: the spec lets a packed ring have any size, but
 * SET_VRING_NUM takes only powers of 2; and whatever the size, the entry
 * is within the array. */
static unsigned pop_slot(const struct vmio_vq *vq, unsigned n)
{
	return n & (vq->size - 1u);
}

int vmio_packed_pop(struct vmio_vq *vq, const struct vmio_mem *mem,
		    struct vmio_chain *chain)
{
	struct vmio_walk w;
	uint16_t id = 0;
	int n;

	/* SET_VRING_BASE may have named any offset. */
	if (vq->last_avail_idx >= vq->size || vq->used_idx >= vq->size) {
		vmio_vq_set_broken(vq, "ring positions %u and %u: beyond the queue of %u",
				   vq->last_avail_idx, vq->used_idx, vq->size);
		return -1;
	}
	prefetch_ahead(vq, mem);
	if (!pop_one(vq, mem, chain, &id)) {
		n = 1;
	} else {
		vmio_walk_begin(&w, vq, mem, chain, vq->last_avail_idx);
		n = walk_chain(&w, &id);
		if (n <= 0)
			return n;
		chain->head = id;
	}
	vq->buf_ndesc[id] = (uint16_t)n;
	vq->pop_from[pop_slot(vq, vq->pops)] =
		vmio_packed_position(vq->last_avail_idx, vq->avail_wrap);
	vq->pops++;
	pvirtq_advance(&vq->last_avail_idx, &vq->avail_wrap, (unsigned)n, vq->size);
	if (vq->event_idx && !vq->kicks_disabled) {
		vmio_st16(&vq->device_event->off_wrap,
			  vmio_packed_position(vq->last_avail_idx,
					       vq->avail_wrap));
		vmio_vq_logged(vq, vq->device_event,
			       sizeof(*vq->device_event));
	}
	return 1;
}

void vmio_packed_unpop(struct vmio_vq *vq, unsigned n)
{
	uint16_t from;

	if (!n || n > vq->pops || n > vq->size)
		return;
	vq->pops -= n;
	from = vq->pop_from[pop_slot(vq, vq->pops)];
	vq->last_avail_idx = from & (PVIRTQ_MAX_SIZE - 1);
	vq->avail_wrap = from >> VIRTQ_EVENT_WRAP_SHIFT;
}

/* Ring descriptors the chain of id took (1 for an id no pop gave). */
static unsigned chain_slots(const struct vmio_vq *vq, uint16_t id)
{
	return id < vq->size && vq->buf_ndesc[id] ? vq->buf_ndesc[id] : 1;
}

/* Used descriptors wait for the flush. The driver polls the flags of the
 * next descriptor it expects used, so a descriptor written at each push
 * took its line away from the driver's core and back once a chain, four
 * times a line; written at the flush, a line moves once a batch, as DPDK's
 * vhost does with its shadow used ring. The split layout needs none of
 * this: the driver reads no used element before used->idx, written at
 * the flush. */
static void write_out(struct vmio_vq *vq)
{
	for (unsigned i = 0; i < vq->nshadow; i++) {
		const struct vmio_packed_used *u = &vq->shadow[i];
		struct pvirtq_desc *d = &vq->pdesc[u->pos];

		d->id = htole16(u->id);
		d->len = htole32(u->len);
		/* Release: id and len are there before the driver sees it
		 * used. */
		vmio_st16_release(&d->flags, u->flags);
	}
	vq->nshadow = 0;
}

static void write_used(struct vmio_vq *vq, uint16_t pos, bool wrap,
		       uint16_t id, uint32_t written)
{
	uint16_t flags = wrap ? VIRTQ_DESC_F_AVAIL | VIRTQ_DESC_F_USED : 0;

	if (written)
		flags |= VIRTQ_DESC_F_WRITE;
	/* Never full between flushes (each entry took a slot of a chain
	 * still out); a guard, not a path. */
	if (vq->nshadow == vq->size)
		write_out(vq);
	vq->shadow[vq->nshadow++] = (struct vmio_packed_used){
		.len = written, .id = id, .pos = pos, .flags = flags,
	};
}

void vmio_packed_push(struct vmio_vq *vq, uint16_t id, uint32_t written)
{
	unsigned skip = chain_slots(vq, id);

	if (vq->used_idx >= vq->size)
		return; /* a base no pop accepted */
	write_used(vq, vq->used_idx, vq->used_wrap, id, written);
	pvirtq_advance(&vq->used_idx, &vq->used_wrap, skip, vq->size);
	vq->unflushed += skip;
}

void vmio_packed_push_batched(struct vmio_vq *vq, uint16_t id)
{
	unsigned skip = chain_slots(vq, id);

	if (vq->used_idx >= vq->size)
		return;
	if (!vq->batch_len) {
		vq->batch_at = vq->used_idx;
		vq->batch_wrap = vq->used_wrap;
	}
	vq->batch_id = id;
	vq->batch_len++;
	pvirtq_advance(&vq->used_idx, &vq->used_wrap, skip, vq->size);
	vq->unflushed += skip;
}

void vmio_packed_end_batch(struct vmio_vq *vq)
{
	write_used(vq, vq->batch_at, vq->batch_wrap, vq->batch_id, 0);
}

/* Whether the driver asked to hear of used descriptors up to new_pos,
 * given that it was last told of those up to old (2.8.21.3.1). Offsets
 * wrap at the ring's size, not at 2^16 as a split ring's indices do: a
 * batch of a whole ring or more since the last decision cannot be placed
 * against the driver's offset (the driver, reaping as we push, may have
 * moved on a lap meanwhile), and is told. */
static bool need_notify(struct vmio_vq *vq, unsigned pushed)
{
	uint16_t flags = vmio_ld16(&vq->driver_event->flags);
	int old = vq->signalled_used, new_pos = vq->used_idx;
	bool valid = vq->signalled_used_valid;
	vq->signalled_used = vq->used_idx;
	vq->signalled_used_valid = true;
	if (flags == VIRTQ_EVENT_F_DISABLE)
		return false;
	if (flags != VIRTQ_EVENT_F_DESC || !vq->event_idx || !valid ||
	    pushed >= vq->size)
		return true;
	return pvirtq_need_event(vmio_ld16(&vq->driver_event->off_wrap),
				 new_pos, old, vq->used_wrap, vq->size);
}

/* While logging: marks the descriptors made used since the last flush,
 * the pushed slots before used_idx (push and end_batch wrote one in each
 * chain's run of slots; all of them, at most a ring, in at most two
 * runs). Here rather than at each push, so that push calls nothing and
 * the data path pays nothing for logging while it is off (a call in
 * push, even never made, cost 11 to 13 instructions a frame in its and
 * its callers' registers), and pays once a flush, not once a chain, while
 * it is on. The driver may see a descriptor used before its mark: the
 * mark still comes after the write, which is what the VMM's copy needs. */
static __attribute__((cold, noinline)) void
log_flush(struct vmio_vq *vq, unsigned pushed)
{
	unsigned end = vq->used_idx;

	if (end >= vq->size || pushed >= vq->size)
		vmio_vq_mark_ring(vq, vq->pdesc, sizeof(*vq->pdesc), 0, vq->size);
	else
		vmio_vq_mark_ring(vq, vq->pdesc, sizeof(*vq->pdesc),
				  end >= pushed ? end - pushed
						: end + vq->size - pushed,
				  pushed);
}

void vmio_packed_flush_and_notify(struct vmio_vq *vq)
{
	unsigned pushed = vq->unflushed;

	if (!pushed)
		return;
	vq->unflushed = 0;
	write_out(vq);
	if (__builtin_expect(vq->log != NULL, 0))
		log_flush(vq, pushed);
	/* Our used flags against the driver's event suppression: the
	 * store-then-load race of split_ring.c's flush, the same barrier. */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (need_notify(vq, pushed))
		vmio_vq_notify(vq);
}

/* Whether a chain waits at the next position (none where SET_VRING_BASE
 * named one beyond the ring: pop breaks the queue for it). */
static bool next_avail(const struct vmio_vq *vq)
{
	return vq->last_avail_idx < vq->size &&
	       is_avail(vmio_ld16(&vq->pdesc[vq->last_avail_idx].flags),
			vq->avail_wrap);
}

uint16_t vmio_packed_avail_pending(const struct vmio_vq *vq)
{
	/* Counting would mean walking; one is what callers ask about. */
	return next_avail(vq);
}

uint32_t vmio_packed_progress(const struct vmio_vq *vq)
{
	uint16_t pos = vq->last_avail_idx;
	bool wrap = vq->avail_wrap;
	uint32_t n = 0;

	/* The driver makes descriptors available in ring order, so those
	 * ahead of us are one run: its length is how far the driver got.
	 * At most one look per slot, and only on a kick. */
	if (pos >= vq->size)
		return 0;
	while (n < vq->size && is_avail(vmio_ld16(&vq->pdesc[pos].flags), wrap)) {
		n++;
		if (++pos == vq->size) {
			pos = 0;
			wrap = !wrap;
		}
	}
	return n << 16 | vmio_packed_position(vq->last_avail_idx, vq->avail_wrap);
}

bool vmio_packed_enable_kicks(struct vmio_vq *vq, bool enable)
{
	if (!enable) {
		vmio_st16(&vq->device_event->flags, VIRTQ_EVENT_F_DISABLE);
		vmio_vq_logged(vq, vq->device_event,
			       sizeof(*vq->device_event));
		return false;
	}
	if (vq->event_idx) {
		vmio_st16(&vq->device_event->off_wrap,
			  vmio_packed_position(vq->last_avail_idx,
					       vq->avail_wrap));
		vmio_st16(&vq->device_event->flags, VIRTQ_EVENT_F_DESC);
	} else {
		vmio_st16(&vq->device_event->flags, VIRTQ_EVENT_F_ENABLE);
	}
	vmio_vq_logged(vq, vq->device_event, sizeof(*vq->device_event));
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	return next_avail(vq);
}
