/* A virtqueue's state, seen from the device: the types the files of
 * src/virtio share (virtqueue.h is the interface devices use). */
#ifndef VMIO_VIRTIO_VQ_STATE_H
#define VMIO_VIRTIO_VQ_STATE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "virtio/dirty_log.h"
#include "virtio/ring.h"

/* Scatter entries one chain may produce. A descriptor that crosses a
 * region boundary takes more than one. */
#define VMIO_CHAIN_MAX_IOV 1024

struct vmio_chain {
	uint16_t head;     /* descriptor index to push back as used */
	unsigned nout;     /* iov[0..nout): readable by the device */
	unsigned nin;      /* iov[nout..nout+nin): writable by the device */
	uint64_t out_len;  /* total bytes of the readable part */
	uint64_t in_len;   /* total bytes of the writable part */
	struct iovec iov[VMIO_CHAIN_MAX_IOV];
};

static inline struct iovec *vmio_chain_out(struct vmio_chain *c)
{
	return c->iov;
}
static inline struct iovec *vmio_chain_in(struct vmio_chain *c)
{
	return c->iov + c->nout;
}

/* Segment i of a chain just popped, read a field at a time. The pop
 * stored each field on its own a moment ago; one 16-byte load of the
 * pair, what a plain struct copy compiles to, cannot be served from
 * those two stores still in flight and waits until every older store
 * reached the cache, among them the last frame's into lines the guest's
 * core holds: on net's rx that wait was most of a frame's cost
 * (architecture.md section 1, `src/virtio`). The empty asm
 * keeps the compiler from merging the two loads. */
static inline struct iovec vmio_chain_seg(const struct vmio_chain *c,
					  unsigned i)
{
	void *base = c->iov[i].iov_base;

	__asm__("" : "+r"(base));
	return (struct iovec){ .iov_base = base, .iov_len = c->iov[i].iov_len };
}

/* What the transport (the vhost-user core) does for a queue outside its
 * rings, on the thread that serves the queue; opaque is the queue's
 * (vmio_vq_set_transport). */
struct vmio_vq_transport {
	/* Tells the driver of used buffers (a used buffer notification). */
	void (*notify)(void *opaque);
	/* The queue has just broken (once: it stays broken until the
	 * transport resets it). May be NULL. */
	void (*broken)(void *opaque);
};

/* A used descriptor the next flush writes: at ring slot pos, with flags
 * (the used wrap counter's bits, and WRITE when len counts). */
struct vmio_packed_used {
	uint32_t len;
	uint16_t id;
	uint16_t pos;
	uint16_t flags;
};

struct vmio_vq {
	unsigned index;     /* queue number, for log lines */
	const char *name;   /* device's name of the queue, may be NULL */
	const struct vmio_vq_transport *transport; /* NULL: none */
	void *transport_opaque;

	/* Set by the transport from SET_VRING_* messages. */
	uint16_t size;          /* SET_VRING_NUM; 0 until set */
	/* Split: the three rings. Packed: the descriptor ring, the driver's
	 * event suppression area, the device's. */
	uint64_t desc_uva, avail_uva, used_uva; /* SET_VRING_ADDR */
	bool addr_set;
	bool event_idx; /* VIRTIO_RING_F_EVENT_IDX negotiated */
	bool indirect;  /* VIRTIO_RING_F_INDIRECT_DESC negotiated */
	bool packed;    /* VIRTIO_F_RING_PACKED negotiated */
	bool in_order;  /* VIRTIO_F_IN_ORDER negotiated */

	/* Local views of the rings; NULL until vmio_vq_map succeeds (desc
	 * or pdesc says whether it did). */
	struct virtq_desc *desc;
	struct virtq_avail *avail;
	struct virtq_used *used;
	struct pvirtq_desc *pdesc;
	struct pvirtq_event_suppress *driver_event; /* we read it */
	struct pvirtq_event_suppress *device_event; /* we write it */

	/* Device-side indices. Split: free-running 16-bit counters. Packed:
	 * positions in the ring (below size) with a wrap counter each. */
	uint16_t last_avail_idx;  /* next avail entry to pop */
	/* Split: entries past last_avail_idx that avail->idx covered when
	 * we last read it. Pop reads that index, a line the driver keeps
	 * writing, only when these run out; whoever moves last_avail_idx
	 * other than pop and unpop zeroes it. */
	uint16_t avail_known;
	uint16_t used_idx;        /* shadow of used->idx incl. unflushed */
	uint16_t published_used;  /* used->idx as last written */
	uint16_t signalled_used;  /* used idx at the last notification */
	bool signalled_used_valid;
	bool avail_wrap, used_wrap; /* packed: the wrap counters */
	/* Packed, per buffer id: how many ring descriptors its chain took
	 * (a used descriptor skips that many); and the position (offset |
	 * wrap << 15) before each of the last pops, for unpop. Both have
	 * size entries, allocated at map. */
	uint16_t *buf_ndesc;
	uint16_t *pop_from;
	unsigned pops;
	unsigned unflushed; /* packed: ring slots used since the last flush */
	/* Packed: the used descriptors pushed since the last flush, written
	 * into the ring only at the flush (packed_ring.c, "Used descriptors
	 * wait for the flush"). size entries, allocated at map. */
	struct vmio_packed_used *shadow;
	unsigned nshadow;
	/* In order (2.7.9, 2.8.20), per chain id: the chain had no writable
	 * part, so its used length means nothing to the driver and its used
	 * entry may be folded into a batch: consecutive such chains get one
	 * entry, the last one's id, written at the batch's first slot when
	 * the batch ends (at the flush, or before any other push). size
	 * entries, allocated at map. */
	bool *out_only;
	uint16_t batch_len; /* chains in the open batch; 0: none open */
	uint16_t batch_id;  /* the last of them */
	uint16_t batch_at;  /* split: used index; packed: ring offset */
	bool batch_wrap;    /* packed: the used wrap counter at batch_at */
	bool broken;
	/* vmio_vq_enable_kicks(false) in force: under EVENT_IDX, pop stops
	 * moving avail_event so the driver stops kicking. */
	bool kicks_disabled;

	/* Dirty logging while the VMM migrates the guest (dirty_log.h):
	 * each write the device makes into guest memory through this queue,
	 * rings and buffers, is marked after it is made. NULL: not logging.
	 * Set by the transport while the queue is stopped. */
	struct vmio_dirty_log *log;
	const struct vmio_mem *log_mem;

	/* The memory region the last buffer lay in: where the next
	 * translation looks first (vmio_mem_gpa_to_iov_hinted). */
	unsigned mem_hint;

	/* Scratch for indirect tables that cross a region boundary. */
	struct virtq_desc *indirect_scratch;
	unsigned indirect_scratch_len; /* in descriptors */
};

/* The marks themselves, out of line (vq_state.c): vmio_vq_logged's and
 * vmio_vq_log_iov's calls while logging. Cold and never inlined, so that
 * the call sits in a cold section and the function around it gets the
 * branch and a call, not the mark's loops (inlined, those took registers
 * from it). The hottest path, the push, calls no mark at all: the rings
 * mark their used entries at the flush (split_ring.c, packed_ring.c). */
__attribute__((cold, noinline)) void
vmio_vq_mark(struct vmio_vq *vq, const void *p, size_t len);
__attribute__((cold, noinline)) void
vmio_vq_mark_iov(struct vmio_vq *vq, const struct iovec *iov, unsigned niov,
		 uint64_t len);
/* n entries of elem bytes of a ring of vq->size at base, from entry at
 * (below vq->size) on, wrapping: at most the whole ring, in at most two
 * runs. What a flush publishes, for either layout. */
__attribute__((cold, noinline)) void
vmio_vq_mark_ring(struct vmio_vq *vq, const void *base, size_t elem,
		  unsigned at, unsigned n);

/* A write of len bytes at p into guest memory, just made, marked while
 * logging. Off, one predictable branch. */
static inline void vmio_vq_logged(struct vmio_vq *vq, const void *p,
				  size_t len)
{
	if (__builtin_expect(vq->log != NULL, 0))
		vmio_vq_mark(vq, p, len);
}

#endif
