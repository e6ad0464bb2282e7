/* The expiry tick: the multiplexer's one timer, and the deadlines it
 * checks. Deadlines bound how long something may hang, they are not
 * appointments, so one coarse tick (every VSOCK_EXPIRY_TICK_MS) checks
 * them all, and it runs only while something waits for it:
 *
 *   a host-initiated connection the guest did not answer within the
 *   connect timeout: closed on the host side, the guest reset if our
 *   REQUEST reached it;
 *   a connection the guest closed (SHUTDOWN with both flags) whose data
 *   the host will not take within VSOCK_EXPIRY_SHUTDOWN_MS: reset;
 *
 * and, for the multiplexer's other uses of the tick, a connection that
 * wants one (vsock_conn_wants_tick) and held tx chains (tx_splice.h).
 * The hybrid listener (hybrid.h) keeps one of its own, whose "connect"
 * deadline is a host socket's CONNECT line. A deadline is a loop-clock
 * time kept in what it bounds (0: none). */
#ifndef VMIO_DEVICES_VSOCK_EXPIRY_H
#define VMIO_DEVICES_VSOCK_EXPIRY_H

#include <stdbool.h>
#include <stdint.h>

#include "devices/vsock/connection.h"
#include "event/loop.h"

#define VSOCK_EXPIRY_TICK_MS 100
/* A connection the guest closed whose buffered data the host will not
 * take is reset after this long. */
#define VSOCK_EXPIRY_SHUTDOWN_MS 2000

struct vmio_ratelimit;

struct vsock_expiry {
	struct vmio_timer tick;
	unsigned connect_timeout_ms;
};

/* tick(opaque) runs on every tick. Returns 0 or -ENOMEM. */
int vsock_expiry_init(struct vsock_expiry *x, struct vmio_loop *loop,
		      unsigned connect_timeout_ms, vmio_task_cb tick,
		      void *opaque);
void vsock_expiry_fini(struct vsock_expiry *x);

/* Keeps the tick going, or stops it. */
void vsock_expiry_run(struct vsock_expiry *x, bool on);

/* A new host-initiated connection: the guest answers within the connect
 * timeout (the timeout given to init). Starts the tick. */
void vsock_expiry_connect(struct vsock_expiry *x, uint64_t *deadline_ns);

/* Brings c's deadline in line with its state, after every change: the
 * shutdown deadline starts when the guest has closed both ways, and any
 * deadline goes once the connection is past LOCAL_INIT and not closing. */
void vsock_expiry_follow(struct vsock_expiry *x, const struct vsock_conn *c,
			 uint64_t *deadline_ns);

/* The loop's time, read once per tick for every deadline it checks. */
uint64_t vsock_expiry_now(const struct vsock_expiry *x);
/* Whether the deadline (0: none) has passed at now. */
static inline bool vsock_expiry_due(uint64_t deadline_ns, uint64_t now)
{
	return deadline_ns && now >= deadline_ns;
}

/* What c, whose deadline passed, owes the guest: true with the RST in
 * *rst, or false when our REQUEST never left (nothing to reset there). */
bool vsock_expiry_rst(const struct vsock_conn *c, struct vsock_hdr *rst);

/* The line that says why c is closed (rate-limited, peer_log.h). */
void vsock_expiry_log(const struct vsock_expiry *x, struct vmio_ratelimit *rl,
		      const struct vsock_conn *c);

#endif
