/* What a connection's two directions share (connection.c, the state
 * machine and guest -> host; conn_to_guest.c, host -> guest): helpers of
 * the state machine that the host -> guest side calls. Not for the
 * multiplexer, which uses connection.h and conn_to_guest.h. */
#ifndef VMIO_DEVICES_VSOCK_CONNECTION_INTERNAL_H
#define VMIO_DEVICES_VSOCK_CONNECTION_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "devices/vsock/connection.h"
#include "devices/vsock/peer_log.h"

/* iovecs per sendmsg/recvmsg: a 64 KiB payload in 4 KiB guest pages is
 * 16; more just takes another round of the loop. */
#define CONN_IOV 64

/* Host socket I/O never blocks, whatever the fd's O_NONBLOCK, and a host
 * peer that went away is an EPIPE, not a SIGPIPE. */
#define IO_FLAGS (MSG_DONTWAIT | MSG_NOSIGNAL)

/* The limiter of c's peer-triggered lines: its own, or its thread's. */
struct vmio_ratelimit *vsock_conn_rl(const struct vsock_conn *c);

/* A line this connection's peers can trigger (peer_log.h). */
#define conn_log(c, level, ...)                                                \
	vsock_peer_log(vsock_conn_rl(c), level, __VA_ARGS__)

/* Ends the connection: rst, the guest is told (its flow is reset);
 * without, it told us. */
void vsock_conn_kill(struct vsock_conn *c, bool rst, const char *why);
/* Closes cleanly once nothing is left to carry either way. */
void vsock_conn_maybe_close(struct vsock_conn *c);
/* After a stream read: leave what is left in the host socket to merge,
 * if the guest fell behind. */
void vsock_conn_merge_recheck(struct vsock_conn *c);
/* Ends a merge hold (vsock_conn_host_readable): the data is read at the
 * next rx turn. */
void vsock_conn_merge_release(struct vsock_conn *c);
/* A CREDIT_REQUEST may go now. */
bool vsock_conn_request_due(const struct vsock_conn *c);

/* On every packet's path: inline. */

/* No room for another packet in the guest's queue. A seqpacket message
 * under way whose packets are all the guest holds goes on to its EOM
 * regardless: the guest reads nothing of a message before its end, so
 * its fwd_cnt could not move and the bound would never open. Linux's own
 * limit takes any message that fits its buffer, in 4 KiB packets. */
static inline bool vsock_conn_packet_bound(const struct vsock_conn *c)
{
	if (c->seq.hmsg_off &&
	    vsock_backlog_len(&c->backlog) <= c->seq.hmsg_pkts)
		return false;
	return !vsock_backlog_room(&c->backlog, c->credit.peer_buf_alloc);
}

/* Payload bytes the guest takes in our next RW packet: its byte credit,
 * or none while it holds as many of our packets as it takes. */
static inline uint32_t vsock_conn_guest_room(const struct vsock_conn *c)
{
	return vsock_conn_packet_bound(c) ? 0 : vsock_credit_peer_free(&c->credit);
}

#endif
