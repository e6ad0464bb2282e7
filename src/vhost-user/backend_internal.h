/* Shared between the parts of the backend core: backend.c owns the socket
 * and the connection, handlers.c speaks the protocol (messages, negotiated
 * state, memory table) and queues.c serves the rings (starting and
 * stopping them on the device, watching kicks).
 * The split is the seam along which a device's queues can move to a worker
 * thread: only queues.c calls queue_start/queue_stop/queue_kick. */
#ifndef VMIO_VHOST_USER_BACKEND_INTERNAL_H
#define VMIO_VHOST_USER_BACKEND_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "util/log.h"
#include "vhost-user/backend.h"

struct vmio_backend_queue {
	struct vmio_vq vq;
	struct vmio_backend *be;
	bool running;      /* queue_start called, queue_stop not yet */
	bool kick_watched; /* kick_fd is in the loop */
};

struct vmio_backend {
	struct vmio_loop *loop;
	const struct vmio_device_ops *ops;
	void *dev;

	int listen_fd;       /* -1 unless vmio_backend_listen */
	char *socket_path;   /* set only if we created the file */
	uint64_t socket_dev, socket_ino; /* to unlink only our own file */
	int conn_fd;         /* the front end, -1 when none */

	void (*disconnect_cb)(void *opaque);
	void *disconnect_opaque;
	unsigned sessions;

	/* Per-connection state, forgotten on disconnect and RESET_OWNER. */
	bool touched; /* something to reset */
	uint64_t acked_features;
	uint64_t acked_protocol_features;
	uint8_t status;
	int backend_req_fd;
	struct vmio_mem mem;
	struct vmio_mem new_mem; /* a SET_MEM_TABLE being built */
	struct vmio_backend_queue *queues; /* ops->num_queues of them */

	struct vmio_ratelimit rl;
};

/* Logs a problem the VMM caused; rate-limited since it can cause many. */
#define be_err(be, fmt, ...)                                                   \
	log_ratelimited(&(be)->rl, VMIO_LOG_ERR, "vhost-user: " fmt,           \
			##__VA_ARGS__)

/* backend.c: forgets everything the front end set up and resets the
 * device (disconnect, RESET_OWNER). */
void vmio_backend_reset_session(struct vmio_backend *be);

/* queues.c */

/* Resets every queue to its untouched state. Call once at creation. */
void vmio_bq_init_all(struct vmio_backend *be);
/* Stops the queue on the device if it runs (so its configuration may
 * change); vmio_bq_sync restarts it if it is still ready afterwards. */
void vmio_bq_pause(struct vmio_backend_queue *q);
/* Starts or stops the queue on the device to match vmio_vq_ready(). */
void vmio_bq_sync(struct vmio_backend_queue *q);
void vmio_bq_pause_all(struct vmio_backend *be);
void vmio_bq_sync_all(struct vmio_backend *be);
/* Maps the rings against the current memory table if they are fully
 * described, else leaves them unmapped. Returns vmio_vq_map's result, or 0
 * when there was nothing to map yet. The queue must be paused. */
int vmio_bq_remap(struct vmio_backend_queue *q);
/* Replaces the kick fd (-1: none) of a paused queue. */
void vmio_bq_set_kick_fd(struct vmio_backend_queue *q, int fd);
/* Stops the queue, closes its fds and forgets everything about it. */
void vmio_bq_reset(struct vmio_backend_queue *q);
/* Frees what the queues hold at backend teardown. */
void vmio_bq_release_all(struct vmio_backend *be);

#endif
