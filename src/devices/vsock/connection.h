/* One vsock connection: the guest end named by (peer_port) and the host
 * end, an AF_UNIX socket, named by (local_port), joined by a state machine
 * that follows the virtio spec and Firecracker's csm. A stream connection
 * has a SOCK_STREAM host socket, a seqpacket one a SOCK_SEQPACKET socket.
 *
 * The connection never touches a virtqueue. The multiplexer pops guest tx
 * chains, parses them (vsock_pkt_parse_tx), finds the connection by port
 * pair and hands it the packet: that side, guest -> host, is
 * conn_from_guest.h's (what each op does, and data on its way to the host
 * socket). When the connection has something for the guest, the
 * multiplexer pops rx chains and has them filled: that side, host ->
 * guest, is conn_to_guest.h's, with the one priority table of what goes
 * first. This file keeps the states, their set-up and their end, and the
 * host socket's side: the multiplexer asks which epoll events to watch
 * (vsock_conn_epoll_events) after every call, and reports them back
 * (vsock_conn_host_readable here, vsock_conn_flush in conn_from_guest.h).
 *
 * States:
 *   LOCAL_INIT   host program connected and asked for a guest port; our
 *                REQUEST is pending or sent, the guest's RESPONSE awaited
 *   PEER_INIT    guest REQUEST accepted and the host socket connected;
 *                our RESPONSE is pending
 *   ESTABLISHED  data flows; half-close is tracked by peer_shut (SHUTDOWN
 *                flags the guest sent) and local_shut (those we sent),
 *                which is the "closing" part of Firecracker's states
 *   KILLED       the host fd is closed; an RST may still be pending. The
 *                multiplexer frees the connection once vsock_conn_is_dead
 *
 * Memory is bounded: the only allocation is the guest->host ring buffer of
 * exactly buf_alloc bytes, made the first time the host socket is full.
 *
 * Seqpacket (VSOCK_TYPE_SEQPACKET) keeps message boundaries both ways:
 *   guest -> host  RW packets are gathered until the one with EOM, and the
 *                  message goes to the host socket in one sendmsg (MSG_EOR
 *                  when the guest set EOR). buf_alloc, and so the largest
 *                  message the guest may send (Linux refuses a longer one
 *                  with EMSGSIZE, against the peer's buf_alloc), is the
 *                  smaller of buf_size and what the host socket takes in
 *                  one message (its SO_SNDBUF less 32 bytes, raised to
 *                  buf_size where the system allows). Messages wait in the
 *                  ring, whole, with their ends in two bitmaps (EOM and
 *                  EOR, one bit per ring byte); a guest that overruns the
 *                  credit is reset as for streams, so nothing is ever
 *                  split or cut.
 *   host -> guest  each host message is read whole (recvmsg, MSG_TRUNC)
 *                  into a buffer of buf_alloc bytes, then sent as RW
 *                  packets as credit and rx buffers allow, EOM on the last
 *                  (EOR too if recvmsg reported MSG_EOR). A message larger
 *                  than the guest's buf_alloc (it could never take it: a
 *                  Linux guest holds a message until its EOM) or than our
 *                  buf_alloc is refused: logged, and the connection reset.
 *   Empty messages are not carried: on an AF_UNIX socket a zero-length
 *   read is end of stream, and Linux never sends one to the device. */
#ifndef VMIO_DEVICES_VSOCK_CONNECTION_H
#define VMIO_DEVICES_VSOCK_CONNECTION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "devices/vsock/credit.h"
#include "devices/vsock/guest_backlog.h"
#include "devices/vsock/packet.h"
#include "devices/vsock/seqpacket.h"
#include "devices/vsock/stats.h"
#include "devices/vsock/tx_splice.h"
#include "util/byte_ring.h"

struct vmio_ratelimit;

enum vsock_conn_state {
	VSOCK_CONN_LOCAL_INIT,
	VSOCK_CONN_PEER_INIT,
	VSOCK_CONN_ESTABLISHED,
	VSOCK_CONN_KILLED,
};

/* Pending packets for the guest, like vhost-device-vsock's rxops. Sent in
 * the order of connection.c's priority table (conn_next_to_guest). */
#define VSOCK_RXOP_REQUEST (1u << 0)
#define VSOCK_RXOP_RESPONSE (1u << 1)
#define VSOCK_RXOP_RST (1u << 2)
#define VSOCK_RXOP_CREDIT_UPDATE (1u << 3)
#define VSOCK_RXOP_RW (1u << 4)       /* host socket reported readable */
#define VSOCK_RXOP_SHUTDOWN (1u << 5) /* host EOF seen: SHUTDOWN(SEND) */
#define VSOCK_RXOP_CREDIT_REQUEST (1u << 6)

struct vsock_conn {
	uint64_t guest_cid;
	uint16_t type;       /* VSOCK_TYPE_STREAM or VSOCK_TYPE_SEQPACKET */
	uint32_t local_port; /* host side: src_port of what we send */
	uint32_t peer_port;  /* guest side: dst_port of what we send */
	int fd;              /* host stream socket, owned; -1 once closed */
	enum vsock_conn_state state;
	unsigned pending;    /* VSOCK_RXOP_* */
	uint32_t peer_shut;  /* SHUTDOWN flags received from the guest */
	uint32_t local_shut; /* SHUTDOWN flags sent to the guest */
	bool host_eof;       /* read() on fd returned 0 */
	bool host_shut_wr;   /* shutdown(fd, SHUT_WR) done */
	struct vsock_credit credit;
	/* Out of guest credit with host data waiting, seen at one tick
	 * (starve_seen) and still at the next (starve_due: a CREDIT_REQUEST
	 * may go). */
	bool starve_seen, starve_due;
	/* Our data packets the guest holds unread: what keeps us within a
	 * Linux guest's packet limit, and tells when it fell behind. */
	struct vsock_backlog backlog;
	/* Stream: host data is left in the host socket to be merged with
	 * what follows (vsock_conn_host_readable); to_guest_pkt_cap is the
	 * payload the guest's last rx packet could take. */
	bool merge_hold;
	uint32_t to_guest_pkt_cap;
	/* Bytes the host socket holds at least: the last FIONREAD's answer
	 * less what was read since. Only vmio reads the socket, so it never
	 * overstates, and while it covers a packet no FIONREAD is needed. */
	uint32_t host_inq_floor;

	/* Guest data the host socket has not taken yet. Its length always
	 * equals vsock_credit_rx_pending(&credit), so the credit we give
	 * the guest is what bounds it. Its size is credit.buf_alloc; buf is
	 * NULL until the first byte has to wait. */
	struct vmio_byte_ring ring;

	/* Seqpacket only: the ring's message ends and the host message
	 * being sent (seqpacket.h), each made on first use. */
	struct vsock_seq seq;

	/* Zero-copy guest->host (stream only; set by the multiplexer after
	 * init, NULL: the copy path), and the chains the host socket holds
	 * by reference (tx_splice.h; its bound set by the multiplexer with
	 * vsock_held_set_cap). */
	struct vsock_splice *splice;
	struct vsock_vm_stats *vm_stats; /* may be NULL */
	/* The VM's limiter for the lines a peer can trigger (peer_log.h);
	 * NULL: one of the thread's own. Set by the multiplexer. */
	struct vmio_ratelimit *rl;
	struct vsock_held_chains held;

	bool guest_initiated; /* by vsock_conn_init_peer */
	struct vsock_conn_stats stats;
};

/* Host-initiated connection: a host program asked (CONNECT <peer_port>)
 * for a connection to the guest; local_port is the host-side port the
 * multiplexer allocated. A REQUEST is queued for the guest. Takes
 * ownership of fd. buf_size is our buf_alloc (--tx-buffer-size), > 0. */
void vsock_conn_init_local(struct vsock_conn *c, uint64_t guest_cid,
			   uint32_t local_port, uint32_t peer_port, int fd,
			   uint32_t buf_size);

/* Guest-initiated connection: the guest sent `req` (a parsed REQUEST) and
 * the multiplexer connected fd to the host service. A RESPONSE is queued
 * and the guest's credit taken from the request. Takes ownership of fd. */
void vsock_conn_init_peer(struct vsock_conn *c, uint64_t guest_cid,
			  const struct vsock_hdr *req, int fd,
			  uint32_t buf_size);

/* Makes a connection just set up by vsock_conn_init_local a seqpacket one
 * (vsock_conn_init_peer takes the type from the REQUEST). Sizes buf_alloc
 * to the largest message the host socket takes (see above). */
void vsock_conn_set_seqpacket(struct vsock_conn *c);

/* Closes the fd and frees the ring. Sends nothing. Held chains are
 * forgotten: release them first. */
void vsock_conn_destroy(struct vsock_conn *c);

/* What a guest packet costs in its buffer (guest_backlog.h; 0: no packet
 * bound and no merging). Right after init; the default is
 * VSOCK_BACKLOG_OVERHEAD_DEFAULT. A change forgets the packets
 * remembered; the same overhead keeps them. */
void vsock_conn_set_packet_overhead(struct vsock_conn *c, uint32_t overhead);

/* The multiplexer saw EPOLLIN (hangup: HUP, RDHUP or ERR) on the fd:
 * data, EOF or an error waits to be read into an rx chain.
 *
 * Stream data is read at once, unless the guest has fallen behind (it
 * holds VSOCK_CONN_MERGE_AFTER or more of our packets unread) and the
 * socket has less than a full packet: then it stays in the host socket
 * (merge_hold), so that a host writing small pieces to a guest that is
 * not reading fills the guest's buffers instead of its packet limit. The
 * hold ends when the socket has a packet's worth (the fd is watched
 * edge-triggered meanwhile, so each new write is looked at once), when
 * the guest reads (any header whose fwd_cnt brings it below the mark), at
 * the next tick (at most about 100 ms), or at a hangup. A connection whose
 * guest keeps up never holds: a lone small write goes out at once. */
void vsock_conn_host_readable(struct vsock_conn *c, bool hangup);

/* Guest packets unread from which stream data is merged (above). */
#define VSOCK_CONN_MERGE_AFTER 8

/* The multiplexer ticks (vsock_conn_tick) while this holds: host data
 * waits for credit and a CREDIT_REQUEST may be due (no byte credit and
 * none asked for yet, or the guest holds as many packets as it takes:
 * asked again every other tick, since a Linux guest that reads part of
 * its queue says nothing), or host data is held for merging. */
bool vsock_conn_wants_tick(const struct vsock_conn *c);
/* One tick of the multiplexer's timer (about 100 ms). */
void vsock_conn_tick(struct vsock_conn *c);

/* Epoll events the host fd needs now (EPOLLIN / EPOLLOUT, possibly 0):
 *   EPOLLIN   established, guest may still receive, host not at EOF, the
 *             guest has credit, and no readable report is pending already
 *             (that one waits for an rx buffer; watching EPOLLIN meanwhile
 *             would wake the loop for nothing, level-triggered); with
 *             EPOLLRDHUP and EPOLLET while held for merging
 *   EPOLLOUT  only while buffered guest data waits (vhost-device-vsock
 *             #800: an always-armed EPOLLOUT burns a CPU) */
uint32_t vsock_conn_epoll_events(const struct vsock_conn *c);

/* True once the connection is killed and its RST (if any) went out: the
 * multiplexer removes it from its table and calls vsock_conn_destroy. */
static inline bool vsock_conn_is_dead(const struct vsock_conn *c)
{
	return c->state == VSOCK_CONN_KILLED && !c->pending;
}

const char *vsock_conn_state_name(enum vsock_conn_state s);

#endif
