/* The VMs of `vmio vsock` served; see vsock_serve.h. */
#include "cli/vsock_serve.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli/control.h"
#include "cli/control_handover.h"
#include "cli/serve.h"
#include "cli/vsock_handover.h"
#include "cli/vsock_kept.h"
#include "devices/vsock/router.h"
#include "event/cpu_account.h"
#include "util/json.h"
#include "util/log.h"
#include "util/sd_notify.h"
#include "util/fd_store.h"
#include "util/unix_socket.h"
#include "vhost-user/session_state.h"

/* One VM as the control socket sees it. */
struct vm_inst {
	struct vmio_cpu_account cpu; /* current while dev and be are made */
	struct vsock_device *dev;
	struct vmio_backend *be;
	struct vmio_loop *loop;
	struct vsock_kept *kept; /* --fd-store, or NULL */
	unsigned index, worker;
	const char *uds_path;
};

/* On the VM's worker: its names, its backend's and its own counters. */
static void write_vm(void *opaque, struct vmio_json *j)
{
	const struct vm_inst *vm = opaque;

	vmio_json_object_begin(j);
	vmio_json_kv_uint(j, "vm", vm->index + 1);
	vmio_json_kv_uint(j, "worker", vm->worker);
	vmio_json_kv_string(j, "uds_path", vm->uds_path);
	vmio_backend_write_stats(vm->be, j);
	vsock_device_write_stats(vm->dev, j);
	if (vm->kept)
		vsock_kept_write_stats(vm->kept, j);
	vmio_json_object_end(j);
}

struct vm_parts {
	struct vm_inst *vi;
	unsigned n;
};

static int add_vms(void *opaque, struct vmio_control *c)
{
	const struct vm_parts *p = opaque;

	for (unsigned i = 0; i < p->n; i++)
		if (vmio_control_add(c, "vms", p->vi[i].loop, write_vm,
				     &p->vi[i]))
			return -1;
	return 0;
}

/* The worker of each VM: its thread= key, or the next in turn. */
static int assign_workers(const struct vsock_vm_list *l, unsigned nworkers,
			  unsigned *worker)
{
	for (unsigned i = 0; i < l->n; i++) {
		int k = l->vms[i].thread;

		if (k >= (int)nworkers) {
			log_err("VM %u: thread=%d, but there %s %u worker%s "
				"(workers are numbered from 0; --threads, "
				"never more than the VMs)",
				i + 1, k, nworkers == 1 ? "is" : "are",
				nworkers, nworkers == 1 ? "" : "s");
			return -1;
		}
		worker[i] = k >= 0 ? (unsigned)k : i % nworkers;
	}
	return 0;
}

/* Siblings reach each other where they share a group; the single-VM form
 * has none to reach (its --groups is accepted, to no effect). Returns 0,
 * or -1 without memory. */
static int make_router(const struct vsock_serve *s, struct vsock_router **r)
{
	const struct vsock_vm_list *l = s->vms;

	*r = NULL;
	if (s->single)
		return 0;
	*r = vsock_router_new(l->n, s->device.max_conns);
	if (!*r)
		return -1;
	for (unsigned i = 0; i < l->n; i++)
		for (unsigned j = 0; j < i; j++)
			if (vsock_vms_share_group(&l->vms[i], &l->vms[j]))
				vsock_router_link(*r, i, j);
	return 0;
}

/* The VM's line at info: the single-VM form's names no socket, which
 * may be an inherited --fd. */
static void say_vm(const struct vsock_serve *s, unsigned i)
{
	const struct vsock_vm_spec *v = &s->vms->vms[i];

	if (s->single)
		log_info("vsock: guest CID %llu, host sockets at %s",
			 (unsigned long long)v->guest_cid, v->uds_path);
	else
		log_info("vsock: VM %u: guest CID %llu, vhost-user socket %s, "
			 "host sockets at %s",
			 i + 1, (unsigned long long)v->guest_cid, v->socket,
			 v->uds_path);
}

/* VM i's device configuration: the command's, but for its own keys. */
static struct vsock_device_config vm_config(const struct vsock_serve *s,
					    struct vsock_router *router,
					    unsigned i)
{
	const struct vsock_vm_spec *v = &s->vms->vms[i];
	struct vsock_device_config cfg = s->device;

	cfg.guest_cid = v->guest_cid;
	cfg.uds_path = v->uds_path;
	if (v->tx_buffer_size)
		cfg.buf_size = (uint32_t)v->tx_buffer_size;
	cfg.max_queue_size = v->queue_size ? v->queue_size
					   : s->backend->queue_size;
	cfg.router = router;
	cfg.vm_index = i;
	return cfg;
}

/* What every VM's backend is set to, made fresh or taken over. */
static void set_up_backend(const struct vsock_serve *s, struct vmio_backend *be)
{
	vmio_backend_set_message_timeout(be, s->backend->message_timeout_ms);
	vmio_backend_set_kick_budget(be, &s->backend->idle_kicks);
}

/* VM i's device and backend on loop. Returns 0, or -1 (logged). */
static int make_vm(const struct vsock_serve *s, struct vsock_router *router,
		   unsigned i, struct vm_inst *vm)
{
	const struct vsock_vm_spec *v = &s->vms->vms[i];
	struct vsock_device_config cfg = vm_config(s, router, i);
	struct vmio_cpu_account *outer;
	int rc = -ENOMEM;

	outer = vmio_cpu_account_enter(&vm->cpu);
	vm->dev = vsock_device_new(vm->loop, &cfg, &rc);
	if (vm->dev)
		vm->be = vmio_backend_new(vm->loop, vsock_device_ops(vm->dev),
					  vm->dev);
	vmio_cpu_account_leave(outer);
	vm->index = i;
	vm->uds_path = v->uds_path;
	if (!vm->dev) {
		if (s->single)
			log_err("cannot serve --uds-path %s: %s", v->uds_path,
				vmio_unix_strerror(rc));
		else
			log_err("VM %u: cannot serve uds-path %s: %s", i + 1,
				v->uds_path, vmio_unix_strerror(rc));
		return -1;
	}
	if (s->single)
		say_vm(s, i);
	if (!vm->be) {
		log_err("out of memory setting up the device%s",
			s->single ? "" : "s");
		return -1;
	}
	set_up_backend(s, vm->be);
	return 0;
}

/* VM i taken over from the predecessor's state: its device, then its
 * listener, then its session (held). Returns 0, or -1 with the reason in
 * t->why; what was taken is let go of without a trace. */
static int take_vm(const struct vsock_serve *s, struct vsock_router *router,
		   unsigned i, struct vm_inst *vm, struct vmio_cli_run *run,
		   struct vmio_takeover *t)
{
	const struct vsock_vm_spec *v = &s->vms->vms[i];
	struct vsock_device_config cfg = vm_config(s, router, i);
	struct devho_taken tv;
	struct vmio_cpu_account *outer;
	char why[sizeof(t->why)] = "out of memory";
	int rc = -1;

	vm->index = i;
	vm->uds_path = v->uds_path;
	if (vsock_handover_open_vm(t, i, v, &tv))
		goto out;
	outer = vmio_cpu_account_enter(&vm->cpu);
	vm->dev = vsock_handover_restore_device(&tv, vm->loop, &cfg, why,
						sizeof(why));
	if (vm->dev)
		vm->be = vmio_backend_new(vm->loop, vsock_device_ops(vm->dev),
					  vm->dev);
	vmio_cpu_account_leave(outer);
	if (!vm->be)
		goto refused;
	set_up_backend(s, vm->be);
	if (vmio_cli_attach_handed_over(
		    vm->be,
		    tv.listener_kind == DEVHO_LISTENER_BOUND ? v->socket : NULL,
		    devho_take_listener(&tv), "", run)) {
		snprintf(why, sizeof(why), "cannot accept on its listener");
		goto refused;
	}
	if (devho_restore_session(&tv, vm->be, why, sizeof(why)))
		goto refused;
	rc = 0;
	goto out;
refused:
	snprintf(t->why, sizeof(t->why), "VM %u: %s", i + 1, why);
out:
	devho_taken_fini(&tv);
	return rc;
}

/* VM i's backend where its VMM finds it. Returns 0, or -1 (logged). */
static int attach_vm(const struct vsock_serve *s, unsigned i,
		     struct vm_inst *vm, struct vmio_cli_run *run)
{
	const struct vsock_vm_spec *v = &s->vms->vms[i];
	char who[24] = "";

	if (!s->single)
		snprintf(who, sizeof(who), "VM %u: ", i + 1);
	if (vmio_cli_attach(vm->be, v->socket, s->backend->fd, who, run))
		return -1;
	if (!s->single)
		say_vm(s, i);
	log_debug("vsock: VM %u (CID %llu) is served by worker %u", i + 1,
		  (unsigned long long)v->guest_cid, vm->worker);
	return 0;
}

static void stop_workers(void *pool)
{
	vmio_workers_stop(pool);
}

/* Every VM of the run, and its --control, as the state and the command
 * line say. */
struct serve_run {
	const struct vsock_serve *s;
	struct vmio_cli_run run;
	struct vm_inst *vi;
	struct vsock_router *router;
	struct vm_parts parts;
	struct vmio_control *ctl;
	struct vsock_handover ho;
	struct vmio_takeover tk; /* when started by a predecessor */
	struct vsock_kept **kept; /* --fd-store: each VM's */
	unsigned made;           /* VMs with a device */
	bool taken;              /* from a predecessor, and serving */
};

/* --fd-store: what systemd gave back, and each VM's kept state. Returns
 * 0, or -1 without memory. */
static int open_kept(struct serve_run *r, bool successor)
{
	unsigned n = r->s->vms->n;

	if (!r->s->fd_store)
		return 0;
	/* Spliced tx chains complete out of order: a used index is then no
	 * place to serve a ring again from, and a guest could get a chain
	 * back twice. */
	if (!r->s->device.tx_copy) {
		log_warn("--fd-store: nothing is kept with --tx-splice (its chains complete out of order, so a ring cannot be served again from its used index): a crash costs every guest its vsock device");
		return 0;
	}
	if (!vmio_fd_store_available())
		log_warn("--fd-store: not started by systemd (no NOTIFY_SOCKET): nothing is kept, and a crash costs every guest its vsock device");
	else if (!successor)
		vsock_kept_collect();
	r->kept = calloc(n, sizeof(*r->kept));
	if (!r->kept)
		return -1;
	for (unsigned i = 0; i < n; i++) {
		r->kept[i] = vsock_kept_open(i, &r->s->vms->vms[i],
					     r->vi[i].loop);
		if (!r->kept[i])
			return -1;
	}
	return 0;
}

/* After a crash (systemd started this process with what the dead one
 * kept): every VM's session taken back and served, each VM on its own;
 * what no VM took is closed. Before the workers start. */
static void take_back(struct serve_run *r)
{
	unsigned taken = 0;

	for (unsigned i = 0; i < r->s->vms->n; i++) {
		struct vm_inst *vm = &r->vi[i];

		if (vsock_kept_restore(r->kept[i], vm->be, vm->dev) > 0) {
			vmio_session_resume(vm->be);
			taken++;
		}
	}
	vsock_kept_done();
	if (taken)
		log_info("fd store: %u VM%s taken back after the process before ended", taken,
			 taken == 1 ? "" : "s");
}

/* Every VM's session kept from now on. */
static void keep(struct serve_run *r)
{
	for (unsigned i = 0; r->kept && i < r->s->vms->n; i++) {
		vsock_kept_start(r->kept[i], r->vi[i].be, r->vi[i].dev);
		r->vi[i].kept = r->kept[i];
	}
}

/* Fresh: every VM made and (but the single form's) listening. */
static int open_fresh(struct serve_run *r)
{
	const struct vsock_serve *s = r->s;

	for (unsigned i = 0; i < s->vms->n; i++) {
		/* The VM list listens as it goes; the single-VM form, as
		 * every backend command of one device, once the control
		 * socket and the signals are there. */
		r->made = i + 1;
		if (make_vm(s, r->router, i, &r->vi[i]) ||
		    (!s->single && attach_vm(s, i, &r->vi[i], &r->run)))
			return -1;
	}
	return vmio_control_open(r->run.loop, "vsock", s->backend->control_path,
				 add_vms, &r->parts, &r->ctl);
}

/* What a successor took, let go of: the predecessor serves it still. */
static void let_go(struct serve_run *r)
{
	for (unsigned i = 0; i < r->made; i++)
		devho_let_go(&vsock_handover_ops, r->vi[i].dev, r->vi[i].be);
	vmio_control_give_up_listener(r->ctl);
}

/* Started by a predecessor: every VM and --control from its state.
 * Returns 0, or -1 with the reason in r->tk.why. */
static int take_over(struct serve_run *r)
{
	const struct vsock_serve *s = r->s;
	struct vmio_takeover *t = &r->tk;
	unsigned i;

	if (vmio_takeover_receive(t, r->run.loop, s->handover_timeout_ms))
		goto refuse;
	for (i = 0; i < s->vms->n; i++) {
		r->made = i + 1;
		if (take_vm(s, r->router, i, &r->vi[i], &r->run, t))
			goto refuse;
	}
	if (vmio_envelope_find(&t->env, "vm.0") && i < VSOCK_MAX_VMS) {
		char name[VMIO_ENVELOPE_NAME_MAX + 1];

		snprintf(name, sizeof(name), "vm.%u", i);
		if (vmio_envelope_find(&t->env, name)) {
			snprintf(t->why, sizeof(t->why),
				 "the predecessor served more VMs than the %u here: the VM list changed",
				 i);
			goto refuse;
		}
	}
	if (vsock_handover_restore_router(t, r->router))
		goto refuse;
	if (control_handover_take(t, r->run.loop, "vsock",
				  s->backend->control_path, add_vms, &r->parts,
				  &r->ctl))
		goto refuse;
	return 0;
refuse:
	return -1;
}

/* Taken over: the predecessor has its answer and serves nothing more,
 * so this one serves every VM now. Returns 0, or -1 if the predecessor
 * had stopped waiting (it serves on). */
static int serve_taken(struct serve_run *r)
{
	if (devho_took_over(&r->ho.ho, &r->tk))
		return -1;
	r->taken = true;
	return 0;
}

/* SIGHUP and --control's reload, from before any worker starts (they
 * inherit the blocked signals). */
static int watch_handover(struct serve_run *r, struct vmio_workers *pool)
{
	struct devho *h = &r->ho.ho;

	r->ho.list = r->s->vms;
	r->ho.router = r->router;
	h->ops = &vsock_handover_ops;
	h->opaque = &r->ho;
	h->loop = r->run.loop;
	h->pool = pool;
	h->control_path = r->s->backend->control_path;
	h->ctl = &r->ctl;
	h->max_device_fds = 2 * r->s->device.max_conns + 2;
	h->timeout_ms = r->s->handover_timeout_ms;
	if (devho_alloc(h, r->s->vms->n))
		return -1;
	for (unsigned i = 0; i < h->n; i++) {
		h->units[i].loop = r->vi[i].loop;
		h->units[i].dev = r->vi[i].dev;
		h->units[i].be = r->vi[i].be;
	}
	if (devho_init(h))
		return -1;
	return devho_watch(h);
}

int vsock_serve(const struct vsock_serve *s)
{
	const struct vsock_vm_list *l = s->vms;
	struct vmio_workers *pool = vmio_workers_from_opts(s->workers, l->n);
	unsigned *worker = calloc(l->n, sizeof(*worker));
	struct serve_run r = {
		.s = s,
		.run.pool = pool,
		.vi = calloc(l->n, sizeof(*r.vi)),
		.tk.sock = -1,
	};
	int successor = vmio_takeover_open(&r.tk);
	int status = 1;
	unsigned i;

	r.parts = (struct vm_parts){ r.vi, l->n };
	if (!pool || !r.vi || !worker || make_router(s, &r.router)) {
		log_err("out of memory setting up the VMs");
		goto out;
	}
	if (successor < 0)
		goto out;
	r.run.loop = vmio_workers_loop(pool, 0);
	/* A thread= beyond the workers is the command line's mistake. */
	if (assign_workers(l, vmio_workers_count(pool), worker)) {
		status = VMIO_EXIT_USAGE;
		goto out;
	}
	for (i = 0; i < l->n; i++) {
		r.vi[i].worker = worker[i];
		r.vi[i].loop = vmio_workers_loop(pool, worker[i]);
	}
	if (open_kept(&r, successor > 0)) {
		log_err("out of memory setting up the fd store");
		goto out;
	}
	/* Signals are blocked before any worker starts, so that each one
	 * inherits the mask and SIGTERM reaches the signalfd of worker 0;
	 * and before any socket listens: whoever sees a socket may signal
	 * at once, and a SIGTERM must find vmio ready to end cleanly. */
	if (vmio_cli_watch_signals(r.run.loop, stop_workers, pool))
		goto out;
	if (successor ? take_over(&r) : open_fresh(&r))
		goto unwatch;
	if (watch_handover(&r, pool))
		goto unwatch;
	if (successor) {
		if (serve_taken(&r))
			goto unwatch;
	} else {
		if (s->single && attach_vm(s, 0, &r.vi[0], &r.run))
			goto unwatch;
		if (r.kept)
			take_back(&r);
		/* Every VM's sockets are bound: systemd may start the
		 * VMMs. */
		vmio_sd_notify_ready();
	}
	keep(&r);
	log_debug("vsock: %u VM%s on %u worker thread%s", l->n,
		  l->n == 1 ? "" : "s", vmio_workers_count(pool),
		  vmio_workers_count(pool) == 1 ? "" : "s");
	if (!vmio_workers_start(pool) && !vmio_workers_run(pool))
		status = 0;
unwatch:
	vmio_cli_unwatch_signals();
out:
	if (successor > 0 && !r.taken) {
		/* Not a trace: the predecessor serves on. */
		devho_refuse(&r.tk);
		let_go(&r);
	}
	vmio_takeover_fini(&r.tk);
	vmio_control_free(r.ctl);
	/* With every worker joined, backends first: their resets reach the
	 * router and the other VMs' muxers, which must all still be there.
	 * Before them, each journal is let go: the guests still hold the
	 * connections those resets close here, and a session kept in the
	 * fd store (a stop that keeps it, systemd 254's
	 * FileDescriptorStorePreserve=) is taken back with them. */
	for (i = 0; r.vi && i < l->n; i++)
		if (r.vi[i].dev)
			vsock_device_let_go_journal(r.vi[i].dev);
	for (i = 0; r.vi && i < l->n; i++)
		vmio_backend_free(r.vi[i].be);
	for (i = 0; r.vi && i < l->n; i++) {
		vsock_device_free(r.vi[i].dev);
		vmio_cpu_account_fini(&r.vi[i].cpu);
	}
	devho_fini(&r.ho.ho);
	for (i = 0; r.kept && i < l->n; i++)
		vsock_kept_free(r.kept[i]);
	free(r.kept);
	free(r.vi);
	free(worker);
	vsock_router_free(r.router);
	vmio_workers_free(pool);
	return status;
}
