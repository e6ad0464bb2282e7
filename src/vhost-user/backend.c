/* The backend core's outer half: the socket, one front end at a time, the
 * per-connection state and its reset, and the backend's lifetime. The
 * messages themselves are handlers.c's; the rings are queues.c's. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/unix_socket.h"
#include "vhost-user/backend_internal.h"

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/* Gives the device back in the state a new front end expects: queues
 * stopped, device reset, memory dropped, every fd closed, nothing
 * negotiated. */
void vmio_backend_reset_session(struct vmio_backend *be)
{
	if (!be->touched)
		return;
	vmio_bq_pause_all(be);
	if (be->ops->reset)
		be->ops->reset(be->dev);
	for (unsigned i = 0; i < be->ops->num_queues; i++)
		vmio_vq_unmap(&be->queues[i].vq);
	vmio_mem_clear(&be->mem);
	vmio_mem_clear(&be->new_mem);
	for (unsigned i = 0; i < be->ops->num_queues; i++)
		vmio_bq_reset(&be->queues[i]);
	close_fd(&be->backend_req_fd);
	be->acked_features = 0;
	be->acked_protocol_features = 0;
	be->status = 0;
	be->touched = false;
}

/* ---- Connections ------------------------------------------------------- */

/* While a front end is served the listener is not watched: a VMM that
 * reconnects at once waits in the kernel's backlog, and is served as soon
 * as the old connection is gone, whatever order the two events arrive in. */
static void watch_listener(struct vmio_backend *be, bool on)
{
	if (be->listen_fd >= 0)
		vmio_loop_modify(be->loop, be->listen_fd, on ? EPOLLIN : 0);
}

static void drop_connection(struct vmio_backend *be)
{
	vmio_loop_remove(be->loop, be->conn_fd);
	close_fd(&be->conn_fd);
	vmio_backend_reset_session(be);
	log_info("vhost-user: front end disconnected; device %s reset",
		 be->ops->name);
	watch_listener(be, true);
	/* Last: the callback may free the backend. */
	if (be->disconnect_cb)
		be->disconnect_cb(be->disconnect_opaque);
}

static void conn_cb(void *opaque, int fd, uint32_t events)
{
	struct vmio_backend *be = opaque;
	struct vhost_user_msg msg;
	int rc = vhost_user_msg_recv(fd, &msg);

	if (rc == -EAGAIN || rc == -EINTR)
		return;
	if (rc == 0) {
		drop_connection(be);
		return;
	}
	if (rc < 0) {
		be_err(be, "bad message from the front end: %s; closing the "
		       "connection",
		       strerror(-rc));
		drop_connection(be);
		return;
	}
	rc = vmio_backend_handle_msg(be, &msg, fd);
	if (rc < 0) {
		be_err(be, "closing the connection after a failed %s",
		       vhost_user_request_name(msg.hdr.request));
		drop_connection(be);
	}
}

static int start_connection(struct vmio_backend *be, int fd)
{
	int rc = vmio_loop_add(be->loop, fd, EPOLLIN, conn_cb, be);

	if (rc)
		return rc;
	be->conn_fd = fd;
	be->touched = true;
	be->sessions++;
	watch_listener(be, false);
	log_info("vhost-user: front end connected (session %u, device %s)",
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
	int rc = start_connection(be, conn);
	if (rc) {
		log_err("vhost-user: cannot serve the new connection: %s",
			strerror(-rc));
		close(conn);
	}
}

int vmio_backend_serve_fd(struct vmio_backend *be, int fd)
{
	int fl;

	if (fd < 0)
		return -EBADF;
	if (be->conn_fd >= 0)
		return -EBUSY;
	fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0 ||
	    fcntl(fd, F_SETFD, FD_CLOEXEC) < 0) {
		int err = errno;
		log_err("vhost-user: --fd %d is not usable: %s", fd,
			strerror(err));
		return -err;
	}
	return start_connection(be, fd);
}

int vmio_backend_listen(struct vmio_backend *be, const char *path)
{
	struct stat st;
	char *copy;
	int fd, rc;

	if (!path)
		return -EINVAL;
	if (be->listen_fd >= 0 || be->conn_fd >= 0)
		return -EBUSY;
	copy = strdup(path);
	if (!copy)
		return -ENOMEM;
	fd = vmio_unix_listen(path, 8, "vhost-user", &st);
	if (fd < 0) {
		free(copy);
		return fd;
	}
	rc = vmio_loop_add(be->loop, fd, EPOLLIN, accept_cb, be);
	if (rc) {
		unlink(path);
		close(fd);
		free(copy);
		return rc;
	}
	be->listen_fd = fd;
	be->socket_path = copy;
	be->socket_dev = st.st_dev;
	be->socket_ino = st.st_ino;
	log_info("vhost-user: device %s listening on %s", be->ops->name, path);
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
	be->listen_fd = -1;
	be->conn_fd = -1;
	be->backend_req_fd = -1;
	be->rl = (struct vmio_ratelimit)VMIO_RATELIMIT_INIT(20);
	vmio_mem_init(&be->mem);
	vmio_mem_init(&be->new_mem);
	vmio_bq_init_all(be);
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
	if (be->conn_fd >= 0) {
		vmio_loop_remove(be->loop, be->conn_fd);
		close_fd(&be->conn_fd);
	}
	vmio_backend_reset_session(be);
	vmio_bq_release_all(be);
	if (be->listen_fd >= 0) {
		vmio_loop_remove(be->loop, be->listen_fd);
		close_fd(&be->listen_fd);
	}
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

unsigned vmio_backend_sessions(const struct vmio_backend *be)
{
	return be->sessions;
}
