/* Seqpacket message ends over the connection's byte ring: each message
 * found whole with its EOR, the partial one dropped off the tail, and no
 * mark left behind when an emptied ring starts again at offset 0. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "devices/vsock/seqpacket.h"

#define RING 16

static uint8_t buf[RING];
static struct vmio_byte_ring r;
static struct vsock_seq s;

static int setup(void **state)
{
	(void)state;
	vmio_byte_ring_init(&r, buf, sizeof(buf));
	s = (struct vsock_seq){ 0 };
	assert_int_equal(vsock_seq_ends_alloc(&s, RING), 0);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	vsock_seq_free(&s);
	return 0;
}

/* n bytes of the guest's message; with end, its EOM (and eor). */
static void gather(size_t n, bool end, bool eor)
{
	static const uint8_t bytes[RING];

	assert_int_equal(vmio_byte_ring_put(&r, bytes, n), 0);
	s.partial += (uint32_t)n;
	if (end)
		vsock_seq_end_msg(&s, &r, eor);
}

/* The first whole message is len bytes with this EOR; it goes. */
static void expect_first(uint32_t len, bool eor)
{
	bool got_eor = !eor;

	assert_true(s.msgs > 0);
	assert_int_equal(vsock_seq_first(&s, &r, &got_eor), len);
	assert_int_equal(got_eor, eor);
	vsock_seq_sent_first(&s, &r, len);
}

static void test_messages_in_order(void **state)
{
	(void)state;
	gather(5, true, true);
	gather(3, true, false);
	gather(2, false, false);
	expect_first(5, true);
	expect_first(3, false);
	assert_int_equal(s.msgs, 0);
	assert_int_equal(vsock_seq_drop_partial(&s, &r), 2);
	assert_true(vmio_byte_ring_empty(&r));
	assert_int_equal(s.partial, 0);
}

/* The ring restarts at offset 0 once emptied: a message sent before
 * must not leave its end where the next message's bytes now are. */
static void test_no_stale_mark_after_restart(void **state)
{
	(void)state;
	gather(4, true, true);
	expect_first(4, true);
	assert_true(vmio_byte_ring_empty(&r));
	gather(6, false, false);
	gather(2, true, false);
	expect_first(8, false);
}

/* A message across the buffer's end is found whole, ends by position. */
static void test_message_across_the_wrap(void **state)
{
	(void)state;
	gather(10, true, false);
	gather(3, false, false);
	expect_first(10, false);
	gather(9, true, true); /* bytes 10..15, then 0..5 */
	expect_first(12, true);
	assert_true(vmio_byte_ring_empty(&r));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_messages_in_order, setup,
						teardown),
		cmocka_unit_test_setup_teardown(
			test_no_stale_mark_after_restart, setup, teardown),
		cmocka_unit_test_setup_teardown(test_message_across_the_wrap,
						setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
