/* The Linux guest limits the in-tree driver keeps (vsock_guest_limits.h):
 * which RW packets a 6.12.94 socket refuses, by bytes or by count, and
 * at which packet of a trickle; how small packets are copied into the
 * one before (stream, and seqpacket within a message only); packets
 * leaving the queue once read whole, across the u32 wrap; and the TX
 * credit capped to the socket's own buffer. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "frontend/vsock_guest_limits.h"

#define BUF (256u * 1024u) /* Linux's default buf_alloc */
#define ROOM 4096u         /* payload space of a 6.1-sized rx buffer */

/* A receiving socket reduced to what the rule looks at. */
struct rx {
	struct vg_rxq q;
	uint32_t rx_cnt, fwd_cnt, buf_alloc, overhead;
};

static void rx_init(struct rx *r, uint32_t start)
{
	*r = (struct rx){ .rx_cnt = start, .fwd_cnt = start, .buf_alloc = BUF,
			  .overhead = VG_LINUX_PKT_OVERHEAD };
}

/* One RW arriving: the verdict, and the packet queued if admitted. */
static enum vg_rx_verdict rx_pkt(struct rx *r, uint32_t len, bool eom)
{
	enum vg_rx_verdict v = vg_rx_admit(r->q.count, r->rx_cnt - r->fwd_cnt,
					   r->buf_alloc, len, r->overhead);

	if (v == VG_RX_ACCEPT) {
		assert_true(vg_rxq_add(&r->q, r->rx_cnt, len, ROOM, eom) >= 0);
		r->rx_cnt += len;
	}
	return v;
}

static void rx_read(struct rx *r, uint32_t n)
{
	r->fwd_cnt += n;
	vg_rxq_consumed(&r->q, r->fwd_cnt);
}

static void test_admit_bytes(void **state)
{
	(void)state;
	assert_int_equal(vg_rx_admit(0, 0, BUF, BUF, 576), VG_RX_ACCEPT);
	assert_int_equal(vg_rx_admit(0, 0, BUF, BUF + 1, 576),
			 VG_RX_OVER_BYTES);
	assert_int_equal(vg_rx_admit(3, BUF - 100, BUF, 100, 576),
			 VG_RX_ACCEPT);
	assert_int_equal(vg_rx_admit(3, BUF - 100, BUF, 101, 576),
			 VG_RX_OVER_BYTES);
	/* Bytes only: no count, however many packets. */
	assert_int_equal(vg_rx_admit(100000, 0, BUF, 1, 0), VG_RX_ACCEPT);
	assert_int_equal(vg_rx_admit(100000, BUF, BUF, 1, 0),
			 VG_RX_OVER_BYTES);
	/* Held past the buffer (a broken device) does not wrap to room. */
	assert_int_equal(vg_rx_admit(0, UINT32_MAX, BUF, 1, 0),
			 VG_RX_OVER_BYTES);
	/* Both limits passed: the credit is named, it is the violation. */
	assert_int_equal(vg_rx_admit(1000, BUF, BUF, 1, 576),
			 VG_RX_OVER_BYTES);
}

static void test_admit_count(void **state)
{
	(void)state;
	/* (queued + 1) * 576 <= 262144 up to 454 queued: 455 packets fit,
	 * the 456th is refused, whatever it carries. */
	assert_int_equal(vg_rx_admit(454, 0, BUF, 1, 576), VG_RX_ACCEPT);
	assert_int_equal(vg_rx_admit(455, 0, BUF, 1, 576),
			 VG_RX_OVER_PACKETS);
	assert_int_equal(vg_rx_admit(455, 0, BUF, 0, 576),
			 VG_RX_OVER_PACKETS);
	/* A small buffer holds fewer: 16 KiB is 28 packets. */
	assert_int_equal(vg_rx_admit(27, 0, 16384, 10, 576), VG_RX_ACCEPT);
	assert_int_equal(vg_rx_admit(28, 0, 16384, 10, 576),
			 VG_RX_OVER_PACKETS);
	/* A buffer smaller than one packet's overhead takes nothing. */
	assert_int_equal(vg_rx_admit(0, 0, 500, 10, 576), VG_RX_OVER_PACKETS);
	/* No overflow in the product. */
	assert_int_equal(vg_rx_admit(UINT32_MAX, 0, UINT32_MAX, 1, UINT32_MAX),
			 VG_RX_OVER_PACKETS);
}

/* The trickle: 300-byte packets to a socket that does not read.
 * 455 are queued (136,500 bytes, about half the credit), the 456th is
 * refused; bytes only, the credit is what stops them. */
static void test_trickle_300(void **state)
{
	struct rx r;
	unsigned n = 0;

	(void)state;
	rx_init(&r, 0);
	while (rx_pkt(&r, 300, false) == VG_RX_ACCEPT)
		n++;
	assert_int_equal(n, 455);
	assert_int_equal(r.rx_cnt, 136500);
	assert_int_equal(r.q.count, 455);
	assert_int_equal(rx_pkt(&r, 300, false), VG_RX_OVER_PACKETS);
	/* Reading one packet whole makes room for one more. */
	rx_read(&r, 299);
	assert_int_equal(r.q.count, 455);
	assert_int_equal(rx_pkt(&r, 300, false), VG_RX_OVER_PACKETS);
	rx_read(&r, 1);
	assert_int_equal(r.q.count, 454);
	assert_int_equal(rx_pkt(&r, 300, false), VG_RX_ACCEPT);
	vg_rxq_free(&r.q);

	rx_init(&r, 0);
	r.overhead = 0;
	n = 0;
	while (rx_pkt(&r, 300, false) == VG_RX_ACCEPT)
		n++;
	assert_int_equal(n, BUF / 300);
	assert_int_equal(rx_pkt(&r, 300, false), VG_RX_OVER_BYTES);
	vg_rxq_free(&r.q);
}

/* Packets of at most 128 bytes go into the packet before while it has
 * more tailroom than they are long, so a stream of them costs one queued
 * packet per buffer's worth: the credit, not the count, stops them. */
static void test_coalesce_stream(void **state)
{
	struct rx r;
	unsigned n = 0;

	(void)state;
	rx_init(&r, 0);
	/* The first opens a packet; the queue was empty. */
	assert_int_equal(rx_pkt(&r, 100, false), VG_RX_ACCEPT);
	assert_int_equal(r.q.count, 1);
	assert_int_equal(r.q.coalesced, 0);
	assert_int_equal(rx_pkt(&r, 128, false), VG_RX_ACCEPT);
	assert_int_equal(r.q.count, 1);
	assert_int_equal(r.q.coalesced, 1);
	assert_int_equal(r.q.pkts[0].len, 228);
	assert_int_equal(r.q.pkts[0].room, ROOM - 228);
	/* 129 bytes is a packet of its own. */
	assert_int_equal(rx_pkt(&r, 129, false), VG_RX_ACCEPT);
	assert_int_equal(r.q.count, 2);
	vg_rxq_free(&r.q);

	/* 100-byte packets fill each 4 KiB buffer: copies go in while the
	 * tailroom exceeds 100 (40 of them, 4000 bytes, leave 96). */
	rx_init(&r, 0);
	while (rx_pkt(&r, 100, false) == VG_RX_ACCEPT)
		n++;
	assert_int_equal(n, BUF / 100);
	assert_int_equal(r.q.count, (n + 39) / 40);
	assert_true(r.q.count < 455);
	assert_int_equal(r.q.pkts[r.q.head].room, 96);
	vg_rxq_free(&r.q);
}

/* Exactly as long as the tailroom: not copied (Linux compares strictly). */
static void test_coalesce_tailroom_edge(void **state)
{
	struct vg_rxq q = { 0 };

	(void)state;
	assert_int_equal(vg_rxq_add(&q, 0, 10, 110, false), 0);
	assert_int_equal(q.pkts[0].room, 100);
	assert_int_equal(vg_rxq_add(&q, 10, 100, 4096, false), 0);
	assert_int_equal(q.count, 2);
	assert_int_equal(vg_rxq_add(&q, 110, 99, 4096, false), 1);
	assert_int_equal(q.count, 2);
	/* A buffer with no room past its packet (a mergeable packet that
	 * filled its buffers) takes nothing. */
	assert_int_equal(vg_rxq_add(&q, 209, 300, 300, false), 0);
	assert_int_equal(vg_rxq_add(&q, 509, 1, 4096, false), 0);
	assert_int_equal(q.count, 4);
	vg_rxq_free(&q);
}

/* Seqpacket: a small packet joins the one before only inside a message;
 * one after an EOM starts a packet (and a message) of its own, and the
 * EOM of a copied packet moves onto the one it joined. */
static void test_coalesce_seqpacket(void **state)
{
	struct rx r;
	unsigned n = 0;

	(void)state;
	rx_init(&r, 0);
	/* A two-packet message: 4096, then a 50-byte tail with EOM. */
	assert_int_equal(rx_pkt(&r, 4000, false), VG_RX_ACCEPT);
	assert_int_equal(rx_pkt(&r, 50, true), VG_RX_ACCEPT);
	assert_int_equal(r.q.count, 1);
	assert_true(r.q.pkts[0].eom);
	/* The next message's small first packet is its own. */
	assert_int_equal(rx_pkt(&r, 20, true), VG_RX_ACCEPT);
	assert_int_equal(r.q.count, 2);
	assert_int_equal(rx_pkt(&r, 20, false), VG_RX_ACCEPT);
	assert_int_equal(r.q.count, 3);
	assert_int_equal(rx_pkt(&r, 20, true), VG_RX_ACCEPT);
	assert_int_equal(r.q.count, 3);
	vg_rxq_free(&r.q);

	/* One small message after another: none merge, so the count is
	 * what stops them, at 455 messages of 100 bytes (45,500 bytes). */
	rx_init(&r, 0);
	while (rx_pkt(&r, 100, true) == VG_RX_ACCEPT)
		n++;
	assert_int_equal(n, 455);
	assert_int_equal(r.q.coalesced, 0);
	vg_rxq_free(&r.q);
}

/* Packets leave once read whole, in order, and the ring keeps its order
 * as it grows past a wrap; the stream offsets may wrap at 2^32. */
static void test_consumed_wraps(void **state)
{
	struct rx r;

	(void)state;
	rx_init(&r, 0xffffff00u);
	for (unsigned i = 0; i < 50; i++)
		assert_int_equal(rx_pkt(&r, 200, false), VG_RX_ACCEPT);
	/* Read half: the ring's head moves on, then it grows. */
	rx_read(&r, 25 * 200 + 10);
	assert_int_equal(r.q.count, 25);
	for (unsigned i = 0; i < 100; i++)
		assert_int_equal(rx_pkt(&r, 200 + i, false), VG_RX_ACCEPT);
	assert_int_equal(r.q.count, 125);
	assert_int_equal(r.q.peak, 125);
	/* Every packet still where the stream says. */
	for (unsigned i = 0; i + 1 < r.q.count; i++) {
		const struct vg_rx_pkt *a = &r.q.pkts[(r.q.head + i) % r.q.cap];
		const struct vg_rx_pkt *b =
			&r.q.pkts[(r.q.head + i + 1) % r.q.cap];

		assert_int_equal(b->start, a->start + a->len);
	}
	rx_read(&r, r.rx_cnt - r.fwd_cnt - 1);
	assert_int_equal(r.q.count, 1);
	rx_read(&r, 1);
	assert_int_equal(r.q.count, 0);
	assert_int_equal(r.q.peak, 125);
	vg_rxq_free(&r.q);
}

static void test_tx_space(void **state)
{
	(void)state;
	/* The device advertises 1 MiB, the socket's own buffer is 256 KiB:
	 * capped, 256 KiB in flight at most; uncapped, the whole MiB. */
	assert_int_equal(vg_tx_space(1u << 20, BUF, 0, 0, true), BUF);
	assert_int_equal(vg_tx_space(1u << 20, BUF, 0, 0, false), 1u << 20);
	assert_int_equal(vg_tx_space(1u << 20, BUF, BUF, 0, true), 0);
	assert_int_equal(vg_tx_space(1u << 20, BUF, BUF, 0, false),
			 (1u << 20) - BUF);
	/* The device consumed some: that much again. */
	assert_int_equal(vg_tx_space(1u << 20, BUF, BUF, 4096, true), 4096);
	/* A smaller peer is the limit either way. */
	assert_int_equal(vg_tx_space(65536, BUF, 1000, 0, true), 64536);
	assert_int_equal(vg_tx_space(65536, BUF, 1000, 0, false), 64536);
	/* More in flight than the limit (it shrank): none, not a wrap. */
	assert_int_equal(vg_tx_space(65536, BUF, 70000, 0, true), 0);
	assert_int_equal(vg_tx_space(1u << 20, BUF, 300000, 0, true), 0);
	/* Counters across 2^32. */
	assert_int_equal(vg_tx_space(1u << 20, BUF, 100, 0xffffff00u, true),
			 BUF - 356);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_admit_bytes),
		cmocka_unit_test(test_admit_count),
		cmocka_unit_test(test_trickle_300),
		cmocka_unit_test(test_coalesce_stream),
		cmocka_unit_test(test_coalesce_tailroom_edge),
		cmocka_unit_test(test_coalesce_seqpacket),
		cmocka_unit_test(test_consumed_wraps),
		cmocka_unit_test(test_tx_space),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
