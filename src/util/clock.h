/* The monotonic clock every deadline and rate in vmio is measured on. */
#ifndef VMIO_UTIL_CLOCK_H
#define VMIO_UTIL_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t vmio_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline int64_t vmio_now_ms(void)
{
	return (int64_t)(vmio_now_ns() / 1000000u);
}

#endif
