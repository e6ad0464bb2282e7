/* A packet from the guest on its connection; see conn_from_guest.h. */
#include "devices/vsock/conn_from_guest.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "devices/vsock/connection_internal.h"
#include "util/iov.h"

/* Queues an unprompted CREDIT_UPDATE when the guest is about to stall;
 * not once it said it will send no more (the update would be noise). */
static void conn_credit_check(struct vsock_conn *c)
{
	if (!(c->peer_shut & VSOCK_SHUTDOWN_SEND) &&
	    vsock_credit_update_needed(&c->credit))
		c->pending |= VSOCK_RXOP_CREDIT_UPDATE;
}

static ssize_t host_send(struct vsock_conn *c, struct iovec *iov, unsigned n,
			 int flags)
{
	struct msghdr msg = { .msg_iov = iov, .msg_iovlen = n };
	ssize_t r;

	do
		r = sendmsg(c->fd, &msg, IO_FLAGS | flags);
	while (r < 0 && errno == EINTR);
	return r;
}

/* Writes guest data to the host socket and counts what it took as
 * consumed (it then frees guest credit). Returns the bytes taken, 0 if the
 * socket is full, or -1 if the write failed and the connection is killed. */
static ssize_t host_write_data(struct vsock_conn *c, struct iovec *iov,
			       unsigned n)
{
	/* Behind held chains, every send is measured (tx_splice.h). */
	uint64_t before = c->held.n ? vsock_splice_outq(c->fd) : 0;
	ssize_t w = host_send(c, iov, n, 0);

	if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
		return 0;
	if (w < 0) {
		vsock_conn_kill(c, true, "host write failed");
		return -1;
	}
	if (c->held.n)
		vsock_held_grew(&c->held, c->fd, before);
	vsock_credit_consumed(&c->credit, (uint32_t)w);
	if (c->vm_stats)
		c->vm_stats->tx_bytes_copied += (uint64_t)w;
	return w;
}

/* Copies [off, off + len) of the chain's readable part to the ring's
 * tail, allocating the ring on first use. The caller checked that it fits
 * (the credit guarantees it). */
static int ring_push(struct vsock_conn *c, const struct vmio_chain *tx,
		     uint64_t off, uint32_t len)
{
	struct vmio_iov_cursor src, dst;
	struct iovec space[2];

	if (len > vmio_byte_ring_room(&c->ring))
		return -1;
	if (!c->ring.buf) {
		c->ring.buf = malloc(c->ring.size);
		if (!c->ring.buf)
			return -1;
	}
	if (c->type == VSOCK_TYPE_SEQPACKET &&
	    vsock_seq_ends_alloc(&c->seq, c->ring.size))
		return -1;
	vmio_iov_cursor_init(&dst, space,
			     vmio_byte_ring_space(&c->ring, len, space));
	vmio_iov_cursor_init(&src, tx->iov, tx->nout);
	vmio_iov_cursor_skip(&src, off);
	if (vmio_iov_cursor_copy(&dst, &src) != len)
		return -1; /* the parser checked len; cannot happen */
	vmio_byte_ring_produced(&c->ring, len);
	return 0;
}

/* ---- Seqpacket, guest -> host ------------------------------------------ */

/* One whole message to the host socket. Returns 1 when it went, 0 when
 * the socket is full (nothing went: AF_UNIX seqpacket sends all or
 * nothing), -1 once the connection is killed. */
static int seq_send(struct vsock_conn *c, struct iovec *iov, unsigned n,
		    uint32_t len, bool eor)
{
	ssize_t w = host_send(c, iov, n, eor ? MSG_EOR : 0);

	if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
		return 0;
	if (w != (ssize_t)len) {
		conn_log(c, VMIO_LOG_WARN,
			 "vsock: conn %u:%u: host socket refused a message of "
			 "%u bytes: %s; RST",
			 c->local_port, c->peer_port, len,
			 w < 0 ? strerror(errno) : "partial write");
		vsock_conn_kill(c, true, "host write failed");
		return -1;
	}
	vsock_credit_consumed(&c->credit, len);
	return 1;
}

/* Sends the complete messages waiting in the ring, oldest first, until
 * the host socket is full. */
static void seq_flush(struct vsock_conn *c)
{
	while (c->seq.msgs) {
		bool eor;
		uint32_t len = vsock_seq_first(&c->seq, &c->ring, &eor);
		struct iovec iov[2];
		unsigned n = vmio_byte_ring_data(&c->ring, len, iov);

		if (seq_send(c, iov, n, len, eor) <= 0)
			return;
		vsock_seq_sent_first(&c->seq, &c->ring, len);
	}
}

/* The guest will send no more: a message it never finished cannot be
 * delivered (a part is not a message), so its bytes are dropped. */
static void seq_drop_partial(struct vsock_conn *c)
{
	uint32_t n;

	if (!c->seq.partial)
		return;
	n = vsock_seq_drop_partial(&c->seq, &c->ring);
	conn_log(c, VMIO_LOG_DEBUG,
		 "vsock: conn %u:%u: guest shut down sending within a "
		 "message; its %u bytes dropped",
		 c->local_port, c->peer_port, n);
	vsock_credit_consumed(&c->credit, n);
}

/* A whole message in one packet with nothing waiting before it: straight
 * from guest memory. Returns as seq_send; 0 also when the payload spans
 * more iovecs than one call takes (it then goes through the ring). */
static int seq_send_direct(struct vsock_conn *c, const struct vsock_pkt *pkt,
			   const struct vmio_chain *tx, bool eor)
{
	struct iovec iov[CONN_IOV];
	size_t covered;
	unsigned n;

	n = vmio_iov_slice(tx->iov, tx->nout, pkt->payload_off,
			    pkt->payload_len, iov, CONN_IOV, &covered);
	if (covered < pkt->payload_len)
		return 0;
	return seq_send(c, iov, n, pkt->payload_len, eor);
}

/* Guest RW on a seqpacket connection: the payload joins the message being
 * gathered; at EOM the message is complete and goes to the host whole. */
static void seq_rw_from_guest(struct vsock_conn *c, const struct vsock_pkt *pkt,
			      const struct vmio_chain *tx)
{
	uint32_t len = pkt->payload_len;
	bool eom = pkt->hdr.flags & VSOCK_SEQ_EOM;
	bool eor = pkt->hdr.flags & VSOCK_SEQ_EOR;
	int r;

	/* Credit bounds what we hold, partial message included: a message
	 * longer than buf_alloc is always an overrun, never a split. */
	if (vsock_credit_rx(&c->credit, len)) {
		vsock_conn_kill(c, true, "guest overran its credit");
		return;
	}
	if (!len && !(eom && c->seq.partial)) {
		if (eom)
			conn_log(c, VMIO_LOG_DEBUG,
				 "vsock: conn %u:%u: empty guest message not "
				 "carried", c->local_port, c->peer_port);
		return;
	}
	if (eom && vmio_byte_ring_empty(&c->ring)) {
		r = seq_send_direct(c, pkt, tx, eor);
		if (r < 0)
			return;
		if (r > 0) {
			conn_credit_check(c);
			return;
		}
	}
	if (len && ring_push(c, tx, pkt->payload_off, len)) {
		vsock_conn_kill(c, true, "cannot buffer guest data");
		return;
	}
	c->seq.partial += len;
	/* The message fills the whole buffer and has not ended: it is longer
	 * than any we take (the guest ignored our buf_alloc, which Linux
	 * checks: EMSGSIZE), and waiting would only stall the guest. */
	if (!eom && c->seq.partial == c->ring.size) {
		conn_log(c, VMIO_LOG_WARN,
			 "vsock: conn %u:%u: guest message longer than the "
			 "%u bytes allowed; refused, RST",
			 c->local_port, c->peer_port, (uint32_t)c->ring.size);
		vsock_conn_kill(c, true, "guest message too large");
		return;
	}
	if (eom) {
		vsock_seq_end_msg(&c->seq, &c->ring, eor);
		seq_flush(c);
		if (c->state != VSOCK_CONN_ESTABLISHED)
			return;
	}
	conn_credit_check(c);
}

/* Guest RW payload: straight from guest memory to the host socket; what
 * it does not take now waits in the ring. Data already waiting goes
 * first, so with a non-empty ring everything is appended behind it. */
/* Sends by reference what the socket takes of iov[0..n) (covered
 * bytes). Returns as host_write_data; the bytes are not consumed yet. */
static ssize_t host_splice_data(struct vsock_conn *c, struct iovec *iov,
				unsigned n, size_t covered)
{
	uint64_t before = vsock_splice_outq(c->fd);
	ssize_t w = vsock_splice_send(c->splice, c->fd, iov, n, covered);

	if (w < 0) {
		vsock_conn_kill(c, true, "host write failed");
		return -1;
	}
	if (w > 0) {
		vsock_held_grew(&c->held, c->fd, before);
		if (c->vm_stats)
			c->vm_stats->tx_bytes_spliced += (uint64_t)w;
	}
	return w;
}

/* May this packet's payload go by reference? A chain is held only when
 * the guest gave it as readable memory the socket can pin, the ring is
 * empty (data waiting there goes first) and there is room to keep it. */
/* Below this payload a packet is copied even where it could be spliced:
 * vmsplice, splice and the two SIOCOUTQ reads (and a held chain) cost
 * more than copying a few KiB. Measured, interleaved against the copy
 * path: 4 KiB packets guest to host ran at 0.79 of it spliced (0.94
 * against 0.66 vmio CPU s/GiB), 64 B ones at 0.62. */
#define CONN_SPLICE_MIN_BYTES (16u * 1024)

static bool may_splice(const struct vsock_conn *c, bool may_hold,
		       uint32_t len)
{
	return may_hold && c->splice && vmio_byte_ring_empty(&c->ring) &&
	       c->held.cap &&
	       c->held.n < c->held.cap && len >= CONN_SPLICE_MIN_BYTES;
}

/* Returns true if the chain is held. */
static bool conn_rw_from_guest(struct vsock_conn *c,
			       const struct vsock_pkt *pkt,
			       const struct vmio_chain *tx, bool may_hold)
{
	uint32_t len = pkt->payload_len, done = 0, spliced = 0;
	bool zc;

	if (c->peer_shut & VSOCK_SHUTDOWN_SEND) {
		vsock_conn_kill(c, true, "RW after SHUTDOWN(SEND)");
		return false;
	}
	if (c->type == VSOCK_TYPE_SEQPACKET) {
		seq_rw_from_guest(c, pkt, tx);
		return false;
	}
	if (!len)
		return false;
	if (vsock_credit_rx(&c->credit, len)) {
		vsock_conn_kill(c, true, "guest overran its credit");
		return false;
	}
	zc = may_splice(c, may_hold, len);
	if (!zc && may_hold && c->splice && c->vm_stats &&
	    vmio_byte_ring_empty(&c->ring) &&
	    len >= CONN_SPLICE_MIN_BYTES)
		c->vm_stats->tx_hold_full++;
	while (vmio_byte_ring_empty(&c->ring) && done < len) {
		struct iovec iov[CONN_IOV];
		size_t covered;
		unsigned n;
		ssize_t w;

		n = vmio_iov_slice(tx->iov, tx->nout, pkt->payload_off + done,
				    len - done, iov, CONN_IOV, &covered);
		if (!n)
			break; /* the parser checked len; cannot happen */
		w = zc ? host_splice_data(c, iov, n, covered)
		       : host_write_data(c, iov, n);
		if (w < 0)
			return false;
		done += (uint32_t)w;
		if (zc)
			spliced += (uint32_t)w;
		if ((size_t)w < covered)
			break; /* socket full */
	}
	if (spliced && !vsock_held_push(&c->held, tx->head, spliced)) {
		/* No room to remember it (allocation failed): the host may
		 * read pages the guest reuses, so the flow cannot go on. */
		vsock_conn_kill(c, true, "cannot keep a spliced chain");
		return false;
	}
	if (done < len &&
	    ring_push(c, tx, pkt->payload_off + done, len - done)) {
		vsock_conn_kill(c, true, "cannot buffer guest data");
		return spliced != 0;
	}
	conn_credit_check(c);
	return spliced != 0;
}

unsigned vsock_conn_tx_release(struct vsock_conn *c, uint16_t heads[],
			       unsigned max, bool force)
{
	struct vsock_tx_held h;
	uint64_t outq = 0;
	unsigned k = 0;

	if (!c->held.n)
		return 0;
	/* A closed socket holds nothing of ours any more. */
	if (c->fd < 0)
		force = true;
	if (!force)
		outq = vsock_splice_outq(c->fd);
	while (k < max && vsock_held_pop(&c->held, outq, force, &h)) {
		heads[k++] = h.head;
		vsock_credit_consumed(&c->credit, h.bytes);
	}
	if (k && c->state == VSOCK_CONN_ESTABLISHED) {
		conn_credit_check(c);
		vsock_conn_maybe_close(c);
	}
	return k;
}

void vsock_conn_flush(struct vsock_conn *c)
{
	if (c->state != VSOCK_CONN_ESTABLISHED)
		return;
	if (c->type == VSOCK_TYPE_SEQPACKET) {
		seq_flush(c);
		if (c->state != VSOCK_CONN_ESTABLISHED)
			return;
	}
	while (c->type == VSOCK_TYPE_STREAM &&
	       !vmio_byte_ring_empty(&c->ring)) {
		struct iovec iov[2];
		unsigned n = vmio_byte_ring_data(&c->ring, SIZE_MAX, iov);
		ssize_t w;

		w = host_write_data(c, iov, n);
		if (w < 0)
			return;
		if (w == 0)
			break;
		vmio_byte_ring_consumed(&c->ring, (size_t)w);
	}
	/* Half-close only behind the data: the host reader must see every
	 * byte the guest sent before its EOF. */
	if (vmio_byte_ring_empty(&c->ring) &&
	    (c->peer_shut & VSOCK_SHUTDOWN_SEND) &&
	    !c->host_shut_wr) {
		shutdown(c->fd, SHUT_WR);
		c->host_shut_wr = true;
	}
	conn_credit_check(c);
	vsock_conn_maybe_close(c);
}

/* LOCAL_INIT -> ESTABLISHED: tell the host program which port it got,
 * as Firecracker does. A socket that cannot take a dozen bytes of a fresh
 * connection is broken or hostile: reset. */
static void conn_established_local(struct vsock_conn *c)
{
	char line[32];
	int n = snprintf(line, sizeof(line), "OK %u\n", c->local_port);
	struct iovec iov = { .iov_base = line, .iov_len = (size_t)n };

	c->state = VSOCK_CONN_ESTABLISHED;
	if (host_send(c, &iov, 1, 0) != n)
		vsock_conn_kill(c, true, "cannot write OK line");
}

/* SHUTDOWN: flags are permanent, so OR them in. RCV: drop what we would
 * read for the guest. SEND: credit is moot from now on, and SHUT_WR
 * follows once the buffer drains (flush does it, and may close). */
static void conn_shutdown_from_guest(struct vsock_conn *c, uint32_t flags)
{
	c->peer_shut |= flags & VSOCK_SHUTDOWN_MASK;
	if (c->peer_shut & VSOCK_SHUTDOWN_SEND) {
		c->pending &= ~VSOCK_RXOP_CREDIT_UPDATE;
		seq_drop_partial(c);
	}
	if (c->peer_shut & VSOCK_SHUTDOWN_RCV) {
		c->merge_hold = false;
		c->pending &= ~(VSOCK_RXOP_RW | VSOCK_RXOP_CREDIT_REQUEST |
				VSOCK_RXOP_SHUTDOWN);
	}
	vsock_conn_flush(c);
}

/* A packet on an established flow. Every guest header carries its
 * credit. Returns true if the chain is held. */
static bool conn_established_from_guest(struct vsock_conn *c,
					const struct vsock_pkt *pkt,
					const struct vmio_chain *tx,
					bool may_hold)
{
	const struct vsock_hdr *h = &pkt->hdr;

	if (vsock_credit_peer_update(&c->credit, h->buf_alloc, h->fwd_cnt)) {
		vsock_conn_kill(c, true, "fwd_cnt ahead of what we sent");
		return false;
	}
	vsock_backlog_consumed(&c->backlog, c->credit.peer_fwd_cnt);
	if (vsock_conn_guest_room(c))
		c->starve_seen = c->starve_due = false;
	/* The guest is reading again: what was held for merging goes. */
	if (c->merge_hold &&
	    vsock_backlog_len(&c->backlog) < VSOCK_CONN_MERGE_AFTER)
		vsock_conn_merge_release(c);
	switch (h->op) {
	case VSOCK_OP_RW:
		return conn_rw_from_guest(c, pkt, tx, may_hold);
	case VSOCK_OP_CREDIT_UPDATE:
		/* Credit taken above; EPOLLIN may come back on. */
		return false;
	case VSOCK_OP_CREDIT_REQUEST:
		c->pending |= VSOCK_RXOP_CREDIT_UPDATE;
		return false;
	case VSOCK_OP_SHUTDOWN:
		conn_shutdown_from_guest(c, h->flags);
		return false;
	default:
		/* A second REQUEST or a RESPONSE on a live flow. */
		vsock_conn_kill(c, true, "unexpected op when established");
		return false;
	}
}

bool vsock_conn_from_guest(struct vsock_conn *c, const struct vsock_pkt *pkt,
			   const struct vmio_chain *tx, bool may_hold)
{
	const struct vsock_hdr *h = &pkt->hdr;

	c->stats.packets_from_guest++;
	c->stats.bytes_from_guest += h->len;
	if (h->op == VSOCK_OP_RST)
		c->stats.rsts_received++;
	else if (h->op == VSOCK_OP_CREDIT_REQUEST)
		c->stats.credit_requests_received++;
	/* KILLED: the host side is gone. A guest RST ends our pending RST
	 * too (the flow is reset both ways); anything else is a packet
	 * that crossed our RST and is dropped. */
	if (c->state == VSOCK_CONN_KILLED) {
		if (h->op == VSOCK_OP_RST)
			c->pending = 0;
		return false;
	}
	/* RST in any live state: the guest reset the flow. Never answered. */
	if (h->op == VSOCK_OP_RST) {
		vsock_conn_kill(c, false, "guest RST");
		return false;
	}
	/* A different type on this port pair is a different flow the guest
	 * has no business mixing in. */
	if (h->type != c->type) {
		vsock_conn_kill(c, true, "wrong type");
		return false;
	}
	switch (c->state) {
	case VSOCK_CONN_LOCAL_INIT:
		/* We sent REQUEST: only RESPONSE (accept) or RST (refuse,
		 * above) may come back. */
		if (h->op != VSOCK_OP_RESPONSE) {
			vsock_conn_kill(c, true, "unexpected op before RESPONSE");
			return false;
		}
		vsock_credit_peer_init(&c->credit, h->buf_alloc, h->fwd_cnt);
		conn_established_local(c);
		return false;
	case VSOCK_CONN_PEER_INIT:
		/* Our RESPONSE has not gone out: the guest is still in
		 * connect() and has nothing else to say. */
		vsock_conn_kill(c, true, "op before our RESPONSE");
		return false;
	case VSOCK_CONN_ESTABLISHED:
		return conn_established_from_guest(c, pkt, tx, may_hold);
	case VSOCK_CONN_KILLED:
		break;
	}
	return false;
}

