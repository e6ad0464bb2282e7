/* Per-connection credit (flow control) of a vsock stream, as the virtio
 * spec states it ("Buffer Space Management"):
 *
 *   buf_alloc  total receive buffer of a side, in payload bytes
 *   fwd_cnt    free-running count of bytes that side has consumed
 *   peer_free = peer_buf_alloc - (tx_cnt - peer_fwd_cnt)      (u32)
 *
 * Every counter is a free-running u32 and wraps at 2^32; only differences
 * of counters mean anything, so every comparison below is made on a
 * difference, never on two raw counters.
 *
 * Two directions, one struct:
 *   guest -> host  we are the receiver. buf_alloc is our per-connection
 *                  buffer (--tx-buffer-size); rx_cnt counts RW payload
 *                  accepted from the guest; fwd_cnt counts the bytes of it
 *                  written to the host socket. rx_cnt - fwd_cnt is what we
 *                  hold and never exceeds buf_alloc (vsock_credit_rx
 *                  refuses a guest that overruns it).
 *   host -> guest  we are the sender. tx_cnt counts RW payload we put on
 *                  the rx queue; peer_buf_alloc and peer_fwd_cnt are the
 *                  guest's, as it last advertised them in any packet.
 *
 * Pure functions on plain fields; no I/O, no allocation. The connection
 * state machine owns one struct per connection and calls:
 *   vsock_credit_init          when the connection is created
 *   vsock_credit_peer_init     with the first guest header of the flow
 *   vsock_credit_peer_update   with every later guest header (any op)
 *   vsock_credit_rx            for every guest RW, before taking its bytes
 *   vsock_credit_consumed      after bytes reach the host socket
 *   vsock_credit_peer_free     to size host->guest RW packets
 *   vsock_credit_sent          after an RW to the guest is on the rx queue
 *   vsock_credit_advertise     for every header we send (any op)
 *   vsock_credit_update_needed after consuming: send CREDIT_UPDATE if true
 *   vsock_credit_request_needed when data waits and no credit: send
 *                              CREDIT_REQUEST if true, then
 *                              vsock_credit_mark_requested */
#ifndef VMIO_DEVICES_VSOCK_CREDIT_H
#define VMIO_DEVICES_VSOCK_CREDIT_H

#include <stdbool.h>
#include <stdint.h>

/* The most of a guest's advertised buf_alloc we use. A guest may advertise
 * up to 4 GiB - 1; a gigabyte in flight to one socket is already far more
 * than helps, and keeping tx_cnt - peer_fwd_cnt below 2^31 is what lets
 * vsock_credit_peer_update tell a stale fwd_cnt from one that runs ahead
 * of what we sent (see there). */
#define VSOCK_CREDIT_PEER_BUF_MAX (1u << 30)

struct vsock_credit {
	/* guest -> host: our receive side */
	uint32_t buf_alloc;   /* advertised in every header we send */
	uint32_t rx_cnt;      /* RW payload bytes accepted from the guest */
	uint32_t fwd_cnt;     /* of those, bytes written to the host socket */
	uint32_t adv_fwd_cnt; /* fwd_cnt in the last header we sent */
	/* Send a CREDIT_UPDATE unprompted when the free space the guest
	 * believes it may still fill falls below this (and we have more to
	 * give); 0: a quarter of the window (vsock_credit_window). */
	uint32_t update_threshold;

	/* host -> guest: the guest's receive side */
	uint32_t tx_cnt;         /* RW payload bytes we sent to the guest */
	uint32_t peer_buf_alloc; /* as last advertised, uncapped */
	uint32_t peer_fwd_cnt;   /* newest seen, never ahead of tx_cnt */
	bool requested;          /* CREDIT_REQUEST sent, no credit since */
};

/* Sets up a connection with our buffer size. threshold 0 picks the default
 * of a quarter of the window: an update goes out while the guest still has
 * a quarter of what it may fill to write into, so a guest writing steadily
 * never stalls on a round trip (updates are cheap: 44 bytes, batched on
 * the rx queue). A threshold above buf_alloc sends an update whenever
 * anything was consumed. */
static inline void vsock_credit_init(struct vsock_credit *c,
				     uint32_t buf_alloc, uint32_t threshold)
{
	*c = (struct vsock_credit){
		.buf_alloc = buf_alloc,
		.update_threshold = threshold,
	};
}

/* Takes the guest's credit from the first header of the flow (its REQUEST,
 * or its RESPONSE to ours). tx_cnt starts equal to the guest's fwd_cnt:
 * only differences matter, and Linux starts both at 0 anyway, but a guest
 * starting elsewhere is then not mistaken for one running ahead. */
static inline void vsock_credit_peer_init(struct vsock_credit *c,
					  uint32_t peer_buf_alloc,
					  uint32_t peer_fwd_cnt)
{
	c->peer_buf_alloc = peer_buf_alloc;
	c->peer_fwd_cnt = peer_fwd_cnt;
	c->tx_cnt = peer_fwd_cnt;
	c->requested = false;
}

/* Bytes sent to the guest that it has not yet reported consumed. */
static inline uint32_t vsock_credit_in_flight(const struct vsock_credit *c)
{
	return c->tx_cnt - c->peer_fwd_cnt;
}

/* The guest's buffer as we use it: its buf_alloc, capped. */
static inline uint32_t vsock_credit_peer_buf(const struct vsock_credit *c)
{
	return c->peer_buf_alloc < VSOCK_CREDIT_PEER_BUF_MAX
		       ? c->peer_buf_alloc
		       : VSOCK_CREDIT_PEER_BUF_MAX;
}

/* Bytes we may send to the guest now. When the guest shrank its buffer
 * below what is in flight (it may: SO_VM_SOCKETS_BUFFER_SIZE), the spec's
 * u32 formula would wrap to nearly 4 GiB; that is zero credit, not an
 * error. */
static inline uint32_t vsock_credit_peer_free(const struct vsock_credit *c)
{
	uint32_t alloc = vsock_credit_peer_buf(c);
	uint32_t flight = vsock_credit_in_flight(c);

	return flight >= alloc ? 0 : alloc - flight;
}

/* Takes buf_alloc and fwd_cnt from a guest header (every op carries them).
 * Returns 0, or -1 if fwd_cnt claims the guest consumed bytes we never
 * sent: a protocol violation, for which the caller resets the connection;
 * nothing is changed then.
 *
 * A fwd_cnt behind the newest one seen is not an error: Linux stamps
 * fwd_cnt when it builds a packet, and two packets built on two CPUs can
 * reach the queue in the other order. Such a stale value is ignored, so
 * peer_fwd_cnt never moves backwards. Ahead and behind are told apart on
 * the half circle: with at most VSOCK_CREDIT_PEER_BUF_MAX (< 2^31) bytes
 * in flight, a value in (tx_cnt, peer_fwd_cnt + 2^31) is ahead, one in
 * [peer_fwd_cnt + 2^31, peer_fwd_cnt) behind. */
static inline int vsock_credit_peer_update(struct vsock_credit *c,
					   uint32_t buf_alloc, uint32_t fwd_cnt)
{
	uint32_t advance = fwd_cnt - c->peer_fwd_cnt;
	uint32_t flight = vsock_credit_in_flight(c);

	if (advance > flight && advance < (1u << 31))
		return -1;
	if (advance <= flight)
		c->peer_fwd_cnt = fwd_cnt;
	c->peer_buf_alloc = buf_alloc;
	if (vsock_credit_peer_free(c))
		c->requested = false;
	return 0;
}

/* Records n payload bytes sent to the guest. Returns false if that was
 * more than vsock_credit_peer_free() allowed (a bug in the caller: the
 * bytes are counted anyway, since the guest will count them). */
static inline bool vsock_credit_sent(struct vsock_credit *c, uint32_t n)
{
	bool ok = n <= vsock_credit_peer_free(c);

	c->tx_cnt += n;
	return ok;
}

/* Bytes of guest data we hold: accepted, not yet written to the host. */
static inline uint32_t vsock_credit_rx_pending(const struct vsock_credit *c)
{
	return c->rx_cnt - c->fwd_cnt;
}

/* Accepts a guest RW of n payload bytes. Returns 0, or -1 if the guest
 * overran the buffer we advertised (rx_cnt - fwd_cnt would exceed
 * buf_alloc): a protocol violation, the caller resets the connection;
 * nothing is counted then. Checked against our real free space, which is
 * never less than what the guest was told (fwd_cnt only grows), so a
 * guest obeying any header we sent always passes. */
static inline int vsock_credit_rx(struct vsock_credit *c, uint32_t n)
{
	if (n > c->buf_alloc - vsock_credit_rx_pending(c))
		return -1;
	c->rx_cnt += n;
	return 0;
}

/* Records n held bytes written to the host socket. Returns false (and
 * counts nothing) if n exceeds what is held: a bug in the caller. */
static inline bool vsock_credit_consumed(struct vsock_credit *c, uint32_t n)
{
	if (n > vsock_credit_rx_pending(c))
		return false;
	c->fwd_cnt += n;
	return true;
}

/* Fills the credit fields of a header we are about to send, and remembers
 * what the guest now knows. Call it for every packet to the guest. */
static inline void vsock_credit_advertise(struct vsock_credit *c,
					  uint32_t *buf_alloc,
					  uint32_t *fwd_cnt)
{
	*buf_alloc = c->buf_alloc;
	*fwd_cnt = c->fwd_cnt;
	c->adv_fwd_cnt = c->fwd_cnt;
}

/* What of our buffer the guest may fill at once. Linux caps a sender's
 * bytes in flight at its own socket's buf_alloc as well as its peer's
 * ("cap TX credit to local buffer size", 6.12.69 and the 6.1 stable
 * series), so with a buffer larger than the guest's, the guest stops at
 * its own size: an update timed on our buffer alone would never come and
 * the stream would stall there for good. Before the guest advertised
 * anything (peer_buf_alloc 0), our buffer. */
static inline uint32_t vsock_credit_window(const struct vsock_credit *c)
{
	return c->peer_buf_alloc && c->peer_buf_alloc < c->buf_alloc
		       ? c->peer_buf_alloc
		       : c->buf_alloc;
}

/* Free space as the guest computes it from our last header, within the
 * window: window - (its tx_cnt, i.e. our rx_cnt, - the fwd_cnt it saw). */
static inline uint32_t vsock_credit_guest_view(const struct vsock_credit *c)
{
	uint32_t used = c->rx_cnt - c->adv_fwd_cnt;
	uint32_t window = vsock_credit_window(c);

	return used >= window ? 0 : window - used;
}

/* The free space below which an update goes out unprompted. */
static inline uint32_t
vsock_credit_update_threshold(const struct vsock_credit *c)
{
	return c->update_threshold ? c->update_threshold
				   : vsock_credit_window(c) / 4;
}

/* True if a CREDIT_UPDATE should go out unprompted: the guest believes it
 * has less than the threshold left, and we have consumed bytes it has not
 * heard of (otherwise an update would tell it nothing new). */
static inline bool vsock_credit_update_needed(const struct vsock_credit *c)
{
	return c->fwd_cnt != c->adv_fwd_cnt &&
	       vsock_credit_guest_view(c) < vsock_credit_update_threshold(c);
}

/* True if we have no credit and have not asked for more since we last
 * had some: send one CREDIT_REQUEST, not one per wake-up. Linux sends
 * updates on its own as it reads, so this is the fallback. */
static inline bool vsock_credit_request_needed(const struct vsock_credit *c)
{
	return !c->requested && vsock_credit_peer_free(c) == 0;
}

static inline void vsock_credit_mark_requested(struct vsock_credit *c)
{
	c->requested = true;
}

#endif
