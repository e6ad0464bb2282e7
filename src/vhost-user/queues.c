/* Serving the rings: a queue runs on the device exactly while
 * vmio_vq_ready() holds. Every change of a queue's configuration goes
 * pause → change → sync, so the device never sees a ring, an fd or a memory
 * table change under a running queue (which keeps a later worker-thread
 * device safe: queue_stop is its barrier). */
#include <errno.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "util/fd.h"
#include "vhost-user/queues.h"

void vmio_bq_init_all(struct vmio_backend *be)
{
	for (unsigned i = 0; i < be->ops->num_queues; i++) {
		struct vmio_backend_queue *q = &be->queues[i];
		vmio_vq_init(&q->vq, i);
		q->be = be;
		q->running = false;
		q->kick_watched = false;
	}
}

static void unwatch_kick(struct vmio_backend_queue *q)
{
	if (!q->kick_watched)
		return;
	vmio_loop_remove(q->be->loop, q->vq.kick_fd);
	q->kick_watched = false;
}

/* A queue that is no longer started or enabled has stopped for good; any
 * other stop is a pause around a change of its configuration. */
static void stop_queue(struct vmio_backend_queue *q)
{
	struct vmio_backend *be = q->be;
	enum vmio_queue_stop how = q->vq.started && q->vq.enabled ?
					   VMIO_QUEUE_PAUSE : VMIO_QUEUE_HALT;

	unwatch_kick(q);
	q->running = false;
	log_debug("vhost-user: queue %u %s", q->vq.index,
		  how == VMIO_QUEUE_HALT ? "stopped" : "paused");
	be->ops->queue_stop(be->dev, &q->vq, how);
}

static void kick_cb(void *opaque, int fd, uint32_t events)
{
	struct vmio_backend_queue *q = opaque;
	struct vmio_backend *be = q->be;
	uint64_t count;

	/* An eventfd never hangs up; a kick fd that does is not one, and
	 * level-triggered epoll would report it forever. */
	if (events & (EPOLLHUP | EPOLLERR)) {
		vmio_vq_set_broken(&q->vq, "kick fd hung up or failed");
		vmio_bq_sync(q);
		return;
	}
	/* The fd is non-blocking: a kick someone else consumed is fine. */
	if (read(fd, &count, sizeof(count)) < 0 && errno != EAGAIN &&
	    errno != EINTR) {
		vmio_vq_set_broken(&q->vq, "kick fd read failed: errno %d",
				   errno);
		vmio_bq_sync(q);
		return;
	}
	if (!q->running)
		return;
	be->ops->queue_kick(be->dev, &q->vq);
	/* The device may have found the ring malformed. */
	vmio_bq_sync(q);
}

static int watch_kick(struct vmio_backend_queue *q)
{
	int rc;

	if (q->vq.kick_fd < 0)
		return 0; /* NOFD: the device polls */
	rc = vmio_loop_add(q->be->loop, q->vq.kick_fd, EPOLLIN, kick_cb, q);
	if (rc)
		return rc;
	q->kick_watched = true;
	return 0;
}

static void start_queue(struct vmio_backend_queue *q)
{
	struct vmio_backend *be = q->be;
	int rc = watch_kick(q);

	if (rc) {
		/* vmio_vq_set_broken also tells the VMM, on the error fd. */
		vmio_vq_set_broken(&q->vq, "cannot watch kick fd: errno %d",
				   -rc);
		return;
	}
	q->running = true;
	log_debug("vhost-user: queue %u started (size %u)", q->vq.index,
		  q->vq.size);
	be->ops->queue_start(be->dev, &q->vq, &be->mem);
}

void vmio_bq_sync(struct vmio_backend_queue *q)
{
	bool ready = vmio_vq_ready(&q->vq);

	if (ready && !q->running)
		start_queue(q);
	else if (!ready && q->running)
		stop_queue(q);
}

void vmio_bq_pause(struct vmio_backend_queue *q)
{
	if (q->running)
		stop_queue(q);
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

int vmio_bq_remap(struct vmio_backend_queue *q)
{
	struct vmio_vq *vq = &q->vq;

	vmio_vq_unmap(vq);
	if (!vq->addr_set || !vq->size || !q->be->mem.nregions)
		return 0;
	return vmio_vq_map(vq, &q->be->mem);
}

void vmio_bq_set_kick_fd(struct vmio_backend_queue *q, int fd)
{
	unwatch_kick(q);
	vmio_close_fd(&q->vq.kick_fd);
	/* A second reader of the same eventfd (a VMM can pass one to two
	 * queues) must not leave us blocked in read(). */
	if (fd >= 0)
		vmio_fd_set_nonblock(fd);
	q->vq.kick_fd = fd;
}

void vmio_bq_reset(struct vmio_backend_queue *q)
{
	struct vmio_vq *vq = &q->vq;
	unsigned index = vq->index;

	vmio_bq_pause(q);
	vmio_bq_set_kick_fd(q, -1);
	vmio_close_fd(&vq->call_fd);
	vmio_close_fd(&vq->err_fd);
	vmio_vq_release(vq);
	vmio_vq_init(vq, index);
}

void vmio_bq_release_all(struct vmio_backend *be)
{
	for (unsigned i = 0; i < be->ops->num_queues; i++) {
		vmio_bq_reset(&be->queues[i]);
		vmio_vq_release(&be->queues[i].vq);
	}
}
