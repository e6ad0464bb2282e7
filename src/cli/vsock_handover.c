/* `vmio vsock` handed over (vsock_handover.h): what is vsock's of
 * device_handover.h's steps. */
#include "cli/vsock_handover.h"

#include <stdio.h>
#include <string.h>

#include "devices/vsock/device_handover.h"
#include "devices/vsock/router_handover.h"
#include "util/log.h"

#define SECTION_ROUTER "router"

static void pause_host(void *dev, bool paused)
{
	vsock_device_pause_host(dev, paused);
}

static int save(const void *dev, struct vmio_wire_writer *w, int fds[],
		unsigned max, unsigned *nfds, const char **why)
{
	return vsock_device_save(dev, w, fds, max, nfds, why);
}

static void handed_over(void *dev)
{
	vsock_device_handed_over(dev);
}

/* VM index's version, CID and socket. */
static void put_head(void *opaque, unsigned index, struct vmio_wire_writer *w)
{
	const struct vsock_handover *vh = opaque;
	const struct vsock_vm_spec *spec = &vh->list->vms[index];
	const char *sock = spec->socket ? spec->socket : "";

	vmio_wire_put_u32(w, VSOCK_HANDOVER_VM_VERSION);
	vmio_wire_put_u64(w, spec->guest_cid);
	vmio_wire_put_u32(w, (uint32_t)strlen(sock));
	vmio_wire_put_bytes(w, sock, strlen(sock));
}

/* Every VM is held: no worker forwards a sibling packet or takes one. */
static int add_router(void *opaque, struct vmio_envelope_writer *env)
{
	const struct vsock_handover *vh = opaque;
	struct vmio_wire_writer w;
	int rc;

	if (!vh->router)
		return 0;
	vmio_wire_writer_init(&w, VMIO_ENVELOPE_MAX_BYTES);
	vsock_router_save(vh->router, &w);
	rc = w.failed ? -1
		      : vmio_envelope_add(env, SECTION_ROUTER, w.buf, w.len, 0);
	vmio_wire_writer_fini(&w);
	return rc;
}

const struct devho_ops vsock_handover_ops = {
	.unit = "VM",
	.section = "vm",
	.device = "vsock device",
	.too_big = "bytes held for stalled readers",
	.pause_host = pause_host,
	.save = save,
	.handed_over = handed_over,
	.put_head = put_head,
	.add_sections = add_router,
};

/* ---- The successor's side ------------------------------------------------ */

struct vm_head {
	uint64_t cid;
	const uint8_t *sock;
	uint32_t sock_len;
};

static void read_head(void *opaque, struct vmio_wire_reader *r)
{
	struct vm_head *h = opaque;
	uint32_t version = vmio_wire_get_u32(r);

	if (vmio_wire_ok(r) && version != VSOCK_HANDOVER_VM_VERSION) {
		vmio_wire_fail(r, "a VM record of a version this vmio does not read");
		return;
	}
	h->cid = vmio_wire_get_u64(r);
	h->sock_len = vmio_wire_get_count(r, 1);
	h->sock = vmio_wire_get_bytes(r, h->sock_len);
}

int vsock_handover_open_vm(struct vmio_takeover *t, unsigned index,
			   const struct vsock_vm_spec *spec,
			   struct devho_taken *vm)
{
	const char *mine = spec->socket ? spec->socket : "";
	struct vm_head h = { 0 };

	if (devho_open(t, &vsock_handover_ops, index, read_head, &h, vm))
		return -1;
	if (h.cid != spec->guest_cid || h.sock_len != strlen(mine) ||
	    memcmp(h.sock, mine, h.sock_len)) {
		snprintf(t->why, sizeof(t->why),
			 "VM %u is guest CID %llu at socket '%s' here, not as the predecessor's: the VM list changed",
			 index + 1, (unsigned long long)spec->guest_cid, mine);
		return -1;
	}
	return 0;
}

struct vsock_device *
vsock_handover_restore_device(struct devho_taken *vm, struct vmio_loop *loop,
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
