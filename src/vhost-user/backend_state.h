/* The backend core's state, shared by its files, from the bottom up:
 * queues.c serves the rings (starting and stopping them on the device,
 * watching kicks), session.c forgets a front end's setup, handlers.c
 * speaks the protocol (messages, negotiated state, memory table) and
 * backend.c owns the socket and the connection (channel.c reads and writes
 * its messages). Types only: each file declares its own functions.
 * A device may serve its queues on other threads (ops->queue_loop): then
 * queue_home.c runs what concerns a queue on the queue's home loop, and
 * queues.c, on the backend's loop, sends it there; nothing else calls
 * queue_start/queue_stop/queue_kick. */
#ifndef VMIO_VHOST_USER_BACKEND_STATE_H
#define VMIO_VHOST_USER_BACKEND_STATE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "event/loop.h"
#include "util/log.h"
#include "vhost-user/channel.h"
#include "vhost-user/device.h"
#include "vhost-user/kick_guard.h"

/* A queue's life and the backend's between messages are the states of
 * queue_state.h's table, which every change goes through.
 *
 * A queue as the backend's loop sees it: on the device or not, and the
 * command at its home (queue_home.c) not yet answered, if any. At most
 * one command is out per queue, and none is sent while any is out. */
enum vmio_bq_state {
	VMIO_BQ_IDLE,     /* off the device, which holds nothing of it */
	VMIO_BQ_STARTING, /* a start is at its home */
	VMIO_BQ_RUNNING,  /* on the device */
	VMIO_BQ_PAUSING,  /* a pause is at its home (or it broke there) */
	VMIO_BQ_PAUSED,   /* off the device since a pause: it may hold chains */
	VMIO_BQ_HALTING,  /* a stop that wants every chain back is at its home */
	VMIO_BQ_STATES
};

/* The same queue as its home sees it. */
enum vmio_home_state {
	VMIO_HOME_STOPPED,  /* off the device */
	VMIO_HOME_WATCHING, /* on it, its kick fd in the home loop */
	/* On it, its kicks let go past the idle budget (kick_guard.h): the
	 * look timer looks at the ring instead. */
	VMIO_HOME_LOOKING,
	VMIO_HOME_POLLED, /* on it without a kick fd (NOFD): the device polls */
	VMIO_HOME_STATES
};

/* The backend between messages. */
enum vmio_be_state {
	VMIO_BE_SERVING, /* reads the next message (if a front end is there) */
	VMIO_BE_WAITING, /* a message (be->waiting) waits for its queues */
	VMIO_BE_CLOSING, /* the front end is gone; its queues are stopping */
	/* Held for a hand-over (session_state.h): no message is read and no
	 * queue runs, until the session is resumed here or leaves with its
	 * record; a session restored from its record starts here. */
	VMIO_BE_HELD,
	VMIO_BE_STATES
};

/* What the backend's loop asks of a queue's home, one at a time. */
enum vmio_bq_cmd {
	VMIO_BQ_START,
	VMIO_BQ_STOP,
};

/* Ownership, with a home on another thread: the backend's loop touches
 * the vq only while the queue does not run there and no command is out;
 * the home touches it only between its start and its stop. Each command
 * and each answer is a vmio_defer_post, whose lock orders the two. */
struct vmio_backend_queue {
	struct vmio_vq vq; /* its transport: this queue */
	struct vmio_backend *be;
	struct vmio_loop *home; /* where the device serves it */
	/* From SET_VRING_KICK/CALL/ERR/ENABLE and GET_VRING_BASE, changed on
	 * the backend's loop while the queue is stopped; the fds -1 when
	 * absent. */
	int kick_fd, call_fd, err_fd;
	/* SET_VRING_ADDR as it came (flags and log address are kept only
	 * for a session record: vmio logs nothing). */
	struct vhost_user_vring_addr addr;
	bool started;  /* SET_VRING_KICK seen, not yet stopped */
	bool enabled;  /* SET_VRING_ENABLE (or implied) */
	/* The backend loop's: */
	enum vmio_bq_state state;
	enum vmio_bq_cmd cmd;
	enum vmio_queue_stop cmd_how;
	struct vmio_defer at_home; /* runs the command on the home */
	/* The home's: */
	enum vmio_home_state home_state;
	/* What its kicks may cost (kick_guard.h): the budget, the timer that
	 * looks at the ring while the kick fd is let go, and where the ring
	 * stood after the last kick served (vmio_vq_progress). */
	struct vmio_kick_guard guard;
	struct vmio_timer look;
	uint32_t progress;
	/* From the home to the backend's loop: what its answer says. */
	atomic_bool cmd_done;    /* the command ran */
	atomic_bool stopped_itself; /* it found the ring broken */
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
	bool accept_held;               /* by a hand-over */
	unsigned message_timeout_ms;
	struct vmio_kick_budget kick_budget; /* each queue's, at its start */

	void (*disconnect_cb)(void *opaque);
	void *disconnect_opaque;
	/* vmio_backend_set_session_watch: told once a message has settled
	 * (on the defer's turn), and when the session ends. */
	void (*watch_cb)(void *opaque, bool gone);
	void *watch_opaque;
	struct vmio_defer watch_defer;
	bool watch_due; /* a message since the last call */
	unsigned sessions;
	uint64_t ends[VHOST_USER_END_KINDS]; /* how the sessions ended */
	uint64_t errors; /* every be_err: what the VMMs got wrong */
	/* The VM's: current when the backend was made, current again for
	 * what it makes outside its callbacks, and its queues' unless the
	 * device names another (ops->queue_account). */
	struct vmio_cpu_account *account;

	/* Per-connection state, forgotten on disconnect and RESET_OWNER. */
	bool touched; /* something to reset */
	bool owner;   /* SET_OWNER seen */
	uint64_t acked_features;
	uint64_t acked_protocol_features;
	uint8_t status;
	int backend_req_fd;
	/* SET_LOG_BASE's dirty log, and SET_LOG_FD's eventfd (-1: none). */
	struct vmio_dirty_log log;
	int log_call_fd;
	struct vmio_mem mem;
	struct vmio_mem new_mem; /* a SET_MEM_TABLE being built */
	struct vmio_backend_queue *queues; /* ops->num_queues of them */

	/* Queues served on other threads (queue_home.c). */
	unsigned cmds_out;              /* commands not yet answered */
	struct vmio_defer homes_answer; /* a home answered: count them */
	/* Called on the backend's loop when the last command is answered. */
	void (*homes_idle)(struct vmio_backend *be);
	bool homes_gone; /* the home loops no longer run: serve queues here */
	/* Whether a message waits for its queues to stop, or a front end
	 * gone for them (queue_state.h). */
	enum vmio_be_state state;
	struct vhost_user_msg waiting; /* VMIO_BE_WAITING: its fds still in it */
	/* Held (session_state.h): called once when its queues have stopped
	 * on their homes, or the front end left meanwhile. */
	void (*held_cb)(void *opaque);
	void *held_opaque;

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
