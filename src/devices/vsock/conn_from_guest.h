/* A packet from the guest, on its connection (connection.h): what each op
 * does to the connection's state, and RW data on its way to the host
 * socket: written at once while the socket takes it, else kept in the
 * connection's buffer of buf_alloc bytes (the credit the guest was given
 * bounds it) and written as EPOLLOUT says; seqpacket messages whole, with
 * their boundaries (seqpacket.h); with --tx-splice, by reference, the
 * chain held until the host has read it (tx_splice.h). The other
 * direction is conn_to_guest.h. */
#ifndef VMIO_DEVICES_VSOCK_CONN_FROM_GUEST_H
#define VMIO_DEVICES_VSOCK_CONN_FROM_GUEST_H

#include <stdbool.h>
#include <stdint.h>

#include "devices/vsock/connection.h"

/* Handles one packet from the guest for this connection. pkt must be
 * VSOCK_PKT_OK from vsock_pkt_parse_tx over tx (its payload is read from
 * tx's iovecs, written to the host socket when the socket takes it, else
 * copied into the ring). Any op the state does not allow, or a credit
 * violation, kills the connection with an RST pending; an RST from the
 * guest kills it with nothing pending.
 *
 * With a splice context and may_hold, RW payload goes to the socket by
 * reference and the connection keeps the chain: returns true, and the
 * caller must not push it (vsock_conn_tx_release gives it back). Credit
 * for those bytes is given when the host has read them. Returns false
 * when the chain may go back at once. */
bool vsock_conn_from_guest(struct vsock_conn *c, const struct vsock_pkt *pkt,
			   const struct vmio_chain *tx, bool may_hold);

/* Takes up to max held chains the host has read through (all of them,
 * read or not, with force or once the host socket is closed), oldest
 * first, into heads[]; counts their bytes consumed. Returns how many: the
 * caller pushes them used. */
unsigned vsock_conn_tx_release(struct vsock_conn *c, uint16_t heads[],
			       unsigned max, bool force);

/* The multiplexer saw EPOLLOUT: writes buffered guest data to the host
 * socket, then does the SHUT_WR or close the guest asked for once the
 * buffer is empty. */
void vsock_conn_flush(struct vsock_conn *c);

#endif
