/* Turning the descriptors of one chain into scatter lists, whatever ring
 * they came from: each buffer checked against guest memory and against
 * the order readable-then-writable, and at most one indirect table
 * entered (mapped, or gathered when it crosses regions). The rings' own
 * walks (split_ring.c, packed_ring.c) decide which descriptor comes
 * next. */
#ifndef VMIO_VIRTIO_CHAIN_WALK_H
#define VMIO_VIRTIO_CHAIN_WALK_H

#include <stdbool.h>
#include <stdint.h>

#include "virtio/memory.h"
#include "virtio/vq_state.h"

struct vmio_walk {
	struct vmio_vq *vq;
	const struct vmio_mem *mem;
	struct vmio_chain *c;
	const uint8_t *table; /* the indirect table (may be unaligned) */
	unsigned table_size;  /* its entries */
	bool in_indirect;
	bool seen_write;
};

/* Starts an empty chain c, to be pushed back as head. */
void vmio_walk_begin(struct vmio_walk *w, struct vmio_vq *vq,
		     const struct vmio_mem *mem, struct vmio_chain *c,
		     uint16_t head);
/* "descriptor" or "indirect descriptor", for messages. */
const char *vmio_walk_where(const struct vmio_walk *w);
/* vmio_walk_add's refusals, out of line: descriptor i is readable after
 * a writable one (rc 0), or its buffer failed translation with rc. Break
 * the queue; return -1. */
__attribute__((cold, noinline)) int
vmio_walk_refuse(struct vmio_walk *w, uint64_t addr, uint32_t len, unsigned i,
		 int rc);

/* Adds descriptor i's buffer. Returns 0, or -1 with the queue broken.
 * Inline, every path but the refusals: each buffer of every chain goes
 * through it. */
static inline int vmio_walk_add(struct vmio_walk *w, uint64_t addr,
				uint32_t len, bool writable, unsigned i)
{
	struct vmio_chain *c = w->c;
	unsigned n = c->nout + c->nin;
	unsigned before = n;
	int rc;

	if (!writable && w->seen_write)
		return vmio_walk_refuse(w, addr, len, i, 0);
	rc = vmio_mem_gpa_to_iov_hinted(w->mem, &w->vq->mem_hint, addr, len,
					c->iov, &n, VMIO_CHAIN_MAX_IOV);
	if (rc)
		return vmio_walk_refuse(w, addr, len, i, rc);
	if (writable) {
		w->seen_write = true;
		c->nin += n - before;
		c->in_len += len;
	} else {
		c->nout += n - before;
		c->out_len += len;
	}
	return 0;
}
/* A whole chain of one plain descriptor (no NEXT, no INDIRECT: a receive
 * buffer, a packet in one piece, most chains on the data path) into c,
 * without a walk. Returns 0, or -1 having changed nothing of what a walk
 * reads: the caller then walks the chain, which says what is wrong. */
static inline int vmio_walk_one(struct vmio_vq *vq, const struct vmio_mem *mem,
				struct vmio_chain *c, uint16_t head,
				uint64_t addr, uint32_t len, bool writable)
{
	unsigned n = 0;

	if (vmio_mem_gpa_to_iov_hinted(mem, &vq->mem_hint, addr, len, c->iov,
				       &n, VMIO_CHAIN_MAX_IOV))
		return -1;
	c->head = head;
	c->nin = writable ? n : 0;
	c->in_len = writable ? len : 0;
	c->nout = writable ? 0 : n;
	c->out_len = writable ? 0 : len;
	return 0;
}

/* Descriptor i points to an indirect table at addr, len bytes: checks it
 * may (INDIRECT_DESC negotiated, not from within a table, a whole number
 * of 16-byte entries) and makes it w->table. Returns 0, or -1 with the
 * queue broken. */
int vmio_walk_enter_table(struct vmio_walk *w, uint64_t addr, uint32_t len,
			  unsigned i);

#endif
