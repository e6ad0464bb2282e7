/* The AF_XDP port's transmit path (the port's tx, tx_flush and tx_reap):
 * a frame on the TX ring as it lies in guest memory, or copied into a
 * UMEM frame of our own; chains held until the completion ring gives
 * them back. */
#ifndef VMIO_DEVICES_NET_XDP_TX_H
#define VMIO_DEVICES_NET_XDP_TX_H

#include <stdarg.h>
#include <stddef.h>
#include <sys/types.h>

#include <bpf/libbpf.h>
#include <xdp/libxdp.h>

#include "devices/net/xdp_port_state.h"

int vxdp_tx(struct vnet_port *b, unsigned pair,
		  const struct iovec *iov, unsigned niov, uint32_t cookie);
void vxdp_tx_flush(struct vnet_port *b, unsigned pair);
unsigned vxdp_tx_reap(struct vnet_port *b, unsigned pair,
			    uint32_t *cookies, unsigned max);

#endif
