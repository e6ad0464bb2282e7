/* Chains a no-copy port keeps, between attach and detach. */
#ifndef VMIO_DEVICES_NET_HELD_CHAINS_H
#define VMIO_DEVICES_NET_HELD_CHAINS_H

#include "devices/net/state.h"

/* Pair p runs on guest memory mem from now on (a queue started). If the
 * port finishes later, p waits (attaching) until vnet_pair_attached. */
void vnet_pair_attach(struct vnet_pair *p, struct vmio_mem *mem);
/* What the port calls when an attach it answered VNET_ATTACH_LATER is
 * done (vnet_port.attached; opaque is the device). */
void vnet_pair_attached(void *opaque, unsigned pair);
/* Pair p stops touching guest memory: every held chain goes back to its
 * queue (a queue stops for good, the table changes, reset). */
void vnet_pair_detach(struct vnet_pair *p);
/* One queue of pair p stopped for good (so the pair was detached, every
 * chain back) while the other runs on: the pair goes back on the port
 * for that one, as a queue start would put it. */
void vnet_pair_reattach(struct vnet_pair *p);

#endif
