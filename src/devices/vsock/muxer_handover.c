/* A multiplexer's hand-over record; see muxer_handover.h.
 *
 * Layout (the version is the whole hand-over record's):
 *   u64 guest CID, u32 socket types, u8 attached, u8 mergeable,
 *   u8 tx stalled on a full RST queue
 *   u32 RSTs owed, each a 44-byte header as the guest will get it
 *   u32 the next host-side port to try (conn_table.h)
 *   u32 connections, each u64 ms to its deadline (UINT64_MAX: none)
 *       and its record (conn_handover.h)
 *   the VM's counters (util/wire.h's counters: struct vsock_vm_stats) */
#include "devices/vsock/muxer_handover.h"

#include <stdlib.h>

#include "devices/vsock/conn_handover.h"
#include "devices/vsock/muxer_conns.h"
#include "devices/vsock/muxer_state.h"
#include "devices/vsock/router.h"

#define NO_DEADLINE UINT64_MAX
#define VM_STATS_N (sizeof(struct vsock_vm_stats) / sizeof(uint64_t))
#define VM_STATS_MAX 256u
#define NS_PER_MS 1000000ull

void vsock_muxer_pause_host(struct vsock_muxer *m, bool paused)
{
	m->host_paused = paused;
	/* A pause removes no watch: a socket that reports while paused is
	 * unwatched then (conn_io_cb). Most connections of a VM are idle,
	 * so the pause, which the guests wait through, costs no system
	 * call for each of them. */
	if (paused)
		return;
	for (struct mux_conn *mc = m->all, *next; mc; mc = next) {
		next = mc->all_next;
		mux_conn_update(mc);
	}
}

const char *vsock_muxer_handover_refusal(const struct vsock_muxer *m)
{
	if (m->rx || m->tx)
		return "its queues still run";
	if (!m->host_paused)
		return "its host sockets are still watched";
	for (const struct mux_conn *mc = m->all; mc; mc = mc->all_next) {
		const char *why = vsock_conn_handover_refusal(&mc->c);

		if (why)
			return why;
	}
	return NULL;
}

static void save_rsts(const struct vsock_rstq *q, struct vmio_wire_writer *w)
{
	uint8_t wire[VSOCK_HDR_SIZE];

	vmio_wire_put_u32(w, q->len);
	for (unsigned i = 0; i < q->len; i++) {
		vsock_hdr_encode(&q->q[(q->head + i) % VSOCK_RSTQ_SIZE], wire);
		vmio_wire_put_bytes(w, wire, sizeof(wire));
	}
}

/* Time left to a deadline, so the successor's clock can start it again. */
static uint64_t ms_left(const struct vsock_muxer *m, uint64_t deadline_ns)
{
	uint64_t now = vsock_expiry_now(&m->expiry);

	if (!deadline_ns)
		return NO_DEADLINE;
	return deadline_ns > now ? (deadline_ns - now) / NS_PER_MS : 0;
}

int vsock_muxer_save(const struct vsock_muxer *m, struct vmio_wire_writer *w,
		     int fds[], unsigned max_fds, unsigned *nfds,
		     const char **why)
{
	uint32_t n = 0;

	*why = vsock_muxer_handover_refusal(m);
	if (*why)
		return -1;
	const struct mux_conn *last = NULL;

	for (const struct mux_conn *mc = m->all; mc; mc = mc->all_next) {
		last = mc;
		n++;
	}
	vmio_wire_put_u64(w, m->cfg.guest_cid);
	vmio_wire_put_u32(w, m->types);
	vmio_wire_put_u8(w, m->attached);
	vmio_wire_put_u8(w, m->mrg);
	vmio_wire_put_u8(w, m->tx_stalled);
	save_rsts(&m->rstq, w);
	vmio_wire_put_u32(w, m->table.next_port);
	vmio_wire_put_u32(w, n);
	/* Oldest first: each restored one goes in front, so the successor's
	 * list (and document) comes out in the same order. */
	for (const struct mux_conn *mc = last; mc; mc = mc->all_prev) {
		uint32_t idx = VSOCK_HANDOVER_NO_FD;

		if (mc->c.fd >= 0) {
			if (*nfds >= max_fds) {
				*why = "more host sockets than the hand-over "
				       "carries";
				return -1;
			}
			idx = *nfds;
			fds[(*nfds)++] = mc->c.fd;
		}
		vmio_wire_put_u64(w, ms_left(m, mc->deadline_ns));
		vsock_conn_save(&mc->c, idx, w);
	}
	vmio_wire_put_counters(w, (const uint64_t *)&m->stats, VM_STATS_N);
	return 0;
}

/* ---- Taking it back -------------------------------------------------- */

/* An RST the device owes the guest: ours to the guest's CID, or the
 * record is not one this vmio wrote. */
static void restore_rsts(struct vsock_muxer *m, struct vmio_wire_reader *r)
{
	uint32_t n = vmio_wire_get_count(r, VSOCK_HDR_SIZE);

	if (n > VSOCK_RSTQ_SIZE) {
		vmio_wire_fail(r, "more RSTs than the queue holds");
		return;
	}
	for (uint32_t i = 0; i < n && vmio_wire_ok(r); i++) {
		const uint8_t *wire = vmio_wire_get_bytes(r, VSOCK_HDR_SIZE);
		struct vsock_hdr h;

		if (!wire)
			return;
		vsock_hdr_decode(wire, &h);
		if (h.op != VSOCK_OP_RST || h.src_cid != VSOCK_HOST_CID ||
		    h.dst_cid != m->cfg.guest_cid || h.len) {
			vmio_wire_fail(r, "an RST this vmio would not send");
			return;
		}
		vsock_rstq_push(&m->rstq, &h);
	}
}

/* One connection, into the table, its descriptor taken from fds. */
static void restore_conn(struct vsock_muxer *m, struct vmio_wire_reader *r,
			 int fds[], unsigned nfds)
{
	uint64_t left = vmio_wire_get_u64(r);
	struct mux_conn *mc;
	uint32_t idx;

	if (!vmio_wire_ok(r))
		return;
	mc = mux_conn_new(m);
	if (!mc) {
		vmio_wire_fail(r, "out of memory");
		return;
	}
	if (vsock_conn_restore(&mc->c, m->cfg.guest_cid, m->cfg.buf_size,
			       m->cfg.rx_pkt_overhead, r, &idx)) {
		free(mc);
		return;
	}
	if (idx != VSOCK_HANDOVER_NO_FD && (idx >= nfds || fds[idx] < 0)) {
		vmio_wire_fail(r, "a host socket the hand-over did not carry, "
				  "or one taken twice");
		vsock_conn_destroy(&mc->c);
		free(mc);
		return;
	}
	if (idx != VSOCK_HANDOVER_NO_FD) {
		mc->c.fd = fds[idx];
		fds[idx] = -1;
	}
	mux_conn_setup(m, mc);
	if (mux_conn_insert(m, mc)) {
		vmio_wire_fail(r, "two connections on one port pair, or more "
				  "than --max-connections");
		vsock_conn_destroy(&mc->c);
		free(mc);
		return;
	}
	if (left != NO_DEADLINE) {
		mc->deadline_ns = vsock_expiry_now(&m->expiry) +
				  (left < UINT32_MAX ? left : UINT32_MAX) *
					  NS_PER_MS;
		vsock_expiry_run(&m->expiry, true);
	}
}

/* The connections made so far go, with the descriptors they took. */
static void restore_undo(struct vsock_muxer *m)
{
	while (m->all)
		mux_conn_free(m->all);
	m->stats = (struct vsock_vm_stats){ 0 };
	vsock_rstq_clear(&m->rstq);
	m->tx_stalled = false;
}

int vsock_muxer_restore(struct vsock_muxer *m, struct vmio_wire_reader *r,
			int fds[], unsigned nfds)
{
	uint64_t cid = vmio_wire_get_u64(r);
	uint32_t types = vmio_wire_get_u32(r), n, next_port;
	uint8_t attached = vmio_wire_get_u8(r), mrg = vmio_wire_get_u8(r);
	uint8_t stalled = vmio_wire_get_u8(r);

	if (vmio_wire_ok(r) && cid != m->cfg.guest_cid)
		vmio_wire_fail(r, "a VM of another CID");
	if (vmio_wire_ok(r) && (types & ~VSOCK_TYPES_ALL))
		vmio_wire_fail(r, "an unknown socket type");
	restore_rsts(m, r);
	next_port = vmio_wire_get_u32(r);
	n = vmio_wire_get_count(r, 8);
	if (vmio_wire_ok(r) && n > m->table.max)
		vmio_wire_fail(r, "more connections than --max-connections");
	for (uint32_t i = 0; i < n && vmio_wire_ok(r); i++)
		restore_conn(m, r, fds, nfds);
	/* The old process's counters, not those restoring made. */
	vmio_wire_get_counters(r, (uint64_t *)&m->stats, VM_STATS_N,
			       VM_STATS_MAX);
	if (!vmio_wire_ok(r)) {
		restore_undo(m);
		return -1;
	}
	m->tx_stalled = stalled != 0;
	m->mrg = mrg != 0;
	/* The allocator skips ports in use but trusts its start to be in
	 * the range (which this vmio's options may have moved). */
	if (next_port >= m->table.port_first && next_port <= m->table.port_last)
		m->table.next_port = next_port;
	vsock_muxer_set_types(m, types);
	vsock_muxer_set_attached(m, attached != 0);
	/* Paused until this process has taken over: were it refused, what
	 * it wrote to a host socket meanwhile would go out twice. */
	vsock_muxer_pause_host(m, true);
	return 0;
}
