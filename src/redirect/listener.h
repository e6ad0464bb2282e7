/* ADDRESS1 as a listener: each connection accepted, given ADDRESS1's
 * socket options and passed on; without fork the listener closes after
 * the first, as socat serves exactly one peer. Out of file descriptors
 * (or memory) it stops watching for a moment instead of spinning on a
 * backlog it cannot take from. One loop's (worker 0's). */
#ifndef VMIO_REDIRECT_LISTENER_H
#define VMIO_REDIRECT_LISTENER_H

#include <stdint.h>

#include "event/loop.h"
#include "redirect/endpoint.h"
#include "util/log.h"

struct redir_listener {
	struct vmio_loop *loop;
	struct redir_endpoint *ep;
	int fd;                    /* -1 once closed, or before it opened */
	struct vmio_timer backoff; /* resumes accepting after EMFILE */
	struct vmio_ratelimit rl;
	/* Takes an accepted, tuned connection; owns it from then on. */
	void (*take)(void *opaque, int fd);
	void *opaque;
	uint64_t accepted, failures; /* for --control */
};

/* Listens on ep with loop. l->fd must be -1 before, so that
 * redir_listener_close may follow whatever happened. Returns 0, or -1
 * (logged). */
int redir_listener_open(struct redir_listener *l, struct vmio_loop *loop,
			struct redir_endpoint *ep,
			void (*take)(void *opaque, int fd), void *opaque);

/* Stops listening and removes the socket's file, if still open. */
void redir_listener_close(struct redir_listener *l);

#endif
