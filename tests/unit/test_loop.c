/* The event loop: dispatch, removal during dispatch, stale events;
 * timers and deferred work; a clock the test moves; what another thread
 * may do (post, stop). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "event/loop.h"
#include "util/clock.h"

struct counter {
	struct vmio_loop *loop;
	int calls;
	int remove_fd; /* fd to remove from inside the callback, or -1 */
};

static void count_cb(void *opaque, int fd, uint32_t events)
{
	struct counter *c = opaque;
	uint64_t v;
	c->calls++;
	if (read(fd, &v, sizeof(v)) < 0)
		fail_msg("eventfd read failed");
	if (c->remove_fd >= 0)
		vmio_loop_remove(c->loop, c->remove_fd);
}

static void signal_fd(int fd)
{
	uint64_t one = 1;
	assert_int_equal(write(fd, &one, sizeof(one)), sizeof(one));
}

static void test_dispatch_and_remove(void **state)
{
	struct vmio_loop *loop = vmio_loop_new();
	int fd = eventfd(0, EFD_NONBLOCK);
	struct counter c = { .loop = loop, .remove_fd = -1 };

	assert_int_equal(vmio_loop_add(loop, fd, EPOLLIN, count_cb, &c), 0);
	assert_int_equal(vmio_loop_add(loop, fd, EPOLLIN, count_cb, &c), -EEXIST);
	assert_int_equal(vmio_loop_run_once(loop, 0), 0);
	signal_fd(fd);
	assert_int_equal(vmio_loop_run_once(loop, 1000), 1);
	assert_int_equal(c.calls, 1);

	vmio_loop_remove(loop, fd);
	signal_fd(fd);
	assert_int_equal(vmio_loop_run_once(loop, 0), 0);
	assert_int_equal(c.calls, 1);
	vmio_loop_remove(loop, fd); /* second removal is a no-op */

	close(fd);
	vmio_loop_free(loop);
}

static void test_remove_other_during_dispatch(void **state)
{
	/* Two fds ready in one batch; the first callback removes the second:
	 * the second must not run. */
	struct vmio_loop *loop = vmio_loop_new();
	int a = eventfd(0, EFD_NONBLOCK), b = eventfd(0, EFD_NONBLOCK);
	struct counter ca = { .loop = loop, .remove_fd = b };
	struct counter cb = { .loop = loop, .remove_fd = a };

	assert_int_equal(vmio_loop_add(loop, a, EPOLLIN, count_cb, &ca), 0);
	assert_int_equal(vmio_loop_add(loop, b, EPOLLIN, count_cb, &cb), 0);
	signal_fd(a);
	signal_fd(b);
	assert_int_equal(vmio_loop_run_once(loop, 1000), 1);
	assert_int_equal(ca.calls + cb.calls, 1);

	close(a);
	close(b);
	vmio_loop_free(loop);
}

static void test_modify_and_errors(void **state)
{
	struct vmio_loop *loop = vmio_loop_new();
	int fd = eventfd(0, EFD_NONBLOCK);
	struct counter c = { .loop = loop, .remove_fd = -1 };

	assert_int_equal(vmio_loop_modify(loop, fd, EPOLLIN), -ENOENT);
	assert_int_equal(vmio_loop_add(loop, -1, EPOLLIN, count_cb, &c), -EINVAL);
	assert_int_equal(vmio_loop_add(loop, fd, 0, count_cb, &c), 0);
	signal_fd(fd);
	assert_int_equal(vmio_loop_run_once(loop, 0), 0);
	assert_int_equal(vmio_loop_modify(loop, fd, EPOLLIN), 0);
	assert_int_equal(vmio_loop_run_once(loop, 1000), 1);
	assert_int_equal(c.calls, 1);

	close(fd);
	vmio_loop_free(loop);
}

static void stop_cb(void *opaque, int fd, uint32_t events)
{
	uint64_t v;
	if (read(fd, &v, sizeof(v)) < 0)
		fail_msg("eventfd read failed");
	vmio_loop_stop(opaque);
}

static void test_run_until_stop(void **state)
{
	struct vmio_loop *loop = vmio_loop_new();
	int fd = eventfd(0, EFD_NONBLOCK);
	assert_int_equal(vmio_loop_add(loop, fd, EPOLLIN, stop_cb, loop), 0);
	signal_fd(fd);
	assert_int_equal(vmio_loop_run(loop), 0);
	close(fd);
	vmio_loop_free(loop);
}

/* ---- Timers ------------------------------------------------------------ */

struct tick {
	struct vmio_timer t;
	int calls;
	uint64_t fired_ns;
	int order;       /* position among the timers that fired */
	int *next_order; /* shared counter */
	struct vmio_timer *cancel; /* timer to cancel from the callback */
	uint64_t rearm_ns;         /* re-arm itself with this delay, once */
};

static void tick_cb(void *opaque)
{
	struct tick *k = opaque;

	k->calls++;
	k->fired_ns = vmio_loop_now_ns(k->t.loop);
	if (k->next_order)
		k->order = (*k->next_order)++;
	if (k->cancel)
		vmio_timer_cancel(k->cancel);
	if (k->rearm_ns) {
		uint64_t d = k->rearm_ns;
		k->rearm_ns = 0;
		vmio_timer_arm_ns(&k->t, d);
	}
}

/* Runs the loop until cond holds or 5 s pass; returns whether it held. */
#define RUN_UNTIL(loop, cond)                                                  \
	({                                                                     \
		uint64_t end_ = vmio_now_ns() + 5000000000u;                   \
		while (!(cond) && vmio_now_ns() < end_)                        \
			vmio_loop_run_once(loop, 100);                         \
		(bool)(cond);                                                  \
	})

static void test_timer_one_shot(void **state)
{
	struct vmio_loop *loop = vmio_loop_new();
	struct tick k = { 0 };

	assert_int_equal(vmio_timer_init(&k.t, loop, tick_cb, &k), 0);
	assert_false(vmio_timer_armed(&k.t));
	uint64_t start = vmio_now_ns();
	vmio_timer_arm_ms(&k.t, 20);
	assert_true(vmio_timer_armed(&k.t));
	assert_true(RUN_UNTIL(loop, k.calls == 1));
	assert_true(k.fired_ns - start >= 20000000u);
	assert_false(vmio_timer_armed(&k.t));
	/* Once: a further turn runs nothing. */
	assert_int_equal(vmio_loop_run_once(loop, 50), 0);
	assert_int_equal(k.calls, 1);
	vmio_timer_fini(&k.t);
	vmio_loop_free(loop);
}

static void test_timer_periodic_and_cancel(void **state)
{
	struct vmio_loop *loop = vmio_loop_new();
	struct tick k = { 0 };

	assert_int_equal(vmio_timer_init(&k.t, loop, tick_cb, &k), 0);
	vmio_timer_arm_periodic_ns(&k.t, 2000000u);
	assert_true(RUN_UNTIL(loop, k.calls >= 5));
	assert_true(vmio_timer_armed(&k.t));
	vmio_timer_cancel(&k.t);
	int calls = k.calls;
	assert_int_equal(vmio_loop_run_once(loop, 20), 0);
	assert_int_equal(k.calls, calls);
	vmio_timer_fini(&k.t);
	vmio_loop_free(loop);
}

static void test_timers_fire_in_deadline_order(void **state)
{
	enum { N = 40 };
	struct vmio_loop *loop = vmio_loop_new();
	struct tick k[N];
	int next = 0;

	memset(k, 0, sizeof(k));
	for (int i = 0; i < N; i++) {
		assert_int_equal(vmio_timer_init(&k[i].t, loop, tick_cb, &k[i]),
				 0);
		k[i].next_order = &next;
	}
	/* Armed out of order (and one moved), deadlines 1 ms apart. */
	for (int i = 0; i < N; i++) {
		int j = (i * 7) % N;
		vmio_timer_arm_ns(&k[j].t, (uint64_t)(j + 1) * 1000000u);
	}
	vmio_timer_arm_ns(&k[0].t, (uint64_t)(N + 5) * 1000000u);
	assert_true(RUN_UNTIL(loop, next == N));
	for (int i = 1; i < N; i++)
		assert_int_equal(k[i].order, i - 1);
	assert_int_equal(k[0].order, N - 1);
	for (int i = 0; i < N; i++) {
		assert_int_equal(k[i].calls, 1);
		vmio_timer_fini(&k[i].t);
	}
	vmio_loop_free(loop);
}

static void test_timer_callback_cancels_another(void **state)
{
	/* Both due in one pass; the first cancels the second, which must not
	 * run. */
	struct vmio_loop *loop = vmio_loop_new();
	struct tick a = { 0 }, b = { 0 };

	assert_int_equal(vmio_timer_init(&a.t, loop, tick_cb, &a), 0);
	assert_int_equal(vmio_timer_init(&b.t, loop, tick_cb, &b), 0);
	a.cancel = &b.t;
	vmio_timer_arm_ns(&a.t, 1000000u);
	vmio_timer_arm_ns(&b.t, 1000001u);
	usleep(3000); /* both are due before the loop looks */
	assert_true(RUN_UNTIL(loop, a.calls == 1));
	assert_int_equal(b.calls, 0);
	assert_false(vmio_timer_armed(&b.t));
	vmio_timer_fini(&a.t);
	vmio_timer_fini(&b.t);
	vmio_loop_free(loop);
}

static void test_timer_rearm_zero_waits_a_pass(void **state)
{
	/* A callback that re-arms itself with no delay runs again on a later
	 * pass, not in a loop inside this one. */
	struct vmio_loop *loop = vmio_loop_new();
	struct tick k = { .rearm_ns = 0 };

	assert_int_equal(vmio_timer_init(&k.t, loop, tick_cb, &k), 0);
	k.rearm_ns = 1; /* re-arm once, 1 ns later */
	vmio_timer_arm_ns(&k.t, 0);
	assert_true(RUN_UNTIL(loop, k.calls >= 1));
	assert_int_equal(k.calls, 1);
	assert_true(vmio_timer_armed(&k.t));
	assert_true(RUN_UNTIL(loop, k.calls == 2));
	vmio_timer_fini(&k.t);
	/* fini on a zeroed, never initialised timer is harmless. */
	struct vmio_timer zero = { 0 };
	assert_false(vmio_timer_armed(&zero));
	vmio_timer_fini(&zero);
	vmio_loop_free(loop);
}

/* ---- A clock the test moves -------------------------------------------- */

static uint64_t test_clock_now(void *opaque)
{
	return *(const uint64_t *)opaque;
}

/* The clock starts far from 0 and from CLOCK_MONOTONIC: a timer that
 * fired on the real clock would fire far too early or never. */
#define CLOCK_START 5000000000000000ull

static void test_own_clock_decides_when_timers_fire(void **state)
{
	struct vmio_loop *loop = vmio_loop_new();
	uint64_t now = CLOCK_START;
	struct tick k = { 0 };

	assert_int_equal(vmio_loop_set_clock(loop, test_clock_now, &now), 0);
	assert_true(vmio_loop_now_ns(loop) == CLOCK_START);
	assert_int_equal(vmio_timer_init(&k.t, loop, tick_cb, &k), 0);
	vmio_timer_arm_ms(&k.t, 20);
	/* Real time passing moves nothing. */
	usleep(30000);
	assert_int_equal(vmio_loop_run_once(loop, 0), 0);
	now += 19999999u;
	assert_int_equal(vmio_loop_run_once(loop, 0), 0);
	assert_int_equal(k.calls, 0);
	/* Due: the next turn runs it, and does not wait the 10 s asked. */
	now += 1;
	uint64_t start = vmio_now_ns();
	assert_int_equal(vmio_loop_run_once(loop, 10000), 1);
	assert_true(vmio_now_ns() - start < 5000000000u);
	assert_int_equal(k.calls, 1);
	assert_true(k.fired_ns == CLOCK_START + 20000000u);
	assert_false(vmio_timer_armed(&k.t));
	vmio_timer_fini(&k.t);
	vmio_loop_free(loop);
}

static void test_own_clock_periodic_skips_missed_ticks(void **state)
{
	struct vmio_loop *loop = vmio_loop_new();
	uint64_t now = CLOCK_START;
	struct tick k = { 0 };

	assert_int_equal(vmio_loop_set_clock(loop, test_clock_now, &now), 0);
	assert_int_equal(vmio_timer_init(&k.t, loop, tick_cb, &k), 0);
	vmio_timer_arm_periodic_ns(&k.t, 100);
	/* 3.5 periods at once: one call, and the next a period from now. */
	now += 350;
	assert_int_equal(vmio_loop_run_once(loop, 0), 1);
	assert_int_equal(vmio_loop_run_once(loop, 0), 0);
	now += 99;
	assert_int_equal(vmio_loop_run_once(loop, 0), 0);
	now += 1;
	assert_int_equal(vmio_loop_run_once(loop, 0), 1);
	assert_int_equal(k.calls, 2);
	vmio_timer_fini(&k.t);
	vmio_loop_free(loop);
}

static void test_own_clock_leaves_the_timerfd_alone(void **state)
{
	/* A deadline on the loop's clock is no time on CLOCK_MONOTONIC: set
	 * there (1 s after boot, long past) it would wake every turn. */
	struct vmio_loop *loop = vmio_loop_new();
	uint64_t now = 1000000000u;
	struct tick k = { 0 };

	assert_int_equal(vmio_loop_set_clock(loop, test_clock_now, &now), 0);
	assert_int_equal(vmio_timer_init(&k.t, loop, tick_cb, &k), 0);
	vmio_timer_arm_ms(&k.t, 1);
	uint64_t start = vmio_now_ns();
	assert_int_equal(vmio_loop_run_once(loop, 100), 0);
	assert_true(vmio_now_ns() - start >= 90000000u);
	assert_int_equal(k.calls, 0);
	vmio_timer_fini(&k.t);
	vmio_loop_free(loop);
}

static void rearm_now_cb(void *opaque)
{
	struct tick *k = opaque;

	k->calls++;
	vmio_timer_arm_ns(&k->t, 0);
}

static void test_own_clock_rearm_zero_waits_a_turn(void **state)
{
	/* A timer that re-arms itself with no delay is due again at once,
	 * with the clock standing still: it runs once a turn, not in a loop
	 * inside one, and the turn does not wait. */
	struct vmio_loop *loop = vmio_loop_new();
	uint64_t now = CLOCK_START;
	struct tick k = { 0 };

	assert_int_equal(vmio_loop_set_clock(loop, test_clock_now, &now), 0);
	assert_int_equal(vmio_timer_init(&k.t, loop, rearm_now_cb, &k), 0);
	vmio_timer_arm_ns(&k.t, 0);
	uint64_t start = vmio_now_ns();
	for (int i = 1; i <= 3; i++) {
		assert_int_equal(vmio_loop_run_once(loop, 10000), 1);
		assert_int_equal(k.calls, i);
	}
	assert_true(vmio_now_ns() - start < 5000000000u);
	vmio_timer_fini(&k.t);
	vmio_loop_free(loop);
}

static void test_set_clock_only_without_armed_timers(void **state)
{
	struct vmio_loop *loop = vmio_loop_new();
	uint64_t now = CLOCK_START;
	struct tick k = { 0 };

	assert_int_equal(vmio_timer_init(&k.t, loop, tick_cb, &k), 0);
	vmio_timer_arm_ms(&k.t, 1);
	assert_int_equal(vmio_loop_set_clock(loop, test_clock_now, &now),
			 -EBUSY);
	/* Cancelled, it leaves the timerfd set to fire in 1 ms on the real
	 * clock: that wake-up runs nothing on the new one. */
	vmio_timer_cancel(&k.t);
	assert_int_equal(vmio_loop_set_clock(loop, test_clock_now, &now), 0);
	vmio_timer_arm_ns(&k.t, 1000);
	usleep(5000);
	assert_int_equal(vmio_loop_run_once(loop, 0), 0);
	assert_int_equal(k.calls, 0);
	vmio_timer_cancel(&k.t);
	/* NULL: CLOCK_MONOTONIC again, and its timerfd with it. */
	assert_int_equal(vmio_loop_set_clock(loop, NULL, NULL), 0);
	uint64_t real = vmio_now_ns();
	assert_true(vmio_loop_now_ns(loop) >= real);
	assert_true(vmio_loop_now_ns(loop) - real < 5000000000u);
	vmio_timer_arm_ms(&k.t, 1);
	assert_true(RUN_UNTIL(loop, k.calls == 1));
	vmio_timer_fini(&k.t);
	vmio_loop_free(loop);
}

/* ---- Deferred work ----------------------------------------------------- */

struct job {
	struct vmio_defer d;
	int calls;
	bool again; /* ask again from the callback, once */
};

static void job_cb(void *opaque)
{
	struct job *j = opaque;

	j->calls++;
	if (j->again) {
		j->again = false;
		vmio_defer_schedule(&j->d);
	}
}

static void test_defer_runs_once_next_turn(void **state)
{
	struct vmio_loop *loop = vmio_loop_new();
	struct job j = { 0 };

	vmio_defer_init(&j.d, loop, job_cb, &j);
	vmio_defer_schedule(&j.d);
	vmio_defer_schedule(&j.d); /* twice: still once */
	assert_true(vmio_defer_queued(&j.d));
	/* Queued work makes the wait 0: this must not take 10 s. */
	uint64_t start = vmio_now_ns();
	assert_int_equal(vmio_loop_run_once(loop, 10000), 1);
	assert_true(vmio_now_ns() - start < 5000000000u);
	assert_int_equal(j.calls, 1);
	assert_false(vmio_defer_queued(&j.d));
	assert_int_equal(vmio_loop_run_once(loop, 0), 0);
	assert_int_equal(j.calls, 1);

	/* Asked again from its own callback: the next turn, not this one. */
	j.again = true;
	vmio_defer_schedule(&j.d);
	assert_int_equal(vmio_loop_run_once(loop, 0), 1);
	assert_int_equal(j.calls, 2);
	assert_true(vmio_defer_queued(&j.d));
	assert_int_equal(vmio_loop_run_once(loop, 0), 1);
	assert_int_equal(j.calls, 3);

	/* Cancelled: never runs. */
	vmio_defer_schedule(&j.d);
	vmio_defer_cancel(&j.d);
	vmio_defer_cancel(&j.d);
	assert_int_equal(vmio_loop_run_once(loop, 0), 0);
	assert_int_equal(j.calls, 3);
	vmio_loop_free(loop);
}

static void test_defer_goes_after_ready_fds(void **state)
{
	/* Work deferred by an fd callback runs after the fds of the same
	 * batch, in the same turn. */
	struct vmio_loop *loop = vmio_loop_new();
	int a = eventfd(0, EFD_NONBLOCK), b = eventfd(0, EFD_NONBLOCK);
	struct counter ca = { .loop = loop, .remove_fd = -1 };
	struct counter cb = { .loop = loop, .remove_fd = -1 };
	struct job j = { 0 };

	vmio_defer_init(&j.d, loop, job_cb, &j);
	assert_int_equal(vmio_loop_add(loop, a, EPOLLIN, count_cb, &ca), 0);
	assert_int_equal(vmio_loop_add(loop, b, EPOLLIN, count_cb, &cb), 0);
	signal_fd(a);
	signal_fd(b);
	vmio_defer_schedule(&j.d);
	assert_int_equal(vmio_loop_run_once(loop, 1000), 3);
	assert_int_equal(ca.calls + cb.calls + j.calls, 3);
	close(a);
	close(b);
	vmio_loop_free(loop);
}

/* ---- From another thread --------------------------------------------- */

struct remote_job {
	struct vmio_defer d;
	struct vmio_loop *loop;
	int calls;
	bool was_current;  /* the callback ran in its loop's dispatch */
	pthread_t ran_on;
	bool post_self;    /* the callback posts its own defer once */
	bool queued_after; /* ... and it was queued at once */
	unsigned posts;    /* what the poster thread does */
};

static void remote_cb(void *opaque)
{
	struct remote_job *r = opaque;

	r->calls++;
	r->was_current = vmio_loop_is_current(r->loop);
	r->ran_on = pthread_self();
	if (r->post_self) {
		r->post_self = false;
		vmio_defer_post(&r->d);
		r->queued_after = vmio_defer_queued(&r->d);
	}
}

static void *poster(void *opaque)
{
	struct remote_job *r = opaque;

	for (unsigned i = 0; i < r->posts; i++)
		vmio_defer_post(&r->d);
	return NULL;
}

static void *stopper(void *opaque)
{
	vmio_loop_stop(opaque);
	return NULL;
}

static void test_post_from_another_thread(void **state)
{
	/* A thousand posts before the loop looks: one wake, one run, on the
	 * loop's own thread. */
	struct vmio_loop *loop = vmio_loop_new();
	struct remote_job r = { .loop = loop, .posts = 1000 };
	pthread_t t;
	uint64_t start = vmio_now_ns();

	vmio_defer_init(&r.d, loop, remote_cb, &r);
	assert_int_equal(pthread_create(&t, NULL, poster, &r), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_false(vmio_defer_queued(&r.d));
	while (!r.calls && vmio_now_ns() - start < 5000000000u)
		assert_true(vmio_loop_run_once(loop, 1000) >= 0);
	assert_int_equal(r.calls, 1);
	assert_true(r.was_current);
	assert_true(pthread_equal(r.ran_on, pthread_self()));
	assert_int_equal(vmio_loop_run_once(loop, 0), 0);
	assert_int_equal(r.calls, 1);

	/* From the loop's own callback, a post is a schedule: queued now,
	 * run on the next turn, with no eventfd. */
	r.post_self = true;
	vmio_defer_post(&r.d);
	while (r.calls < 2 && vmio_now_ns() - start < 5000000000u)
		assert_true(vmio_loop_run_once(loop, 1000) >= 0);
	assert_true(r.queued_after);
	assert_int_equal(vmio_loop_run_once(loop, 0), 1);
	assert_int_equal(r.calls, 3);
	assert_int_equal(vmio_loop_run_once(loop, 0), 0);
	vmio_loop_free(loop);
}

static void test_cancel_takes_a_post_back(void **state)
{
	struct vmio_loop *loop = vmio_loop_new();
	struct remote_job r = { .loop = loop, .posts = 3 };
	pthread_t t;

	vmio_defer_init(&r.d, loop, remote_cb, &r);
	assert_int_equal(pthread_create(&t, NULL, poster, &r), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	vmio_defer_cancel(&r.d);
	/* The wake comes, and finds nothing posted. */
	assert_int_equal(vmio_loop_run_once(loop, 1000), 1);
	assert_int_equal(vmio_loop_run_once(loop, 0), 0);
	assert_int_equal(r.calls, 0);
	/* And it can be posted again. */
	assert_int_equal(pthread_create(&t, NULL, poster, &r), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(vmio_loop_run_once(loop, 1000), 2);
	assert_int_equal(r.calls, 1);
	vmio_loop_free(loop);
}

static void test_stop_from_another_thread(void **state)
{
	struct vmio_loop *loop = vmio_loop_new();
	pthread_t t;

	/* Whether the stop comes before the run begins or during its
	 * wait, the run returns. */
	assert_int_equal(pthread_create(&t, NULL, stopper, loop), 0);
	assert_int_equal(vmio_loop_run(loop), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	/* A stop is consumed by the run it ended; one asked before a run
	 * ends it at once. */
	vmio_loop_stop(loop);
	assert_int_equal(vmio_loop_run(loop), 0);
	vmio_loop_free(loop);
}

/* ---- CPU accounts ------------------------------------------------------ */

#define MS_NS 1000000ull

/* A callback that costs a known amount of this thread's CPU: the
 * accounts see CPU time, so a loaded machine makes the test slower, not
 * its figures different. */
struct burner {
	struct vmio_loop *loop;
	uint64_t ns;
	int calls;
	/* Made from inside the callback: they inherit its account. */
	struct vmio_timer *child_timer;
	struct burner *timer_child;
	int child_fd;
	struct burner *fd_child;
};

static void burn(uint64_t ns)
{
	uint64_t end = vmio_thread_cpu_ns() + ns;

	while (vmio_thread_cpu_ns() < end)
		;
}

static void burn_task_cb(void *opaque)
{
	struct burner *b = opaque;

	b->calls++;
	burn(b->ns);
}

static void burn_fd_cb(void *opaque, int fd, uint32_t events)
{
	struct burner *b = opaque;
	uint64_t v;

	(void)events;
	assert_int_equal(read(fd, &v, sizeof(v)), sizeof(v));
	burn_task_cb(b);
	if (b->child_timer) {
		assert_int_equal(vmio_timer_init(b->child_timer, b->loop,
						 burn_task_cb, b->timer_child), 0);
		vmio_timer_arm_ns(b->child_timer, 0);
	}
	if (b->child_fd >= 0)
		assert_int_equal(vmio_loop_add(b->loop, b->child_fd, EPOLLIN,
					       burn_fd_cb, b->fd_child), 0);
}

static int add_burner(struct vmio_loop *loop, struct vmio_cpu_account *a,
		      struct burner *b)
{
	struct vmio_cpu_account *outer = vmio_cpu_account_enter(a);
	int fd = eventfd(0, EFD_NONBLOCK);

	assert_true(fd >= 0);
	b->loop = loop;
	assert_int_equal(vmio_loop_add(loop, fd, EPOLLIN, burn_fd_cb, b), 0);
	vmio_cpu_account_leave(outer);
	return fd;
}

/* Two VMs' callbacks in one turn, each charged its own CPU time, in
 * whichever order epoll reports them. */
static void test_accounts_charge_their_callbacks(void **state)
{
	struct vmio_loop *loop = vmio_loop_new();
	struct vmio_cpu_account a = { 0 }, b = { 0 };
	struct burner ba = { .ns = 20 * MS_NS, .child_fd = -1 },
		      bb = { .ns = 2 * MS_NS, .child_fd = -1 };
	int fa = add_burner(loop, &a, &ba), fb = add_burner(loop, &b, &bb);

	signal_fd(fa);
	signal_fd(fb);
	while (ba.calls + bb.calls < 2)
		assert_true(vmio_loop_run_once(loop, 1000) >= 0);
	vmio_cpu_account_fini(&a);
	vmio_cpu_account_fini(&b);
	print_message("# a %llu ns, b %llu ns\n",
		      (unsigned long long)vmio_cpu_account_ns(&a),
		      (unsigned long long)vmio_cpu_account_ns(&b));
	assert_true(vmio_cpu_account_ns(&a) >= 20 * MS_NS);
	assert_true(vmio_cpu_account_ns(&b) >= 2 * MS_NS);
	assert_true(vmio_cpu_account_ns(&b) < 10 * MS_NS);
	/* The loop put back what was current before it ran. */
	assert_null(vmio_cpu_account_current());
	vmio_loop_remove(loop, fa);
	vmio_loop_remove(loop, fb);
	close(fa);
	close(fb);
	vmio_loop_free(loop);
}

/* Runs loop until *calls reaches n. */
static void run_until(struct vmio_loop *loop, const int *calls, int n)
{
	while (*calls < n)
		assert_true(vmio_loop_run_once(loop, 1000) >= 0);
}

/* What a VM's callback makes charges the VM, even when another account
 * ran just before it; what is made under no account starts no charging
 * of its own. */
static void test_accounts_are_inherited(void **state)
{
	struct vmio_loop *loop = vmio_loop_new();
	struct vmio_cpu_account a = { 0 }, b = { 0 };
	struct vmio_timer t;
	struct burner timer_child = { .ns = 5 * MS_NS, .child_fd = -1 },
		      fd_child = { .ns = 5 * MS_NS, .child_fd = -1 },
		      other = { .ns = 1 * MS_NS, .child_fd = -1 },
		      nobody = { .ns = 5 * MS_NS, .child_fd = -1 },
		      parent = { .child_timer = &t,
				 .timer_child = &timer_child,
				 .fd_child = &fd_child };
	int fc = eventfd(0, EFD_NONBLOCK);
	int fds[] = { add_burner(loop, &a, &parent), fc,
		      add_burner(loop, &b, &other),
		      add_burner(loop, NULL, &nobody) };

	assert_true(fc >= 0);
	fd_child.loop = loop;
	parent.child_fd = fc;
	signal_fd(fds[0]);
	run_until(loop, &parent.calls, 1);
	/* b runs first in the turn the timer fires in. */
	signal_fd(fds[2]);
	run_until(loop, &timer_child.calls, 1);
	/* And just before the fd a's callback watched. */
	signal_fd(fds[2]);
	run_until(loop, &other.calls, 2);
	signal_fd(fc);
	run_until(loop, &fd_child.calls, 1);
	vmio_cpu_account_fini(&a);
	vmio_cpu_account_fini(&b);
	print_message("# a %llu ns, b %llu ns\n",
		      (unsigned long long)vmio_cpu_account_ns(&a),
		      (unsigned long long)vmio_cpu_account_ns(&b));
	assert_true(vmio_cpu_account_ns(&a) >= 10 * MS_NS);
	assert_true(vmio_cpu_account_ns(&b) >= 2 * MS_NS);
	assert_true(vmio_cpu_account_ns(&b) < 5 * MS_NS);
	/* Nothing is being charged now: a callback of nobody's is nobody's. */
	signal_fd(fds[3]);
	run_until(loop, &nobody.calls, 1);
	assert_true(vmio_cpu_account_ns(&b) < 5 * MS_NS);
	assert_true(vmio_cpu_account_ns(&a) < 15 * MS_NS);
	vmio_timer_fini(&t);
	for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++) {
		vmio_loop_remove(loop, fds[i]);
		close(fds[i]);
	}
	vmio_loop_free(loop);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_dispatch_and_remove),
		cmocka_unit_test(test_remove_other_during_dispatch),
		cmocka_unit_test(test_modify_and_errors),
		cmocka_unit_test(test_run_until_stop),
		cmocka_unit_test(test_timer_one_shot),
		cmocka_unit_test(test_timer_periodic_and_cancel),
		cmocka_unit_test(test_timers_fire_in_deadline_order),
		cmocka_unit_test(test_timer_callback_cancels_another),
		cmocka_unit_test(test_timer_rearm_zero_waits_a_pass),
		cmocka_unit_test(test_own_clock_decides_when_timers_fire),
		cmocka_unit_test(test_own_clock_periodic_skips_missed_ticks),
		cmocka_unit_test(test_own_clock_rearm_zero_waits_a_turn),
		cmocka_unit_test(test_own_clock_leaves_the_timerfd_alone),
		cmocka_unit_test(test_set_clock_only_without_armed_timers),
		cmocka_unit_test(test_defer_runs_once_next_turn),
		cmocka_unit_test(test_defer_goes_after_ready_fds),
		cmocka_unit_test(test_post_from_another_thread),
		cmocka_unit_test(test_cancel_takes_a_post_back),
		cmocka_unit_test(test_stop_from_another_thread),
		cmocka_unit_test(test_accounts_charge_their_callbacks),
		cmocka_unit_test(test_accounts_are_inherited),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
