/* Mergeable rx buffers: VIRTIO_VSOCK_F_MRG_RXBUF (feature bit 3), in the
 * layout of the 2022 virtio-spec draft. With it, every rx packet is the
 * 44-byte header, a le16 num_buffers, then the payload, written end to
 * end over num_buffers rx buffers in the order the device took them (and
 * so in the order they appear on the used ring); each buffer's used
 * length is what landed in it, and hdr.len is the whole payload. A 64 KiB
 * packet then reaches a driver that posts 4 KiB buffers as one packet over
 * 17 of them, instead of 16 packets with 16 headers and 16 credit updates.
 *
 * How the device writes one: the buffers it takes are laid end to end in
 * a view, a vmio_chain whose writable part is theirs with the two bytes
 * of num_buffers cut out, so that to the code that writes a packet the
 * view is one big rx buffer with the plain layout (header at 0, payload at
 * 44). What that code writes lands in the buffers as the draft lays it
 * out; vsock_mrg_finish then writes num_buffers and says how much each
 * buffer took. No buffer is used that the packet does not reach, and a
 * buffer may be any size: the header itself may span several.
 *
 * The plain layout (no MRG_RXBUF) is the view's one-buffer case: one rx
 * buffer per packet, no num_buffers, the used length what was written.
 * So the device writes every rx packet, of either layout, the same way:
 * begin, add, write into the view, finish. */
#ifndef VMIO_DEVICES_VSOCK_MRG_RX_H
#define VMIO_DEVICES_VSOCK_MRG_RX_H

#include <stdbool.h>
#include <stdint.h>

#include "devices/vsock/packet.h"
#include "virtio/virtqueue.h"

#define VIRTIO_VSOCK_F_MRG_RXBUF 3
/* The header and num_buffers: what precedes the payload. */
#define VSOCK_MRG_HDR_SIZE (VSOCK_HDR_SIZE + 2u)
/* Most buffers one packet spans: 64 KiB and the header in 4 KiB buffers
 * is 17; smaller ones make the packet smaller, not the list longer. */
#define VSOCK_MRG_MAX_BUFS 17

struct vsock_mrg {
	struct vmio_chain view;
	uint32_t cap[VSOCK_MRG_MAX_BUFS]; /* writable bytes of each buffer */
	unsigned n;                       /* buffers in the view */
	uint64_t room;                    /* their bytes, num_buffers's too */
	bool mergeable;                   /* false: the plain layout */
};

/* An empty view, for a packet in the mergeable layout or (false) the
 * plain one. */
void vsock_mrg_begin(struct vsock_mrg *m, bool mergeable);
/* Adds the writable part of an rx buffer (one that passed
 * vsock_pkt_check_rx_buf) after the others. False, and nothing added, if
 * the view has no room for its iovecs or is full (VSOCK_MRG_MAX_BUFS
 * buffers, or one in the plain layout). */
bool vsock_mrg_add(struct vsock_mrg *m, const struct vmio_chain *c);
/* Whether no buffer can be added. */
static inline bool vsock_mrg_full(const struct vsock_mrg *m)
{
	return m->n == (m->mergeable ? VSOCK_MRG_MAX_BUFS : 1u);
}
/* What precedes the payload: VSOCK_MRG_HDR_SIZE, or the plain header. */
static inline uint32_t vsock_mrg_hdr_size(const struct vsock_mrg *m)
{
	return m->mergeable ? VSOCK_MRG_HDR_SIZE : VSOCK_HDR_SIZE;
}
/* Payload bytes a packet in the view can carry now (0 until the header
 * and num_buffers fit). */
uint32_t vsock_mrg_payload_room(const struct vsock_mrg *m);
/* Whether the view holds a packet of payload bytes. */
static inline bool vsock_mrg_fits(const struct vsock_mrg *m, uint32_t payload)
{
	return m->room >= (uint64_t)vsock_mrg_hdr_size(m) + payload;
}

/* Once a packet of w bytes (header included, as written into the view:
 * 44 + payload) is in the view: writes num_buffers into bufs (the buffers
 * added, in order; not in the plain layout) and the used length of each
 * buffer the packet reached into used. Returns how many it reached: bufs[0..k) are pushed,
 * bufs[k..n) go back unused. 0 if w is not a whole header. */
unsigned vsock_mrg_finish(const struct vsock_mrg *m,
			  const struct vmio_chain *const bufs[], uint32_t w,
			  uint32_t used[]);

#endif
