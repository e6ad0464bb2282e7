/* What the relay core shares with its engines: one direction of data, and
 * the four operations an engine provides for it. */
#ifndef VMIO_REDIRECT_RELAY_INTERNAL_H
#define VMIO_REDIRECT_RELAY_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct redir_dir {
	int src, dst;
	size_t held;        /* read from src, not yet written to dst */
	size_t capacity;    /* most that may be held */
	bool eof;           /* src reached EOF */
	bool done;          /* EOF passed on: dst was shut down for writing */
	uint64_t bytes;     /* written to dst */

	/* copy engine: a ring of capacity bytes, held of them from head */
	uint8_t *ring;
	size_t head;

	/* splice engine: the pipe data passes through */
	int pipe_r, pipe_w;
};

struct redir_engine_ops {
	int (*init)(struct redir_dir *d);
	/* Moves data from src into the direction: bytes taken, 0 at EOF,
	 * -EAGAIN when nothing can be taken now, or -errno. */
	long (*fill)(struct redir_dir *d, size_t max);
	/* Moves held data to dst: bytes written, -EAGAIN, or -errno. */
	long (*drain)(struct redir_dir *d);
	/* Whether fill should be tried while data is held: a splice pipe
	 * counts buffers, not bytes, so it can be full before held reaches
	 * capacity, and waiting on src then would spin. */
	bool fill_while_held;
	void (*fini)(struct redir_dir *d);
};

extern const struct redir_engine_ops redir_engine_copy;
extern const struct redir_engine_ops redir_engine_splice;

#endif
