/* The interface devices use, over either layout: each call goes to
 * split_ring.c or packed_ring.c as the queue's negotiated features say;
 * what both layouts share (state, readiness, polling, chain copies) is
 * here. */
#include "virtio/virtqueue.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util/clock.h"
#include "util/iov.h"
#include "virtio/packed_ring.h"
#include "virtio/split_ring.h"

void vmio_vq_init(struct vmio_vq *vq, unsigned index)
{
	memset(vq, 0, sizeof(*vq));
	vq->index = index;
	/* Both packed wrap counters start at 1 (2.8.1). */
	vq->avail_wrap = true;
	vq->used_wrap = true;
}

void vmio_vq_release(struct vmio_vq *vq)
{
	free(vq->indirect_scratch);
	vq->indirect_scratch = NULL;
	vq->indirect_scratch_len = 0;
	free(vq->buf_ndesc);
	vq->buf_ndesc = NULL;
	free(vq->pop_from);
	vq->pop_from = NULL;
	free(vq->out_only);
	vq->out_only = NULL;
	free(vq->shadow);
	vq->shadow = NULL;
	vq->nshadow = 0;
}

static bool mapped(const struct vmio_vq *vq)
{
	return vq->packed ? vq->pdesc != NULL : vq->desc != NULL;
}

/* Kept across a remap, as packed_ring.c's per-id arrays: chains still out
 * keep what was recorded for them. */
static int grow_out_only(struct vmio_vq *vq)
{
	bool *p = realloc(vq->out_only, vq->size * sizeof(*p));

	if (!p)
		return -ENOMEM;
	vq->out_only = p;
	return 0;
}

int vmio_vq_map(struct vmio_vq *vq, const struct vmio_mem *mem)
{
	int rc;

	vmio_vq_unmap(vq);
	if (!vq->addr_set)
		return -EFAULT;
	rc = vq->packed ? vmio_packed_map(vq, mem) : vmio_split_map(vq, mem);
	if (!rc)
		rc = grow_out_only(vq);
	if (rc)
		vmio_vq_unmap(vq);
	return rc;
}

void vmio_vq_unmap(struct vmio_vq *vq)
{
	vq->desc = NULL;
	vq->avail = NULL;
	vq->used = NULL;
	vq->pdesc = NULL;
	vq->driver_event = NULL;
	vq->device_event = NULL;
}

bool vmio_vq_ready(const struct vmio_vq *vq)
{
	return mapped(vq) && !vq->broken;
}

void vmio_vq_notify_moved(struct vmio_vq *vq)
{
	/* What went to the old call fd may never reach the driver: QEMU
	 * discards what its masked notifier (the call fd a queue starts on,
	 * served from SET_VRING_KICK) got when it installs the guest's. A
	 * driver that missed that one under event_idx would not be signalled
	 * again, so it is told on the new fd, and the next batch signals. */
	vq->signalled_used_valid = false;
}

int vmio_vq_pop(struct vmio_vq *vq, const struct vmio_mem *mem,
		struct vmio_chain *chain)
{
	int rc;

	if (vq->broken)
		return -1;
	if (!vmio_vq_ready(vq))
		return 0;
	rc = vq->packed ? vmio_packed_pop(vq, mem, chain)
			: vmio_split_pop(vq, mem, chain);
	/* Both layouts check the id against the queue size; the map
	 * allocated out_only whether or not IN_ORDER is on yet. */
	if (rc == 1)
		vq->out_only[chain->head] = chain->nin == 0;
	return rc;
}

void vmio_vq_unpop(struct vmio_vq *vq, unsigned n)
{
	if (vq->packed)
		vmio_packed_unpop(vq, n);
	else
		vmio_split_unpop(vq, n);
}

/* Whether a used entry for head may join the open batch: only chains the
 * driver reads no length of (a receive buffer's length is the frame's). */
/* Chains whose used entries one batch may cover at most. */
#define VMIO_USED_BATCH_MAX 32

static bool batchable(const struct vmio_vq *vq, uint16_t head,
		      uint32_t written)
{
	return vq->in_order && !written && head < vq->size &&
	       vq->out_only && vq->out_only[head];
}

static void end_batch(struct vmio_vq *vq)
{
	if (!vq->batch_len)
		return;
	if (vq->packed)
		vmio_packed_end_batch(vq);
	else
		vmio_split_end_batch(vq);
	vq->batch_len = 0;
}

void vmio_vq_push(struct vmio_vq *vq, uint16_t head, uint32_t written)
{
	if (!mapped(vq))
		return;
	if (batchable(vq, head, written)) {
		if (vq->packed)
			vmio_packed_push_batched(vq, head);
		else
			vmio_split_push_batched(vq, head);
		/* The driver sees a batch only when it ends. Ending one every
		 * VMIO_USED_BATCH_MAX chains lets it take buffers back while
		 * we work through the rest, as a packed ring's single pushes
		 * do (measured: a whole budget of 256 in one batch halved
		 * testpmd's packed txonly rate); never more than a ring. */
		if (vq->batch_len >= VMIO_USED_BATCH_MAX ||
		    vq->batch_len >= vq->size)
			end_batch(vq);
		return;
	}
	end_batch(vq);
	if (vq->packed)
		vmio_packed_push(vq, head, written);
	else
		vmio_split_push(vq, head, written);
}

void vmio_vq_flush_and_notify(struct vmio_vq *vq)
{
	if (!mapped(vq))
		return;
	end_batch(vq);
	if (vq->packed)
		vmio_packed_flush_and_notify(vq);
	else
		vmio_split_flush_and_notify(vq);
}

uint16_t vmio_vq_avail_pending(const struct vmio_vq *vq)
{
	if (!vmio_vq_ready(vq))
		return 0;
	return vq->packed ? vmio_packed_avail_pending(vq)
			  : vmio_split_avail_pending(vq);
}

uint32_t vmio_vq_progress(const struct vmio_vq *vq)
{
	if (!mapped(vq))
		return 0;
	return vq->packed ? vmio_packed_progress(vq) : vmio_split_progress(vq);
}

bool vmio_vq_enable_kicks(struct vmio_vq *vq, bool enable)
{
	if (!mapped(vq))
		return false;
	vq->kicks_disabled = !enable;
	return vq->packed ? vmio_packed_enable_kicks(vq, enable)
			  : vmio_split_enable_kicks(vq, enable);
}

size_t vmio_chain_read(const struct vmio_chain *c, uint64_t offset, void *dst,
		       size_t len)
{
	return vmio_iov_to_buf(c->iov, c->nout, offset, dst, len);
}

size_t vmio_chain_write(const struct vmio_chain *c, uint64_t offset,
			const void *src, size_t len)
{
	return vmio_iov_from_buf(c->iov + c->nout, c->nin, offset, src, len);
}
