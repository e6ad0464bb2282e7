/* After a migration the network must learn where the guest went. A guest
 * that negotiated VIRTIO_NET_F_GUEST_ANNOUNCE announces itself (QEMU sets
 * the announce bit in the config space it keeps, and answers the ack on
 * its own control queue; a front end that passes the control queue to
 * us gets ANNOUNCE_ACK answered in ctrl.c). For one that did not, QEMU
 * sends SEND_RARP with the guest's MAC, and the device sends a RARP
 * frame from that MAC out of its port, as if the guest had: switches
 * and bridges learn the port the MAC is behind now. */
#ifndef VMIO_DEVICES_NET_ANNOUNCE_H
#define VMIO_DEVICES_NET_ANNOUNCE_H

#include <stdint.h>

#include "devices/net/state.h"

#define VNET_RARP_LEN 60 /* the frame, padded to Ethernet's minimum */

/* The RARP request ("reverse request", op 3) a MAC announces itself
 * with, into frame (VNET_RARP_LEN bytes). */
void vnet_rarp_frame(const uint8_t mac[6], uint8_t *frame);

void vnet_announce_init(struct vnet_device *d);
void vnet_announce_fini(struct vnet_device *d);
/* SEND_RARP (on the device's loop): the frame goes out on pair 0's
 * loop, through a port that copies (a TAP, the null port); a port that
 * sends guest memory without a copy (--xdp) has no buffer for it, and
 * says so. */
void vnet_announce_rarp(struct vnet_device *d, const uint8_t mac[6]);

#endif
