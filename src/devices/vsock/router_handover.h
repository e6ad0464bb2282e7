/* What the sibling router (router.h) hands a successor vmio: every open
 * sibling flow, and every packet queued for a VM, in the order each
 * sender queued them. Without the flows a successor would answer the
 * next packet of every sibling connection with an RST; without the
 * packets, bytes one guest sent another would be lost.
 *
 * Save wants every VM of the router held (no worker forwards or fills);
 * restore wants a fresh router linked as the predecessor's, its VMs'
 * CIDs set (the devices restored), before any worker runs. The record is
 * hostile input: each flow and packet is checked against the VMs, their
 * links and the router's bounds before it is taken.
 *
 * Layout (util/wire.h): VMs u32; flows u32, each: opener's VM u32, its
 * port u32, the other VM u32, its port u32, type u16; packets u32, each:
 * receiving VM u32, sending VM u32, payload already written u32, the
 * header (packet.h's wire form), the payload. */
#ifndef VMIO_DEVICES_VSOCK_ROUTER_HANDOVER_H
#define VMIO_DEVICES_VSOCK_ROUTER_HANDOVER_H

#include "devices/vsock/router.h"
#include "util/wire.h"

void vsock_router_save(struct vsock_router *r, struct vmio_wire_writer *w);

/* Returns 0, or -1 with the reason in rd (vmio_wire_fail): the router
 * keeps what it took until then, which the caller frees with it. */
int vsock_router_restore(struct vsock_router *r, struct vmio_wire_reader *rd);

#endif
