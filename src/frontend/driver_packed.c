/* A packed ring from the driver's side. A chain goes into the ring in
 * order from next_avail, every descriptor carrying the buffer id; the
 * first one's flags are written last, at the kick, so that the device
 * never sees part of a chain (and, as with split, nothing is visible
 * before the kick). The device's used descriptor for an id comes where
 * the next is due; we skip as many slots as that chain took. */
#include "frontend/driver_packed.h"

#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "frontend/driver_in_order.h"

static uint16_t ld16(const uint16_t *p, int order)
{
	return le16toh(__atomic_load_n(p, order));
}

static void st16(uint16_t *p, uint16_t v, int order)
{
	__atomic_store_n(p, htole16(v), order);
}

static uint16_t avail_flags(bool wrap)
{
	return wrap ? VIRTQ_DESC_F_AVAIL : VIRTQ_DESC_F_USED;
}

static bool is_used(const struct vmio_dvq *q, uint16_t flags)
{
	return !!(flags & VIRTQ_DESC_F_AVAIL) == q->used_wrap &&
	       !!(flags & VIRTQ_DESC_F_USED) == q->used_wrap;
}

int vmio_dvq_packed_setup(struct vmio_dvq *q)
{
	q->unpublished = calloc(q->size, sizeof(*q->unpublished));
	q->unpublished_flags = calloc(q->size, sizeof(*q->unpublished_flags));
	if (!q->unpublished || !q->unpublished_flags)
		return -ENOMEM;
	memset(q->pdesc, 0, (size_t)q->size * sizeof(*q->pdesc));
	memset(q->driver_event, 0, sizeof(*q->driver_event));
	memset(q->device_event, 0, sizeof(*q->device_event));
	q->avail_wrap = q->used_wrap = true;
	return 0;
}

int vmio_dvq_packed_add(struct vmio_dvq *q, const struct vmio_dbuf *bufs,
			unsigned n, void *token)
{
	uint16_t id = q->free_head, first = q->next_avail;
	uint16_t first_flags = 0;

	if (n == 0)
		return -EINVAL;
	if (n > q->num_free || q->num_free == 0)
		return -ENOSPC;
	for (unsigned k = 0; k < n; k++) {
		struct pvirtq_desc *d = &q->pdesc[q->next_avail];
		uint16_t flags = avail_flags(q->avail_wrap);

		if (bufs[k].writable)
			flags |= VIRTQ_DESC_F_WRITE;
		if (k + 1 < n)
			flags |= VIRTQ_DESC_F_NEXT;
		d->addr = htole64(bufs[k].gpa);
		d->len = htole32(bufs[k].len);
		d->id = htole16(id);
		if (k == 0)
			first_flags = flags; /* written at the kick */
		else
			d->flags = htole16(flags);
		pvirtq_advance(&q->next_avail, &q->avail_wrap, 1, q->size);
	}
	q->free_head = q->next_free[id];
	q->num_free -= n;
	q->tokens[id] = token;
	q->chain_len[id] = (uint16_t)n;
	q->unpublished[q->n_unpublished] = first;
	q->unpublished_flags[q->n_unpublished] = first_flags;
	q->n_unpublished++;
	return id;
}

/* Whether the device asked to hear of descriptors made available in
 * [kicked, next_avail) (2.8.10). */
static bool device_wants_kick(struct vmio_dvq *q)
{
	uint16_t flags = ld16(&q->device_event->flags, __ATOMIC_RELAXED);

	if (flags == VIRTQ_EVENT_F_DISABLE)
		return false;
	if (flags != VIRTQ_EVENT_F_DESC || !q->event_idx)
		return true;
	return pvirtq_need_event(ld16(&q->device_event->off_wrap,
				      __ATOMIC_RELAXED),
				 q->next_avail, q->kicked_pos, q->avail_wrap,
				 q->size);
}

bool vmio_dvq_packed_kick(struct vmio_dvq *q)
{
	uint64_t one = 1;
	bool want;

	if (!q->n_unpublished)
		return false;
	/* Release: each chain's other descriptors before its first's flags. */
	for (unsigned i = 0; i < q->n_unpublished; i++)
		st16(&q->pdesc[q->unpublished[i]].flags, q->unpublished_flags[i],
		     __ATOMIC_RELEASE);
	q->n_unpublished = 0;
	/* Our flags against the device's event suppression: store, then
	 * load, on both sides. */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	want = device_wants_kick(q);
	q->kicked_pos = q->next_avail;
	if (!want)
		return false;
	if (q->kick_fd >= 0 && write(q->kick_fd, &one, sizeof(one)) < 0)
		return false;
	return true;
}

/* Gives id's slots and id back; returns its token. */
static void *take_used(struct vmio_dvq *q, uint16_t id)
{
	void *token = q->tokens[id];

	pvirtq_advance(&q->next_used, &q->used_wrap, q->chain_len[id], q->size);
	q->num_free += q->chain_len[id];
	q->chain_len[id] = 0;
	q->tokens[id] = NULL;
	q->next_free[id] = q->free_head;
	q->free_head = id;
	return token;
}

/* Under IN_ORDER the used descriptor is read only where a batch begins
 * (driver_in_order.h); the chains of a batch take their slots in turn. */
static void *get_used_in_order(struct vmio_dvq *q, uint32_t *len)
{
	for (;;) {
		struct pvirtq_desc *d = &q->pdesc[q->next_used];
		uint32_t n;
		int id;

		if (!q->batch_seen) {
			if (!is_used(q, ld16(&d->flags, __ATOMIC_ACQUIRE)))
				return NULL;
			vmio_dvq_order_see(q, le16toh(d->id), le32toh(d->len));
		}
		id = vmio_dvq_order_take(q, &n);
		if (id < 0) {
			/* Used beyond what we gave: skip the slot. */
			pvirtq_advance(&q->next_used, &q->used_wrap, 1, q->size);
			continue;
		}
		if (!q->chain_len[id])
			continue;
		if (len)
			*len = n;
		return take_used(q, (uint16_t)id);
	}
}

void *vmio_dvq_packed_get_used(struct vmio_dvq *q, uint32_t *len)
{
	if (q->in_order)
		return get_used_in_order(q, len);
	for (;;) {
		struct pvirtq_desc *d = &q->pdesc[q->next_used];
		uint16_t flags = ld16(&d->flags, __ATOMIC_ACQUIRE);
		uint16_t id;

		if (!is_used(q, flags))
			return NULL;
		id = le16toh(d->id);
		/* A device that returns an id we never gave it (or twice)
		 * is the bug under test: skip one slot, keep our list. */
		if (id >= q->size || !q->chain_len[id]) {
			pvirtq_advance(&q->next_used, &q->used_wrap, 1, q->size);
			continue;
		}
		if (len)
			*len = le32toh(d->len);
		return take_used(q, id);
	}
}

void vmio_dvq_packed_want_interrupt(struct vmio_dvq *q)
{
	if (q->event_idx) {
		st16(&q->driver_event->off_wrap,
		     (uint16_t)(q->next_used |
				(unsigned)q->used_wrap << VIRTQ_EVENT_WRAP_SHIFT),
		     __ATOMIC_RELAXED);
		st16(&q->driver_event->flags, VIRTQ_EVENT_F_DESC,
		     __ATOMIC_RELAXED);
	} else {
		st16(&q->driver_event->flags, VIRTQ_EVENT_F_ENABLE,
		     __ATOMIC_RELAXED);
	}
	/* As in split: the store before the caller's next look. */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
}

bool vmio_dvq_packed_used_pending(struct vmio_dvq *q)
{
	return q->batch_seen ||
	       is_used(q, ld16(&q->pdesc[q->next_used].flags, __ATOMIC_ACQUIRE));
}

void vmio_dvq_packed_fill_table(struct pvirtq_desc *t,
				const struct vmio_dbuf *bufs, unsigned n)
{
	for (unsigned k = 0; k < n; k++) {
		t[k].addr = htole64(bufs[k].gpa);
		t[k].len = htole32(bufs[k].len);
		t[k].id = 0;
		t[k].flags = htole16(bufs[k].writable ? VIRTQ_DESC_F_WRITE : 0);
	}
}

void vmio_dvq_packed_mark_indirect(struct vmio_dvq *q)
{
	if (q->n_unpublished)
		q->unpublished_flags[q->n_unpublished - 1] |=
			VIRTQ_DESC_F_INDIRECT;
}
