/* The multiplexer's connection registry; see muxer_conns.h. */
#include "devices/vsock/muxer_conns.h"

#include <stdlib.h>

#include "devices/vsock/conn_from_guest.h"
#include "devices/vsock/conn_to_guest.h"

static void unwatch(struct vsock_muxer *m, struct mux_conn *mc)
{
	if (mc->watched_fd >= 0)
		vmio_loop_remove(m->loop, mc->watched_fd);
	mc->watched_fd = -1;
	mc->watched = 0;
}

void mux_conn_free(struct mux_conn *mc)
{
	struct vsock_muxer *m = mc->m;

	mux_hold_release(mc, true);
	vsock_holders_released(&m->holders, &mc->holder, 0, true);
	vsock_holder_unwatch(&m->holders, &mc->holder);
	vsock_rx_sched_remove(&m->rxs, &mc->rx_link);
	vsock_table_remove(&m->table, &mc->key);
	vsock_journal_remove(&m->journal, mc->journal_slot);
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

/* Brings the muxer's view of a connection in line with its state; called
 * after every call into it. May free it. */
void mux_conn_update(struct mux_conn *mc)
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
		mux_hold_release(mc, true);
		vsock_holder_unwatch(&m->holders, &mc->holder);
	}
	if (vsock_conn_is_dead(c)) {
		mux_conn_free(mc);
		return;
	}
	if (m->host_paused) {
		unwatch(m, mc);
		return;
	}
	/* A watch with no events still reports HUP and ERR, level
	 * triggered: a closed peer would spin the loop. So 0 means no
	 * watch at all. */
	ev = vsock_conn_epoll_events(c);
	if (!ev) {
		unwatch(m, mc);
	} else if (mc->watched_fd < 0) {
		if (vmio_loop_add(m->loop, c->fd, ev, m->conn_io_cb, mc) == 0) {
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

struct mux_conn *mux_conn_new(struct vsock_muxer *m)
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
void mux_conn_setup(struct vsock_muxer *m, struct mux_conn *mc)
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
int mux_conn_insert(struct vsock_muxer *m, struct mux_conn *mc)
{
	int rc;

	mc->key.local_port = mc->c.local_port;
	mc->key.peer_port = mc->c.peer_port;
	rc = vsock_table_insert(&m->table, &mc->key);
	if (rc)
		return rc;
	mc->journal_slot = vsock_journal_add(&m->journal, mc->key.local_port,
					     mc->key.peer_port, mc->c.type);
	mc->all_next = m->all;
	if (m->all)
		m->all->all_prev = mc;
	m->all = mc;
	m->stats.connections_opened++;
	return 0;
}

/* ---- Held tx chains (tx_splice.h) ------------------------------------- */

/* A connection just kept a chain: the tick looks at it too, as a wake-up
 * of the watch may be missed. */
void mux_hold_note(struct vsock_muxer *m, struct mux_conn *mc)
{
	vsock_holders_add(&m->holders, &mc->holder, mc->c.fd,
			  m->hold_wake_cb, mc, &m->stats);
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
void mux_hold_release(struct mux_conn *mc, bool force)
{
	struct vsock_muxer *m = mc->m;

	if (mc->c.held.n && hold_release_one(mc, force) && m->tx)
		vmio_vq_flush_and_notify(m->tx);
}

/* Every holder; returns the chains pushed (not flushed). */
unsigned mux_hold_release_all(struct vsock_muxer *m, bool force)
{
	struct vsock_holder *ho, *next;
	unsigned n = 0;

	for (ho = m->holders.list; ho; ho = next) {
		struct mux_conn *mc = holder_conn(ho);

		next = ho->next;
		n += hold_release_one(mc, force);
		mux_conn_update(mc);
	}
	return n;
}
