/* The VMs of `vmio vsock` served; see vsock_serve.h. */
#include "cli/vsock_serve.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli/control.h"
#include "cli/serve.h"
#include "devices/vsock/router.h"
#include "event/cpu_account.h"
#include "util/json.h"
#include "util/log.h"
#include "util/sd_notify.h"
#include "util/unix_socket.h"

/* One VM as the control socket sees it. */
struct vm_inst {
	struct vmio_cpu_account cpu; /* current while dev and be are made */
	struct vsock_device *dev;
	struct vmio_backend *be;
	struct vmio_loop *loop;
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

/* VM i's device and backend on loop. Returns 0, or -1 (logged). */
static int make_vm(const struct vsock_serve *s, struct vsock_router *router,
		   unsigned i, struct vm_inst *vm)
{
	const struct vsock_vm_spec *v = &s->vms->vms[i];
	struct vsock_device_config cfg = s->device;
	struct vmio_cpu_account *outer;
	int rc = -ENOMEM;

	cfg.guest_cid = v->guest_cid;
	cfg.uds_path = v->uds_path;
	if (v->tx_buffer_size)
		cfg.buf_size = (uint32_t)v->tx_buffer_size;
	cfg.max_queue_size = v->queue_size ? v->queue_size
					   : s->backend->queue_size;
	cfg.router = router;
	cfg.vm_index = i;
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
	vmio_backend_set_message_timeout(vm->be,
					 s->backend->message_timeout_ms);
	vmio_backend_set_kick_budget(vm->be, &s->backend->idle_kicks);
	return 0;
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

int vsock_serve(const struct vsock_serve *s)
{
	const struct vsock_vm_list *l = s->vms;
	struct vmio_workers *pool = vmio_workers_from_opts(s->workers, l->n);
	struct vm_inst *vi = calloc(l->n, sizeof(*vi));
	unsigned *worker = calloc(l->n, sizeof(*worker));
	struct vmio_cli_run run = { .pool = pool };
	struct vsock_router *router = NULL;
	struct vm_parts parts = { vi, l->n };
	struct vmio_control *ctl = NULL;
	int status = 1;
	unsigned i;

	if (!pool || !vi || !worker || make_router(s, &router)) {
		log_err("out of memory setting up the VMs");
		goto out;
	}
	run.loop = vmio_workers_loop(pool, 0);
	/* A thread= beyond the workers is the command line's mistake. */
	if (assign_workers(l, vmio_workers_count(pool), worker)) {
		status = VMIO_EXIT_USAGE;
		goto out;
	}
	for (i = 0; i < l->n; i++) {
		vi[i].worker = worker[i];
		vi[i].loop = vmio_workers_loop(pool, worker[i]);
		/* The VM list listens as it goes; the single-VM form, as
		 * every backend command of one device, once the control
		 * socket and the signals are there. */
		if (make_vm(s, router, i, &vi[i]) ||
		    (!s->single && attach_vm(s, i, &vi[i], &run)))
			goto out;
	}
	if (vmio_control_open(run.loop, "vsock", s->backend->control_path,
			      add_vms, &parts, &ctl))
		goto out;
	/* Signals are blocked before any worker starts, so that each one
	 * inherits the mask and SIGTERM reaches the signalfd of worker 0. */
	if (vmio_cli_watch_signals(run.loop, stop_workers, pool))
		goto out;
	if (s->single && attach_vm(s, 0, &vi[0], &run))
		goto unwatch;
	log_debug("vsock: %u VM%s on %u worker thread%s", l->n,
		  l->n == 1 ? "" : "s", vmio_workers_count(pool),
		  vmio_workers_count(pool) == 1 ? "" : "s");
	/* Every VM's sockets are bound: systemd may start the VMMs. */
	vmio_sd_notify_ready();
	if (!vmio_workers_start(pool) && !vmio_workers_run(pool))
		status = 0;
unwatch:
	vmio_cli_unwatch_signals();
out:
	vmio_control_free(ctl);
	/* With every worker joined, backends first: their resets reach the
	 * router and the other VMs' muxers, which must all still be there. */
	for (i = 0; vi && i < l->n; i++)
		vmio_backend_free(vi[i].be);
	for (i = 0; vi && i < l->n; i++) {
		vsock_device_free(vi[i].dev);
		vmio_cpu_account_fini(&vi[i].cpu);
	}
	free(vi);
	free(worker);
	vsock_router_free(router);
	vmio_workers_free(pool);
	return status;
}
