/* The net device's counters, and the line --stats prints them on. */
#ifndef VMIO_DEVICES_NET_STATS_H
#define VMIO_DEVICES_NET_STATS_H

#include <stddef.h>
#include <stdint.h>

#include "devices/net/header.h"

/* What --stats prints: every frame is counted once, in one place. */
struct vnet_stats {
	uint64_t tx_frames, tx_bytes;     /* handed to the port */
	uint64_t tx_invalid[VNET_HDR_NVERDICTS]; /* dropped: header/size */
	uint64_t tx_bad_chain;  /* dropped: shorter than the header, or
				 * more segments than writev takes */
	uint64_t tx_backend_errors;        /* dropped by the port */
	uint64_t rx_frames, rx_bytes;      /* given to the guest */
	uint64_t rx_errors;                /* lost between port and guest */
	/* Turns of a pair's rx that gave the guest frames, and of those the
	 * ones that stopped because every buffer the guest had posted was
	 * used (copying ports; a no-copy port's buffers are posted ahead):
	 * how often the guest, not the port, held rx back. */
	uint64_t rx_turns, rx_buffers_exhausted;
	uint64_t ctrl_ok, ctrl_err;
	uint64_t rarps; /* RARP frames sent for the guest (SEND_RARP) */
};
/* Each pair counts its frames on its own loop, the control queue its
 * commands on the device's (vnet_device_stats adds them up). */

/* Adds s to sum, counter by counter. */
void vnet_stats_add(struct vnet_stats *sum, const struct vnet_stats *s);
/* The counters on one line, "name=N" each (the tests read it). */
void vnet_stats_format(const struct vnet_stats *s, char *buf, size_t size);

struct vmio_json;
/* The counters as members of the object being written (--control). */
void vnet_stats_write(const struct vnet_stats *s, struct vmio_json *j);

#endif
