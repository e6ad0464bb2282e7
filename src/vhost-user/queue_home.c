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

#include "vhost-user/queue_state.h"

static bool is_local(const struct vmio_backend_queue *q)
{
	return q->home == q->be->loop || q->be->homes_gone;
}

/* ---- On the home ------------------------------------------------------- */

static bool on_device(const struct vmio_backend_queue *q)
{
	return q->home_state != VMIO_HOME_STOPPED;
}

static void run_stop(struct vmio_backend_queue *q, enum vmio_queue_stop how)
{
	struct vmio_backend *be = q->be;

	/* A queue only paused may hold chains: a stop that wants them back
	 * reaches the device again. */
	if (!on_device(q) && how == VMIO_QUEUE_PAUSE)
		return;
	if (q->home_state == VMIO_HOME_WATCHING)
		vmio_loop_remove(q->home, q->kick_fd);
	vmio_timer_fini(&q->look);
	vmio_kick_guard_stop(&q->guard, vmio_loop_now_ns(q->home));
	vmio_home_move(q, VMIO_HOME_STOPPED);
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
		if (q->state == VMIO_BQ_RUNNING)
			vmio_bq_move(q, VMIO_BQ_PAUSED);
		return;
	}
	atomic_store_explicit(&q->stopped_itself, true, memory_order_release);
	vmio_defer_post(&q->be->homes_answer);
}

/* Reads the kick fd, which is non-blocking. Returns 1 if it had been
 * written, 0 if not (a kick someone else consumed is fine), -1 after
 * breaking the queue. */
static int take_kick(struct vmio_backend_queue *q, int fd)
{
	uint64_t count;

	if (read(fd, &count, sizeof(count)) == sizeof(count))
		return 1;
	if (errno == EAGAIN || errno == EINTR)
		return 0;
	vmio_vq_set_broken(&q->vq, "kick fd read failed: errno %d", errno);
	stop_broken(q);
	return -1;
}

static void kick_cb(void *opaque, int fd, uint32_t events);

/* The kick fd goes (back) into the home loop. Returns false after
 * breaking the queue. */
static bool watch_kick(struct vmio_backend_queue *q)
{
	int rc = vmio_loop_add(q->home, q->kick_fd, EPOLLIN, kick_cb, q);

	if (rc) {
		/* vmio_vq_set_broken also tells the VMM, on the error fd
		 * (queues.c's transport). */
		vmio_vq_set_broken(&q->vq, "cannot watch kick fd: errno %d",
				   -rc);
		stop_broken(q);
		return false;
	}
	vmio_home_move(q, VMIO_HOME_WATCHING);
	return true;
}

/* The device serves a kick, or a look that found work; the guard learns
 * whether the ring had moved since the last one (a look that found work
 * is no kick of the guard's). */
static void serve_kick(struct vmio_backend_queue *q, bool looked)
{
	uint64_t now = vmio_loop_now_ns(q->home);
	bool work = vmio_vq_progress(&q->vq) != q->progress;

	q->be->ops->queue_kick(q->be->dev, &q->vq);
	if (q->vq.broken) {
		stop_broken(q);
		return;
	}
	q->progress = vmio_vq_progress(&q->vq);
	if (looked || !vmio_kick_guard_kick(&q->guard, now, work))
		return;
	/* Past the idle budget: the storm goes unheard, the ring is looked
	 * at on the timer instead. */
	vmio_loop_remove(q->home, q->kick_fd);
	vmio_home_move(q, VMIO_HOME_LOOKING);
	vmio_timer_arm_ns(&q->look, vmio_kick_guard_delay(&q->guard));
}

/* While the kick fd is let go: was there a kick, has the ring moved. A
 * kick heard here is served even when the ring stands where it stood
 * after the last kick served: that mark may include a chain the device
 * did not take then (it was waiting on its host, or at its budget), and
 * the device may act only when kicked. So no kick is ever only counted;
 * what muting saves is the wake-ups, one look instead of a storm. */
static void look_cb(void *opaque)
{
	struct vmio_backend_queue *q = opaque;
	bool work, back;
	int kicked;

	if (q->home_state != VMIO_HOME_LOOKING)
		return;
	kicked = take_kick(q, q->kick_fd);
	if (kicked < 0)
		return;
	work = vmio_vq_progress(&q->vq) != q->progress;
	back = vmio_kick_guard_look(&q->guard, vmio_loop_now_ns(q->home), work,
				    kicked);
	if (back && !watch_kick(q))
		return;
	if (work || kicked) {
		serve_kick(q, true);
		if (!on_device(q) || q->vq.broken)
			return;
	}
	if (!back)
		vmio_timer_arm_ns(&q->look, vmio_kick_guard_delay(&q->guard));
}

static void kick_cb(void *opaque, int fd, uint32_t events)
{
	struct vmio_backend_queue *q = opaque;

	/* An eventfd never hangs up; a kick fd that does is not one, and
	 * level-triggered epoll would report it forever. */
	if (events & (EPOLLHUP | EPOLLERR)) {
		vmio_vq_set_broken(&q->vq, "kick fd hung up or failed");
		stop_broken(q);
		return;
	}
	if (take_kick(q, fd) < 0)
		return;
	if (q->home_state != VMIO_HOME_WATCHING)
		return;
	serve_kick(q, false);
}

/* What the queue's start makes (its kick watch, its look timer, the
 * device's own watches) is charged to the queue's account. */
static struct vmio_cpu_account *queue_account(struct vmio_backend_queue *q)
{
	struct vmio_backend *be = q->be;
	struct vmio_cpu_account *a = NULL;

	if (be->ops->queue_account)
		a = be->ops->queue_account(be->dev, q->vq.index);
	return a ? a : be->account;
}

static void run_start_here(struct vmio_backend_queue *q)
{
	struct vmio_backend *be = q->be;

	if (q->kick_fd >= 0) { /* else NOFD: the device polls */
		int rc = vmio_timer_init(&q->look, q->home, look_cb, q);

		if (rc) {
			vmio_vq_set_broken(&q->vq,
					   "cannot make the kick timer: errno %d",
					   -rc);
			stop_broken(q);
			return;
		}
		if (!watch_kick(q)) {
			/* Not on the device yet: run_stop left it alone. */
			vmio_timer_fini(&q->look);
			return;
		}
	} else {
		vmio_home_move(q, VMIO_HOME_POLLED);
	}
	vmio_kick_guard_start(&q->guard, &be->kick_budget,
			      vmio_loop_now_ns(q->home));
	log_debug("vhost-user: queue %u started (size %u)", q->vq.index,
		  q->vq.size);
	be->ops->queue_start(be->dev, &q->vq, &be->mem);
	if (q->vq.broken)
		stop_broken(q);
	else
		q->progress = vmio_vq_progress(&q->vq);
}

static void run_start(struct vmio_backend_queue *q)
{
	struct vmio_cpu_account *outer =
		vmio_cpu_account_enter(queue_account(q));

	run_start_here(q);
	vmio_cpu_account_leave(outer);
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

/* What the queue's home answered: the command out ran (the state it
 * was heading for is reached), and whether the queue stopped itself. */
static void take_answer(struct vmio_backend_queue *q)
{
	struct vmio_backend *be = q->be;

	if (atomic_exchange_explicit(&q->stopped_itself, false,
				     memory_order_acquire)) {
		if (q->state == VMIO_BQ_RUNNING)
			vmio_bq_move(q, VMIO_BQ_PAUSED);
		else if (q->state == VMIO_BQ_STARTING)
			vmio_bq_move(q, VMIO_BQ_PAUSING);
	}
	if (!atomic_load_explicit(&q->cmd_done, memory_order_acquire))
		return;
	switch (q->state) {
	case VMIO_BQ_STARTING:
		vmio_bq_move(q, VMIO_BQ_RUNNING);
		break;
	case VMIO_BQ_PAUSING:
		vmio_bq_move(q, VMIO_BQ_PAUSED);
		break;
	case VMIO_BQ_HALTING:
		vmio_bq_move(q, VMIO_BQ_IDLE);
		break;
	default:
		return; /* no command out */
	}
	be->cmds_out--;
}

static void homes_answer_cb(void *opaque)
{
	struct vmio_backend *be = opaque;

	for (unsigned i = 0; i < be->ops->num_queues; i++)
		take_answer(&be->queues[i]);
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

/* Moves the queue to `here` and runs the command at once when its home is
 * the backend's loop; else to `sent` with the command posted home. */
static void send_cmd(struct vmio_backend_queue *q, enum vmio_bq_cmd cmd,
		     enum vmio_queue_stop how, enum vmio_bq_state here,
		     enum vmio_bq_state sent)
{
	if (is_local(q)) {
		vmio_bq_move(q, here);
		if (cmd == VMIO_BQ_START)
			run_start(q);
		else
			run_stop(q, how);
		return;
	}
	vmio_bq_move(q, sent);
	q->cmd = cmd;
	q->cmd_how = how;
	q->be->cmds_out++;
	atomic_store_explicit(&q->cmd_done, false, memory_order_relaxed);
	vmio_defer_post(&q->at_home);
}

void vmio_home_start(struct vmio_backend_queue *q)
{
	send_cmd(q, VMIO_BQ_START, VMIO_QUEUE_PAUSE, VMIO_BQ_RUNNING,
		 VMIO_BQ_STARTING);
}

void vmio_home_stop(struct vmio_backend_queue *q, enum vmio_queue_stop how)
{
	/* A pause stops a running queue; a stop that wants every chain
	 * back reaches a paused one too. */
	bool paused = q->state == VMIO_BQ_PAUSED;

	if (q->state == VMIO_BQ_STARTING || q->state == VMIO_BQ_PAUSING ||
	    q->state == VMIO_BQ_HALTING) {
		log_err("vhost-user: bug: queue %u stopped with a command out",
			q->vq.index);
		return;
	}
	if (q->state != VMIO_BQ_RUNNING && !(paused && how != VMIO_QUEUE_PAUSE))
		return;
	if (how == VMIO_QUEUE_PAUSE)
		send_cmd(q, VMIO_BQ_STOP, how, VMIO_BQ_PAUSED, VMIO_BQ_PAUSING);
	else
		send_cmd(q, VMIO_BQ_STOP, how, VMIO_BQ_IDLE, VMIO_BQ_HALTING);
}

/* A queue's state once its home is gone, from what the home did (its
 * thread has ended): a command never run left the home as it was. Not a
 * transition of the table: the loop takes the home's word. */
static enum vmio_bq_state settled(const struct vmio_backend_queue *q)
{
	if (on_device(q))
		return VMIO_BQ_RUNNING;
	if (q->state == VMIO_BQ_IDLE || q->state == VMIO_BQ_HALTING)
		return VMIO_BQ_IDLE;
	return VMIO_BQ_PAUSED;
}

void vmio_home_gone(struct vmio_backend *be)
{
	be->homes_gone = true;
	vmio_defer_cancel(&be->homes_answer);
	for (unsigned i = 0; i < be->ops->num_queues; i++) {
		struct vmio_backend_queue *q = &be->queues[i];

		if (q->state == VMIO_BQ_STARTING ||
		    q->state == VMIO_BQ_PAUSING || q->state == VMIO_BQ_HALTING)
			vmio_defer_cancel(&q->at_home);
		q->state = settled(q);
		atomic_store_explicit(&q->stopped_itself, false,
				      memory_order_relaxed);
	}
	be->cmds_out = 0;
}
