/* When a device looks at a dry ring again instead of waiting for the
 * driver's notification: the one polling policy of every device (vsock's
 * queues and net's pairs), on its own (no ring: the caller says what it
 * found; vmio_poll_window_dry takes the time from the caller, so that a
 * test moves it, and vmio_poll_window_dry_now reads the clock, only while
 * a window is set).
 *
 * A queue that found work and then ran dry keeps looking for up to
 * window_ns; a look that finds work starts the window again when the ring
 * next runs dry, and one that finds none before the window ends lets the
 * queue sleep (kicks on, epoll). A wake-up that finds nothing at all (a
 * late kick) does not start a window, so an idle queue costs nothing.
 * The looks are not a spin: each is a deferred task on the queue's loop,
 * one per turn, so the other queues and fds of that loop run between
 * them, and no callback waits (architecture.md section 2). */
#ifndef VMIO_VIRTIO_POLL_WINDOW_H
#define VMIO_VIRTIO_POLL_WINDOW_H

#include <stdbool.h>
#include <stdint.h>

#include "util/clock.h"

struct vmio_poll_window {
	uint64_t window_ns; /* 0: never look again, sleep at once */
	uint64_t until_ns;  /* while polling: the window's end */
	bool polling;       /* a window is open */
	bool worked;        /* work found since the queue last ran dry */
};

static inline void vmio_poll_window_init(struct vmio_poll_window *p,
					 uint64_t window_ns)
{
	*p = (struct vmio_poll_window){ .window_ns = window_ns };
}

/* The queue found work (a chain, a frame). */
static inline void vmio_poll_window_worked(struct vmio_poll_window *p)
{
	p->worked = true;
}

/* The queue ran dry at now: true to look again on the loop's next turn
 * (kicks stay off), false to turn kicks on and sleep. */
bool vmio_poll_window_dry(struct vmio_poll_window *p, uint64_t now);

/* The same at the clock's time; no clock read when polling is off. */
static inline bool vmio_poll_window_dry_now(struct vmio_poll_window *p)
{
	return vmio_poll_window_dry(p, p->window_ns ? vmio_now_ns() : 0);
}

/* The queue goes to sleep or stops: the window closes. */
static inline void vmio_poll_window_end(struct vmio_poll_window *p)
{
	p->polling = false;
	p->worked = false;
}

#endif
