/* A Linux guest socket's receive and send limits. See
 * vsock_guest_limits.h. */
#include "frontend/vsock_guest_limits.h"

#include <errno.h>
#include <stdlib.h>

enum vg_rx_verdict vg_rx_admit(unsigned queued, uint32_t held,
			       uint32_t buf_alloc, uint32_t len,
			       uint32_t overhead)
{
	/* 64 bits: a hostile device may have made held anything. */
	if ((uint64_t)held + len > buf_alloc)
		return VG_RX_OVER_BYTES;
	if (overhead && ((uint64_t)queued + 1) * overhead > buf_alloc)
		return VG_RX_OVER_PACKETS;
	return VG_RX_ACCEPT;
}

static struct vg_rx_pkt *nth(const struct vg_rxq *q, unsigned i)
{
	return &q->pkts[(q->head + i) % q->cap];
}

static int grow(struct vg_rxq *q)
{
	unsigned cap = q->cap ? 2 * q->cap : 64;
	struct vg_rx_pkt *p = malloc(cap * sizeof(*p));

	if (!p)
		return -ENOMEM;
	/* Unrolled into the new ring from its start. */
	for (unsigned i = 0; i < q->count; i++)
		p[i] = *nth(q, i);
	free(q->pkts);
	q->pkts = p;
	q->head = 0;
	q->cap = cap;
	return 0;
}

int vg_rxq_add(struct vg_rxq *q, uint32_t start, uint32_t len,
	       uint32_t room, bool eom)
{
	if (len <= VG_LINUX_GOOD_COPY_LEN && q->count) {
		struct vg_rx_pkt *last = nth(q, q->count - 1);

		/* Strictly less, as Linux compares the length with the
		 * tailroom. */
		if (len < last->room && !last->eom) {
			last->len += len;
			last->room -= len;
			last->eom = eom;
			q->coalesced++;
			return 1;
		}
	}
	if (q->count == q->cap && grow(q))
		return -ENOMEM;
	*nth(q, q->count++) = (struct vg_rx_pkt){
		.start = start,
		.len = len,
		.room = room > len ? room - len : 0,
		.eom = eom,
	};
	if (q->count > q->peak)
		q->peak = q->count;
	return 0;
}

void vg_rxq_consumed(struct vg_rxq *q, uint32_t fwd_cnt)
{
	/* Everything before the oldest packet was read, so fwd_cnt is at or
	 * past its start: the difference does not wrap. */
	while (q->count && fwd_cnt - nth(q, 0)->start >= nth(q, 0)->len) {
		q->head = (q->head + 1) % q->cap;
		q->count--;
	}
}

void vg_rxq_free(struct vg_rxq *q)
{
	free(q->pkts);
	*q = (struct vg_rxq){ 0 };
}

uint32_t vg_tx_space(uint32_t peer_buf_alloc, uint32_t own_buf_alloc,
		     uint32_t tx_cnt, uint32_t peer_fwd_cnt, bool cap)
{
	uint32_t alloc = cap && own_buf_alloc < peer_buf_alloc
				 ? own_buf_alloc
				 : peer_buf_alloc;
	uint32_t flight = tx_cnt - peer_fwd_cnt;

	return flight >= alloc ? 0 : alloc - flight;
}
