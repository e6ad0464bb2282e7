/* The AF_XDP port: one XSK per queue pair, bound to queue Q + pair of
 * the interface. Two ways of moving frames, per pair:
 *
 * No copy (the default). The UMEM is the guest's memory (umem_view.h:
 * registered whole, in unaligned chunk mode, so that any guest address is
 * a valid buffer address). A transmitted frame goes on the TX ring as it
 * lies in guest memory, and its chain stays held until the completion
 * ring gives its address back. Receive buffers are posted to the fill
 * ring as the guest offers them: the kernel writes the frame behind the
 * room the device keeps for the virtio-net header. The kernel puts a
 * frame at chunk start + XDP_PACKET_HEADROOM + the UMEM's headroom and
 * writes nothing else, so posting buf + hdr_len - (256 + headroom), with
 * headroom sized so that a chunk ends where the largest frame would,
 * makes a frame land at buf + hdr_len and never past the buffer; the
 * first frame's place is checked, and anything else turns the pair to
 * copying. A frame spread over several guest buffers (the header aside)
 * is copied into a frame of our own.
 *
 * Copy (--xdp-copy, or where the above cannot be done: said once). Each
 * XSK has a UMEM of its own; transmit copies the frame into a free UMEM
 * frame, receive copies from the RX ring into the guest's buffers behind
 * a zeroed header. The first half of the frames belongs to the fill and
 * RX rings, the second to TX and completion, so that no ring overflows.
 *
 * Every ring and table is sized once: nothing grows with what the peer or
 * the guest sends. libxdp attaches its XSK redirect program (native XDP
 * where the driver has it, else generic). Guest memory is only known
 * once the VMM sends it, so each pair starts with a copy-mode XSK (which
 * also finds every error at start) and is rebuilt on guest memory when
 * its queues start (attach).
 *
 * A queue an XSK just left stays taken until the kernel's deferred
 * release of its UMEM has run (EBUSY, for some milliseconds), and no event
 * says when. At start (before the loop runs) we wait for it; in attach,
 * which runs in a loop callback, the XSK is tried again from a timer
 * every XDP_BUSY_RETRY_MS, up to XDP_BUSY_TRIES times, and attach answers
 * VNET_ATTACH_LATER: the device calls nothing on the pair until we call
 * its attached. */
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

#include "devices/net/port_xdp.h"
#include "devices/net/held.h"
#include "devices/net/umem_view.h"
#include "devices/net/virtio_net.h"
#include "devices/net/xdp_reserve.h"
#include "devices/net/xsk_map.h"
#include "util/iov.h"
#include "util/log.h"

#define XDP_FRAME_SIZE XSK_UMEM__DEFAULT_FRAME_SIZE
/* Entries of each ring, and frames on each side of a copy-mode UMEM. */
#define XDP_RING_SIZE 1024u
#define XDP_UMEM_FRAMES (2 * XDP_RING_SIZE)
/* Frames of our own per pair in no-copy mode: for frames the guest
 * spread over several buffers, which are copied. */
#define XDP_BOUNCE_FRAMES 64u
/* No-copy receive: guest buffers held back for frames in the reserve
 * (xdp_reserve.h), and the guest buffers on the fill ring below which
 * reserve frames join them while the guest has nothing spare. */
#define XDP_SPARE_MAX XDP_RING_SIZE
#define XDP_RESERVE_LOW 64u
/* Frames received but not reaped when a pair detaches: the RX ring's,
 * and pending frames copied into spares. */
#define XDP_LATE_MAX (XDP_RING_SIZE + XDP_SPARE_MAX)
/* Frames put on the TX ring before we kick without waiting for the
 * device's flush: the kernel's copy path sends 32 per sendto. */
#define XDP_TX_KICK_BATCH 32u
/* Tries, 10 ms apart, at binding a queue the kernel still holds. */
#define XDP_BUSY_TRIES 100u
#define XDP_BUSY_RETRY_MS 10u
/* The largest frame received without a copy: what the Linux driver's
 * smallest receive buffer takes behind the header (GOOD_PACKET_LEN, MTU
 * 1500 with a VLAN tag). A larger --mtu copies. */
#define XDP_NOCOPY_MAX_FRAME 1518u

enum xdp_qmode { Q_NONE, Q_COPY, Q_NOCOPY };

struct xdp_queue {
	struct xsk_umem *umem;
	struct xsk_socket *xsk;
	struct xsk_ring_prod fq, tx;
	struct xsk_ring_cons cq, rx;
	enum xdp_qmode mode;
	void *area;          /* copy mode: the UMEM's memory, ours */
	uint64_t bounce_off; /* no-copy: our frames in the view */
	unsigned queue_id;
	unsigned tx_unkicked; /* put on the TX ring since the last kick */
	unsigned ntx_free;
	uint64_t tx_free[XDP_RING_SIZE]; /* UMEM addresses we may send from */
	/* No-copy: guest buffers in the kernel's hands. */
	struct vnet_held rx_held, tx_held;
	/* No-copy receive's frames of our own, and the guest buffers kept
	 * back to copy them into. */
	struct vnet_reserve res;
	/* No-copy: what the device watches for frames, an epoll instance
	 * holding the XSK (-1: none), and whether the XSK is in it
	 * (rx_arm). */
	int rx_efd;
	bool rx_armed;
	bool steer_off;  /* the pair is not served: no frames to its XSK */
	/* The kernel's counters of the XSKs this pair had before this one. */
	struct xdp_statistics past;
	/* After detach: frames received but not reaped, in order. */
	struct vnet_done *late;
	unsigned nlate, late_pos;
	/* An XSK to open once the kernel lets go of the queue: the mode
	 * (Q_NONE: none pending), the tries so far, and their timer. */
	struct xdp_port *x;
	enum xdp_qmode want;
	unsigned busy_tries;
	struct vmio_timer retry;
};

struct xdp_port {
	struct vnet_port b;
	char name[IFNAMSIZ];
	size_t hdr_len;
	uint32_t xdp_flags;
	const char *xdp_mode; /* "native" or "generic" */
	bool copy;            /* no more no-copy attempts */
	unsigned reserve;     /* reserve frames per pair (no-copy receive) */
	struct vnet_umem_view view; /* guest memory, for no-copy pairs */
	struct xdp_queue *q;  /* one per pair */
};

static struct xdp_port *xdp_of(struct vnet_port *b)
{
	return (struct xdp_port *)b;
}

static int xdp_configure(struct vnet_port *b, uint64_t features,
			 size_t hdr_len)
{
	(void)features;
	xdp_of(b)->hdr_len = hdr_len;
	return 0;
}

/* No-copy geometry: a chunk ends where the largest frame would. */
static uint32_t nocopy_headroom(const struct xdp_port *x)
{
	return (uint32_t)(XDP_FRAME_SIZE - XDP_PACKET_HEADROOM -
			  x->b.max_frame);
}

static uint64_t chunk_front(const struct xdp_port *x)
{
	return XDP_PACKET_HEADROOM + nocopy_headroom(x);
}

/* ---- Transmit ------------------------------------------------------------ */

/* Entries on the TX ring the kernel has not taken yet. */
static unsigned tx_unsent(const struct xdp_queue *q)
{
	return q->tx.cached_prod - __atomic_load_n(q->tx.consumer,
						   __ATOMIC_ACQUIRE);
}

/* In copy mode a sendto sends at most a batch, so we kick until the ring
 * is empty, a bounded number of times (a device that stopped taking
 * frames must not hold the loop). */
static void tx_kick(struct xdp_queue *q)
{
	q->tx_unkicked = 0;
	if (!xsk_ring_prod__needs_wakeup(&q->tx))
		return;
	for (unsigned i = 0; i < XDP_RING_SIZE / XDP_TX_KICK_BATCH + 2; i++) {
		if (!tx_unsent(q))
			return;
		if (sendto(xsk_socket__fd(q->xsk), NULL, 0, MSG_DONTWAIT,
			   NULL, 0) < 0 &&
		    errno != EAGAIN && errno != EBUSY && errno != ENOBUFS &&
		    errno != EINTR)
			return;
	}
}

/* Takes completed frames off the completion ring: ours go back to the
 * free list, a held guest frame's cookie into cookies (up to max).
 * Returns the cookies written. */
static unsigned cq_reap(struct xdp_queue *q, uint32_t *cookies, unsigned max)
{
	uint32_t idx;
	unsigned n, i, out = 0;

	if (!q->xsk)
		return 0;
	n = xsk_ring_cons__peek(&q->cq, XDP_RING_SIZE, &idx);
	for (i = 0; i < n; i++) {
		uint64_t addr = *xsk_ring_cons__comp_addr(&q->cq, idx + i);
		struct vnet_held_entry e;

		if (q->mode == Q_NOCOPY && vnet_held_take(&q->tx_held, addr, &e)) {
			if (out == max) {
				/* No room: keep it for the next reap. */
				vnet_held_put(&q->tx_held, addr, e.cookie,
					      e.buf);
				break;
			}
			cookies[out++] = e.cookie;
		} else if (q->ntx_free < XDP_RING_SIZE) {
			q->tx_free[q->ntx_free++] = addr;
		}
	}
	if (i)
		xsk_ring_cons__release(&q->cq, i);
	return out;
}

/* A TX ring entry, or -EAGAIN: the ring is full even after a kick. */
static int tx_reserve(struct xdp_queue *q, uint32_t *idx)
{
	if (xsk_ring_prod__reserve(&q->tx, 1, idx) == 1)
		return 0;
	tx_kick(q);
	return xsk_ring_prod__reserve(&q->tx, 1, idx) == 1 ? 0 : -EAGAIN;
}

/* A frame of our own to copy into, or -EAGAIN. */
static int tx_own_frame(struct xdp_queue *q, uint64_t *addr)
{
	if (!q->ntx_free)
		cq_reap(q, NULL, 0);
	if (!q->ntx_free) {
		tx_kick(q);
		cq_reap(q, NULL, 0);
	}
	if (!q->ntx_free)
		return -EAGAIN;
	*addr = q->tx_free[--q->ntx_free];
	return 0;
}

static void tx_submit(struct xdp_queue *q, uint32_t idx, uint64_t addr,
		      size_t len)
{
	struct xdp_desc *desc = xsk_ring_prod__tx_desc(&q->tx, idx);

	desc->addr = addr;
	desc->len = (uint32_t)len;
	desc->options = 0;
	xsk_ring_prod__submit(&q->tx, 1);
	if (++q->tx_unkicked >= XDP_TX_KICK_BATCH)
		tx_kick(q);
}

/* The frame as it lies in guest memory, if it lies in one buffer the
 * view covers: its UMEM address, else UINT64_MAX. */
static uint64_t tx_in_place(const struct xdp_port *x,
			    const struct iovec *iov, unsigned niov,
			    size_t len)
{
	/* iov[0] is the device's header copy; the frame is the rest. */
	if (niov != 2 || iov[1].iov_len != len)
		return UINT64_MAX;
	return vnet_umem_view_offset(&x->view, iov[1].iov_base, len);
}

static int xdp_tx(struct vnet_port *b, unsigned pair,
		  const struct iovec *iov, unsigned niov, uint32_t cookie)
{
	struct xdp_port *x = xdp_of(b);
	struct xdp_queue *q = &x->q[pair];
	size_t len = 0;
	uint64_t addr;
	uint32_t idx;
	int rc;

	if (q->mode == Q_NONE)
		return -ENETDOWN;
	len = vmio_iov_length(iov, niov);
	if (len < x->hdr_len || len - x->hdr_len > XDP_FRAME_SIZE)
		return -EMSGSIZE;
	len -= x->hdr_len;
	rc = tx_reserve(q, &idx);
	if (rc)
		return rc;
	if (q->mode == Q_NOCOPY) {
		addr = tx_in_place(x, iov, niov, len);
		if (addr != UINT64_MAX) {
			/* The table holds as many as the ring: cannot fail
			 * while the reserve above succeeded. */
			if (!vnet_held_put(&q->tx_held, addr, cookie, NULL)) {
				q->tx.cached_prod--;
				return -EAGAIN;
			}
			tx_submit(q, idx, addr, len);
			return VNET_TX_HELD;
		}
	}
	rc = tx_own_frame(q, &addr);
	if (rc) {
		q->tx.cached_prod--; /* give the reserved entry back */
		return rc;
	}
	vmio_iov_to_buf(iov, niov, x->hdr_len,
			q->mode == Q_NOCOPY ? x->view.base + addr
					    : xsk_umem__get_data(q->area, addr),
			len);
	tx_submit(q, idx, addr, len);
	return 0;
}

static void xdp_tx_flush(struct vnet_port *b, unsigned pair)
{
	struct xdp_queue *q = &xdp_of(b)->q[pair];

	if (!q->xsk)
		return;
	if (q->tx_unkicked)
		tx_kick(q);
	if (q->mode == Q_COPY)
		cq_reap(q, NULL, 0);
}

static unsigned xdp_tx_reap(struct vnet_port *b, unsigned pair,
			    uint32_t *cookies, unsigned max)
{
	struct xdp_queue *q = &xdp_of(b)->q[pair];
	struct vnet_held_entry e;
	unsigned n = 0;

	if (q->xsk)
		return cq_reap(q, cookies, max);
	/* Detached: the kernel is done with all of them. */
	while (n < max && vnet_held_take_any(&q->tx_held, &e))
		cookies[n++] = e.cookie;
	return n;
}

/* ---- Receive ------------------------------------------------------------- */

static int xdp_rx_fd(struct vnet_port *b, unsigned pair)
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

static ssize_t xdp_rx(struct vnet_port *b, unsigned pair,
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

static bool xdp_rx_posts(struct vnet_port *b, unsigned pair)
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

static int xdp_rx_post(struct vnet_port *b, unsigned pair, void *buf,
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
static unsigned rx_process(struct xdp_port *x, struct xdp_queue *q,
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

static unsigned xdp_rx_reap(struct vnet_port *b, unsigned pair,
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
	n = rx_process(x, q, done, max, &got);
	rx_refill(x, q);
	if (!got)
		fq_wakeup(q);
	rx_arm(q, !rx_starved(q));
	return n;
}

/* ---- Modes and their XSKs ---------------------------------------------- */

static const char *xdp_pair_mode(struct vnet_port *b, unsigned pair)
{
	const struct xdp_port *x = xdp_of(b);
	bool native = !strcmp(x->xdp_mode, "native");

	switch (x->q[pair].mode) {
	case Q_NOCOPY:
		return native ? "no-copy (native XDP)" : "no-copy (generic XDP)";
	case Q_COPY:
		return native ? "copy (native XDP)" : "copy (generic XDP)";
	case Q_NONE:
		break;
	}
	return "stopped";
}

/* The kernel's counters of q's XSK, plus those of the ones before. */
static struct xdp_statistics queue_stats(const struct xdp_queue *q)
{
	struct xdp_statistics st = { 0 }, sum = q->past;
	socklen_t len = sizeof(st);

	if (q->xsk && !getsockopt(xsk_socket__fd(q->xsk), SOL_XDP,
				  XDP_STATISTICS, &st, &len)) {
		sum.rx_dropped += st.rx_dropped;
		sum.rx_invalid_descs += st.rx_invalid_descs;
		sum.tx_invalid_descs += st.tx_invalid_descs;
		sum.rx_ring_full += st.rx_ring_full;
		sum.rx_fill_ring_empty_descs += st.rx_fill_ring_empty_descs;
	}
	return sum;
}

static void xdp_queue_close(struct xdp_queue *q)
{
	q->past = queue_stats(q);
	if (q->rx_efd >= 0)
		close(q->rx_efd);
	q->rx_efd = -1;
	if (q->xsk)
		xsk_socket__delete(q->xsk);
	if (q->umem)
		xsk_umem__delete(q->umem);
	if (q->area)
		munmap(q->area, (size_t)XDP_UMEM_FRAMES * XDP_FRAME_SIZE);
	q->xsk = NULL;
	q->umem = NULL;
	q->area = NULL;
	q->mode = Q_NONE;
	/* libxdp leaves some cached indices of a ring it sets up as they
	 * were: a new XSK must find them zero. */
	memset(&q->fq, 0, sizeof(q->fq));
	memset(&q->tx, 0, sizeof(q->tx));
	memset(&q->cq, 0, sizeof(q->cq));
	memset(&q->rx, 0, sizeof(q->rx));
	q->tx_unkicked = 0;
	q->ntx_free = 0;
}

/* What the kernel dropped on the way to and from pair's XSKs. */
static void xdp_pair_counters(struct vnet_port *b, unsigned pair,
			      char *buf, size_t size)
{
	const struct xdp_queue *q = &xdp_of(b)->q[pair];
	const struct vnet_reserve_counters *c = &q->res.c;
	struct xdp_statistics st = queue_stats(q);

	snprintf(buf, size,
		 "xsk_rx_dropped=%llu xsk_rx_ring_full=%llu "
		 "xsk_fill_ring_empty=%llu xsk_rx_invalid=%llu "
		 "xsk_tx_invalid=%llu rx_direct=%llu rx_reserve=%llu "
		 "rx_reordered=%llu reserve_lost=%llu reserve_frames=%u "
		 "reserve_peak=%u",
		 (unsigned long long)st.rx_dropped,
		 (unsigned long long)st.rx_ring_full,
		 (unsigned long long)st.rx_fill_ring_empty_descs,
		 (unsigned long long)st.rx_invalid_descs,
		 (unsigned long long)st.tx_invalid_descs,
		 (unsigned long long)c->direct, (unsigned long long)c->reserve,
		 (unsigned long long)c->reordered,
		 (unsigned long long)c->lost, q->res.nframes, c->peak);
}

static void xdp_free(struct vnet_port *b)
{
	struct xdp_port *x = xdp_of(b);

	for (unsigned i = 0; i < b->pairs; i++) {
		vmio_timer_fini(&x->q[i].retry);
		xdp_queue_close(&x->q[i]);
		vnet_held_free(&x->q[i].rx_held);
		vnet_held_free(&x->q[i].tx_held);
		vnet_reserve_fini(&x->q[i].res);
		free(x->q[i].late);
	}
	vnet_umem_view_unmap(&x->view);
	free(x->q);
	free(x);
}

/* libbpf and libxdp narrate what they try (and what they fall back
 * from) on stderr: that is debug output for us; our errors say why. */
__attribute__((format(printf, 2, 0))) static int
lib_print(const char *lib, const char *fmt, va_list ap)
{
	char line[512];
	size_t n;

	if (vmio_log_get_level() < VMIO_LOG_DEBUG)
		return 0;
	vsnprintf(line, sizeof(line), fmt, ap);
	n = strlen(line);
	if (n && line[n - 1] == '\n')
		line[n - 1] = '\0';
	log_debug("net: %s: %s", lib, line);
	return 0;
}

__attribute__((format(printf, 2, 0))) static int
libxdp_print(enum libxdp_print_level level, const char *fmt, va_list ap)
{
	(void)level;
	return lib_print("libxdp", fmt, ap);
}

__attribute__((format(printf, 2, 0))) static int
libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	(void)level;
	return lib_print("libbpf", fmt, ap);
}

/* The interface's receive queues (combined + rx), or 0 if its driver
 * does not say. */
static unsigned iface_rx_queues(const char *name)
{
	struct ethtool_channels ch = { .cmd = ETHTOOL_GCHANNELS };
	struct ifreq ifr = { 0 };
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	unsigned n = 0;

	if (fd < 0)
		return 0;
	memcpy(ifr.ifr_name, name, strlen(name));
	ifr.ifr_data = (void *)&ch;
	if (ioctl(fd, SIOCETHTOOL, &ifr) == 0)
		n = ch.combined_count + ch.rx_count;
	close(fd);
	return n;
}

static const char *xsk_why(int err)
{
	switch (err) {
	case -EPERM:
	case -EACCES:
		return "no permission (AF_XDP and XDP programs need "
		       "CAP_NET_RAW, CAP_NET_ADMIN and CAP_BPF, or root)";
	case -ENODEV:
		return "no such interface";
	case -EOPNOTSUPP:
		return "XDP not supported by the interface";
	case -EBUSY:
		return "the queue has an XSK already, or another XDP program "
		       "is attached";
	case -EINVAL:
		return "the kernel refused the XSK (queue out of range?)";
	case -ENOMEM:
	case -ENOBUFS:
		return "cannot register the UMEM (memlock limit?)";
	default:
		return "cannot create the XSK";
	}
}

static int xsk_open(struct xdp_port *x, struct xdp_queue *q, void *area,
		    size_t size, const struct xsk_umem_config *ucfg,
		    uint16_t bind_flags)
{
	const struct xsk_socket_config scfg = {
		.rx_size = XDP_RING_SIZE,
		.tx_size = XDP_RING_SIZE,
		.xdp_flags = x->xdp_flags,
		.bind_flags = XDP_USE_NEED_WAKEUP | bind_flags,
	};
	int rc = xsk_umem__create(&q->umem, area, size, &q->fq, &q->cq, ucfg);

	if (rc) {
		q->umem = NULL;
		return rc;
	}
	rc = xsk_socket__create(&q->xsk, x->name, q->queue_id, q->umem, &q->rx,
				&q->tx, &scfg);
	if (rc)
		q->xsk = NULL;
	return rc;
}

/* A copy-mode XSK: a UMEM of our own, receive frames first half, send
 * frames the second, all receive frames on the fill ring. */
static int copy_open_once(struct xdp_port *x, struct xdp_queue *q)
{
	const struct xsk_umem_config ucfg = {
		.fill_size = XDP_RING_SIZE,
		.comp_size = XDP_RING_SIZE,
		.frame_size = XDP_FRAME_SIZE,
	};
	const size_t size = (size_t)XDP_UMEM_FRAMES * XDP_FRAME_SIZE;
	uint32_t idx;
	int rc;

	q->area = mmap(NULL, size, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (q->area == MAP_FAILED) {
		q->area = NULL;
		return -errno;
	}
	rc = xsk_open(x, q, q->area, size, &ucfg, 0);
	if (rc)
		return rc;
	if (xsk_ring_prod__reserve(&q->fq, XDP_RING_SIZE, &idx) !=
	    XDP_RING_SIZE)
		return -ENOBUFS;
	for (unsigned i = 0; i < XDP_RING_SIZE; i++)
		*xsk_ring_prod__fill_addr(&q->fq, idx + i) =
			(uint64_t)i * XDP_FRAME_SIZE;
	xsk_ring_prod__submit(&q->fq, XDP_RING_SIZE);
	for (unsigned i = 0; i < XDP_RING_SIZE; i++)
		q->tx_free[i] = (uint64_t)(XDP_RING_SIZE + i) * XDP_FRAME_SIZE;
	q->ntx_free = XDP_RING_SIZE;
	q->mode = Q_COPY;
	return 0;
}

/* Frames of our own in the view per pair: bounce frames, then the
 * receive reserve. */
static unsigned pair_frames(const struct xdp_port *x)
{
	return XDP_BOUNCE_FRAMES + x->reserve;
}

static uint32_t fill_ring_size(const struct xdp_port *x)
{
	uint32_t n = XDP_RING_SIZE;

	while (n < XDP_RING_SIZE + x->reserve)
		n *= 2;
	return n;
}

/* A no-copy XSK on the view: unaligned chunks, so that any guest address
 * may be a buffer; our bounce frames are the pair's slice of the view's
 * own area. The fill ring starts empty: the guest fills it. Bound in the
 * kernel's copy mode even where the driver could DMA into the UMEM: a
 * guest buffer may cross 4 KiB pages that are not contiguous for DMA, and
 * the kernel drops such a fill entry without ever giving it back. */
static int nocopy_open_once(struct xdp_port *x, struct xdp_queue *q,
			    unsigned pair)
{
	const struct xsk_umem_config ucfg = {
		/* Room for the guest's buffers and the whole reserve. */
		.fill_size = fill_ring_size(x),
		.comp_size = XDP_RING_SIZE,
		.frame_size = XDP_FRAME_SIZE,
		.frame_headroom = nocopy_headroom(x),
		.flags = XDP_UMEM_UNALIGNED_CHUNK_FLAG,
	};
	int rc = xsk_open(x, q, x->view.base, x->view.size, &ucfg, XDP_COPY);
	struct epoll_event ev = { .events = EPOLLIN };

	if (rc)
		return rc;
	q->rx_efd = epoll_create1(EPOLL_CLOEXEC);
	if (q->rx_efd < 0 || epoll_ctl(q->rx_efd, EPOLL_CTL_ADD,
				       xsk_socket__fd(q->xsk), &ev))
		return -errno;
	q->rx_armed = true;
	q->bounce_off = (uint64_t)pair * pair_frames(x) * XDP_FRAME_SIZE;
	vnet_reserve_place(&q->res,
			   x->view.base + q->bounce_off +
				   XDP_BOUNCE_FRAMES * XDP_FRAME_SIZE,
			   q->bounce_off + XDP_BOUNCE_FRAMES * XDP_FRAME_SIZE,
			   chunk_front(x), x->hdr_len, x->b.max_frame);
	for (unsigned i = 0; i < XDP_BOUNCE_FRAMES; i++)
		q->tx_free[i] = q->bounce_off + (uint64_t)i * XDP_FRAME_SIZE;
	q->ntx_free = XDP_BOUNCE_FRAMES;
	q->mode = Q_NOCOPY;
	return 0;
}

/* Takes pair's queue out of the XSK map, or puts it back. */
static void steer(struct xdp_port *x, unsigned pair)
{
	struct xdp_queue *q = &x->q[pair];
	int rc;

	if (!q->xsk)
		return;
	rc = vnet_xsk_map_set(x->name, q->queue_id,
			      q->steer_off ? -1 : xsk_socket__fd(q->xsk));
	if (rc)
		log_warn("net: xdp %s queue %u: cannot %s the XSK map: %s",
			 x->name, q->queue_id,
			 q->steer_off ? "leave" : "join", strerror(-rc));
}

/* A pair the guest does not serve gets no frames in its XSK, where they
 * would wait unread: the redirect program passes them up to the host's
 * stack. Pair 0 always gets its frames, as with TAP. */
static int xdp_set_pair_enabled(struct vnet_port *b, unsigned pair,
				bool on)
{
	struct xdp_port *x = xdp_of(b);

	if (pair == 0 || x->q[pair].steer_off == !on)
		return 0;
	x->q[pair].steer_off = !on;
	steer(x, pair);
	return 0;
}

/* One try at pair's XSK; on failure nothing of it is left. */
static int queue_open_once(struct xdp_port *x, unsigned pair, bool nocopy)
{
	struct xdp_queue *q = &x->q[pair];
	int rc = nocopy ? nocopy_open_once(x, q, pair) : copy_open_once(x, q);

	if (rc) {
		xdp_queue_close(q);
		return rc;
	}
	/* libxdp put the new XSK in the map. */
	if (q->steer_off)
		steer(x, pair);
	return 0;
}

/* At start only, before the loop runs: a busy queue (see the top) is
 * waited for, for up to a second, before it counts as busy. */
static int queue_open(struct xdp_port *x, unsigned pair, bool nocopy)
{
	int rc;

	for (unsigned i = 0;; i++) {
		rc = queue_open_once(x, pair, nocopy);
		if (rc != -EBUSY || i == XDP_BUSY_TRIES)
			return rc;
		nanosleep(&(struct timespec){ .tv_nsec = XDP_BUSY_RETRY_MS *
							 1000 * 1000 },
			  NULL);
	}
}

/* Opens pair 0's queue in native mode, else generic (said once); the
 * other pairs follow in the mode that worked. */
static int xdp_open_queues(struct xdp_port *x, unsigned pairs)
{
	int rc;

	x->xdp_flags = XDP_FLAGS_DRV_MODE;
	x->xdp_mode = "native";
	rc = queue_open(x, 0, false);
	if (rc && rc != -EPERM && rc != -EACCES && rc != -ENODEV &&
	    rc != -ENOMEM && rc != -EBUSY) {
		int native = rc;

		x->xdp_flags = XDP_FLAGS_SKB_MODE;
		rc = queue_open(x, 0, false);
		if (!rc) {
			x->xdp_mode = "generic";
			log_info("net: xdp %s: no native XDP (%s): using "
				 "generic (SKB) XDP, slower",
				 x->name, strerror(-native));
		}
	}
	x->b.pairs = 1;
	for (unsigned i = 1; i < pairs && !rc; i++) {
		rc = queue_open(x, i, false);
		x->b.pairs = i + 1;
	}
	return rc;
}

/* ---- Attach and detach: no-copy pairs follow the guest's memory ------- */

/* From now on every pair copies; why is said once. */
static void go_copy(struct xdp_port *x, const char *why, int err)
{
	if (!x->copy)
		log_warn("net: xdp %s: no copy-free path: %s%s%s; copying "
			 "frames through a UMEM of vmio's own",
			 x->name, why, err ? ": " : "",
			 err ? strerror(-err) : "");
	x->copy = true;
}

static bool any_on_view(const struct xdp_port *x)
{
	for (unsigned i = 0; i < x->b.pairs; i++)
		if (x->q[i].mode == Q_NOCOPY || x->q[i].want == Q_NOCOPY)
			return true;
	return false;
}

/* The view shows mem, or we go copying. */
static bool view_ready(struct xdp_port *x, const struct vmio_mem *mem)
{
	const char *why = NULL;
	int rc;

	if (vnet_umem_view_matches(&x->view, mem))
		return true;
	if (any_on_view(x)) {
		/* The device detaches every pair before the table
		 * changes; a pair on the old view means it did not. */
		log_err("net: xdp %s: guest memory changed under a running "
			"pair; keeping the old view", x->name);
		return false;
	}
	vnet_umem_view_unmap(&x->view);
	rc = vnet_umem_view_map(&x->view, mem,
				(size_t)x->b.pairs * pair_frames(x) *
					XDP_FRAME_SIZE,
				&why);
	if (rc) {
		go_copy(x, why, rc);
		return false;
	}
	return true;
}

static int open_later(struct xdp_port *x, unsigned pair, bool nocopy);
static void on_retry(void *opaque);

/* What a try at pair's XSK in attach came to (rc): said, and for a
 * no-copy one that failed, copying from now on. Returns 0 or
 * VNET_ATTACH_LATER (the copy XSK waits for its queue). */
static int opened(struct xdp_port *x, unsigned pair, bool nocopy, int rc)
{
	struct xdp_queue *q = &x->q[pair];

	if (!rc) {
		if (nocopy)
			log_info("net: xdp %s queue %u (pair %u): %s", x->name,
				 q->queue_id, pair, xdp_pair_mode(&x->b, pair));
		return 0;
	}
	if (nocopy) {
		go_copy(x, xsk_why(rc), rc);
		return open_later(x, pair, false);
	}
	log_err("net: xdp %s queue %u: cannot reopen the XSK: %s", x->name,
		q->queue_id, xsk_why(rc));
	return 0;
}

/* Opens pair's XSK now, or, if its queue is still busy, from the retry
 * timer (VNET_ATTACH_LATER). */
static int open_later(struct xdp_port *x, unsigned pair, bool nocopy)
{
	struct xdp_queue *q = &x->q[pair];
	int rc = queue_open_once(x, pair, nocopy);

	if (rc != -EBUSY)
		return opened(x, pair, nocopy, rc);
	/* The timer is ours only while we wait: no timer outlives the
	 * wait, and so none the device's loop. */
	if (!x->b.loop || vmio_timer_init(&q->retry, x->b.loop, on_retry, q))
		return opened(x, pair, nocopy, -EBUSY);
	log_debug("net: xdp %s queue %u: still busy; trying again every "
		  "%u ms", x->name, q->queue_id, XDP_BUSY_RETRY_MS);
	q->want = nocopy ? Q_NOCOPY : Q_COPY;
	q->busy_tries = 1;
	vmio_timer_arm_ms(&q->retry, XDP_BUSY_RETRY_MS);
	return VNET_ATTACH_LATER;
}

static void on_retry(void *opaque)
{
	struct xdp_queue *q = opaque;
	struct xdp_port *x = q->x;
	unsigned pair = (unsigned)(q - x->q);
	bool nocopy = q->want == Q_NOCOPY;
	int rc = queue_open_once(x, pair, nocopy);

	if (rc == -EBUSY && q->busy_tries++ < XDP_BUSY_TRIES) {
		vmio_timer_arm_ms(&q->retry, XDP_BUSY_RETRY_MS);
		return;
	}
	vmio_timer_fini(&q->retry);
	q->want = Q_NONE;
	if (opened(x, pair, nocopy, rc) == VNET_ATTACH_LATER)
		return;
	if (x->b.attached)
		x->b.attached(x->b.attached_opaque, pair);
}

static int xdp_attach(struct vnet_port *b, unsigned pair,
		      const struct vmio_mem *mem)
{
	struct xdp_port *x = xdp_of(b);
	struct xdp_queue *q = &x->q[pair];

	if (q->want != Q_NONE)
		return VNET_ATTACH_LATER; /* still waiting for the queue */
	if (x->b.max_frame > XDP_NOCOPY_MAX_FRAME)
		go_copy(x, "a frame above 1518 bytes (--mtu above 1500) does "
			   "not fit the guest's smallest receive buffer", 0);
	if (x->copy || !mem || !mem->nregions)
		return q->mode == Q_NONE ? open_later(x, pair, false) : 0;
	if (q->mode == Q_NOCOPY && vnet_umem_view_matches(&x->view, mem))
		return 0;
	if (q->mode == Q_NOCOPY || !view_ready(x, mem))
		return 0;
	xdp_queue_close(q);
	return open_later(x, pair, true);
}

/* Before the XSK goes: the frames it received are worth giving. */
static void keep_late_frames(struct xdp_port *x, struct xdp_queue *q)
{
	unsigned got;

	q->late_pos = 0;
	q->nlate = rx_process(x, q, q->late, XDP_LATE_MAX, &got);
	/* What found no guest buffer is lost (counted); the spares go back
	 * unused. */
	vnet_reserve_detach(&q->res);
}

static void xdp_detach(struct vnet_port *b, unsigned pair)
{
	struct xdp_port *x = xdp_of(b);
	struct xdp_queue *q = &x->q[pair];

	if (q->want != Q_NONE) {
		/* Given up: the next attach starts again. */
		vmio_timer_fini(&q->retry);
		q->want = Q_NONE;
	}
	if (q->mode != Q_NOCOPY)
		return;
	keep_late_frames(x, q);
	/* Deleting the socket unbinds it (and waits for the receive path
	 * to be done with it): after this the kernel writes no guest
	 * memory, and every frame sent is out of guest memory. */
	xdp_queue_close(q);
	if (!any_on_view(x))
		vnet_umem_view_unmap(&x->view);
}

static const struct vnet_port_ops xdp_ops = {
	.name = "xdp",
	.configure = xdp_configure,
	.tx = xdp_tx,
	.tx_reap = xdp_tx_reap,
	.tx_flush = xdp_tx_flush,
	.rx_fd = xdp_rx_fd,
	.rx = xdp_rx,
	.rx_posts = xdp_rx_posts,
	.rx_post = xdp_rx_post,
	.rx_reap = xdp_rx_reap,
	.set_pair_enabled = xdp_set_pair_enabled,
	.attach = xdp_attach,
	.detach = xdp_detach,
	.pair_mode = xdp_pair_mode,
	.pair_counters = xdp_pair_counters,
	/* Its XSKs, their rings and UMEM, and its BPF objects are in no
	 * record yet. */
	.cannot_hand_over = "the AF_XDP port cannot hand over yet",
	.free = xdp_free,
};

struct vnet_port *vnet_port_xdp_new(const char *name, unsigned queue,
					  unsigned pairs, bool copy,
					  unsigned reserve, int *err,
					  const char **why)
{
	struct xdp_port *x;
	unsigned nq;

	if (!name[0] || strlen(name) >= IFNAMSIZ) {
		*err = -EINVAL;
		*why = "interface names are 1 to 15 bytes";
		return NULL;
	}
	if (!if_nametoindex(name)) {
		*err = -ENODEV;
		*why = "no such interface";
		return NULL;
	}
	nq = iface_rx_queues(name);
	if (nq && queue + pairs > nq) {
		static char msg[96];

		snprintf(msg, sizeof(msg),
			 "queue out of range: it has %u queue(s), %u needed "
			 "from queue %u",
			 nq, pairs, queue);
		*err = -ERANGE;
		*why = msg;
		return NULL;
	}
	libxdp_set_print(libxdp_print);
	libbpf_set_print(libbpf_print);
	x = calloc(1, sizeof(*x));
	if (x)
		x->q = calloc(pairs, sizeof(x->q[0]));
	if (!x || !x->q) {
		free(x);
		*err = -ENOMEM;
		*why = "out of memory";
		return NULL;
	}
	x->b.ops = &xdp_ops;
	x->hdr_len = VIRTIO_NET_HDR_LEN;
	x->copy = copy;
	x->reserve = reserve;
	memcpy(x->name, name, strlen(name) + 1);
	for (unsigned i = 0; i < pairs; i++) {
		struct xdp_queue *q = &x->q[i];

		q->queue_id = queue + i;
		q->rx_efd = -1;
		q->x = x;
		if (vnet_held_init(&q->rx_held, XDP_RING_SIZE) ||
		    vnet_held_init(&q->tx_held, XDP_RING_SIZE) ||
		    vnet_reserve_init(&q->res, reserve, XDP_SPARE_MAX,
				      XDP_FRAME_SIZE) ||
		    !(q->late = calloc(XDP_LATE_MAX, sizeof(q->late[0])))) {
			x->b.pairs = i + 1;
			xdp_free(&x->b);
			*err = -ENOMEM;
			*why = "out of memory";
			return NULL;
		}
	}
	x->b.pairs = pairs;
	*err = xdp_open_queues(x, pairs);
	if (*err) {
		*why = xsk_why(*err);
		x->b.pairs = pairs;
		xdp_free(&x->b);
		return NULL;
	}
	for (unsigned i = 0; i < pairs; i++)
		log_info("net: xdp %s queue %u (pair %u): %s XDP, %s", name,
			 queue + i, i, x->xdp_mode,
			 copy ? "copy (--xdp-copy)"
			      : "no copy once the guest's memory is known");
	return &x->b;
}
