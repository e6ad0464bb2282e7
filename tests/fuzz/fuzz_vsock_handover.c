/* Fuzzes the successor's side of a vsock connection's hand-over
 * (conn_handover.h): the record comes from another process, maybe
 * another release, and is read as hostile input.
 *
 * Input: [0] bit 0: the successor runs with the packet bound on (the
 * default overhead) or off; bit 1: the record is a whole VM's
 * (muxer_handover.h), read with four host sockets beside it, else one
 * connection's; bit 2 (before bit 1): the record is the sibling
 * router's (router_handover.h), for three VMs of which 1 is linked to 0
 * and 2; the rest is the record.
 * Invariants checked:
 *   - a refused record leaves nothing behind (ASan's leak check)
 *   - an accepted one is canonical after one round: saved and restored
 *     again it is accepted, with the same fd index, and saving that
 *     gives the same bytes
 *   - an accepted connection answers every question the multiplexer
 *     asks of it (what it sends next, its epoll events, its tick)
 *     without a fault, and is destroyed cleanly
 *   - a router's record: a refused one leaves what it took to be freed
 *     with the router; an accepted one saves to a record of the same
 *     length (flows come out in hash order) that a fresh router takes
 *   - a VM's record: each host socket is taken at most once, and every
 *     one is either taken or left to the caller, refused or not; an
 *     accepted one saves again to a record that restores */
#include <assert.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "devices/vsock/conn_handover.h"
#include "devices/vsock/conn_to_guest.h"
#include "devices/vsock/guest_backlog.h"
#include "devices/vsock/muxer_handover.h"
#include "devices/vsock/router_handover.h"
#include "fuzz.h"

#define GUEST_CID 3u
#define BUF_SIZE 65536u

static void save(const struct vsock_conn *c, uint32_t idx,
		 struct vmio_wire_writer *w)
{
	vmio_wire_writer_init(w, 0);
	vsock_conn_save(c, idx, w);
	assert(!w->failed);
}

#define NFDS 4

static struct vsock_muxer *fresh_muxer(struct vmio_loop *loop, bool bound)
{
	const struct vsock_muxer_config cfg = {
		.guest_cid = 7,
		.buf_size = BUF_SIZE,
		.max_conns = 16,
		.connect_timeout_ms = 2000,
		.tx_copy = true,
		.rx_pkt_overhead = bound ? 0 : VSOCK_MUX_NO_PACKET_BOUND,
	};
	struct vsock_muxer *m = vsock_muxer_new(loop, &cfg);

	assert(m);
	return m;
}

static void fuzz_vm(const uint8_t *rec, size_t len, bool bound)
{
	static struct vmio_loop *loop;
	struct vsock_muxer *m, *m2;
	struct vmio_wire_writer w;
	struct vmio_wire_reader r;
	int fds[NFDS], peers[NFDS], saved[NFDS], fds2[NFDS];
	unsigned nsaved = 0;
	const char *why;

	if (!loop)
		loop = vmio_loop_new();
	assert(loop);
	for (int i = 0; i < NFDS; i++) {
		int sv[2];

		assert(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
		fds[i] = sv[0];
		peers[i] = sv[1];
	}
	m = fresh_muxer(loop, bound);
	vmio_wire_reader_init(&r, rec, len);
	if (!vsock_muxer_restore(m, &r, fds, NFDS)) {
		vmio_wire_writer_init(&w, 0);
		assert(vsock_muxer_save(m, &w, saved, NFDS, &nsaved, &why) == 0);
		for (unsigned i = 0; i < nsaved; i++)
			fds2[i] = dup(saved[i]);
		m2 = fresh_muxer(loop, bound);
		vmio_wire_reader_init(&r, w.buf, w.len);
		assert(vsock_muxer_restore(m2, &r, fds2, nsaved) == 0);
		for (unsigned i = 0; i < nsaved; i++)
			assert(fds2[i] == -1);
		vsock_muxer_free(m2);
		vmio_wire_writer_fini(&w);
	}
	vsock_muxer_free(m);
	/* What no connection took is still the caller's, open. */
	for (int i = 0; i < NFDS; i++) {
		if (fds[i] >= 0)
			assert(close(fds[i]) == 0);
		close(peers[i]);
	}
}

static struct vsock_router *fresh_router(void)
{
	struct vsock_router *r = vsock_router_new(3, 8);

	assert(r);
	for (unsigned i = 0; i < 3; i++)
		vsock_router_set_vm(r, i, GUEST_CID + i, NULL);
	vsock_router_link(r, 0, 1);
	vsock_router_link(r, 1, 2);
	return r;
}

static void fuzz_router(const uint8_t *rec, size_t len)
{
	struct vsock_router *r = fresh_router(), *again;
	struct vmio_wire_writer w1, w2;
	struct vmio_wire_reader rd;

	vmio_wire_reader_init(&rd, rec, len);
	if (vsock_router_restore(r, &rd)) {
		vsock_router_free(r);
		return;
	}
	vmio_wire_writer_init(&w1, 0);
	vsock_router_save(r, &w1);
	assert(!w1.failed && w1.len == len);
	again = fresh_router();
	vmio_wire_reader_init(&rd, w1.buf, w1.len);
	assert(vsock_router_restore(again, &rd) == 0);
	vmio_wire_writer_init(&w2, 0);
	vsock_router_save(again, &w2);
	assert(w2.len == w1.len);
	vmio_wire_writer_fini(&w1);
	vmio_wire_writer_fini(&w2);
	vsock_router_free(again);
	vsock_router_free(r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct vmio_wire_writer w1, w2;
	struct vmio_wire_reader r;
	struct vsock_conn c, c2;
	uint32_t overhead, idx, idx2;

	if (!size)
		return 0;
	overhead = data[0] & 1 ? VSOCK_BACKLOG_OVERHEAD_DEFAULT : 0;
	if (data[0] & 4) {
		fuzz_router(data + 1, size - 1);
		return 0;
	}
	if (data[0] & 2) {
		fuzz_vm(data + 1, size - 1, data[0] & 1);
		return 0;
	}
	vmio_wire_reader_init(&r, data + 1, size - 1);
	if (vsock_conn_restore(&c, GUEST_CID, BUF_SIZE, overhead, &r, &idx))
		return 0;
	assert(c.fd == -1);
	save(&c, idx, &w1);
	vmio_wire_reader_init(&r, w1.buf, w1.len);
	assert(vsock_conn_restore(&c2, GUEST_CID, BUF_SIZE, overhead, &r,
				  &idx2) == 0);
	assert(idx2 == idx && r.left == 0);
	save(&c2, idx2, &w2);
	assert(w2.len == w1.len && !memcmp(w1.buf, w2.buf, w1.len));
	vmio_wire_writer_fini(&w1);
	vmio_wire_writer_fini(&w2);
	vsock_conn_destroy(&c2);

	(void)vsock_conn_pending_to_guest(&c);
	(void)vsock_conn_epoll_events(&c);
	if (vsock_conn_wants_tick(&c))
		vsock_conn_tick(&c);
	vsock_conn_destroy(&c);
	return 0;
}
