/* `vmio-scale idle`: the idle scale of one `vmio vsock` (many VMs, many
 * established idle connections each: memory, descriptors, time to open
 * them), then a few of those VMs streaming among the idle rest against
 * the same streams in a second vmio serving only them. */
#ifndef VMIO_TOOLS_SCALE_IDLE_H
#define VMIO_TOOLS_SCALE_IDLE_H

#include <stdint.h>
#include <sys/types.h>

struct scale_idle_opts {
	const char *config;       /* the VMs of vmio A, --config as it read */
	pid_t pid;                /* vmio A */
	unsigned conns, window;   /* idle connections per VM; REQUESTs out
				   * at once per guest */
	unsigned busy, pairs;     /* streaming VMs (0: no streaming part),
				   * A B rounds */
	const char *alone_config; /* vmio B's VMs: the first busy stream */
	pid_t alone_pid;
	uint64_t bytes, msg;      /* per run, all streams; per write */
};

/* Prints the figures; returns the exit status. */
int scale_idle(const struct scale_idle_opts *o);

#endif
