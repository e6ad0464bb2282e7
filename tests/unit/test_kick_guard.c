/* The idle-kick budget (vhost-user/kick_guard.h) on a clock the test
 * moves: idle kicks served up to the burst, then the mute; looks that
 * back off while the kicks go on, and the kick fd back at the first look
 * that finds work or no kick; the bucket refilled by time and by kicks
 * that brought work; rate 0 never muting; the option's syntax; and the
 * counters as --control writes them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "util/json.h"
#include "vhost-user/kick_guard.h"

#define MS 1000000ull

static struct vmio_kick_guard g;

static void start(uint32_t rate, uint32_t burst, uint64_t now)
{
	struct vmio_kick_budget b = { rate, burst };

	memset(&g, 0, sizeof(g));
	vmio_kick_guard_start(&g, &b, now);
}

static uint64_t stat(const atomic_uint_fast64_t *c)
{
	return atomic_load(c);
}

/* n idle kicks at now, all served. */
static void idle_kicks_served(unsigned n, uint64_t now)
{
	for (unsigned i = 0; i < n; i++)
		assert_false(vmio_kick_guard_kick(&g, now, false));
}

static void test_burst_then_mute(void **state)
{
	start(1000, 4, 10 * MS);
	idle_kicks_served(4, 10 * MS);
	assert_true(vmio_kick_guard_kick(&g, 10 * MS, false));
	assert_int_equal(vmio_kick_guard_delay(&g), VMIO_KICK_POLL_MIN_NS);
	assert_int_equal(stat(&g.stats.kicks), 5);
	assert_int_equal(stat(&g.stats.idle_kicks), 5);
	assert_int_equal(stat(&g.stats.mutes), 1);
	assert_int_equal(stat(&g.stats.muted_since), 10 * MS);
}

/* Kicks that bring work are never muted, and each earns an idle kick. */
static void test_work_earns(void **state)
{
	start(1000, 4, 0);
	for (unsigned i = 0; i < 100; i++)
		assert_false(vmio_kick_guard_kick(&g, 0, true));
	idle_kicks_served(4, 0);
	assert_false(vmio_kick_guard_kick(&g, 0, true));
	idle_kicks_served(1, 0);
	assert_true(vmio_kick_guard_kick(&g, 0, false));
	assert_int_equal(stat(&g.stats.idle_kicks), 6);
}

/* One idle kick a millisecond at rate 1000, the bucket at most burst. */
static void test_refill_by_time(void **state)
{
	start(1000, 4, 0);
	idle_kicks_served(4, 0);
	idle_kicks_served(1, 1 * MS);
	assert_true(vmio_kick_guard_kick(&g, 1 * MS, false));
	start(1000, 4, 0);
	idle_kicks_served(4, 0);
	idle_kicks_served(4, 1000 * MS);
	assert_true(vmio_kick_guard_kick(&g, 1000 * MS, false));
}

/* While the kicks go on with nothing new, the looks back off to the
 * most; a look that finds no kick, or work, gives the kick fd back. */
static void test_looks(void **state)
{
	uint64_t t0 = 100 * MS, t = t0, d = VMIO_KICK_POLL_MIN_NS;

	start(1000, 1, t0);
	idle_kicks_served(1, t0);
	assert_true(vmio_kick_guard_kick(&g, t0, false));
	for (unsigned i = 0; i < 10; i++) {
		assert_int_equal(vmio_kick_guard_delay(&g), d);
		t += d;
		assert_false(vmio_kick_guard_look(&g, t, false, true));
		d = d * 2 < VMIO_KICK_POLL_MAX_NS ? d * 2 : VMIO_KICK_POLL_MAX_NS;
	}
	assert_int_equal(vmio_kick_guard_delay(&g), VMIO_KICK_POLL_MAX_NS);
	assert_true(vmio_kick_guard_look(&g, t + 5 * MS, false, false));
	assert_int_equal(stat(&g.stats.looks), 11);
	assert_int_equal(stat(&g.stats.muted_ns), t + 5 * MS - t0);
	assert_int_equal(stat(&g.stats.muted_since), 0);
	/* The bucket filled while muted: the storm is heard again. */
	idle_kicks_served(1, t + 5 * MS);

	/* Work at the first look, kicks or not. */
	assert_true(vmio_kick_guard_kick(&g, t + 5 * MS, false));
	assert_true(vmio_kick_guard_look(&g, t + 6 * MS, true, true));
	assert_int_equal(stat(&g.stats.mutes), 2);
}

static void test_off(void **state)
{
	start(0, 1, 0);
	idle_kicks_served(100000, 0);
	assert_int_equal(stat(&g.stats.idle_kicks), 100000);
	assert_int_equal(stat(&g.stats.mutes), 0);
}

/* A stop while muted ends the mute, counted. */
static void test_stop_muted(void **state)
{
	start(1000, 1, 3 * MS);
	idle_kicks_served(1, 3 * MS);
	assert_true(vmio_kick_guard_kick(&g, 3 * MS, false));
	vmio_kick_guard_stop(&g, 7 * MS);
	assert_int_equal(stat(&g.stats.muted_ns), 4 * MS);
	assert_int_equal(stat(&g.stats.muted_since), 0);
	assert_false(g.muted);
}

static void test_parse(void **state)
{
	struct vmio_kick_budget b;
	static const char *const bad[] = { "", "x", "-1", "1:", ":5", "1:0",
					   "1:x", "2000 ", "1000001",
					   "1:1000001", "1:2:3", "+5" };

	assert_int_equal(vmio_kick_budget_parse("2000", &b), 0);
	assert_int_equal(b.rate, 2000);
	assert_int_equal(b.burst, VMIO_KICK_IDLE_BURST);
	assert_int_equal(vmio_kick_budget_parse("0", &b), 0);
	assert_int_equal(b.rate, 0);
	assert_int_equal(vmio_kick_budget_parse("50:7", &b), 0);
	assert_int_equal(b.rate, 50);
	assert_int_equal(b.burst, 7);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(vmio_kick_budget_parse(bad[i], &b), -1);
}

static void test_stats_write(void **state)
{
	struct vmio_json j;
	const char *want;

	start(1000, 1, 1 * MS);
	idle_kicks_served(1, 1 * MS);
	assert_true(vmio_kick_guard_kick(&g, 1 * MS, false));
	vmio_json_init(&j, 1024);
	vmio_json_object_begin(&j);
	vmio_kick_stats_write(&g.stats, 4 * MS, &j);
	vmio_json_object_end(&j);
	want = "{\"kicks\":2,\"idle_kicks\":2,\"kick_holds\":1,"
	       "\"kick_looks\":0,\"kick_held_ms\":3,"
	       "\"held_back\":\"idle-kicks\"}";
	assert_false(j.truncated);
	assert_int_equal(j.len, strlen(want));
	assert_memory_equal(j.buf, want, j.len);
	vmio_json_fini(&j);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_burst_then_mute),
		cmocka_unit_test(test_work_earns),
		cmocka_unit_test(test_refill_by_time),
		cmocka_unit_test(test_looks),
		cmocka_unit_test(test_off),
		cmocka_unit_test(test_stop_muted),
		cmocka_unit_test(test_parse),
		cmocka_unit_test(test_stats_write),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
