/* `vmio-scale latency`: head-of-line blocking in one `vmio vsock`. One
 * VM streams guest to host from a process of its own while every other
 * VM does request/response (the guest writes a message, the host echoes
 * it, the guest reads it back; one outstanding each), in phases with the
 * streamer idle and running: the round trips' p50 and p99 in each. */
#ifndef VMIO_TOOLS_SCALE_LATENCY_H
#define VMIO_TOOLS_SCALE_LATENCY_H

#include <stdint.h>

struct scale_latency_opts {
	const char *config;
	unsigned bulk_vm;   /* index in the config of the streaming VM */
	unsigned rounds;    /* idle phase, running phase, per round */
	uint64_t phase_ms;
	uint64_t msg;       /* request and response bytes */
	uint64_t bulk_msg;  /* the streamer's writes */
};

/* Prints the figures; returns the exit status. */
int scale_latency(const struct scale_latency_opts *o);

#endif
