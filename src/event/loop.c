#include "event/loop.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "event/cpu_account.h"
#include "util/clock.h"
#include "util/log.h"

/* Watches are kept in a table indexed by fd so lookup is O(1); epoll's
 * data carries the fd and a generation count, so an event for a watch that
 * was removed (and perhaps re-added for a reused fd) during the same batch
 * is recognised as stale and dropped. */
struct watch {
	vmio_fd_cb cb;
	void *opaque;
	struct vmio_cpu_account *account;
	uint32_t generation;
	bool active;
};

TAILQ_HEAD(defer_queue, vmio_defer);

struct vmio_loop {
	int epfd;
	bool stop; /* __atomic: vmio_loop_stop comes from any thread */
	struct watch *watches;
	size_t nwatches;
	uint32_t next_generation;

	/* Timers: one timerfd, set to the earliest deadline. It is moved only
	 * earlier: a timer cancelled or moved later leaves it where it is,
	 * and the early wake-up finds nothing due (one system call fewer on
	 * every re-arm). */
	struct vmio_heap timers;
	int timer_fd;
	uint64_t timer_fd_at; /* deadline it is set to; 0: disarmed */
	uint64_t expiry_pass;
	/* The clock (vmio_loop_set_clock); own_clock: not CLOCK_MONOTONIC,
	 * so not the timerfd's. */
	vmio_clock_fn now;
	void *now_opaque;
	bool own_clock;

	struct defer_queue deferred;
	uint64_t turn;

	/* What other threads hand this one: deferred work they posted, and
	 * the eventfd that wakes epoll_wait for it and for a stop. */
	pthread_mutex_t post_lock;
	struct defer_queue posted; /* linked by post_link */
	int wake_fd;
};

/* The loop this thread is dispatching, so that a post from a loop's own
 * callbacks is a plain schedule. */
static __thread const struct vmio_loop *current_loop;

#define LOOP_MAX_EVENTS 64

static uint64_t pack(int fd, uint32_t generation)
{
	return ((uint64_t)generation << 32) | (uint32_t)fd;
}

static void timer_fd_cb(void *opaque, int fd, uint32_t events);
static void wake_fd_cb(void *opaque, int fd, uint32_t events);
static int watch_add(struct vmio_loop *loop, int fd, uint32_t events,
		     vmio_fd_cb cb, void *opaque,
		     struct vmio_cpu_account *account);

static uint64_t monotonic_now(void *opaque)
{
	(void)opaque;
	return vmio_now_ns();
}

struct vmio_loop *vmio_loop_new(void)
{
	struct vmio_loop *loop = calloc(1, sizeof(*loop));
	if (!loop)
		return NULL;
	loop->epfd = epoll_create1(EPOLL_CLOEXEC);
	loop->timer_fd = timerfd_create(CLOCK_MONOTONIC,
					TFD_NONBLOCK | TFD_CLOEXEC);
	loop->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	loop->next_generation = 1;
	loop->now = monotonic_now;
	TAILQ_INIT(&loop->deferred);
	TAILQ_INIT(&loop->posted);
	pthread_mutex_init(&loop->post_lock, NULL);
	if (loop->epfd < 0 || loop->timer_fd < 0 || loop->wake_fd < 0 ||
	    watch_add(loop, loop->timer_fd, EPOLLIN, timer_fd_cb, loop, NULL) ||
	    watch_add(loop, loop->wake_fd, EPOLLIN, wake_fd_cb, loop, NULL)) {
		vmio_loop_free(loop);
		return NULL;
	}
	return loop;
}

void vmio_loop_free(struct vmio_loop *loop)
{
	if (!loop)
		return;
	if (loop->timers.len || !TAILQ_EMPTY(&loop->deferred) ||
	    !TAILQ_EMPTY(&loop->posted))
		log_warn("event loop freed with %zu timers armed and deferred "
			 "work queued",
			 loop->timers.len);
	if (loop->timer_fd >= 0)
		close(loop->timer_fd);
	if (loop->wake_fd >= 0)
		close(loop->wake_fd);
	pthread_mutex_destroy(&loop->post_lock);
	if (loop->epfd >= 0)
		close(loop->epfd);
	vmio_heap_release(&loop->timers);
	free(loop->watches);
	free(loop);
}

/* ---- File descriptors -------------------------------------------------- */

static int ensure_slot(struct vmio_loop *loop, int fd)
{
	if ((size_t)fd < loop->nwatches)
		return 0;
	size_t n = loop->nwatches ? loop->nwatches : 64;
	while (n <= (size_t)fd)
		n *= 2;
	struct watch *w = realloc(loop->watches, n * sizeof(*w));
	if (!w)
		return -ENOMEM;
	for (size_t i = loop->nwatches; i < n; i++)
		w[i] = (struct watch){ 0 };
	loop->watches = w;
	loop->nwatches = n;
	return 0;
}

/* The loop's own watches are nobody's: they charge whoever ran last. */
static int watch_add(struct vmio_loop *loop, int fd, uint32_t events,
		     vmio_fd_cb cb, void *opaque,
		     struct vmio_cpu_account *account)
{
	if (fd < 0 || !cb)
		return -EINVAL;
	int rc = ensure_slot(loop, fd);
	if (rc)
		return rc;
	struct watch *w = &loop->watches[fd];
	if (w->active)
		return -EEXIST;
	uint32_t gen = loop->next_generation++;
	struct epoll_event ev = { .events = events, .data.u64 = pack(fd, gen) };
	if (epoll_ctl(loop->epfd, EPOLL_CTL_ADD, fd, &ev) < 0)
		return -errno;
	*w = (struct watch){ .cb = cb, .opaque = opaque, .account = account,
			     .generation = gen, .active = true };
	return 0;
}

int vmio_loop_add(struct vmio_loop *loop, int fd, uint32_t events,
		  vmio_fd_cb cb, void *opaque)
{
	return watch_add(loop, fd, events, cb, opaque,
			 vmio_cpu_account_current());
}

int vmio_loop_modify(struct vmio_loop *loop, int fd, uint32_t events)
{
	if (fd < 0 || (size_t)fd >= loop->nwatches || !loop->watches[fd].active)
		return -ENOENT;
	struct epoll_event ev = {
		.events = events,
		.data.u64 = pack(fd, loop->watches[fd].generation),
	};
	if (epoll_ctl(loop->epfd, EPOLL_CTL_MOD, fd, &ev) < 0)
		return -errno;
	return 0;
}

void vmio_loop_remove(struct vmio_loop *loop, int fd)
{
	if (fd < 0 || (size_t)fd >= loop->nwatches || !loop->watches[fd].active)
		return;
	epoll_ctl(loop->epfd, EPOLL_CTL_DEL, fd, NULL);
	loop->watches[fd].active = false;
}

/* ---- Time -------------------------------------------------------------- */

int vmio_loop_set_clock(struct vmio_loop *loop, vmio_clock_fn now,
			void *opaque)
{
	/* A timer cancelled may have left the timerfd set: its wake-up finds
	 * nothing due, as after any cancel. */
	if (loop->timers.len)
		return -EBUSY;
	loop->own_clock = now != NULL;
	loop->now = now ? now : monotonic_now;
	loop->now_opaque = now ? opaque : NULL;
	return 0;
}

uint64_t vmio_loop_now_ns(const struct vmio_loop *loop)
{
	return loop->now(loop->now_opaque);
}

/* ---- Timers ------------------------------------------------------------ */

static struct vmio_timer *timer_of(struct vmio_heap_node *n)
{
	return (struct vmio_timer *)((char *)n -
				     offsetof(struct vmio_timer, node));
}

/* Sets the timerfd to the earliest deadline if that is earlier than what
 * it is set to. A failure here would lose a wake-up, so it is logged; it
 * can only come from a kernel out of memory. */
static void timer_fd_update(struct vmio_loop *loop)
{
	struct vmio_heap_node *min = vmio_heap_min(&loop->timers);

	if (loop->own_clock || !min ||
	    (loop->timer_fd_at && loop->timer_fd_at <= min->key))
		return;
	/* 0 would disarm the timerfd: a deadline in the past is 1 ns. */
	uint64_t at = min->key ? min->key : 1;
	struct itimerspec its = {
		.it_value.tv_sec = (time_t)(at / 1000000000u),
		.it_value.tv_nsec = (long)(at % 1000000000u),
	};
	if (timerfd_settime(loop->timer_fd, TFD_TIMER_ABSTIME, &its, NULL) < 0) {
		log_err("event loop: cannot set the timer: %m");
		return;
	}
	loop->timer_fd_at = at;
}

int vmio_timer_init(struct vmio_timer *t, struct vmio_loop *loop,
		    vmio_task_cb cb, void *opaque)
{
	int rc = vmio_heap_reserve(&loop->timers);

	if (rc)
		return rc;
	*t = (struct vmio_timer){
		.loop = loop,
		.cb = cb,
		.opaque = opaque,
		.account = vmio_cpu_account_current(),
		.node.index = VMIO_HEAP_IDLE,
		.initialised = true,
	};
	return 0;
}

void vmio_timer_fini(struct vmio_timer *t)
{
	if (!t->initialised)
		return;
	vmio_timer_cancel(t);
	vmio_heap_unreserve(&t->loop->timers);
	t->initialised = false;
}

static void timer_set(struct vmio_timer *t, uint64_t deadline, uint64_t period)
{
	struct vmio_loop *loop = t->loop;

	vmio_heap_remove(&loop->timers, &t->node);
	t->node.key = deadline;
	t->period_ns = period;
	t->armed_in = loop->expiry_pass;
	vmio_heap_push(&loop->timers, &t->node);
	timer_fd_update(loop);
}

void vmio_timer_arm_ns(struct vmio_timer *t, uint64_t delay_ns)
{
	if (t->initialised)
		timer_set(t, vmio_loop_now_ns(t->loop) + delay_ns, 0);
}

void vmio_timer_arm_periodic_ns(struct vmio_timer *t, uint64_t period_ns)
{
	if (!period_ns)
		period_ns = 1;
	if (t->initialised)
		timer_set(t, vmio_loop_now_ns(t->loop) + period_ns, period_ns);
}

void vmio_timer_cancel(struct vmio_timer *t)
{
	if (t->initialised)
		vmio_heap_remove(&t->loop->timers, &t->node);
}

/* Runs every timer due now. A timer armed by a callback of this pass waits
 * for the next one, even with a delay of 0, so a timer that re-arms itself
 * cannot keep the loop here. Returns the callbacks run. */
static int timers_expire(struct vmio_loop *loop)
{
	uint64_t now = vmio_loop_now_ns(loop);
	int ran = 0;

	loop->expiry_pass++;
	loop->timer_fd_at = 0; /* it fired, or will be set anew below */
	for (;;) {
		struct vmio_heap_node *min = vmio_heap_min(&loop->timers);
		if (!min || min->key > now)
			break;
		struct vmio_timer *t = timer_of(min);
		if (t->armed_in == loop->expiry_pass)
			break;
		vmio_heap_remove(&loop->timers, min);
		if (t->period_ns) {
			uint64_t next = t->node.key + t->period_ns;
			if (next <= now) /* behind: skip the missed ticks */
				next = now + t->period_ns;
			t->node.key = next;
			vmio_heap_push(&loop->timers, &t->node);
		}
		vmio_cpu_account_switch(t->account);
		t->cb(t->opaque);
		ran++;
	}
	timer_fd_update(loop);
	return ran;
}

static bool timers_due(struct vmio_loop *loop)
{
	struct vmio_heap_node *min = vmio_heap_min(&loop->timers);

	return min && min->key <= vmio_loop_now_ns(loop);
}

static void timer_fd_cb(void *opaque, int fd, uint32_t events)
{
	uint64_t expirations;

	(void)opaque;
	(void)events;
	if (read(fd, &expirations, sizeof(expirations)) < 0 && errno != EAGAIN)
		log_warn("event loop: timer read: %m");
}

/* ---- Deferred work ----------------------------------------------------- */

void vmio_defer_init(struct vmio_defer *d, struct vmio_loop *loop,
		     vmio_task_cb cb, void *opaque)
{
	*d = (struct vmio_defer){ .loop = loop, .cb = cb, .opaque = opaque,
				  .account = vmio_cpu_account_current() };
}

void vmio_defer_schedule(struct vmio_defer *d)
{
	if (d->queued || !d->loop)
		return;
	d->queued = true;
	d->turn = d->loop->turn;
	TAILQ_INSERT_TAIL(&d->loop->deferred, d, link);
}

/* Wakes the loop's epoll_wait, from another thread. The eventfd's count
 * cannot overflow: the loop reads it back to 0 on each wake. */
static void loop_wake(struct vmio_loop *loop)
{
	uint64_t one = 1;

	if (write(loop->wake_fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		log_err("event loop: cannot wake another thread's loop: %m");
}

void vmio_defer_post(struct vmio_defer *d)
{
	struct vmio_loop *loop = d->loop;
	bool first;

	if (!loop)
		return;
	if (current_loop == loop) {
		vmio_defer_schedule(d);
		return;
	}
	pthread_mutex_lock(&loop->post_lock);
	first = TAILQ_EMPTY(&loop->posted);
	if (!d->posted) {
		__atomic_store_n(&d->posted, true, __ATOMIC_RELEASE);
		TAILQ_INSERT_TAIL(&loop->posted, d, post_link);
	} else {
		first = false;
	}
	pthread_mutex_unlock(&loop->post_lock);
	if (first)
		loop_wake(loop);
}

void vmio_defer_cancel(struct vmio_defer *d)
{
	if (d->queued) {
		TAILQ_REMOVE(&d->loop->deferred, d, link);
		d->queued = false;
	}
	/* Only this thread clears posted, so a false read needs no lock. */
	if (d->loop && __atomic_load_n(&d->posted, __ATOMIC_ACQUIRE)) {
		pthread_mutex_lock(&d->loop->post_lock);
		if (d->posted) {
			TAILQ_REMOVE(&d->loop->posted, d, post_link);
			__atomic_store_n(&d->posted, false, __ATOMIC_RELEASE);
		}
		pthread_mutex_unlock(&d->loop->post_lock);
	}
}

/* What other threads posted (and perhaps a stop): queued for the next
 * turn, after what this one has already queued. Queued under the lock:
 * once posted is cleared another thread may post d again, and post_link
 * is then its to write. */
static void wake_fd_cb(void *opaque, int fd, uint32_t events)
{
	struct vmio_loop *loop = opaque;
	struct vmio_defer *d;
	uint64_t count;

	(void)events;
	if (read(fd, &count, sizeof(count)) < 0 && errno != EAGAIN)
		log_warn("event loop: wake read: %m");
	pthread_mutex_lock(&loop->post_lock);
	while ((d = TAILQ_FIRST(&loop->posted))) {
		TAILQ_REMOVE(&loop->posted, d, post_link);
		__atomic_store_n(&d->posted, false, __ATOMIC_RELEASE);
		vmio_defer_schedule(d);
	}
	pthread_mutex_unlock(&loop->post_lock);
}

/* Runs the work asked for before this turn; what its callbacks ask for
 * goes to the next turn, after the next look at the fds. */
static int deferred_run(struct vmio_loop *loop)
{
	uint64_t turn = loop->turn++;
	int ran = 0;
	struct vmio_defer *d;

	while ((d = TAILQ_FIRST(&loop->deferred)) && d->turn <= turn) {
		TAILQ_REMOVE(&loop->deferred, d, link);
		d->queued = false;
		vmio_cpu_account_switch(d->account);
		d->cb(d->opaque);
		ran++;
	}
	return ran;
}

/* ---- Running ----------------------------------------------------------- */

int vmio_loop_run_once(struct vmio_loop *loop, int timeout_ms)
{
	struct epoll_event events[LOOP_MAX_EVENTS];
	const struct vmio_loop *outer = current_loop;
	struct vmio_cpu_account *outer_account = vmio_cpu_account_current();
	bool timers_fired = false;
	int ran = 0;

	if (!TAILQ_EMPTY(&loop->deferred) ||
	    (loop->own_clock && timers_due(loop)))
		timeout_ms = 0;
	int n = epoll_wait(loop->epfd, events, LOOP_MAX_EVENTS, timeout_ms);
	if (n < 0 && errno != EINTR)
		return -errno;
	current_loop = loop;
	for (int i = 0; i < n; i++) {
		int fd = (int)(uint32_t)events[i].data.u64;
		uint32_t gen = (uint32_t)(events[i].data.u64 >> 32);
		if ((size_t)fd >= loop->nwatches)
			continue;
		struct watch *w = &loop->watches[fd];
		if (!w->active || w->generation != gen)
			continue;
		vmio_cpu_account_switch(w->account);
		w->cb(w->opaque, fd, events[i].events);
		if (fd == loop->timer_fd)
			timers_fired = true;
		else
			ran++;
	}
	/* On a clock of its own no timerfd tells when: look every turn. */
	if (timers_fired || loop->own_clock)
		ran += timers_expire(loop);
	ran += deferred_run(loop);
	vmio_cpu_account_turn_end();
	vmio_cpu_account_leave(outer_account);
	current_loop = outer;
	return ran;
}

/* A stop is consumed by the run it ends; one asked for before the run
 * began (another thread may ask before this one starts) ends it at once. */
int vmio_loop_run(struct vmio_loop *loop)
{
	while (!__atomic_exchange_n(&loop->stop, false, __ATOMIC_ACQ_REL)) {
		int rc = vmio_loop_run_once(loop, -1);
		if (rc < 0)
			return rc;
	}
	return 0;
}

void vmio_loop_stop(struct vmio_loop *loop)
{
	__atomic_store_n(&loop->stop, true, __ATOMIC_RELEASE);
	if (current_loop != loop)
		loop_wake(loop);
}

bool vmio_loop_is_current(const struct vmio_loop *loop)
{
	return current_loop == loop;
}
