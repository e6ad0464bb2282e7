/* The sibling router: several VMs served by one `vmio vsock` process,
 * and the guest-to-guest packets between them.
 *
 * Design: packets are forwarded, not terminated. A guest packet whose
 * dst_cid is a sibling's CID is copied (header and payload) into that
 * sibling's inbound queue and written to its rx queue as it was sent:
 * ports, type, op, flags and the credit fields (buf_alloc, fwd_cnt) are
 * the sender's, unchanged, so credit is end to end between the two guest
 * drivers and vmio keeps no per-connection buffer for them. The only
 * rewrite is splitting: a payload larger than the receiver's rx buffer
 * goes out as several RW packets (len set per piece; on a seqpacket the
 * EOM/EOR flags ride on the last piece only), as Linux's vhost does.
 *
 * What vmio checks:
 *   - the sender: src_cid is the sending VM's own CID (the parser drops
 *     anything else), so no guest can send as another;
 *   - the route: the destination is another VM of this process, attached
 *     (its VMM negotiated features, the socket type among them), sharing
 *     at least one group with the sender; otherwise the sender gets an
 *     RST;
 *   - the flow: a REQUEST opens a sibling flow (at most max_flows per VM,
 *     counted against the VM that opened it, so that one guest cannot
 *     use up the flows another may open to a shared peer), every other op must belong to an open flow
 *     (else RST), and an RST closes it. Flows are tracked only so that
 *     a VM's end can reset them, and to bound what a guest can open.
 *
 * Isolation: each (receiver, sender) pair has its own queue, served in
 * turn with the other senders' (one packet each), and its own bound on
 * queued packets and bytes (VSOCK_ROUTER_PAIR_*). At the receiver's rx
 * queue, sibling packets take turns with its host connections. Credit keeps a well-behaved
 * pair far below it; a receiver that stops taking rx buffers (or a sender
 * that ignores credit) fills it, and then the packet that does not fit
 * costs its connection: the flow is reset on both sides (RST to the
 * sender now, to the receiver after what is queued). The sender's tx
 * queue is never stopped, so its other connections (to the host, to
 * other siblings) are not slowed by a stalled sibling, and one sender
 * cannot take another's share of a receiver.
 *
 * A VM whose VMM disconnects (vsock_router_vm_reset): every sibling flow
 * it had is reset on the other side, and its inbound queue is dropped.
 *
 * Threads: each VM lives on one worker (event/workers.h), and the router
 * is the one thing VMs on different workers share. A VM's calls
 * (vsock_router_forward as sender; rx_pending, fill_rx and vm_reset as
 * receiver) come from its own worker; a sender appends to the receiver's
 * queues under the receiver's lock and wakes it with vmio_defer_post,
 * and the flow table is locked in stripes. rx_pending takes no lock, so
 * a VM whose traffic is all to its own host sockets never takes one.
 * vsock_router_new, _link and _free are called with no worker running;
 * set_vm from the VM's worker or before the workers start. */
#ifndef VMIO_DEVICES_VSOCK_ROUTER_H
#define VMIO_DEVICES_VSOCK_ROUTER_H

#include <stdbool.h>
#include <stdint.h>

#include "devices/vsock/packet.h"
#include "event/loop.h"

/* Per (receiver, sender) pair: packets and payload bytes queued at most. */
#define VSOCK_ROUTER_PAIR_PKTS 4096u
#define VSOCK_ROUTER_PAIR_BYTES (4u << 20)

struct vsock_router;

/* A router for nvms VMs (indices 0..nvms-1), each allowed max_flows
 * sibling connections at once. NULL on allocation failure. */
struct vsock_router *vsock_router_new(unsigned nvms, unsigned max_flows);
/* Frees queued packets and flows; the VMs' wake-ups are not touched. */
void vsock_router_free(struct vsock_router *r);

/* VM idx has this CID; rx_wake (its muxer's, or NULL) is scheduled when a
 * packet comes to wait for it where none waited. */
void vsock_router_set_vm(struct vsock_router *r, unsigned idx, uint64_t cid,
			 struct vmio_defer *rx_wake);
/* Whether VM idx has a VMM attached, and the socket types (VSOCK_TYPE_BIT)
 * its driver negotiated: a packet for a VM with none is refused, and a
 * REQUEST of a type it does not take. Neither, to begin with. */
void vsock_router_set_vm_state(struct vsock_router *r, unsigned idx,
			       bool attached, unsigned types);
/* VMs a and b share a group: they may reach each other. */
void vsock_router_link(struct vsock_router *r, unsigned a, unsigned b);

/* A guest packet of VM `from` for a CID other than the host's. pkt was
 * parsed from ch; invalid says the parser's verdict was RST (the flow, if
 * one is open, is reset on the other side too). Returns 0 if it was
 * forwarded (or, being an RST with nowhere to go, dropped), or -1 with
 * *why set: the caller answers with an RST unless the packet is one. */
int vsock_router_forward(struct vsock_router *r, unsigned from,
			 const struct vsock_pkt *pkt,
			 const struct vmio_chain *ch, bool invalid,
			 const char **why);

/* Whether VM idx has sibling packets waiting for its rx queue. */
bool vsock_router_rx_pending(const struct vsock_router *r, unsigned idx);

/* Payload bytes left of VM idx's next sibling packet (0 if none, or one
 * with no payload): how many buffers a mergeable packet of it needs. */
uint32_t vsock_router_rx_next_len(struct vsock_router *r, unsigned idx);

/* Writes VM idx's next sibling packet (or the next piece of it) into an
 * rx chain checked by vsock_pkt_check_rx. Returns the bytes written
 * (header included), or 0 if the chain has no room for any payload of a
 * data packet (a broken driver: the caller breaks the queue). */
uint32_t vsock_router_fill_rx(struct vsock_router *r, unsigned idx,
			      const struct vmio_chain *ch);

/* VM idx's guest is gone: resets its sibling flows on the other side and
 * drops what was queued for it. */
void vsock_router_vm_reset(struct vsock_router *r, unsigned idx);

/* Sibling flows VM idx opened, for tests and statistics. */
unsigned vsock_router_flows(const struct vsock_router *r, unsigned idx);

#endif
