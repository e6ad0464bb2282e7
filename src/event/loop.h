/* The event loop: file descriptors, timers and deferred work, dispatched
 * from one thread. Other threads reach a loop in two ways only:
 * vmio_defer_post (run this on your next turn) and vmio_loop_stop; every
 * other call is made from the thread that runs the loop, or before it
 * runs. The vhost-user core and the devices take the loop from
 * their caller, as libvhost-user does, so a program can run several
 * devices in one loop or give a device a loop of its own on another
 * thread.
 *
 * The rule every callback keeps: it never waits. No sleep, no poll() on
 * one peer, no blocking read or write; work that cannot finish now waits
 * for its fd's next event, a timer, or the next turn (vmio_defer), so one
 * slow peer delays only itself.
 *
 * Each watch, timer and deferred task charges the CPU time of its
 * callbacks to the account current when it was made
 * (event/cpu_account.h). */
#ifndef VMIO_EVENT_LOOP_H
#define VMIO_EVENT_LOOP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/queue.h>

#include "event/cpu_account.h"
#include "event/heap.h"

struct vmio_loop;

typedef void (*vmio_fd_cb)(void *opaque, int fd, uint32_t events);
/* What a timer or a deferred task calls. */
typedef void (*vmio_task_cb)(void *opaque);

struct vmio_loop *vmio_loop_new(void);
/* Every timer and deferred task must have been finished (vmio_timer_fini,
 * vmio_defer_cancel) before. */
void vmio_loop_free(struct vmio_loop *loop);

/* ---- File descriptors -------------------------------------------------- */

/* events are EPOLLIN/EPOLLOUT/...; the watch is level-triggered. Returns 0,
 * or -errno (-EEXIST if fd is already watched). A callback may add or
 * remove any watch, its own included. */
int vmio_loop_add(struct vmio_loop *loop, int fd, uint32_t events,
		  vmio_fd_cb cb, void *opaque);
int vmio_loop_modify(struct vmio_loop *loop, int fd, uint32_t events);
/* Removing an fd that is not watched is a no-op. Call it before close(fd). */
void vmio_loop_remove(struct vmio_loop *loop, int fd);

/* ---- Time -------------------------------------------------------------- */

/* A loop's clock, in ns: what its timers' deadlines are kept on, and what
 * the code it runs reads for a deadline of its own (vmio_loop_now_ns), so
 * that the two agree. By default CLOCK_MONOTONIC (util/clock.h). A test
 * or fuzzer gives a loop a clock of its own, which moves only when the
 * harness moves it: the loop then leaves its timerfd alone and, on every
 * turn, runs the timers due on that clock after the fd events (a turn
 * with one due does not wait in epoll_wait). The function may be called
 * from any thread (stats are written on the control server's). */
typedef uint64_t (*vmio_clock_fn)(void *opaque);

/* now NULL: CLOCK_MONOTONIC again. Only while no timer is armed (their
 * deadlines are on the old clock): returns 0, or -EBUSY. */
int vmio_loop_set_clock(struct vmio_loop *loop, vmio_clock_fn now,
			void *opaque);
uint64_t vmio_loop_now_ns(const struct vmio_loop *loop);

/* ---- Timers ------------------------------------------------------------ */

/* "Call me in N ns", once or every N ns, on the loop's clock. The struct
 * lives in its owner; the loop keeps a min-heap of the armed ones and one
 * timerfd set to the earliest. Its room in the heap is reserved at init,
 * so arming never fails. */
struct vmio_timer {
	struct vmio_loop *loop;
	vmio_task_cb cb;
	void *opaque;
	struct vmio_cpu_account *account; /* current at init */
	struct vmio_heap_node node; /* key: deadline, the loop's clock */
	uint64_t period_ns;         /* 0: one-shot */
	uint64_t armed_in;          /* the expiry pass it was armed in */
	bool initialised;
};

/* Returns 0, or -ENOMEM. */
int vmio_timer_init(struct vmio_timer *t, struct vmio_loop *loop,
		    vmio_task_cb cb, void *opaque);
/* Cancels the timer and gives its room back; the struct may then be freed.
 * A timer that was never initialised (zeroed) is ignored. */
void vmio_timer_fini(struct vmio_timer *t);
/* Fires once, delay_ns from now; re-arming an armed timer moves it. */
void vmio_timer_arm_ns(struct vmio_timer *t, uint64_t delay_ns);
static inline void vmio_timer_arm_ms(struct vmio_timer *t, uint64_t ms)
{
	vmio_timer_arm_ns(t, ms * 1000000u);
}
/* Fires every period_ns, the first time period_ns from now. A periodic
 * timer that falls behind skips the ticks it missed. */
void vmio_timer_arm_periodic_ns(struct vmio_timer *t, uint64_t period_ns);
void vmio_timer_cancel(struct vmio_timer *t);
static inline bool vmio_timer_armed(const struct vmio_timer *t)
{
	return t->initialised && t->node.index != VMIO_HEAP_IDLE;
}

/* ---- Deferred work ----------------------------------------------------- */

/* "Run this once on the next turn of the loop": after what is ready now
 * has been served, so a device that stopped at a budget lets every other
 * peer go first. Asking again before it ran is a no-op. */
struct vmio_defer {
	TAILQ_ENTRY(vmio_defer) link;
	TAILQ_ENTRY(vmio_defer) post_link; /* on the loop's posted list */
	struct vmio_loop *loop;
	vmio_task_cb cb;
	void *opaque;
	struct vmio_cpu_account *account; /* current at init */
	uint64_t turn; /* the turn it was asked in */
	bool queued;
	bool posted;   /* by another thread, not yet queued: under the
			* loop's post lock */
};

void vmio_defer_init(struct vmio_defer *d, struct vmio_loop *loop,
		     vmio_task_cb cb, void *opaque);
void vmio_defer_schedule(struct vmio_defer *d);
/* vmio_defer_schedule from any thread: on the loop's own thread it is
 * that call; from another, d goes on the loop's posted list (a mutex
 * held for a list insert) and an eventfd wakes the loop, which queues it
 * for its next turn. Posting again before it was queued is a no-op, and
 * only the first post after the list was empty writes the eventfd. The
 * poster must know d outlives the post: vmio_defer_cancel, on d's loop
 * thread, takes it off the posted list too. */
void vmio_defer_post(struct vmio_defer *d);
/* Takes it off the queue (and the posted list) if it is there; then the
 * struct may be freed. From d's loop thread, or before the loop runs. */
void vmio_defer_cancel(struct vmio_defer *d);
static inline bool vmio_defer_queued(const struct vmio_defer *d)
{
	return d->queued;
}

/* ---- Running ----------------------------------------------------------- */

/* Waits up to timeout_ms (-1: forever; 0 when deferred work is queued)
 * and dispatches what is ready: fd events, due timers, then the deferred
 * work asked for before this turn. Returns the number of callbacks run, or
 * -errno. EINTR counts as 0. */
int vmio_loop_run_once(struct vmio_loop *loop, int timeout_ms);
/* Runs until vmio_loop_stop(). Returns 0, or -errno on an epoll failure. */
int vmio_loop_run(struct vmio_loop *loop);
/* From any thread: vmio_loop_run returns after the current turn. */
void vmio_loop_stop(struct vmio_loop *loop);
/* Whether the calling thread is in vmio_loop_run_once of this loop. */
bool vmio_loop_is_current(const struct vmio_loop *loop);

#endif
