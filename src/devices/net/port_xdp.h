/* The AF_XDP port (vmio net --xdp). */
#ifndef VMIO_DEVICES_NET_PORT_XDP_H
#define VMIO_DEVICES_NET_PORT_XDP_H

#include <stdbool.h>

#include "devices/net/port.h"
#include "util/wire.h"

/* One XSK per pair, bound to queues queue, queue + 1... of the interface
 * name; the XDP program that redirects to them is attached native where
 * the driver has it, else generic. No offloads. Frames go without a copy
 * in vmio, on the guest's memory registered as the UMEM, unless copy is
 * set or that cannot be done (said once): then each XSK copies through a
 * UMEM of its own. Without a copy, each pair keeps a reserve of
 * `reserve` frames of its own (4 KiB each, at most VNET_RESERVE_MAX; 0:
 * none) for frames that come while the guest has no buffer on the fill
 * ring: they are copied into its buffers in turn, in order. Returns NULL
 * with *err = -errno and *why a static string saying what failed. */
struct vnet_port *vnet_port_xdp_new(const char *name, unsigned queue,
					  unsigned pairs, bool copy,
					  unsigned reserve, int *err,
					  const char **why);

/* The AF_XDP port a predecessor vmio served (its record, read from r as
 * hostile input: port.h's save), as this command line asks for it (the
 * interface, queue and copy checked against the record's,
 * vnet_port_xdp_check_record): its XSKs opened anew, once the
 * predecessor's have let go of the queues (waited for, up to a second
 * each, as at any start). NULL with r failed. */
struct vnet_port *vnet_port_xdp_restore(const char *name, unsigned queue,
					unsigned pairs, bool copy,
					unsigned reserve,
					struct vmio_wire_reader *r,
					unsigned nfds);

/* The record's check alone (what restore reads before it opens
 * anything): 0, or -1 with r failed. */
int vnet_port_xdp_check_record(struct vmio_wire_reader *r, const char *name,
			       unsigned queue, bool copy, unsigned nfds);

/* --xdp-reserve's default: as many frames as the copy path's fill ring
 * holds, 4 MiB a pair. */
#define VNET_XDP_DEFAULT_RESERVE 1024u

/* The largest --mtu with --xdp: a frame and the XDP headroom fit one
 * 4 KiB UMEM frame, and veth's native XDP takes no more. */
#define VNET_XDP_MAX_MTU 3500

#endif
