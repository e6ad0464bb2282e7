/* What one connection (connection.h) hands a successor vmio, and how the
 * successor takes it back: its ports, type and state, what it owes the
 * guest (pending ops), the shutdown flags both ways, the credit counters
 * both ways, the packets the guest holds unread, the guest's bytes the
 * host socket has not taken yet (for seqpacket with each message's end
 * and EOR, and the partial message at the tail), the host message being
 * sent to the guest, and its counters. The host socket itself travels as
 * a descriptor beside the record; the record names its index.
 *
 * The successor reads the record as hostile input (util/wire.h): every
 * size is checked against the limits this build would have given the
 * connection, and whatever a later call would index by (the buffer, the
 * message ends, the backlog) is rebuilt through the same functions that
 * built it in the first place, never copied in. */
#ifndef VMIO_DEVICES_VSOCK_CONN_HANDOVER_H
#define VMIO_DEVICES_VSOCK_CONN_HANDOVER_H

#include <stdint.h>

#include "devices/vsock/connection.h"
#include "util/wire.h"

/* The record's fd index of a connection with no host socket (KILLED,
 * an RST still owed). */
#define VSOCK_HANDOVER_NO_FD UINT32_MAX

/* Whether c can be handed over as it is; NULL, or why not (it holds tx
 * chains by reference: their guest pages go back to the guest at the
 * hand-over, and the host has not read them). */
const char *vsock_conn_handover_refusal(const struct vsock_conn *c);

/* Appends c's record to w, its host socket named as fd_index (or
 * VSOCK_HANDOVER_NO_FD). c must have no refusal. */
void vsock_conn_save(const struct vsock_conn *c, uint32_t fd_index,
		     struct vmio_wire_writer *w);

/* Reads one record into c, a connection of guest_cid whose buffer may be
 * at most buf_size bytes (--tx-buffer-size) and whose packets cost
 * overhead (guest_backlog.h). On success returns 0 with c set up without
 * a host socket (fd -1) and *fd_index the record's (the caller checks it
 * and gives c the descriptor). On a record that does not fit, returns -1
 * with r failed (r->why) and c holding nothing (no memory, no fd). */
int vsock_conn_restore(struct vsock_conn *c, uint64_t guest_cid,
		       uint32_t buf_size, uint32_t overhead,
		       struct vmio_wire_reader *r, uint32_t *fd_index);

#endif
