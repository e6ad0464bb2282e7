/* A relay whose bytes the kernel moves: the sockmap engine's counterpart
 * of relay.h, for `UNIX-RECV:path` to a stream. This process only watches:
 * a timer reads the program's counters, and the egress socket is watched
 * for failure. Its one hard part is the end: the kernel's queue towards the
 * egress cannot be seen from here, so the egress is shut down only after
 * the counters have stood still with the egress writable for a while
 * (see quiet_ms in sockmap_relay.c), and data the kernel fails to send
 * after that is reported as lost, never passed over. */
#ifndef VMIO_REDIRECT_SOCKMAP_RELAY_H
#define VMIO_REDIRECT_SOCKMAP_RELAY_H

#include "event/loop.h"
#include "redirect/relay.h"
#include "redirect/sockmap.h"

struct redir_sockmap_relay;

typedef void (*redir_sockmap_done_fn)(void *opaque,
				      struct redir_sockmap_relay *r, int error);

/* Starts watching the pair sm was attached to: ingress (bound by now) and
 * egress. Owns both fds and sm from now on, even on failure. Returns NULL
 * on failure (logged). */
struct redir_sockmap_relay *redir_sockmap_relay_new(struct vmio_loop *loop,
						    struct redir_sockmap *sm,
						    int ingress, int egress,
						    const char *name,
						    redir_sockmap_done_fn done,
						    void *opaque);

void redir_sockmap_relay_get_stats(const struct redir_sockmap_relay *r,
				   struct redir_relay_stats *st);

void redir_sockmap_relay_free(struct redir_sockmap_relay *r);

#endif
