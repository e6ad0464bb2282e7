#include "virtio/virtqueue.h"

#include <endian.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/clock.h"
#include "util/iov.h"
#include "util/log.h"

/*
 * The rings live in memory the guest writes concurrently. Single ring
 * fields are read with relaxed atomic loads so the compiler reads each of
 * them exactly once; descriptors are snapshotted whole (read_desc) and only
 * the snapshot is checked and used.
 */

static inline uint16_t ld16(const uint16_t *p)
{
	return le16toh(__atomic_load_n(p, __ATOMIC_RELAXED));
}

static inline void st16(uint16_t *p, uint16_t v)
{
	__atomic_store_n(p, htole16(v), __ATOMIC_RELAXED);
}

static inline uint16_t *used_event(const struct vmio_vq *vq)
{
	return &vq->avail->ring[vq->size];
}

static inline uint16_t *avail_event(const struct vmio_vq *vq)
{
	return (uint16_t *)&vq->used->ring[vq->size];
}

void vmio_vq_init(struct vmio_vq *vq, unsigned index)
{
	memset(vq, 0, sizeof(*vq));
	vq->index = index;
	vq->kick_fd = -1;
	vq->call_fd = -1;
	vq->err_fd = -1;
}

void vmio_vq_release(struct vmio_vq *vq)
{
	free(vq->indirect_scratch);
	vq->indirect_scratch = NULL;
	vq->indirect_scratch_len = 0;
}

static bool aligned(const void *p, uint64_t uva, uintptr_t align)
{
	return !((uintptr_t)p & (align - 1)) && !(uva & (align - 1));
}

int vmio_vq_map(struct vmio_vq *vq, const struct vmio_mem *mem)
{
	unsigned n = vq->size;
	void *desc, *avail, *used;

	vmio_vq_unmap(vq);
	/* Split rings are a power of two in size (virtio 1.x, 2.7); the
	 * ring index arithmetic below relies on it. */
	if (!vq->addr_set || !n || n > VIRTQ_MAX_SIZE || (n & (n - 1)))
		return -EFAULT;
	desc = vmio_mem_uva_ptr(mem, vq->desc_uva, virtq_desc_bytes(n));
	avail = vmio_mem_uva_ptr(mem, vq->avail_uva, virtq_avail_bytes(n));
	used = vmio_mem_uva_ptr(mem, vq->used_uva, virtq_used_bytes(n));
	if (!desc || !avail || !used)
		return -EFAULT;
	if (!aligned(desc, vq->desc_uva, 16) ||
	    !aligned(avail, vq->avail_uva, 2) ||
	    !aligned(used, vq->used_uva, 4))
		return -EFAULT;
	vq->desc = desc;
	vq->avail = avail;
	vq->used = used;
	return 0;
}

void vmio_vq_unmap(struct vmio_vq *vq)
{
	vq->desc = NULL;
	vq->avail = NULL;
	vq->used = NULL;
}

bool vmio_vq_ready(const struct vmio_vq *vq)
{
	return vq->started && vq->enabled && vq->desc && !vq->broken;
}

static void signal_eventfd(int fd)
{
	uint64_t one = 1;
	ssize_t r;

	if (fd < 0)
		return;
	/* EAGAIN means the counter is saturated: the reader wakes anyway. */
	do
		r = write(fd, &one, sizeof(one));
	while (r < 0 && errno == EINTR);
}

void vmio_vq_call_fd_replaced(struct vmio_vq *vq)
{
	/* What went to the old call fd may never reach the driver: QEMU
	 * discards what its masked notifier (the call fd a queue starts on,
	 * served from SET_VRING_KICK) got when it installs the guest's. A
	 * driver that missed that one under event_idx would not be signalled
	 * again, so it is told on the new fd, and the next batch signals. */
	vq->signalled_used_valid = false;
	if (vq->started)
		signal_eventfd(vq->call_fd);
}

void vmio_vq_set_broken(struct vmio_vq *vq, const char *fmt, ...)
{
	char msg[256];
	va_list ap;

	if (vq->broken)
		return;
	vq->broken = true;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (vq->name)
		log_err("virtqueue %u (%s) broken: %s", vq->index, vq->name,
			msg);
	else
		log_err("virtqueue %u broken: %s", vq->index, msg);
	/* vhost-user's way to tell the VMM; it decides whether to reset. */
	signal_eventfd(vq->err_fd);
}

/* One pass over a chain: where it is read from, and what it produced. */
struct walk {
	struct vmio_vq *vq;
	const struct vmio_mem *mem;
	struct vmio_chain *c;
	const uint8_t *table; /* current descriptor table (may be unaligned) */
	unsigned table_size;
	bool in_indirect;
	bool seen_write;
};

static const char *where(const struct walk *w)
{
	return w->in_indirect ? "indirect descriptor" : "descriptor";
}

static void read_desc(struct virtq_desc *d, const uint8_t *table, unsigned i)
{
	struct virtq_desc raw;

	memcpy(&raw, table + (size_t)i * sizeof(raw), sizeof(raw));
	/* Force the copy to happen here, once: without the barrier the
	 * compiler may re-read guest memory at each use of a field, and a
	 * guest rewriting the descriptor could slip past a check. */
	__asm__ __volatile__("" ::: "memory");
	d->addr = le64toh(raw.addr);
	d->len = le32toh(raw.len);
	d->flags = le16toh(raw.flags);
	d->next = le16toh(raw.next);
}

static int check_indirect(struct walk *w, const struct virtq_desc *d,
			  unsigned i)
{
	struct vmio_vq *vq = w->vq;

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
	if (d->flags & VIRTQ_DESC_F_NEXT) {
		vmio_vq_set_broken(vq, "head %u: descriptor %u has both INDIRECT and NEXT",
				   w->c->head, i);
		return -1;
	}
	if (!d->len || d->len % sizeof(struct virtq_desc) ||
	    d->len / sizeof(struct virtq_desc) > VIRTQ_MAX_SIZE) {
		vmio_vq_set_broken(vq, "head %u: descriptor %u has an indirect table of bad length %u",
				   w->c->head, i, d->len);
		return -1;
	}
	return 0;
}

/*
 * An indirect table that spans two regions has no single local address:
 * gather it into per-queue scratch. Rare (a guest allocates tables with
 * kmalloc), so growing the scratch here is acceptable on the hot path.
 */
static const uint8_t *gather_indirect(struct walk *w,
				      const struct virtq_desc *d, unsigned i)
{
	struct vmio_vq *vq = w->vq;
	struct iovec iov[VMIO_MEM_MAX_REGIONS];
	unsigned entries = d->len / sizeof(struct virtq_desc);
	unsigned niov = 0;
	uint8_t *dst;

	if (vmio_mem_gpa_to_iov(w->mem, d->addr, d->len, iov, &niov,
				VMIO_MEM_MAX_REGIONS)) {
		vmio_vq_set_broken(vq, "head %u: descriptor %u: indirect table 0x%llx+%u lies outside guest memory",
				   w->c->head, i, (unsigned long long)d->addr,
				   d->len);
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

static int enter_indirect(struct walk *w, const struct virtq_desc *d,
			  unsigned i)
{
	const uint8_t *table;

	if (check_indirect(w, d, i))
		return -1;
	table = vmio_mem_gpa_ptr(w->mem, d->addr, d->len);
	if (!table)
		table = gather_indirect(w, d, i);
	if (!table)
		return -1;
	w->table = table;
	w->table_size = d->len / sizeof(struct virtq_desc);
	w->in_indirect = true;
	return 0;
}

static int add_buffer(struct walk *w, const struct virtq_desc *d, unsigned i)
{
	struct vmio_chain *c = w->c;
	bool writable = d->flags & VIRTQ_DESC_F_WRITE;
	unsigned n = c->nout + c->nin;
	unsigned before = n;
	int ret;

	if (!writable && w->seen_write) {
		vmio_vq_set_broken(w->vq, "head %u: %s %u is readable but follows a writable one",
				   c->head, where(w), i);
		return -1;
	}
	ret = vmio_mem_gpa_to_iov(w->mem, d->addr, d->len, c->iov, &n,
				  VMIO_CHAIN_MAX_IOV);
	if (ret == -ENOBUFS) {
		vmio_vq_set_broken(w->vq, "head %u: %s %u: chain needs more than %u scatter entries",
				   c->head, where(w), i, VMIO_CHAIN_MAX_IOV);
		return -1;
	}
	if (ret) {
		vmio_vq_set_broken(w->vq, "head %u: %s %u: buffer 0x%llx+%u lies outside guest memory",
				   c->head, where(w), i,
				   (unsigned long long)d->addr, d->len);
		return -1;
	}
	if (writable) {
		w->seen_write = true;
		c->nin += n - before;
		c->in_len += d->len;
	} else {
		c->nout += n - before;
		c->out_len += d->len;
	}
	return 0;
}

/*
 * Follows the chain from head, through at most one indirect table. Each
 * table level may be visited at most table_size times: a longer walk can
 * only be a loop.
 */
static int walk_chain(struct walk *w, uint16_t head)
{
	struct vmio_chain *c = w->c;
	unsigned i = head, visited = 0;
	struct virtq_desc d;

	c->head = head;
	c->nout = 0;
	c->nin = 0;
	c->out_len = 0;
	c->in_len = 0;
	for (;;) {
		if (++visited > w->table_size) {
			vmio_vq_set_broken(w->vq, "head %u: chain visits more than the %u %ss of its table (a loop?)",
					   head, w->table_size, where(w));
			return -1;
		}
		read_desc(&d, w->table, i);
		if (d.flags & VIRTQ_DESC_F_INDIRECT) {
			if (enter_indirect(w, &d, i))
				return -1;
			i = 0;
			visited = 0;
			continue;
		}
		if (add_buffer(w, &d, i))
			return -1;
		if (!(d.flags & VIRTQ_DESC_F_NEXT))
			return 0;
		if (d.next >= w->table_size) {
			vmio_vq_set_broken(w->vq, "head %u: %s %u: next %u is beyond the table of %u",
					   head, where(w), i, d.next,
					   w->table_size);
			return -1;
		}
		i = d.next;
	}
}

int vmio_vq_pop(struct vmio_vq *vq, const struct vmio_mem *mem,
		struct vmio_chain *chain)
{
	struct walk w = {
		.vq = vq,
		.mem = mem,
		.c = chain,
		.table = (const uint8_t *)vq->desc,
		.table_size = vq->size,
	};
	uint16_t avail_idx, pending, head;

	if (vq->broken)
		return -1;
	if (!vmio_vq_ready(vq))
		return 0;
	/* Acquire: the ring entry and descriptors we read next were written
	 * before the driver published this index. */
	avail_idx = le16toh(__atomic_load_n(&vq->avail->idx, __ATOMIC_ACQUIRE));
	pending = (uint16_t)(avail_idx - vq->last_avail_idx);
	if (!pending)
		return 0;
	if (pending > vq->size) {
		vmio_vq_set_broken(vq, "avail index moved by %u, more than the queue size %u",
				   pending, vq->size);
		return -1;
	}
	head = ld16(&vq->avail->ring[vq->last_avail_idx & (vq->size - 1)]);
	if (head >= vq->size) {
		vmio_vq_set_broken(vq, "avail entry %u holds head %u, beyond the queue size %u",
				   vq->last_avail_idx, head, vq->size);
		return -1;
	}
	if (walk_chain(&w, head))
		return -1;
	vq->last_avail_idx++;
	/* Tell the driver how far we have read, so that it kicks only for
	 * buffers past this point (unless kicks are off). */
	if (vq->event_idx && !vq->kicks_disabled)
		st16(avail_event(vq), vq->last_avail_idx);
	return 1;
}

void vmio_vq_unpop(struct vmio_vq *vq, unsigned n)
{
	vq->last_avail_idx -= (uint16_t)n;
}

void vmio_vq_push(struct vmio_vq *vq, uint16_t head, uint32_t written)
{
	struct virtq_used_elem *e;

	if (!vq->used)
		return;
	e = &vq->used->ring[vq->used_idx & (vq->size - 1)];
	e->id = htole32(head);
	e->len = htole32(written);
	vq->used_idx++;
}

static bool need_notify(struct vmio_vq *vq, uint16_t new_idx)
{
	uint16_t old_idx = vq->signalled_used;
	bool valid = vq->signalled_used_valid;

	if (!vq->event_idx)
		return !(ld16(&vq->avail->flags) & VIRTQ_AVAIL_F_NO_INTERRUPT);
	vq->signalled_used = new_idx;
	vq->signalled_used_valid = true;
	if (!valid)
		return true;
	return virtq_need_event(ld16(used_event(vq)), new_idx, old_idx);
}

void vmio_vq_flush_and_notify(struct vmio_vq *vq)
{
	uint16_t new_idx = vq->used_idx;

	if (!vq->used || new_idx == vq->published_used)
		return;
	/* Release: the used elements become visible no later than the index
	 * that covers them. */
	__atomic_store_n(&vq->used->idx, htole16(new_idx), __ATOMIC_RELEASE);
	vq->published_used = new_idx;
	/* The driver stores its flags or used_event, then loads used->idx;
	 * we store used->idx, then load its flags. Store-then-load ordering
	 * needs a full barrier on both sides, or each can miss the other's
	 * update and the driver sleeps with work pending. */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (need_notify(vq, new_idx))
		signal_eventfd(vq->call_fd);
}

uint16_t vmio_vq_avail_pending(const struct vmio_vq *vq)
{
	uint16_t n;

	if (!vmio_vq_ready(vq))
		return 0;
	n = (uint16_t)(ld16(&vq->avail->idx) - vq->last_avail_idx);
	return n > vq->size ? vq->size : n;
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

bool vmio_vq_poll_avail(const struct vmio_vq *vq, uint64_t poll_ns)
{
	uint64_t end;

	if (!poll_ns)
		return false;
	end = vmio_now_ns() + poll_ns;
	do {
		/* A clock read is dearer than a look at the ring. */
		for (int i = 0; i < 64; i++) {
			if (vmio_vq_avail_pending(vq))
				return true;
			cpu_relax();
		}
	} while (vmio_now_ns() < end);
	return false;
}

bool vmio_vq_enable_kicks(struct vmio_vq *vq, bool enable)
{
	if (!vq->used)
		return false;
	vq->kicks_disabled = !enable;
	if (!vq->event_idx)
		st16(&vq->used->flags, enable ? 0 : VIRTQ_USED_F_NO_NOTIFY);
	else if (enable)
		st16(avail_event(vq), vq->last_avail_idx);
	if (!enable)
		return false;
	/* Our store above against the driver's avail->idx store: same
	 * store-then-load race as in flush, same full barrier. */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	return ld16(&vq->avail->idx) != vq->last_avail_idx;
}

size_t vmio_chain_read(const struct vmio_chain *c, uint64_t offset, void *dst,
		       size_t len)
{
	return vmio_iov_to_buf(c->iov, c->nout, offset, dst, len);
}

size_t vmio_chain_write(const struct vmio_chain *c, uint64_t offset,
			const void *src, size_t len)
{
	return vmio_iov_from_buf(c->iov + c->nout, c->nin, offset, src, len);
}
