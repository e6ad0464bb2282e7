/* The net polling policy (devices/net/poll.h): a dry ring is looked at
 * again only within a window after work, the window restarts with work,
 * and nothing opens it but work. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "devices/net/poll.h"

#define W 50000 /* the window, ns */

/* Window 0 (--poll-us 0): never again, work or not. */
static void test_off(void **state)
{
	struct vnet_poll p;

	vnet_poll_init(&p, 0);
	vnet_poll_worked(&p);
	assert_false(vnet_poll_dry(&p, 1000));
	assert_false(vnet_poll_dry(&p, 1001));
}

/* A wake-up that finds nothing (a late kick, the first look) opens no
 * window: an idle queue sleeps at once. */
static void test_no_work_no_window(void **state)
{
	struct vnet_poll p;

	vnet_poll_init(&p, W);
	assert_false(vnet_poll_dry(&p, 1000));
	assert_false(p.polling);
	assert_false(vnet_poll_dry(&p, 1000 + W / 2));
}

/* After work the ring is looked at until the window ends, and no
 * longer; then it sleeps until work comes again. */
static void test_window_ends(void **state)
{
	struct vnet_poll p;

	vnet_poll_init(&p, W);
	vnet_poll_worked(&p);
	assert_true(vnet_poll_dry(&p, 1000));
	assert_true(vnet_poll_dry(&p, 1000 + 1));
	assert_true(vnet_poll_dry(&p, 1000 + W - 1));
	assert_false(vnet_poll_dry(&p, 1000 + W));
	assert_false(p.polling);
	/* Asleep: a look without work stays asleep, even soon after. */
	assert_false(vnet_poll_dry(&p, 1000 + W + 1));
}

/* Work found during the window starts a new one from the next dry
 * look: steady traffic with gaps shorter than the window keeps the
 * queue polling. */
static void test_work_restarts(void **state)
{
	struct vnet_poll p;
	uint64_t t = 1000;

	vnet_poll_init(&p, W);
	for (int i = 0; i < 100; i++) {
		vnet_poll_worked(&p);
		assert_true(vnet_poll_dry(&p, t));
		t += W - 1;
		assert_true(vnet_poll_dry(&p, t));
	}
	assert_false(vnet_poll_dry(&p, t + 1));
}

/* Work flags are used once: work before one dry look does not keep a
 * later window open. */
static void test_worked_consumed(void **state)
{
	struct vnet_poll p;

	vnet_poll_init(&p, W);
	vnet_poll_worked(&p);
	assert_true(vnet_poll_dry(&p, 0));
	assert_false(vnet_poll_dry(&p, W));
	assert_false(vnet_poll_dry(&p, W + 1));
}

/* A queue that stops closes its window and forgets its work. */
static void test_end(void **state)
{
	struct vnet_poll p;

	vnet_poll_init(&p, W);
	vnet_poll_worked(&p);
	assert_true(vnet_poll_dry(&p, 0));
	vnet_poll_worked(&p);
	vnet_poll_end(&p);
	assert_false(vnet_poll_dry(&p, 1));
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
