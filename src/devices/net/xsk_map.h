/* The XSK map of an interface: libxdp's redirect program sends a frame
 * that arrives on queue Q to the XSK in slot Q, and passes it up to the
 * host's stack when the slot is empty. Emptying a slot takes a queue's
 * frames away from an XSK no one reads. */
#ifndef VMIO_DEVICES_NET_XSK_MAP_H
#define VMIO_DEVICES_NET_XSK_MAP_H

/* Puts xsk_fd in slot queue of the map of the program libxdp attached to
 * ifname, or empties the slot if xsk_fd is -1. Returns 0 or -errno
 * (-ENOENT: no such program or map). */
int vnet_xsk_map_set(const char *ifname, unsigned queue, int xsk_fd);

#endif
