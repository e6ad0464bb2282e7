/* The per-connection state machine; see connection.h.
 *
 * All host socket I/O uses sendmsg/recvmsg with MSG_DONTWAIT, so the
 * connection never blocks whatever the fd's O_NONBLOCK, and MSG_NOSIGNAL,
 * so a host peer that went away is an EPIPE for this connection and not a
 * SIGPIPE for the process. */
#include "devices/vsock/connection.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "devices/vsock/peer_log.h"
#include "util/fd.h"
#include "util/iov.h"

/* iovecs per sendmsg/recvmsg: a 64 KiB payload in 4 KiB guest pages is
 * 16; more just takes another round of the loop. */
#define CONN_IOV 64

/* iovecs of one batched host read (vsock_conn_to_guest_batch): 64 KiB in
 * 4 KiB guest buffers is 16 chains of one or two iovecs each. A batch that
 * needs more reads less this time; the rest comes next turn. */
#define CONN_TO_GUEST_IOV 256

#define IO_FLAGS (MSG_DONTWAIT | MSG_NOSIGNAL)

/* The limiter of connections that were given none (vsock_conn.rl): one
 * per thread, as a connection lives on one. */
static _Thread_local struct vmio_ratelimit conn_rl_default =
	VMIO_RATELIMIT_INIT(10);

/* A line this connection's peers can trigger (peer_log.h). */
#define conn_log(c, level, ...)                                                \
	vsock_peer_log((c)->rl ? (c)->rl : &conn_rl_default, level,            \
		       __VA_ARGS__)

static void conn_merge_release(struct vsock_conn *c);

const char *vsock_conn_state_name(enum vsock_conn_state s)
{
	switch (s) {
	case VSOCK_CONN_LOCAL_INIT:
		return "local-init";
	case VSOCK_CONN_PEER_INIT:
		return "peer-init";
	case VSOCK_CONN_ESTABLISHED:
		return "established";
	case VSOCK_CONN_KILLED:
		return "killed";
	}
	return "?";
}

static void conn_init(struct vsock_conn *c, uint64_t guest_cid,
		      uint32_t local_port, uint32_t peer_port, int fd,
		      uint32_t buf_size)
{
	*c = (struct vsock_conn){
		.guest_cid = guest_cid,
		.type = VSOCK_TYPE_STREAM,
		.local_port = local_port,
		.peer_port = peer_port,
		.fd = fd,
		.to_guest_pkt_cap = VSOCK_MAX_PKT_PAYLOAD,
	};
	vmio_byte_ring_init(&c->ring, NULL, buf_size);
	vsock_credit_init(&c->credit, buf_size, 0);
	vsock_backlog_init(&c->backlog, VSOCK_BACKLOG_OVERHEAD_DEFAULT);
}

void vsock_conn_set_packet_overhead(struct vsock_conn *c, uint32_t overhead)
{
	vsock_backlog_init(&c->backlog, overhead);
}

/* No room for another packet in the guest's queue. A seqpacket message
 * under way whose packets are all the guest holds goes on to its EOM
 * regardless: the guest reads nothing of a message before its end, so
 * its fwd_cnt could not move and the bound would never open. Linux's own
 * limit takes any message that fits its buffer, in 4 KiB packets. */
static bool conn_packet_bound(const struct vsock_conn *c)
{
	if (c->seq.hmsg_off &&
	    vsock_backlog_len(&c->backlog) <= c->seq.hmsg_pkts)
		return false;
	return !vsock_backlog_room(&c->backlog, c->credit.peer_buf_alloc);
}

/* Payload bytes the guest takes in our next RW packet: its byte credit,
 * or none while it holds as many of our packets as it takes. */
static uint32_t conn_to_guest_room(const struct vsock_conn *c)
{
	return conn_packet_bound(c) ? 0 : vsock_credit_peer_free(&c->credit);
}

/* Whether a CREDIT_REQUEST would tell us something: no byte credit and
 * none asked for since we last had some, or at the packet bound (asked
 * again each time: credit.h's `requested` is about bytes). */
static bool conn_needs_request(const struct vsock_conn *c)
{
	return vsock_credit_request_needed(&c->credit) ||
	       (conn_packet_bound(c) && vsock_credit_peer_free(&c->credit));
}

void vsock_conn_init_local(struct vsock_conn *c, uint64_t guest_cid,
			   uint32_t local_port, uint32_t peer_port, int fd,
			   uint32_t buf_size)
{
	conn_init(c, guest_cid, local_port, peer_port, fd, buf_size);
	c->state = VSOCK_CONN_LOCAL_INIT;
	c->pending = VSOCK_RXOP_REQUEST;
}

void vsock_conn_init_peer(struct vsock_conn *c, uint64_t guest_cid,
			  const struct vsock_hdr *req, int fd,
			  uint32_t buf_size)
{
	conn_init(c, guest_cid, req->dst_port, req->src_port, fd, buf_size);
	if (req->type == VSOCK_TYPE_SEQPACKET)
		vsock_conn_set_seqpacket(c);
	c->state = VSOCK_CONN_PEER_INIT;
	c->pending = VSOCK_RXOP_RESPONSE;
	c->guest_initiated = true;
	c->stats.packets_from_guest = 1; /* the REQUEST */
	vsock_credit_peer_init(&c->credit, req->buf_alloc, req->fwd_cnt);
}

void vsock_conn_set_seqpacket(struct vsock_conn *c)
{
	uint32_t size = c->fd >= 0 ? vsock_seq_host_msg_max(
					     c->fd, c->credit.buf_alloc)
				   : c->credit.buf_alloc;

	/* Right after init: the ring is empty and not yet allocated. */
	c->type = VSOCK_TYPE_SEQPACKET;
	vmio_byte_ring_init(&c->ring, NULL, size);
	c->credit.buf_alloc = size;
}

static void conn_close_host(struct vsock_conn *c)
{
	vmio_close_fd(&c->fd);
	free(c->ring.buf);
	vmio_byte_ring_init(&c->ring, NULL, c->ring.size);
	vsock_seq_free(&c->seq);
	vsock_backlog_free(&c->backlog);
	c->merge_hold = false;
}

void vsock_conn_destroy(struct vsock_conn *c)
{
	conn_close_host(c);
	vsock_held_free(&c->held);
	c->state = VSOCK_CONN_KILLED;
	c->pending = 0;
}

/* Ends the connection. With rst the guest is told (its flow is reset);
 * without, it told us (an RST of its own), and answering could loop. */
static void conn_kill(struct vsock_conn *c, bool rst, const char *why)
{
	conn_log(c, VMIO_LOG_DEBUG, "vsock: conn %u:%u %s: %s%s",
		 c->local_port, c->peer_port, vsock_conn_state_name(c->state),
		 why, rst ? ", RST" : "");
	conn_close_host(c);
	c->state = VSOCK_CONN_KILLED;
	c->pending = rst ? VSOCK_RXOP_RST : 0;
}

/* Clean close (spec: SHUTDOWN, then RST from the other side): once the
 * guest will send no more and all it sent reached the host, and nothing
 * more can go to the guest (it will not receive, or the host hit EOF and
 * we told the guest so), there is nothing left to carry. A SHUTDOWN
 * still pending for the guest goes out before the RST (fill_rx sends RST
 * first only in KILLED, so wait for it). */
static void conn_maybe_close(struct vsock_conn *c)
{
	if (c->state != VSOCK_CONN_ESTABLISHED)
		return;
	/* Held chains too: closing would leave the host reading pages the
	 * guest is about to get back. */
	if (!(c->peer_shut & VSOCK_SHUTDOWN_SEND) ||
	    !vmio_byte_ring_empty(&c->ring) || c->held.n)
		return;
	if (c->pending & VSOCK_RXOP_SHUTDOWN)
		return;
	if ((c->peer_shut & VSOCK_SHUTDOWN_RCV) ||
	    (c->local_shut & VSOCK_SHUTDOWN_SEND))
		conn_kill(c, true, "closed both ways");
}

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
		conn_kill(c, true, "host write failed");
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
		conn_kill(c, true, "host write failed");
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
		conn_kill(c, true, "guest overran its credit");
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
		conn_kill(c, true, "cannot buffer guest data");
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
		conn_kill(c, true, "guest message too large");
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
		conn_kill(c, true, "host write failed");
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
		conn_kill(c, true, "RW after SHUTDOWN(SEND)");
		return false;
	}
	if (c->type == VSOCK_TYPE_SEQPACKET) {
		seq_rw_from_guest(c, pkt, tx);
		return false;
	}
	if (!len)
		return false;
	if (vsock_credit_rx(&c->credit, len)) {
		conn_kill(c, true, "guest overran its credit");
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
		conn_kill(c, true, "cannot keep a spliced chain");
		return false;
	}
	if (done < len &&
	    ring_push(c, tx, pkt->payload_off + done, len - done)) {
		conn_kill(c, true, "cannot buffer guest data");
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
		conn_maybe_close(c);
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
	conn_maybe_close(c);
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
		conn_kill(c, true, "cannot write OK line");
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
		conn_kill(c, false, "guest RST");
		return false;
	}
	/* A different type on this port pair is a different flow the guest
	 * has no business mixing in. */
	if (h->type != c->type) {
		conn_kill(c, true, "wrong type");
		return false;
	}

	switch (c->state) {
	case VSOCK_CONN_LOCAL_INIT:
		/* We sent REQUEST: only RESPONSE (accept) or RST (refuse,
		 * above) may come back. */
		if (h->op != VSOCK_OP_RESPONSE) {
			conn_kill(c, true, "unexpected op before RESPONSE");
			return false;
		}
		vsock_credit_peer_init(&c->credit, h->buf_alloc, h->fwd_cnt);
		conn_established_local(c);
		return false;
	case VSOCK_CONN_PEER_INIT:
		/* Our RESPONSE has not gone out: the guest is still in
		 * connect() and has nothing else to say. */
		conn_kill(c, true, "op before our RESPONSE");
		return false;
	case VSOCK_CONN_ESTABLISHED:
		break;
	case VSOCK_CONN_KILLED:
		return false;
	}

	/* ESTABLISHED. Every guest header carries its credit. */
	if (vsock_credit_peer_update(&c->credit, h->buf_alloc, h->fwd_cnt)) {
		conn_kill(c, true, "fwd_cnt ahead of what we sent");
		return false;
	}
	vsock_backlog_consumed(&c->backlog, c->credit.peer_fwd_cnt);
	if (conn_to_guest_room(c))
		c->starve_seen = c->starve_due = false;
	/* The guest is reading again: what was held for merging goes. */
	if (c->merge_hold &&
	    vsock_backlog_len(&c->backlog) < VSOCK_CONN_MERGE_AFTER)
		conn_merge_release(c);
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
		/* Flags are permanent: OR them in. RCV: drop what we would
		 * read for the guest. SEND: credit is moot from now on, and
		 * SHUT_WR follows once the ring drains (flush does it, and
		 * may close). */
		c->peer_shut |= h->flags & VSOCK_SHUTDOWN_MASK;
		if (c->peer_shut & VSOCK_SHUTDOWN_SEND) {
			c->pending &= ~VSOCK_RXOP_CREDIT_UPDATE;
			seq_drop_partial(c);
		}
		if (c->peer_shut & VSOCK_SHUTDOWN_RCV)
			c->merge_hold = false;
		if (c->peer_shut & VSOCK_SHUTDOWN_RCV)
			c->pending &= ~(VSOCK_RXOP_RW |
					VSOCK_RXOP_CREDIT_REQUEST |
					VSOCK_RXOP_SHUTDOWN);
		vsock_conn_flush(c);
		return false;
	case VSOCK_OP_REQUEST:
	case VSOCK_OP_RESPONSE:
	default:
		/* A second REQUEST or a RESPONSE on a live flow. */
		conn_kill(c, true, "unexpected op when established");
		return false;
	}
}

/* May we read the host socket for the guest at all (credit aside)? */
static bool conn_may_read(const struct vsock_conn *c)
{
	return c->state == VSOCK_CONN_ESTABLISHED && !c->host_eof &&
	       !(c->peer_shut & VSOCK_SHUTDOWN_RCV);
}

/* Ends a merge hold: the data is read at the next rx turn. */
static void conn_merge_release(struct vsock_conn *c)
{
	c->merge_hold = false;
	if (conn_may_read(c))
		c->pending |= VSOCK_RXOP_RW;
}

/* Whether to leave stream data in the host socket for now, to go out
 * merged with what follows (vsock_conn_host_readable). */
static bool conn_merge_wait(const struct vsock_conn *c)
{
	uint32_t want = conn_to_guest_room(c);
	int inq;

	if (c->type != VSOCK_TYPE_STREAM ||
	    vsock_backlog_len(&c->backlog) < VSOCK_CONN_MERGE_AFTER)
		return false;
	if (want > c->to_guest_pkt_cap)
		want = c->to_guest_pkt_cap;
	if (ioctl(c->fd, FIONREAD, &inq) < 0 || inq < 0)
		return false;
	return (uint32_t)inq < want;
}

/* Leaves the host socket's data for later: RW is not pending, and an
 * edge-triggered watch, the guest's progress or the tick ends the hold. */
static void conn_merge_hold(struct vsock_conn *c)
{
	if (!c->merge_hold)
		c->stats.merge_holds++;
	c->merge_hold = true;
	c->pending &= ~VSOCK_RXOP_RW;
}

void vsock_conn_host_readable(struct vsock_conn *c, bool hangup)
{
	if (!conn_may_read(c))
		return;
	if (!hangup && conn_merge_wait(c)) {
		conn_merge_hold(c);
		return;
	}
	c->merge_hold = false;
	c->pending |= VSOCK_RXOP_RW;
}

/* A stream read that filled its packet leaves RW pending for what is
 * still in the socket. Sent at once, that rest would be a small packet
 * of its own, the very thing merging avoids for a guest that fell
 * behind: ask the same question new data is asked. */
static void conn_merge_recheck(struct vsock_conn *c)
{
	if ((c->pending & VSOCK_RXOP_RW) && conn_merge_wait(c))
		conn_merge_hold(c);
}

/* Host data waits for the guest's credit and asking may help. */
static bool conn_credit_starved(const struct vsock_conn *c)
{
	return c->state == VSOCK_CONN_ESTABLISHED &&
	       (c->pending & VSOCK_RXOP_RW) && !conn_to_guest_room(c) &&
	       conn_needs_request(c);
}

/* A CREDIT_REQUEST may go now (see vsock_conn_pending_to_guest). */
static bool conn_request_due(const struct vsock_conn *c)
{
	return c->starve_due && conn_credit_starved(c);
}

bool vsock_conn_wants_tick(const struct vsock_conn *c)
{
	return conn_credit_starved(c) || c->merge_hold;
}

void vsock_conn_tick(struct vsock_conn *c)
{
	if (c->merge_hold)
		conn_merge_release(c);
	if (!conn_credit_starved(c))
		c->starve_seen = c->starve_due = false;
	else if (c->starve_seen)
		c->starve_due = true;
	else
		c->starve_seen = true;
}

/* ---- What goes to the guest next: the priority table ------------------- */

/* What pending host data sends now: RW while the guest has credit, else a
 * CREDIT_REQUEST once it went without for a tick (RW stays pending for
 * when credit comes), else nothing. */
static unsigned conn_data_op(const struct vsock_conn *c)
{
	if (!(c->pending & VSOCK_RXOP_RW))
		return 0;
	if (conn_to_guest_room(c))
		return VSOCK_RXOP_RW;
	return conn_request_due(c) ? VSOCK_RXOP_CREDIT_REQUEST : 0;
}

/* The one place that orders what a connection sends the guest: a killed
 * connection its RST and nothing else; then the handshake; then a
 * CREDIT_UPDATE, since it is what unblocks a writing guest; then host
 * data (conn_data_op); then the SHUTDOWN of a host EOF. Returns the
 * VSOCK_RXOP_* bit of the next packet, 0 for none. Every question about
 * the next packet and the writer ask it. */
static unsigned conn_next_to_guest(const struct vsock_conn *c)
{
	static const unsigned order[] = {
		VSOCK_RXOP_REQUEST, VSOCK_RXOP_RESPONSE,
		VSOCK_RXOP_CREDIT_UPDATE, VSOCK_RXOP_RW, VSOCK_RXOP_SHUTDOWN,
	};
	unsigned p = c->pending;

	if (c->state == VSOCK_CONN_KILLED)
		return p & VSOCK_RXOP_RST;
	for (unsigned i = 0; i < sizeof(order) / sizeof(order[0]); i++) {
		unsigned op = order[i] == VSOCK_RXOP_RW ? conn_data_op(c)
							: p & order[i];

		if (op)
			return op;
	}
	return 0;
}

unsigned vsock_conn_pending_to_guest(const struct vsock_conn *c)
{
	return (c->pending & ~VSOCK_RXOP_RW) | conn_data_op(c);
}

uint32_t vsock_conn_epoll_events(const struct vsock_conn *c)
{
	uint32_t ev = 0;

	if (c->fd < 0 || c->state != VSOCK_CONN_ESTABLISHED)
		return 0;
	if (conn_may_read(c) && !(c->pending & VSOCK_RXOP_RW) &&
	    conn_to_guest_room(c))
		ev |= c->merge_hold ? EPOLLIN | EPOLLRDHUP | EPOLLET : EPOLLIN;
	if (!vmio_byte_ring_empty(&c->ring))
		ev |= EPOLLOUT;
	return ev;
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
	conn_kill(c, true, "host read failed");
	return -1;
}

/* Reads host data straight into the chain after the header. Returns as
 * conn_recv; 0 too when the chain or the credit has no room. */
static ssize_t conn_read_host(struct vsock_conn *c,
			      const struct vmio_chain *rx, uint32_t max_payload)
{
	uint32_t cap = vsock_pkt_rx_capacity(rx, max_payload);
	uint32_t credit = conn_to_guest_room(c);
	struct iovec iov[CONN_IOV];
	size_t covered;
	unsigned n;

	c->to_guest_pkt_cap = cap;
	if (credit < cap)
		cap = credit;
	if (!cap)
		return 0;
	if (vsock_backlog_reserve(&c->backlog, 1)) {
		conn_kill(c, true, "cannot track the guest's packets");
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
		conn_kill(c, true, "cannot buffer a host message");
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
		conn_kill(c, true, "host message too large");
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
	uint32_t credit = conn_to_guest_room(c);
	ssize_t r;

	if (vsock_backlog_reserve(&c->backlog, 1)) {
		conn_kill(c, true, "cannot track the guest's packets");
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
		else if (conn_packet_bound(c))
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
	conn_merge_recheck(c);
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
		conn_maybe_close(c);
		return w;
	}
	return 0;
}

uint32_t vsock_conn_to_guest_want(const struct vsock_conn *c)
{
	uint32_t credit;

	if (conn_next_to_guest(c) != VSOCK_RXOP_RW)
		return 0;
	credit = conn_to_guest_room(c);
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
	conn_merge_recheck(c);
	return i;
}
