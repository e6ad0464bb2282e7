#include "event/cpu_account.h"

#include <stdbool.h>

#include "util/clock.h"

/* One per thread, since a thread's CPU clock is its own. */
static __thread struct {
	struct vmio_cpu_account *current;  /* what new objects are charged to */
	struct vmio_cpu_account *charging; /* what the thread's time goes to */
	uint64_t cpu_at;  /* the thread's CPU clock when it last charged */
	uint64_t mono_at; /* the monotonic clock then */
} meter;

/* The time since the last charge goes to the account being charged. */
static void charge(void)
{
	uint64_t cpu = vmio_thread_cpu_ns();

	for (struct vmio_cpu_account *a = meter.charging;
	     a && cpu > meter.cpu_at; a = a->parent)
		atomic_fetch_add_explicit(&a->ns, cpu - meter.cpu_at,
					  memory_order_relaxed);
	meter.cpu_at = cpu;
	meter.mono_at = vmio_now_ns();
}

void vmio_cpu_account_init(struct vmio_cpu_account *a,
			   struct vmio_cpu_account *parent)
{
	atomic_init(&a->ns, 0);
	a->parent = parent;
}

struct vmio_cpu_account *vmio_cpu_account_enter(struct vmio_cpu_account *a)
{
	struct vmio_cpu_account *previous = meter.current;

	meter.current = a;
	return previous;
}

void vmio_cpu_account_leave(struct vmio_cpu_account *previous)
{
	meter.current = previous;
}

struct vmio_cpu_account *vmio_cpu_account_current(void)
{
	return meter.current;
}

uint64_t vmio_cpu_account_ns(const struct vmio_cpu_account *a)
{
	return atomic_load_explicit(&a->ns, memory_order_relaxed);
}

void vmio_cpu_account_fini(struct vmio_cpu_account *a)
{
	if (meter.charging == a) {
		charge();
		meter.charging = NULL;
	}
	if (meter.current == a)
		meter.current = NULL;
}

void vmio_cpu_account_switch(struct vmio_cpu_account *a)
{
	meter.current = a;
	if (!a || a == meter.charging)
		return;
	charge();
	meter.charging = a;
}

void vmio_cpu_account_turn_end(void)
{
	if (meter.charging && vmio_now_ns() - meter.mono_at >= VMIO_CPU_FLUSH_NS)
		charge();
}
