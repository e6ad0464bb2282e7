/* Port to guest without a copy: the guest's receive buffers are handed
 * to the port as the guest offers them (rx_post), before any frame
 * comes, and come back filled (rx_reap). The kernel writes the frame
 * behind the room we keep for the virtio-net header, which we write when
 * the buffer comes back: its one buffer, no offloads.
 *
 * Only a buffer whose first writable descriptor takes the header and the
 * largest frame can be posted; the others (a driver that posts smaller
 * ones, or splits them) go back to the guest empty, counted as rx errors,
 * which the Linux and DPDK drivers take as a dropped frame.
 *
 * Waiting: the port's descriptor polls readable while frames wait; the
 * guest's kicks bring more buffers. When the port holds all it can,
 * kicks stay off until frames have made room. */
#include "devices/net/rx_posted.h"

#include <endian.h>
#include <errno.h>
#include <string.h>


/* Gives the guest back the rx buffers in done (frames or unused). */
static void rx_give(struct vnet_pair *p, const struct vnet_done *done,
		    unsigned n)
{
	struct vnet_device *d = p->d;
	struct vmio_vq *vq = p->rx_held_vq;

	for (unsigned i = 0; i < n; i++) {
		const struct vnet_done *e = &done[i];
		struct virtio_net_hdr hdr = { 0 };

		if (!e->len) {
			vmio_vq_push(vq, (uint16_t)e->cookie, 0);
			continue;
		}
		if (d->hdr_len == VIRTIO_NET_HDR_LEN)
			hdr.num_buffers = htole16(1);
		memcpy(e->buf, &hdr, d->hdr_len);
		/* The kernel wrote the frame into guest memory (or the
		 * reserve copied it there), behind our header. */
		vmio_vq_logged(vq, e->buf, d->hdr_len + e->len);
		vmio_vq_push(vq, (uint16_t)e->cookie,
			     (uint32_t)(d->hdr_len + e->len));
		p->stats.rx_frames++;
		p->stats.rx_bytes += e->len;
	}
	p->rx_held -= n < p->rx_held ? n : p->rx_held;
}

unsigned vnet_rx_reap(struct vnet_pair *p)
{
	struct vnet_device *d = p->d;
	unsigned n = d->be->ops->rx_reap(d->be, p->index, p->done,
					 VNET_RX_BUDGET);

	rx_give(p, p->done, n);
	return n;
}

/* A chain no frame can be written into without a copy: back, empty
 * (architecture.md section 6). */
static void rx_refuse(struct vnet_device *d, struct vnet_pair *p,
		      const char *why)
{
	const struct vmio_chain *c = &p->chain;

	vmio_vq_push(p->rx, c->head, 0);
	p->stats.rx_errors++;
	log_ratelimited(&p->rl, VMIO_LOG_WARN,
			"net: rx queue %u: a %llu-byte receive buffer cannot "
			"take a frame in place (%s): given back empty",
			p->rx->index, (unsigned long long)c->in_len, why);
}

enum post_stop { POST_EMPTY, POST_FULL, POST_BUDGET, POST_BROKEN };

static enum post_stop rx_post_all(struct vnet_device *d, struct vnet_pair *p,
				  unsigned *budget)
{
	const struct vmio_chain *c = &p->chain;

	while (*budget) {
		int got = vmio_vq_pop(p->rx, p->mem, &p->chain);
		const struct iovec *in;
		int rc;

		if (got <= 0)
			return got < 0 ? POST_BROKEN : POST_EMPTY;
		(*budget)--;
		if (c->nout) {
			rx_refuse(d, p, "readable bytes in it");
			continue;
		}
		in = vmio_chain_in(&p->chain);
		rc = c->nin ? d->be->ops->rx_post(d->be, p->index,
						   in[0].iov_base,
						   in[0].iov_len, c->head)
			    : -EMSGSIZE;
		if (rc == -ENOSPC) {
			vmio_vq_unpop(p->rx, 1);
			return POST_FULL;
		}
		if (rc) {
			rx_refuse(d, p, rc == -EMSGSIZE
						? "smaller than a header and "
						  "the largest frame"
						: "not in one piece of guest "
						  "memory");
			continue;
		}
		p->rx_held++;
		p->rx_held_vq = p->rx;
	}
	return POST_BUDGET;
}

enum vnet_posted_wait vnet_rx_posted_run(struct vnet_pair *p)
{
	struct vnet_device *d = p->d;
	unsigned budget = VNET_RX_BUDGET;
	bool poll = false;
	enum post_stop why;

	vnet_kicks_off(p->rx);
	for (;;) {
		if (vnet_rx_reap(p))
			vmio_poll_window_worked(&p->rx_poll);
		why = rx_post_all(d, p, &budget);
		if (budget != VNET_RX_BUDGET)
			vmio_poll_window_worked(&p->rx_poll);
		if (why != POST_EMPTY)
			break;
		/* Out of buffers: look again next turn (poll.h), or kicks
		 * on, then look once more. */
		if (vmio_poll_window_dry_now(&p->rx_poll)) {
			poll = true;
			break;
		}
		if (!vmio_vq_enable_kicks(p->rx, true))
			break;
		vmio_vq_enable_kicks(p->rx, false);
	}
	/* A port may fill a buffer as it is posted (AF_XDP copies a
	 * frame waiting in its reserve into it): give those now. */
	if (budget < VNET_RX_BUDGET)
		vnet_rx_reap(p);
	vmio_vq_flush_and_notify(p->rx);
	if (why == POST_BROKEN)
		return VNET_POSTED_BROKEN;
	return why == POST_BUDGET || poll ? VNET_POSTED_AGAIN
					  : VNET_POSTED_WATCH;
}
