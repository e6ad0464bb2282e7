/* A connection's host -> guest side: what it sends the guest next and
 * writing it into rx chains. The order of what goes first is one
 * priority table (conn_to_guest.c, conn_next_to_guest), which the writer
 * and every question below ask. The state machine and the guest -> host
 * side are connection.h's. */
#ifndef VMIO_DEVICES_VSOCK_CONN_TO_GUEST_H
#define VMIO_DEVICES_VSOCK_CONN_TO_GUEST_H

#include <stdint.h>

#include "devices/vsock/connection.h"
#include "virtio/virtqueue.h"

/* VSOCK_RXOP_* bits of packets that vsock_conn_to_guest would send now.
 * RW appears only while the guest has credit; without credit the pending
 * read turns into a single CREDIT_REQUEST, once the guest stayed without
 * for a whole tick (vsock_conn_tick). 0 means: do not pop an rx chain for
 * this connection.
 *
 * Why wait: a guest that behaves like Linux sends a CREDIT_UPDATE by
 * itself whenever it reads while our view of its free space is below 64
 * KiB, which zero credit always is; asking at once, as we did, cost a
 * CREDIT_REQUEST and the guest's answer for every 140 KiB of a bulk
 * transfer (about 7,700 a GiB into 4 KiB buffers) and told it nothing.
 * The request is for a guest that does not update unprompted. */
unsigned vsock_conn_pending_to_guest(const struct vsock_conn *c);

/* Host->guest data is read in batches: one recvmsg spread over several
 * rx chains, each of which becomes an ordinary RW packet of its own. A
 * Linux guest posts 4 KiB rx buffers, so reading one chain at a time
 * costs a syscall per 4 KiB; a batch reads up to this many payload bytes
 * at once (Linux's largest packet, so a batch is no bigger than one packet
 * into a guest that posts 64 KiB buffers). */
#define VSOCK_CONN_TO_GUEST_BATCH_BYTES (64u * 1024u)

/* Payload bytes a batch would read now: min(guest credit,
 * VSOCK_CONN_TO_GUEST_BATCH_BYTES) when the next packet
 * vsock_conn_to_guest would send is RW, else 0 (send single packets
 * then). The multiplexer pops rx chains until their capacity covers
 * this. */
uint32_t vsock_conn_to_guest_batch_bytes(const struct vsock_conn *c);

/* Payload bytes the next packet may carry when it is RW, of either type:
 * min(guest credit, VSOCK_MAX_PKT_PAYLOAD); 0 when the next packet is no
 * RW. A mergeable packet (mrg_rx.h) is given buffers for this much. */
uint32_t vsock_conn_to_guest_want(const struct vsock_conn *c);

/* Writes what goes to the guest next into rx[0..n) (chains that passed
 * vsock_pkt_check_rx, in pop order; a single chain is a batch of one).
 * The order is the connection's one priority table (connection.c,
 * conn_next_to_guest): an RST if killed; REQUEST, RESPONSE,
 * CREDIT_UPDATE; host data (RW, or a CREDIT_REQUEST without credit);
 * SHUTDOWN. Each packet is a header, and for RW the data read with
 * recvmsg from the host socket straight into the chain after it (at most
 * max_payload bytes a chain, and never more than the guest's credit).
 * When the next packet is stream data and n > 1, one recvmsg spreads over
 * the payload areas of all the chains (at most
 * VSOCK_CONN_TO_GUEST_BATCH_BYTES and the credit), and each chain that
 * received data becomes a complete RW packet with its own header, credit
 * counted per packet. Chains are filled in order, so the used ones are
 * always rx[0..k): the caller pushes those and gives back rx[k..n) with
 * vmio_vq_unpop(vq, n - k). Otherwise rx[0] gets the one next packet (a
 * SHUTDOWN, an RST, ...) and k is 0 or 1. written[i] is the bytes written
 * to rx[i] (44 + payload) for i < k. Returns k (0: nothing to send, the
 * chains go back unused). */
unsigned vsock_conn_to_guest(struct vsock_conn *c,
			     const struct vmio_chain *const rx[], unsigned n,
			     uint32_t max_payload, uint32_t written[]);

#endif
