/* The vsock multiplexer; see muxer.h. */
#include "devices/vsock/muxer.h"
#include "devices/vsock/stats.h"
#include "util/json.h"

#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "devices/vsock/conn_doc.h"
#include "devices/vsock/conn_table.h"
#include "devices/vsock/conn_to_guest.h"
#include "devices/vsock/connection.h"
#include "devices/vsock/expiry.h"
#include "devices/vsock/host_service.h"
#include "devices/vsock/packet.h"
#include "devices/vsock/router.h"
#include "devices/vsock/rst_queue.h"
#include "devices/vsock/rx_sched.h"
#include "devices/vsock/rx_writer.h"
#include "devices/vsock/tx_splice.h"
#include "devices/vsock/peer_log.h"
#include "virtio/poll_window.h"

struct mux_conn {
	struct vsock_table_entry key;
	struct vsock_conn c;
	struct vsock_muxer *m;
	struct mux_conn *all_prev, *all_next; /* every connection */
	struct vsock_rx_link rx_link;         /* rx_sched.h's FIFO */
	int watched_fd;   /* fd registered on the loop, -1 if none */
	uint32_t watched; /* its events */
	uint64_t deadline_ns; /* 0: none (expiry.h) */
	struct vsock_holder holder; /* while it holds tx chains (tx_splice.h) */
};

struct vsock_muxer {
	struct vmio_loop *loop;
	struct vsock_muxer_config cfg;
	char *uds_path;
	unsigned types;
	struct vsock_conn_table table;
	struct mux_conn *all;
	struct vsock_rx_sched rxs;

	struct vsock_rstq rstq;
	bool tx_stalled; /* tx stopped because rstq was full */
	bool attached;   /* a VMM is there (vsock_muxer_set_attached) */
	bool mrg;        /* mergeable rx buffers negotiated (mrg_rx.h) */

	struct vmio_vq *rx, *tx;
	struct vmio_mem *mem;

	struct vsock_expiry expiry; /* the tick */
	/* The queues' next turn: tx (which serves rx after it) and rx. The
	 * router schedules rx_again for sibling packets. */
	struct vmio_defer tx_again, rx_again;

	struct vmio_ratelimit rl;
	struct vsock_vm_stats stats;
	/* Large: one iovec array per chain, never on the stack. */
	struct vsock_rx_writer rxw;
	struct vmio_chain txc;
	struct mux_conn *rx_served; /* the connection rxw just wrote for */

	/* Each queue's polling window (virtio/poll_window.h, as net's):
	 * after work, a dry ring is looked at again once a loop turn for
	 * cfg.poll_ns before its kicks go back on. */
	struct vmio_poll_window rx_poll, tx_poll;

	struct vsock_splice *splice; /* NULL: the copy path */
	struct vsock_holders holders;
};

/* ---- Re-arming, timer ------------------------------------------------- */

/* Asks to be called again once the loop has served everything else. */
static void resched(struct vsock_muxer *m, bool rx, bool tx)
{
	if (tx)
		vmio_defer_schedule(&m->tx_again);
	else if (rx)
		vmio_defer_schedule(&m->rx_again);
}

/* ---- Synthetic RSTs (rst_queue.h) -------------------------------------- */

/* An RST answering guest packet h (ports and CIDs swapped). */
static void reply_rst(struct vsock_muxer *m, const struct vsock_hdr *h)
{
	struct vsock_hdr r;

	vsock_hdr_reply(h, VSOCK_OP_RST, &r);
	m->stats.rsts_unmatched++;
	/* tx stops popping while the queue is full, so there is room. */
	if (!vsock_rstq_push(&m->rstq, &r))
		log_err("vsock: RST queue full (a bug): RST to port %u lost",
			h->src_port);
}

/* ---- Connections ------------------------------------------------------ */

/* The connection of an rx FIFO link (NULL: none). */
static struct mux_conn *rx_conn(struct vsock_rx_link *l)
{
	return l ? (struct mux_conn *)((char *)l -
				       offsetof(struct mux_conn, rx_link))
		 : NULL;
}

static void unwatch(struct vsock_muxer *m, struct mux_conn *mc)
{
	if (mc->watched_fd >= 0)
		vmio_loop_remove(m->loop, mc->watched_fd);
	mc->watched_fd = -1;
	mc->watched = 0;
}

static void hold_release(struct mux_conn *mc, bool force);

static void conn_free(struct mux_conn *mc)
{
	struct vsock_muxer *m = mc->m;

	hold_release(mc, true);
	vsock_holders_released(&m->holders, &mc->holder, 0, true);
	vsock_holder_unwatch(&m->holders, &mc->holder);
	vsock_rx_sched_remove(&m->rxs, &mc->rx_link);
	vsock_table_remove(&m->table, &mc->key);
	if (mc->all_prev)
		mc->all_prev->all_next = mc->all_next;
	else
		m->all = mc->all_next;
	if (mc->all_next)
		mc->all_next->all_prev = mc->all_prev;
	unwatch(m, mc);
	m->stats.connections_ended++;
	vsock_conn_stats_add(&m->stats.ended, &mc->c.stats);
	vsock_conn_destroy(&mc->c);
	free(mc);
}

static void conn_io_cb(void *opaque, int fd, uint32_t events);

/* Brings the muxer's view of a connection in line with its state; called
 * after every call into it. May free it. */
static void conn_update(struct mux_conn *mc)
{
	struct vsock_muxer *m = mc->m;
	struct vsock_conn *c = &mc->c;
	uint32_t ev;

	/* The connection closes its fd itself when it dies: forget the
	 * watch before anything can reuse the number. */
	if (mc->watched_fd >= 0 && mc->watched_fd != c->fd)
		unwatch(m, mc);
	/* A closed socket holds nothing of ours any more for the host to
	 * read: its chains go back, and the dup goes (it would keep the
	 * socket open). */
	if (c->fd < 0 && mc->holder.wake_fd >= 0) {
		hold_release(mc, true);
		vsock_holder_unwatch(&m->holders, &mc->holder);
	}
	if (vsock_conn_is_dead(c)) {
		conn_free(mc);
		return;
	}
	/* A watch with no events still reports HUP and ERR, level
	 * triggered: a closed peer would spin the loop. So 0 means no
	 * watch at all. */
	ev = vsock_conn_epoll_events(c);
	if (!ev) {
		unwatch(m, mc);
	} else if (mc->watched_fd < 0) {
		if (vmio_loop_add(m->loop, c->fd, ev, conn_io_cb, mc) == 0) {
			mc->watched_fd = c->fd;
			mc->watched = ev;
		} else {
			vsock_peer_log(&m->rl, VMIO_LOG_ERR,
				       "vsock: cannot watch a host socket");
		}
	} else if (ev != mc->watched) {
		vmio_loop_modify(m->loop, c->fd, ev);
		mc->watched = ev;
	}

	vsock_expiry_follow(&m->expiry, c, &mc->deadline_ns);

	if (vsock_conn_pending_to_guest(c))
		vsock_rx_sched_add(&m->rxs, &mc->rx_link);
	/* Its CREDIT_REQUEST, or the end of a merge hold, waits for the
	 * tick (vsock_conn_pending_to_guest, vsock_conn_host_readable). */
	if (vsock_conn_wants_tick(c))
		vsock_expiry_run(&m->expiry, true);
}

static struct mux_conn *conn_new(struct vsock_muxer *m)
{
	struct mux_conn *mc = calloc(1, sizeof(*mc));

	if (!mc)
		return NULL;
	mc->m = m;
	mc->watched_fd = -1;
	vsock_holder_init(&mc->holder);
	return mc;
}

/* Gives a stream connection just set up the splice path and the bound. */
static void conn_setup_tx(struct vsock_muxer *m, struct mux_conn *mc)
{
	mc->c.vm_stats = &m->stats;
	mc->c.rl = &m->rl;
	vsock_conn_set_packet_overhead(&mc->c, m->cfg.rx_pkt_overhead);
	if (mc->c.type != VSOCK_TYPE_STREAM || !m->splice)
		return;
	mc->c.splice = m->splice;
	vsock_held_set_cap(&mc->c.held, (uint16_t)m->holders.per_conn);
}

/* Puts a connection set up by vsock_conn_init_* in the table. */
static int conn_insert(struct vsock_muxer *m, struct mux_conn *mc)
{
	int rc;

	mc->key.local_port = mc->c.local_port;
	mc->key.peer_port = mc->c.peer_port;
	rc = vsock_table_insert(&m->table, &mc->key);
	if (rc)
		return rc;
	mc->all_next = m->all;
	if (m->all)
		m->all->all_prev = mc;
	m->all = mc;
	m->stats.connections_opened++;
	return 0;
}

/* ---- Held tx chains (tx_splice.h) ------------------------------------- */

static bool hold_room(const struct vsock_muxer *m, const struct mux_conn *mc)
{
	return m->splice && vsock_holders_room(&m->holders, mc->c.held.n);
}

static void hold_wake_cb(void *opaque, int fd, uint32_t events);
static void serve_rx(struct vsock_muxer *m);

/* A connection just kept a chain: the tick looks at it too, as a wake-up
 * of the watch may be missed. */
static void hold_note(struct vsock_muxer *m, struct mux_conn *mc)
{
	vsock_holders_add(&m->holders, &mc->holder, mc->c.fd, hold_wake_cb, mc,
			  &m->stats);
	vsock_expiry_run(&m->expiry, true);
}

static struct mux_conn *holder_conn(struct vsock_holder *ho)
{
	return (struct mux_conn *)((char *)ho -
				   offsetof(struct mux_conn, holder));
}

/* Pushes the chains of mc the host has read through (all with force).
 * Returns how many; the caller flushes the used ring. */
static unsigned hold_release_one(struct mux_conn *mc, bool force)
{
	struct vsock_muxer *m = mc->m;
	uint16_t heads[64];
	unsigned k, total = 0;

	do {
		k = vsock_conn_tx_release(&mc->c, heads, 64, force);
		for (unsigned i = 0; i < k; i++)
			if (m->tx)
				vmio_vq_push(m->tx, heads[i], 0);
		total += k;
	} while (k == 64);
	vsock_holders_released(&m->holders, &mc->holder, total,
			       !mc->c.held.n);
	return total;
}

/* hold_release_one, and the used ring published at once: for callers
 * outside a tx turn. */
static void hold_release(struct mux_conn *mc, bool force)
{
	struct vsock_muxer *m = mc->m;

	if (mc->c.held.n && hold_release_one(mc, force) && m->tx)
		vmio_vq_flush_and_notify(m->tx);
}

/* Every holder; returns the chains pushed (not flushed). */
static unsigned hold_release_all(struct vsock_muxer *m, bool force)
{
	struct vsock_holder *ho, *next;
	unsigned n = 0;

	for (ho = m->holders.list; ho; ho = next) {
		struct mux_conn *mc = holder_conn(ho);

		next = ho->next;
		n += hold_release_one(mc, force);
		conn_update(mc);
	}
	return n;
}

static void hold_wake_cb(void *opaque, int fd, uint32_t events)
{
	struct mux_conn *mc = opaque;
	struct vsock_muxer *m = mc->m;

	(void)fd;
	(void)events;
	m->stats.tx_hold_wakes++;
	hold_release(mc, false);
	conn_update(mc);
	serve_rx(m);
}

/* ---- Guest -> host ---------------------------------------------------- */

/* A guest connect no service takes. */
static void refuse(struct vsock_muxer *m, const struct vsock_hdr *h)
{
	m->stats.connections_refused++;
	reply_rst(m, h);
}

/* The guest connects to host port h->dst_port: to the host service
 * (host_service.h), or RST at once if there is none. */
static void guest_connect(struct vsock_muxer *m, const struct vsock_hdr *h)
{
	char path[VSOCK_SERVICE_PATH_MAX];
	struct mux_conn *mc;
	int fd;

	if (vsock_table_full(&m->table)) {
		vsock_peer_log(&m->rl, VMIO_LOG_WARN,
			       "vsock: %u connections already: refusing guest "
			       "port %u -> host port %u",
			       m->table.max, h->src_port, h->dst_port);
		refuse(m, h);
		return;
	}
	fd = vsock_service_connect(m->uds_path, h, &m->rl, path);
	if (fd < 0) {
		refuse(m, h);
		return;
	}
	mc = conn_new(m);
	if (!mc) {
		close(fd);
		refuse(m, h);
		return;
	}
	vsock_conn_init_peer(&mc->c, m->cfg.guest_cid, h, fd, m->cfg.buf_size);
	conn_setup_tx(m, mc);
	if (conn_insert(m, mc)) {
		/* Cannot happen: the pair was looked up and the table had
		 * room. */
		vsock_conn_destroy(&mc->c);
		free(mc);
		refuse(m, h);
		return;
	}
	vsock_peer_log(&m->rl, VMIO_LOG_DEBUG,
		       "vsock: guest port %u connected to %s", h->src_port,
		       path);
	conn_update(mc);
}

/* A packet for a sibling VM: forwarded by the router, or answered with
 * an RST (never an RST for an RST). */
static void route_sibling(struct vsock_muxer *m, const struct vsock_pkt *pkt,
			  const struct vmio_chain *ch, bool invalid,
			  const char *bad)
{
	const struct vsock_hdr *h = &pkt->hdr;
	const char *why = NULL;

	if (!vsock_router_forward(m->cfg.router, m->cfg.vm_index, pkt, ch,
				  invalid, &why))
		return;
	vsock_peer_log(&m->rl, VMIO_LOG_INFO,
		       "vsock: guest %s port %u -> CID %" PRIu64
		       " port %u: %s%s",
		       vsock_op_name(h->op), h->src_port, h->dst_cid,
		       h->dst_port, invalid && bad ? bad : why,
		       h->op == VSOCK_OP_RST ? "" : "; RST");
	if (h->op != VSOCK_OP_RST)
		reply_rst(m, h);
}

/* Returns true if a connection keeps the chain (held_total counts it). */
static bool handle_tx(struct vsock_muxer *m, const struct vmio_chain *ch)
{
	struct vsock_pkt pkt;
	const struct vsock_hdr *h = &pkt.hdr;
	const char *why = NULL;
	struct vsock_table_entry *e;
	struct mux_conn *mc;
	enum vsock_verdict v;

	v = vsock_pkt_parse_tx(ch, m->cfg.guest_cid, VSOCK_MAX_PKT_PAYLOAD,
			       m->types, &pkt, &why);
	if (v == VSOCK_PKT_DROP) {
		vsock_peer_log(&m->rl, VMIO_LOG_WARN,
			       "vsock: dropped a guest packet: %s", why);
		return false;
	}
	if (h->dst_cid != VSOCK_HOST_CID && m->cfg.router) {
		route_sibling(m, &pkt, ch, v == VSOCK_PKT_RST, why);
		return false;
	}
	if (h->dst_cid != VSOCK_HOST_CID) {
		/* A single VM: no siblings to route to. */
		vsock_peer_log(&m->rl, VMIO_LOG_WARN,
			       "vsock: guest packet to CID %" PRIu64
			       " (only the host, CID 2, is reachable)%s",
			       h->dst_cid,
			       h->op == VSOCK_OP_RST ? "" : "; RST");
		if (h->op != VSOCK_OP_RST)
			reply_rst(m, h);
		return false;
	}
	e = vsock_table_find(&m->table, h->dst_port, h->src_port);
	mc = e ? (struct mux_conn *)e : NULL;
	if (v == VSOCK_PKT_RST) {
		vsock_peer_log(&m->rl, VMIO_LOG_WARN,
			       "vsock: bad guest packet (port %u -> %u): %s; "
			       "RST",
			       h->src_port, h->dst_port, why);
		if (mc)
			conn_free(mc);
		reply_rst(m, h);
		return false;
	}
	if (mc) {
		bool held = vsock_conn_from_guest(&mc->c, &pkt, ch,
						hold_room(m, mc));

		if (held)
			hold_note(m, mc);
		conn_update(mc);
		return held;
	}
	if (h->op == VSOCK_OP_REQUEST) {
		guest_connect(m, h);
		return false;
	}
	/* A flow we do not know (perhaps one we just closed): reset it, but
	 * never answer an RST with one. */
	if (h->op != VSOCK_OP_RST)
		reply_rst(m, h);
	return false;
}

/* ---- Queues ----------------------------------------------------------- */

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
	return w;
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
	m->rx_served = rx_conn(vsock_rx_sched_take(&m->rxs, VSOCK_RX_CONN));
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
		c = &rx_conn(vsock_rx_sched_head(&m->rxs))->c;
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
		conn_update(m->rx_served);
		m->rx_served = NULL;
	}
	if (k == VSOCK_RX_AGAIN)
		resched(m, true, false);
	return k;
}

static void serve_rx(struct vsock_muxer *m)
{
	unsigned budget = VSOCK_MUX_BATCH, pushed = 0;

	if (!m->rx || !m->mem)
		return;
	m->rxw.vq = m->rx;
	m->rxw.mem = m->mem;
	m->rxw.mergeable = m->mrg;
	while (rx_next(m) != VSOCK_RX_NONE) {
		int got, k;

		if (!budget--) {
			resched(m, true, false);
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
				resched(m, true, false);
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
	}
	if (pushed) {
		vmio_vq_flush_and_notify(m->rx);
		m->stats.rx_flushes++;
	}
	/* Nothing to send: buffers the guest posts are of no use until
	 * there is, so do not let it kick us for them. */
	if (rx_next(m) == VSOCK_RX_NONE)
		vmio_vq_enable_kicks(m->rx, false);
	if (m->tx_stalled && !vsock_rstq_full(&m->rstq)) {
		m->tx_stalled = false;
		resched(m, false, true);
	}
}

static void serve_tx(struct vsock_muxer *m)
{
	struct vmio_vq *tx = m->tx;
	unsigned budget = VSOCK_MUX_BATCH, pushed = 0;

	if (!tx || !m->mem)
		return;
	pushed = hold_release_all(m, false);
	vmio_vq_enable_kicks(tx, false);
	for (;;) {
		int got;

		/* Each packet may need one RST: pop only with room for it. */
		if (vsock_rstq_full(&m->rstq)) {
			m->tx_stalled = true;
			break;
		}
		if (!budget--) {
			resched(m, false, true);
			break;
		}
		got = vmio_vq_pop(tx, m->mem, &m->txc);
		if (got < 0)
			break;
		if (!got) {
			if (vmio_poll_window_dry_now(&m->tx_poll)) {
				resched(m, false, true);
				break;
			}
			if (vmio_vq_enable_kicks(tx, true))
				continue;
			break;
		}
		vmio_poll_window_worked(&m->tx_poll);
		/* The connection takes the payload (to the host socket or
		 * its buffer) before this returns: the chain goes back
		 * at once, unless the socket has its pages (held). */
		if (handle_tx(m, &m->txc))
			continue;
		vmio_vq_push(tx, m->txc.head, 0);
		pushed++;
	}
	if (pushed)
		vmio_vq_flush_and_notify(tx);
	serve_rx(m);
}

void vsock_muxer_kick(struct vsock_muxer *m, const struct vmio_vq *vq)
{
	if (!vq)
		return;
	if (vq == m->tx)
		serve_tx(m);
	else if (vq == m->rx)
		serve_rx(m);
}

/* ---- Event callbacks -------------------------------------------------- */

static void conn_io_cb(void *opaque, int fd, uint32_t events)
{
	struct mux_conn *mc = opaque;
	struct vsock_muxer *m = mc->m;

	if (events & EPOLLOUT)
		vsock_conn_flush(&mc->c);
	/* HUP and ERR are read too: the read reports EOF or the error. */
	if (events & (EPOLLIN | EPOLLHUP | EPOLLERR))
		vsock_conn_host_readable(&mc->c, events & (EPOLLHUP | EPOLLRDHUP |
							   EPOLLERR));
	conn_update(mc);
	serve_rx(m);
}

static void tx_again_cb(void *opaque)
{
	struct vsock_muxer *m = opaque;

	/* Serves rx too: a turn of rx asked for meanwhile is not needed. */
	vmio_defer_cancel(&m->rx_again);
	serve_tx(m);
}

static void rx_again_cb(void *opaque)
{
	serve_rx(opaque);
}

/* A connection whose deadline passed (expiry.h). Returns false if it
 * must wait for the next tick (no room for its RST). */
static bool conn_expire(struct vsock_muxer *m, struct mux_conn *mc)
{
	struct vsock_hdr r;

	if (vsock_expiry_rst(&mc->c, &r) && !vsock_rstq_push(&m->rstq, &r))
		return false;
	vsock_expiry_log(&m->expiry, &m->rl, &mc->c);
	conn_free(mc);
	return true;
}

static void timer_cb(void *opaque)
{
	struct vsock_muxer *m = opaque;
	struct mux_conn *mc, *next;
	uint64_t now = vsock_expiry_now(&m->expiry);
	bool waiting = false;

	for (mc = m->all; mc; mc = next) {
		next = mc->all_next;
		if (vsock_conn_wants_tick(&mc->c)) {
			vsock_conn_tick(&mc->c);
			waiting = true;
			if (vsock_conn_pending_to_guest(&mc->c))
				vsock_rx_sched_add(&m->rxs, &mc->rx_link);
		}
		if (!mc->deadline_ns)
			continue;
		if (!vsock_expiry_due(mc->deadline_ns, now) ||
		    !conn_expire(m, mc))
			waiting = true;
	}
	/* A wake-up of the dup may be missed (the kernel wakes writers
	 * only below a quarter of SO_SNDBUF): the tick looks too. */
	if (m->holders.list && hold_release_all(m, false) && m->tx)
		vmio_vq_flush_and_notify(m->tx);
	if (!waiting && !m->holders.list)
		vsock_expiry_run(&m->expiry, false);
	serve_rx(m);
}

/* ---- Public ----------------------------------------------------------- */

int vsock_muxer_connect_local_type(struct vsock_muxer *m, int fd,
				   uint16_t type, uint32_t peer_port,
				   uint32_t *local_port)
{
	struct mux_conn *mc;
	uint32_t port;

	if (!m->attached) {
		close(fd);
		return -ENOTCONN;
	}
	/* The driver takes only the types it negotiated: a seqpacket
	 * REQUEST to one without F_SEQPACKET would break the spec, and
	 * leave the host program waiting on an answer the guest owes it. */
	if (!(m->types & VSOCK_TYPE_BIT(type))) {
		close(fd);
		return -EPROTONOSUPPORT;
	}
	if (vsock_table_full(&m->table)) {
		close(fd);
		return -ENOSPC;
	}
	mc = conn_new(m);
	if (!mc) {
		close(fd);
		return -ENOMEM;
	}
	if (vsock_table_alloc_port(&m->table, peer_port, &port)) {
		free(mc);
		close(fd);
		return -EADDRINUSE;
	}
	vsock_conn_init_local(&mc->c, m->cfg.guest_cid, port, peer_port, fd,
			      m->cfg.buf_size);
	if (type == VSOCK_TYPE_SEQPACKET)
		vsock_conn_set_seqpacket(&mc->c);
	conn_setup_tx(m, mc);
	if (conn_insert(m, mc)) {
		vsock_conn_destroy(&mc->c);
		free(mc);
		return -ENOSPC;
	}
	if (local_port)
		*local_port = port;
	vsock_expiry_connect(&m->expiry, &mc->deadline_ns);
	conn_update(mc);
	serve_rx(m);
	return 0;
}

void vsock_muxer_set_queues(struct vsock_muxer *m, struct vmio_vq *rx,
			    struct vmio_vq *tx, struct vmio_mem *mem)
{
	/* The queue stops or its memory changes while still mapped: every
	 * held chain goes back now, read or not (the driver must get all its
	 * buffers back; the host reads what was sent unless the guest writes
	 * it meanwhile). */
	if (m->tx && m->tx != tx && m->holders.list &&
	    hold_release_all(m, true))
		vmio_vq_flush_and_notify(m->tx);
	/* A queue that stops or comes back starts with no window open. */
	if (m->rx != rx)
		vmio_poll_window_end(&m->rx_poll);
	if (m->tx != tx)
		vmio_poll_window_end(&m->tx_poll);
	m->rx = rx;
	m->tx = tx;
	m->mem = mem;
}

/* The router refuses sibling packets this VM cannot take. */
static void tell_router(struct vsock_muxer *m)
{
	if (m->cfg.router)
		vsock_router_set_vm_state(m->cfg.router, m->cfg.vm_index,
					  m->attached, m->types);
}

void vsock_muxer_set_types(struct vsock_muxer *m, unsigned types)
{
	m->types = types;
	tell_router(m);
}

void vsock_muxer_set_mergeable(struct vsock_muxer *m, bool on)
{
	m->mrg = on;
}

const struct vsock_vm_stats *vsock_muxer_stats(const struct vsock_muxer *m)
{
	return &m->stats;
}

void vsock_muxer_reset(struct vsock_muxer *m)
{
	vsock_vm_stats_log(&m->stats, m->cfg.guest_cid);
	/* The rings are gone with the guest: held chains are not pushed. */
	m->rx = m->tx = NULL;
	m->mem = NULL;
	while (m->all)
		conn_free(m->all);
	if (m->cfg.router)
		vsock_router_vm_reset(m->cfg.router, m->cfg.vm_index);
	vsock_rx_sched_reset(&m->rxs);
	vsock_rstq_clear(&m->rstq);
	m->tx_stalled = false;
	m->types = VSOCK_TYPES_STREAM;
	m->mrg = false;
	tell_router(m);
	vsock_expiry_run(&m->expiry, false);
}

void vsock_muxer_set_attached(struct vsock_muxer *m, bool attached)
{
	m->attached = attached;
	tell_router(m);
}

struct vsock_muxer *vsock_muxer_new(struct vmio_loop *loop,
				    const struct vsock_muxer_config *cfg)
{
	struct vsock_muxer *m = calloc(1, sizeof(*m));

	if (!m)
		return NULL;
	m->loop = loop;
	m->cfg = *cfg;
	/* From here on, what each connection is given. */
	if (!m->cfg.rx_pkt_overhead)
		m->cfg.rx_pkt_overhead = VSOCK_BACKLOG_OVERHEAD_DEFAULT;
	else if (m->cfg.rx_pkt_overhead == VSOCK_MUX_NO_PACKET_BOUND)
		m->cfg.rx_pkt_overhead = 0;
	m->types = VSOCK_TYPES_STREAM;
	m->rl = (struct vmio_ratelimit)VMIO_RATELIMIT_INIT(10);
	vsock_holders_init(&m->holders, loop,
			   !cfg->tx_hold_max ? VSOCK_MUX_TX_HOLD_DEFAULT
			   : cfg->tx_hold_max > VSOCK_MUX_TX_HOLD_MAX
				   ? VSOCK_MUX_TX_HOLD_MAX
				   : cfg->tx_hold_max);
	if (!cfg->tx_copy) {
		const char *why;

		/* Without a pipe, the copy path (it always works). */
		if (vsock_splice_supported(&why))
			m->splice = vsock_splice_new();
	}
	m->uds_path = strdup(cfg->uds_path ? cfg->uds_path : "");
	m->cfg.uds_path = m->uds_path;
	if (!m->uds_path || vsock_table_init(&m->table, cfg->max_conns))
		goto fail;
	if (cfg->port_first || cfg->port_last)
		vsock_table_set_ports(&m->table, cfg->port_first,
				      cfg->port_last);
	vmio_defer_init(&m->tx_again, loop, tx_again_cb, m);
	vmio_defer_init(&m->rx_again, loop, rx_again_cb, m);
	vmio_poll_window_init(&m->rx_poll, cfg->poll_ns);
	vmio_poll_window_init(&m->tx_poll, cfg->poll_ns);
	if (vsock_expiry_init(&m->expiry, loop, cfg->connect_timeout_ms,
			      timer_cb, m))
		goto fail;
	if (cfg->router) {
		vsock_router_set_vm(cfg->router, cfg->vm_index, cfg->guest_cid,
				    &m->rx_again);
		tell_router(m);
	}
	return m;
fail:
	vsock_muxer_free(m);
	return NULL;
}

void vsock_muxer_free(struct vsock_muxer *m)
{
	if (!m)
		return;
	m->rx = m->tx = NULL; /* the queues may be gone already */
	while (m->all)
		conn_free(m->all);
	vsock_expiry_fini(&m->expiry);
	if (m->cfg.router)
		vsock_router_set_vm(m->cfg.router, m->cfg.vm_index,
				    m->cfg.guest_cid, NULL);
	vmio_defer_cancel(&m->tx_again);
	vmio_defer_cancel(&m->rx_again);
	vsock_table_release(&m->table);
	vsock_splice_free(m->splice);
	free(m->uds_path);
	free(m);
}

/* ---- Counters ----------------------------------------------------------- */

void vsock_muxer_write_stats(const struct vsock_muxer *m,
			     struct vmio_json *j)
{
	struct vsock_conn_stats all = m->stats.ended;
	unsigned live = 0;

	for (const struct mux_conn *mc = m->all; mc; mc = mc->all_next) {
		vsock_conn_stats_add(&all, &mc->c.stats);
		live++;
	}
	vsock_vm_stats_write(&m->stats, live, &all, j);
	vmio_json_key(j, "connections");
	vmio_json_array_begin(j);
	for (const struct mux_conn *mc = m->all; mc; mc = mc->all_next)
		vsock_conn_write_doc(&mc->c, m->uds_path, j);
	vmio_json_array_end(j);
}
