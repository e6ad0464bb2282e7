/* The virtio-vsock device as the vhost-user core sees it: QEMU's
 * vhost-user-vsock gives us rx (queue 0) and tx (queue 1) and keeps the
 * event queue itself. The config space is the guest's CID (le64). The
 * device owns the multiplexer and the hybrid listener at uds-path, which
 * lives as long as the device, across front ends. */
#ifndef VMIO_DEVICES_VSOCK_DEVICE_H
#define VMIO_DEVICES_VSOCK_DEVICE_H

#include <stddef.h>
#include <stdint.h>

#include "event/loop.h"
#include "vhost-user/device.h"

#define VSOCK_RX_QUEUE 0
#define VSOCK_TX_QUEUE 1

struct vsock_device_config {
	uint64_t guest_cid;
	const char *uds_path;
	uint32_t buf_size;           /* --tx-buffer-size */
	unsigned max_conns;          /* --max-connections */
	unsigned connect_timeout_ms; /* --connect-timeout */
	size_t connect_line_max;     /* --connect-line-max */
	uint16_t max_queue_size;     /* --queue-size */
	struct vsock_router *router; /* sibling VMs, or NULL (router.h) */
	unsigned vm_index;           /* this VM's index in the router */
	uint32_t poll_ns;            /* --poll-us */
	bool tx_copy;                /* --tx-copy */
	unsigned tx_hold_max;        /* --tx-hold (0: the default) */
	uint32_t rx_pkt_overhead;    /* --rx-packet-overhead (muxer.h) */
	uint32_t port_first, port_last; /* --host-port-range (0: default) */
};

struct vsock_device;
struct vsock_router;

/* Creates the device and listens on uds_path. Returns NULL with *err set
 * to -errno (-EADDRINUSE: a live process serves uds_path). */
struct vsock_device *vsock_device_new(struct vmio_loop *loop,
				      const struct vsock_device_config *cfg,
				      int *err);
void vsock_device_free(struct vsock_device *d);
const struct vmio_device_ops *vsock_device_ops(const struct vsock_device *d);

/* The journal of the VM's open connections, a memfd to keep where a
 * crash cannot take it (conn_journal.h), or -1. */
int vsock_device_journal_fd(const struct vsock_device *d);
/* The process ends: the journal stays as it is now (muxer.h), whatever
 * the teardown after this closes. Before the session is reset. */
void vsock_device_let_go_journal(struct vsock_device *d);

/* The session was taken back from a crashed vmio whose journal is
 * journal_fd (the caller's): every connection it names is reset on the
 * guest's side, before any other packet. Returns how many. Once the
 * session is restored. */
unsigned vsock_device_owe_rsts(struct vsock_device *d, int journal_fd);

struct vmio_json;
/* The VM's CID and counters (muxer.h), as members of the object being
 * written. On the device's loop. */
void vsock_device_write_stats(const struct vsock_device *d,
			      struct vmio_json *j);

#endif
