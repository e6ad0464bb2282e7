/* Request/response over the connections of vsock_transfer.h (plain
 * sockets or in-tree guests' vsock sockets): the requester writes a
 * pattern message on each connection, waits for all of it to come back
 * and times that round trip, one outstanding per connection; the echo
 * writes back whatever it reads. What vmio-vsock-bench --echo and
 * vmio-scale latency measure with. */
#ifndef VMIO_TOOLS_ROUND_TRIPS_H
#define VMIO_TOOLS_ROUND_TRIPS_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "vsock_transfer.h"

/* Round trips kept per sample set; later ones are counted, not kept. */
#define RT_MAX_SAMPLES (1u << 20)
/* Not measured: the first round trips of a fresh connection. */
#define RT_WARMUP_MS 300

struct rt_samples {
	uint32_t *ns;    /* RT_MAX_SAMPLES of them */
	size_t n;
	uint64_t all;    /* round trips, kept or not */
	double seconds;  /* the phases' time, added by the caller */
};

/* Allocates the samples, or dies. */
void rt_samples_init(struct rt_samples *sm);
void rt_samples_free(struct rt_samples *sm);
void rt_keep(struct rt_samples *sm, int64_t ns);
/* Sorts the kept samples; then rt_pct_us gives the nearest rank: the
 * smallest sample with at least p percent at or below it (0 if none). */
void rt_sort(struct rt_samples *sm);
double rt_pct_us(const struct rt_samples *sm, unsigned p);

/* A requester's connection: the round trip under way. */
struct rt_conn {
	int64_t t0;
	uint64_t sent, got;
};

/* Set (by a signal handler, say) to end the measured rt_phase before its
 * time: the round trips under way finish, no more start. */
extern volatile sig_atomic_t rt_stop;

/* Called with each round trip's time in ns and its connection. */
typedef void rt_kept_fn(void *arg, unsigned c, int64_t ns);

/* Round trips of msg bytes (at most XFER_MAX_MSG) on the n connections
 * of cs for ms; one under way then is finished but not passed to kept
 * (kept NULL: a warm-up). Returns 0, or -1 with err filled (a failed
 * read or write, end of stream, XFER_STALL_MS without a byte). */
int rt_phase(const struct xfer_conns *cs, struct rt_conn *rc, unsigned n,
	     uint64_t msg, uint64_t ms, rt_kept_fn *kept, void *arg,
	     char *err, size_t err_size);

/* Writes back what comes on the n connections of cs until each has
 * ended (read 0), then shuts each down for writing. *bytes: what was
 * echoed. Returns 0, or -1 with err filled (as rt_phase). */
int rt_echo(const struct xfer_conns *cs, unsigned n, uint64_t *bytes,
	    char *err, size_t err_size);

#endif
