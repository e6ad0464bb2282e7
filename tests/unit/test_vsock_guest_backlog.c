/* The data packets a guest holds unread (devices/vsock/guest_backlog.h):
 * the limit a buf_alloc allows, from its floor of one packet to its cap of
 * VSOCK_BACKLOG_MAX; packets forgotten as fwd_cnt passes their ends, a
 * packet partly read still held, and u32 counters that wrap between two
 * packets; the FIFO keeping its order when it grows from a wrapped state;
 * a full FIFO neither written past nor grown past VSOCK_BACKLOG_MAX; and
 * the bound switched off (overhead 0). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "devices/vsock/guest_backlog.h"

/* Linux's per-packet cost on x86-64 (guest_backlog.h). */
#define LINUX_OVERHEAD 576u

static void push_one(struct vsock_backlog *b, uint32_t end)
{
	assert_int_equal(vsock_backlog_reserve(b, 1), 0);
	vsock_backlog_push(b, end);
}

static void test_limit(void **state)
{
	struct vsock_backlog b;

	(void)state;
	vsock_backlog_init(&b, LINUX_OVERHEAD);
	/* 256 KiB, Linux's default: the 455 packets 6.12.94 queues. */
	assert_int_equal(vsock_backlog_limit(&b, 262144), 455);
	/* A buffer smaller than one packet's cost still takes one packet
	 * at a time (its byte credit bounds it then), never none. */
	assert_int_equal(vsock_backlog_limit(&b, 0), 1);
	assert_int_equal(vsock_backlog_limit(&b, LINUX_OVERHEAD - 1), 1);
	assert_int_equal(vsock_backlog_limit(&b, LINUX_OVERHEAD), 1);
	assert_int_equal(vsock_backlog_limit(&b, 2 * LINUX_OVERHEAD - 1), 1);
	assert_int_equal(vsock_backlog_limit(&b, 2 * LINUX_OVERHEAD), 2);
	/* The cap, reached exactly and not passed by the largest buffer. */
	assert_int_equal(vsock_backlog_limit(&b, VSOCK_BACKLOG_MAX *
						     LINUX_OVERHEAD - 1),
			 VSOCK_BACKLOG_MAX - 1);
	assert_int_equal(vsock_backlog_limit(&b, VSOCK_BACKLOG_MAX *
						     LINUX_OVERHEAD),
			 VSOCK_BACKLOG_MAX);
	assert_int_equal(vsock_backlog_limit(&b, UINT32_MAX), VSOCK_BACKLOG_MAX);
	vsock_backlog_free(&b);

	/* The default cost: 256 packets in 256 KiB. */
	vsock_backlog_init(&b, VSOCK_BACKLOG_OVERHEAD_DEFAULT);
	assert_int_equal(vsock_backlog_limit(&b, 262144), 256);
	vsock_backlog_free(&b);
}

static void test_room(void **state)
{
	struct vsock_backlog b;

	(void)state;
	vsock_backlog_init(&b, 1024);
	assert_int_equal(vsock_backlog_room(&b, 4096), 4);
	for (uint32_t i = 1; i <= 3; i++)
		push_one(&b, i * 100);
	assert_int_equal(vsock_backlog_len(&b), 3);
	assert_int_equal(vsock_backlog_room(&b, 4096), 1);
	push_one(&b, 400);
	assert_int_equal(vsock_backlog_room(&b, 4096), 0);
	/* The guest shrank its buffer below what it holds: no room, not a
	 * wrapped-around huge one. */
	assert_int_equal(vsock_backlog_room(&b, 2048), 0);
	assert_int_equal(vsock_backlog_room(&b, 0), 0);
	vsock_backlog_free(&b);
}

static void test_consumed(void **state)
{
	struct vsock_backlog b;

	(void)state;
	vsock_backlog_init(&b, 1024);
	push_one(&b, 100);
	push_one(&b, 200);
	push_one(&b, 300);
	/* fwd_cnt at an older point: nothing read through. */
	vsock_backlog_consumed(&b, 0);
	assert_int_equal(vsock_backlog_len(&b), 3);
	/* The first packet read, the second half read: Linux still queues
	 * that one, so it still counts. */
	vsock_backlog_consumed(&b, 150);
	assert_int_equal(vsock_backlog_len(&b), 2);
	vsock_backlog_consumed(&b, 199);
	assert_int_equal(vsock_backlog_len(&b), 2);
	/* Reaching a packet's end reads it through. */
	vsock_backlog_consumed(&b, 200);
	assert_int_equal(vsock_backlog_len(&b), 1);
	vsock_backlog_consumed(&b, 300);
	assert_int_equal(vsock_backlog_len(&b), 0);
	/* Said again: nothing to forget, nothing breaks. */
	vsock_backlog_consumed(&b, 300);
	assert_int_equal(vsock_backlog_len(&b), 0);
	vsock_backlog_free(&b);
}

/* tx_cnt and fwd_cnt are u32 counters of a stream that may be longer
 * than 4 GiB: a packet that ends past the wrap is still ahead of a
 * fwd_cnt just below it, and one that ends just below is behind a fwd_cnt
 * past it. */
static void test_counters_wrap(void **state)
{
	struct vsock_backlog b;

	(void)state;
	vsock_backlog_init(&b, 1024);
	push_one(&b, 0xffffff80u);
	push_one(&b, 0x00000010u); /* crossed the wrap */
	push_one(&b, 0x00000100u);
	vsock_backlog_consumed(&b, 0xffffff00u);
	assert_int_equal(vsock_backlog_len(&b), 3);
	vsock_backlog_consumed(&b, 0xffffff90u);
	assert_int_equal(vsock_backlog_len(&b), 2);
	vsock_backlog_consumed(&b, 0xfffffffeu);
	assert_int_equal(vsock_backlog_len(&b), 2);
	vsock_backlog_consumed(&b, 0x00000010u);
	assert_int_equal(vsock_backlog_len(&b), 1);
	/* Everything read, with fwd_cnt past the wrap as well. */
	vsock_backlog_consumed(&b, 0x00000100u);
	assert_int_equal(vsock_backlog_len(&b), 0);
	vsock_backlog_free(&b);
}

/* The FIFO grows while its live part wraps round the end of its array:
 * the packets keep their order, each forgotten exactly when fwd_cnt
 * reaches its end. */
static void test_grow_keeps_order(void **state)
{
	struct vsock_backlog b;
	uint32_t end = 0;

	(void)state;
	vsock_backlog_init(&b, 1024);
	assert_int_equal(vsock_backlog_reserve(&b, 16), 0);
	assert_int_equal(b.cap, 16);
	for (unsigned i = 0; i < 10; i++)
		vsock_backlog_push(&b, ++end * 10);
	vsock_backlog_consumed(&b, 80); /* head at 8 of 16 */
	assert_int_equal(vsock_backlog_len(&b), 2);
	/* 14 more fill the array, wrapping round its end. */
	assert_int_equal(vsock_backlog_reserve(&b, 14), 0);
	assert_int_equal(b.cap, 16);
	for (unsigned i = 0; i < 14; i++)
		vsock_backlog_push(&b, ++end * 10);
	assert_int_equal(vsock_backlog_len(&b), 16);
	/* One more: a copy into a larger array. */
	assert_int_equal(vsock_backlog_reserve(&b, 1), 0);
	assert_int_equal(b.cap, 32);
	vsock_backlog_push(&b, ++end * 10);
	assert_int_equal(vsock_backlog_len(&b), 17);
	for (uint32_t k = 9; k <= end; k++) {
		vsock_backlog_consumed(&b, k * 10 - 1);
		assert_int_equal(vsock_backlog_len(&b), end - k + 1);
		vsock_backlog_consumed(&b, k * 10);
		assert_int_equal(vsock_backlog_len(&b), end - k);
	}
	vsock_backlog_free(&b);
}

/* At VSOCK_BACKLOG_MAX the guest is full: no room whatever its buffer,
 * a push without reserved room is dropped rather than written past the
 * array, and growing towards it stops at it. */
static void test_full(void **state)
{
	struct vsock_backlog b;

	(void)state;
	vsock_backlog_init(&b, 64);
	/* A reservation that doubling would take past the cap gets the
	 * cap: the memory bound of guest_backlog.h. */
	assert_int_equal(vsock_backlog_reserve(&b, 2500), 0);
	assert_int_equal(b.cap, 2500);
	for (uint32_t i = 1; i <= 2500; i++)
		vsock_backlog_push(&b, i);
	assert_int_equal(vsock_backlog_reserve(&b, 1), 0);
	assert_int_equal(b.cap, VSOCK_BACKLOG_MAX);
	for (uint32_t i = 2501; i <= VSOCK_BACKLOG_MAX; i++)
		vsock_backlog_push(&b, i);
	assert_int_equal(vsock_backlog_len(&b), VSOCK_BACKLOG_MAX);
	assert_int_equal(vsock_backlog_room(&b, UINT32_MAX), 0);
	/* No room was reserved: the caller's bug costs a count, not memory
	 * (ASan watches the array). */
	vsock_backlog_push(&b, VSOCK_BACKLOG_MAX + 1);
	assert_int_equal(vsock_backlog_len(&b), VSOCK_BACKLOG_MAX);
	/* The oldest is still the first pushed. */
	vsock_backlog_consumed(&b, 1);
	assert_int_equal(vsock_backlog_len(&b), VSOCK_BACKLOG_MAX - 1);
	assert_int_equal(vsock_backlog_room(&b, UINT32_MAX), 1);
	vsock_backlog_free(&b);
	assert_null(b.end);
	assert_int_equal(vsock_backlog_len(&b), 0);
}

/* overhead 0: bytes only. No limit, nothing recorded, nothing
 * allocated. */
static void test_off(void **state)
{
	struct vsock_backlog b;

	(void)state;
	vsock_backlog_init(&b, 0);
	assert_int_equal(vsock_backlog_limit(&b, 262144), UINT32_MAX);
	assert_int_equal(vsock_backlog_room(&b, 0), UINT32_MAX);
	assert_int_equal(vsock_backlog_reserve(&b, 100000), 0);
	vsock_backlog_push(&b, 100);
	assert_int_equal(vsock_backlog_len(&b), 0);
	assert_null(b.end);
	vsock_backlog_consumed(&b, 100);
	vsock_backlog_free(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_limit),
		cmocka_unit_test(test_room),
		cmocka_unit_test(test_consumed),
		cmocka_unit_test(test_counters_wrap),
		cmocka_unit_test(test_grow_keeps_order),
		cmocka_unit_test(test_full),
		cmocka_unit_test(test_off),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
