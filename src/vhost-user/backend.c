/* The backend core's outer half: the socket, one front end at a time and
 * the backend's lifetime. A connection's bytes are channel.c's, its
 * messages handlers.c's, the rings queues.c's. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/fd.h"
#include "util/json.h"
#include "util/unix_socket.h"
#include "vhost-user/backend.h"
#include "vhost-user/handlers.h"
#include "vhost-user/queue_home.h"
#include "vhost-user/queue_state.h"
#include "vhost-user/queues.h"
#include "vhost-user/session.h"

/* ---- Connections ------------------------------------------------------- */

/* While a front end is served the listener is not watched: a VMM that
 * reconnects at once waits in the kernel's backlog, and is served as soon
 * as the old connection is gone, whatever order the two events arrive in. */
static void watch_listener(struct vmio_backend *be, bool on)
{
	if (be->listen_fd >= 0)
		vmio_loop_modify(be->loop, be->listen_fd,
				 on && !be->accept_held ? EPOLLIN : 0);
}

static void relisten_cb(void *opaque)
{
	watch_listener(opaque, true);
}

/* Sessions of one device start at least VMIO_BACKEND_SESSION_GAP_NS
 * apart: a VMM that connects and hangs up in a loop costs the loop at most
 * a hundred sessions a second, and waits in the kernel's backlog for the
 * rest. No VMM reconnects faster than that for a good reason. */
static void listen_again(struct vmio_backend *be)
{
	uint64_t next = be->last_session_ns + VMIO_BACKEND_SESSION_GAP_NS;
	uint64_t now = vmio_loop_now_ns(be->loop);

	if (be->listen_fd < 0)
		return;
	if (now >= next)
		watch_listener(be, true);
	else
		vmio_timer_arm_ns(&be->relisten, next - now);
}

/* Handles msg. A message that waits for its queues is kept here (its
 * fds in it); one handled while queues are still stopping or starting on
 * their threads holds the next one back until they answer. */
static enum vhost_user_result on_message(void *opaque,
					 struct vhost_user_msg *msg,
					 struct vhost_user_msg *reply)
{
	struct vmio_backend *be = opaque;
	enum vhost_user_result result =
		vmio_backend_handle_msg(be, msg, reply);

	if (result == VHOST_USER_WAIT) {
		be->waiting = *msg;
		vmio_be_move(be, VMIO_BE_WAITING);
	} else if (vmio_home_busy(be)) {
		vhost_user_channel_pause(&be->chan);
	}
	if (be->watch_cb) {
		be->watch_due = true;
		vmio_defer_schedule(&be->watch_defer);
	}
	return result;
}

/* The session watch's turn: only once the message has settled (no queue
 * command pending, no message waiting for one); homes_idle asks again. */
static void watch_turn(void *opaque)
{
	struct vmio_backend *be = opaque;

	if (!be->watch_due || !be->watch_cb || !be->chan.open ||
	    be->state != VMIO_BE_SERVING || vmio_home_busy(be))
		return;
	be->watch_due = false;
	be->watch_cb(be->watch_opaque, false);
}

void vmio_backend_set_session_watch(struct vmio_backend *be,
				    void (*cb)(void *opaque, bool gone),
				    void *opaque)
{
	be->watch_cb = cb;
	be->watch_opaque = opaque;
	be->watch_due = cb && be->chan.open;
	if (be->watch_due)
		vmio_defer_schedule(&be->watch_defer);
}

/* A hold (session_state.h) is answered once: its queues have stopped, or
 * the front end left and there is no session to save. */
static void answer_hold(struct vmio_backend *be)
{
	void (*cb)(void *opaque) = be->held_cb;

	be->held_cb = NULL;
	if (cb)
		cb(be->held_opaque);
}

/* The front end is gone and every queue has stopped: the device goes back
 * to its state before this front end. */
static void finish_session(struct vmio_backend *be)
{
	vmio_be_move(be, VMIO_BE_SERVING);
	vmio_session_reset(be);
	log_ratelimited(&be->rl_sessions, VMIO_LOG_INFO,
			"vhost-user: front end disconnected; device %s reset",
			be->ops->name);
	listen_again(be);
	answer_hold(be);
	be->watch_due = false;
	if (be->watch_cb)
		be->watch_cb(be->watch_opaque, true);
	/* Last: the callback may free the backend. */
	if (be->disconnect_cb)
		be->disconnect_cb(be->disconnect_opaque);
}

/* Stops every queue for good, then finishes the session; with queues on
 * other threads that is once they answer (homes_idle). */
static void end_session(struct vmio_backend *be)
{
	if (!vmio_home_busy(be) &&
	    vmio_bq_quiesce(be, 0, be->ops->num_queues, VMIO_QUEUE_HALT))
		finish_session(be);
}

/* The message waiting for its queues is dropped with its fds. */
static void drop_waiting(struct vmio_backend *be)
{
	if (be->state == VMIO_BE_WAITING)
		vhost_user_msg_close_fds(&be->waiting);
}

static void on_closed(void *opaque, enum vhost_user_end end, const char *why)
{
	struct vmio_backend *be = opaque;

	be->ends[end]++;
	if (why)
		be_err(be, "%s; device %s reset", why, be->ops->name);
	drop_waiting(be);
	vmio_be_move(be, VMIO_BE_CLOSING);
	end_session(be);
}

/* The last command to a queue's home was answered. */
static void homes_idle(struct vmio_backend *be)
{
	if (be->state == VMIO_BE_CLOSING) {
		end_session(be);
		return;
	}
	if (be->state == VMIO_BE_HELD) {
		answer_hold(be);
		return;
	}
	if (be->state == VMIO_BE_WAITING) {
		struct vhost_user_msg msg = be->waiting, reply;

		vmio_be_move(be, VMIO_BE_SERVING);
		if (!vhost_user_channel_conclude(&be->chan, &msg,
						 on_message(be, &msg, &reply),
						 &reply))
			return;
	}
	if (!vmio_home_busy(be) && be->state == VMIO_BE_SERVING &&
	    be->chan.open) {
		vhost_user_channel_resume(&be->chan);
		if (be->watch_due)
			vmio_defer_schedule(&be->watch_defer);
	}
}

static const struct vhost_user_channel_ops channel_ops = {
	.message = on_message,
	.closed = on_closed,
};

/* taken: a front end a predecessor served (session_state.c), not a new
 * one: its session goes on. */
static int start_connection(struct vmio_backend *be, int fd, bool taken)
{
	struct vmio_cpu_account *outer = vmio_cpu_account_enter(be->account);
	int rc = vhost_user_channel_open(&be->chan, be->loop, fd,
					 be->message_timeout_ms, &channel_ops,
					 be);

	vmio_cpu_account_leave(outer);
	if (rc)
		return rc;
	be->touched = true;
	be->sessions++;
	be->last_session_ns = vmio_loop_now_ns(be->loop);
	watch_listener(be, false);
	if (taken)
		log_info("vhost-user: front end taken over (device %s)",
			 be->ops->name);
	else
		log_ratelimited(&be->rl_sessions, VMIO_LOG_INFO,
				"vhost-user: front end connected (session %u, device %s)",
				be->sessions, be->ops->name);
	return 0;
}

static void accept_cb(void *opaque, int fd, uint32_t events)
{
	struct vmio_backend *be = opaque;
	int conn = accept4(fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

	if (conn < 0) {
		if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
			be_err(be, "accept on %s failed: %s", be->socket_path,
			       strerror(errno));
		return;
	}
	int rc = start_connection(be, conn, false);
	if (rc) {
		log_err("vhost-user: cannot serve the new connection: %s",
			strerror(-rc));
		close(conn);
	}
}

static int serve_fd(struct vmio_backend *be, int fd, bool taken)
{
	if (fd < 0)
		return -EBADF;
	if (be->chan.open)
		return -EBUSY;
	/* The channel makes it non-blocking. */
	if (fcntl(fd, F_SETFD, FD_CLOEXEC) < 0) {
		int err = errno;
		log_err("vhost-user: --fd %d is not usable: %s", fd,
			strerror(err));
		return -err;
	}
	return start_connection(be, fd, taken);
}

int vmio_backend_serve_fd(struct vmio_backend *be, int fd)
{
	return serve_fd(be, fd, false);
}

int vmio_backend_serve_taken_fd(struct vmio_backend *be, int fd)
{
	return serve_fd(be, fd, true);
}

/* Accepts front ends on fd, a listening socket, from now on. */
static int adopt_listener(struct vmio_backend *be, int fd)
{
	struct vmio_cpu_account *outer = vmio_cpu_account_enter(be->account);
	int rc = vmio_timer_init(&be->relisten, be->loop, relisten_cb, be);

	if (!rc)
		rc = vmio_loop_add(be->loop, fd, EPOLLIN, accept_cb, be);
	vmio_cpu_account_leave(outer);
	if (rc) {
		vmio_timer_fini(&be->relisten); /* a no-op if never made */
		return rc;
	}
	be->listen_fd = fd;
	return 0;
}

int vmio_backend_listen_fd(struct vmio_backend *be, int fd)
{
	int rc;

	if (be->listen_fd >= 0 || be->chan.open)
		return -EBUSY;
	rc = vmio_fd_set_nonblock(fd);
	if (!rc)
		rc = adopt_listener(be, fd);
	if (!rc)
		log_info("vhost-user: device %s accepting on inherited "
			 "socket %d",
			 be->ops->name, fd);
	return rc;
}

int vmio_backend_listen(struct vmio_backend *be, const char *path)
{
	struct stat st;
	char *copy;
	int fd, rc;

	if (!path)
		return -EINVAL;
	if (be->listen_fd >= 0 || be->chan.open)
		return -EBUSY;
	copy = strdup(path);
	if (!copy)
		return -ENOMEM;
	fd = vmio_unix_listen(path, 8, "vhost-user", &st);
	if (fd < 0) {
		free(copy);
		return fd;
	}
	rc = adopt_listener(be, fd);
	if (rc) {
		unlink(path);
		close(fd);
		free(copy);
		return rc;
	}
	be->socket_path = copy;
	be->socket_dev = st.st_dev;
	be->socket_ino = st.st_ino;
	log_info("vhost-user: device %s listening on %s", be->ops->name, path);
	return 0;
}

/* ---- The listener at a hand-over --------------------------------------- */

void vmio_backend_hold_accept(struct vmio_backend *be, bool hold)
{
	be->accept_held = hold;
	if (hold)
		watch_listener(be, false);
	else if (!be->chan.open)
		listen_again(be);
}

int vmio_backend_listener(const struct vmio_backend *be)
{
	return be->listen_fd;
}

bool vmio_backend_owns_socket_file(const struct vmio_backend *be)
{
	return be->socket_path != NULL;
}

static void drop_listener(struct vmio_backend *be)
{
	if (be->listen_fd < 0)
		return;
	vmio_timer_fini(&be->relisten);
	vmio_loop_remove(be->loop, be->listen_fd);
	vmio_close_fd(&be->listen_fd);
}

void vmio_backend_give_up_listener(struct vmio_backend *be)
{
	drop_listener(be);
	free(be->socket_path);
	be->socket_path = NULL;
}

int vmio_backend_adopt_listener(struct vmio_backend *be, int fd,
				const char *path)
{
	struct stat st;
	int rc = be->listen_fd >= 0 ? -EBUSY : vmio_fd_set_nonblock(fd);

	if (!rc)
		rc = adopt_listener(be, fd);
	if (rc) {
		close(fd);
		return rc;
	}
	/* A session restored first keeps it unwatched. */
	watch_listener(be, !be->chan.open);
	/* The file as it is now is the one the predecessor bound: a later
	 * one at the same path (someone else's) is never removed. */
	if (path && !stat(path, &st) && S_ISSOCK(st.st_mode)) {
		be->socket_path = strdup(path);
		be->socket_dev = st.st_dev;
		be->socket_ino = st.st_ino;
	}
	return 0;
}

/* ---- Lifetime ---------------------------------------------------------- */

struct vmio_backend *vmio_backend_new(struct vmio_loop *loop,
				      const struct vmio_device_ops *ops,
				      void *dev)
{
	struct vmio_backend *be;

	/* Queue indices travel in 8 bits (VHOST_USER_VRING_IDX_MASK). */
	if (!loop || !ops || !ops->num_queues ||
	    ops->num_queues > VHOST_USER_VRING_IDX_MASK + 1 ||
	    !ops->queue_start || !ops->queue_stop || !ops->queue_kick) {
		log_err("vhost-user: device description is incomplete");
		return NULL;
	}
	be = calloc(1, sizeof(*be));
	if (!be)
		return NULL;
	be->queues = calloc(ops->num_queues, sizeof(*be->queues));
	if (!be->queues) {
		free(be);
		return NULL;
	}
	be->loop = loop;
	be->ops = ops;
	be->dev = dev;
	be->account = vmio_cpu_account_current();
	be->listen_fd = -1;
	be->chan.fd = -1;
	be->message_timeout_ms = VHOST_USER_MSG_TIMEOUT_MS;
	be->kick_budget = (struct vmio_kick_budget){ VMIO_KICK_IDLE_RATE,
						     VMIO_KICK_IDLE_BURST };
	be->backend_req_fd = -1;
	be->log_call_fd = -1;
	be->rl = (struct vmio_ratelimit)VMIO_RATELIMIT_INIT(20);
	be->rl_sessions = (struct vmio_ratelimit)VMIO_RATELIMIT_INIT(10);
	vmio_mem_init(&be->mem);
	vmio_mem_init(&be->new_mem);
	vmio_bq_init_all(be);
	be->homes_idle = homes_idle;
	vmio_defer_init(&be->watch_defer, loop, watch_turn, be);
	return be;
}

/* Unlinks the socket file unless someone replaced it since we bound it. */
static void remove_socket_file(struct vmio_backend *be)
{
	struct stat st = { .st_dev = be->socket_dev, .st_ino = be->socket_ino };

	vmio_unix_unlink_if_same(be->socket_path, &st);
	free(be->socket_path);
	be->socket_path = NULL;
}

void vmio_backend_free(struct vmio_backend *be)
{
	if (!be)
		return;
	/* The threads of queues served elsewhere have ended. */
	vmio_home_gone(be);
	vmio_defer_cancel(&be->watch_defer);
	drop_waiting(be);
	vhost_user_channel_close(&be->chan);
	vmio_session_reset(be);
	vmio_bq_release_all(be);
	drop_listener(be);
	if (be->socket_path)
		remove_socket_file(be);
	free(be->queues);
	free(be);
}

void vmio_backend_set_disconnect_cb(struct vmio_backend *be,
				    void (*cb)(void *opaque), void *opaque)
{
	be->disconnect_cb = cb;
	be->disconnect_opaque = opaque;
}

uint64_t vmio_backend_acked_features(const struct vmio_backend *be)
{
	return be->acked_features;
}

void vmio_backend_set_message_timeout(struct vmio_backend *be, unsigned ms)
{
	be->message_timeout_ms = ms ? ms : VHOST_USER_MSG_TIMEOUT_MS;
}

void vmio_backend_set_kick_budget(struct vmio_backend *be,
				  const struct vmio_kick_budget *b)
{
	be->kick_budget = *b;
}

unsigned vmio_backend_sessions(const struct vmio_backend *be)
{
	return be->sessions;
}

uint64_t vmio_backend_errors(const struct vmio_backend *be)
{
	return be->errors;
}

uint64_t vmio_backend_cpu_ns(const struct vmio_backend *be)
{
	return be->account ? vmio_cpu_account_ns(be->account) : 0;
}

void vmio_backend_queue_kicks(const struct vmio_backend *be, unsigned index,
			      uint64_t *kicks, uint64_t *idle)
{
	*kicks = *idle = 0;
	if (index >= be->ops->num_queues)
		return;
	*kicks = vmio_kick_stats_kicks(&be->queues[index].guard.stats);
	*idle = vmio_kick_stats_idle(&be->queues[index].guard.stats);
}

/* What keeps the VM from being served at once, each by its name: a
 * queue whose kicks are not heard (kick_guard.h), the gap between two
 * sessions (VMIO_BACKEND_SESSION_GAP_NS). */
static void write_held_back(const struct vmio_backend *be, struct vmio_json *j)
{
	bool kicks = false;

	for (unsigned i = 0; i < be->ops->num_queues; i++)
		kicks |= vmio_kick_stats_muted(&be->queues[i].guard.stats);
	vmio_json_key(j, "held_back");
	vmio_json_array_begin(j);
	if (kicks)
		vmio_json_string(j, "idle-kicks");
	if (vmio_timer_armed(&be->relisten))
		vmio_json_string(j, "session-gap");
	vmio_json_array_end(j);
}

static void write_session_ends(const struct vmio_backend *be,
			       struct vmio_json *j)
{
	vmio_json_key(j, "session_ends");
	vmio_json_object_begin(j);
	vmio_json_kv_uint(j, "hangup", be->ends[VHOST_USER_END_HANGUP]);
	vmio_json_kv_uint(j, "timeout", be->ends[VHOST_USER_END_TIMEOUT]);
	vmio_json_kv_uint(j, "fault", be->ends[VHOST_USER_END_FAULT]);
	vmio_json_object_end(j);
}

void vmio_backend_write_stats(const struct vmio_backend *be,
			      struct vmio_json *j)
{
	/* The homes' clock: the backend's (a program that gives one loop a
	 * clock of its own gives it to all). */
	uint64_t now = vmio_loop_now_ns(be->loop);
	uint64_t kicks = 0, idle = 0;

	vmio_json_kv_string(j, "device", be->ops->name);
	vmio_json_kv_string(j, "socket", be->socket_path);
	vmio_json_kv_uint(j, "sessions", be->sessions);
	write_session_ends(be, j);
	vmio_json_kv_uint(j, "protocol_errors", be->errors);
	vmio_json_kv_uint(j, "features", be->acked_features);
	vmio_json_key(j, "connected");
	vmio_json_bool(j, be->chan.open);
	vmio_json_kv_uint(j, "cpu_us", vmio_backend_cpu_ns(be) / 1000u);
	write_held_back(be, j);
	/* The kick counters are written on each queue's home, maybe another
	 * thread: kick_guard.h makes them safe to read here. */
	for (unsigned i = 0; i < be->ops->num_queues; i++) {
		uint64_t k, n;

		vmio_backend_queue_kicks(be, i, &k, &n);
		kicks += k;
		idle += n;
	}
	vmio_json_kv_uint(j, "kicks", kicks);
	vmio_json_kv_uint(j, "idle_kicks", idle);
	vmio_json_key(j, "queues");
	vmio_json_array_begin(j);
	for (unsigned i = 0; i < be->ops->num_queues; i++) {
		vmio_json_object_begin(j);
		vmio_json_kv_uint(j, "index", i);
		vmio_kick_stats_write(&be->queues[i].guard.stats, now, j);
		vmio_json_object_end(j);
	}
	vmio_json_array_end(j);
}
