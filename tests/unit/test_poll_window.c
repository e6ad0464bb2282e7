/* The polling policy (virtio/poll_window.h): a dry ring is looked at
 * again only within a window after work, the window restarts with work,
 * and nothing opens it but work. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "virtio/poll_window.h"

#define W 50000 /* the window, ns */

/* Window 0 (--poll-us 0): never again, work or not. */
static void test_off(void **state)
{
	struct vmio_poll_window p;

	vmio_poll_window_init(&p, 0);
	vmio_poll_window_worked(&p);
	assert_false(vmio_poll_window_dry(&p, 1000));
	assert_false(vmio_poll_window_dry(&p, 1001));
}

/* A wake-up that finds nothing (a late kick, the first look) opens no
 * window: an idle queue sleeps at once. */
static void test_no_work_no_window(void **state)
{
	struct vmio_poll_window p;

	vmio_poll_window_init(&p, W);
	assert_false(vmio_poll_window_dry(&p, 1000));
	assert_false(p.polling);
	assert_false(vmio_poll_window_dry(&p, 1000 + W / 2));
}

/* After work the ring is looked at until the window ends, and no
 * longer; then it sleeps until work comes again. */
static void test_window_ends(void **state)
{
	struct vmio_poll_window p;

	vmio_poll_window_init(&p, W);
	vmio_poll_window_worked(&p);
	assert_true(vmio_poll_window_dry(&p, 1000));
	assert_true(vmio_poll_window_dry(&p, 1000 + 1));
	assert_true(vmio_poll_window_dry(&p, 1000 + W - 1));
	assert_false(vmio_poll_window_dry(&p, 1000 + W));
	assert_false(p.polling);
	/* Asleep: a look without work stays asleep, even soon after. */
	assert_false(vmio_poll_window_dry(&p, 1000 + W + 1));
}

/* Work found during the window starts a new one from the next dry
 * look: steady traffic with gaps shorter than the window keeps the
 * queue polling. */
static void test_work_restarts(void **state)
{
	struct vmio_poll_window p;
	uint64_t t = 1000;

	vmio_poll_window_init(&p, W);
	for (int i = 0; i < 100; i++) {
		vmio_poll_window_worked(&p);
		assert_true(vmio_poll_window_dry(&p, t));
		t += W - 1;
		assert_true(vmio_poll_window_dry(&p, t));
	}
	assert_false(vmio_poll_window_dry(&p, t + 1));
}

/* Work flags are used once: work before one dry look does not keep a
 * later window open. */
static void test_worked_consumed(void **state)
{
	struct vmio_poll_window p;

	vmio_poll_window_init(&p, W);
	vmio_poll_window_worked(&p);
	assert_true(vmio_poll_window_dry(&p, 0));
	assert_false(vmio_poll_window_dry(&p, W));
	assert_false(vmio_poll_window_dry(&p, W + 1));
}

/* A queue that stops closes its window and forgets its work. */
static void test_end(void **state)
{
	struct vmio_poll_window p;

	vmio_poll_window_init(&p, W);
	vmio_poll_window_worked(&p);
	assert_true(vmio_poll_window_dry(&p, 0));
	vmio_poll_window_worked(&p);
	vmio_poll_window_end(&p);
	assert_false(vmio_poll_window_dry(&p, 1));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_off),
		cmocka_unit_test(test_no_work_no_window),
		cmocka_unit_test(test_window_ends),
		cmocka_unit_test(test_work_restarts),
		cmocka_unit_test(test_worked_consumed),
		cmocka_unit_test(test_end),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
