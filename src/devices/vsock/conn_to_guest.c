/* A connection's host -> guest side; see conn_to_guest.h. */
#include "devices/vsock/conn_to_guest.h"

#include <errno.h>
#include <sys/socket.h>

#include "devices/vsock/connection_internal.h"
#include "util/iov.h"

/* iovecs of one batched host read (vsock_conn_to_guest): 64 KiB in 4 KiB
 * guest buffers is 16 chains of one or two iovecs each. A batch that
 * needs more reads less this time; the rest comes next turn. */
#define CONN_TO_GUEST_IOV 256

/* ---- What goes to the guest next: the priority table ------------------- */

/* What pending host data sends now: RW while the guest has credit, else a
 * CREDIT_REQUEST once it went without for a tick (RW stays pending for
 * when credit comes), else nothing. */
static unsigned conn_data_op(const struct vsock_conn *c)
{
	if (!(c->pending & VSOCK_RXOP_RW))
		return 0;
	if (vsock_conn_guest_room(c))
		return VSOCK_RXOP_RW;
	return vsock_conn_request_due(c) ? VSOCK_RXOP_CREDIT_REQUEST : 0;
}

/* The one place that orders what a connection sends the guest: a killed
 * connection its RST and nothing else; then the handshake; then a
 * CREDIT_UPDATE, since it is what unblocks a writing guest; then host
 * data (conn_data_op); then the SHUTDOWN of a host EOF. Returns the
 * VSOCK_RXOP_* bit of the next packet, 0 for none. Every question about
 * the next packet and the writer ask it. */
static unsigned conn_next_to_guest(const struct vsock_conn *c)
{
	unsigned p = c->pending, data;

	if (c->state == VSOCK_CONN_KILLED)
		return p & VSOCK_RXOP_RST;
	if (p & VSOCK_RXOP_REQUEST)
		return VSOCK_RXOP_REQUEST;
	if (p & VSOCK_RXOP_RESPONSE)
		return VSOCK_RXOP_RESPONSE;
	if (p & VSOCK_RXOP_CREDIT_UPDATE)
		return VSOCK_RXOP_CREDIT_UPDATE;
	data = conn_data_op(c);
	return data ? data : p & VSOCK_RXOP_SHUTDOWN;
}

unsigned vsock_conn_pending_to_guest(const struct vsock_conn *c)
{
	return (c->pending & ~VSOCK_RXOP_RW) | conn_data_op(c);
}

/* One read of host data into the memory msg describes, which spans
 * `covered` bytes (0 for a message: a short one says nothing about what
 * follows). Returns the bytes read (> 0; with MSG_TRUNC in flags, the
 * message's whole length), 0 with nothing to send (no data now, or EOF
 * which queued a SHUTDOWN), or -1 after killing the connection. */
static ssize_t conn_recv(struct vsock_conn *c, struct msghdr *msg, int flags,
			 size_t covered)
{
	ssize_t r;

	do
		r = recvmsg(c->fd, msg, IO_FLAGS | flags);
	while (r < 0 && errno == EINTR);
	if (c->vm_stats)
		c->vm_stats->rx_host_reads++;
	if (r > 0) {
		c->host_inq_floor = (size_t)r < c->host_inq_floor
					    ? c->host_inq_floor - (uint32_t)r
					    : 0;
		/* A short read means the socket is (very likely) drained:
		 * let epoll say when there is more rather than spend a
		 * syscall on EAGAIN. */
		if ((size_t)r < covered)
			c->pending &= ~VSOCK_RXOP_RW;
		return r;
	}
	c->pending &= ~VSOCK_RXOP_RW;
	if (r == 0) {
		c->host_eof = true;
		c->pending |= VSOCK_RXOP_SHUTDOWN;
		return 0;
	}
	if (errno == EAGAIN || errno == EWOULDBLOCK)
		return 0;
	vsock_conn_kill(c, true, "host read failed");
	return -1;
}

/* Reads host data straight into the chain after the header. Returns as
 * conn_recv; 0 too when the chain or the credit has no room. */
static ssize_t conn_read_host(struct vsock_conn *c,
			      const struct vmio_chain *rx, uint32_t max_payload)
{
	uint32_t cap = vsock_pkt_rx_capacity(rx, max_payload);
	uint32_t credit = vsock_conn_guest_room(c);
	struct iovec iov[CONN_IOV];
	size_t covered;
	unsigned n;

	c->to_guest_pkt_cap = cap;
	if (credit < cap)
		cap = credit;
	if (!cap)
		return 0;
	if (vsock_backlog_reserve(&c->backlog, 1)) {
		vsock_conn_kill(c, true, "cannot track the guest's packets");
		return -1;
	}
	n = vmio_iov_slice(rx->iov + rx->nout, rx->nin, VSOCK_HDR_SIZE, cap,
			    iov, CONN_IOV, &covered);
	if (!n)
		return 0;
	struct msghdr msg = { .msg_iov = iov, .msg_iovlen = n };

	return conn_recv(c, &msg, 0, covered);
}

/* ---- Seqpacket, host -> guest ------------------------------------------ */

/* Reads the next host message whole into its buffer (seqpacket.h).
 * Returns as conn_recv, or -1 after refusing a message the guest cannot
 * take. */
static ssize_t seq_load_msg(struct vsock_conn *c)
{
	uint32_t limit = vsock_credit_peer_buf(&c->credit);
	struct iovec iov;
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
	ssize_t r;

	iov.iov_base = vsock_seq_msg_buf(&c->seq, c->ring.size);
	if (!iov.iov_base) {
		vsock_conn_kill(c, true, "cannot buffer a host message");
		return -1;
	}
	iov.iov_len = c->ring.size;
	r = conn_recv(c, &msg, MSG_TRUNC, 0);
	if (r <= 0)
		return r;
	if (limit > c->ring.size)
		limit = (uint32_t)c->ring.size;
	if ((uint64_t)r > limit) {
		conn_log(c, VMIO_LOG_WARN,
			 "vsock: conn %u:%u: host message of %zd bytes is "
			 "larger than the %u bytes the guest can take as one "
			 "message; refused, connection reset",
			 c->local_port, c->peer_port, r, limit);
		vsock_conn_kill(c, true, "host message too large");
		return -1;
	}
	vsock_seq_msg_loaded(&c->seq, (uint32_t)r, msg.msg_flags & MSG_EOR);
	return r;
}

/* The next packet of the host message (reading one first if none is
 * under way) into the chain after the header, as much as the chain and the
 * credit take; *flags gets EOM (and EOR) on its last packet. Returns as
 * conn_read_host. */
static ssize_t seq_read_host(struct vsock_conn *c, const struct vmio_chain *rx,
			     uint32_t max_payload, uint32_t *flags)
{
	uint32_t cap = vsock_pkt_rx_capacity(rx, max_payload);
	uint32_t credit = vsock_conn_guest_room(c);
	ssize_t r;

	if (vsock_backlog_reserve(&c->backlog, 1)) {
		vsock_conn_kill(c, true, "cannot track the guest's packets");
		return -1;
	}
	if (!vsock_seq_msg_pending(&c->seq)) {
		r = seq_load_msg(c);
		if (r <= 0)
			return r;
	}
	if (credit < cap)
		cap = credit;
	return vsock_seq_msg_take(&c->seq, rx, cap, flags);
}

static size_t conn_emit(struct vsock_conn *c, const struct vmio_chain *rx,
			uint16_t op, uint32_t flags, uint32_t len)
{
	struct vsock_hdr h = {
		.src_cid = VSOCK_HOST_CID,
		.dst_cid = c->guest_cid,
		.src_port = c->local_port,
		.dst_port = c->peer_port,
		.len = len,
		.type = c->type,
		.op = op,
		.flags = flags,
	};

	vsock_credit_advertise(&c->credit, &h.buf_alloc, &h.fwd_cnt);
	if (vsock_pkt_write_hdr(rx, &h))
		return 0;
	if (c->vm_stats) {
		c->vm_stats->rx_packets++;
		c->vm_stats->rx_credit_requests += op == VSOCK_OP_CREDIT_REQUEST;
		c->vm_stats->rx_credit_updates += op == VSOCK_OP_CREDIT_UPDATE;
	}
	c->stats.packets_to_guest++;
	c->stats.bytes_to_guest += len;
	if (op == VSOCK_OP_RST)
		c->stats.rsts_sent++;
	else if (op == VSOCK_OP_CREDIT_REQUEST)
		c->stats.credit_requests_sent++;
	if (op == VSOCK_OP_RW && len) {
		vsock_backlog_push(&c->backlog, c->credit.tx_cnt);
		/* The data that used the guest's last credit, or its last
		 * packet: what waits now waits for it. */
		if (!vsock_credit_peer_free(&c->credit))
			c->stats.credit_stalls++;
		else if (vsock_conn_packet_bound(c))
			c->stats.packet_stalls++;
	}
	return VSOCK_HDR_SIZE + len;
}

/* Host data into rx: RW with what one read brought, the RST of a read
 * that killed the connection, or 0 with nothing read. */
static size_t conn_data_to_guest(struct vsock_conn *c,
				 const struct vmio_chain *rx,
				 uint32_t max_payload)
{
	uint32_t flags = 0;
	ssize_t n = c->type == VSOCK_TYPE_SEQPACKET
			    ? seq_read_host(c, rx, max_payload, &flags)
			    : conn_read_host(c, rx, max_payload);
	size_t w;

	if (n < 0) {
		/* Killed: its RST goes out in this chain. */
		c->pending = 0;
		return conn_emit(c, rx, VSOCK_OP_RST, 0, 0);
	}
	if (!n)
		return 0;
	vsock_credit_sent(&c->credit, (uint32_t)n);
	w = conn_emit(c, rx, VSOCK_OP_RW, flags, (uint32_t)n);
	vsock_conn_merge_recheck(c);
	return w;
}

/* The next packet (conn_next_to_guest) into one chain that passed
 * vsock_pkt_check_rx. Returns the bytes written (44 + payload), or 0 with
 * nothing to send (the chain goes back unused). */
static size_t conn_to_guest_one(struct vsock_conn *c,
				const struct vmio_chain *rx,
				uint32_t max_payload)
{
	size_t w;

	if (rx->in_len < VSOCK_HDR_SIZE)
		return 0;
	switch (conn_next_to_guest(c)) {
	case VSOCK_RXOP_RST:
		c->pending = 0;
		return conn_emit(c, rx, VSOCK_OP_RST, 0, 0);
	case VSOCK_RXOP_REQUEST:
		c->pending &= ~VSOCK_RXOP_REQUEST;
		return conn_emit(c, rx, VSOCK_OP_REQUEST, 0, 0);
	case VSOCK_RXOP_RESPONSE:
		c->pending &= ~VSOCK_RXOP_RESPONSE;
		c->state = VSOCK_CONN_ESTABLISHED;
		return conn_emit(c, rx, VSOCK_OP_RESPONSE, 0, 0);
	case VSOCK_RXOP_CREDIT_UPDATE:
		c->pending &= ~VSOCK_RXOP_CREDIT_UPDATE;
		return conn_emit(c, rx, VSOCK_OP_CREDIT_UPDATE, 0, 0);
	case VSOCK_RXOP_CREDIT_REQUEST:
		vsock_credit_mark_requested(&c->credit);
		c->starve_seen = c->starve_due = false;
		return conn_emit(c, rx, VSOCK_OP_CREDIT_REQUEST, 0, 0);
	case VSOCK_RXOP_RW:
		w = conn_data_to_guest(c, rx, max_payload);
		/* Nothing read and RW no longer pending (no data now, or
		 * an EOF whose SHUTDOWN is next): the next packet, if any,
		 * goes in this chain. */
		if (w || (c->pending & VSOCK_RXOP_RW))
			return w;
		return conn_next_to_guest(c) == VSOCK_RXOP_SHUTDOWN
			       ? conn_to_guest_one(c, rx, max_payload)
			       : 0;
	case VSOCK_RXOP_SHUTDOWN:
		c->pending &= ~VSOCK_RXOP_SHUTDOWN;
		c->local_shut |= VSOCK_SHUTDOWN_SEND;
		w = conn_emit(c, rx, VSOCK_OP_SHUTDOWN, VSOCK_SHUTDOWN_SEND, 0);
		vsock_conn_maybe_close(c);
		return w;
	}
	return 0;
}

uint32_t vsock_conn_to_guest_want(const struct vsock_conn *c)
{
	uint32_t credit;

	if (conn_next_to_guest(c) != VSOCK_RXOP_RW)
		return 0;
	credit = vsock_conn_guest_room(c);
	return credit < VSOCK_MAX_PKT_PAYLOAD ? credit : VSOCK_MAX_PKT_PAYLOAD;
}

/* A batch is at most one packet's worth (VSOCK_CONN_TO_GUEST_BATCH_BYTES is
 * VSOCK_MAX_PKT_PAYLOAD), so it is what the next packet may carry. */
_Static_assert(VSOCK_CONN_TO_GUEST_BATCH_BYTES == VSOCK_MAX_PKT_PAYLOAD,
	       "a batch is one packet's worth");

uint32_t vsock_conn_to_guest_batch_bytes(const struct vsock_conn *c)
{
	/* Seqpacket data goes a packet per turn, from the message buffer. */
	return c->type == VSOCK_TYPE_STREAM ? vsock_conn_to_guest_want(c) : 0;
}

/* conn_to_guest_one on rx[0], in the batch's calling convention. */
static unsigned conn_fill_one(struct vsock_conn *c,
			      const struct vmio_chain *rx,
			      uint32_t max_payload, uint32_t written[])
{
	size_t w = conn_to_guest_one(c, rx, max_payload);

	if (!w)
		return 0;
	written[0] = (uint32_t)w;
	return 1;
}

unsigned vsock_conn_to_guest(struct vsock_conn *c,
			     const struct vmio_chain *const rx[], unsigned n,
			     uint32_t max_payload, uint32_t written[])
{
	struct iovec iov[CONN_TO_GUEST_IOV];
	uint32_t want = vsock_conn_to_guest_batch_bytes(c), total = 0, left;
	uint32_t pkts = vsock_backlog_room(&c->backlog,
					   c->credit.peer_buf_alloc);
	unsigned niov = 0, nchains, i;
	ssize_t r;

	if (!n)
		return 0;
	/* Each chain is a packet of its own: no more than the guest's
	 * queue takes. */
	if (pkts < n)
		n = pkts;
	if (n <= 1 || !want)
		return conn_fill_one(c, rx[0], max_payload, written);
	if (vsock_backlog_reserve(&c->backlog, n))
		return conn_fill_one(c, rx[0], max_payload, written);
	c->to_guest_pkt_cap = vsock_pkt_rx_capacity(rx[0], max_payload);

	/* Describe the payload areas of the chains, in pop order, as one
	 * scatter list. Until the read, written[i] holds the payload bytes
	 * chain i can take. Stop at the first chain that takes nothing (no
	 * room after its header, or no iovecs left), so that the chains
	 * that receive data are always a prefix: only the last popped
	 * chains can be given back. */
	for (i = 0; i < n && total < want && niov < CONN_TO_GUEST_IOV; i++) {
		uint32_t cap = vsock_pkt_rx_capacity(rx[i], max_payload);
		size_t covered;

		if (cap > want - total)
			cap = want - total;
		if (!cap)
			break;
		niov += vmio_iov_slice(rx[i]->iov + rx[i]->nout, rx[i]->nin,
					VSOCK_HDR_SIZE, cap, iov + niov,
					CONN_TO_GUEST_IOV - niov, &covered);
		if (!covered)
			break;
		written[i] = (uint32_t)covered;
		total += (uint32_t)covered;
	}
	nchains = i;
	if (!total)
		return conn_fill_one(c, rx[0], max_payload, written);

	struct msghdr msg = { .msg_iov = iov, .msg_iovlen = niov };

	r = conn_recv(c, &msg, 0, total);
	if (r <= 0) {
		/* No data: RW is no longer pending, and rx[0] carries
		 * whatever now is (the RST of a failed read, the SHUTDOWN
		 * of an EOF), as a batch of one would have. */
		return conn_fill_one(c, rx[0], max_payload, written);
	}

	/* Each chain that got data is a complete RW packet: its own
	 * header, its own len, the credit counted and advertised per
	 * packet, exactly as if each had been read on its own. */
	left = (uint32_t)r;
	for (i = 0; i < nchains && left; i++) {
		uint32_t len = written[i] < left ? written[i] : left;

		vsock_credit_sent(&c->credit, len);
		written[i] = (uint32_t)conn_emit(c, rx[i], VSOCK_OP_RW, 0, len);
		left -= len;
	}
	vsock_conn_merge_recheck(c);
	return i;
}
