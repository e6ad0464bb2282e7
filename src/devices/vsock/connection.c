/* The per-connection state machine; see connection.h.
 *
 * All host socket I/O uses sendmsg/recvmsg with MSG_DONTWAIT, so the
 * connection never blocks whatever the fd's O_NONBLOCK, and MSG_NOSIGNAL,
 * so a host peer that went away is an EPIPE for this connection and not a
 * SIGPIPE for the process. */
#include "devices/vsock/connection.h"
#include "devices/vsock/connection_internal.h"

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

/* The limiter of connections that were given none (vsock_conn.rl): one
 * per thread, as a connection lives on one. */
static _Thread_local struct vmio_ratelimit conn_rl_default =
	VMIO_RATELIMIT_INIT(10);

struct vmio_ratelimit *vsock_conn_rl(const struct vsock_conn *c)
{
	return c->rl ? c->rl : &conn_rl_default;
}


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
	/* The same: a restored connection keeps the packets it remembers. */
	if (c->backlog.overhead == overhead)
		return;
	vsock_backlog_free(&c->backlog);
	vsock_backlog_init(&c->backlog, overhead);
}

/* Whether a CREDIT_REQUEST would tell us something: no byte credit and
 * none asked for since we last had some, or at the packet bound (asked
 * again each time: credit.h's `requested` is about bytes). */
static bool conn_needs_request(const struct vsock_conn *c)
{
	return vsock_credit_request_needed(&c->credit) ||
	       (vsock_conn_packet_bound(c) && vsock_credit_peer_free(&c->credit));
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
void vsock_conn_kill(struct vsock_conn *c, bool rst, const char *why)
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
 * still pending for the guest goes out before the RST (conn_to_guest.c's
 * priority table puts an RST first only in KILLED, so wait for it). */
void vsock_conn_maybe_close(struct vsock_conn *c)
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
		vsock_conn_kill(c, true, "closed both ways");
}

/* May we read the host socket for the guest at all (credit aside)? */
static bool conn_may_read(const struct vsock_conn *c)
{
	return c->state == VSOCK_CONN_ESTABLISHED && !c->host_eof &&
	       !(c->peer_shut & VSOCK_SHUTDOWN_RCV);
}

void vsock_conn_merge_release(struct vsock_conn *c)
{
	c->merge_hold = false;
	if (conn_may_read(c))
		c->pending |= VSOCK_RXOP_RW;
}

/* Whether to leave stream data in the host socket for now, to go out
 * merged with what follows (vsock_conn_host_readable). */
static bool conn_merge_wait(struct vsock_conn *c)
{
	uint32_t want = vsock_conn_guest_room(c);
	int inq;

	if (c->type != VSOCK_TYPE_STREAM ||
	    vsock_backlog_len(&c->backlog) < VSOCK_CONN_MERGE_AFTER)
		return false;
	if (want > c->to_guest_pkt_cap)
		want = c->to_guest_pkt_cap;
	if (c->host_inq_floor >= want)
		return false;
	if (ioctl(c->fd, FIONREAD, &inq) < 0 || inq < 0)
		return false;
	c->host_inq_floor = (uint32_t)inq;
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
void vsock_conn_merge_recheck(struct vsock_conn *c)
{
	if ((c->pending & VSOCK_RXOP_RW) && conn_merge_wait(c))
		conn_merge_hold(c);
}

/* Host data waits for the guest's credit and asking may help. */
static bool conn_credit_starved(const struct vsock_conn *c)
{
	return c->state == VSOCK_CONN_ESTABLISHED &&
	       (c->pending & VSOCK_RXOP_RW) && !vsock_conn_guest_room(c) &&
	       conn_needs_request(c);
}

/* A CREDIT_REQUEST may go now (see vsock_conn_pending_to_guest). */
bool vsock_conn_request_due(const struct vsock_conn *c)
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
		vsock_conn_merge_release(c);
	if (!conn_credit_starved(c))
		c->starve_seen = c->starve_due = false;
	else if (c->starve_seen)
		c->starve_due = true;
	else
		c->starve_seen = true;
}

uint32_t vsock_conn_epoll_events(const struct vsock_conn *c)
{
	uint32_t ev = 0;

	if (c->fd < 0 || c->state != VSOCK_CONN_ESTABLISHED)
		return 0;
	if (conn_may_read(c) && !(c->pending & VSOCK_RXOP_RW) &&
	    vsock_conn_guest_room(c))
		ev |= c->merge_hold ? EPOLLIN | EPOLLRDHUP | EPOLLET : EPOLLIN;
	if (!vmio_byte_ring_empty(&c->ring))
		ev |= EPOLLOUT;
	return ev;
}
