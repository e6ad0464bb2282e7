/* The connections of `vmio redirect`, each served by one worker thread
 * from its start to its end: ADDRESS2 connected without waiting, the
 * relay, its end and its stats, all on that worker's loop. A connection
 * accepted on another thread (worker 0 owns the listener) crosses over
 * once, by the vmio_defer it carries, posted to its worker's loop.
 *
 * What threads share here: the setup (read-only while the workers run,
 * but for its atomic counter of connection ids) and each worker's list,
 * which the accepting thread adds to and the worker takes from, under
 * the worker's lock. A worker's totals are its own until it is joined. */
#ifndef VMIO_REDIRECT_CONNECTION_H
#define VMIO_REDIRECT_CONNECTION_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

#include "event/loop.h"
#include "redirect/endpoint.h"
#include "redirect/relay.h"
#include "redirect/sockmap.h"

/* What every connection is made with. */
struct redir_conn_setup {
	const struct redir_endpoint *to; /* ADDRESS2 */
	enum redir_engine engine;
	/* The engine that moves the bytes of every connection, named before
	 * a connection has its relay: a datagram or seqpacket end takes the
	 * message engine whatever engine says. */
	const char *engine_name;
	size_t buffer;
	unsigned dirs;                   /* REDIR_BOTH, or one (-u, -U) */
	bool stats;                      /* a line per connection at its end */
	/* Called, on the connection's worker, when one ends by itself (not
	 * at teardown) with the exit status it deserves; NULL: nothing to
	 * do (fork: the others go on). */
	void (*ended)(void *opaque, int status);
	void *opaque;
	atomic_uint next_id;
};

struct redir_totals {
	uint64_t bytes;
	uint64_t dropped; /* messages; any makes the exit status 1 */
	unsigned conns;
	uint64_t refused; /* ADDRESS2 refused them, or no relay was made */
};

struct redir_conn;

struct redir_worker {
	struct vmio_loop *loop;
	unsigned index;
	struct redir_conn_setup *setup;
	pthread_mutex_t lock; /* conns' links: another thread adds to them */
	LIST_HEAD(, redir_conn) conns;
	struct redir_totals totals; /* of the connections it ended */
	bool closing; /* tearing down: an end is not the job's end */
};

/* Worker index, on loop. Returns 0, or -1 (logged). */
int redir_worker_init(struct redir_worker *w, unsigned index,
		      struct vmio_loop *loop, struct redir_conn_setup *setup);
/* Once its thread is joined (or before it ran): ends every connection
 * still there, stats counted and printed as for any other end. */
void redir_worker_fini(struct redir_worker *w);

/* Relays a (a connected socket from ADDRESS1, or UNIX-RECV's bound one;
 * owned from now on) on w, starting now: from w's thread, or before the
 * workers run. */
void redir_conn_start(struct redir_worker *w, int a);
/* The same for an end that may be two descriptors (STDIO). */
void redir_conn_start_side(struct redir_worker *w, struct redir_side a);
/* The same from the accepting thread to another worker: the connection
 * is made here and starts on w's next turn. */
void redir_conn_hand_over(struct redir_worker *w, int a);

/* Relays a and b, both connected already (or a UNIX-RECV socket bound),
 * on w, starting now; owns both from now on. For the sockmap engine's
 * fallback, which learns only once ADDRESS2 is connected that the
 * kernel will not take it into a sockmap. */
void redir_conn_start_connected(struct redir_worker *w, int a, int b);

/* The sockmap engine's one connection (UNIX-RECV), on w before the
 * workers run: ingress joined to egress (which redir_sockmap_join_egress
 * already took) through sm, with sndbuf-byte send buffers. Owns all three from now on, even on failure. Returns the
 * connection, or NULL (logged, and ended). */
struct redir_conn *redir_conn_start_sockmap(struct redir_worker *w,
					    struct redir_sockmap *sm,
					    int ingress, int egress,
					    int sndbuf);
/* Ends c on its worker's thread: a failure of the caller's (status 1). */
void redir_conn_end(struct redir_conn *c, int status);

/* From any thread: how many connections w has (relayed, or handed to it
 * and not started yet): how a process that handed its listener over
 * knows when its last relay has ended. */
unsigned redir_worker_count(struct redir_worker *w);

struct vmio_json;
/* On w's thread: {"worker", the totals of what ended there, and
 * "connections": [{id, engine, peers, bytes each way, ...}]}. */
void redir_worker_write_stats(struct redir_worker *w, struct vmio_json *j);

#endif
