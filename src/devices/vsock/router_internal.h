/* The sibling router's state, shared by router.c and its hand-over
 * (router_handover.c); not for anything else. */
#ifndef VMIO_DEVICES_VSOCK_ROUTER_INTERNAL_H
#define VMIO_DEVICES_VSOCK_ROUTER_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "devices/vsock/packet.h"
#include "devices/vsock/router.h"

/* Locks, and the order they are taken in (never the other way round):
 *   1. a flow stripe (flow_lock), over the buckets that hash to it;
 *   2. a receiver's inbound lock (rvm.lock): its queues, its state;
 *   3. the receiving loop's post lock, inside vmio_defer_post.
 * A VM talking to its own host sockets takes none of them: it reads its
 * queued count without a lock to see that no sibling packet waits. */
#define FLOW_BUCKETS 1024u
#define FLOW_LOCKS 64u

struct fwd_pkt {
	struct fwd_pkt *next;
	unsigned from;
	uint32_t off; /* payload already written to the receiver */
	struct vsock_hdr hdr;
	uint8_t data[];
};

/* A sibling connection, named by its two ends. */
struct flow {
	struct flow *next;
	unsigned vm[2];
	uint32_t port[2];
	uint16_t type;
};

struct rvm {
	uint64_t cid; /* set before the workers start */
	/* Under lock: what senders on other workers read and append to. */
	pthread_mutex_t lock;
	struct vmio_defer *rx_wake; /* the VM's rx queue, on the next turn */
	bool attached;  /* a VMM is there (vsock_router_set_vm_state) */
	unsigned types; /* the socket types its driver takes */
	unsigned queued; /* packets waiting for this VM, from all senders;
			  * written under lock, read with __atomic */
	/* The receiver's own thread alone. */
	unsigned next;   /* the sender whose turn it is */
	/* __atomic: a flow is unlinked by whichever end's worker ends it. */
	unsigned nflows; /* flows this VM opened */
};

/* What one sender has queued for one receiver: a FIFO of its own, so
 * that senders take turns (one packet each) at the receiver's rx queue. */
struct pair_use {
	struct fwd_pkt *head, *tail;
	unsigned pkts;
	uint64_t bytes;
};

struct vsock_router {
	unsigned n, max_flows;
	struct rvm *vms;
	bool *link;            /* n * n */
	struct pair_use *use;  /* [receiver * n + sender] */
	struct flow *buckets[FLOW_BUCKETS];
	pthread_mutex_t flow_locks[FLOW_LOCKS];
	uint32_t seed;
};

/* The stripe lock over the flow between (va, pa) and (vb, pb). */
pthread_mutex_t *vsock_router_flow_lock(struct vsock_router *r, unsigned va,
					uint32_t pa, unsigned vb, uint32_t pb);
/* Where that flow is, or would be linked: *result NULL if there is none.
 * Under its stripe lock. */
struct flow **vsock_router_flow_find(struct vsock_router *r, unsigned va,
				     uint32_t pa, unsigned vb, uint32_t pb);
/* Queues p for VM to behind what its sender queued before, waking VM to
 * if nothing waited. Under the receiver's lock. */
void vsock_router_enqueue(struct vsock_router *r, unsigned to,
			  struct fwd_pkt *p);

#endif
