/* util/wire's writer calls that the records patch and pad with: a patch
 * lands on a u32 written before, and one past the record's end fails the
 * writer instead of writing past its buffer. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "util/wire.h"

static void test_patch_and_zeros(void **state)
{
	static const uint8_t want[] = { 0xaa, 0, 0, 0x78, 0x56, 0x34, 0x12,
					1, 0, 0, 0 };
	struct vmio_wire_writer w;

	(void)state;
	vmio_wire_writer_init(&w, 0);
	vmio_wire_put_u8(&w, 0xaa);
	vmio_wire_put_zeros(&w, 2);
	vmio_wire_put_u32(&w, 0);
	vmio_wire_put_u32(&w, 1);
	vmio_wire_patch_u32(&w, 3, 0x12345678);
	assert_false(w.failed);
	assert_int_equal(w.len, sizeof(want));
	assert_memory_equal(w.buf, want, sizeof(want));
	vmio_wire_writer_fini(&w);
}

static void test_patch_past_the_end_fails(void **state)
{
	struct vmio_wire_writer w;

	(void)state;
	vmio_wire_writer_init(&w, 0);
	vmio_wire_put_u32(&w, 7);
	vmio_wire_patch_u32(&w, 1, 0);
	assert_true(w.failed);
	vmio_wire_writer_fini(&w);
	vmio_wire_writer_init(&w, 0);
	vmio_wire_patch_u32(&w, SIZE_MAX - 1, 0);
	assert_true(w.failed);
	vmio_wire_writer_fini(&w);
}

static void test_zeros_past_max_fail(void **state)
{
	struct vmio_wire_writer w;

	(void)state;
	vmio_wire_writer_init(&w, 4);
	vmio_wire_put_zeros(&w, 4);
	assert_false(w.failed);
	vmio_wire_put_zeros(&w, 1);
	assert_true(w.failed);
	assert_int_equal(w.len, 4);
	vmio_wire_writer_fini(&w);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_patch_and_zeros),
		cmocka_unit_test(test_patch_past_the_end_fails),
		cmocka_unit_test(test_zeros_past_max_fail),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
