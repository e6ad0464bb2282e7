/* The one table of a queue's legal transitions, and the moves that check
 * it. */
#include "vhost-user/queue_state.h"

#include <stddef.h>
#include <stdint.h>

#include "util/log.h"
#include "vhost-user/backend_state.h"

enum machine { M_QUEUE, M_HOME, M_BACKEND };

struct transition {
	uint8_t machine, from, to;
	const char *on; /* what makes it */
};

static const struct transition table[] = {
	/* The backend's loop, per queue (queues.c, queue_home.c). A home
	 * on the backend's loop answers at once: no STARTING, PAUSING or
	 * HALTING there. */
	{ M_QUEUE, VMIO_BQ_IDLE, VMIO_BQ_RUNNING, "started here" },
	{ M_QUEUE, VMIO_BQ_IDLE, VMIO_BQ_STARTING, "start sent home" },
	{ M_QUEUE, VMIO_BQ_PAUSED, VMIO_BQ_RUNNING, "restarted here" },
	{ M_QUEUE, VMIO_BQ_PAUSED, VMIO_BQ_STARTING, "restart sent home" },
	{ M_QUEUE, VMIO_BQ_STARTING, VMIO_BQ_RUNNING, "its home answered" },
	{ M_QUEUE, VMIO_BQ_STARTING, VMIO_BQ_PAUSING, "it broke at its start" },
	{ M_QUEUE, VMIO_BQ_RUNNING, VMIO_BQ_PAUSED, "paused here, or it broke" },
	{ M_QUEUE, VMIO_BQ_RUNNING, VMIO_BQ_PAUSING, "pause sent home" },
	{ M_QUEUE, VMIO_BQ_RUNNING, VMIO_BQ_IDLE, "halted here" },
	{ M_QUEUE, VMIO_BQ_RUNNING, VMIO_BQ_HALTING, "halt sent home" },
	/* Also a queue forgotten after the device's reset, which dropped
	 * what it held. */
	{ M_QUEUE, VMIO_BQ_PAUSED, VMIO_BQ_IDLE, "halted here" },
	{ M_QUEUE, VMIO_BQ_PAUSED, VMIO_BQ_HALTING, "halt sent home" },
	{ M_QUEUE, VMIO_BQ_PAUSING, VMIO_BQ_PAUSED, "its home answered" },
	{ M_QUEUE, VMIO_BQ_HALTING, VMIO_BQ_IDLE, "its home answered" },
	/* The queue's home (queue_home.c). */
	{ M_HOME, VMIO_HOME_STOPPED, VMIO_HOME_WATCHING, "started" },
	{ M_HOME, VMIO_HOME_STOPPED, VMIO_HOME_POLLED, "started without kicks" },
	{ M_HOME, VMIO_HOME_WATCHING, VMIO_HOME_LOOKING, "past its idle budget" },
	{ M_HOME, VMIO_HOME_LOOKING, VMIO_HOME_WATCHING, "kicks heard again" },
	{ M_HOME, VMIO_HOME_WATCHING, VMIO_HOME_STOPPED, "stopped" },
	{ M_HOME, VMIO_HOME_LOOKING, VMIO_HOME_STOPPED, "stopped" },
	{ M_HOME, VMIO_HOME_POLLED, VMIO_HOME_STOPPED, "stopped" },
	/* The backend (backend.c). */
	{ M_BACKEND, VMIO_BE_SERVING, VMIO_BE_WAITING, "a message waits" },
	{ M_BACKEND, VMIO_BE_WAITING, VMIO_BE_SERVING, "it is handed in again" },
	{ M_BACKEND, VMIO_BE_SERVING, VMIO_BE_CLOSING, "the front end left" },
	{ M_BACKEND, VMIO_BE_WAITING, VMIO_BE_CLOSING, "the front end left" },
	{ M_BACKEND, VMIO_BE_CLOSING, VMIO_BE_SERVING, "its queues stopped" },
	/* A hand-over (session_state.c). */
	{ M_BACKEND, VMIO_BE_SERVING, VMIO_BE_HELD,
	  "held for a hand-over, or restored from a record" },
	{ M_BACKEND, VMIO_BE_HELD, VMIO_BE_SERVING,
	  "resumed, or its session handed over" },
	{ M_BACKEND, VMIO_BE_HELD, VMIO_BE_CLOSING, "the front end left" },
};

static const char *const names[][VMIO_BQ_STATES] = {
	[M_QUEUE] = { "idle", "starting", "running", "pausing", "paused",
		      "halting" },
	[M_HOME] = { "stopped", "watching", "looking", "polled" },
	[M_BACKEND] = { "serving", "waiting", "closing", "held" },
};

static bool legal(enum machine m, unsigned from, unsigned to)
{
	if (from == to)
		return true;
	for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++)
		if (table[i].machine == m && table[i].from == from &&
		    table[i].to == to)
			return true;
	return false;
}

bool vmio_bq_state_legal(enum vmio_bq_state from, enum vmio_bq_state to)
{
	return legal(M_QUEUE, from, to);
}

bool vmio_home_state_legal(enum vmio_home_state from, enum vmio_home_state to)
{
	return legal(M_HOME, from, to);
}

bool vmio_be_state_legal(enum vmio_be_state from, enum vmio_be_state to)
{
	return legal(M_BACKEND, from, to);
}

/* A bug of ours, said out loud. The caller then has the queue reset:
 * the move is made all the same, so that the bookkeeping that counts on
 * it (commands out) stays whole. */
static void illegal(int index, enum machine m, unsigned from, unsigned to)
{
	static const char *const side[] = { "backend loop's", "home's",
					    "backend's" };

	log_err("vhost-user: bug: the %s state of queue %d moved from %s to "
		"%s, which no transition allows",
		side[m], index, names[m][from], names[m][to]);
}

/* On the backend's loop the vq may be the home's: the VMM is only told,
 * on the error fd (the loop's to write), and resets the queue. */
void vmio_bq_move(struct vmio_backend_queue *q, enum vmio_bq_state to)
{
	if (!legal(M_QUEUE, q->state, to)) {
		illegal((int)q->vq.index, M_QUEUE, q->state, to);
		vmio_vq_signal(q->err_fd);
	}
	q->state = to;
}

/* The home owns the vq: the queue breaks (logged, its VMM told), so it is
 * not served until the VMM resets it. */
void vmio_home_move(struct vmio_backend_queue *q, enum vmio_home_state to)
{
	if (!legal(M_HOME, q->home_state, to)) {
		illegal((int)q->vq.index, M_HOME, q->home_state, to);
		vmio_vq_set_broken(&q->vq, "its state went wrong");
	}
	q->home_state = to;
}

/* Nothing to reset but the session, which the VMM does not know went
 * wrong: logged only. */
void vmio_be_move(struct vmio_backend *be, enum vmio_be_state to)
{
	if (!legal(M_BACKEND, be->state, to))
		illegal(-1, M_BACKEND, be->state, to);
	be->state = to;
}
