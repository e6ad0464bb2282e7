#include "virtio/chain_walk.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "virtio/vq_signal.h"

void vmio_walk_begin(struct vmio_walk *w, struct vmio_vq *vq,
		     const struct vmio_mem *mem, struct vmio_chain *c,
		     uint16_t head)
{
	*w = (struct vmio_walk){ .vq = vq, .mem = mem, .c = c };
	c->head = head;
	c->nout = 0;
	c->nin = 0;
	c->out_len = 0;
	c->in_len = 0;
}

const char *vmio_walk_where(const struct vmio_walk *w)
{
	return w->in_indirect ? "indirect descriptor" : "descriptor";
}

int vmio_walk_refuse(struct vmio_walk *w, uint64_t addr, uint32_t len,
		     unsigned i, int rc)
{
	uint16_t head = w->c->head;

	if (!rc)
		vmio_vq_set_broken(w->vq, "head %u: %s %u is readable but follows a writable one",
				   head, vmio_walk_where(w), i);
	else if (rc == -ENOBUFS)
		vmio_vq_set_broken(w->vq, "head %u: %s %u: chain needs more than %u scatter entries",
				   head, vmio_walk_where(w), i,
				   VMIO_CHAIN_MAX_IOV);
	else
		vmio_vq_set_broken(w->vq, "head %u: %s %u: buffer 0x%llx+%u lies outside guest memory",
				   head, vmio_walk_where(w), i,
				   (unsigned long long)addr, len);
	return -1;
}

/*
 * An indirect table that spans two regions has no single local address:
 * gather it into per-queue scratch. Rare (a guest allocates tables with
 * kmalloc), so growing the scratch here is acceptable on the hot path.
 */
static const uint8_t *gather_table(struct vmio_walk *w, uint64_t addr,
				   uint32_t len, unsigned i)
{
	struct vmio_vq *vq = w->vq;
	struct iovec iov[VMIO_MEM_MAX_REGIONS];
	unsigned entries = len / sizeof(struct virtq_desc);
	unsigned niov = 0;
	uint8_t *dst;

	if (vmio_mem_gpa_to_iov(w->mem, addr, len, iov, &niov,
				VMIO_MEM_MAX_REGIONS)) {
		vmio_vq_set_broken(vq, "head %u: descriptor %u: indirect table 0x%llx+%u lies outside guest memory",
				   w->c->head, i, (unsigned long long)addr, len);
		return NULL;
	}
	if (vq->indirect_scratch_len < entries) {
		struct virtq_desc *p = realloc(vq->indirect_scratch,
					       entries * sizeof(*p));

		if (!p) {
			vmio_vq_set_broken(vq, "head %u: no memory to gather an indirect table of %u entries",
					   w->c->head, entries);
			return NULL;
		}
		vq->indirect_scratch = p;
		vq->indirect_scratch_len = entries;
	}
	dst = (uint8_t *)vq->indirect_scratch;
	for (unsigned k = 0; k < niov; k++) {
		memcpy(dst, iov[k].iov_base, iov[k].iov_len);
		dst += iov[k].iov_len;
	}
	return (const uint8_t *)vq->indirect_scratch;
}

int vmio_walk_enter_table(struct vmio_walk *w, uint64_t addr, uint32_t len,
			  unsigned i)
{
	struct vmio_vq *vq = w->vq;
	const uint8_t *table;

	/* Split and packed descriptors are both 16 bytes. */
	_Static_assert(sizeof(struct virtq_desc) == sizeof(struct pvirtq_desc),
		       "descriptor sizes");
	if (!vq->indirect) {
		vmio_vq_set_broken(vq, "head %u: descriptor %u is indirect but INDIRECT_DESC was not negotiated",
				   w->c->head, i);
		return -1;
	}
	if (w->in_indirect) {
		vmio_vq_set_broken(vq, "head %u: indirect descriptor %u points to another indirect table",
				   w->c->head, i);
		return -1;
	}
	if (!len || len % sizeof(struct virtq_desc) ||
	    len / sizeof(struct virtq_desc) > VIRTQ_MAX_SIZE) {
		vmio_vq_set_broken(vq, "head %u: descriptor %u has an indirect table of bad length %u",
				   w->c->head, i, len);
		return -1;
	}
	table = vmio_mem_gpa_ptr(w->mem, addr, len);
	if (!table)
		table = gather_table(w, addr, len, i);
	if (!table)
		return -1;
	w->table = table;
	w->table_size = len / sizeof(struct virtq_desc);
	w->in_indirect = true;
	return 0;
}
