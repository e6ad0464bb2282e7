/* Serving the rings: a queue runs on the device exactly while
 * vmio_bq_ready() holds. Every change of a queue's configuration goes
 * pause → change → sync, so the device never sees a ring, an fd or a memory
 * table change under a running queue. With a queue served on another
 * thread the pause takes a while: the message that changes it waits
 * (vmio_bq_quiesce) until the queue has stopped there. */
#include <errno.h>
#include <stdint.h>

#include "util/fd.h"
#include "virtio/packed_ring.h"
#include "vhost-user/queue_home.h"
#include "vhost-user/queue_state.h"
#include "vhost-user/queues.h"

/* The device's notifications go out on the call fd, a broken ring is
 * told on the error fd; the home writes them while the queue runs. */
static void notify_cb(void *opaque)
{
	vmio_vq_signal(((struct vmio_backend_queue *)opaque)->call_fd);
}

static void broken_cb(void *opaque)
{
	vmio_vq_signal(((struct vmio_backend_queue *)opaque)->err_fd);
}

static const struct vmio_vq_transport transport = {
	.notify = notify_cb,
	.broken = broken_cb,
};

/* The queue as the VMM has not touched it. */
static void forget(struct vmio_backend_queue *q, unsigned index)
{
	vmio_vq_init(&q->vq, index);
	vmio_vq_set_transport(&q->vq, &transport, q);
	q->kick_fd = q->call_fd = q->err_fd = -1;
	q->started = q->enabled = false;
}

void vmio_bq_init_all(struct vmio_backend *be)
{
	for (unsigned i = 0; i < be->ops->num_queues; i++) {
		struct vmio_backend_queue *q = &be->queues[i];
		forget(q, i);
		q->be = be;
	}
	vmio_home_init(be);
}

bool vmio_bq_ready(const struct vmio_backend_queue *q)
{
	/* Held for a hand-over, nothing runs: the indices in the record
	 * must stay true. */
	return q->started && q->enabled && vmio_vq_ready(&q->vq) &&
	       q->be->state != VMIO_BE_HELD;
}

/* On the device, or on its way there. */
static bool running(const struct vmio_backend_queue *q)
{
	return q->state == VMIO_BQ_RUNNING || q->state == VMIO_BQ_STARTING;
}

void vmio_bq_sync(struct vmio_backend_queue *q)
{
	bool ready = vmio_bq_ready(q);

	if (ready && !running(q)) {
		vmio_home_choose(q);
		vmio_home_start(q);
	} else if (!ready && running(q)) {
		/* No longer started or enabled: it has stopped for good; else
		 * (a broken or unmapped ring) it pauses. */
		vmio_home_stop(q, q->started && q->enabled ? VMIO_QUEUE_PAUSE
							   : VMIO_QUEUE_HALT);
	}
}

void vmio_bq_pause(struct vmio_backend_queue *q)
{
	if (running(q))
		vmio_home_stop(q, VMIO_QUEUE_PAUSE);
}

void vmio_bq_pause_all(struct vmio_backend *be)
{
	for (unsigned i = 0; i < be->ops->num_queues; i++)
		vmio_bq_pause(&be->queues[i]);
}

void vmio_bq_sync_all(struct vmio_backend *be)
{
	for (unsigned i = 0; i < be->ops->num_queues; i++)
		vmio_bq_sync(&be->queues[i]);
}

bool vmio_bq_quiesce(struct vmio_backend *be, unsigned first, unsigned n,
		     enum vmio_queue_stop how)
{
	for (unsigned i = first; i < first + n && i < be->ops->num_queues; i++)
		vmio_home_stop(&be->queues[i], how);
	return !vmio_home_busy(be);
}

int vmio_bq_remap(struct vmio_backend_queue *q)
{
	struct vmio_vq *vq = &q->vq;

	vmio_vq_unmap(vq);
	if (!vq->addr_set || !vq->size || !q->be->mem.nregions)
		return 0;
	return vmio_vq_map(vq, &q->be->mem);
}

uint32_t vmio_bq_base(const struct vmio_backend_queue *q)
{
	const struct vmio_vq *vq = &q->vq;

	if (!vq->packed)
		return vq->last_avail_idx;
	return vmio_packed_position(vq->last_avail_idx, vq->avail_wrap) |
	       (uint32_t)vmio_packed_position(vq->used_idx, vq->used_wrap)
		       << 16;
}

void vmio_bq_set_kick_fd(struct vmio_backend_queue *q, int fd)
{
	vmio_close_fd(&q->kick_fd);
	/* A second reader of the same eventfd (a VMM can pass one to two
	 * queues) must not leave us blocked in read(). */
	if (fd >= 0)
		vmio_fd_set_nonblock(fd);
	q->kick_fd = fd;
}

void vmio_bq_reset(struct vmio_backend_queue *q)
{
	struct vmio_vq *vq = &q->vq;
	unsigned index = vq->index;

	vmio_bq_pause(q);
	/* The device was reset, or gave back what it held at a halt. */
	vmio_bq_move(q, VMIO_BQ_IDLE);
	vmio_bq_set_kick_fd(q, -1);
	vmio_close_fd(&q->call_fd);
	vmio_close_fd(&q->err_fd);
	vmio_vq_release(vq);
	forget(q, index);
}

void vmio_bq_release_all(struct vmio_backend *be)
{
	vmio_home_gone(be);
	for (unsigned i = 0; i < be->ops->num_queues; i++) {
		vmio_bq_reset(&be->queues[i]);
		vmio_vq_release(&be->queues[i].vq);
	}
}
