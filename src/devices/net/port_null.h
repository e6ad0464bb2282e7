/* The null port (vmio net --null). */
#ifndef VMIO_DEVICES_NET_PORT_NULL_H
#define VMIO_DEVICES_NET_PORT_NULL_H

#include <stddef.h>

#include "devices/net/port.h"

/* Drops everything sent: the device measured alone. Receives nothing, or
 * with source_len (VNET_NULL_SOURCE_MIN to _MAX; 0: off) answers every
 * receive with one source_len-byte frame, as fast as the guest posts
 * buffers. Returns NULL with *err = -errno. */
struct vnet_port *vnet_port_null_new(unsigned pairs, size_t source_len,
					   int *err);

/* The frames a null source sends: Ethernet's minimum (without FCS) to a
 * full 1500-byte payload. */
#define VNET_NULL_SOURCE_MIN 60
#define VNET_NULL_SOURCE_MAX 1514

#endif
