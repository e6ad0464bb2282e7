/* A connection's hand-over record; see conn_handover.h.
 *
 * Layout (the version is the whole hand-over record's):
 *   u16 type, u8 state, u8 flags (CONN_F_*)
 *   u32 local_port, peer_port, pending, peer_shut, local_shut,
 *       to_guest_pkt_cap, fd index
 *   u32 credit: buf_alloc, rx_cnt, fwd_cnt, adv_fwd_cnt,
 *       update_threshold, tx_cnt, peer_buf_alloc, peer_fwd_cnt
 *   u32 buffer size, u32 bytes held, the bytes
 *   seqpacket: u32 whole messages, each u32 length and u8 EOR (what
 *       follows the last is the partial message); u32 host message
 *       length, offset, packets sent, u8 EOR, its bytes
 *   u32 backlog entries, each the u32 tx_cnt its packet ended at
 *   u32 counters, each u64 (struct vsock_conn_stats in order: a later
 *       release appends, and a reader takes what it knows) */
#include "devices/vsock/conn_handover.h"

#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "devices/vsock/seqpacket.h"

#define CONN_F_GUEST_INITIATED (1u << 0)
#define CONN_F_HOST_EOF (1u << 1)
#define CONN_F_HOST_SHUT_WR (1u << 2)
#define CONN_F_STARVE_SEEN (1u << 3)
#define CONN_F_STARVE_DUE (1u << 4)
#define CONN_F_MERGE_HOLD (1u << 5)
#define CONN_F_CREDIT_REQUESTED (1u << 6)
#define CONN_F_ALL ((1u << 7) - 1)

#define RXOP_ALL ((VSOCK_RXOP_CREDIT_REQUEST << 1) - 1)

#define STATS_N (sizeof(struct vsock_conn_stats) / sizeof(uint64_t))
/* A record may carry counters a later release added: this many at most. */
#define STATS_MAX 64u

const char *vsock_conn_handover_refusal(const struct vsock_conn *c)
{
	if (c->held.n)
		return "it holds guest pages by reference (--tx-splice) "
		       "the host has not read";
	return NULL;
}

static uint8_t conn_flags(const struct vsock_conn *c)
{
	return (uint8_t)((c->guest_initiated ? CONN_F_GUEST_INITIATED : 0) |
			 (c->host_eof ? CONN_F_HOST_EOF : 0) |
			 (c->host_shut_wr ? CONN_F_HOST_SHUT_WR : 0) |
			 (c->starve_seen ? CONN_F_STARVE_SEEN : 0) |
			 (c->starve_due ? CONN_F_STARVE_DUE : 0) |
			 (c->merge_hold ? CONN_F_MERGE_HOLD : 0) |
			 (c->credit.requested ? CONN_F_CREDIT_REQUESTED : 0));
}

static void save_credit(const struct vsock_credit *k, struct vmio_wire_writer *w)
{
	const uint32_t v[] = { k->buf_alloc,   k->rx_cnt,
			       k->fwd_cnt,     k->adv_fwd_cnt,
			       k->update_threshold, k->tx_cnt,
			       k->peer_buf_alloc, k->peer_fwd_cnt };

	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
		vmio_wire_put_u32(w, v[i]);
}

/* The bytes held, then (seqpacket) where each whole message ends. */
static void save_buffer(const struct vsock_conn *c, struct vmio_wire_writer *w)
{
	uint32_t len = (uint32_t)vmio_byte_ring_len(&c->ring), from = 0;
	struct iovec iov[2];
	unsigned n = vmio_byte_ring_data(&c->ring, len, iov);

	vmio_wire_put_u32(w, (uint32_t)c->ring.size);
	vmio_wire_put_u32(w, len);
	for (unsigned i = 0; i < n; i++)
		vmio_wire_put_bytes(w, iov[i].iov_base, iov[i].iov_len);
	if (c->type != VSOCK_TYPE_SEQPACKET)
		return;
	vmio_wire_put_u32(w, c->seq.msgs);
	for (uint32_t k = 0; k < c->seq.msgs; k++) {
		bool eor;
		uint32_t m = vsock_seq_msg_len(&c->seq, &c->ring, from, &eor);

		vmio_wire_put_u32(w, m);
		vmio_wire_put_u8(w, eor);
		from += m;
	}
	vmio_wire_put_u32(w, c->seq.hmsg_len);
	vmio_wire_put_u32(w, c->seq.hmsg_off);
	vmio_wire_put_u32(w, c->seq.hmsg_pkts);
	vmio_wire_put_u8(w, c->seq.hmsg_eor);
	if (c->seq.hmsg_len)
		vmio_wire_put_bytes(w, c->seq.hmsg, c->seq.hmsg_len);
}

static void save_backlog(const struct vsock_backlog *b,
			 struct vmio_wire_writer *w)
{
	vmio_wire_put_u32(w, b->len);
	for (uint32_t i = 0; i < b->len; i++)
		vmio_wire_put_u32(w, b->end[(b->head + i) % b->cap]);
}

void vsock_conn_save(const struct vsock_conn *c, uint32_t fd_index,
		     struct vmio_wire_writer *w)
{
	vmio_wire_put_u16(w, c->type);
	vmio_wire_put_u8(w, (uint8_t)c->state);
	vmio_wire_put_u8(w, conn_flags(c));
	vmio_wire_put_u32(w, c->local_port);
	vmio_wire_put_u32(w, c->peer_port);
	vmio_wire_put_u32(w, c->pending);
	vmio_wire_put_u32(w, c->peer_shut);
	vmio_wire_put_u32(w, c->local_shut);
	vmio_wire_put_u32(w, c->to_guest_pkt_cap);
	vmio_wire_put_u32(w, fd_index);
	save_credit(&c->credit, w);
	save_buffer(c, w);
	save_backlog(&c->backlog, w);
	vmio_wire_put_counters(w, (const uint64_t *)&c->stats, STATS_N);
}

/* ---- Taking it back -------------------------------------------------- */

static void restore_credit(struct vsock_credit *k, struct vmio_wire_reader *r)
{
	uint32_t *v[] = { &k->buf_alloc,   &k->rx_cnt,
			  &k->fwd_cnt,     &k->adv_fwd_cnt,
			  &k->update_threshold, &k->tx_cnt,
			  &k->peer_buf_alloc, &k->peer_fwd_cnt };

	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
		*v[i] = vmio_wire_get_u32(r);
}

/* Seqpacket: the ends of the messages held, marked as they were made. */
static void restore_ends(struct vsock_conn *c, struct vmio_wire_reader *r)
{
	uint32_t msgs = vmio_wire_get_count(r, 5), len, done = 0;
	const uint8_t *all;
	struct vmio_byte_ring *ring = &c->ring;

	len = (uint32_t)vmio_byte_ring_len(ring);
	if (!vmio_wire_ok(r))
		return;
	if (vsock_seq_ends_alloc(&c->seq, ring->size)) {
		vmio_wire_fail(r, "out of memory");
		return;
	}
	/* The ring is refilled message by message, each end marked when its
	 * last byte is in, as conn_from_guest.c does. */
	all = ring->buf;
	vmio_byte_ring_init(ring, malloc(ring->size), ring->size);
	if (!ring->buf) {
		ring->buf = (uint8_t *)all;
		vmio_wire_fail(r, "out of memory");
		return;
	}
	for (uint32_t k = 0; k < msgs && vmio_wire_ok(r); k++) {
		uint32_t m = vmio_wire_get_u32(r);
		bool eor = vmio_wire_get_u8(r) != 0;

		if (!vmio_wire_ok(r))
			break;
		if (!m || m > len - done) {
			vmio_wire_fail(r, "a message outside the buffer");
			break;
		}
		vmio_byte_ring_put(ring, all + done, m);
		vsock_seq_end_msg(&c->seq, ring, eor);
		done += m;
	}
	if (vmio_wire_ok(r)) {
		vmio_byte_ring_put(ring, all + done, len - done);
		c->seq.partial = len - done;
	}
	free((void *)all);
}

static void restore_host_msg(struct vsock_conn *c, struct vmio_wire_reader *r)
{
	uint32_t len = vmio_wire_get_u32(r), off = vmio_wire_get_u32(r);
	uint32_t pkts = vmio_wire_get_u32(r);
	bool eor = vmio_wire_get_u8(r) != 0;
	const uint8_t *p;
	uint8_t *buf;

	if (!vmio_wire_ok(r))
		return;
	if (len > c->ring.size || off > len || (off == len && len)) {
		vmio_wire_fail(r, "a host message outside its buffer");
		return;
	}
	if (!len)
		return;
	p = vmio_wire_get_bytes(r, len);
	if (!p)
		return;
	buf = vsock_seq_msg_buf(&c->seq, c->ring.size);
	if (!buf) {
		vmio_wire_fail(r, "out of memory");
		return;
	}
	memcpy(buf, p, len);
	vsock_seq_msg_loaded(&c->seq, len, eor);
	c->seq.hmsg_off = off;
	c->seq.hmsg_pkts = pkts;
}

/* The bytes held: copied into a buffer of their own first, so a
 * seqpacket's messages can then be laid in one by one (restore_ends). */
static void restore_buffer(struct vsock_conn *c, uint32_t buf_size,
			   struct vmio_wire_reader *r)
{
	uint32_t size = vmio_wire_get_u32(r), len = vmio_wire_get_u32(r);
	const uint8_t *p;

	if (!vmio_wire_ok(r))
		return;
	/* Stream: --tx-buffer-size; seqpacket: what the host socket takes
	 * in one message, at most that. buf_alloc is the size. */
	if (!size || size > buf_size ||
	    (c->type == VSOCK_TYPE_STREAM && size != buf_size) ||
	    c->credit.buf_alloc != size) {
		vmio_wire_fail(r, "a buffer size this vmio would not give");
		return;
	}
	if (len > size || len != c->credit.rx_cnt - c->credit.fwd_cnt) {
		vmio_wire_fail(r, "buffered bytes that do not match the credit");
		return;
	}
	vmio_byte_ring_init(&c->ring, NULL, size);
	p = vmio_wire_get_bytes(r, len);
	if (!p)
		return;
	if (len || c->type == VSOCK_TYPE_SEQPACKET) {
		c->ring.buf = malloc(size);
		if (!c->ring.buf) {
			vmio_wire_fail(r, "out of memory");
			return;
		}
		vmio_byte_ring_put(&c->ring, p, len);
	}
	if (c->type != VSOCK_TYPE_SEQPACKET)
		return;
	restore_ends(c, r);
	restore_host_msg(c, r);
}

static void restore_backlog(struct vsock_conn *c, struct vmio_wire_reader *r)
{
	uint32_t n = vmio_wire_get_count(r, 4);

	if (!vmio_wire_ok(r) || !n)
		return;
	if (n > VSOCK_BACKLOG_MAX) {
		vmio_wire_fail(r, "more unread packets than a guest holds");
		return;
	}
	/* This vmio runs without the packet bound: nothing to remember. */
	if (!c->backlog.overhead) {
		vmio_wire_get_bytes(r, (size_t)n * 4);
		return;
	}
	if (vsock_backlog_reserve(&c->backlog, n)) {
		vmio_wire_fail(r, "out of memory");
		return;
	}
	for (uint32_t i = 0; i < n; i++)
		vsock_backlog_push(&c->backlog, vmio_wire_get_u32(r));
}

/* The fixed fields, each checked against what this build could have
 * made. */
static void restore_head(struct vsock_conn *c, struct vmio_wire_reader *r,
			 uint32_t *fd_index)
{
	uint16_t type = vmio_wire_get_u16(r);
	uint8_t state = vmio_wire_get_u8(r), f = vmio_wire_get_u8(r);

	c->local_port = vmio_wire_get_u32(r);
	c->peer_port = vmio_wire_get_u32(r);
	c->pending = vmio_wire_get_u32(r);
	c->peer_shut = vmio_wire_get_u32(r);
	c->local_shut = vmio_wire_get_u32(r);
	c->to_guest_pkt_cap = vmio_wire_get_u32(r);
	*fd_index = vmio_wire_get_u32(r);
	restore_credit(&c->credit, r);
	if (!vmio_wire_ok(r))
		return;
	if ((type != VSOCK_TYPE_STREAM && type != VSOCK_TYPE_SEQPACKET) ||
	    state > VSOCK_CONN_KILLED || (f & ~CONN_F_ALL) ||
	    (c->pending & ~RXOP_ALL) || (c->peer_shut & ~VSOCK_SHUTDOWN_MASK) ||
	    (c->local_shut & ~VSOCK_SHUTDOWN_MASK) ||
	    c->to_guest_pkt_cap > VSOCK_MAX_PKT_PAYLOAD) {
		vmio_wire_fail(r, "a connection field out of range");
		return;
	}
	if ((state == VSOCK_CONN_KILLED) != (*fd_index == VSOCK_HANDOVER_NO_FD)) {
		vmio_wire_fail(r, "a live connection without a host socket");
		return;
	}
	c->type = type;
	c->state = (enum vsock_conn_state)state;
	c->guest_initiated = f & CONN_F_GUEST_INITIATED;
	c->host_eof = f & CONN_F_HOST_EOF;
	c->host_shut_wr = f & CONN_F_HOST_SHUT_WR;
	c->starve_seen = f & CONN_F_STARVE_SEEN;
	c->starve_due = f & CONN_F_STARVE_DUE;
	c->merge_hold = f & CONN_F_MERGE_HOLD;
	c->credit.requested = f & CONN_F_CREDIT_REQUESTED;
}

int vsock_conn_restore(struct vsock_conn *c, uint64_t guest_cid,
		       uint32_t buf_size, uint32_t overhead,
		       struct vmio_wire_reader *r, uint32_t *fd_index)
{
	*c = (struct vsock_conn){ .guest_cid = guest_cid, .fd = -1 };
	vsock_backlog_init(&c->backlog, overhead);
	restore_head(c, r, fd_index);
	if (vmio_wire_ok(r))
		restore_buffer(c, buf_size, r);
	if (vmio_wire_ok(r))
		restore_backlog(c, r);
	vmio_wire_get_counters(r, (uint64_t *)&c->stats, STATS_N, STATS_MAX);
	if (vmio_wire_ok(r))
		return 0;
	vsock_conn_destroy(c);
	return -1;
}
