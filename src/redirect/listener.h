/* ADDRESS1 as a listener: each connection accepted, given ADDRESS1's
 * socket options and passed on; without fork the listener closes after
 * the first, as socat serves exactly one peer. Out of file descriptors
 * (or memory) it stops watching for a moment instead of spinning on a
 * backlog it cannot take from. One loop's (worker 0's). */
#ifndef VMIO_REDIRECT_LISTENER_H
#define VMIO_REDIRECT_LISTENER_H

#include <stddef.h>
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

/* The same on fd, a socket listening on ep already (a predecessor's,
 * handed over): refused (-1, with the reason in why) unless it listens
 * and is of ep's family. Its file, for a unix ep, is this process's to
 * remove from now on. fd is l's even on failure (closed by
 * redir_listener_close). */
int redir_listener_adopt(struct redir_listener *l, struct vmio_loop *loop,
			 struct redir_endpoint *ep, int fd,
			 void (*take)(void *opaque, int fd), void *opaque,
			 char *why, size_t why_size);

/* Stops accepting and closes the socket, leaving its file (another
 * process listens on the same socket now). */
void redir_listener_give_up(struct redir_listener *l);

/* Stops listening and removes the socket's file, if still open. */
void redir_listener_close(struct redir_listener *l);

#endif
