/* The sibling router; see router.h. */
#include "devices/vsock/router.h"
#include "devices/vsock/router_internal.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

struct vsock_router *vsock_router_new(unsigned nvms, unsigned max_flows)
{
	struct vsock_router *r = calloc(1, sizeof(*r));

	if (!r)
		return NULL;
	r->n = nvms;
	r->max_flows = max_flows;
	for (unsigned i = 0; i < FLOW_LOCKS; i++)
		pthread_mutex_init(&r->flow_locks[i], NULL);
	r->vms = calloc(nvms, sizeof(*r->vms));
	r->link = calloc((size_t)nvms * nvms, sizeof(*r->link));
	r->use = calloc((size_t)nvms * nvms, sizeof(*r->use));
	if (!r->vms || !r->link || !r->use) {
		vsock_router_free(r);
		return NULL;
	}
	for (unsigned i = 0; i < nvms; i++)
		pthread_mutex_init(&r->vms[i].lock, NULL);
	/* Ports come from guests: a seed they cannot know keeps them from
	 * piling flows into one bucket. */
	if (getrandom(&r->seed, sizeof(r->seed), GRND_NONBLOCK) !=
	    (ssize_t)sizeof(r->seed))
		r->seed = (uint32_t)(uintptr_t)r;
	return r;
}

static void queue_drop(struct vsock_router *r, unsigned idx)
{
	for (unsigned s = 0; s < r->n; s++) {
		struct pair_use *u = &r->use[(size_t)idx * r->n + s];

		while (u->head) {
			struct fwd_pkt *p = u->head;

			u->head = p->next;
			free(p);
		}
		*u = (struct pair_use){ 0 };
	}
	__atomic_store_n(&r->vms[idx].queued, 0, __ATOMIC_RELAXED);
}

void vsock_router_free(struct vsock_router *r)
{
	if (!r)
		return;
	for (unsigned b = 0; b < FLOW_BUCKETS; b++)
		while (r->buckets[b]) {
			struct flow *f = r->buckets[b];

			r->buckets[b] = f->next;
			free(f);
		}
	if (r->vms)
		for (unsigned i = 0; i < r->n; i++) {
			queue_drop(r, i);
			pthread_mutex_destroy(&r->vms[i].lock);
		}
	for (unsigned i = 0; i < FLOW_LOCKS; i++)
		pthread_mutex_destroy(&r->flow_locks[i]);
	free(r->vms);
	free(r->link);
	free(r->use);
	free(r);
}

void vsock_router_set_vm(struct vsock_router *r, unsigned idx, uint64_t cid,
			 struct vmio_defer *rx_wake)
{
	struct rvm *v = &r->vms[idx];

	pthread_mutex_lock(&v->lock);
	v->cid = cid;
	v->rx_wake = rx_wake;
	pthread_mutex_unlock(&v->lock);
}

void vsock_router_set_vm_state(struct vsock_router *r, unsigned idx,
			       bool attached, unsigned types)
{
	struct rvm *v = &r->vms[idx];

	pthread_mutex_lock(&v->lock);
	v->attached = attached;
	v->types = types;
	pthread_mutex_unlock(&v->lock);
}

void vsock_router_link(struct vsock_router *r, unsigned a, unsigned b)
{
	r->link[(size_t)a * r->n + b] = true;
	r->link[(size_t)b * r->n + a] = true;
}

/* ---- Flows ---- */

/* The hash does not depend on which end is which. */
static unsigned flow_hash(const struct vsock_router *r, unsigned va,
			  uint32_t pa, unsigned vb, uint32_t pb)
{
	uint64_t x = ((uint64_t)va << 32 | pa) ^ ((uint64_t)vb << 32 | pb);

	x ^= r->seed;
	x *= 0x9e3779b97f4a7c15ull;
	x ^= x >> 29;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 32;
	return (unsigned)(x & (FLOW_BUCKETS - 1));
}

pthread_mutex_t *vsock_router_flow_lock(struct vsock_router *r, unsigned va,
					uint32_t pa, unsigned vb, uint32_t pb)
{
	return &r->flow_locks[flow_hash(r, va, pa, vb, pb) % FLOW_LOCKS];
}

/* Under the flow's stripe lock. */
struct flow **vsock_router_flow_find(struct vsock_router *r, unsigned va,
				     uint32_t pa, unsigned vb, uint32_t pb)
{
	struct flow **pp = &r->buckets[flow_hash(r, va, pa, vb, pb)];

	for (; *pp; pp = &(*pp)->next) {
		const struct flow *f = *pp;

		if ((f->vm[0] == va && f->port[0] == pa && f->vm[1] == vb &&
		     f->port[1] == pb) ||
		    (f->vm[0] == vb && f->port[0] == pb && f->vm[1] == va &&
		     f->port[1] == pa))
			return pp;
	}
	return pp;
}

static void flow_unlink(struct vsock_router *r, struct flow **pp)
{
	struct flow *f = *pp;

	*pp = f->next;
	__atomic_sub_fetch(&r->vms[f->vm[0]].nflows, 1, __ATOMIC_RELAXED);
	free(f);
}

/* ---- Queues ---- */

/* Under the receiver's lock. The wake is posted under it too, so that a
 * muxer that clears its rx_wake (vsock_router_set_vm) is never woken
 * after. */
void vsock_router_enqueue(struct vsock_router *r, unsigned to,
			  struct fwd_pkt *p)
{
	struct rvm *v = &r->vms[to];
	struct pair_use *u = &r->use[(size_t)to * r->n + p->from];
	bool was_empty = !v->queued;

	p->next = NULL;
	if (u->tail)
		u->tail->next = p;
	else
		u->head = p;
	u->tail = p;
	__atomic_store_n(&v->queued, v->queued + 1, __ATOMIC_RELEASE);
	u->pkts++;
	u->bytes += p->hdr.len;
	if (was_empty && v->rx_wake)
		vmio_defer_post(v->rx_wake);
}

/* Queues for VM `to` an RST from (from, from_port) to (to, to_port).
 * Bounded by the flows: it is sent once per flow, as the flow goes.
 * Under the receiver's lock. */
static void send_rst(struct vsock_router *r, unsigned from, uint32_t from_port,
		     unsigned to, uint32_t to_port, uint16_t type)
{
	struct fwd_pkt *p = calloc(1, sizeof(*p));

	if (!p)
		return;
	p->from = from;
	p->hdr = (struct vsock_hdr){
		.src_cid = r->vms[from].cid,
		.dst_cid = r->vms[to].cid,
		.src_port = from_port,
		.dst_port = to_port,
		.type = type,
		.op = VSOCK_OP_RST,
	};
	vsock_router_enqueue(r, to, p);
}

static int find_vm(const struct vsock_router *r, uint64_t cid)
{
	for (unsigned i = 0; i < r->n; i++)
		if (r->vms[i].cid == cid)
			return (int)i;
	return -1;
}

/* Copies a data packet out of the guest's chain, before any lock is
 * taken: a sibling that is refused costs its sender a malloc and a copy,
 * and the receiver's lock is never held across one. NULL on no memory. */
static struct fwd_pkt *fwd_copy(unsigned from, const struct vsock_pkt *pkt,
				const struct vmio_chain *ch)
{
	const struct vsock_hdr *h = &pkt->hdr;
	struct fwd_pkt *p = malloc(sizeof(*p) + h->len);

	if (!p)
		return NULL;
	p->from = from;
	p->off = 0;
	p->hdr = *h;
	/* The parser checked the length: a short read cannot happen. */
	if (h->len &&
	    vmio_chain_read(ch, pkt->payload_off, p->data, h->len) != h->len) {
		free(p);
		return NULL;
	}
	return p;
}

/* The decision, under the flow's stripe lock and the receiver's lock: p
 * (NULL for an invalid packet, or with no memory) is queued, or
 * refused with *why. Returns 0 if p was taken (or an RST with nowhere
 * to go dropped), -1 if not. */
static int forward_locked(struct vsock_router *r, unsigned from, unsigned to,
			  const struct vsock_hdr *h, bool invalid,
			  struct fwd_pkt *p, const char **why)
{
	struct flow **fp =
		vsock_router_flow_find(r, from, h->src_port, to, h->dst_port);
	struct flow *f = *fp;
	const struct rvm *v = &r->vms[to];
	struct pair_use *u;

	if (invalid) {
		*why = "invalid packet";
		if (f) {
			send_rst(r, from, h->src_port, to, h->dst_port,
				 f->type);
			flow_unlink(r, fp);
		}
		return -1;
	}
	/* A packet of another type than its flow's (the host path kills such
	 * a connection too): forwarded, it would reach a driver with a type
	 * it may never have negotiated. The flow is reset on both sides. */
	if (f && h->type != f->type) {
		*why = "wrong socket type for that connection; connection reset";
		send_rst(r, from, h->src_port, to, h->dst_port, f->type);
		flow_unlink(r, fp);
		return -1;
	}
	if (!v->attached) {
		*why = "that VM has no VMM attached";
		if (f)
			flow_unlink(r, fp);
		return -1;
	}
	/* A seqpacket REQUEST to a driver that did not negotiate it. */
	if (!f && !(v->types & VSOCK_TYPE_BIT(h->type))) {
		*why = "that VM's driver does not take this socket type";
		return -1;
	}
	/* A late RST of a flow already over: the Linux driver sends one as
	 * it closes a socket that an RST (or its peer's) already ended. The
	 * other VM's kernel would ignore it: drop it, quietly, as the host
	 * path does. */
	if (!f && h->op == VSOCK_OP_RST) {
		free(p);
		return 0;
	}
	if (!f && h->op != VSOCK_OP_REQUEST) {
		*why = "no such sibling connection";
		return -1;
	}
	if (!f) {
		if (__atomic_load_n(&r->vms[from].nflows, __ATOMIC_RELAXED) >=
		    r->max_flows) {
			*why = "too many sibling connections";
			return -1;
		}
		f = calloc(1, sizeof(*f));
		if (!f) {
			*why = "out of memory";
			return -1;
		}
		f->vm[0] = from;
		f->port[0] = h->src_port;
		f->vm[1] = to;
		f->port[1] = h->dst_port;
		f->type = h->type;
		f->next = *fp;
		*fp = f;
		__atomic_add_fetch(&r->vms[from].nflows, 1, __ATOMIC_RELAXED);
	}
	u = &r->use[(size_t)to * r->n + from];
	/* An RST always goes (one per flow, and it ends the flow). */
	if (h->op != VSOCK_OP_RST &&
	    (u->pkts >= VSOCK_ROUTER_PAIR_PKTS ||
	     u->bytes + h->len > VSOCK_ROUTER_PAIR_BYTES)) {
		*why = "the receiving VM is not taking its packets; "
		       "connection reset";
		send_rst(r, from, h->src_port, to, h->dst_port, f->type);
		flow_unlink(r, fp);
		return -1;
	}
	if (!p) {
		*why = "out of memory";
		send_rst(r, from, h->src_port, to, h->dst_port, f->type);
		flow_unlink(r, fp);
		return -1;
	}
	if (h->op == VSOCK_OP_RST)
		flow_unlink(r, fp);
	vsock_router_enqueue(r, to, p);
	return 0;
}

int vsock_router_forward(struct vsock_router *r, unsigned from,
			 const struct vsock_pkt *pkt,
			 const struct vmio_chain *ch, bool invalid,
			 const char **why)
{
	const struct vsock_hdr *h = &pkt->hdr;
	int dst = find_vm(r, h->dst_cid);
	struct fwd_pkt *p = NULL;
	pthread_mutex_t *fl;
	unsigned to;
	int rc;

	if (dst < 0 || (unsigned)dst == from) {
		*why = "no VM of this process has that CID";
		return -1;
	}
	to = (unsigned)dst;
	if (!r->link[(size_t)from * r->n + to]) {
		*why = "that VM shares no group with this one";
		return -1;
	}
	if (!invalid)
		p = fwd_copy(from, pkt, ch);
	fl = vsock_router_flow_lock(r, from, h->src_port, to, h->dst_port);
	pthread_mutex_lock(fl);
	pthread_mutex_lock(&r->vms[to].lock);
	rc = forward_locked(r, from, to, h, invalid, p, why);
	pthread_mutex_unlock(&r->vms[to].lock);
	pthread_mutex_unlock(fl);
	if (rc)
		free(p);
	return rc;
}

bool vsock_router_rx_pending(const struct vsock_router *r, unsigned idx)
{
	return __atomic_load_n(&r->vms[idx].queued, __ATOMIC_ACQUIRE) != 0;
}

/* The receiver's next packet: of the next sender in turn that has one.
 * Under the receiver's lock. */
static struct pair_use *next_sender(struct vsock_router *r, unsigned idx)
{
	const struct rvm *v = &r->vms[idx];

	for (unsigned k = 0; k < r->n; k++) {
		struct pair_use *u =
			&r->use[(size_t)idx * r->n + (v->next + k) % r->n];

		if (u->head)
			return u;
	}
	return NULL;
}

uint32_t vsock_router_rx_next_len(struct vsock_router *r, unsigned idx)
{
	struct rvm *v = &r->vms[idx];
	struct pair_use *u;
	uint32_t len = 0;

	pthread_mutex_lock(&v->lock);
	u = next_sender(r, idx);
	if (u)
		len = u->head->hdr.len - u->head->off;
	pthread_mutex_unlock(&v->lock);
	return len;
}

uint32_t vsock_router_fill_rx(struct vsock_router *r, unsigned idx,
			      const struct vmio_chain *ch)
{
	struct rvm *v = &r->vms[idx];
	struct pair_use *u;
	struct fwd_pkt *p;
	struct vsock_hdr h;
	uint32_t room, left, piece;

	pthread_mutex_lock(&v->lock);
	u = next_sender(r, idx);
	p = u ? u->head : NULL;
	pthread_mutex_unlock(&v->lock);
	if (!p)
		return 0;
	/* Senders only append: the head packet is this thread's until it
	 * pops it under the lock again, so its payload is written to the
	 * guest with no lock held. */
	h = p->hdr;
	left = p->hdr.len - p->off;
	room = vsock_pkt_rx_capacity(ch, VSOCK_MAX_PKT_PAYLOAD);
	if (left && !room)
		return 0;
	piece = left < room ? left : room;
	h.len = piece;
	/* Not the last piece: the message does not end here. */
	if (piece < left && h.type == VSOCK_TYPE_SEQPACKET)
		h.flags &= ~VSOCK_SEQ_MASK;
	vsock_pkt_write_hdr(ch, &h);
	if (piece)
		vsock_pkt_write_payload(ch, 0, p->data + p->off, piece);
	p->off += piece;
	/* A packet's pieces go in a row; then the next sender's turn. */
	v->next = p->from;
	if (p->off == p->hdr.len) {
		pthread_mutex_lock(&v->lock);
		u->pkts--;
		u->bytes -= p->hdr.len;
		u->head = p->next;
		if (!u->head)
			u->tail = NULL;
		__atomic_store_n(&v->queued, v->queued - 1, __ATOMIC_RELEASE);
		pthread_mutex_unlock(&v->lock);
		v->next = (p->from + 1) % r->n;
		free(p);
	}
	return VSOCK_HDR_SIZE + piece;
}

/* Resets VM idx's flows in the buckets of one stripe, under its lock. */
static void reset_stripe(struct vsock_router *r, unsigned idx, unsigned stripe)
{
	for (unsigned b = stripe; b < FLOW_BUCKETS; b += FLOW_LOCKS) {
		struct flow **pp = &r->buckets[b];

		while (*pp) {
			struct flow *f = *pp;
			unsigned me = f->vm[0] == idx ? 0 : 1;
			struct rvm *other = &r->vms[f->vm[!me]];

			if (f->vm[me] != idx) {
				pp = &f->next;
				continue;
			}
			pthread_mutex_lock(&other->lock);
			send_rst(r, idx, f->port[me], f->vm[!me],
				 f->port[!me], f->type);
			pthread_mutex_unlock(&other->lock);
			flow_unlink(r, pp);
		}
	}
}

void vsock_router_vm_reset(struct vsock_router *r, unsigned idx)
{
	struct rvm *v = &r->vms[idx];

	/* Closed to new packets first, so that no sender opens a flow (or
	 * queues a packet) between the walk and the drop; the muxer tells
	 * its state again once it is reset. */
	pthread_mutex_lock(&v->lock);
	v->attached = false;
	v->types = 0;
	pthread_mutex_unlock(&v->lock);
	for (unsigned k = 0; k < FLOW_LOCKS; k++) {
		pthread_mutex_lock(&r->flow_locks[k]);
		reset_stripe(r, idx, k);
		pthread_mutex_unlock(&r->flow_locks[k]);
	}
	pthread_mutex_lock(&v->lock);
	queue_drop(r, idx);
	pthread_mutex_unlock(&v->lock);
}

unsigned vsock_router_flows(const struct vsock_router *r, unsigned idx)
{
	return __atomic_load_n(&r->vms[idx].nflows, __ATOMIC_RELAXED);
}
