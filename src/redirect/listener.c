/* ADDRESS1's listener and its accept back-off; see listener.h. */
#include "redirect/listener.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/fd.h"

#define ACCEPT_BACKOFF_MS 100

void redir_listener_close(struct redir_listener *l)
{
	if (l->fd < 0)
		return;
	vmio_loop_remove(l->loop, l->fd);
	close(l->fd);
	l->fd = -1;
	redir_endpoint_unlink(l->ep);
	vmio_timer_fini(&l->backoff);
}

static void on_backoff_done(void *opaque)
{
	struct redir_listener *l = opaque;

	if (l->fd >= 0)
		vmio_loop_modify(l->loop, l->fd, EPOLLIN);
}

/* Out of file descriptors (or memory), the pending connection stays in
 * the backlog and the listener stays readable: watching it would spin
 * the loop. Stop watching it for a moment instead; connections that end
 * meanwhile free what the next accept needs. */
static void pause_accepting(struct redir_listener *l)
{
	vmio_timer_arm_ms(&l->backoff, ACCEPT_BACKOFF_MS);
	vmio_loop_modify(l->loop, l->fd, 0);
}

static void on_accept(void *opaque, int fd, uint32_t events)
{
	struct redir_listener *l = opaque;
	int a = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

	if (a < 0) {
		int err = errno;

		if (err == EAGAIN || err == EWOULDBLOCK || err == EINTR ||
		    err == ECONNABORTED)
			return;
		l->failures++;
		log_ratelimited(&l->rl, VMIO_LOG_WARN,
				"accept: %s; pausing for %d ms", strerror(err),
				ACCEPT_BACKOFF_MS);
		pause_accepting(l);
		return;
	}
	l->accepted++;
	int rc = redir_endpoint_tune(l->ep, a);

	if (rc) {
		log_ratelimited(&l->rl, VMIO_LOG_WARN,
				"cannot set the options of an accepted connection: %s",
				strerror(-rc));
		close(a);
		return;
	}
	if (!l->ep->addr.fork)
		redir_listener_close(l);
	l->take(l->opaque, a);
}

static int watch(struct redir_listener *l)
{
	char where[160];

	/* Made with the listener: it costs no descriptor, so it is there
	 * when they run out. */
	if (l->fd < 0 ||
	    vmio_timer_init(&l->backoff, l->loop, on_backoff_done, l) ||
	    vmio_loop_add(l->loop, l->fd, EPOLLIN, on_accept, l))
		return -1;
	log_debug("listening on %s",
		  redir_endpoint_describe(l->ep, where, sizeof(where)));
	return 0;
}

static void start(struct redir_listener *l, struct vmio_loop *loop,
		  struct redir_endpoint *ep,
		  void (*take)(void *opaque, int fd), void *opaque)
{
	*l = (struct redir_listener){
		.loop = loop,
		.ep = ep,
		.fd = -1,
		.rl = VMIO_RATELIMIT_INIT(5),
		.take = take,
		.opaque = opaque,
	};
}

int redir_listener_adopt(struct redir_listener *l, struct vmio_loop *loop,
			 struct redir_endpoint *ep, int fd,
			 void (*take)(void *opaque, int fd), void *opaque,
			 char *why, size_t why_size)
{
	bool is_unix = ep->sa.ss_family == AF_UNIX;
	int on = 0, domain = 0;
	socklen_t len = sizeof(on);

	start(l, loop, ep, take, opaque);
	l->fd = fd;
	if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &on, &len) < 0 || !on ||
	    (len = sizeof(domain),
	     getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) < 0) ||
	    (domain == AF_UNIX) != is_unix) {
		snprintf(why, why_size,
			 "the listener handed over is not a listening %s socket",
			 is_unix ? "unix" : "inet");
		return -1;
	}
	if (vmio_fd_set_nonblock(fd) ||
	    fcntl(fd, F_SETFD, FD_CLOEXEC) < 0) {
		snprintf(why, why_size, "the listener handed over: %s",
			 strerror(errno));
		return -1;
	}
	if (watch(l)) {
		snprintf(why, why_size, "cannot watch the listener handed over");
		return -1;
	}
	/* Only now: a refused hand-over must leave the predecessor's file
	 * alone. */
	if (is_unix && !stat(ep->addr.path, &ep->st))
		ep->made_file = true;
	return 0;
}

void redir_listener_give_up(struct redir_listener *l)
{
	if (l->fd < 0)
		return;
	l->ep->made_file = false;
	redir_listener_close(l);
}

int redir_listener_open(struct redir_listener *l, struct vmio_loop *loop,
			struct redir_endpoint *ep,
			void (*take)(void *opaque, int fd), void *opaque)
{
	start(l, loop, ep, take, opaque);
	l->fd = redir_endpoint_listen(ep);
	return watch(l);
}
