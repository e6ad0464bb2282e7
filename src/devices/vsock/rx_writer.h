/* The rx writer: one packet for the guest, whatever its source, into the
 * rx buffers the guest posted, in the layout it negotiated (mrg_rx.h).
 * The plain layout is the one-buffer case of the mergeable one, so one
 * writer serves both:
 *
 *   the first buffer (popped by the caller, who also decides the source,
 *   rx_sched.h) starts a view; in the mergeable layout more are popped
 *   behind it until the view holds the whole packet; the source writes
 *   into the view; the buffers the packet reached are pushed used, the
 *   rest given back.
 *
 * What a source may do when buffers run short differs: a packet that must
 * go whole (an RST, a sibling's) waits for more buffers, and is cut only
 * when even VSOCK_RX_WRITER_BUFS could never hold it; connection data is
 * read to the room there is. Host data into plain buffers is the one
 * exception to "one packet": a batch of buffers filled from one host read,
 * each buffer a packet of its own (vsock_conn_to_guest).
 *
 * A buffer the layout cannot use (readable bytes in it, no room for a
 * header, too many descriptors) goes back used and empty, as net's rx
 * does (architecture.md section 6): the guest loses that buffer, the
 * queue goes on, and the packet waits for the next. Only a malformed
 * ring breaks the queue.
 *
 * No buffer is held between calls. */
#ifndef VMIO_DEVICES_VSOCK_RX_WRITER_H
#define VMIO_DEVICES_VSOCK_RX_WRITER_H

#include <stdbool.h>
#include <stdint.h>

#include "devices/vsock/mrg_rx.h"
#include "virtio/memory.h"
#include "virtio/virtqueue.h"

/* Buffers one call takes at most: the 17 one 64 KiB mergeable packet
 * spans in 4 KiB buffers, and enough to cover VSOCK_CONN_TO_GUEST_BATCH_BYTES
 * of host data in the 4 KiB plain buffers a Linux guest posts (4052
 * payload bytes each after the header, so 16 take 63.3 KiB). Each is a
 * vmio_chain of 16 KiB kept in the writer. */
#define VSOCK_RX_WRITER_BUFS VSOCK_MRG_MAX_BUFS

/* One packet's source, as the writer sees it. */
struct vsock_rx_source_ops {
	/* Payload bytes the packet carries whole (0: a header alone). */
	uint32_t need;
	/* Connection data: may be written to the room there is. */
	bool may_cut;
	/* Writes the packet into view (header at 0, payload at 44) and
	 * returns the bytes written, or 0 for nothing (the buffers go back
	 * unused; for a source that must go whole, the queue breaks). Only
	 * called once the buffers are there: the source's turn is taken. */
	uint32_t (*fill)(void *opaque, const struct vmio_chain *view);
	/* Plain layout, host data (batch > 0: the payload bytes one read
	 * may bring): fills bufs[0..n) as up to n packets, returns how
	 * many, used[i] the bytes written to bufs[i]. */
	uint32_t batch;
	unsigned (*fill_batch)(void *opaque,
			       const struct vmio_chain *const bufs[],
			       unsigned n, uint32_t used[]);
	void *opaque;
};

/* Large: one iovec array per buffer, never on the stack. */
struct vsock_rx_writer {
	struct vmio_vq *vq;
	struct vmio_mem *mem;
	bool mergeable;
	struct vmio_chain bufs[VSOCK_RX_WRITER_BUFS];
	const struct vmio_chain *bufp[VSOCK_RX_WRITER_BUFS];
	uint32_t used[VSOCK_RX_WRITER_BUFS];
	struct vsock_mrg view;
	/* Buffers given back empty so far, and why the last one was, for
	 * the caller to count and log (the writer has no rate limiter). */
	uint64_t unusable;
	const char *unusable_why;
	/* Bytes pushed used so far (headers included), for the caller to
	 * decide when the guest should hear of them. */
	uint64_t pushed_bytes;
};

/* Why vsock_rx_write wrote nothing and the caller should stop serving. */
#define VSOCK_RX_STOP -1  /* waiting for buffers, or the queue broke */
#define VSOCK_RX_AGAIN -2 /* the budget is spent: serve again next turn */

/* Pops the first buffer of a packet into bufs[0]: 1, 0 when the guest
 * posted none, or < 0 (a broken queue). */
int vsock_rx_pop_first(struct vsock_rx_writer *w);

/* One packet from src, bufs[0] popped. *budget (buffers this callback
 * may still pop) pays for the buffers behind the first. Returns the
 * buffers pushed used (0: none, go on; buffers given back empty count),
 * VSOCK_RX_STOP or VSOCK_RX_AGAIN. */
int vsock_rx_write(struct vsock_rx_writer *w,
		   const struct vsock_rx_source_ops *src, unsigned *budget);

#endif
