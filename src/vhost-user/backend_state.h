/* The backend core's state, shared by its files, from the bottom up:
 * queues.c serves the rings (starting and stopping them on the device,
 * watching kicks), session.c forgets a front end's setup, handlers.c
 * speaks the protocol (messages, negotiated state, memory table) and
 * backend.c owns the socket and the connection (channel.c reads and writes
 * its messages). Types only: each file declares its own functions.
 * The split is the seam along which a device's queues can move to a worker
 * thread: only queues.c calls queue_start/queue_stop/queue_kick. */
#ifndef VMIO_VHOST_USER_BACKEND_STATE_H
#define VMIO_VHOST_USER_BACKEND_STATE_H

#include <stdbool.h>
#include <stdint.h>

#include "event/loop.h"
#include "util/log.h"
#include "vhost-user/channel.h"
#include "vhost-user/device.h"

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
	struct vhost_user_channel chan; /* the front end, while chan.open */
	uint64_t last_session_ns;       /* when the last one started */
	struct vmio_timer relisten;     /* the listener back after the gap */
	unsigned message_timeout_ms;

	void (*disconnect_cb)(void *opaque);
	void *disconnect_opaque;
	unsigned sessions;
	uint64_t errors; /* every be_err: what the VMMs got wrong */

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
	/* Connects and disconnects: a VMM that reconnects in a loop must not
	 * flood the log either. */
	struct vmio_ratelimit rl_sessions;
};

/* Logs a problem the VMM caused; rate-limited since it can cause many. */
#define be_err(be, fmt, ...)                                                   \
	do {                                                                   \
		(be)->errors++;                                                \
		log_ratelimited(&(be)->rl, VMIO_LOG_ERR, "vhost-user: " fmt,   \
				##__VA_ARGS__);                                \
	} while (0)

#endif
