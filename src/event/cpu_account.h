/* Whom a loop's CPU time is spent for. An account is a count of thread
 * CPU time (CLOCK_THREAD_CPUTIME_ID) that one VM, or one part of it,
 * cost. No watch, timer or deferred task is told its account: each is
 * charged to the account current on its thread when it was made
 * (vmio_loop_add, vmio_timer_init, vmio_defer_init), and while a
 * callback runs its own account is the current one. So whatever a VM's
 * callbacks make (connections, their fds, their timers) charges the VM,
 * and the code that makes a VM only has to make it inside
 * vmio_cpu_account_enter/leave.
 *
 * What it costs: a system call costs about a microsecond on this kind of
 * host, so the thread's CPU clock is read only when a callback of one
 * account follows one of another, and at most every
 * VMIO_CPU_FLUSH_NS while one account keeps the thread (a vDSO read of
 * the monotonic clock per loop turn decides that). A callback made under
 * no account (the loop's own, a control-socket request) is charged to the
 * account that ran before it on that thread; so is the wake-up that
 * leads to the next callback. An account's figure is at most
 * VMIO_CPU_FLUSH_NS of its thread's time behind.
 *
 * Threads: an account may be charged from any thread (relaxed atomic
 * adds) and read from any. Each thread remembers the account it is
 * charging until its next switch: vmio_cpu_account_fini must run before
 * an account's memory is reused, on the thread that charged it last or
 * after that thread has ended. */
#ifndef VMIO_EVENT_CPU_ACCOUNT_H
#define VMIO_EVENT_CPU_ACCOUNT_H

#include <stdatomic.h>
#include <stdint.h>

#define VMIO_CPU_FLUSH_NS (10 * 1000 * 1000ull)

struct vmio_cpu_account {
	atomic_uint_fast64_t ns;
	/* What it is a part of (a VM, for one of its queue pairs): its time
	 * counts there too. NULL: nothing. */
	struct vmio_cpu_account *parent;
};

/* A zeroed account is ready; this one is also counted in parent. */
void vmio_cpu_account_init(struct vmio_cpu_account *a,
			   struct vmio_cpu_account *parent);

/* Makes a current on this thread; returns the one it replaces, for
 * vmio_cpu_account_leave. a may be NULL (no account). */
struct vmio_cpu_account *vmio_cpu_account_enter(struct vmio_cpu_account *a);
void vmio_cpu_account_leave(struct vmio_cpu_account *previous);
struct vmio_cpu_account *vmio_cpu_account_current(void);

/* The CPU time charged so far, its parts' included, in ns; from any
 * thread. */
uint64_t vmio_cpu_account_ns(const struct vmio_cpu_account *a);

/* This thread stops charging a (what it owes is added first). */
void vmio_cpu_account_fini(struct vmio_cpu_account *a);

/* ---- For the event loop's dispatch ------------------------------------- */

/* A callback charged to a is about to run: a becomes current, and the
 * thread's time so far goes to the account it was charging. a NULL
 * leaves the charging as it is. */
void vmio_cpu_account_switch(struct vmio_cpu_account *a);
/* A loop turn ends: the account being charged gets its time if
 * VMIO_CPU_FLUSH_NS passed since it last did. */
void vmio_cpu_account_turn_end(void);

#endif
