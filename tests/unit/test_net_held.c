/* The held-buffer table of the no-copy path: what goes in comes out once,
 * by address, duplicates included, and it never holds more than asked. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "devices/net/held.h"

static void test_put_take(void **state)
{
	struct vnet_held h;
	struct vnet_held_entry e;
	int buf;

	assert_int_equal(vnet_held_init(&h, 4), 0);
	assert_true(vnet_held_put(&h, 0x1000, 7, &buf));
	assert_false(vnet_held_take(&h, 0x2000, &e));
	assert_true(vnet_held_take(&h, 0x1000, &e));
	assert_int_equal(e.cookie, 7);
	assert_ptr_equal(e.buf, &buf);
	assert_false(vnet_held_take(&h, 0x1000, &e));
	assert_int_equal(h.count, 0);
	vnet_held_free(&h);
}

static void test_capacity(void **state)
{
	struct vnet_held h;
	struct vnet_held_entry e;

	assert_int_equal(vnet_held_init(&h, 3), 0);
	for (uint32_t i = 0; i < 3; i++)
		assert_true(vnet_held_put(&h, 4096ull * i, i, NULL));
	assert_false(vnet_held_put(&h, 99, 99, NULL));
	assert_true(vnet_held_take(&h, 4096, &e));
	assert_true(vnet_held_put(&h, 99, 99, NULL));
	vnet_held_free(&h);
}

/* A guest may post one buffer twice: both come back. */
static void test_duplicates(void **state)
{
	struct vnet_held h;
	struct vnet_held_entry e;
	uint32_t seen = 0;

	assert_int_equal(vnet_held_init(&h, 8), 0);
	assert_true(vnet_held_put(&h, 0x5000, 1, NULL));
	assert_true(vnet_held_put(&h, 0x5000, 2, NULL));
	assert_true(vnet_held_take(&h, 0x5000, &e));
	seen |= 1u << e.cookie;
	assert_true(vnet_held_take(&h, 0x5000, &e));
	seen |= 1u << e.cookie;
	assert_int_equal(seen, 6);
	assert_false(vnet_held_take(&h, 0x5000, &e));
	vnet_held_free(&h);
}

/* Many entries in a crowded table, taken in another order: every one
 * found (the backward shift on removal keeps probe runs whole). */
static void test_churn(void **state)
{
	enum { N = 1024 };
	struct vnet_held h;
	struct vnet_held_entry e;
	uint64_t *addr = malloc(N * sizeof(*addr));
	uint64_t x = 88172645463325252ull;

	assert_non_null(addr);
	assert_int_equal(vnet_held_init(&h, N), 0);
	for (unsigned round = 0; round < 4; round++) {
		for (unsigned i = 0; i < N; i++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			addr[i] = x & 0xffffff00ull;
			assert_true(vnet_held_put(&h, addr[i], i, NULL));
		}
		for (unsigned i = 0; i < N; i++) {
			unsigned k = (i * 7919u) % N;

			assert_true(vnet_held_take(&h, addr[k], &e));
			assert_int_equal(addr[e.cookie], addr[k]);
		}
		assert_int_equal(h.count, 0);
	}
	free(addr);
	vnet_held_free(&h);
}

static void test_take_any(void **state)
{
	struct vnet_held h;
	struct vnet_held_entry e;
	unsigned n = 0;

	assert_int_equal(vnet_held_init(&h, 16), 0);
	for (uint32_t i = 0; i < 10; i++)
		assert_true(vnet_held_put(&h, 100ull * i, i, NULL));
	while (vnet_held_take_any(&h, &e))
		n++;
	assert_int_equal(n, 10);
	assert_int_equal(h.count, 0);
	vnet_held_free(&h);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_put_take),
		cmocka_unit_test(test_capacity),
		cmocka_unit_test(test_duplicates),
		cmocka_unit_test(test_churn),
		cmocka_unit_test(test_take_any),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
