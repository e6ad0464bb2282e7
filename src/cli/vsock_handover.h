/* `vmio vsock` handed over: every VM's vhost-user session, its device
 * (connections, credit, bytes held each way, listeners, host sockets
 * half way through their CONNECT line) and its vhost-user listener, and
 * --control's listener, go to a successor vmio started from the path
 * this one was started from (handover/successor.h). The guests see a
 * pause and nothing else: QEMU never learns that another process holds
 * the other end of its socket.
 *
 * The old side. Each VM lives on its own worker and only that worker
 * touches it, so worker 0 asks and each VM's worker answers
 * (vmio_defer_post both ways):
 *   1. on each VM's worker: accepting held, the session held at a message
 *      boundary (its queues stopped, every chain it popped finished), the
 *      host side paused, the session and the device saved;
 *   2. on worker 0, once every VM answered: the state, the successor
 *      started;
 *   3. taken over: each VM handed over on its worker (this process's
 *      copies closed, nothing sent to the guest or the host sockets),
 *      then the run ends and the process exits 0. Failed at any step (a
 *      VM not at a boundary within the bound, a state no record carries,
 *      the binary missing, the successor refusing or dying): each VM
 *      unpaused and resumed on its worker, the reload fails with why.
 * The new side, before its workers start: every VM restored from its
 * section (device first, then its listener, then the session, held),
 * --control's listener taken, "taken over" answered, and only then
 * every VM unpaused and resumed: the predecessor never serves again once
 * it has that answer, and before it this process has served nothing.
 *
 * Section "vm.N" (N the VM's place in the configuration, from 0), a wire
 * record (util/wire.h):
 *   version u32 (VSOCK_HANDOVER_VM_VERSION)
 *   guest CID u64; vhost-user socket path: u32 length, bytes
 *   listener u8 (VSOCK_LISTENER_*)
 *   session record: u32 length, bytes, u32 fd count (0, 0: no front end)
 *   device record: u32 length, bytes, u32 fd count
 * and as its fds the listener's (if any), the session's, the device's.
 * Section "router" (beside VMs with siblings) is the router's record
 * (devices/vsock/router_handover.h), saved once every VM is held and
 * restored once every VM is; section "control" is control_handover.h's. */
#ifndef VMIO_CLI_VSOCK_HANDOVER_H
#define VMIO_CLI_VSOCK_HANDOVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cli/control.h"
#include "cli/serve.h"
#include "cli/vsock_vms.h"
#include "devices/vsock/device.h"
#include "devices/vsock/router.h"
#include "event/loop.h"
#include "event/workers.h"
#include "handover/envelope.h"
#include "handover/successor.h"
#include "handover/takeover.h"
#include "vhost-user/backend.h"
#include "vhost-user/session_state.h"
#include "util/wire.h"

#define VSOCK_HANDOVER_TIMEOUT_MS 10000u
#define VSOCK_HANDOVER_VM_VERSION 1u

enum vsock_listener_kind {
	VSOCK_LISTENER_NONE = 0,      /* --fd: one front end's connection */
	VSOCK_LISTENER_BOUND = 1,     /* bound by vmio at the socket path */
	VSOCK_LISTENER_INHERITED = 2, /* socket activation: not our file */
};

/* One VM, as the hand-over sees it. */
struct vsock_handover_vm {
	/* The command's, set before vsock_handover_init. */
	struct vmio_loop *loop;
	struct vsock_device *dev;
	struct vmio_backend *be;

	struct vsock_handover *h;
	unsigned index;
	int step;                 /* what its worker is asked to do */
	struct vmio_defer work;   /* on the VM's loop */
	struct vmio_defer report; /* on worker 0's */
	struct vmio_timer retry;  /* the next try at a message boundary */
	uint64_t deadline_ns;     /* of the tries, on the VM's loop clock */
	bool held, paused, has_session;
	/* Written on the VM's worker before it reports; read on worker 0. */
	struct vmio_session_record session;
	struct vmio_wire_writer device;
	int *device_fds; /* the device's own: the kernel copies at send */
	unsigned ndevice_fds;
	char why[256]; /* empty: the step went well */
};

enum vsock_handover_phase {
	VSOCK_HO_IDLE,
	VSOCK_HO_SAVING,
	VSOCK_HO_STARTED, /* the successor has the state */
	VSOCK_HO_RESUMING,
	VSOCK_HO_HANDING,
	VSOCK_HO_DONE,
};

struct vsock_handover {
	/* The command's, set before vsock_handover_init. */
	struct vmio_loop *loop; /* worker 0's */
	struct vmio_workers *pool;
	const struct vsock_vm_list *list;
	struct vsock_router *router; /* NULL: the single-VM form */
	const char *control_path;
	struct vmio_control **ctl;
	unsigned max_conns; /* the device's --max-connections */
	unsigned timeout_ms; /* --handover-timeout */

	struct vsock_handover_vm *vms;
	unsigned n;
	enum vsock_handover_phase phase;
	unsigned pending; /* VMs yet to answer this phase */
	char why[512];    /* the first failure */
	struct vmio_successor *succ;
	struct vmio_envelope_writer env;
	int *fds;
	size_t nfds;
};

/* Makes room for n VMs (h->vms, each to be given its loop, device and
 * backend). Returns 0, or -1 (logged). */
int vsock_handover_alloc(struct vsock_handover *h, unsigned n);
/* Once every VM's loop, device and backend are set, before any worker
 * starts. Returns 0, or -1 (logged). */
int vsock_handover_init(struct vsock_handover *h);
/* After every worker has been joined. */
void vsock_handover_fini(struct vsock_handover *h);

/* A reload asked for on --control (vmio_control_reload_fn). */
int vsock_handover_request(void *opaque, char *why, size_t why_size);
/* SIGHUP: the same, its outcome in the log only. */
void vsock_handover_on_sighup(void *opaque);

/* ---- The successor's side ---------------------------------------------- */

/* What one VM's section carries, its fds taken from the takeover. */
struct vsock_handover_taken {
	const uint8_t *session, *device;
	uint32_t session_len, device_len;
	uint8_t listener_kind;
	int listener;
	int *session_fds, *device_fds; /* into fds */
	unsigned nsession_fds, ndevice_fds;
	int *fds;
	unsigned nfds;
};

/* VM index's section, checked against spec (the same CID and socket as
 * the predecessor's). Returns 0, or -1 with the reason in t->why. */
int vsock_handover_open_vm(struct vmio_takeover *t, unsigned index,
			   const struct vsock_vm_spec *spec,
			   struct vsock_handover_taken *vm);
/* The device, paused, as cfg on loop. NULL with the reason in why. */
struct vsock_device *
vsock_handover_restore_device(struct vsock_handover_taken *vm,
			      struct vmio_loop *loop,
			      const struct vsock_device_config *cfg, char *why,
			      size_t why_size);
/* The session into be (fresh, its listener adopted), held. Returns 0, or
 * -1 with the reason in why. */
int vsock_handover_restore_session(struct vsock_handover_taken *vm,
				   struct vmio_backend *be, char *why,
				   size_t why_size);
/* The router's flows and packets between VMs, once every VM is
 * restored (their CIDs known). Returns 0, or -1 with the reason in
 * t->why. */
int vsock_handover_restore_router(struct vmio_takeover *t,
				  struct vsock_router *router);

/* The VM's vhost-user listener, the caller's now (-1: none). */
int vsock_handover_take_listener(struct vsock_handover_taken *vm);
/* Closes the fds of vm nobody took. */
void vsock_handover_taken_fini(struct vsock_handover_taken *vm);

/* A VM restored but not to be served (the predecessor serves it still):
 * let go without a word to the guest, the host sockets or the files. */
void vsock_handover_let_go(struct vsock_device *dev, struct vmio_backend *be);
/* A VM restored, once this process has taken over: served. */
void vsock_handover_serve(struct vsock_device *dev, struct vmio_backend *be);

#endif
