/* Where a queue is in its life, seen from each side, and where the
 * backend is while its queues stop: three small state machines (their
 * states are types of backend_state.h) whose legal transitions are
 * written in one table (queue_state.c), through which every change goes. An illegal transition is a bug, never passed
 * over in silence: it is logged, and the queue's VMM is told on its error
 * fd (the home also breaks the queue), so that it resets the queue. */
#ifndef VMIO_VHOST_USER_QUEUE_STATE_H
#define VMIO_VHOST_USER_QUEUE_STATE_H

#include <stdbool.h>

#include "vhost-user/backend_state.h"

/* Whether the table allows each move (from == to: no move, always). For
 * the unit tests; the moves below check it themselves. */
bool vmio_bq_state_legal(enum vmio_bq_state from, enum vmio_bq_state to);
bool vmio_home_state_legal(enum vmio_home_state from, enum vmio_home_state to);
bool vmio_be_state_legal(enum vmio_be_state from, enum vmio_be_state to);

/* Move q (or be) to `to`, checked against the table. On the backend's
 * loop for the first and the last, on the queue's home for the second. */
void vmio_bq_move(struct vmio_backend_queue *q, enum vmio_bq_state to);
void vmio_home_move(struct vmio_backend_queue *q, enum vmio_home_state to);
void vmio_be_move(struct vmio_backend *be, enum vmio_be_state to);

#endif
