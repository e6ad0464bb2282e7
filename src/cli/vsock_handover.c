/* `vmio vsock` handed over (vsock_handover.h). */
#include "cli/vsock_handover.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/control_handover.h"
#include "devices/vsock/device_handover.h"
#include "devices/vsock/router_handover.h"
#include "handover/start_path.h"
#include "util/log.h"

/* How soon a VM tries again for a message boundary: a VMM finishes a
 * message in microseconds, unless it is gone or hostile, which its
 * message timeout ends. */
#define RETRY_NS (1000 * 1000ull)

#define SECTION_ROUTER "router"

enum step {
	STEP_SAVE,
	STEP_RESUME,
	STEP_HAND_OVER,
};

/* ---- On each VM's worker ------------------------------------------------ */

static void report(struct vsock_handover_vm *vm)
{
	vmio_defer_post(&vm->report);
}

__attribute__((format(printf, 2, 3))) static void
fail(struct vsock_handover_vm *vm, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(vm->why, sizeof(vm->why), fmt, ap);
	va_end(ap);
}

/* Held, or no front end: the host side stops, both records are taken. */
static void save(struct vsock_handover_vm *vm)
{
	unsigned max = 2 * vm->h->max_conns + 2;
	const char *why = NULL;
	char err[200];

	vsock_device_pause_host(vm->dev, true);
	vm->paused = true;
	if (vm->has_session &&
	    vmio_session_save(vm->be, &vm->session, err, sizeof(err))) {
		fail(vm, "its vhost-user session: %s", err);
		return;
	}
	vm->device_fds = calloc(max, sizeof(*vm->device_fds));
	if (!vm->device_fds) {
		fail(vm, "out of memory");
		return;
	}
	vmio_wire_writer_init(&vm->device, VMIO_ENVELOPE_MAX_BYTES);
	if (vsock_device_save(vm->dev, &vm->device, vm->device_fds, max,
			      &vm->ndevice_fds, &why))
		fail(vm, "its vsock device: %s", why);
	else if (vm->device.failed)
		fail(vm, "its vsock device's state is over %u MiB (bytes held for stalled readers)",
		     VMIO_ENVELOPE_MAX_BYTES >> 20);
}

static void on_held(void *opaque)
{
	struct vsock_handover_vm *vm = opaque;

	vm->held = true;
	vm->has_session = true;
	save(vm);
	report(vm);
}

/* One try at a message boundary; reports unless it tries again. */
static void try_hold(struct vsock_handover_vm *vm)
{
	char err[200];
	int rc = vmio_session_hold(vm->be, on_held, vm, err, sizeof(err));

	switch (rc) {
	case 0:
		on_held(vm);
		return;
	case -EINPROGRESS:
		vm->held = true; /* on_held follows */
		return;
	case -ENOTCONN:
		vm->has_session = false;
		save(vm);
		break;
	case -EAGAIN:
		if (vmio_loop_now_ns(vm->loop) < vm->deadline_ns) {
			vmio_timer_arm_ns(&vm->retry, RETRY_NS);
			return;
		}
		fail(vm, "not at a message boundary within %u ms: %s",
		     vm->h->timeout_ms, err);
		break;
	default:
		fail(vm, "%s", err);
	}
	report(vm);
}

static void on_retry(void *opaque)
{
	try_hold(opaque);
}

/* Whatever step 1 did, undone: the VM is served as before. */
static void resume(struct vsock_handover_vm *vm)
{
	if (vm->paused)
		vsock_device_pause_host(vm->dev, false);
	if (vm->held && vmio_session_resume(vm->be))
		log_warn("hand-over: VM %u: its front end left during the hand-over",
			 vm->index + 1);
	vmio_backend_hold_accept(vm->be, false);
	vm->paused = vm->held = false;
}

/* The successor serves the VM: this process's copies go, unused. */
static void hand_over(struct vsock_handover_vm *vm)
{
	if (vm->held)
		vmio_session_handed_over(vm->be);
	vsock_device_handed_over(vm->dev);
	vmio_backend_give_up_listener(vm->be);
	vm->held = false;
}

static void on_work(void *opaque)
{
	struct vsock_handover_vm *vm = opaque;

	switch (vm->step) {
	case STEP_SAVE:
		vm->why[0] = '\0';
		vm->held = vm->paused = vm->has_session = false;
		vmio_backend_hold_accept(vm->be, true);
		vm->deadline_ns = vmio_loop_now_ns(vm->loop) +
				  vm->h->timeout_ms * 1000000ull;
		try_hold(vm);
		return;
	case STEP_RESUME:
		resume(vm);
		break;
	case STEP_HAND_OVER:
		hand_over(vm);
		break;
	}
	report(vm);
}

/* ---- On worker 0 -------------------------------------------------------- */

static void ask_every_vm(struct vsock_handover *h, enum step step)
{
	h->pending = h->n;
	for (unsigned i = 0; i < h->n; i++) {
		h->vms[i].step = step;
		vmio_defer_post(&h->vms[i].work);
	}
}

/* The records and the successor, done with whatever the outcome. The
 * VMs are held or paused meanwhile: nothing of theirs moves. */
static void drop_state(struct vsock_handover *h)
{
	vmio_successor_free(h->succ);
	h->succ = NULL;
	vmio_envelope_writer_fini(&h->env);
	free(h->fds);
	h->fds = NULL;
	h->nfds = 0;
	for (unsigned i = 0; i < h->n; i++) {
		struct vsock_handover_vm *vm = &h->vms[i];

		vmio_session_record_free(&vm->session);
		vmio_wire_writer_fini(&vm->device);
		free(vm->device_fds);
		vm->device_fds = NULL;
		vm->ndevice_fds = 0;
	}
}

static void give_up(struct vsock_handover *h)
{
	log_err("hand-over failed: %s; this process goes on serving", h->why);
	drop_state(h);
	h->phase = VSOCK_HO_RESUMING;
	ask_every_vm(h, STEP_RESUME);
}

static void on_outcome(void *opaque, pid_t pid, const char *why)
{
	struct vsock_handover *h = opaque;

	if (why) {
		snprintf(h->why, sizeof(h->why), "%s", why);
		give_up(h);
		return;
	}
	/* The answer goes out before the listener does: the client that
	 * asked is connected to this process. */
	vmio_control_reload_done(*h->ctl, (int)pid, NULL);
	vmio_control_give_up_listener(*h->ctl);
	/* The successor is this process's child: if it exits (handing
	 * over in turn) once this one is gone, init reaps it; until then it
	 * must not stay a zombie here. */
	signal(SIGCHLD, SIG_IGN);
	log_info("hand-over: vmio %d took over %u VM%s; this process exits",
		 (int)pid, h->n, h->n == 1 ? "" : "s");
	drop_state(h);
	h->phase = VSOCK_HO_HANDING;
	ask_every_vm(h, STEP_HAND_OVER);
}

/* VM vm's part of the state, its fds appended to h->fds. */
static int add_vm(struct vsock_handover *h, const struct vsock_handover_vm *vm)
{
	const struct vsock_vm_spec *spec = &h->list->vms[vm->index];
	const char *sock = spec->socket ? spec->socket : "";
	int lfd = vmio_backend_listener(vm->be);
	uint8_t kind = lfd < 0 ? VSOCK_LISTENER_NONE
		       : vmio_backend_owns_socket_file(vm->be)
			       ? VSOCK_LISTENER_BOUND
			       : VSOCK_LISTENER_INHERITED;
	unsigned nfds = (lfd >= 0) + vm->session.nfds + vm->ndevice_fds;
	struct vmio_wire_writer w;
	char name[VMIO_ENVELOPE_NAME_MAX + 1];
	int rc;

	vmio_wire_writer_init(&w, VMIO_ENVELOPE_MAX_BYTES);
	vmio_wire_put_u32(&w, VSOCK_HANDOVER_VM_VERSION);
	vmio_wire_put_u64(&w, spec->guest_cid);
	vmio_wire_put_u32(&w, (uint32_t)strlen(sock));
	vmio_wire_put_bytes(&w, sock, strlen(sock));
	vmio_wire_put_u8(&w, kind);
	vmio_wire_put_u32(&w, (uint32_t)vm->session.len);
	vmio_wire_put_bytes(&w, vm->session.bytes, vm->session.len);
	vmio_wire_put_u32(&w, vm->session.nfds);
	vmio_wire_put_u32(&w, (uint32_t)vm->device.len);
	vmio_wire_put_bytes(&w, vm->device.buf, vm->device.len);
	vmio_wire_put_u32(&w, vm->ndevice_fds);
	snprintf(name, sizeof(name), "vm.%u", vm->index);
	rc = w.failed ? -1
		      : vmio_envelope_add(&h->env, name, w.buf, w.len, nfds);
	vmio_wire_writer_fini(&w);
	if (lfd >= 0)
		h->fds[h->nfds++] = lfd;
	for (unsigned i = 0; i < vm->session.nfds; i++)
		h->fds[h->nfds++] = vm->session.fds[i];
	for (unsigned i = 0; i < vm->ndevice_fds; i++)
		h->fds[h->nfds++] = vm->device_fds[i];
	return rc;
}

/* Every VM is held: no worker forwards a sibling packet or takes one. */
static int add_router(struct vsock_handover *h)
{
	struct vmio_wire_writer w;
	int rc;

	vmio_wire_writer_init(&w, VMIO_ENVELOPE_MAX_BYTES);
	vsock_router_save(h->router, &w);
	rc = w.failed ? -1
		      : vmio_envelope_add(&h->env, SECTION_ROUTER, w.buf,
					  w.len, 0);
	vmio_wire_writer_fini(&w);
	return rc;
}

static int write_state(struct vsock_handover *h, const uint8_t **rec,
		       size_t *len)
{
	size_t total = 1;
	int cfd;

	for (unsigned i = 0; i < h->n; i++)
		total += 1 + h->vms[i].session.nfds + h->vms[i].ndevice_fds;
	h->fds = calloc(total, sizeof(*h->fds));
	if (!h->fds)
		return -1;
	vmio_envelope_writer_init(&h->env, VMIO_VERSION);
	for (unsigned i = 0; i < h->n; i++)
		if (add_vm(h, &h->vms[i]))
			return -1;
	if (h->router && add_router(h))
		return -1;
	if (control_handover_add(&h->env, *h->ctl, h->control_path, &cfd))
		return -1;
	if (cfd >= 0)
		h->fds[h->nfds++] = cfd;
	return vmio_envelope_finish(&h->env, rec, len);
}

/* Every VM saved: the successor gets the state. */
static void start_successor(struct vsock_handover *h)
{
	struct vmio_successor_opts o = {
		.path = vmio_start_path(),
		.argv = vmio_start_argv(),
		.timeout_ms = h->timeout_ms,
		.done = on_outcome,
		.opaque = h,
	};

	if (write_state(h, &o.rec, &o.len)) {
		snprintf(h->why, sizeof(h->why),
			 "cannot write the state: out of memory, or over its bounds (%u MiB, %u sections, %u fds)",
			 VMIO_ENVELOPE_MAX_BYTES >> 20,
			 VMIO_ENVELOPE_MAX_SECTIONS, VMIO_ENVELOPE_MAX_FDS);
		give_up(h);
		return;
	}
	o.fds = h->fds;
	o.nfds = h->nfds;
	h->succ = vmio_successor_start(h->loop, &o, h->why, sizeof(h->why));
	if (!h->succ) {
		give_up(h);
		return;
	}
	h->phase = VSOCK_HO_STARTED;
	log_info("hand-over: %u VM%s held; started %s, waiting up to %u ms for it to take over",
		 h->n, h->n == 1 ? "" : "s", o.path, h->timeout_ms);
}

/* Every VM has answered the phase's step. */
static void phase_done(struct vsock_handover *h)
{
	switch (h->phase) {
	case VSOCK_HO_SAVING:
		if (h->why[0])
			give_up(h);
		else
			start_successor(h);
		return;
	case VSOCK_HO_RESUMING:
		vmio_control_reload_done(*h->ctl, 0, h->why);
		h->phase = VSOCK_HO_IDLE;
		return;
	case VSOCK_HO_HANDING:
		h->phase = VSOCK_HO_DONE;
		vmio_workers_stop(h->pool);
		return;
	default:
		return;
	}
}

static void on_report(void *opaque)
{
	struct vsock_handover_vm *vm = opaque;
	struct vsock_handover *h = vm->h;

	if (h->phase == VSOCK_HO_SAVING && vm->why[0] && !h->why[0])
		snprintf(h->why, sizeof(h->why), "VM %u: %s", vm->index + 1,
			 vm->why);
	if (--h->pending == 0)
		phase_done(h);
}

static int request(struct vsock_handover *h, char *why, size_t why_size)
{
	if (h->phase == VSOCK_HO_HANDING || h->phase == VSOCK_HO_DONE) {
		snprintf(why, why_size,
			 "this process has handed over already and is exiting");
		return -1;
	}
	if (h->phase != VSOCK_HO_IDLE) {
		snprintf(why, why_size, "a hand-over is under way already");
		return -1;
	}
	if (!vmio_start_path()) {
		snprintf(why, why_size,
			 "the path this vmio was started from is not known");
		return -1;
	}
	h->why[0] = '\0';
	h->phase = VSOCK_HO_SAVING;
	ask_every_vm(h, STEP_SAVE);
	return 0;
}

int vsock_handover_request(void *opaque, char *why, size_t why_size)
{
	int rc = request(opaque, why, why_size);

	if (rc)
		log_err("hand-over not started: %s", why);
	return rc;
}

void vsock_handover_on_sighup(void *opaque)
{
	char why[512];

	vsock_handover_request(opaque, why, sizeof(why));
}

/* ---- Set-up -------------------------------------------------------------- */

int vsock_handover_alloc(struct vsock_handover *h, unsigned n)
{
	h->vms = calloc(n, sizeof(*h->vms));
	if (!h->vms) {
		log_err("out of memory for the hand-over");
		return -1;
	}
	h->n = n;
	return 0;
}

int vsock_handover_init(struct vsock_handover *h)
{
	for (unsigned i = 0; i < h->n; i++) {
		struct vsock_handover_vm *vm = &h->vms[i];

		vm->h = h;
		vm->index = i;
		for (unsigned k = 0; k < VMIO_SESSION_MAX_FDS; k++)
			vm->session.fds[k] = -1;
		vmio_defer_init(&vm->work, vm->loop, on_work, vm);
		vmio_defer_init(&vm->report, h->loop, on_report, vm);
		if (vmio_timer_init(&vm->retry, vm->loop, on_retry, vm)) {
			log_err("out of memory for the hand-over's timers");
			return -1;
		}
	}
	return 0;
}

void vsock_handover_fini(struct vsock_handover *h)
{
	if (!h->vms)
		return;
	drop_state(h);
	for (unsigned i = 0; i < h->n; i++) {
		vmio_defer_cancel(&h->vms[i].work);
		vmio_defer_cancel(&h->vms[i].report);
		vmio_timer_fini(&h->vms[i].retry);
	}
	free(h->vms);
	h->vms = NULL;
}

/* ---- The successor's side ------------------------------------------------ */

/* fds[*next .. *next + n), or NULL if the section has not that many. */
static int *fd_run(struct vsock_handover_taken *vm, unsigned *next,
		   unsigned n, struct vmio_wire_reader *r)
{
	int *p = vm->fds + *next;

	if (n > vm->nfds - *next) {
		vmio_wire_fail(r, "names more fds than it carries");
		return NULL;
	}
	*next += n;
	return p;
}

static void parse_vm(struct vmio_wire_reader *r,
		     struct vsock_handover_taken *vm, uint64_t *cid,
		     const uint8_t **sock, uint32_t *sock_len)
{
	unsigned next = 0;
	uint32_t version = vmio_wire_get_u32(r);

	if (vmio_wire_ok(r) && version != VSOCK_HANDOVER_VM_VERSION) {
		vmio_wire_fail(r, "a VM record of a version this vmio does not read");
		return;
	}
	*cid = vmio_wire_get_u64(r);
	*sock_len = vmio_wire_get_count(r, 1);
	*sock = vmio_wire_get_bytes(r, *sock_len);
	vm->listener_kind = vmio_wire_get_u8(r);
	vm->session_len = vmio_wire_get_count(r, 1);
	vm->session = vmio_wire_get_bytes(r, vm->session_len);
	vm->nsession_fds = vmio_wire_get_u32(r);
	vm->device_len = vmio_wire_get_count(r, 1);
	vm->device = vmio_wire_get_bytes(r, vm->device_len);
	vm->ndevice_fds = vmio_wire_get_u32(r);
	if (!vmio_wire_ok(r))
		return;
	if (r->left)
		vmio_wire_fail(r, "bytes past its end");
	else if (vm->listener_kind > VSOCK_LISTENER_INHERITED)
		vmio_wire_fail(r, "an unknown kind of listener");
	else if (vm->listener_kind != VSOCK_LISTENER_NONE &&
		 fd_run(vm, &next, 1, r))
		vm->listener = vm->fds[0];
	if (!vmio_wire_ok(r))
		return;
	vm->session_fds = fd_run(vm, &next, vm->nsession_fds, r);
	vm->device_fds = fd_run(vm, &next, vm->ndevice_fds, r);
	if (vmio_wire_ok(r) && next != vm->nfds)
		vmio_wire_fail(r, "carries fds it does not name");
}

int vsock_handover_open_vm(struct vmio_takeover *t, unsigned index,
			   const struct vsock_vm_spec *spec,
			   struct vsock_handover_taken *vm)
{
	const struct vmio_envelope_section *s;
	char name[VMIO_ENVELOPE_NAME_MAX + 1];
	const char *mine = spec->socket ? spec->socket : "";
	struct vmio_wire_reader r;
	const uint8_t *sock = NULL;
	uint32_t sock_len = 0;
	uint64_t cid = 0;

	memset(vm, 0, sizeof(*vm));
	vm->listener = -1;
	snprintf(name, sizeof(name), "vm.%u", index);
	s = vmio_envelope_find(&t->env, name);
	if (!s) {
		snprintf(t->why, sizeof(t->why),
			 "the predecessor served fewer VMs (no VM %u in its state)",
			 index + 1);
		return -1;
	}
	vm->fds = calloc(s->fd_count ? s->fd_count : 1, sizeof(*vm->fds));
	if (!vm->fds) {
		snprintf(t->why, sizeof(t->why), "out of memory");
		return -1;
	}
	if (!vmio_takeover_take(t, name, s->fd_count, vm->fds))
		return -1;
	vm->nfds = s->fd_count;
	vmio_wire_reader_init(&r, s->data, s->len);
	parse_vm(&r, vm, &cid, &sock, &sock_len);
	if (!vmio_wire_ok(&r)) {
		snprintf(t->why, sizeof(t->why), "VM %u's state: %s", index + 1,
			 r.why);
		return -1;
	}
	if (cid != spec->guest_cid || sock_len != strlen(mine) ||
	    memcmp(sock, mine, sock_len)) {
		snprintf(t->why, sizeof(t->why),
			 "VM %u is guest CID %llu at socket '%s' here, not as the predecessor's: the VM list changed",
			 index + 1, (unsigned long long)spec->guest_cid, mine);
		return -1;
	}
	return 0;
}

struct vsock_device *
vsock_handover_restore_device(struct vsock_handover_taken *vm,
			      struct vmio_loop *loop,
			      const struct vsock_device_config *cfg, char *why,
			      size_t why_size)
{
	struct vmio_wire_reader r;
	struct vsock_device *d;

	vmio_wire_reader_init(&r, vm->device, vm->device_len);
	d = vsock_device_restore(loop, cfg, &r, vm->device_fds,
				 vm->ndevice_fds);
	if (d && r.left) {
		vmio_wire_fail(&r, "bytes past its end");
		vsock_device_handed_over(d);
		vsock_device_free(d);
		d = NULL;
	}
	if (!d)
		snprintf(why, why_size, "its vsock device: %s",
			 r.why ? r.why : "out of memory");
	return d;
}

int vsock_handover_restore_session(struct vsock_handover_taken *vm,
				   struct vmio_backend *be, char *why,
				   size_t why_size)
{
	char err[200];

	if (!vm->session_len && !vm->nsession_fds)
		return 0;
	if (vmio_session_restore(be, vm->session, vm->session_len,
				 vm->session_fds, vm->nsession_fds, err,
				 sizeof(err))) {
		snprintf(why, why_size, "its vhost-user session: %s", err);
		return -1;
	}
	return 0;
}

int vsock_handover_restore_router(struct vmio_takeover *t,
				  struct vsock_router *router)
{
	const struct vmio_envelope_section *s =
		vmio_envelope_find(&t->env, SECTION_ROUTER);
	struct vmio_wire_reader r;

	if (!s) {
		/* A vmio before the router's record (f080283): its sibling
		 * connections are reset at their next packet, as then. */
		if (router)
			log_warn("hand-over: the predecessor's state has no sibling flows; open sibling connections will be reset");
		return 0;
	}
	if (!router || s->fd_count) {
		snprintf(t->why, sizeof(t->why),
			 "the predecessor served VMs with siblings, this configuration has none");
		return -1;
	}
	vmio_wire_reader_init(&r, s->data, s->len);
	if (vsock_router_restore(router, &r)) {
		snprintf(t->why, sizeof(t->why), "the router's state: %s",
			 r.why);
		return -1;
	}
	return 0;
}

int vsock_handover_take_listener(struct vsock_handover_taken *vm)
{
	int fd = vm->listener;

	if (fd >= 0)
		vm->fds[0] = -1;
	vm->listener = -1;
	return fd;
}

void vsock_handover_taken_fini(struct vsock_handover_taken *vm)
{
	for (unsigned i = 0; i < vm->nfds; i++)
		if (vm->fds[i] >= 0)
			close(vm->fds[i]);
	free(vm->fds);
	vm->fds = NULL;
	vm->nfds = 0;
}

void vsock_handover_let_go(struct vsock_device *dev, struct vmio_backend *be)
{
	if (be) {
		vmio_session_handed_over(be);
		vmio_backend_give_up_listener(be);
	}
	if (dev)
		vsock_device_handed_over(dev);
}

void vsock_handover_serve(struct vsock_device *dev, struct vmio_backend *be)
{
	vsock_device_pause_host(dev, false);
	/* No session: nothing to resume (-EINVAL), the listener serves. */
	vmio_session_resume(be);
}
