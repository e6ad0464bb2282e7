#include "virtio/split_ring.h"

#include <endian.h>
#include <errno.h>
#include <string.h>

#include "virtio/chain_walk.h"
#include "virtio/ring_access.h"
#include "virtio/vq_signal.h"

static inline uint16_t *used_event(const struct vmio_vq *vq)
{
	return &vq->avail->ring[vq->size];
}

static inline uint16_t *avail_event(const struct vmio_vq *vq)
{
	return (uint16_t *)&vq->used->ring[vq->size];
}

int vmio_split_map(struct vmio_vq *vq, const struct vmio_mem *mem)
{
	unsigned n = vq->size;
	void *desc, *avail, *used;

	/* Split rings are a power of two in size (virtio 1.x, 2.7); the
	 * ring index arithmetic below relies on it. */
	if (!n || n > VIRTQ_MAX_SIZE || (n & (n - 1)))
		return -EFAULT;
	desc = vmio_ring_area(mem, vq->desc_uva, virtq_desc_bytes(n), 16);
	avail = vmio_ring_area(mem, vq->avail_uva, virtq_avail_bytes(n), 2);
	used = vmio_ring_area(mem, vq->used_uva, virtq_used_bytes(n), 4);
	if (!desc || !avail || !used)
		return -EFAULT;
	vq->desc = desc;
	vq->avail = avail;
	vq->used = used;
	return 0;
}

static void read_desc(struct virtq_desc *d, const uint8_t *table, unsigned i)
{
	struct virtq_desc raw;

	memcpy(&raw, table + (size_t)i * sizeof(raw), sizeof(raw));
	/* Force the copy to happen here, once: without the barrier the
	 * compiler may re-read guest memory at each use of a field, and a
	 * guest rewriting the descriptor could slip past a check. */
	__asm__ __volatile__("" ::: "memory");
	d->addr = le64toh(raw.addr);
	d->len = le32toh(raw.len);
	d->flags = le16toh(raw.flags);
	d->next = le16toh(raw.next);
}

/*
 * Follows the chain from head, through at most one indirect table. Each
 * table level may be visited at most table_size times: a longer walk can
 * only be a loop.
 */
static int walk_chain(struct vmio_walk *w, uint16_t head)
{
	unsigned i = head, visited = 0;
	struct virtq_desc d;

	for (;;) {
		if (++visited > w->table_size) {
			vmio_vq_set_broken(w->vq, "head %u: chain visits more than the %u %ss of its table (a loop?)",
					   head, w->table_size,
					   vmio_walk_where(w));
			return -1;
		}
		read_desc(&d, w->table, i);
		if (d.flags & VIRTQ_DESC_F_INDIRECT) {
			if (d.flags & VIRTQ_DESC_F_NEXT) {
				vmio_vq_set_broken(w->vq, "head %u: descriptor %u has both INDIRECT and NEXT",
						   head, i);
				return -1;
			}
			if (vmio_walk_enter_table(w, d.addr, d.len, i))
				return -1;
			i = 0;
			visited = 0;
			continue;
		}
		if (vmio_walk_add(w, d.addr, d.len, d.flags & VIRTQ_DESC_F_WRITE,
				  i))
			return -1;
		if (!(d.flags & VIRTQ_DESC_F_NEXT))
			return 0;
		if (d.next >= w->table_size) {
			vmio_vq_set_broken(w->vq, "head %u: %s %u: next %u is beyond the table of %u",
					   head, vmio_walk_where(w), i, d.next,
					   w->table_size);
			return -1;
		}
		i = d.next;
	}
}

/* How far ahead of the entry it pops a pop asks for lines: the buffer
 * of the entry SPLIT_AHEAD_BUF on (its descriptor asked for by an earlier
 * pop), and the descriptor of the one SPLIT_AHEAD_DESC on. */
#define SPLIT_AHEAD_BUF 2
#define SPLIT_AHEAD_DESC 4

/* Asks the CPU for the lines the next pops will read and write. The
 * driver wrote them on another core: fetched when needed, each pop
 * waited out its misses in turn, and on net's rx that was most of a
 * frame's cost (architecture.md section 1, `src/virtio`). Hints only: what
 * is read here is used for nothing but a prefetch, and an address
 * outside the hinted region is not asked for. */
static inline void prefetch_ahead(const struct vmio_vq *vq,
				  const struct vmio_mem *mem)
{
	uint16_t mask = (uint16_t)(vq->size - 1), head;

	if (vq->avail_known > SPLIT_AHEAD_DESC) {
		head = vmio_ld16(&vq->avail->ring[(vq->last_avail_idx +
						   SPLIT_AHEAD_DESC) & mask]);
		if (head < vq->size)
			__builtin_prefetch(&vq->desc[head]);
	}
	if (vq->avail_known > SPLIT_AHEAD_BUF) {
		head = vmio_ld16(&vq->avail->ring[(vq->last_avail_idx +
						   SPLIT_AHEAD_BUF) & mask]);
		if (head >= vq->size)
			return;
		vmio_mem_prefetch_hinted(mem, vq->mem_hint,
					 vmio_ld64(&vq->desc[head].addr),
					 vmio_ld16(&vq->desc[head].flags) &
						 VIRTQ_DESC_F_WRITE);
	}
}

int vmio_split_pop(struct vmio_vq *vq, const struct vmio_mem *mem,
		   struct vmio_chain *chain)
{
	struct vmio_walk w;
	struct virtq_desc d;
	uint16_t avail_idx, pending, head;

	if (!vq->avail_known) {
		/* Acquire: the ring entries and descriptors we read next were
		 * written before the driver published this index. */
		avail_idx = vmio_ld16_acquire(&vq->avail->idx);
		pending = (uint16_t)(avail_idx - vq->last_avail_idx);
		if (!pending)
			return 0;
		if (pending > vq->size) {
			vmio_vq_set_broken(vq, "avail index moved by %u, more than the queue size %u",
					   pending, vq->size);
			return -1;
		}
		vq->avail_known = pending;
	}
	prefetch_ahead(vq, mem);
	head = vmio_ld16(&vq->avail->ring[vq->last_avail_idx & (vq->size - 1)]);
	if (head >= vq->size) {
		vmio_vq_set_broken(vq, "avail entry %u holds head %u, beyond the queue size %u",
				   vq->last_avail_idx, head, vq->size);
		return -1;
	}
	read_desc(&d, (const uint8_t *)vq->desc, head);
	if ((d.flags & (VIRTQ_DESC_F_NEXT | VIRTQ_DESC_F_INDIRECT)) ||
	    vmio_walk_one(vq, mem, chain, head, d.addr, d.len,
			  d.flags & VIRTQ_DESC_F_WRITE)) {
		vmio_walk_begin(&w, vq, mem, chain, head);
		w.table = (const uint8_t *)vq->desc;
		w.table_size = vq->size;
		if (walk_chain(&w, head))
			return -1;
	}
	vq->last_avail_idx++;
	vq->avail_known--;
	/* Tell the driver how far we have read, so that it kicks only for
	 * buffers past this point (unless kicks are off). */
	if (vq->event_idx && !vq->kicks_disabled) {
		vmio_st16(avail_event(vq), vq->last_avail_idx);
		vmio_vq_logged(vq, avail_event(vq), sizeof(uint16_t));
	}
	return 1;
}

void vmio_split_unpop(struct vmio_vq *vq, unsigned n)
{
	vq->last_avail_idx -= (uint16_t)n;
	vq->avail_known += (uint16_t)n;
}

void vmio_split_push(struct vmio_vq *vq, uint16_t head, uint32_t written)
{
	struct virtq_used_elem *e;

	e = &vq->used->ring[vq->used_idx & (vq->size - 1)];
	e->id = htole32(head);
	e->len = htole32(written);
	vq->used_idx++;
}

void vmio_split_push_batched(struct vmio_vq *vq, uint16_t head)
{
	if (!vq->batch_len)
		vq->batch_at = vq->used_idx;
	vq->batch_id = head;
	vq->batch_len++;
	vq->used_idx++;
}

void vmio_split_end_batch(struct vmio_vq *vq)
{
	struct virtq_used_elem *e = &vq->used->ring[vq->batch_at & (vq->size - 1)];

	/* The other slots of the batch keep whatever they held: the driver
	 * reads only this one and knows the chains before it by their order
	 * (2.7.9). */
	e->id = htole32(vq->batch_id);
	e->len = 0;
}

static bool need_notify(struct vmio_vq *vq, uint16_t new_idx)
{
	uint16_t old_idx = vq->signalled_used;
	bool valid = vq->signalled_used_valid;

	if (!vq->event_idx)
		return !(vmio_ld16(&vq->avail->flags) &
			 VIRTQ_AVAIL_F_NO_INTERRUPT);
	vq->signalled_used = new_idx;
	vq->signalled_used_valid = true;
	if (!valid)
		return true;
	return virtq_need_event(vmio_ld16(used_event(vq)), new_idx, old_idx);
}

/* While logging: marks what a flush publishes, the used elements from
 * index from to index to (those push and end_batch wrote since the last
 * flush: at most a ring, in at most two runs) and used->idx. Here rather
 * than at each push, so that push calls nothing and the data path pays
 * nothing for logging while it is off (a call in push, even never made,
 * cost 11 to 13 instructions a frame in its and its callers' registers),
 * and pays once a flush, not once a chain, while it is on. The marks
 * come after the writes, and before the next flush could write the
 * elements again. */
static __attribute__((cold, noinline)) void
log_flush(struct vmio_vq *vq, uint16_t from, uint16_t to)
{
	vmio_vq_mark_ring(vq, vq->used->ring, sizeof(vq->used->ring[0]),
			  from & (vq->size - 1), (uint16_t)(to - from));
	vmio_vq_mark(vq, &vq->used->idx, sizeof(vq->used->idx));
}

void vmio_split_flush_and_notify(struct vmio_vq *vq)
{
	uint16_t new_idx = vq->used_idx;

	if (new_idx == vq->published_used)
		return;
	/* Release: the used elements become visible no later than the index
	 * that covers them. */
	vmio_st16_release(&vq->used->idx, new_idx);
	if (__builtin_expect(vq->log != NULL, 0))
		log_flush(vq, vq->published_used, new_idx);
	vq->published_used = new_idx;
	/* The driver stores its flags or used_event, then loads used->idx;
	 * we store used->idx, then load its flags. Store-then-load ordering
	 * needs a full barrier on both sides, or each can miss the other's
	 * update and the driver sleeps with work pending. */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (need_notify(vq, new_idx))
		vmio_vq_notify(vq);
}

uint16_t vmio_split_avail_pending(const struct vmio_vq *vq)
{
	uint16_t n = (uint16_t)(vmio_ld16(&vq->avail->idx) - vq->last_avail_idx);

	return n > vq->size ? vq->size : n;
}

uint32_t vmio_split_progress(const struct vmio_vq *vq)
{
	return (uint32_t)vmio_ld16(&vq->avail->idx) << 16 | vq->last_avail_idx;
}

bool vmio_split_enable_kicks(struct vmio_vq *vq, bool enable)
{
	if (!vq->event_idx) {
		vmio_st16(&vq->used->flags, enable ? 0 : VIRTQ_USED_F_NO_NOTIFY);
		vmio_vq_logged(vq, &vq->used->flags, sizeof(uint16_t));
	} else if (enable) {
		vmio_st16(avail_event(vq), vq->last_avail_idx);
		vmio_vq_logged(vq, avail_event(vq), sizeof(uint16_t));
	}
	if (!enable)
		return false;
	/* Our store above against the driver's avail->idx store: same
	 * store-then-load race as in flush, same full barrier. */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	return vmio_ld16(&vq->avail->idx) != vq->last_avail_idx;
}
