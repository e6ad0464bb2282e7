/* Port to guest. A frame is read straight into the guest's rx buffers,
 * header first. Without MRG_RXBUF each frame takes one chain; with it, a
 * frame may run over several, and num_buffers in the header says how
 * many. Since the frame's size is only known once it is read, we gather
 * room for the largest frame the guest may receive before reading, and
 * give back the chains the frame did not need.
 *
 * Waiting: with buffers and no frame we watch the port's descriptor;
 * with a frame and no buffers we stop watching it (it would stay
 * readable and spin the loop) and wait for the guest's kick instead. */
#include "devices/net/rx.h"

#include <endian.h>
#include <errno.h>
#include <string.h>

#include "devices/net/rx_posted.h"

#include "util/iov.h"

/* The rx room one frame needs: header and the largest frame the guest
 * agreed to receive. */
static size_t rx_room(const struct vnet_device *d)
{
	bool gso = vnet_has(d, VIRTIO_NET_F_GUEST_TSO4) ||
		   vnet_has(d, VIRTIO_NET_F_GUEST_TSO6);

	return d->hdr_len + (gso ? VNET_GSO_MAX_FRAME : vnet_max_frame(d->cfg.mtu));
}

void vnet_rx_unwatch(struct vnet_pair *p)
{
	if (!p->rx_watched)
		return;
	vmio_loop_remove(p->loop, p->rx_fd);
	p->rx_watched = false;
}

static void on_rx_ready(void *opaque, int fd, uint32_t events)
{
	vnet_rx_run(opaque);
}

/* The next turn a budget asked for: what a kick calls. */
static void on_again(void *opaque)
{
	vnet_rx_run(opaque);
}

void vnet_rx_init(struct vnet_pair *p)
{
	vmio_defer_init(&p->rx_again, p->loop, on_again, p);
}

void vnet_rx_fini(struct vnet_pair *p)
{
	vnet_rx_unwatch(p);
	vmio_defer_cancel(&p->rx_again);
}

/* Starts watching the port's rx descriptor of pair p. */
static void rx_watch(struct vnet_pair *p)
{
	int rc;

	if (p->rx_watched)
		return;
	/* A no-copy port's descriptor changes with attach and detach. */
	p->rx_fd = p->d->be->ops->rx_fd(p->d->be, p->index);
	if (p->rx_fd < 0)
		return;
	rc = vmio_loop_add(p->loop, p->rx_fd, EPOLLIN, on_rx_ready, p);
	if (rc)
		log_err("net: cannot watch the backend of queue pair %u: %s",
			p->index, strerror(-rc));
	else
		p->rx_watched = true;
}

/* One frame's worth of popped chains. */
struct rx_frame {
	unsigned nchains;
	unsigned niov;
	size_t room;
};

/* Pops chains into p->iov until they hold `want` bytes (one chain only
 * without MRG_RXBUF). Returns 1 with room for a frame, 0 if the ring ran
 * out first (the chains popped are still held), -1 if the queue broke. */
static int rx_gather(struct vnet_device *d, struct vnet_pair *p,
		     struct rx_frame *f, size_t want)
{
	bool mrg = vnet_has(d, VIRTIO_NET_F_MRG_RXBUF);
	const struct vmio_chain *c = &p->chain;

	while (f->room < want) {
		int got = vmio_vq_pop(p->rx, p->mem, &p->chain);

		if (got <= 0)
			return got;
		/* A chain that cannot hold the header (5.1.6.3.1 wants
		 * every buffer to), holds readable bytes, or has more
		 * segments than readv takes. With chains in hand, the frame
		 * gets those: the bad one is given back, so that only the
		 * last popped ever are. On its own, it is returned used and
		 * empty, and the ring moves (architecture.md section 6). */
		if (c->nout || c->in_len < d->hdr_len ||
		    c->in_len > UINT32_MAX ||
		    f->niov + c->nin > VNET_MAX_IOV) {
			if (f->nchains) {
				vmio_vq_unpop(p->rx, 1);
				return 1;
			}
			vmio_vq_push(p->rx, c->head, 0);
			p->stats.rx_errors++;
			log_ratelimited(&p->rl, VMIO_LOG_WARN,
					"net: rx queue %u: a receive buffer "
					"of %llu bytes in %u pieces%s: given "
					"back empty",
					p->rx->index,
					(unsigned long long)c->in_len, c->nin,
					c->nout ? " with readable bytes" : "");
			continue;
		}
		/* Mostly one piece: a loop, not a call to memcpy. */
		for (unsigned k = 0; k < c->nin; k++)
			p->iov[f->niov + k] = vmio_chain_seg(c, c->nout + k);
		f->niov += c->nin;
		p->rx_heads[f->nchains] = c->head;
		p->rx_sizes[f->nchains] = (uint32_t)c->in_len;
		f->nchains++;
		f->room += c->in_len;
		if (!mrg)
			return 1;
	}
	return 1;
}

/* Writes len bytes at offset of the gathered buffers: straight into the
 * first segment when it holds them (drivers put the header in one
 * piece), else through the scatter list. */
static void rx_patch(struct vnet_pair *p, const struct rx_frame *f,
		     size_t offset, const void *src, size_t len)
{
	if (p->iov[0].iov_len >= offset + len)
		memcpy((uint8_t *)p->iov[0].iov_base + offset, src, len);
	else
		vmio_iov_from_buf(p->iov, f->niov, offset, src, len);
}

/* Pushes the chains the len-byte frame filled, gives the others back, and
 * puts in the header what the device owns: num_buffers, and flags the
 * guest can read (none without GUEST_CSUM, 5.1.6.4.1). */
static void rx_deliver(struct vnet_device *d, struct vnet_pair *p,
		       const struct rx_frame *f, size_t len)
{
	unsigned used = 0;
	size_t left = len;
	uint16_t nb;

	while (used < f->nchains && (left || used == 0)) {
		size_t n = left < p->rx_sizes[used] ? left : p->rx_sizes[used];

		left -= n;
		used++;
	}
	if (!vnet_has(d, VIRTIO_NET_F_GUEST_CSUM)) {
		uint8_t zero = 0;

		rx_patch(p, f, 0, &zero, 1);
	}
	if (d->hdr_len == VIRTIO_NET_HDR_LEN) {
		nb = htole16((uint16_t)used);
		rx_patch(p, f, VIRTIO_NET_HDR_NUM_BUFFERS_OFFSET, &nb, 2);
	}
	if (f->nchains > used)
		vmio_vq_unpop(p->rx, f->nchains - used);
	/* The frame and its header, in guest memory before the driver
	 * sees them used. */
	vmio_vq_log_iov(p->rx, p->iov, f->niov, len);
	left = len;
	for (unsigned i = 0; i < used; i++) {
		size_t n = left < p->rx_sizes[i] ? left : p->rx_sizes[i];

		vmio_vq_push(p->rx, p->rx_heads[i], (uint32_t)n);
		left -= n;
	}
	p->stats.rx_frames++;
	p->stats.rx_bytes += len - d->hdr_len;
}

enum rx_stop {
	RX_NO_FRAME,   /* port empty: wait on its descriptor */
	RX_NO_BUFFERS, /* ring empty: wait for the guest's kick */
	RX_POLL,       /* ring empty: look again on the next turn */
	RX_BUDGET,
	RX_BROKEN,
};

/* The ring ran dry with f's chains popped (a frame begun). Polling
 * (poll.h), they go back and the next turn looks again, kicks still off.
 * Else kicks go on with them popped, so that the driver's next post, not
 * an old one, wakes us, and they go back; RX_BUDGET if buffers came
 * meanwhile (serve them), RX_NO_BUFFERS to wait for the kick. */
static enum rx_stop rx_dry(struct vnet_device *d, struct vnet_pair *p,
			   const struct rx_frame *f)
{
	bool more;

	if (vmio_poll_window_dry_now(&p->rx_poll)) {
		vmio_vq_unpop(p->rx, f->nchains);
		return RX_POLL;
	}
	more = vmio_vq_enable_kicks(p->rx, true);
	vmio_vq_unpop(p->rx, f->nchains);
	return more ? RX_BUDGET : RX_NO_BUFFERS;
}

/* One frame into buffers of room bytes in all (rx_room). */
static enum rx_stop rx_once(struct vnet_device *d, struct vnet_pair *p,
			    size_t room)
{
	struct rx_frame f = { 0 };
	ssize_t n;
	int got = rx_gather(d, p, &f, room);

	if (got < 0)
		return RX_BROKEN;
	if (got == 0)
		return rx_dry(d, p, &f);
	n = d->be->ops->rx(d->be, p->index, p->iov, f.niov);
	if (n == -EAGAIN || n == -EWOULDBLOCK) {
		vmio_vq_unpop(p->rx, f.nchains);
		return RX_NO_FRAME;
	}
	if (n < 0 || (size_t)n < d->hdr_len) {
		/* Lost in the port (a buffer too small for it, say):
		 * the buffers are untouched and go back. */
		vmio_vq_unpop(p->rx, f.nchains);
		p->stats.rx_errors++;
		log_ratelimited(&p->rl, VMIO_LOG_WARN,
				"net: rx queue %u: %s backend lost a frame: %s",
				p->rx->index, d->be->ops->name,
				n < 0 ? strerror((int)-n) : "shorter than a header");
		return RX_BUDGET;
	}
	rx_deliver(d, p, &f, (size_t)n);
	vmio_poll_window_worked(&p->rx_poll);
	return RX_BUDGET;
}

/* A turn that gave frames, and whether it ended on an empty ring: with
 * rx_frames, they tell how many frames a turn moves and how often the
 * guest's posting, not the port, is what stopped it. */
static void count_turn(struct vnet_pair *p, uint64_t frames_before,
		       enum rx_stop why)
{
	if (p->stats.rx_frames == frames_before)
		return;
	p->stats.rx_turns++;
	if (why == RX_NO_BUFFERS || why == RX_POLL)
		p->stats.rx_buffers_exhausted++;
}

void vnet_rx_run(struct vnet_pair *p)
{
	struct vnet_device *d = p->d;
	enum rx_stop why = RX_BUDGET;
	unsigned budget = VNET_RX_BUDGET;
	uint64_t frames;
	size_t room;

	if (!p->rx || !p->mem || p->attaching)
		return;
	/* 5.1.6.5.5: no frames on pairs beyond what VQ_PAIRS_SET chose. */
	if (p->index >= atomic_load_explicit(&d->steer_pairs,
					     memory_order_relaxed)) {
		vnet_rx_unwatch(p);
		return;
	}
	if (d->be->ops->rx_posts && d->be->ops->rx_posts(d->be, p->index)) {
		switch (vnet_rx_posted_run(p)) {
		case VNET_POSTED_AGAIN:
			vmio_defer_schedule(&p->rx_again);
			/* fall through */
		case VNET_POSTED_WATCH:
			rx_watch(p);
			break;
		case VNET_POSTED_BROKEN:
			vnet_rx_unwatch(p);
			break;
		}
		return;
	}
	if (d->be->ops->rx_fd(d->be, p->index) < 0)
		return;
	room = rx_room(d);
	frames = p->stats.rx_frames;
	vnet_kicks_off(p->rx);
	while (budget-- && why == RX_BUDGET)
		why = rx_once(d, p, room);
	count_turn(p, frames, why);
	/* Always: it does nothing when nothing was pushed, and a packed
	 * ring's used_idx is a position, back where it was after a whole
	 * ring's worth of frames. */
	vmio_vq_flush_and_notify(p->rx);
	switch (why) {
	case RX_NO_FRAME:
		rx_watch(p);
		break;
	case RX_POLL:
		vnet_rx_unwatch(p);
		vmio_defer_schedule(&p->rx_again);
		break;
	case RX_NO_BUFFERS:
		vnet_rx_unwatch(p);
		break;
	case RX_BUDGET:
		/* The descriptor, still watched and readable, brings us
		 * back after the loop's other work; if we stopped watching
		 * it for want of buffers, buffers came: look again soon. */
		if (!p->rx_watched)
			vmio_defer_schedule(&p->rx_again);
		break;
	case RX_BROKEN:
		vnet_rx_unwatch(p);
		break;
	}
}
