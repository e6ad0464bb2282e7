/* `vmio net --fd-store`: the device's vhost-user session and its own
 * state kept in systemd's fd store (cli/session_kept.h), so that the
 * vmio systemd starts after a crash, or a `systemctl restart`, serves
 * the guest on: QEMU keeps its connection and never renegotiates, and a
 * TAP that vmio made keeps its addresses.
 *
 * What is kept, under "vmio.net.0": the session record, named by the
 * vhost-user socket's path, and the device's record as a hand-over has
 * it (devices/net/device_handover.h: the port's, with a TAP's queues,
 * the control queue's state, the features), rewritten with the session
 * and whenever a control command changes that state; its counters are
 * not kept. What is lost: the frames the queues held (a chain popped and
 * not given back is served again from the used ring, so a frame may go
 * out twice or a received one be written again; split rings only, a
 * packed ring's session is refused), and the counters. AF_XDP's record
 * names the interface and its queues, and the next vmio opens its own
 * XSKs on them (devices/net/port_xdp.h). */
#ifndef VMIO_CLI_NET_KEPT_H
#define VMIO_CLI_NET_KEPT_H

#include "cli/session_kept.h"
#include "devices/net/device.h"

struct net_kept {
	struct session_kept *s;
	const char *socket;     /* "" for --fd */
	struct vnet_device *dev; /* from net_kept_start */
};

/* k opened on loop (the device's), with what systemd gave back taken
 * first if collect (vmio_fd_store_collect: a process systemd started,
 * not a successor). Returns 0, or -1 without memory (logged). */
int net_kept_open(struct net_kept *k, const char *socket,
		  struct vmio_loop *loop, bool collect);
/* This process's copies closed (and what no unit took); the store keeps
 * the rest. */
void net_kept_fini(struct net_kept *k);

/* From now on be's session and dev's state are kept. Before the
 * workers start. */
void net_kept_start(struct net_kept *k, struct vmio_backend *be,
		    struct vnet_device *dev);

#endif
