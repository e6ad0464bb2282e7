/* The sibling router's hand-over record; see router_handover.h. */
#include "devices/vsock/router_handover.h"

#include <stdlib.h>
#include <string.h>

#include "devices/vsock/router_internal.h"

/* The locks are taken although no worker runs into the router while its
 * VMs are held: the record then never depends on that. */
static void save_flows(struct vsock_router *r, struct vmio_wire_writer *w)
{
	uint32_t n = 0;

	for (unsigned k = 0; k < FLOW_LOCKS; k++)
		pthread_mutex_lock(&r->flow_locks[k]);
	for (unsigned b = 0; b < FLOW_BUCKETS; b++)
		for (const struct flow *f = r->buckets[b]; f; f = f->next)
			n++;
	vmio_wire_put_u32(w, n);
	for (unsigned b = 0; b < FLOW_BUCKETS; b++)
		for (const struct flow *f = r->buckets[b]; f; f = f->next) {
			vmio_wire_put_u32(w, f->vm[0]);
			vmio_wire_put_u32(w, f->port[0]);
			vmio_wire_put_u32(w, f->vm[1]);
			vmio_wire_put_u32(w, f->port[1]);
			vmio_wire_put_u16(w, f->type);
		}
	for (unsigned k = FLOW_LOCKS; k--;)
		pthread_mutex_unlock(&r->flow_locks[k]);
}

static void save_packets(struct vsock_router *r, struct vmio_wire_writer *w)
{
	uint8_t wire[VSOCK_HDR_SIZE];
	uint32_t n = 0;

	for (unsigned i = 0; i < r->n; i++)
		pthread_mutex_lock(&r->vms[i].lock);
	for (size_t u = 0; u < (size_t)r->n * r->n; u++)
		n += r->use[u].pkts;
	vmio_wire_put_u32(w, n);
	for (unsigned to = 0; to < r->n; to++)
		for (unsigned from = 0; from < r->n; from++) {
			const struct pair_use *u =
				&r->use[(size_t)to * r->n + from];

			for (const struct fwd_pkt *p = u->head; p; p = p->next) {
				vmio_wire_put_u32(w, to);
				vmio_wire_put_u32(w, from);
				vmio_wire_put_u32(w, p->off);
				vsock_hdr_encode(&p->hdr, wire);
				vmio_wire_put_bytes(w, wire, sizeof(wire));
				vmio_wire_put_bytes(w, p->data, p->hdr.len);
			}
		}
	for (unsigned i = r->n; i--;)
		pthread_mutex_unlock(&r->vms[i].lock);
}

void vsock_router_save(struct vsock_router *r, struct vmio_wire_writer *w)
{
	vmio_wire_put_u32(w, r->n);
	save_flows(r, w);
	save_packets(r, w);
}

static bool linked(const struct vsock_router *r, uint32_t a, uint32_t b)
{
	return a < r->n && b < r->n && a != b && r->link[(size_t)a * r->n + b];
}

static void restore_flow(struct vsock_router *r, struct vmio_wire_reader *rd)
{
	uint32_t va = vmio_wire_get_u32(rd), pa = vmio_wire_get_u32(rd);
	uint32_t vb = vmio_wire_get_u32(rd), pb = vmio_wire_get_u32(rd);
	uint16_t type = vmio_wire_get_u16(rd);
	struct flow **fp, *f;

	if (!vmio_wire_ok(rd))
		return;
	if (!linked(r, va, vb)) {
		vmio_wire_fail(rd, "a sibling flow between VMs that share no group");
		return;
	}
	if (type != VSOCK_TYPE_STREAM && type != VSOCK_TYPE_SEQPACKET) {
		vmio_wire_fail(rd, "a sibling flow of an unknown socket type");
		return;
	}
	if (r->vms[va].nflows >= r->max_flows) {
		vmio_wire_fail(rd, "more sibling flows than --max-connections");
		return;
	}
	fp = vsock_router_flow_find(r, va, pa, vb, pb);
	if (*fp) {
		vmio_wire_fail(rd, "a sibling flow twice");
		return;
	}
	f = calloc(1, sizeof(*f));
	if (!f) {
		vmio_wire_fail(rd, "out of memory");
		return;
	}
	*f = (struct flow){ .next = *fp, .vm = { va, vb }, .port = { pa, pb },
			    .type = type };
	*fp = f;
	r->vms[va].nflows++;
}

/* A packet as the router could have queued it: between linked VMs, of
 * their CIDs, of a known op and type, its payload within its bounds. */
static const char *packet_refusal(const struct vsock_router *r, uint32_t to,
				  uint32_t from, uint32_t off,
				  const struct vsock_hdr *h)
{
	const struct pair_use *u;

	if (!linked(r, to, from))
		return "a sibling packet between VMs that share no group";
	if (h->src_cid != r->vms[from].cid || h->dst_cid != r->vms[to].cid)
		return "a sibling packet whose CIDs are not its VMs'";
	if (h->op == VSOCK_OP_INVALID || h->op > VSOCK_OP_MAX ||
	    (h->type != VSOCK_TYPE_STREAM && h->type != VSOCK_TYPE_SEQPACKET))
		return "a sibling packet of an unknown op or type";
	if (h->len > VSOCK_MAX_PKT_PAYLOAD || off > h->len)
		return "a sibling packet of a wrong length";
	u = &r->use[(size_t)to * r->n + from];
	if (h->op != VSOCK_OP_RST &&
	    (u->pkts >= VSOCK_ROUTER_PAIR_PKTS ||
	     u->bytes + h->len > VSOCK_ROUTER_PAIR_BYTES))
		return "more sibling packets queued than the router holds";
	return NULL;
}

static void restore_packet(struct vsock_router *r, struct vmio_wire_reader *rd)
{
	uint32_t to = vmio_wire_get_u32(rd), from = vmio_wire_get_u32(rd);
	uint32_t off = vmio_wire_get_u32(rd);
	const uint8_t *wire = vmio_wire_get_bytes(rd, VSOCK_HDR_SIZE);
	const uint8_t *data;
	const char *why;
	struct vsock_hdr h;
	struct fwd_pkt *p;

	if (!vmio_wire_ok(rd))
		return;
	vsock_hdr_decode(wire, &h);
	why = packet_refusal(r, to, from, off, &h);
	if (why) {
		vmio_wire_fail(rd, why);
		return;
	}
	data = vmio_wire_get_bytes(rd, h.len);
	p = data ? malloc(sizeof(*p) + h.len) : NULL;
	if (!p) {
		vmio_wire_fail(rd, data ? "out of memory"
				       : "a sibling packet cut short");
		return;
	}
	p->from = from;
	p->off = off;
	p->hdr = h;
	memcpy(p->data, data, h.len);
	pthread_mutex_lock(&r->vms[to].lock);
	vsock_router_enqueue(r, to, p);
	pthread_mutex_unlock(&r->vms[to].lock);
}

int vsock_router_restore(struct vsock_router *r, struct vmio_wire_reader *rd)
{
	uint32_t n;

	if (vmio_wire_get_u32(rd) != r->n) {
		vmio_wire_fail(rd, "the router's record is of another VM count");
		return -1;
	}
	n = vmio_wire_get_count(rd, 18);
	for (uint32_t i = 0; i < n && vmio_wire_ok(rd); i++)
		restore_flow(r, rd);
	n = vmio_wire_get_count(rd, 12 + VSOCK_HDR_SIZE);
	for (uint32_t i = 0; i < n && vmio_wire_ok(rd); i++)
		restore_packet(r, rd);
	if (vmio_wire_ok(rd) && rd->left)
		vmio_wire_fail(rd, "bytes past the router's record");
	return vmio_wire_ok(rd) ? 0 : -1;
}
