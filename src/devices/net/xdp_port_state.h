/* The AF_XDP port's state (port_xdp.c says how the port works), as its
 * files share it: the transmit path (xdp_tx.c), the receive path
 * (xdp_rx.c), the XSKs and their modes (xdp_xsk.c), and the port with
 * its attach and detach (port_xdp.c). */
#ifndef VMIO_DEVICES_NET_XDP_PORT_STATE_H
#define VMIO_DEVICES_NET_XDP_PORT_STATE_H

#include <net/if.h>
#include <stdbool.h>
#include <stdint.h>

#include <linux/if_xdp.h>
#include <xdp/xsk.h>

#include "devices/net/held.h"
#include "devices/net/port.h"
#include "devices/net/umem_view.h"
#include "devices/net/xdp_reserve.h"
#include "event/loop.h"

#define XDP_FRAME_SIZE XSK_UMEM__DEFAULT_FRAME_SIZE
/* Entries of each ring, and frames on each side of a copy-mode UMEM. */
#define XDP_RING_SIZE 1024u
#define XDP_UMEM_FRAMES (2 * XDP_RING_SIZE)
/* Frames of our own per pair in no-copy mode: for frames the guest
 * spread over several buffers, which are copied. */
#define XDP_BOUNCE_FRAMES 64u
/* No-copy receive: guest buffers held back for frames in the reserve
 * (xdp_reserve.h), and the guest buffers on the fill ring below which
 * reserve frames join them while the guest has nothing spare. */
#define XDP_SPARE_MAX XDP_RING_SIZE
#define XDP_RESERVE_LOW 64u
/* Frames received but not reaped when a pair detaches: the RX ring's,
 * and pending frames copied into spares. */
#define XDP_LATE_MAX (XDP_RING_SIZE + XDP_SPARE_MAX)
/* Frames put on the TX ring before we kick without waiting for the
 * device's flush: the kernel's copy path sends 32 per sendto. */
#define XDP_TX_KICK_BATCH 32u
/* Tries, 10 ms apart, at binding a queue the kernel still holds. */
#define XDP_BUSY_TRIES 100u
#define XDP_BUSY_RETRY_MS 10u
/* The largest frame received without a copy: what the Linux driver's
 * smallest receive buffer takes behind the header (GOOD_PACKET_LEN, MTU
 * 1500 with a VLAN tag). A larger --mtu copies. */
#define XDP_NOCOPY_MAX_FRAME 1518u

enum xdp_qmode { Q_NONE, Q_COPY, Q_NOCOPY };

struct xdp_queue {
	struct xsk_umem *umem;
	struct xsk_socket *xsk;
	struct xsk_ring_prod fq, tx;
	struct xsk_ring_cons cq, rx;
	enum xdp_qmode mode;
	void *area;          /* copy mode: the UMEM's memory, ours */
	uint64_t bounce_off; /* no-copy: our frames in the view */
	unsigned queue_id;
	unsigned tx_unkicked; /* put on the TX ring since the last kick */
	unsigned ntx_free;
	uint64_t tx_free[XDP_RING_SIZE]; /* UMEM addresses we may send from */
	/* No-copy: guest buffers in the kernel's hands. */
	struct vnet_held rx_held, tx_held;
	/* No-copy receive's frames of our own, and the guest buffers kept
	 * back to copy them into. */
	struct vnet_reserve res;
	/* No-copy: what the device watches for frames, an epoll instance
	 * holding the XSK (-1: none), and whether the XSK is in it
	 * (rx_arm). */
	int rx_efd;
	bool rx_armed;
	bool steer_off;  /* the pair is not served: no frames to its XSK */
	/* The kernel's counters of the XSKs this pair had before this one. */
	struct xdp_statistics past;
	/* After detach: frames received but not reaped, in order. */
	struct vnet_done *late;
	unsigned nlate, late_pos;
	/* An XSK to open once the kernel lets go of the queue: the mode
	 * (Q_NONE: none pending), the tries so far, and their timer. */
	struct xdp_port *x;
	enum xdp_qmode want;
	unsigned busy_tries;
	struct vmio_timer retry;
};

struct xdp_port {
	struct vnet_port b;
	char name[IFNAMSIZ];
	size_t hdr_len;
	uint32_t xdp_flags;
	const char *xdp_mode; /* "native" or "generic" */
	bool copy;            /* no more no-copy attempts */
	bool copy_asked;      /* --xdp-copy */
	unsigned reserve;     /* reserve frames per pair (no-copy receive) */
	struct vnet_umem_view view; /* guest memory, for no-copy pairs */
	struct xdp_queue *q;  /* one per pair */
};

static inline struct xdp_port *xdp_of(struct vnet_port *b)
{
	return (struct xdp_port *)b;
}

/* No-copy geometry: a chunk ends where the largest frame would. */
static inline uint32_t nocopy_headroom(const struct xdp_port *x)
{
	return (uint32_t)(XDP_FRAME_SIZE - XDP_PACKET_HEADROOM -
			  x->b.max_frame);
}

static inline uint64_t chunk_front(const struct xdp_port *x)
{
	return XDP_PACKET_HEADROOM + nocopy_headroom(x);
}

#endif
