/* The monotonic clock every deadline and rate in vmio is measured on, and
 * the calling thread's CPU clock (what event/cpu_account.h charges). */
#ifndef VMIO_UTIL_CLOCK_H
#define VMIO_UTIL_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t vmio_clock_ns(clockid_t clock)
{
	struct timespec ts;

	clock_gettime(clock, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline uint64_t vmio_now_ns(void)
{
	return vmio_clock_ns(CLOCK_MONOTONIC);
}

/* A system call, not the vDSO: about 1.3 us on this kind of host. */
static inline uint64_t vmio_thread_cpu_ns(void)
{
	return vmio_clock_ns(CLOCK_THREAD_CPUTIME_ID);
}

static inline int64_t vmio_now_ms(void)
{
	return (int64_t)(vmio_now_ns() / 1000000u);
}

#endif
