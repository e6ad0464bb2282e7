/* ADDRESS1's one connection, made before the loop runs; see
 * first_connection.h. */
#include "redirect/first_connection.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "redirect/connect_retry.h"
#include "util/log.h"

/* ADDRESS1 connects: one connection, made before the loop starts. */
static int connect_first(struct redir_worker *w,
			 const struct redir_endpoint *ep)
{
	if (ep->addr.kind == REDIR_STDIO) {
		redir_conn_start_side(w, (struct redir_side){ STDIN_FILENO,
							      STDOUT_FILENO });
		return 0;
	}

	int a = redir_connect_wait(ep);

	if (a < 0)
		return -1;
	redir_conn_start(w, a);
	return 0;
}

/* The kernel would not take ADDRESS2 (already connected, b) into the
 * sockmap: auto goes on on the same connection, so that the peer sees one
 * connection whatever ran. Returns 0 or -1. */
static int sockmap_fall_back(struct redir_worker *w,
			     struct redir_endpoint ep[2],
			     struct redir_engine_choice *ch, int b, int err)
{
	int a;

	if (redir_engine_fall_back(ch, err)) {
		close(b);
		return -1;
	}
	w->setup->engine = ch->engine;
	w->setup->engine_name = redir_engine_running(ch, ep);
	a = redir_endpoint_listen(&ep[0]);
	if (a < 0) {
		close(b);
		return -1;
	}
	redir_conn_start_connected(w, a, b);
	return 0;
}

/* The sockmap engine's UNIX-RECV: ADDRESS2 is connected and joins the
 * map first, then the datagram socket joins it before it has an address,
 * so that no datagram can be queued on it unseen by the program. */
static int receive_first_sockmap(struct redir_worker *w,
				 struct redir_endpoint ep[2],
				 struct redir_engine_choice *ch, int sndbuf)
{
	int a, rc, b = redir_connect_wait(&ep[1]);
	struct redir_conn *c;

	if (b < 0)
		return -1;
	rc = redir_sockmap_join_egress(ch->sm, b, sndbuf);
	if (rc)
		return sockmap_fall_back(w, ep, ch, b, rc);
	a = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (a < 0) {
		log_err("socket: %s", strerror(errno));
		close(b);
		return -1;
	}
	c = redir_conn_start_sockmap(w, ch->sm, a, b, sndbuf);
	ch->sm = NULL; /* the connection's, even on failure */
	if (!c)
		return -1;
	if (redir_endpoint_bind_socket(&ep[0], a)) {
		redir_conn_end(c, 1);
		return -1;
	}
	return 0;
}

/* ADDRESS1 receives datagrams (UNIX-RECV): no peer to accept, so the one
 * "connection" is the bound socket itself, relayed from now on. */
static int receive_first(struct redir_worker *w, struct redir_endpoint ep[2],
			 struct redir_engine_choice *ch, int sndbuf)
{
	if (ch->sm)
		return receive_first_sockmap(w, ep, ch, sndbuf);

	int a = redir_endpoint_listen(&ep[0]);

	if (a < 0)
		return -1;
	redir_conn_start(w, a);
	return 0;
}


int redir_first_connection(struct redir_worker *w, struct redir_endpoint ep[2],
			   struct redir_engine_choice *ch, int sndbuf)
{
	if (ep[0].addr.kind == REDIR_UNIX_RECV)
		return receive_first(w, ep, ch, sndbuf);
	return connect_first(w, &ep[0]);
}
