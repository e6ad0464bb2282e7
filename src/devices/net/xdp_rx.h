/* The AF_XDP port's receive path: guest buffers posted to the fill ring
 * and reaped filled, frames copied out of the RX ring in copy mode, and
 * what a pair received after it detached. */
#ifndef VMIO_DEVICES_NET_XDP_RX_H
#define VMIO_DEVICES_NET_XDP_RX_H

#include <stdarg.h>
#include <stddef.h>
#include <sys/types.h>

#include <bpf/libbpf.h>
#include <xdp/libxdp.h>

#include "devices/net/xdp_port_state.h"

int vxdp_rx_fd(struct vnet_port *b, unsigned pair);
ssize_t vxdp_rx(struct vnet_port *b, unsigned pair,
		      const struct iovec *iov, unsigned niov);
bool vxdp_rx_posts(struct vnet_port *b, unsigned pair);
int vxdp_rx_post(struct vnet_port *b, unsigned pair, void *buf,
		       size_t len, uint32_t cookie);
unsigned vxdp_rx_process(struct xdp_port *x, struct xdp_queue *q,
			   struct vnet_done *done, unsigned max,
			   unsigned *got);
unsigned vxdp_rx_reap(struct vnet_port *b, unsigned pair,
			    struct vnet_done *done, unsigned max);

#endif
