/* The byte ring every bounded byte queue in vmio keeps its bytes in:
 * pieces at the wrap, limits, and a put that does not fit changing
 * nothing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "util/byte_ring.h"

static uint8_t buf[16];
static struct vmio_byte_ring r;

static int setup(void **state)
{
	(void)state;
	memset(buf, 0, sizeof(buf));
	vmio_byte_ring_init(&r, buf, sizeof(buf));
	return 0;
}

/* Reads every held byte out through the data pieces. */
static size_t take_all(uint8_t *out)
{
	struct iovec iov[2];
	unsigned k = vmio_byte_ring_data(&r, SIZE_MAX, iov);
	size_t n = 0;

	for (unsigned i = 0; i < k; i++) {
		memcpy(out + n, iov[i].iov_base, iov[i].iov_len);
		n += iov[i].iov_len;
	}
	vmio_byte_ring_consumed(&r, n);
	return n;
}

static void test_empty(void **state)
{
	struct iovec iov[2];

	(void)state;
	assert_true(vmio_byte_ring_empty(&r));
	assert_int_equal(vmio_byte_ring_room(&r), 16);
	assert_int_equal(vmio_byte_ring_data(&r, SIZE_MAX, iov), 0);
	assert_int_equal(vmio_byte_ring_space(&r, SIZE_MAX, iov), 1);
	assert_ptr_equal(iov[0].iov_base, buf);
	assert_int_equal(iov[0].iov_len, 16);
	/* A limit of 0 is nothing, not everything. */
	assert_int_equal(vmio_byte_ring_space(&r, 0, iov), 0);
}

static void test_wraps_in_two_pieces(void **state)
{
	struct iovec iov[2];
	uint8_t out[16];

	(void)state;
	assert_int_equal(vmio_byte_ring_put(&r, "0123456789", 10), 0);
	vmio_byte_ring_consumed(&r, 8); /* head at 8, "89" held */
	assert_int_equal(vmio_byte_ring_pos(&r, 0), 8);
	/* Room: buf[10..16) then buf[0..8). */
	assert_int_equal(vmio_byte_ring_space(&r, SIZE_MAX, iov), 2);
	assert_ptr_equal(iov[0].iov_base, buf + 10);
	assert_int_equal(iov[0].iov_len, 6);
	assert_ptr_equal(iov[1].iov_base, buf);
	assert_int_equal(iov[1].iov_len, 8);
	/* A limit inside the first piece gives one. */
	assert_int_equal(vmio_byte_ring_space(&r, 4, iov), 1);
	assert_int_equal(iov[0].iov_len, 4);
	assert_int_equal(vmio_byte_ring_put(&r, "abcdefghij", 10), 0);
	assert_int_equal(vmio_byte_ring_len(&r), 12);
	assert_int_equal(vmio_byte_ring_data(&r, SIZE_MAX, iov), 2);
	assert_int_equal(iov[0].iov_len, 8);
	assert_int_equal(iov[1].iov_len, 4);
	/* The first max bytes only. */
	assert_int_equal(vmio_byte_ring_data(&r, 3, iov), 1);
	assert_int_equal(iov[0].iov_len, 3);
	assert_int_equal(take_all(out), 12);
	assert_memory_equal(out, "89abcdefghij", 12);
}

static void test_full_put_changes_nothing(void **state)
{
	struct iovec iov[2];

	(void)state;
	assert_int_equal(vmio_byte_ring_put(&r, "0123456789abcdef", 16), 0);
	assert_int_equal(vmio_byte_ring_room(&r), 0);
	assert_int_equal(vmio_byte_ring_space(&r, SIZE_MAX, iov), 0);
	assert_int_equal(vmio_byte_ring_put(&r, "x", 1), -1);
	vmio_byte_ring_consumed(&r, 1);
	assert_int_equal(vmio_byte_ring_put(&r, "xy", 2), -1);
	assert_int_equal(vmio_byte_ring_len(&r), 15);
	assert_int_equal(vmio_byte_ring_data(&r, SIZE_MAX, iov), 1);
	assert_memory_equal(iov[0].iov_base, "123456789abcdef", 15);
}

/* Emptied, it starts again at the buffer's start: the next fill is one
 * piece, however far the head had gone. */
static void test_emptied_restarts(void **state)
{
	struct iovec iov[2];

	(void)state;
	assert_int_equal(vmio_byte_ring_put(&r, "0123456789ab", 12), 0);
	vmio_byte_ring_consumed(&r, 12);
	assert_int_equal(vmio_byte_ring_space(&r, SIZE_MAX, iov), 1);
	assert_ptr_equal(iov[0].iov_base, buf);
	assert_int_equal(iov[0].iov_len, 16);
	/* Filled through the space pieces, as readv does. */
	memcpy(iov[0].iov_base, "hello", 5);
	vmio_byte_ring_produced(&r, 5);
	assert_int_equal(vmio_byte_ring_data(&r, SIZE_MAX, iov), 1);
	assert_memory_equal(iov[0].iov_base, "hello", 5);
}

/* Taken out across the wrap, or dropped (a truncated message's rest). */
static void test_take(void **state)
{
	uint8_t out[16] = { 0 };

	(void)state;
	assert_int_equal(vmio_byte_ring_put(&r, "0123456789ab", 12), 0);
	vmio_byte_ring_take(&r, out, 10);
	assert_memory_equal(out, "0123456789", 10);
	assert_int_equal(vmio_byte_ring_put(&r, "cdefghij", 8), 0);
	vmio_byte_ring_take(&r, NULL, 3); /* "abc" */
	vmio_byte_ring_take(&r, out, 7);
	assert_memory_equal(out, "defghij", 7);
	assert_true(vmio_byte_ring_empty(&r));
}

/* A message never completed goes back off the tail; the bytes before it
 * stay, and an emptied ring starts at the buffer's start again. */
static void test_unproduce(void **state)
{
	struct iovec iov[2];

	(void)state;
	assert_int_equal(vmio_byte_ring_put(&r, "0123456789abcd", 14), 0);
	vmio_byte_ring_consumed(&r, 12);
	assert_int_equal(vmio_byte_ring_put(&r, "efghij", 6), 0); /* wraps */
	vmio_byte_ring_unproduce(&r, 2);
	assert_int_equal(vmio_byte_ring_len(&r), 6);
	assert_int_equal(vmio_byte_ring_data(&r, SIZE_MAX, iov), 2);
	assert_memory_equal(iov[0].iov_base, "cdef", 4);
	assert_memory_equal(iov[1].iov_base, "gh", 2);
	vmio_byte_ring_unproduce(&r, 6);
	assert_true(vmio_byte_ring_empty(&r));
	assert_int_equal(vmio_byte_ring_space(&r, SIZE_MAX, iov), 1);
	assert_ptr_equal(iov[0].iov_base, buf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_empty, setup),
		cmocka_unit_test_setup(test_wraps_in_two_pieces, setup),
		cmocka_unit_test_setup(test_full_put_changes_nothing, setup),
		cmocka_unit_test_setup(test_emptied_restarts, setup),
		cmocka_unit_test_setup(test_take, setup),
		cmocka_unit_test_setup(test_unproduce, setup),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
