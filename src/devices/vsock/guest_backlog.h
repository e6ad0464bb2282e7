/* The data packets a guest holds unread, as far as its fwd_cnt tells us,
 * and how many more it will take.
 *
 * The credit protocol counts bytes only, but a Linux guest also bounds the
 * packets a socket keeps queued: from 6.12.94 it refuses a packet, and
 * resets the connection (the reader gets ENOBUFS), once
 * (queued packets + 1) x SKB_TRUESIZE(0) exceeds its buf_alloc, whatever
 * the packets' sizes. SKB_TRUESIZE(0) is 576 bytes on x86-64, so a
 * default 256 KiB socket holds some 455 packets: 455 host writes of 300
 * bytes, a tenth of the byte credit. A device that sends within the byte
 * credit alone loses such connections. So every RW packet we send is
 * remembered by where it ends in our tx_cnt, and forgotten when the
 * guest's fwd_cnt passes that point; the rest is what the guest holds.
 * A packet it has partly read still counts, as it does for Linux.
 *
 * The cost per packet is a parameter (--rx-packet-overhead): larger than
 * 576 leaves room for kernels whose sk_buff is larger (128-byte cache
 * lines, debug builds); 0 turns the packet bound off.
 *
 * Memory: one u32 per packet the guest holds, grown as needed up to what
 * the bound lets it hold (at most VSOCK_BACKLOG_MAX entries). */
#ifndef VMIO_DEVICES_VSOCK_GUEST_BACKLOG_H
#define VMIO_DEVICES_VSOCK_GUEST_BACKLOG_H

#include <stdbool.h>
#include <stdint.h>

/* What we count a guest packet as, by default: 576 on x86-64 Linux, with
 * room to spare for other builds. */
#define VSOCK_BACKLOG_OVERHEAD_DEFAULT 1024u
/* Packets remembered at most, whatever the guest's buffer: beyond this
 * the guest is treated as full (4 MiB at 1024 bytes a packet). */
#define VSOCK_BACKLOG_MAX 4096u

struct vsock_backlog {
	uint32_t *end;     /* tx_cnt just after each packet, oldest first */
	uint32_t cap;      /* entries allocated */
	uint32_t head, len;
	uint32_t overhead; /* bytes of guest buffer a packet costs; 0: off */
};

/* overhead 0: no packet bound (vsock_backlog_room is then unlimited). */
void vsock_backlog_init(struct vsock_backlog *b, uint32_t overhead);
void vsock_backlog_free(struct vsock_backlog *b);

/* Packets a guest with this buf_alloc holds at most: buf_alloc / overhead,
 * at most VSOCK_BACKLOG_MAX, and at least 1 so that a guest with a tiny
 * buffer still gets its data a packet at a time (its byte credit is what
 * bounds it then). UINT32_MAX when the bound is off. */
uint32_t vsock_backlog_limit(const struct vsock_backlog *b,
			     uint32_t peer_buf_alloc);

/* Packets the guest may still be given now: limit - held, or UINT32_MAX
 * when the bound is off. */
uint32_t vsock_backlog_room(const struct vsock_backlog *b,
			    uint32_t peer_buf_alloc);

/* Packets we sent that the guest has not read through. */
static inline uint32_t vsock_backlog_len(const struct vsock_backlog *b)
{
	return b->len;
}

/* Makes sure n more packets can be recorded without allocating: call it
 * before reading host data for them. Returns 0, or -1 when the memory
 * cannot be had (the caller resets the connection: sending on blind could
 * make the guest reset it anyway). */
int vsock_backlog_reserve(struct vsock_backlog *b, uint32_t n);

/* Records a data packet that ends at tx_end in our tx_cnt, into room
 * vsock_backlog_reserve made. Does nothing when off. */
void vsock_backlog_push(struct vsock_backlog *b, uint32_t tx_end);

/* The guest's fwd_cnt moved to fwd_cnt: forgets the packets it read
 * through. fwd_cnt never runs ahead of tx_cnt (credit.h refuses that). */
void vsock_backlog_consumed(struct vsock_backlog *b, uint32_t fwd_cnt);

#endif
