/* Per-VM counters of the vsock device: a plain list of uint64_t, counted
 * by the multiplexer and its connections on the VM's one loop. */
#ifndef VMIO_DEVICES_VSOCK_STATS_H
#define VMIO_DEVICES_VSOCK_STATS_H

#include <stdint.h>

struct vsock_vm_stats {
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
};

#endif
