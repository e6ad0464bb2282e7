/* Worker threads: N event loops, one per thread, for the devices to be
 * spread over. Loop 0 is run by the caller's own thread (it also watches
 * the signals, and a single worker is then exactly the one-loop program
 * of before); loops 1..N-1 get threads of their own, named "vmio-wK" so
 * that /proc/PID/task/TID/comm tells them apart.
 *
 * What the pool does not do is share anything: a device is built on the
 * loop it will live on, before vmio_workers_start, and afterwards only
 * its own worker calls into it. Work for another worker goes through
 * vmio_defer_post (event/loop.h). */
#ifndef VMIO_EVENT_WORKERS_H
#define VMIO_EVENT_WORKERS_H

#include <stdbool.h>
#include <stddef.h>

#include "event/loop.h"

/* Most workers, and the largest CPU number --cpus takes. */
#define VMIO_MAX_WORKERS 256u
#define VMIO_MAX_CPU 4095u

struct vmio_workers;

/* n loops (1..VMIO_MAX_WORKERS). cpus (ncpus entries, or NULL): worker K
 * is pinned to cpus[K % ncpus] when it starts. NULL on allocation
 * failure. */
struct vmio_workers *vmio_workers_new(unsigned n, const unsigned *cpus,
				      unsigned ncpus);
/* Every worker must have been joined (or never started). */
void vmio_workers_free(struct vmio_workers *w);

unsigned vmio_workers_count(const struct vmio_workers *w);
struct vmio_loop *vmio_workers_loop(struct vmio_workers *w, unsigned k);

/* Pins the calling thread (worker 0) and starts threads for loops
 * 1..n-1. Returns 0, or -errno with the threads started so far stopped
 * and joined. */
int vmio_workers_start(struct vmio_workers *w);
/* From any thread, a worker's callbacks included: every loop's run
 * returns after its current turn. */
void vmio_workers_stop(struct vmio_workers *w);
/* Runs loop 0 on the calling thread until a stop, then stops the others
 * and joins them. Returns 0, or the first -errno a loop failed with (a
 * failing loop stops them all). */
int vmio_workers_run(struct vmio_workers *w);

/* How many CPUs this process may run on (sched_getaffinity), at least 1. */
unsigned vmio_cpus_allowed(void);

#endif
