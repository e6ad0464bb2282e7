#include "frontend/driver_vq.h"

#include <endian.h>
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "frontend/driver_in_order.h"
#include "frontend/driver_packed.h"

/* The ring is shared with a device in another process: every index the
 * other side reads or writes goes through an atomic access so that the
 * compiler neither tears nor caches it, and the barriers below order the
 * ring contents against the indices (virtio 1.x, 2.7.13). */

static uint16_t *used_event_ptr(struct vmio_dvq *q)
{
	return &q->avail->ring[q->size];
}

static uint16_t *avail_event_ptr(struct vmio_dvq *q)
{
	return (uint16_t *)&q->used->ring[q->size];
}

static void free_list_init(struct vmio_dvq *q)
{
	for (unsigned i = 0; i < q->size; i++)
		q->next_free[i] = (uint16_t)(i + 1);
	q->free_head = 0;
	q->free_tail = (uint16_t)(q->size - 1);
	q->num_free = q->size;
}

/* What both layouts start with: the queue empty, its gpas, no fds. */
static void dvq_reset(struct vmio_dvq *q, unsigned index, uint16_t size,
		      uint64_t desc_gpa, uint64_t avail_gpa, uint64_t used_gpa)
{
	memset(q, 0, sizeof(*q));
	q->index = index;
	q->size = size;
	q->kick_fd = -1;
	q->call_fd = -1;
	q->desc_gpa = desc_gpa;
	q->avail_gpa = avail_gpa;
	q->used_gpa = used_gpa;
}

/* The bookkeeping arrays, and every id free. */
static int dvq_alloc(struct vmio_dvq *q)
{
	q->next_free = calloc(q->size, sizeof(*q->next_free));
	q->tokens = calloc(q->size, sizeof(*q->tokens));
	q->chain_len = calloc(q->size, sizeof(*q->chain_len));
	q->order = calloc(q->size, sizeof(*q->order));
	if (!q->next_free || !q->tokens || !q->chain_len || !q->order ||
	    (q->packed && vmio_dvq_packed_setup(q))) {
		vmio_dvq_release(q);
		return -ENOMEM;
	}
	free_list_init(q);
	return 0;
}

int vmio_dvq_init(struct vmio_dvq *q, unsigned index, uint16_t size,
		  void *desc_mem, uint64_t desc_gpa, void *avail_mem,
		  uint64_t avail_gpa, void *used_mem, uint64_t used_gpa)
{
	dvq_reset(q, index, size, desc_gpa, avail_gpa, used_gpa);
	if (size == 0)
		return -EINVAL;
	q->desc = desc_mem;
	q->avail = avail_mem;
	q->used = used_mem;
	memset(desc_mem, 0, virtq_desc_bytes(size));
	memset(avail_mem, 0, virtq_avail_bytes(size));
	memset(used_mem, 0, virtq_used_bytes(size));
	return dvq_alloc(q);
}

int vmio_dvq_init_packed(struct vmio_dvq *q, unsigned index, uint16_t size,
			 void *desc_mem, uint64_t desc_gpa, void *driver_mem,
			 uint64_t driver_gpa, void *device_mem,
			 uint64_t device_gpa)
{
	dvq_reset(q, index, size, desc_gpa, driver_gpa, device_gpa);
	q->packed = true;
	if (size == 0)
		return -EINVAL;
	q->pdesc = desc_mem;
	q->driver_event = driver_mem;
	q->device_event = device_mem;
	return dvq_alloc(q);
}

void vmio_dvq_release(struct vmio_dvq *q)
{
	free(q->next_free);
	free(q->tokens);
	free(q->chain_len);
	free(q->order);
	free(q->unpublished);
	free(q->unpublished_flags);
	q->next_free = NULL;
	q->tokens = NULL;
	q->chain_len = NULL;
	q->order = NULL;
	q->unpublished = NULL;
	q->unpublished_flags = NULL;
	q->num_free = 0;
}

/* Descriptors are taken from the head of the free list in list order, so
 * the members of a chain stay linked through next_free: giving the chain
 * back only needs its head and length, never the descriptor table, which
 * a test may have rewritten by hand. */
static int split_add(struct vmio_dvq *q, const struct vmio_dbuf *bufs,
		     unsigned n, void *token)
{
	uint16_t head = q->free_head;
	uint16_t i = head;

	if (n == 0)
		return -EINVAL;
	if (n > q->num_free)
		return -ENOSPC;

	for (unsigned k = 0; k < n; k++) {
		struct virtq_desc *d = &q->desc[i];
		uint16_t flags = bufs[k].writable ? VIRTQ_DESC_F_WRITE : 0;
		uint16_t next = q->next_free[i];

		if (k + 1 < n)
			flags |= VIRTQ_DESC_F_NEXT;
		d->addr = htole64(bufs[k].gpa);
		d->len = htole32(bufs[k].len);
		d->flags = htole16(flags);
		d->next = htole16(k + 1 < n ? next : 0);
		if (k + 1 < n)
			i = next;
		else
			q->free_head = next;
	}
	q->num_free -= n;
	q->tokens[head] = token;
	q->chain_len[head] = (uint16_t)n;
	q->avail->ring[q->avail_idx & (q->size - 1)] = htole16(head);
	q->avail_idx++;
	return head;
}

int vmio_dvq_add(struct vmio_dvq *q, const struct vmio_dbuf *bufs, unsigned n,
		 void *token)
{
	int id = q->packed ? vmio_dvq_packed_add(q, bufs, n, token)
			   : split_add(q, bufs, n, token);

	if (id >= 0 && q->in_order)
		vmio_dvq_order_push(q, (uint16_t)id);
	return id;
}

static bool device_wants_kick(struct vmio_dvq *q, uint16_t old_idx,
			      uint16_t new_idx)
{
	if (q->event_idx) {
		uint16_t ev = le16toh(__atomic_load_n(avail_event_ptr(q),
						      __ATOMIC_RELAXED));
		return virtq_need_event(ev, new_idx, old_idx);
	}
	return !(le16toh(__atomic_load_n(&q->used->flags, __ATOMIC_RELAXED)) &
		 VIRTQ_USED_F_NO_NOTIFY);
}

bool vmio_dvq_kick(struct vmio_dvq *q)
{
	uint16_t old_idx = q->kicked_idx;
	uint16_t new_idx = q->avail_idx;
	uint64_t one = 1;

	if (q->packed)
		return vmio_dvq_packed_kick(q);
	if (old_idx == new_idx)
		return false;
	/* Release: the device must see the ring entries and descriptors
	 * before the index that makes them available. */
	__atomic_store_n(&q->avail->idx, htole16(new_idx), __ATOMIC_RELEASE);
	/* Full barrier: the store of idx must be visible before we read the
	 * device's suppression state, or we could both decide to sleep. */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	q->kicked_idx = new_idx;
	if (!device_wants_kick(q, old_idx, new_idx))
		return false;
	if (q->kick_fd >= 0 && write(q->kick_fd, &one, sizeof(one)) < 0)
		return false;
	return true;
}

static void free_chain(struct vmio_dvq *q, uint16_t head)
{
	uint16_t last = head;

	for (unsigned k = 1; k < q->chain_len[head]; k++)
		last = q->next_free[last];
	/* To the tail: see free_head in dvq_state.h. */
	if (q->num_free)
		q->next_free[q->free_tail] = head;
	else
		q->free_head = head;
	q->free_tail = last;
	q->num_free += q->chain_len[head];
	q->chain_len[head] = 0;
	q->tokens[head] = NULL;
}

/* The chain the used entry at last_used_idx gives back, and its length:
 * the entry's own, or under IN_ORDER the oldest chain out, the entry
 * being read only where a batch begins (driver_in_order.h). -1 for an
 * id beyond the queue. */
static int split_next_used(struct vmio_dvq *q, uint32_t *len)
{
	const struct virtq_used_elem *e =
		&q->used->ring[q->last_used_idx & (q->size - 1)];
	uint32_t id;

	if (q->in_order) {
		if (!q->batch_seen)
			vmio_dvq_order_see(q, (uint16_t)le32toh(e->id),
					   le32toh(e->len));
		return vmio_dvq_order_take(q, len);
	}
	id = le32toh(e->id);
	*len = le32toh(e->len);
	return id < q->size ? (int)id : -1;
}

void *vmio_dvq_get_used(struct vmio_dvq *q, uint32_t *len)
{
	uint16_t used_idx;

	if (q->packed)
		return vmio_dvq_packed_get_used(q, len);
	/* Acquire: the used element must be read after the index that
	 * published it. */
	used_idx = le16toh(__atomic_load_n(&q->used->idx, __ATOMIC_ACQUIRE));
	while (used_idx != q->last_used_idx) {
		uint32_t n;
		void *token;
		int id = split_next_used(q, &n);

		q->last_used_idx++;
		/* A device that returns a head we never gave it (or twice) is
		 * the bug under test; skipping it keeps our free list sound
		 * and the caller sees the missing data. */
		if (id < 0 || !q->chain_len[id])
			continue;
		token = q->tokens[id];
		if (len)
			*len = n;
		free_chain(q, (uint16_t)id);
		return token;
	}
	return NULL;
}

void vmio_dvq_want_interrupt(struct vmio_dvq *q)
{
	if (q->packed) {
		vmio_dvq_packed_want_interrupt(q);
		return;
	}
	if (q->event_idx)
		__atomic_store_n(used_event_ptr(q), htole16(q->last_used_idx),
				 __ATOMIC_RELAXED);
	else
		__atomic_store_n(&q->avail->flags, 0, __ATOMIC_RELAXED);
	/* The caller re-checks the used ring after this: the store must be
	 * visible before that load, or an entry pushed in between is missed
	 * by both sides. */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
}

int vmio_dvq_wait(struct vmio_dvq *q, int timeout_ms)
{
	struct pollfd p = { .fd = q->call_fd, .events = POLLIN };
	uint64_t v;
	int r;

	if (q->call_fd < 0)
		return -EBADF;
	do
		r = poll(&p, 1, timeout_ms);
	while (r < 0 && errno == EINTR);
	if (r < 0)
		return -errno;
	if (r == 0)
		return 0;
	if (read(q->call_fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		return -errno;
	return 1;
}

int vmio_dvq_add_indirect(struct vmio_dvq *q, void *table, uint64_t table_gpa,
			  const struct vmio_dbuf *bufs, unsigned n, void *token)
{
	const struct vmio_dbuf one = { .gpa = table_gpa, .len = 16 * n };
	struct virtq_desc *t = table;
	int head;

	if (q->packed)
		vmio_dvq_packed_fill_table(table, bufs, n);
	for (unsigned k = 0; !q->packed && k < n; k++) {
		uint16_t flags = bufs[k].writable ? VIRTQ_DESC_F_WRITE : 0;

		if (k + 1 < n)
			flags |= VIRTQ_DESC_F_NEXT;
		t[k].addr = htole64(bufs[k].gpa);
		t[k].len = htole32(bufs[k].len);
		t[k].flags = htole16(flags);
		t[k].next = htole16(k + 1 < n ? k + 1 : 0);
	}
	head = vmio_dvq_add(q, &one, 1, token);
	if (head < 0)
		return head;
	/* The chain is not visible before the kick: its one descriptor
	 * still ours to mark. */
	if (q->packed)
		vmio_dvq_packed_mark_indirect(q);
	else
		q->desc[head].flags = htole16(VIRTQ_DESC_F_INDIRECT);
	return head;
}

bool vmio_dvq_used_pending(struct vmio_dvq *q)
{
	if (q->packed)
		return vmio_dvq_packed_used_pending(q);
	return __atomic_load_n(&q->used->idx, __ATOMIC_ACQUIRE) !=
	       htole16(q->last_used_idx);
}
