/* AF_XDP receive without a copy, with slack: a reserve of vmio's own
 * frames for the fill ring while the guest has no buffer there, and the
 * order of frames kept toward the guest. Pure bookkeeping and copies; the
 * XSK rings are port_xdp.c's.
 *
 * A frame lands in a guest buffer (direct: given in place) or in a reserve
 * frame (pending until it is copied into a guest buffer). Frames reach the
 * guest in the order the RX ring gave them:
 * - a pending frame is copied into a spare: a guest buffer held back from
 *   the fill ring. While reserve frames are on the fill ring or pending,
 *   a guest buffer the device posts is kept as a spare until there is one
 *   for each of them (holds_back), so that every frame in the reserve has
 *   a guest buffer to go to without waiting for another frame;
 * - a frame that landed directly in a guest buffer while frames wait in
 *   the reserve ahead of it (possible when the guest had nothing spare)
 *   swaps: the buffer takes the oldest pending frame, and its own frame
 *   goes to the end of the pending line. Nothing ever waits for a buffer
 *   that sits on the fill ring, which is what deadlocked an earlier try.
 *
 * Every table is sized at init: nframes reserve frames, spare_max spares. */
#ifndef VMIO_DEVICES_NET_XDP_RESERVE_H
#define VMIO_DEVICES_NET_XDP_RESERVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "devices/net/port.h"

/* The largest reserve, in frames per pair (4 KiB each). */
#define VNET_RESERVE_MAX 16384u

struct vnet_reserve_counters {
	uint64_t direct;    /* frames given in the guest buffer they landed in */
	uint64_t reserve;   /* frames copied from a reserve frame */
	uint64_t reordered; /* direct frames sent behind pending ones (swaps) */
	uint64_t lost;      /* pending frames with no guest buffer at detach */
	unsigned peak;      /* most reserve frames out at once */
};

struct vnet_reserve_pend {
	uint32_t frame, len;
};

struct vnet_reserve {
	unsigned nframes;
	size_t frame_size;
	/* Where the frames are (vnet_reserve_place). */
	uint8_t *mem;       /* frame 0's first byte; NULL: not placed */
	uint64_t umem;      /* frame 0's UMEM address */
	size_t data_off;    /* where the kernel writes a frame in its chunk */
	size_t hdr_len;     /* where a frame goes in a guest buffer */
	size_t max_frame;
	uint8_t *state;     /* per frame: free, on the fill ring, pending */
	uint32_t *free;     /* stack of free frames */
	unsigned nfree, nfill;
	struct vnet_reserve_pend *pend; /* ring of nframes, oldest first */
	unsigned pend_head, npend;
	struct vnet_done *spare; /* ring of spare_max */
	unsigned spare_max, spare_head, nspare;
	uint8_t *tmp;       /* frame_size bytes, for swaps */
	struct vnet_reserve_counters c;
};

/* Returns 0 or -ENOMEM (nframes 0: no reserve, everything is direct). */
int vnet_reserve_init(struct vnet_reserve *r, unsigned nframes,
		      unsigned spare_max, size_t frame_size);
void vnet_reserve_fini(struct vnet_reserve *r);

/* The frames are at mem (UMEM address umem), frame_size apart; the kernel
 * writes a frame at data_off in a frame given at its start, and the
 * guest wants it at hdr_len in its buffer. Every frame is free and no
 * spare is held (call after vnet_reserve_detach and taking the spares).
 * Returns false, and the reserve stays unused, if a max_frame frame at
 * data_off would not fit a frame. */
bool vnet_reserve_place(struct vnet_reserve *r, uint8_t *mem, uint64_t umem,
			size_t data_off, size_t hdr_len, size_t max_frame);

/* A free frame for the fill ring: its UMEM address. false if none. */
bool vnet_reserve_fill(struct vnet_reserve *r, uint64_t *addr);

enum vnet_reserve_landing {
	VNET_RESERVE_NOT_OURS, /* not a reserve frame: a guest buffer? */
	VNET_RESERVE_PENDING,  /* a frame waits in the reserve */
	VNET_RESERVE_BAD,      /* ours, but not where we put it (freed) */
};
/* An RX descriptor: the address given to the fill ring (addr), where the
 * frame is (data), and its length. */
enum vnet_reserve_landing vnet_reserve_landed(struct vnet_reserve *r,
					      uint64_t addr, uint64_t data,
					      uint32_t len);

/* Whether a guest buffer posted now is to be kept as a spare. */
static inline bool vnet_reserve_holds_back(const struct vnet_reserve *r)
{
	return r->nspare < r->npend + r->nfill;
}
/* Keeps a guest buffer (checked by the caller to take hdr_len +
 * max_frame bytes) as a spare. false if spare_max are kept. */
bool vnet_reserve_keep(struct vnet_reserve *r, void *buf, uint32_t cookie);
/* A spare beyond what the reserve may need, for the fill ring: the newest.
 * false if none. */
bool vnet_reserve_surplus(struct vnet_reserve *r, struct vnet_done *out);
/* Any spare, to give back unused (detach). false if none. */
bool vnet_reserve_take_spare(struct vnet_reserve *r, struct vnet_done *out);

/* Copies pending frames into spares, oldest into oldest, up to max, into
 * done (len: the frame's). Returns how many. */
unsigned vnet_reserve_drain(struct vnet_reserve *r, struct vnet_done *done,
			    unsigned max);
/* A frame landed in the guest buffer d (d->len its length): if frames
 * are pending, d takes the oldest instead and its own joins the line. */
void vnet_reserve_direct(struct vnet_reserve *r, struct vnet_done *d);

/* Whether free reserve frames should go onto the fill ring now, given the
 * guest buffers there (guest_fill): while the guest keeps nothing spare,
 * when the ring runs low (below low), and, once started, as frames come
 * free, until the guest is ahead again. */
bool vnet_reserve_wants_fill(const struct vnet_reserve *r,
			     unsigned guest_fill, unsigned low);

/* The XSK is gone: frames on the fill ring come back free, pending ones
 * are lost (counted). Spares stay to be taken. */
void vnet_reserve_detach(struct vnet_reserve *r);

#endif
