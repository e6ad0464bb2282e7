/* Worker threads: each loop runs on its own thread, work posted across
 * them runs where it belongs, one stop ends them all, and --cpus pins. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>

#include "event/workers.h"

#define NWORKERS 3
#define HOPS 3000

struct hop {
	struct vmio_defer d;
	struct vmio_workers *pool;
	struct hop *next;  /* the next worker's */
	unsigned *left;    /* hops still to go, all workers' (atomic) */
	pthread_t thread;  /* where this worker's hops ran */
	unsigned runs;
	bool wrong_thread; /* a hop ran on another thread than before */
	bool not_current;  /* or outside its loop's dispatch */
	char name[16];
	int cpu;
};

/* Runs on one worker, and hands the token to the next. */
static void hop_cb(void *opaque)
{
	struct hop *h = opaque;

	if (!h->runs) {
		h->thread = pthread_self();
		pthread_getname_np(h->thread, h->name, sizeof(h->name));
	} else if (!pthread_equal(h->thread, pthread_self())) {
		h->wrong_thread = true;
	}
	if (!vmio_loop_is_current(h->d.loop))
		h->not_current = true;
	h->cpu = sched_getcpu();
	h->runs++;
	if (__atomic_sub_fetch(h->left, 1, __ATOMIC_ACQ_REL) == 0)
		vmio_workers_stop(h->pool);
	else
		vmio_defer_post(&h->next->d);
}

static void ring(struct vmio_workers *pool, struct hop *h, unsigned n,
		 unsigned *left)
{
	for (unsigned k = 0; k < n; k++) {
		h[k] = (struct hop){ .pool = pool, .next = &h[(k + 1) % n],
				     .left = left };
		vmio_defer_init(&h[k].d, vmio_workers_loop(pool, k), hop_cb,
				&h[k]);
	}
}

static void test_token_ring(void **state)
{
	struct vmio_workers *pool = vmio_workers_new(NWORKERS, NULL, 0);
	struct hop h[NWORKERS];
	unsigned left = HOPS;

	assert_non_null(pool);
	assert_int_equal(vmio_workers_count(pool), NWORKERS);
	ring(pool, h, NWORKERS, &left);
	/* Posted before the workers start: it waits for worker 0's run. */
	vmio_defer_post(&h[0].d);
	assert_int_equal(vmio_workers_start(pool), 0);
	assert_int_equal(vmio_workers_run(pool), 0);
	assert_int_equal(left, 0);
	for (unsigned k = 0; k < NWORKERS; k++) {
		char want[16];

		assert_int_equal(h[k].runs, HOPS / NWORKERS);
		assert_false(h[k].wrong_thread);
		assert_false(h[k].not_current);
		for (unsigned j = 0; j < k; j++)
			assert_false(pthread_equal(h[j].thread, h[k].thread));
		if (k) {
			snprintf(want, sizeof(want), "vmio-w%u", k);
			assert_string_equal(h[k].name, want);
		}
	}
	/* Worker 0 is the caller. */
	assert_true(pthread_equal(h[0].thread, pthread_self()));
	vmio_workers_free(pool);
}

static void test_pinned(void **state)
{
	/* Every worker on the first CPU this process may use. */
	cpu_set_t set;
	unsigned cpu = 0;
	struct vmio_workers *pool;
	struct hop h[2];
	unsigned left = 20;

	assert_int_equal(sched_getaffinity(0, sizeof(set), &set), 0);
	while (!CPU_ISSET(cpu, &set))
		cpu++;
	pool = vmio_workers_new(2, &cpu, 1);
	assert_non_null(pool);
	ring(pool, h, 2, &left);
	vmio_defer_post(&h[1].d);
	assert_int_equal(vmio_workers_start(pool), 0);
	assert_int_equal(vmio_workers_run(pool), 0);
	assert_int_equal(h[0].cpu, (int)cpu);
	assert_int_equal(h[1].cpu, (int)cpu);
	/* The caller's own affinity is worker 0's now: give it back. */
	assert_int_equal(sched_setaffinity(0, sizeof(set), &set), 0);
	vmio_workers_free(pool);
}

static void test_bounds(void **state)
{
	assert_null(vmio_workers_new(0, NULL, 0));
	assert_null(vmio_workers_new(VMIO_MAX_WORKERS + 1, NULL, 0));
	assert_true(vmio_cpus_allowed() >= 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_token_ring),
		cmocka_unit_test(test_pinned),
		cmocka_unit_test(test_bounds),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
