/* Which engine `vmio redirect` runs for its pair of addresses, and why
 * when it is not the one asked (--engine). sockmap where it fits the pair,
 * the kernel has what it needs and the program loads; else splice for
 * stream to stream. A datagram or seqpacket end takes the message engine
 * whatever was asked (relay.h). The kernel may still refuse ADDRESS2 once
 * it is connected: auto then falls back, on the same connection. */
#ifndef VMIO_REDIRECT_ENGINE_CHOICE_H
#define VMIO_REDIRECT_ENGINE_CHOICE_H

#include <stdbool.h>
#include <stddef.h>

#include "redirect/address.h"
#include "redirect/endpoint.h"
#include "redirect/relay.h"
#include "redirect/sockmap.h"

/* Unless -b says otherwise: the kernel queue towards ADDRESS2 retries on a
 * timer tick once the send buffer is half full, so a small one caps the
 * rate (45 MB/s at the default against 3 GB/s at 4 MiB, measured here). */
#define REDIR_SOCKMAP_DEFAULT_SNDBUF (4 << 20)

struct redir_engine_choice {
	enum redir_engine asked;  /* --engine as given */
	enum redir_engine engine; /* what runs between two streams */
	/* Why the engine that runs is not the one asked, or "". */
	char why[320];
	struct redir_sockmap *sm; /* loaded for the sockmap engine until used */
};

/* redir_engine_choose's refusals. */
enum {
	REDIR_CHOICE_MISFIT = 1, /* sockmap asked for a pair it cannot serve */
	REDIR_CHOICE_FAILED,     /* sockmap asked, and this kernel cannot */
};

/* Why the sockmap engine cannot serve in to out, or NULL if it can. */
const char *redir_sockmap_misfit(const struct redir_addr *in,
				 const struct redir_addr *out);

/* Settles asked for ep[0] to ep[1], loading the sockmap program when it
 * is to run; a vsock ep[1] of the sockmap engine gets the larger buffer
 * that engine needs. Returns 0, or a refusal above with the reason in
 * err. */
int redir_engine_choose(struct redir_engine_choice *ch, enum redir_engine asked,
			struct redir_endpoint ep[2], char *err, size_t size);

/* The kernel would not take ADDRESS2 into the sockmap (err: -errno): the
 * program is freed. auto goes on with splice, the reason kept; returns 0.
 * --engine sockmap: returns -1 (logged). */
int redir_engine_fall_back(struct redir_engine_choice *ch, int err);

/* The engine that moves the bytes between ep[0] and ep[1]. */
const char *redir_engine_running(const struct redir_engine_choice *ch,
				 const struct redir_endpoint ep[2]);

/* Which engine runs, at info, and why when it is not the one asked: to
 * be said once ADDRESS1 is open, since the kernel may refuse the sockmap
 * until then (redir_engine_fall_back). */
void redir_engine_log_choice(const struct redir_engine_choice *ch,
			     const struct redir_endpoint ep[2]);

/* The engine's buffers as it will run them, at debug: buffer is -b's
 * (0: each engine's default), given whether -b was. */
void redir_engine_log_buffers(const struct redir_engine_choice *ch,
			      const struct redir_endpoint ep[2], size_t buffer,
			      bool given);

#endif
