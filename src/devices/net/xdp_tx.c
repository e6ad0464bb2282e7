/* Transmit through the AF_XDP port; see xdp_tx.h. */
#include "devices/net/xdp_tx.h"

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

int vxdp_tx(struct vnet_port *b, unsigned pair,
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

void vxdp_tx_flush(struct vnet_port *b, unsigned pair)
{
	struct xdp_queue *q = &xdp_of(b)->q[pair];

	if (!q->xsk)
		return;
	if (q->tx_unkicked)
		tx_kick(q);
	if (q->mode == Q_COPY)
		cq_reap(q, NULL, 0);
}

unsigned vxdp_tx_reap(struct vnet_port *b, unsigned pair,
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

