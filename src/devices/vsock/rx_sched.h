/* The rx scheduler: which source the guest's next rx packet comes from,
 * after Firecracker's muxer (its rxq of connections with something to
 * send, and RST ops before them). One rule for both rx layouts:
 *
 *   1. the RST queue (rst_queue.h), while it holds any: those RSTs answer
 *      packets of no connection, and tx waits while it is full;
 *   2. sibling VMs' packets (router.h) and the connections take turns:
 *      after a connection's packet a sibling packet goes, if one waits;
 *      either goes alone when the other has nothing;
 *   3. the connections in a FIFO: a connection with something pending
 *      joins at the tail, and one turn gives it one packet (or one batch
 *      of host data), so a bulk sender cannot starve the others.
 *
 * The FIFO links connections through a vsock_rx_link each embeds; it
 * knows nothing else of them. */
#ifndef VMIO_DEVICES_VSOCK_RX_SCHED_H
#define VMIO_DEVICES_VSOCK_RX_SCHED_H

#include <stdbool.h>

struct vsock_rx_link {
	struct vsock_rx_link *next;
	bool queued;
};

struct vsock_rx_sched {
	struct vsock_rx_link *head, *tail; /* connections with something */
	bool sib_turn; /* a sibling packet goes before the next connection's */
};

enum vsock_rx_source {
	VSOCK_RX_NONE,    /* nothing to send */
	VSOCK_RX_RST,     /* the RST queue's oldest */
	VSOCK_RX_SIBLING, /* the router's next packet for this VM */
	VSOCK_RX_CONN,    /* the connection at the FIFO's head */
};

/* Where the next packet comes from, given whether RSTs and sibling
 * packets wait. Asks only: vsock_rx_sched_take says it was sent. */
enum vsock_rx_source vsock_rx_sched_next(const struct vsock_rx_sched *s,
					 bool rst_waiting, bool sib_waiting);

/* The packet of src went to the guest: the turn passes. For
 * VSOCK_RX_CONN the connection leaves the FIFO and is returned (it joins
 * again at the tail if it has more); NULL otherwise. */
struct vsock_rx_link *vsock_rx_sched_take(struct vsock_rx_sched *s,
					  enum vsock_rx_source src);

/* The connection at the FIFO's head (NULL: none). */
static inline struct vsock_rx_link *
vsock_rx_sched_head(const struct vsock_rx_sched *s)
{
	return s->head;
}

/* A connection with something to send joins the tail, if not queued. */
void vsock_rx_sched_add(struct vsock_rx_sched *s, struct vsock_rx_link *l);
/* A connection leaves the FIFO wherever it is (it is being freed). */
void vsock_rx_sched_remove(struct vsock_rx_sched *s, struct vsock_rx_link *l);
/* The guest is gone: the first packet after a restart is a connection's,
 * if one waits. The FIFO is empty by then (every connection freed). */
void vsock_rx_sched_reset(struct vsock_rx_sched *s);

#endif
