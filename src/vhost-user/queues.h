/* Serving the rings: a queue runs on the device exactly while
 * vmio_bq_ready() holds. */
#ifndef VMIO_VHOST_USER_QUEUES_H
#define VMIO_VHOST_USER_QUEUES_H

#include "vhost-user/backend_state.h"

/* Resets every queue to its untouched state. Call once at creation. */
void vmio_bq_init_all(struct vmio_backend *be);
/* Pauses the queue on the device if it runs (so its configuration may
 * change); vmio_bq_sync restarts it if it is still ready afterwards. A
 * pause never halts: a queue stops for good only by vmio_bq_quiesce. */
void vmio_bq_pause(struct vmio_backend_queue *q);
/* Started, enabled, and its rings servable (vmio_vq_ready), and the
 * backend not held for a hand-over. */
bool vmio_bq_ready(const struct vmio_backend_queue *q);
/* Starts or stops the queue on the device to match vmio_bq_ready(). */
void vmio_bq_sync(struct vmio_backend_queue *q);
void vmio_bq_pause_all(struct vmio_backend *be);
void vmio_bq_sync_all(struct vmio_backend *be);
/* Stops queues [first, first + n) for a change (how: see
 * vmio_queue_stop; a queue that only paused gets a stop that is not a
 * pause too). Returns true when they have stopped, false while some are
 * stopping on their own threads (vmio_home_busy). */
bool vmio_bq_quiesce(struct vmio_backend *be, unsigned first, unsigned n,
		     enum vmio_queue_stop how);
/* Maps the rings against the current memory table if they are fully
 * described, else leaves them unmapped. Returns vmio_vq_map's result, or 0
 * when there was nothing to map yet. The queue must be paused. */
int vmio_bq_remap(struct vmio_backend_queue *q);
/* Where a stopped queue's ring stands, as GET_VRING_BASE tells it and
 * SET_VRING_BASE takes it: split, the next avail index; packed, the next
 * avail position and wrap (bits 0-15) and the next used (bits 16-31). */
uint32_t vmio_bq_base(const struct vmio_backend_queue *q);
/* Replaces the kick fd (-1: none) of a paused queue. */
void vmio_bq_set_kick_fd(struct vmio_backend_queue *q, int fd);
/* Stops the queue, closes its fds and forgets everything about it. */
void vmio_bq_reset(struct vmio_backend_queue *q);
/* Frees what the queues hold at backend teardown. */
void vmio_bq_release_all(struct vmio_backend *be);

#endif
