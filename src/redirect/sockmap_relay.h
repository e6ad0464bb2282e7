/* A relay whose bytes the kernel moves: the sockmap engine's counterpart
 * of relay.h, for `UNIX-RECV:path` to a stream. This process only
 * watches: a timer reads the program's counters, and the egress socket is
 * watched for failure.
 *
 * Two things cannot be seen from here and are inferred with care (see
 * sockmap_relay.c): whether the kernel's queue towards a socket has
 * emptied, which decides when end of input may become a shutdown; and,
 * once the egress's peer has shut down (Linux then takes a unix egress
 * out of the map), when the data the program diverted to a socket pair of
 * ours may follow in userspace without overtaking what the kernel still
 * held. Data the kernel fails to send, or drops when it takes the egress
 * out of the map, is reported as lost, never passed over. */
#ifndef VMIO_REDIRECT_SOCKMAP_RELAY_H
#define VMIO_REDIRECT_SOCKMAP_RELAY_H

#include "event/loop.h"
#include "redirect/relay.h"
#include "redirect/sockmap.h"

struct redir_sockmap_relay;

typedef void (*redir_sockmap_done_fn)(void *opaque,
				      struct redir_sockmap_relay *r, int error);

/* Joins ingress (an unbound unix datagram socket) to egress (a connected
 * stream socket) through sm, with sndbuf-byte send buffers, and starts
 * watching; the caller binds ingress next. Owns ingress, egress and sm
 * from now on, even on failure. Returns NULL on failure (logged). */
struct redir_sockmap_relay *redir_sockmap_relay_new(struct vmio_loop *loop,
						    struct redir_sockmap *sm,
						    int ingress, int egress,
						    int sndbuf, const char *name,
						    redir_sockmap_done_fn done,
						    void *opaque);

void redir_sockmap_relay_get_stats(const struct redir_sockmap_relay *r,
				   struct redir_relay_stats *st);

void redir_sockmap_relay_free(struct redir_sockmap_relay *r);

#endif
