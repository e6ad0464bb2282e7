/* What concerns a queue on the loop that serves it (its home): the kick
 * watch and the device's queue callbacks. queues.c decides, on the
 * backend's loop, when a queue starts or stops; this file carries it
 * out, directly when the home is the backend's loop, else by a command
 * posted to the home and answered by a post back. */
#ifndef VMIO_VHOST_USER_QUEUE_HOME_H
#define VMIO_VHOST_USER_QUEUE_HOME_H

#include "vhost-user/backend_state.h"

/* Sets up the backend's side of the commands. Call once at creation. */
void vmio_home_init(struct vmio_backend *be);
/* Picks the queue's home for a start (the queue is stopped, nothing
 * out). */
void vmio_home_choose(struct vmio_backend_queue *q);
/* Starts or stops the queue at its home; the answer may come later
 * (vmio_home_busy). */
void vmio_home_start(struct vmio_backend_queue *q);
void vmio_home_stop(struct vmio_backend_queue *q, enum vmio_queue_stop how);
/* Whether a command is out: the backend's loop then touches no queue's
 * state and reads no message. */
static inline bool vmio_home_busy(const struct vmio_backend *be)
{
	return be->cmds_out > 0;
}
/* The homes no longer run (their threads have ended): commands still out
 * are dropped and from now on everything runs here. */
void vmio_home_gone(struct vmio_backend *be);

#endif
