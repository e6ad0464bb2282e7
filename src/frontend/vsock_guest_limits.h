/* What a Linux guest's vsock socket accepts from the device, and how much
 * it lets itself send, as arithmetic on one socket's counters. The
 * in-tree driver (vsock_guest.c) applies it to every socket so that a
 * test catches a device that a real guest would reset or stall, without
 * booting one. Read from net/vmw_vsock/virtio_transport_common.c.
 *
 * Receive, Linux 6.12.94 and later: an RW packet is refused when the
 * bytes held would exceed buf_alloc, or when one more queued packet, each
 * charged a fixed overhead (SKB_TRUESIZE(0): 576 bytes on x86-64), would:
 * some 455 packets for the default 256 KiB, whatever their size. The
 * check comes first; then a packet of at most GOOD_COPY_LEN bytes is
 * copied into the last queued one when that has more tailroom than the
 * packet is long and does not end a seqpacket message (EOM), and so adds
 * no packet to the queue. Linux does that for stream and seqpacket alike:
 * within a message, never across its end. A packet leaves the queue once
 * the application has read all of it. A refusal resets the connection
 * (RST to the device, ENOBUFS to the reader). Linux 6.1 checks the bytes
 * only and drops what overruns them: overhead 0 here.
 *
 * Send, Linux 6.12.69 (and 6.1 stable): "cap TX credit to local buffer
 * size": the bytes in flight never exceed min(peer buf_alloc, own
 * buf_alloc), so a device that advertises more than the guest's own
 * buffer never sees more than that outstanding, and must not wait for
 * more before it tells the guest of the room it made.
 *
 * Counters are free-running u32 stream offsets, as the credit fields are;
 * only differences are compared. */
#ifndef VMIO_FRONTEND_VSOCK_GUEST_LIMITS_H
#define VMIO_FRONTEND_VSOCK_GUEST_LIMITS_H

#include <stdbool.h>
#include <stdint.h>

/* SKB_TRUESIZE(0) on x86-64: what Linux charges each queued packet. */
#define VG_LINUX_PKT_OVERHEAD 576u
/* Packets this short are copied into the previous one when it has room. */
#define VG_LINUX_GOOD_COPY_LEN 128u

enum vg_rx_verdict {
	VG_RX_ACCEPT,
	VG_RX_OVER_BYTES,   /* held + len > buf_alloc: the device overran
			     * the credit we gave (a protocol violation) */
	VG_RX_OVER_PACKETS, /* (queued + 1) * overhead > buf_alloc: within
			     * the credit, but one packet too many */
};

/* The verdict on an RW of len bytes for a socket that holds held unread
 * bytes in queued packets, with buf_alloc its buffer; overhead 0 checks
 * the bytes only. */
enum vg_rx_verdict vg_rx_admit(unsigned queued, uint32_t held,
			       uint32_t buf_alloc, uint32_t len,
			       uint32_t overhead);

/* One queued packet: where it starts in the stream, the payload it holds
 * (packets copied into it included) and the tailroom it has left. */
struct vg_rx_pkt {
	uint32_t start;
	uint32_t len;
	uint32_t room;
	bool eom;
};

/* A socket's queue of packets received and not wholly read, oldest
 * first (a ring that grows as needed). */
struct vg_rxq {
	struct vg_rx_pkt *pkts;
	unsigned head, count, cap;
	unsigned peak;          /* the most packets it ever held */
	uint64_t coalesced;     /* packets copied into the one before */
};

/* Queues an admitted packet of len bytes starting at stream offset start
 * (the socket's rx_cnt before it), arrived in a buffer with room bytes
 * of payload space, eom if it ends a message. Returns 1 if it was copied
 * into the last queued packet, 0 if queued, -ENOMEM. */
int vg_rxq_add(struct vg_rxq *q, uint32_t start, uint32_t len,
	       uint32_t room, bool eom);
/* The application has read up to stream offset fwd_cnt: packets read
 * whole leave the queue. */
void vg_rxq_consumed(struct vg_rxq *q, uint32_t fwd_cnt);
void vg_rxq_free(struct vg_rxq *q);

/* Bytes a socket may send now: the peer's advertised buffer, capped to
 * its own when cap is set, less what is in flight (0, never negative,
 * when the peer shrank its buffer below that). */
uint32_t vg_tx_space(uint32_t peer_buf_alloc, uint32_t own_buf_alloc,
		     uint32_t tx_cnt, uint32_t peer_fwd_cnt, bool cap);

#endif
