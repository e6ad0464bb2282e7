/* The vsock multiplexer; see muxer.h, and muxer_state.h for its files. */
#include "devices/vsock/muxer.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "devices/vsock/conn_doc.h"
#include "devices/vsock/conn_from_guest.h"
#include "devices/vsock/conn_to_guest.h"
#include "devices/vsock/muxer_conns.h"
#include "devices/vsock/muxer_rx.h"
#include "devices/vsock/muxer_state.h"
#include "devices/vsock/muxer_tx.h"
#include "devices/vsock/router.h"
#include "util/json.h"

void vsock_muxer_kick(struct vsock_muxer *m, const struct vmio_vq *vq)
{
	if (!vq)
		return;
	if (vq == m->tx)
		mux_serve_tx(m);
	else if (vq == m->rx)
		mux_serve_rx(m);
}

/* ---- Event callbacks -------------------------------------------------- */

/* A host socket's events (the registry watches it as the connection
 * asks): what the connection takes from them may give rx work. */
static void conn_io_cb(void *opaque, int fd, uint32_t events)
{
	struct mux_conn *mc = opaque;
	struct vsock_muxer *m = mc->m;

	/* Paused (muxer_handover.h): not acted on, and no longer watched. */
	if (m->host_paused) {
		mux_conn_update(mc);
		return;
	}
	if (events & EPOLLOUT)
		vsock_conn_flush(&mc->c);
	/* HUP and ERR are read too: the read reports EOF or the error. */
	if (events & (EPOLLIN | EPOLLHUP | EPOLLERR))
		vsock_conn_host_readable(&mc->c, events & (EPOLLHUP | EPOLLRDHUP |
							   EPOLLERR));
	mux_conn_update(mc);
	mux_serve_rx(m);
}

/* The host read through some held chains (tx_splice.h). */
static void hold_wake_cb(void *opaque, int fd, uint32_t events)
{
	struct mux_conn *mc = opaque;
	struct vsock_muxer *m = mc->m;

	(void)fd;
	(void)events;
	m->stats.tx_hold_wakes++;
	mux_hold_release(mc, false);
	mux_conn_update(mc);
	mux_serve_rx(m);
}

static void tx_again_cb(void *opaque)
{
	struct vsock_muxer *m = opaque;

	/* Serves rx too: a turn of rx asked for meanwhile is not needed. */
	vmio_defer_cancel(&m->rx_again);
	mux_serve_tx(m);
}

static void rx_again_cb(void *opaque)
{
	mux_serve_rx(opaque);
}

/* A connection whose deadline passed (expiry.h). Returns false if it
 * must wait for the next tick (no room for its RST). */
static bool conn_expire(struct vsock_muxer *m, struct mux_conn *mc)
{
	struct vsock_hdr r;

	if (vsock_expiry_rst(&mc->c, &r) && !vsock_rstq_push(&m->rstq, &r))
		return false;
	vsock_expiry_log(&m->expiry, &m->rl, &mc->c);
	mux_conn_free(mc);
	return true;
}

static void timer_cb(void *opaque)
{
	struct vsock_muxer *m = opaque;
	struct mux_conn *mc, *next;
	uint64_t now = vsock_expiry_now(&m->expiry);
	bool waiting = false;

	if (m->host_paused)
		return;
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
	if (m->holders.list && mux_hold_release_all(m, false) && m->tx)
		vmio_vq_flush_and_notify(m->tx);
	if (!waiting && !m->holders.list)
		vsock_expiry_run(&m->expiry, false);
	mux_serve_rx(m);
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
	mc = mux_conn_new(m);
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
	mux_conn_setup(m, mc);
	if (mux_conn_insert(m, mc)) {
		vsock_conn_destroy(&mc->c);
		free(mc);
		return -ENOSPC;
	}
	if (local_port)
		*local_port = port;
	vsock_expiry_connect(&m->expiry, &mc->deadline_ns);
	mux_conn_update(mc);
	mux_serve_rx(m);
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
	    mux_hold_release_all(m, true))
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
		mux_conn_free(m->all);
	if (m->cfg.router)
		vsock_router_vm_reset(m->cfg.router, m->cfg.vm_index);
	vsock_rx_sched_reset(&m->rxs);
	vsock_rstq_clear(&m->rstq);
	free(m->owed);
	m->owed = NULL;
	m->nowed = m->owed_next = 0;
	m->tx_stalled = false;
	m->types = VSOCK_TYPES_STREAM;
	m->mrg = false;
	tell_router(m);
	vsock_expiry_run(&m->expiry, false);
}

int vsock_muxer_journal_fd(const struct vsock_muxer *m)
{
	return m->journal.fd;
}

void vsock_muxer_let_go_journal(struct vsock_muxer *m)
{
	/* Unmapped: what the journal says is no longer this process's to
	 * change (an add or a remove after this does nothing). */
	vsock_journal_fini(&m->journal);
}

static void owe_rst(void *opaque, uint32_t local_port, uint32_t peer_port,
		    uint16_t type)
{
	struct vsock_muxer *m = opaque;

	/* Host ports count on from the dead process's: the guest may not
	 * have closed the reset socket yet when the host connects again. */
	if (local_port >= m->owed_port_max)
		m->owed_port_max = local_port;
	m->owed[m->nowed++] = (struct vsock_hdr){
		.src_cid = VSOCK_HOST_CID,
		.dst_cid = m->cfg.guest_cid,
		.src_port = local_port,
		.dst_port = peer_port,
		.type = type,
		.op = VSOCK_OP_RST,
	};
}

unsigned vsock_muxer_owe_rsts(struct vsock_muxer *m, int journal_fd)
{
	unsigned max = m->cfg.max_conns, n;

	free(m->owed);
	m->nowed = m->owed_next = 0;
	m->owed = calloc(max ? max : 1, sizeof(*m->owed));
	if (!m->owed)
		return 0;
	m->owed_port_max = 0;
	n = vsock_journal_read(journal_fd, max, owe_rst, m);
	if (n)
		vsock_table_ports_after(&m->table, m->owed_port_max);
	m->stats.rsts_after_crash += n;
	mux_rx_owed_refill(m);
	mux_resched(m, true, false);
	return n;
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
	/* Without a journal the device works; a crash then leaves its
	 * connections to the guest's own timeouts. */
	if (vsock_journal_init(&m->journal, cfg->max_conns))
		vsock_peer_log(&m->rl, VMIO_LOG_WARN,
			       "vsock: no journal of connections (out of memory): after a crash the guest's connections are not reset");
	if (cfg->port_first || cfg->port_last)
		vsock_table_set_ports(&m->table, cfg->port_first,
				      cfg->port_last);
	m->conn_io_cb = conn_io_cb;
	m->hold_wake_cb = hold_wake_cb;
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
	/* First: what the journal says stays for the next vmio (a restart
	 * resets those connections on the guest's side). */
	vsock_muxer_let_go_journal(m);
	free(m->owed);
	while (m->all)
		mux_conn_free(m->all);
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
