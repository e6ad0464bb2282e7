/* Types only: what one VM's multiplexer (muxer.h) is configured with, and
 * its bounds; shared by the files that make the muxer up
 * (muxer_state.h). */
#ifndef VMIO_DEVICES_VSOCK_MUXER_CONFIG_H
#define VMIO_DEVICES_VSOCK_MUXER_CONFIG_H

#include <stdbool.h>
#include <stdint.h>

struct vsock_router;

struct vsock_muxer_config {
	uint64_t guest_cid;
	const char *uds_path;   /* guest->host connects to <uds_path>_<port> */
	uint32_t buf_size;      /* per-connection buffer and buf_alloc */
	unsigned max_conns;     /* connections at once */
	unsigned connect_timeout_ms; /* guest's RESPONSE to our REQUEST */
	/* Sibling VMs (router.h): packets for another CID go there, and its
	 * packets for this VM come back through the rx queue. The muxer
	 * registers this VM with it (vsock_router_set_vm). NULL: only the
	 * host is reachable. */
	struct vsock_router *router;
	unsigned vm_index; /* this VM's index in the router */
	/* After work, a dry queue is looked at again once a loop turn for
	 * this long before its kicks go back on (virtio/poll_window.h, as
	 * net does; 0: not). */
	uint32_t poll_ns;
	/* Guest->host data by reference (tx_splice.h) unless tx_copy or the
	 * kernel cannot; at most tx_hold_max tx chains are held at once
	 * (0: VSOCK_MUX_TX_HOLD_DEFAULT), and one connection holds at most
	 * half of them (at least one), so a host reader that stalls leaves
	 * the others room. A chain that finds no room is copied, as on the
	 * copy path: the tx queue never waits for a host reader. */
	bool tx_copy;
	unsigned tx_hold_max;
	/* What one of our packets costs in the guest's receive buffer
	 * (guest_backlog.h): 0 takes VSOCK_BACKLOG_OVERHEAD_DEFAULT,
	 * VSOCK_MUX_NO_PACKET_BOUND sends within the byte credit alone. */
	uint32_t rx_pkt_overhead;
	/* Host-side ports of host-initiated connections, inclusive
	 * (conn_table.h); both 0: VSOCK_LOCAL_PORT_FIRST to _LAST. */
	uint32_t port_first, port_last;
};

#define VSOCK_MUX_NO_PACKET_BOUND UINT32_MAX

#define VSOCK_MUX_TX_HOLD_DEFAULT 32
#define VSOCK_MUX_TX_HOLD_MAX 4096

/* Chains handled per queue per callback. (Synthetic RSTs queued at most:
 * VSOCK_RSTQ_SIZE, rst_queue.h.) */
#define VSOCK_MUX_BATCH 256

/* Rx bytes pushed after which the guest hears of them within a callback,
 * not only at its end: it copies out one step while the next is filled
 * (architecture.md section 4, "Telling the guest"). */
#define VSOCK_MUX_RX_NOTIFY_BYTES (64u * 1024)

#endif
