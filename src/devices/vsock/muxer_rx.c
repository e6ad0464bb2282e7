/* The multiplexer's rx queue; see muxer_rx.h. */
#include "devices/vsock/muxer_rx.h"

#include <inttypes.h>
#include <stdlib.h>

#include "devices/vsock/conn_to_guest.h"
#include "devices/vsock/muxer_conns.h"
#include "devices/vsock/router.h"

static bool sib_pending(const struct vsock_muxer *m)
{
	return m->cfg.router &&
	       vsock_router_rx_pending(m->cfg.router, m->cfg.vm_index);
}

/* Where the next rx packet comes from (rx_sched.h). */
static enum vsock_rx_source rx_next(const struct vsock_muxer *m)
{
	return vsock_rx_sched_next(&m->rxs, !vsock_rstq_empty(&m->rstq),
				   sib_pending(m));
}

/* The sources' side of rx_writer.h: each takes its turn (rx_sched.h) as
 * it writes. */

static uint32_t fill_rst(void *opaque, const struct vmio_chain *view)
{
	struct vsock_muxer *m = opaque;
	uint32_t w = vsock_pkt_write_hdr(view, vsock_rstq_peek(&m->rstq))
			     ? 0
			     : VSOCK_HDR_SIZE;

	vsock_rstq_pop(&m->rstq);
	mux_rx_owed_refill(m);
	return w;
}

void mux_rx_owed_refill(struct vsock_muxer *m)
{
	while (m->owed_next < m->nowed && !vsock_rstq_full(&m->rstq))
		vsock_rstq_push(&m->rstq, &m->owed[m->owed_next++]);
	if (m->owed_next == m->nowed) {
		free(m->owed);
		m->owed = NULL;
		m->nowed = m->owed_next = 0;
	}
}

static uint32_t fill_sibling(void *opaque, const struct vmio_chain *view)
{
	struct vsock_muxer *m = opaque;

	vsock_rx_sched_take(&m->rxs, VSOCK_RX_SIBLING);
	return vsock_router_fill_rx(m->cfg.router, m->cfg.vm_index, view);
}

/* The connection whose turn it is leaves the FIFO; rx_served keeps it
 * for conn_update, which puts it back at the tail if it has more: one
 * turn is one packet, or one batch of host data of up to
 * VSOCK_CONN_TO_GUEST_BATCH_BYTES (16 packets in 4 KiB guest buffers). Fair
 * still: every connection with something pending gets a turn before
 * this one's next. */
static struct vsock_conn *conn_take(struct vsock_muxer *m)
{
	m->rx_served = mux_rx_conn(vsock_rx_sched_take(&m->rxs, VSOCK_RX_CONN));
	return &m->rx_served->c;
}

static unsigned fill_conn_batch(void *opaque,
				const struct vmio_chain *const bufs[],
				unsigned n, uint32_t used[])
{
	return vsock_conn_to_guest(conn_take(opaque), bufs, n,
				   VSOCK_MAX_PKT_PAYLOAD, used);
}

/* A batch of one: the view over a packet's buffers. */
static uint32_t fill_conn(void *opaque, const struct vmio_chain *view)
{
	uint32_t used;

	return fill_conn_batch(opaque, &view, 1, &used) ? used : 0;
}

/* What the writer needs to know of source src. */
static void rx_source(struct vsock_muxer *m, enum vsock_rx_source src,
		      struct vsock_rx_source_ops *o)
{
	const struct vsock_conn *c;

	*o = (struct vsock_rx_source_ops){ .opaque = m };
	switch (src) {
	case VSOCK_RX_RST:
		o->fill = fill_rst;
		break;
	case VSOCK_RX_SIBLING:
		/* A plain packet is cut to its one buffer anyway. */
		if (m->mrg)
			o->need = vsock_router_rx_next_len(m->cfg.router,
							   m->cfg.vm_index);
		o->fill = fill_sibling;
		break;
	case VSOCK_RX_CONN:
		c = &mux_rx_conn(vsock_rx_sched_head(&m->rxs))->c;
		o->need = vsock_conn_to_guest_want(c);
		o->may_cut = true;
		o->batch = vsock_conn_to_guest_batch_bytes(c);
		o->fill = fill_conn;
		o->fill_batch = fill_conn_batch;
		break;
	case VSOCK_RX_NONE:
		break;
	}
}

/* One packet from the source whose turn it is, its first buffer popped.
 * Returns the buffers pushed, or < 0 to stop serving for now. */
static int rx_packet(struct vsock_muxer *m, unsigned *budget)
{
	struct vsock_rx_source_ops src;
	uint64_t unusable = m->rxw.unusable;
	int k;

	/* Asked again: a sibling packet may have come meanwhile. */
	rx_source(m, rx_next(m), &src);
	k = vsock_rx_write(&m->rxw, &src, budget);
	if (m->rxw.unusable != unusable) {
		m->stats.rx_errors += m->rxw.unusable - unusable;
		vsock_peer_log(&m->rl, VMIO_LOG_WARN,
			       "vsock: CID %" PRIu64 ": rx buffers given back "
			       "empty (%" PRIu64 " so far): %s",
			       m->cfg.guest_cid, m->stats.rx_errors,
			       m->rxw.unusable_why);
	}
	if (m->rx_served) {
		mux_conn_update(m->rx_served);
		m->rx_served = NULL;
	}
	if (k == VSOCK_RX_AGAIN)
		mux_resched(m, true, false);
	return k;
}

/* Publishes what was pushed, notifying the guest if it asked. */
static void rx_tell_guest(struct vsock_muxer *m)
{
	vmio_vq_flush_and_notify(m->rx);
	m->stats.rx_flushes++;
}

void mux_serve_rx(struct vsock_muxer *m)
{
	unsigned budget = VSOCK_MUX_BATCH, pushed = 0;
	uint64_t told;

	if (!m->rx || !m->mem)
		return;
	m->rxw.vq = m->rx;
	m->rxw.mem = m->mem;
	m->rxw.mergeable = m->mrg;
	told = m->rxw.pushed_bytes;
	while (rx_next(m) != VSOCK_RX_NONE) {
		int got, k;

		if (!budget--) {
			mux_resched(m, true, false);
			break;
		}
		got = vsock_rx_pop_first(&m->rxw);
		if (got < 0)
			break;
		if (!got) {
			/* Out of buffers: look again next turn while the
			 * window is open; else wait for the guest to post
			 * some, unless it did while kicks were off. */
			if (vmio_poll_window_dry_now(&m->rx_poll)) {
				mux_resched(m, true, false);
				break;
			}
			if (vmio_vq_enable_kicks(m->rx, true))
				continue;
			break;
		}
		vmio_poll_window_worked(&m->rx_poll);
		k = rx_packet(m, &budget);
		if (k < 0)
			break;
		pushed += (unsigned)k;
		if (m->rxw.pushed_bytes - told >= VSOCK_MUX_RX_NOTIFY_BYTES) {
			rx_tell_guest(m);
			told = m->rxw.pushed_bytes;
			pushed = 0;
		}
	}
	if (pushed)
		rx_tell_guest(m);
	/* Nothing to send: buffers the guest posts are of no use until
	 * there is, so do not let it kick us for them. */
	if (rx_next(m) == VSOCK_RX_NONE)
		vmio_vq_enable_kicks(m->rx, false);
	if (m->tx_stalled && !vsock_rstq_full(&m->rstq)) {
		m->tx_stalled = false;
		mux_resched(m, false, true);
	}
}
