/* What the relay core shares with its engines: one direction of data, and
 * the operations an engine provides for it. Each direction has its own
 * engine, chosen by redir_engine_for from the two socket types. */
#ifndef VMIO_REDIRECT_RELAY_INTERNAL_H
#define VMIO_REDIRECT_RELAY_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "redirect/relay.h"
#include "util/byte_ring.h"

struct redir_engine_ops;
struct redir_msg_ring;

struct redir_dir {
	const struct redir_engine_ops *ops;
	const char *name;   /* the relay's, for log lines */
	int src, dst;
	int src_type, dst_type; /* SOCK_STREAM, SOCK_DGRAM or SOCK_SEQPACKET;
				 * a non-socket counts as a stream */
	size_t held;        /* read from src, not yet written to dst */
	size_t capacity;    /* most that may be held */
	bool eof;           /* src reached EOF */
	bool done;          /* EOF passed on: dst was shut down for writing */
	uint64_t bytes;     /* written to dst */
	uint64_t dropped;   /* messages dropped: too big for a buffer or dst */

	/* copy engine: capacity bytes, held of them in the ring */
	struct vmio_byte_ring ring;

	/* splice engine: the pipe data passes through, pipe_size bytes now
	 * (growing to capacity), filled since it last grew */
	int pipe_r, pipe_w;
	size_t pipe_size;
	uint64_t filled;

	/* message engine */
	struct redir_msg_ring *msgs;
};

struct redir_engine_ops {
	int (*init)(struct redir_dir *d);
	/* Whether fill may be tried now (src not yet at EOF). A splice
	 * pipe counts buffers, not bytes, so it may be full before held
	 * reaches capacity: it fills only when empty, else waiting on src
	 * would spin. */
	bool (*can_fill)(const struct redir_dir *d);
	/* Moves data from src into the direction: bytes taken, 0 at EOF,
	 * -EAGAIN when nothing can be taken now, or -errno. An EOF read
	 * together with data (an empty message behind others in one batch)
	 * sets d->eof beside the bytes taken: the relay waits on src only
	 * while it is not at EOF, and src has nothing more to wake it. */
	long (*fill)(struct redir_dir *d, size_t max);
	/* Moves held data to dst: bytes written, -EAGAIN, or -errno. */
	long (*drain)(struct redir_dir *d);
	/* Passes EOF on once nothing is held: 0, -EAGAIN, or -errno. NULL:
	 * shutdown(dst, SHUT_WR), redir_end_shutdown. */
	int (*end)(struct redir_dir *d);
	void (*fini)(struct redir_dir *d);
};

extern const struct redir_engine_ops redir_engine_copy;
extern const struct redir_engine_ops redir_engine_splice;
extern const struct redir_engine_ops redir_engine_msg;

/* The engine for one direction: copy or splice (as requested; AUTO is
 * splice) between streams, the message engine when either end keeps
 * message boundaries (datagram or seqpacket). A non-socket end (type 0)
 * is a stream to the message engine, and takes copy otherwise, since
 * splice does not take a tty. */
const struct redir_engine_ops *redir_engine_for(int src_type, int dst_type,
						enum redir_engine requested);

/* EOF as a stream reader sees it: shutdown(dst, SHUT_WR). */
int redir_end_shutdown(struct redir_dir *d);

#endif
