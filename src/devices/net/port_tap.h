/* The TAP port (vmio net --tap). */
#ifndef VMIO_DEVICES_NET_PORT_TAP_H
#define VMIO_DEVICES_NET_PORT_TAP_H

#include "devices/net/port.h"

/* Attaches pairs queues of the TAP interface name, creating it
 * (multi-queue, vnet header) if it does not exist. Returns NULL with
 * *err = -errno and *why a static string saying what failed. */
struct vnet_port *vnet_port_tap_new(const char *name, unsigned pairs,
					  int *err, const char **why);

#endif
