/* Serving the VMs of `vmio vsock`, whichever way they were given: the
 * single-VM form (--guest-cid, --uds-path, --socket or --fd) is a list of
 * one. Each VM gets a device and a vhost-user backend on its worker's
 * loop, with a router between those that share a group; then --control,
 * the signals, and the run until SIGTERM or SIGINT. A VMM that goes away
 * resets its VM alone. */
#ifndef VMIO_CLI_VSOCK_SERVE_H
#define VMIO_CLI_VSOCK_SERVE_H

#include <stdbool.h>

#include "cli/options.h"
#include "cli/vsock_vms.h"
#include "devices/vsock/device.h"
#include "cli/workers_args.h"

struct vsock_serve {
	const struct vsock_vm_list *vms; /* checked */
	/* Every VM's device, but for what its own keys say (guest-cid,
	 * uds-path, tx-buffer-size, queue-size) and its place in the
	 * router. */
	struct vsock_device_config device;
	const struct vmio_workers_opts *workers;
	const struct vmio_backend_opts *backend;
	/* The single-VM form: no sibling to route to, messages that name
	 * its options, and a VM whose socket may be --fd (socket NULL). */
	bool single;
	unsigned handover_timeout_ms; /* --handover-timeout */
	bool fd_store;                /* --fd-store (cli/vsock_kept.h) */
};

/* Serves s's VMs until stopped. Returns the exit status. */
int vsock_serve(const struct vsock_serve *s);

#endif
