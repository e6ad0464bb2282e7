/* The vsock device's counters, read live through --control: one set per
 * connection (in struct vsock_conn) and one per VM (in the multiplexer),
 * which also sums the connections that have ended. Plain uint64_t each:
 * every counter is written and read on the VM's own worker (the control
 * server asks that worker for a snapshot, cli/control.h), so none needs
 * to be atomic, and a new counter is one more line here and one in
 * vsock_conn_stats_add. */
#ifndef VMIO_DEVICES_VSOCK_STATS_H
#define VMIO_DEVICES_VSOCK_STATS_H

#include <stdint.h>

struct vmio_json;

/* One connection, as the guest and the host exchanged it. */
struct vsock_conn_stats {
	uint64_t bytes_to_guest, packets_to_guest;     /* every op */
	uint64_t bytes_from_guest, packets_from_guest; /* every op */
	uint64_t credit_requests_sent, credit_requests_received;
	/* Times host data waited because the guest's credit ran out. */
	uint64_t credit_stalls;
	/* Times host data waited because the guest held as many of our
	 * packets unread as it takes (guest_backlog.h). */
	uint64_t packet_stalls;
	/* Times a stream's host data, less than a receive buffer, was left
	 * in the host socket to go out merged with what follows, because
	 * the guest had fallen behind (vsock_conn_host_readable). */
	uint64_t merge_holds;
	uint64_t rsts_sent, rsts_received;
};

/* One VM: its connections' totals and what no connection carries. */
struct vsock_vm_stats {
	uint64_t connections_opened;  /* either side */
	uint64_t connections_ended;
	/* Guest connects answered with an RST: no service at the port,
	 * the table full, the host socket refused. */
	uint64_t connections_refused;
	uint64_t rsts_unmatched;      /* RSTs for packets of no connection */
	/* rx buffers given back empty: no packet could go into them (too
	 * small, readable bytes; rx_writer.h), as net's rx_errors */
	uint64_t rx_errors;
	struct vsock_conn_stats ended; /* the sum over ended connections */
	/* guest -> host payload: by reference (tx_splice.h) or copied */
	uint64_t tx_bytes_spliced;
	uint64_t tx_bytes_copied;
	/* tx chains kept until the host read their bytes, and the most kept
	 * at once */
	uint64_t tx_chains_held;
	uint64_t tx_chains_held_max;
	/* tx chains copied because the bound on held chains was reached */
	uint64_t tx_hold_full;
	/* wake-ups of the EPOLLOUT watch that looks for read chains */
	uint64_t tx_hold_wakes;
	/* host -> guest: CREDIT_REQUESTs and CREDIT_UPDATEs we sent, rx
	 * packets, host socket reads, and rx used-ring publications (each
	 * may notify) */
	uint64_t rx_credit_requests;
	uint64_t rx_credit_updates;
	uint64_t rx_packets;
	uint64_t rx_host_reads;
	uint64_t rx_flushes;
	/* Connections a crashed vmio had open, reset on the guest's side
	 * by the one that took the session back (conn_journal.h). Last: a
	 * hand-over's record carries these in order. */
	uint64_t rsts_after_crash;
};

void vsock_conn_stats_add(struct vsock_conn_stats *sum,
			  const struct vsock_conn_stats *s);
/* The counters as members of the object being written. */
void vsock_conn_stats_write(const struct vsock_conn_stats *s,
			    struct vmio_json *j);
/* A VM's counters as members of the object being written: live
 * connections open now, and totals, the sum over every connection, ended
 * or live, as an object. */
void vsock_vm_stats_write(const struct vsock_vm_stats *st, unsigned live,
			  const struct vsock_conn_stats *totals,
			  struct vmio_json *j);
/* The counters of a guest that is gone, one -v line. */
void vsock_vm_stats_log(const struct vsock_vm_stats *st, uint64_t guest_cid);

#endif
