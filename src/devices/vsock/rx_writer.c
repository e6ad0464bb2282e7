/* The rx writer; see rx_writer.h. */
#include "devices/vsock/rx_writer.h"

#include "devices/vsock/packet.h"

/* Why gather stopped. */
enum gather_stop {
	GATHER_FIT,    /* the buffers hold the packet */
	GATHER_DRY,    /* the guest has no more buffers posted */
	GATHER_FULL,   /* VSOCK_RX_WRITER_BUFS buffers, or the view is full */
	GATHER_BUDGET, /* this callback's budget is spent */
	GATHER_UNUSABLE, /* the next buffer cannot be used: it is in
			  * bufs[n], popped, its reason in bad_why */
	GATHER_BROKEN, /* a malformed ring: the queue is broken */
};

int vsock_rx_pop_first(struct vsock_rx_writer *w)
{
	return vmio_vq_pop(w->vq, w->mem, &w->bufs[0]);
}

/* Why the layout cannot use a buffer, or NULL: a plain one must hold a
 * header, a mergeable one at least a byte, neither readable bytes. */
static const char *buf_unusable(const struct vsock_rx_writer *w,
				const struct vmio_chain *ch)
{
	const char *why = NULL;

	if (w->mergeable ? vsock_pkt_check_rx_buf(ch, &why)
			 : vsock_pkt_check_rx(ch, &why))
		return why;
	return NULL;
}

/* The answer to buffers no packet can go into: bufs[0..n) go back used
 * and empty, in the order popped, and are counted; the queue goes on.
 * Returns n, the buffers pushed. */
static int give_back_empty(struct vsock_rx_writer *w, unsigned n,
			   const char *why)
{
	for (unsigned i = 0; i < n; i++)
		vmio_vq_push(w->vq, w->bufs[i].head, 0);
	w->unusable += n;
	w->unusable_why = why;
	return (int)n;
}

/* Whether bufs[0..n) hold need payload bytes: in the view, or in the
 * plain layout a batch of packets whose room is *room. */
static bool holds(const struct vsock_rx_writer *w, uint32_t need,
		  uint64_t room)
{
	return w->mergeable ? vsock_mrg_fits(&w->view, need) : room >= need;
}

/* Pops buffers behind bufs[0] (popped, checked, in the view) until they
 * hold need payload bytes, at most max in all. *n: the buffers in bufp. */
static enum gather_stop gather(struct vsock_rx_writer *w, uint32_t need,
			       unsigned max, unsigned *budget, unsigned *n,
			       const char **bad_why)
{
	uint64_t room = vsock_pkt_rx_capacity(&w->bufs[0],
					      VSOCK_MAX_PKT_PAYLOAD);

	w->bufp[0] = &w->bufs[0];
	for (*n = 1;; (*n)++) {
		struct vmio_chain *ch = &w->bufs[*n];
		int got;

		if (holds(w, need, room))
			return GATHER_FIT;
		if (*n == max)
			return GATHER_FULL;
		if (!*budget)
			return GATHER_BUDGET;
		got = vmio_vq_pop(w->vq, w->mem, ch);
		if (got < 0)
			return GATHER_BROKEN;
		if (!got)
			return GATHER_DRY;
		*bad_why = buf_unusable(w, ch);
		if (*bad_why)
			return GATHER_UNUSABLE;
		/* More iovecs than the view has left: the next packet's. */
		if (w->mergeable && !vsock_mrg_add(&w->view, ch)) {
			vmio_vq_unpop(w->vq, 1);
			return GATHER_FULL;
		}
		(*budget)--;
		room += vsock_pkt_rx_capacity(ch, VSOCK_MAX_PKT_PAYLOAD);
		w->bufp[*n] = ch;
	}
}

/* Pushes bufs[0..k) used, gives bufs[k..n) back (the last popped, as
 * unpop needs). */
static int settle(struct vsock_rx_writer *w, unsigned k, unsigned n)
{
	for (unsigned i = 0; i < k; i++) {
		vmio_vq_push(w->vq, w->bufs[i].head, w->used[i]);
		w->pushed_bytes += w->used[i];
	}
	if (k < n)
		vmio_vq_unpop(w->vq, n - k);
	return (int)k;
}

/* Host data into plain buffers: as many as one read may fill, whatever
 * stopped the gathering (the read takes what fits in those there are;
 * the next pop sees the rest). */
static int write_batch(struct vsock_rx_writer *w,
		       const struct vsock_rx_source_ops *src,
		       unsigned *budget)
{
	const char *why;
	unsigned n, k;

	/* An unusable buffer ends the batch; it is the next call's first. */
	if (gather(w, src->batch, VSOCK_RX_WRITER_BUFS, budget, &n, &why) ==
	    GATHER_UNUSABLE)
		vmio_vq_unpop(w->vq, 1);
	k = src->fill_batch(src->opaque, w->bufp, n, w->used);
	return settle(w, k, n);
}

/* Buffers too few for a packet that goes whole, or for any header. */
static int write_short(struct vsock_rx_writer *w, enum gather_stop stop,
		       unsigned n)
{
	if (stop == GATHER_FULL)
		return give_back_empty(w, n, "buffers too small together for "
				       "one packet's header");
	vmio_vq_unpop(w->vq, n);
	if (stop == GATHER_BUDGET)
		return VSOCK_RX_AGAIN;
	/* Dry: wait for more, unless some came meanwhile. */
	return vmio_vq_enable_kicks(w->vq, true) ? 0 : VSOCK_RX_STOP;
}

int vsock_rx_write(struct vsock_rx_writer *w,
		   const struct vsock_rx_source_ops *src, unsigned *budget)
{
	enum gather_stop stop;
	const char *why = buf_unusable(w, &w->bufs[0]);
	unsigned n;
	uint32_t k, written;

	if (why)
		return give_back_empty(w, 1, why);
	if (!w->mergeable && src->batch)
		return write_batch(w, src, budget);
	vsock_mrg_begin(&w->view, w->mergeable);
	/* Refused only for a buffer of VMIO_CHAIN_MAX_IOV descriptors that
	 * num_buffers would split into one more: no packet fits it. */
	if (!vsock_mrg_add(&w->view, &w->bufs[0]))
		return give_back_empty(w, 1, "a buffer of too many descriptors "
				       "for a mergeable packet");
	/* A plain packet is one buffer. */
	stop = gather(w, src->need, w->mergeable ? VSOCK_RX_WRITER_BUFS : 1,
		      budget, &n, &why);
	if (stop == GATHER_BROKEN) {
		vmio_vq_unpop(w->vq, n);
		return VSOCK_RX_STOP;
	}
	/* The packet ends before the unusable buffer. Connection data with
	 * room for its header goes into the buffers in hand, and the
	 * unusable one is the next packet's first (given back then); for
	 * anything else those in hand are of no use, and go back empty with
	 * it, in order. */
	if (stop == GATHER_UNUSABLE) {
		if (!src->may_cut || !vsock_mrg_fits(&w->view, 0))
			return give_back_empty(w, n + 1, why);
		vmio_vq_unpop(w->vq, 1);
		stop = GATHER_FULL;
	}
	/* Connection data may be cut to the room; a header never, and a
	 * whole packet only when no more buffers could ever hold it. */
	if (!vsock_mrg_fits(&w->view, 0) ||
	    (!src->may_cut && stop != GATHER_FIT && stop != GATHER_FULL))
		return write_short(w, stop, n);
	written = src->fill(src->opaque, &w->view.view);
	/* The buffers hold the header but no payload byte. */
	if (!written && !src->may_cut)
		return give_back_empty(w, n, "no room for data after the "
				       "header");
	k = written ? vsock_mrg_finish(&w->view, w->bufp, written, w->used)
		    : 0;
	return settle(w, k, n);
}
