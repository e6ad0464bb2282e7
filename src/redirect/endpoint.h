/* Turning a parsed address into sockets: the socket address resolved
 * once at start (so a name that does not resolve is a usage error, before
 * anything is opened), then listening, accepting and non-blocking connects
 * on the event loop. */
#ifndef VMIO_REDIRECT_ENDPOINT_H
#define VMIO_REDIRECT_ENDPOINT_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "redirect/address.h"

struct redir_endpoint {
	struct redir_addr addr;
	struct sockaddr_storage sa;      /* where to listen or connect */
	socklen_t sa_len;
	struct sockaddr_storage bind_sa; /* bind=, when given */
	socklen_t bind_len;
	struct stat st;                  /* the unix socket file we made */
	bool made_file;
	int uid, gid;                    /* user=, group=; -1: not asked */
};

/* Resolves a's socket addresses into ep. Returns 0, or -1 with a message
 * in err. */
int redir_endpoint_resolve(struct redir_endpoint *ep, const struct redir_addr *a,
			   char *err, size_t err_size);

/* Binds and listens (non-blocking); a datagram address (UNIX-RECV) is
 * bound only, and receives at once. Returns the fd or -errno (logged). */
int redir_endpoint_listen(struct redir_endpoint *ep);

/* Binds fd, a unix socket of the address's type made by the caller, to
 * the address's path (listening too, unless it is a datagram socket).
 * Returns 0 or -errno (logged); fd stays the caller's. */
int redir_endpoint_bind_socket(struct redir_endpoint *ep, int fd);

/* Removes the unix socket file the listener made, if still ours. */
void redir_endpoint_unlink(struct redir_endpoint *ep);

/* Starts a non-blocking connect. Returns the fd (connected, or with the
 * connect in progress: wait for EPOLLOUT, then redir_connect_result), or
 * -errno. UNIX-CLIENT falls back to a datagram socket when the peer is
 * one; the relay learns the type from the fd (SO_TYPE). */
int redir_endpoint_connect(const struct redir_endpoint *ep);

/* Sets the address's options that belong to each connection (nodelay,
 * keepalive) on fd, one accepted from or connected to it. Returns 0 or
 * -errno. */
int redir_endpoint_tune(const struct redir_endpoint *ep, int fd);

/* The outcome of a connect that was in progress: 0 or -errno. */
int redir_connect_result(int fd);

/* "KEYWORD:path", ":port", ":host:port" or ":cid:port", for log lines. */
const char *redir_endpoint_describe(const struct redir_endpoint *ep,
				    char *buf, size_t size);

#endif
