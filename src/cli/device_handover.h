/* A vhost-user device command handed over (issue 36): what `vmio vsock`
 * and `vmio net` share. Each unit (a VM of vmio vsock, the one device of
 * vmio net) is a vhost-user backend, its device and its listener; the
 * command says how its device pauses, saves and lets go (devho_ops),
 * and what its own sections hold. The state goes to a successor vmio
 * started from the path this one was started from (handover/successor.h).
 *
 * The old side. Each unit lives on one worker and only that worker
 * touches it, so worker 0 asks and each unit's worker answers
 * (vmio_defer_post both ways):
 *   0. on worker 0, at the request: the successor started, while every
 *      unit is still served; the units stop once it says it is ready
 *      (a vmio before that message is waited for DEVHO_READY_WAIT_MS),
 *      so that its exec and set-up are not part of the pause the
 *      guests see;
 *   1. on each unit's worker: accepting held, the session held at a
 *      message boundary (its queues stopped, every chain it popped
 *      finished), the device's host side paused, the session and the
 *      device saved;
 *   2. on worker 0, once every unit answered: the command's own
 *      sections, the state, sent to the successor;
 *   3. taken over: each unit handed over on its worker (this process's
 *      copies closed, nothing sent to the guest or the host), then the
 *      run ends and the process exits 0. Failed at any step (a unit not
 *      at a boundary within the bound, a state no record carries, the
 *      binary missing, the successor refusing or dying): each unit
 *      unpaused and resumed on its worker, the reload fails with why.
 * The new side, before its workers start: every unit restored from its
 * section (the command's order: devho_open, then its device, its
 * listener, devho_restore_session), --control's listener taken, "taken
 * over" answered, and only then every unit served (devho_serve), each
 * on its own worker as the workers start.
 *
 * Section "<ops.section>.N" (N the unit's place, from 0), a wire record
 * (util/wire.h):
 *   the command's head (ops.put_head: its version, what names the unit)
 *   listener u8 (DEVHO_LISTENER_*)
 *   session record: u32 length, bytes, u32 fd count (0, 0: no front end)
 *   device record: u32 length, bytes, u32 fd count
 * and as its fds the listener's (if any), the session's, the device's.
 * Section "control" is control_handover.h's. */
#ifndef VMIO_CLI_DEVICE_HANDOVER_H
#define VMIO_CLI_DEVICE_HANDOVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cli/control.h"
#include "event/loop.h"
#include "event/workers.h"
#include "handover/envelope.h"
#include "handover/successor.h"
#include "handover/takeover.h"
#include "util/wire.h"
#include "vhost-user/backend.h"
#include "vhost-user/session_state.h"

#define DEVHO_TIMEOUT_MS 10000u

enum devho_listener_kind {
	DEVHO_LISTENER_NONE = 0,      /* --fd: one front end's connection */
	DEVHO_LISTENER_BOUND = 1,     /* bound by vmio at the socket path */
	DEVHO_LISTENER_INHERITED = 2, /* socket activation: not our file */
};

/* What the command says of its devices. */
struct devho_ops {
	const char *unit;    /* "VM": "VM 2: ...", "3 VMs" */
	const char *section; /* "vm": sections "vm.0", "vm.1"... */
	const char *device;  /* "vsock device": "its vsock device: ..." */
	const char *too_big; /* why a device record may outgrow the bound */
	/* On the unit's worker: the device's host side stops (true) or
	 * goes on. NULL: the held session stops it all. */
	void (*pause_host)(void *dev, bool paused);
	/* On the unit's worker, held and paused: appends the device's
	 * record to w and its fds to fds (at most max; *nfds in: those
	 * there, out: after); the fds stay the device's. Returns 0, or -1
	 * with *why. */
	int (*save)(const void *dev, struct vmio_wire_writer *w, int fds[],
		    unsigned max, unsigned *nfds, const char **why);
	/* The successor took over: freeing dev sends nothing, removes no
	 * file. NULL: freeing it never does. */
	void (*handed_over)(void *dev);
	/* On worker 0: the first fields of unit index's section (NULL:
	 * none). */
	void (*put_head)(void *opaque, unsigned index,
			 struct vmio_wire_writer *w);
	/* On worker 0, every unit held: the command's own sections (NULL:
	 * none). Returns 0, or -1 (the writer failed). */
	int (*add_sections)(void *opaque, struct vmio_envelope_writer *env);
};

/* One unit, as the hand-over sees it. */
struct devho_unit {
	/* The command's, set before devho_init. */
	struct vmio_loop *loop;
	void *dev;
	struct vmio_backend *be;

	struct devho *h;
	unsigned index;
	int step;                 /* what its worker is asked to do */
	struct vmio_defer work;   /* on the unit's loop */
	struct vmio_defer report; /* on worker 0's */
	struct vmio_timer retry;  /* the next try at a message boundary */
	uint64_t deadline_ns;     /* of the tries, on the unit's loop clock */
	bool held, paused, has_session;
	/* Written on the unit's worker before it reports; read on worker 0. */
	struct vmio_session_record session;
	struct vmio_wire_writer device;
	int *device_fds; /* the device's own: the kernel copies at send */
	unsigned ndevice_fds;
	char why[256]; /* empty: the step went well */
};

/* How long a successor that never says "ready" (a vmio before it) is
 * waited for before the units stop anyway. */
#define DEVHO_READY_WAIT_MS 250u

enum devho_phase {
	DEVHO_IDLE,
	DEVHO_STARTING, /* the successor starts; every unit is served */
	DEVHO_SAVING,  /* the successor is ready, waiting for the state */
	DEVHO_STARTED, /* the successor has the state */
	DEVHO_RESUMING,
	DEVHO_HANDING,
	DEVHO_DONE,
	DEVHO_SERVING, /* the successor's: each unit resumes on its worker */
};

struct devho {
	/* The command's, set before devho_init. */
	const struct devho_ops *ops;
	void *opaque;           /* the command's, for ops */
	struct vmio_loop *loop; /* worker 0's */
	struct vmio_workers *pool;
	const char *control_path;
	struct vmio_control **ctl;
	unsigned max_device_fds; /* of one unit's device */
	unsigned timeout_ms;     /* --handover-timeout */

	struct devho_unit *units;
	unsigned n;
	enum devho_phase phase;
	unsigned pending; /* units yet to answer this phase */
	char why[512];    /* the first failure */
	bool request_waits; /* asked while DEVHO_SERVING */
	struct vmio_successor *succ;
	struct vmio_timer ready_wait; /* DEVHO_READY_WAIT_MS */
	struct vmio_envelope_writer env;
	int *fds;
	size_t nfds;
};

/* Makes room for n units (h->units, each to be given its loop, device
 * and backend). Returns 0, or -1 (logged). */
int devho_alloc(struct devho *h, unsigned n);
/* Once every unit's loop, device and backend are set, before any worker
 * starts. Returns 0, or -1 (logged). */
int devho_init(struct devho *h);
/* After every worker has been joined. */
void devho_fini(struct devho *h);

/* A reload asked for on --control (vmio_control_reload_fn). */
int devho_request(void *opaque, char *why, size_t why_size);
/* SIGHUP: the same, its outcome in the log only. */
void devho_on_sighup(void *opaque);
/* Both, for h's command; then SIGHUP no longer ends the process. Returns
 * 0, or -1 (logged). */
int devho_watch(struct devho *h);

/* ---- The successor's side ---------------------------------------------- */

/* What one unit's section carries, its fds taken from the takeover. */
struct devho_taken {
	const uint8_t *session, *device;
	uint32_t session_len, device_len;
	uint8_t listener_kind;
	int listener;
	int *session_fds, *device_fds; /* into fds */
	unsigned nsession_fds, ndevice_fds;
	int *fds;
	unsigned nfds;
};

/* Unit index's section, its fds taken; head(opaque, r) (NULL: none)
 * reads the command's fields first (failing r for a version it does not
 * read).
 * Returns 0, or -1 with the reason in t->why. */
int devho_open(struct vmio_takeover *t, const struct devho_ops *ops,
	       unsigned index,
	       void (*head)(void *opaque, struct vmio_wire_reader *r),
	       void *opaque, struct devho_taken *u);
/* The session into be (fresh, its listener adopted), held. Returns 0, or
 * -1 with the reason in why. */
int devho_restore_session(struct devho_taken *u, struct vmio_backend *be,
			  char *why, size_t why_size);
/* The unit's vhost-user listener, the caller's now (-1: none). */
int devho_take_listener(struct devho_taken *u);
/* Closes the fds of u nobody took. */
void devho_taken_fini(struct devho_taken *u);

/* A unit restored but not to be served (the predecessor serves it
 * still): let go without a word to the guest, the host or the files. */
void devho_let_go(const struct devho_ops *ops, void *dev,
		  struct vmio_backend *be);
/* A unit restored, once this process has taken over: served. */
void devho_serve(const struct devho_ops *ops, void *dev,
		 struct vmio_backend *be);
/* Every unit restored and h set up (devho_init), before the workers
 * start: tells the predecessor this process has taken over (t is done
 * with), then asks each unit's worker to serve it (devho_serve), which
 * each does as it starts. Returns 0, or -1 if the predecessor had
 * stopped waiting (it serves on: let every unit go). */
int devho_took_over(struct devho *h, struct vmio_takeover *t);
/* A successor that did not take over: tells the predecessor why, if it
 * still waits (t->why, or that this process could not set up). */
void devho_refuse(struct vmio_takeover *t);

#endif
