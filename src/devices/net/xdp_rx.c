/* Receive through the AF_XDP port; see xdp_rx.h. */
#include "devices/net/xdp_rx.h"

#include <endian.h>
#include <errno.h>
#include <linux/ethtool.h>
#include <linux/if_link.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <bpf/libbpf.h>
#include <xdp/libxdp.h>
#include <xdp/xsk.h>

#include "devices/net/held.h"
#include "devices/net/umem_view.h"
#include "devices/net/virtio_net.h"
#include "devices/net/xdp_reserve.h"
#include "devices/net/xsk_map.h"
#include "util/iov.h"
#include "util/log.h"

int vxdp_rx_fd(struct vnet_port *b, unsigned pair)
{
	struct xdp_queue *q = &xdp_of(b)->q[pair];

	if (q->mode == Q_NOCOPY && q->rx_efd >= 0)
		return q->rx_efd;
	return q->xsk ? xsk_socket__fd(q->xsk) : -1;
}

/* Whether frames wake the device. While the guest has given us no buffer
 * at all (none kept back, none with the kernel), a frame can only land in
 * the reserve and wait there: waking for it only costs (a wake-up per
 * batch of frames, all through a dry spell). The guest's next buffer
 * brings the device anyway (rx_post, then a reap in the same turn).
 * Frames left on the RX ring meanwhile cannot overflow it while no more
 * reserve frames are out than it has entries. */
static void rx_arm(struct xdp_queue *q, bool on)
{
	struct epoll_event ev = { .events = on ? EPOLLIN : 0 };

	if (q->rx_efd < 0 || q->rx_armed == on || !q->xsk)
		return;
	if (epoll_ctl(q->rx_efd, EPOLL_CTL_MOD, xsk_socket__fd(q->xsk), &ev))
		return; /* stays as it was: armed is the safe way */
	q->rx_armed = on;
}

static bool rx_starved(const struct xdp_queue *q)
{
	return q->res.nframes && !q->res.nspare && !q->rx_held.count &&
	       q->res.nfill <= XDP_RING_SIZE;
}

static void fq_wakeup(struct xdp_queue *q)
{
	if (xsk_ring_prod__needs_wakeup(&q->fq))
		recvfrom(xsk_socket__fd(q->xsk), NULL, 0, MSG_DONTWAIT, NULL,
			 NULL);
}

/* Gives a UMEM frame back to the kernel. The fill ring has room for
 * every receive frame, so this cannot fail. */
static void fill_one(struct xdp_queue *q, uint64_t addr)
{
	uint32_t idx;

	if (xsk_ring_prod__reserve(&q->fq, 1, &idx) != 1)
		return;
	*xsk_ring_prod__fill_addr(&q->fq, idx) = addr;
	xsk_ring_prod__submit(&q->fq, 1);
}

ssize_t vxdp_rx(struct vnet_port *b, unsigned pair,
		      const struct iovec *iov, unsigned niov)
{
	struct xdp_port *x = xdp_of(b);
	struct xdp_queue *q = &x->q[pair];
	struct virtio_net_hdr hdr = { 0 };
	const struct xdp_desc *desc;
	size_t room = 0;
	uint64_t addr;
	uint32_t idx, len;
	ssize_t rc;

	if (q->mode != Q_COPY)
		return -EAGAIN;
	if (xsk_ring_cons__peek(&q->rx, 1, &idx) != 1) {
		fq_wakeup(q);
		return -EAGAIN;
	}
	desc = xsk_ring_cons__rx_desc(&q->rx, idx);
	addr = xsk_umem__add_offset_to_addr(desc->addr);
	len = desc->len;
	room = vmio_iov_length(iov, niov);
	if (len > XDP_FRAME_SIZE ||
	    xsk_umem__extract_addr(desc->addr) >=
		    (uint64_t)XDP_UMEM_FRAMES * XDP_FRAME_SIZE ||
	    addr + len > (uint64_t)XDP_UMEM_FRAMES * XDP_FRAME_SIZE) {
		rc = -EIO;
	} else if (room < x->hdr_len || room - x->hdr_len < len) {
		rc = -EMSGSIZE;
	} else {
		if (x->hdr_len == VIRTIO_NET_HDR_LEN)
			hdr.num_buffers = htole16(1);
		vmio_iov_from_buf(iov, niov, 0, &hdr, x->hdr_len);
		vmio_iov_from_buf(iov, niov, x->hdr_len,
			       xsk_umem__get_data(q->area, addr), len);
		rc = (ssize_t)(x->hdr_len + len);
	}
	xsk_ring_cons__release(&q->rx, 1);
	fill_one(q, xsk_umem__extract_addr(desc->addr));
	return rc;
}

bool vxdp_rx_posts(struct vnet_port *b, unsigned pair)
{
	/* After a detach the device takes back what is left at once,
	 * through rx_reap. */
	return xdp_of(b)->q[pair].mode == Q_NOCOPY;
}

/* A guest buffer onto the fill ring at fill, held until it comes back;
 * -ENOSPC if the ring or the table is full. */
static int fill_guest(struct xdp_queue *q, uint64_t fill, void *buf,
		      uint32_t cookie)
{
	uint32_t idx;

	if (xsk_ring_prod__reserve(&q->fq, 1, &idx) != 1)
		return -ENOSPC;
	if (!vnet_held_put(&q->rx_held, fill, cookie, buf)) {
		q->fq.cached_prod--;
		return -ENOSPC;
	}
	*xsk_ring_prod__fill_addr(&q->fq, idx) = fill;
	xsk_ring_prod__submit(&q->fq, 1);
	return 0;
}

int vxdp_rx_post(struct vnet_port *b, unsigned pair, void *buf,
		       size_t len, uint32_t cookie)
{
	struct xdp_port *x = xdp_of(b);
	struct xdp_queue *q = &x->q[pair];
	uint64_t off, fill;

	if (q->mode != Q_NOCOPY)
		return -ENOSPC;
	if (len < x->hdr_len + x->b.max_frame)
		return -EMSGSIZE;
	off = vnet_umem_view_offset(&x->view, buf, x->hdr_len + x->b.max_frame);
	/* The view starts with our own area, longer than a chunk's front:
	 * a buffer in guest memory always has its chunk inside the UMEM. */
	if (off == UINT64_MAX || off + x->hdr_len < chunk_front(x))
		return -EFAULT;
	/* Frames in the reserve, or that may land there, each get a guest
	 * buffer kept back for them first. */
	rx_arm(q, true);
	if (vnet_reserve_holds_back(&q->res))
		return vnet_reserve_keep(&q->res, buf, cookie) ? 0 : -ENOSPC;
	fill = off + x->hdr_len - chunk_front(x);
	return fill_guest(q, fill, buf, cookie);
}

enum rx_verdict { RX_MINE, RX_UNKNOWN, RX_MISPLACED };

/* One RX descriptor of a no-copy pair: the buffer it filled. */
static enum rx_verdict rx_take(struct xdp_port *x, struct xdp_queue *q,
			       const struct xdp_desc *desc, struct vnet_done *d)
{
	uint64_t fill = xsk_umem__extract_addr(desc->addr);
	struct vnet_held_entry e;

	if (!vnet_held_take(&q->rx_held, fill, &e))
		return RX_UNKNOWN;
	*d = (struct vnet_done){ .buf = e.buf, .cookie = e.cookie };
	if (xsk_umem__add_offset_to_addr(desc->addr) != fill + chunk_front(x) ||
	    desc->len > x->b.max_frame)
		return RX_MISPLACED;
	d->len = desc->len;
	return RX_MINE;
}

/* The kernel put one of our frames somewhere else than we asked: it
 * may write outside guest buffers too. Later attaches copy. */
static void misplaced(struct xdp_port *x, struct xdp_queue *q,
		      uint32_t len)
{
	if (!x->copy)
		log_err("net: xdp %s queue %u: a %u-byte frame is not where "
			"the fill address puts it: no-copy off from the next "
			"queue start",
			x->name, q->queue_id, len);
	x->copy = true;
}

/* Up to max buffers for the guest into done, in the order frames came:
 * pending reserve frames into spares first, then the RX ring's frames
 * (*got: how many the ring had). */
unsigned vxdp_rx_process(struct xdp_port *x, struct xdp_queue *q,
			   struct vnet_done *done, unsigned max,
			   unsigned *got)
{
	unsigned n = vnet_reserve_drain(&q->res, done, max), i;
	uint32_t idx;

	/* Each descriptor gives at most one buffer: before a frame lands
	 * in the reserve, either no frame is pending or no spare is kept
	 * (the drain above), so at most one comes out after it. */
	*got = xsk_ring_cons__peek(&q->rx, max - n, &idx);
	for (i = 0; i < *got && n < max; i++) {
		const struct xdp_desc *desc =
			xsk_ring_cons__rx_desc(&q->rx, idx + i);

		switch (vnet_reserve_landed(
			&q->res, xsk_umem__extract_addr(desc->addr),
			xsk_umem__add_offset_to_addr(desc->addr), desc->len)) {
		case VNET_RESERVE_PENDING:
			n += vnet_reserve_drain(&q->res, done + n, max - n);
			continue;
		case VNET_RESERVE_BAD:
			misplaced(x, q, desc->len);
			continue;
		case VNET_RESERVE_NOT_OURS:
			break;
		}
		switch (rx_take(x, q, desc, &done[n])) {
		case RX_MINE:
			vnet_reserve_direct(&q->res, &done[n]);
			n++;
			break;
		case RX_MISPLACED:
			/* The buffer goes back empty. */
			misplaced(x, q, desc->len);
			n++;
			break;
		case RX_UNKNOWN:
			break; /* not a buffer we posted: nothing to give */
		}
	}
	/* Peeking moved libxdp's cached index past every descriptor seen:
	 * the ones left (none, by the above) are looked at next time. */
	q->rx.cached_cons -= *got - i;
	if (i)
		xsk_ring_cons__release(&q->rx, i);
	return n;
}

/* After frames came or buffers were posted: spares the reserve no longer
 * needs go to the fill ring; and while the guest has nothing spare,
 * free reserve frames do (vnet_reserve_wants_fill). */
static void rx_refill(struct xdp_port *x, struct xdp_queue *q)
{
	struct vnet_done d;
	unsigned added = 0;
	uint64_t addr;
	uint32_t idx;

	while (vnet_reserve_surplus(&q->res, &d)) {
		uint64_t off = vnet_umem_view_offset(
			&x->view, d.buf, x->hdr_len + x->b.max_frame);

		/* Checked when posted, on this same view. */
		if (fill_guest(q, off + x->hdr_len - chunk_front(x), d.buf,
			       d.cookie)) {
			vnet_reserve_keep(&q->res, d.buf, d.cookie);
			break;
		}
		added++;
	}
	if (vnet_reserve_wants_fill(&q->res, q->rx_held.count,
				    XDP_RESERVE_LOW)) {
		unsigned room = xsk_prod_nb_free(&q->fq, q->res.nfree);
		unsigned n = room < q->res.nfree ? room : q->res.nfree;

		if (n && xsk_ring_prod__reserve(&q->fq, n, &idx) == n) {
			for (unsigned i = 0; i < n; i++) {
				vnet_reserve_fill(&q->res, &addr);
				*xsk_ring_prod__fill_addr(&q->fq, idx + i) =
					addr;
			}
			xsk_ring_prod__submit(&q->fq, n);
			added += n;
		}
	}
	if (added)
		fq_wakeup(q);
}

unsigned vxdp_rx_reap(struct vnet_port *b, unsigned pair,
			    struct vnet_done *done, unsigned max)
{
	struct xdp_port *x = xdp_of(b);
	struct xdp_queue *q = &x->q[pair];
	struct vnet_held_entry e;
	unsigned n = 0, got;

	if (q->mode != Q_NOCOPY) {
		/* Detached: what came in first, then the rest unused. */
		while (n < max && q->late_pos < q->nlate)
			done[n++] = q->late[q->late_pos++];
		while (n < max && vnet_held_take_any(&q->rx_held, &e))
			done[n++] = (struct vnet_done){ .buf = e.buf,
							.cookie = e.cookie };
		while (n < max && vnet_reserve_take_spare(&q->res, &done[n]))
			n++;
		return n;
	}
	n = vxdp_rx_process(x, q, done, max, &got);
	rx_refill(x, q);
	if (!got)
		fq_wakeup(q);
	rx_arm(q, !rx_starved(q));
	return n;
}

