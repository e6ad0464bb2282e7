/* The multiplexer's tx queue; see muxer_tx.h. */
#include "devices/vsock/muxer_tx.h"

#include <inttypes.h>
#include <stdlib.h>
#include <unistd.h>

#include "devices/vsock/conn_from_guest.h"
#include "devices/vsock/host_service.h"
#include "devices/vsock/muxer_conns.h"
#include "devices/vsock/muxer_rx.h"
#include "devices/vsock/packet.h"
#include "devices/vsock/router.h"


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
	mc = mux_conn_new(m);
	if (!mc) {
		close(fd);
		refuse(m, h);
		return;
	}
	vsock_conn_init_peer(&mc->c, m->cfg.guest_cid, h, fd, m->cfg.buf_size);
	mux_conn_setup(m, mc);
	if (mux_conn_insert(m, mc)) {
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
	mux_conn_update(mc);
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
			mux_conn_free(mc);
		reply_rst(m, h);
		return false;
	}
	if (mc) {
		bool held = vsock_conn_from_guest(&mc->c, &pkt, ch,
						mux_hold_room(m, mc));

		if (held)
			mux_hold_note(m, mc);
		mux_conn_update(mc);
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

void mux_serve_tx(struct vsock_muxer *m)
{
	struct vmio_vq *tx = m->tx;
	unsigned budget = VSOCK_MUX_BATCH, pushed = 0;

	if (!tx || !m->mem)
		return;
	pushed = mux_hold_release_all(m, false);
	vmio_vq_enable_kicks(tx, false);
	for (;;) {
		int got;

		/* Each packet may need one RST: pop only with room for it. */
		if (vsock_rstq_full(&m->rstq)) {
			m->tx_stalled = true;
			break;
		}
		if (!budget--) {
			mux_resched(m, false, true);
			break;
		}
		got = vmio_vq_pop(tx, m->mem, &m->txc);
		if (got < 0)
			break;
		if (!got) {
			if (vmio_poll_window_dry_now(&m->tx_poll)) {
				mux_resched(m, false, true);
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
	mux_serve_rx(m);
}
