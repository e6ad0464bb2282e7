/* The TAP port (vmio net --tap). */
#ifndef VMIO_DEVICES_NET_PORT_TAP_H
#define VMIO_DEVICES_NET_PORT_TAP_H

#include "devices/net/port.h"

/* Attaches pairs queues of the TAP interface name, creating it
 * (multi-queue, vnet header) if it does not exist. Returns NULL with
 * *err = -errno and *why a static string saying what failed. */
struct vnet_port *vnet_port_tap_new(const char *name, unsigned pairs,
					  int *err, const char **why);

/* The TAP a predecessor vmio served (its hand-over record, read from r
 * as hostile input: port.h's save), on fds[0..nfds), one per queue,
 * each checked to be a queue of the TAP name. The interface is neither
 * created nor configured again: it is as the predecessor left it. The
 * fds it takes become -1. NULL with r failed (r->why). */
struct vnet_port *vnet_port_tap_restore(const char *name, unsigned pairs,
					struct vmio_wire_reader *r, int fds[],
					unsigned nfds);

#endif
