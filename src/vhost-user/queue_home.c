/* A queue at its home. With the home on the backend's loop (every device
 * without queue_loop) a command is a call. Otherwise it is the queue's
 * own vmio_defer posted to the home, and the answer the backend's
 * homes_answer posted back: each post takes the home's (or backend's)
 * post lock, which orders what one thread wrote before it against what
 * the other reads after. One command per queue is out at a time. */
#include "vhost-user/queue_home.h"

#include <errno.h>
#include <sys/epoll.h>
#include <unistd.h>

static bool is_local(const struct vmio_backend_queue *q)
{
	return q->home == q->be->loop || q->be->homes_gone;
}

/* ---- On the home ------------------------------------------------------- */

static void unwatch_kick(struct vmio_backend_queue *q)
{
	if (!q->kick_watched)
		return;
	vmio_loop_remove(q->home, q->vq.kick_fd);
	q->kick_watched = false;
}

static void run_stop(struct vmio_backend_queue *q, enum vmio_queue_stop how)
{
	struct vmio_backend *be = q->be;

	/* A queue only paused may hold chains: a stop that wants them back
	 * reaches the device again. */
	if (!q->home_running && how == VMIO_QUEUE_PAUSE)
		return;
	unwatch_kick(q);
	q->home_running = false;
	log_debug("vhost-user: queue %u %s", q->vq.index,
		  how == VMIO_QUEUE_PAUSE ? "paused" : "stopped");
	be->ops->queue_stop(be->dev, &q->vq, how);
}

/* The device found the ring malformed (or the kick fd failed): the queue
 * stops here and now, and the backend's loop learns of it. */
static void stop_broken(struct vmio_backend_queue *q)
{
	run_stop(q, VMIO_QUEUE_PAUSE);
	if (is_local(q)) {
		q->running = false;
		return;
	}
	atomic_store_explicit(&q->stopped_itself, true, memory_order_release);
	vmio_defer_post(&q->be->homes_answer);
}

static void kick_cb(void *opaque, int fd, uint32_t events)
{
	struct vmio_backend_queue *q = opaque;
	uint64_t count;

	/* An eventfd never hangs up; a kick fd that does is not one, and
	 * level-triggered epoll would report it forever. */
	if (events & (EPOLLHUP | EPOLLERR)) {
		vmio_vq_set_broken(&q->vq, "kick fd hung up or failed");
		stop_broken(q);
		return;
	}
	/* The fd is non-blocking: a kick someone else consumed is fine. */
	if (read(fd, &count, sizeof(count)) < 0 && errno != EAGAIN &&
	    errno != EINTR) {
		vmio_vq_set_broken(&q->vq, "kick fd read failed: errno %d",
				   errno);
		stop_broken(q);
		return;
	}
	if (!q->home_running)
		return;
	q->be->ops->queue_kick(q->be->dev, &q->vq);
	if (q->vq.broken)
		stop_broken(q);
}

static void run_start(struct vmio_backend_queue *q)
{
	struct vmio_backend *be = q->be;
	int rc = 0;

	if (q->vq.kick_fd >= 0) /* else NOFD: the device polls */
		rc = vmio_loop_add(q->home, q->vq.kick_fd, EPOLLIN, kick_cb, q);
	if (rc) {
		/* vmio_vq_set_broken also tells the VMM, on the error fd. */
		vmio_vq_set_broken(&q->vq, "cannot watch kick fd: errno %d",
				   -rc);
		stop_broken(q);
		return;
	}
	q->kick_watched = q->vq.kick_fd >= 0;
	q->home_running = true;
	log_debug("vhost-user: queue %u started (size %u)", q->vq.index,
		  q->vq.size);
	be->ops->queue_start(be->dev, &q->vq, &be->mem);
	if (q->vq.broken)
		stop_broken(q);
}

static void at_home_cb(void *opaque)
{
	struct vmio_backend_queue *q = opaque;

	if (q->cmd == VMIO_BQ_START)
		run_start(q);
	else
		run_stop(q, q->cmd_how);
	atomic_store_explicit(&q->cmd_done, true, memory_order_release);
	vmio_defer_post(&q->be->homes_answer);
}

/* ---- On the backend's loop --------------------------------------------- */

static void homes_answer_cb(void *opaque)
{
	struct vmio_backend *be = opaque;

	for (unsigned i = 0; i < be->ops->num_queues; i++) {
		struct vmio_backend_queue *q = &be->queues[i];

		if (atomic_exchange_explicit(&q->stopped_itself, false,
					     memory_order_acquire))
			q->running = false;
		if (q->cmd_out && atomic_load_explicit(&q->cmd_done,
						       memory_order_acquire)) {
			q->cmd_out = false;
			be->cmds_out--;
		}
	}
	if (!be->cmds_out && be->homes_idle)
		be->homes_idle(be);
}

void vmio_home_init(struct vmio_backend *be)
{
	vmio_defer_init(&be->homes_answer, be->loop, homes_answer_cb, be);
	for (unsigned i = 0; i < be->ops->num_queues; i++)
		be->queues[i].home = be->loop;
}

void vmio_home_choose(struct vmio_backend_queue *q)
{
	struct vmio_backend *be = q->be;
	struct vmio_loop *home = NULL;

	if (be->ops->queue_loop)
		home = be->ops->queue_loop(be->dev, q->vq.index);
	q->home = home ? home : be->loop;
	if (!is_local(q))
		vmio_defer_init(&q->at_home, q->home, at_home_cb, q);
}

static void send_cmd(struct vmio_backend_queue *q, enum vmio_bq_cmd cmd,
		     enum vmio_queue_stop how)
{
	if (is_local(q)) {
		if (cmd == VMIO_BQ_START)
			run_start(q);
		else
			run_stop(q, how);
		return;
	}
	q->cmd = cmd;
	q->cmd_how = how;
	q->cmd_out = true;
	q->be->cmds_out++;
	atomic_store_explicit(&q->cmd_done, false, memory_order_relaxed);
	vmio_defer_post(&q->at_home);
}

void vmio_home_start(struct vmio_backend_queue *q)
{
	q->running = true;
	q->holds = true;
	send_cmd(q, VMIO_BQ_START, VMIO_QUEUE_PAUSE);
}

void vmio_home_stop(struct vmio_backend_queue *q, enum vmio_queue_stop how)
{
	if (!q->running && !(q->holds && how != VMIO_QUEUE_PAUSE))
		return;
	q->running = false;
	if (how != VMIO_QUEUE_PAUSE)
		q->holds = false;
	send_cmd(q, VMIO_BQ_STOP, how);
}

void vmio_home_gone(struct vmio_backend *be)
{
	be->homes_gone = true;
	vmio_defer_cancel(&be->homes_answer);
	for (unsigned i = 0; i < be->ops->num_queues; i++) {
		struct vmio_backend_queue *q = &be->queues[i];

		/* A command never run leaves the home as it was. */
		if (q->cmd_out)
			vmio_defer_cancel(&q->at_home);
		q->cmd_out = false;
		q->running = q->home_running;
		atomic_store_explicit(&q->stopped_itself, false,
				      memory_order_relaxed);
	}
	be->cmds_out = 0;
}
