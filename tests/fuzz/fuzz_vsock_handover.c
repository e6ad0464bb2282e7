/* Fuzzes the successor's side of a vsock connection's hand-over
 * (conn_handover.h): the record comes from another process, maybe
 * another release, and is read as hostile input.
 *
 * Input: [0] bit 0: the successor runs with the packet bound on (the
 * default overhead) or off; the rest is the record.
 * Invariants checked:
 *   - a refused record leaves nothing behind (ASan's leak check)
 *   - an accepted one is canonical after one round: saved and restored
 *     again it is accepted, with the same fd index, and saving that
 *     gives the same bytes
 *   - an accepted connection answers every question the multiplexer
 *     asks of it (what it sends next, its epoll events, its tick)
 *     without a fault, and is destroyed cleanly */
#include <assert.h>
#include <string.h>

#include "devices/vsock/conn_handover.h"
#include "devices/vsock/conn_to_guest.h"
#include "devices/vsock/guest_backlog.h"
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct vmio_wire_writer w1, w2;
	struct vmio_wire_reader r;
	struct vsock_conn c, c2;
	uint32_t overhead, idx, idx2;

	if (!size)
		return 0;
	overhead = data[0] & 1 ? VSOCK_BACKLOG_OVERHEAD_DEFAULT : 0;
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
