/* The guests of vmio-scale: the VMs of a `vmio vsock --config` file
 * (read with vmio's own parser, cli/vsock_vms.h), each played by one
 * in-tree vsock driver (frontend/vsock_guest.h) in this process, and
 * connections opened from many of them at once. */
#ifndef VMIO_TOOLS_SCALE_FLEET_H
#define VMIO_TOOLS_SCALE_FLEET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cli/vsock_vms.h"
#include "frontend/vsock_guest.h"

/* Reads and checks config as `vmio vsock --config` would. Returns 0, or
 * -1 with the parser's message in err. */
int fleet_load(struct vsock_vm_list *vms, const char *config, char *err,
	       size_t err_size);

/* Attaches a guest to vm's vhost-user socket with its CID, able to hold
 * max_sockets sockets. Returns NULL with err filled. */
struct vg *fleet_open(const struct vsock_vm_spec *vm, unsigned max_sockets,
		      char *err, size_t err_size);

/* Opens per_guest stream connections from each of the n guests gs to
 * host port, at most window REQUESTs outstanding per guest, serving
 * every guest while it waits (XFER_STALL_MS without one finishing is an
 * error). Established sockets go to out[i * per_guest + k]. With
 * refused, every connection must be refused instead (out is unused and
 * the sockets are freed): vmio's answer to a port nobody listens on.
 * Returns 0, or -1 with err naming the guest. */
int fleet_connect(struct vg *const *gs, unsigned n, uint32_t port,
		  unsigned per_guest, unsigned window, bool refused,
		  struct vg_sock **out, char *err, size_t err_size);

#endif
