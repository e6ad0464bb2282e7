/* vsock credit arithmetic: the spec's formula, wrap-around at 2^32, and
 * the violations a guest can commit (overrunning our buffer, claiming to
 * have consumed bytes we never sent). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "devices/vsock/credit.h"

#define BUF 65536u

static void test_init(void **state)
{
	struct vsock_credit c;

	(void)state;
	vsock_credit_init(&c, BUF, 0);
	assert_int_equal(c.buf_alloc, BUF);
	assert_int_equal(vsock_credit_update_threshold(&c), BUF / 4);
	assert_int_equal(vsock_credit_rx_pending(&c), 0);
	/* No credit from the guest until it advertises some. */
	assert_int_equal(vsock_credit_peer_free(&c), 0);
	vsock_credit_init(&c, BUF, 4096);
	assert_int_equal(vsock_credit_update_threshold(&c), 4096);

	vsock_credit_peer_init(&c, 262144, 0);
	assert_int_equal(vsock_credit_peer_free(&c), 262144);
	/* A guest whose counter does not start at 0 is taken as it is. */
	vsock_credit_peer_init(&c, 1000, 0xfffffff0u);
	assert_int_equal(vsock_credit_peer_free(&c), 1000);
	assert_int_equal(vsock_credit_peer_update(&c, 1000, 0xfffffff0u), 0);
}

static void test_peer_free_wraps(void **state)
{
	struct vsock_credit c;

	(void)state;
	vsock_credit_init(&c, BUF, 0);
	vsock_credit_peer_init(&c, 4096, 0xfffff000u);
	/* Send across 2^32. */
	assert_true(vsock_credit_sent(&c, 3000));
	assert_int_equal(vsock_credit_peer_free(&c), 1096);
	assert_true(vsock_credit_sent(&c, 1096));
	assert_int_equal(c.tx_cnt, 0x00000000u);
	assert_int_equal(vsock_credit_peer_free(&c), 0);
	/* Over the credit: counted, but reported. */
	assert_false(vsock_credit_sent(&c, 1));
	assert_int_equal(c.tx_cnt, 1);

	/* The guest consumes across the wrap as well. */
	assert_int_equal(vsock_credit_peer_update(&c, 4096, 0x00000000u), 0);
	assert_int_equal(c.peer_fwd_cnt, 0);
	assert_int_equal(vsock_credit_in_flight(&c), 1);
	assert_int_equal(vsock_credit_peer_free(&c), 4095);
	assert_int_equal(vsock_credit_peer_update(&c, 4096, 1), 0);
	assert_int_equal(vsock_credit_peer_free(&c), 4096);
}

static void test_fwd_cnt_ahead(void **state)
{
	struct vsock_credit c;

	(void)state;
	vsock_credit_init(&c, BUF, 0);
	vsock_credit_peer_init(&c, 4096, 100);
	assert_true(vsock_credit_sent(&c, 1000)); /* tx_cnt 1100 */
	/* Up to tx_cnt is fine... */
	assert_int_equal(vsock_credit_peer_update(&c, 4096, 1100), 0);
	/* ...one byte more is a lie, and changes nothing. */
	assert_int_equal(vsock_credit_peer_update(&c, 1 << 20, 1101), -1);
	assert_int_equal(c.peer_fwd_cnt, 1100);
	assert_int_equal(c.peer_buf_alloc, 4096);
	assert_int_equal(vsock_credit_peer_free(&c), 4096);
	assert_int_equal(vsock_credit_peer_update(&c, 4096, 1100 + (1u << 30)),
			 -1);
	assert_int_equal(vsock_credit_peer_update(&c, 4096,
						  1100 + (1u << 31) - 1),
			 -1);

	/* Same at the wrap: tx_cnt just past 2^32, guest claims more. */
	vsock_credit_peer_init(&c, 4096, 0xffffff00u);
	assert_true(vsock_credit_sent(&c, 0x200)); /* tx_cnt 0x100 */
	assert_int_equal(vsock_credit_peer_update(&c, 4096, 0x101), -1);
	assert_int_equal(vsock_credit_peer_update(&c, 4096, 0x100), 0);
	assert_int_equal(vsock_credit_peer_free(&c), 4096);
	/* The spec's u32 formula would give 4 GiB here; we never do. */
	assert_int_equal(vsock_credit_peer_update(&c, 4096, 0x180), -1);
	assert_true(vsock_credit_peer_free(&c) <= 4096);
}

static void test_fwd_cnt_stale(void **state)
{
	struct vsock_credit c;

	(void)state;
	vsock_credit_init(&c, BUF, 0);
	vsock_credit_peer_init(&c, 8192, 0);
	assert_true(vsock_credit_sent(&c, 6000));
	assert_int_equal(vsock_credit_peer_update(&c, 8192, 5000), 0);
	/* Two guest packets overtook each other: 4000 after 5000. Not an
	 * error, and the credit does not shrink back. */
	assert_int_equal(vsock_credit_peer_update(&c, 8192, 4000), 0);
	assert_int_equal(c.peer_fwd_cnt, 5000);
	assert_int_equal(vsock_credit_peer_free(&c), 8192 - 1000);
	/* Stale across the wrap. */
	vsock_credit_peer_init(&c, 8192, 0xfffffff0u);
	assert_true(vsock_credit_sent(&c, 0x40));
	assert_int_equal(vsock_credit_peer_update(&c, 8192, 0x20), 0);
	assert_int_equal(vsock_credit_peer_update(&c, 8192, 0xfffffff8u), 0);
	assert_int_equal(c.peer_fwd_cnt, 0x20);
	assert_int_equal(vsock_credit_in_flight(&c), 0x10);
}

static void test_peer_shrinks_and_huge(void **state)
{
	struct vsock_credit c;

	(void)state;
	vsock_credit_init(&c, BUF, 0);
	vsock_credit_peer_init(&c, 8192, 0);
	assert_true(vsock_credit_sent(&c, 8000));
	/* The guest shrank its buffer below what is in flight: no credit,
	 * not a violation. */
	assert_int_equal(vsock_credit_peer_update(&c, 4096, 0), 0);
	assert_int_equal(vsock_credit_peer_free(&c), 0);
	assert_int_equal(vsock_credit_peer_update(&c, 0, 0), 0);
	assert_int_equal(vsock_credit_peer_free(&c), 0);
	assert_int_equal(vsock_credit_peer_update(&c, 4096, 6000), 0);
	assert_int_equal(vsock_credit_peer_free(&c), 2096);
	/* A 4 GiB buffer is honoured only up to the cap. */
	assert_int_equal(vsock_credit_peer_update(&c, 0xffffffffu, 8000), 0);
	assert_int_equal(vsock_credit_peer_free(&c), VSOCK_CREDIT_PEER_BUF_MAX);
}

static void test_rx_overrun(void **state)
{
	struct vsock_credit c;

	(void)state;
	vsock_credit_init(&c, 1000, 0);
	assert_int_equal(vsock_credit_rx(&c, 600), 0);
	assert_int_equal(vsock_credit_rx(&c, 401), -1);
	assert_int_equal(vsock_credit_rx_pending(&c), 600);
	assert_int_equal(vsock_credit_rx(&c, 400), 0);
	assert_int_equal(vsock_credit_rx(&c, 1), -1);
	assert_int_equal(vsock_credit_rx(&c, 0), 0);
	assert_int_equal(vsock_credit_rx(&c, 0xffffffffu), -1);
	assert_true(vsock_credit_consumed(&c, 300));
	assert_int_equal(vsock_credit_rx(&c, 301), -1);
	assert_int_equal(vsock_credit_rx(&c, 300), 0);
	/* Consuming more than held is a caller bug, refused. */
	assert_false(vsock_credit_consumed(&c, 1001));
	assert_true(vsock_credit_consumed(&c, 1000));
	assert_int_equal(vsock_credit_rx_pending(&c), 0);
}

static void test_rx_wraps(void **state)
{
	struct vsock_credit c;

	(void)state;
	vsock_credit_init(&c, 1000, 0);
	c.rx_cnt = c.fwd_cnt = c.adv_fwd_cnt = 0xfffffe00u;
	assert_int_equal(vsock_credit_rx(&c, 1000), 0);
	assert_int_equal(c.rx_cnt, 0x1e8u);
	assert_int_equal(vsock_credit_rx_pending(&c), 1000);
	assert_int_equal(vsock_credit_rx(&c, 1), -1);
	assert_true(vsock_credit_consumed(&c, 700));
	assert_int_equal(vsock_credit_rx_pending(&c), 300);
	assert_int_equal(vsock_credit_rx(&c, 700), 0);
	assert_int_equal(vsock_credit_rx(&c, 1), -1);
	assert_int_equal(vsock_credit_guest_view(&c), 0);
}

static void test_update_threshold(void **state)
{
	struct vsock_credit c;
	uint32_t ba = 0, fc = 1;

	(void)state;
	vsock_credit_init(&c, BUF, 0); /* threshold 16 KiB */
	vsock_credit_advertise(&c, &ba, &fc);
	assert_int_equal(ba, BUF);
	assert_int_equal(fc, 0);
	assert_false(vsock_credit_update_needed(&c));

	/* The guest fills 50 KiB: it sees 14 KiB free, but we have consumed
	 * nothing, so an update would say nothing new. */
	assert_int_equal(vsock_credit_rx(&c, 50 * 1024), 0);
	assert_int_equal(vsock_credit_guest_view(&c), 14 * 1024);
	assert_false(vsock_credit_update_needed(&c));
	/* We drain it: now an update gives it the buffer back. */
	assert_true(vsock_credit_consumed(&c, 50 * 1024));
	assert_true(vsock_credit_update_needed(&c));
	vsock_credit_advertise(&c, &ba, &fc);
	assert_int_equal(fc, 50 * 1024);
	assert_false(vsock_credit_update_needed(&c));
	assert_int_equal(vsock_credit_guest_view(&c), BUF);

	/* Above the threshold, consumption alone does not trigger one. */
	assert_int_equal(vsock_credit_rx(&c, 40 * 1024), 0);
	assert_true(vsock_credit_consumed(&c, 1024));
	assert_int_equal(vsock_credit_guest_view(&c), 24 * 1024);
	assert_false(vsock_credit_update_needed(&c));
	assert_int_equal(vsock_credit_rx(&c, 9 * 1024), 0);
	assert_int_equal(vsock_credit_guest_view(&c), 15 * 1024);
	assert_true(vsock_credit_update_needed(&c));

	/* Threshold near the wrap of the counters. */
	vsock_credit_init(&c, BUF, 4096);
	c.rx_cnt = c.fwd_cnt = c.adv_fwd_cnt = 0xffffff00u;
	assert_int_equal(vsock_credit_rx(&c, BUF - 100), 0);
	assert_true(vsock_credit_consumed(&c, 1));
	assert_true(vsock_credit_update_needed(&c));
	vsock_credit_advertise(&c, &ba, &fc);
	assert_int_equal(fc, 0xffffff01u);
	assert_int_equal(vsock_credit_guest_view(&c), 101);
	assert_false(vsock_credit_update_needed(&c));
}

/* Our buffer larger than the guest's: Linux keeps no more than its own
 * buf_alloc in flight, so the update must come when the guest's part runs
 * low, not ours (with 1 MiB here and 256 KiB there, a quarter of ours
 * never came: the stream stopped at 262144 bytes for good). */
static void test_update_within_guest_window(void **state)
{
	struct vsock_credit c;
	uint32_t ba = 0, fc = 0;

	(void)state;
	vsock_credit_init(&c, 1u << 20, 0);
	assert_int_equal(vsock_credit_window(&c), 1u << 20);
	vsock_credit_peer_init(&c, 256 * 1024, 0);
	assert_int_equal(vsock_credit_window(&c), 256 * 1024);
	assert_int_equal(vsock_credit_update_threshold(&c), 64 * 1024);
	vsock_credit_advertise(&c, &ba, &fc);

	/* The guest fills its own 256 KiB and we write it all out. */
	assert_int_equal(vsock_credit_rx(&c, 256 * 1024), 0);
	assert_true(vsock_credit_consumed(&c, 256 * 1024));
	assert_int_equal(vsock_credit_guest_view(&c), 0);
	assert_true(vsock_credit_update_needed(&c));
	vsock_credit_advertise(&c, &ba, &fc);
	assert_int_equal(ba, 1u << 20);
	assert_int_equal(vsock_credit_guest_view(&c), 256 * 1024);
	assert_false(vsock_credit_update_needed(&c));

	/* A guest whose buffer grows past ours is held to ours. */
	assert_int_equal(vsock_credit_peer_update(&c, 4u << 20, 0), 0);
	assert_int_equal(vsock_credit_window(&c), 1u << 20);
	assert_int_equal(vsock_credit_update_threshold(&c), 256 * 1024);
	assert_int_equal(vsock_credit_rx(&c, 700 * 1024), 0);
	assert_true(vsock_credit_consumed(&c, 700 * 1024));
	assert_int_equal(vsock_credit_guest_view(&c), 324 * 1024);
	assert_false(vsock_credit_update_needed(&c));
	assert_int_equal(vsock_credit_rx(&c, 100 * 1024), 0);
	assert_true(vsock_credit_update_needed(&c));
}

static void test_credit_request(void **state)
{
	struct vsock_credit c;

	(void)state;
	vsock_credit_init(&c, BUF, 0);
	vsock_credit_peer_init(&c, 1000, 0);
	assert_false(vsock_credit_request_needed(&c));
	assert_true(vsock_credit_sent(&c, 1000));
	assert_true(vsock_credit_request_needed(&c));
	vsock_credit_mark_requested(&c);
	assert_false(vsock_credit_request_needed(&c));
	/* A header that gives no credit keeps the request outstanding. */
	assert_int_equal(vsock_credit_peer_update(&c, 1000, 0), 0);
	assert_false(vsock_credit_request_needed(&c));
	/* Credit arrives, is used up: ask again. */
	assert_int_equal(vsock_credit_peer_update(&c, 1000, 500), 0);
	assert_true(vsock_credit_sent(&c, 500));
	assert_true(vsock_credit_request_needed(&c));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_init),
		cmocka_unit_test(test_peer_free_wraps),
		cmocka_unit_test(test_fwd_cnt_ahead),
		cmocka_unit_test(test_fwd_cnt_stale),
		cmocka_unit_test(test_peer_shrinks_and_huge),
		cmocka_unit_test(test_rx_overrun),
		cmocka_unit_test(test_rx_wraps),
		cmocka_unit_test(test_update_threshold),
		cmocka_unit_test(test_update_within_guest_window),
		cmocka_unit_test(test_credit_request),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
