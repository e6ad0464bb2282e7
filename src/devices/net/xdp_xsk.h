/* The AF_XDP port's XSKs: opened in copy or no-copy mode on a queue the
 * kernel has let go of, steered to or not, closed with their counters
 * kept; the libraries' messages as our debug log. */
#ifndef VMIO_DEVICES_NET_XDP_XSK_H
#define VMIO_DEVICES_NET_XDP_XSK_H

#include <stdarg.h>
#include <stddef.h>
#include <sys/types.h>

#include <bpf/libbpf.h>
#include <xdp/libxdp.h>

#include "devices/net/xdp_port_state.h"

const char *vxdp_pair_mode(struct vnet_port *b, unsigned pair);
void vxdp_queue_close(struct xdp_queue *q);
void vxdp_pair_counters(struct vnet_port *b, unsigned pair,
			      char *buf, size_t size);
void vxdp_free(struct vnet_port *b);
int vxdp_libxdp_print(enum libxdp_print_level level, const char *fmt, va_list ap);
int vxdp_libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap);
unsigned vxdp_iface_rx_queues(const char *name);
const char *vxdp_xsk_why(int err);
unsigned vxdp_pair_frames(const struct xdp_port *x);
int vxdp_set_pair_enabled(struct vnet_port *b, unsigned pair,
				bool on);
int vxdp_queue_open_once(struct xdp_port *x, unsigned pair, bool nocopy);
int vxdp_open_queues(struct xdp_port *x, unsigned pairs);

#endif
