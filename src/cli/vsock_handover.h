/* `vmio vsock` handed over: every VM's vhost-user session, its device
 * (connections, credit, bytes held each way, listeners, host sockets
 * half way through their CONNECT line) and its vhost-user listener, and
 * --control's listener, go to a successor vmio started from the path
 * this one was started from. The guests see a pause and nothing else:
 * QEMU never learns that another process holds the other end of its
 * socket. The steps, on both sides, are device_handover.h's, each VM a
 * unit of it; this file says what is vsock's.
 *
 * Section "vm.N" (N the VM's place in the configuration, from 0), a wire
 * record (util/wire.h): device_handover.h's, whose head is
 *   version u32 (VSOCK_HANDOVER_VM_VERSION)
 *   guest CID u64; vhost-user socket path: u32 length, bytes
 * Section "router" (beside VMs with siblings) is the router's record
 * (devices/vsock/router_handover.h), saved once every VM is held and
 * restored once every VM is; section "control" is control_handover.h's. */
#ifndef VMIO_CLI_VSOCK_HANDOVER_H
#define VMIO_CLI_VSOCK_HANDOVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cli/device_handover.h"
#include "cli/vsock_vms.h"
#include "devices/vsock/device.h"
#include "devices/vsock/router.h"

#define VSOCK_HANDOVER_TIMEOUT_MS DEVHO_TIMEOUT_MS
#define VSOCK_HANDOVER_VM_VERSION 1u

/* Each VM a unit of device_handover.h's, its dev a vsock_device. */
extern const struct devho_ops vsock_handover_ops;

struct vsock_handover {
	struct devho ho; /* its opaque is this */
	const struct vsock_vm_list *list;
	struct vsock_router *router; /* NULL: the single-VM form */
};

/* ---- The successor's side ---------------------------------------------- */

/* VM index's section, checked against spec (the same CID and socket as
 * the predecessor's). Returns 0, or -1 with the reason in t->why. */
int vsock_handover_open_vm(struct vmio_takeover *t, unsigned index,
			   const struct vsock_vm_spec *spec,
			   struct devho_taken *vm);
/* The device, paused, as cfg on loop. NULL with the reason in why. */
struct vsock_device *
vsock_handover_restore_device(struct devho_taken *vm, struct vmio_loop *loop,
			      const struct vsock_device_config *cfg, char *why,
			      size_t why_size);
/* The router's flows and packets between VMs, once every VM is
 * restored (their CIDs known). Returns 0, or -1 with the reason in
 * t->why. */
int vsock_handover_restore_router(struct vmio_takeover *t,
				  struct vsock_router *router);

#endif
