/* Prefetches: hints to the CPU, which never fault whatever the address.
 *
 * For a line the device is about to write that another core holds (a
 * guest's receive buffer the driver read last), a read prefetch brings
 * it shared and the store then waits a second time, for the other
 * core to let go of it. PREFETCHW asks for it to write at once. gcc
 * emits it only for a -march that has it, so it is asked for here,
 * where the CPU says it has it (CPUID, at start: prefetch.c). */
#ifndef VMIO_UTIL_PREFETCH_H
#define VMIO_UTIL_PREFETCH_H

#include <stdbool.h>

/* The line a prefetch brings, on the CPUs vmio runs on. */
#define VMIO_CACHE_LINE 64

extern bool vmio_cpu_has_prefetchw;

/* The line at p, to be written. */
static inline void vmio_prefetch_write(const void *p)
{
#if defined(__x86_64__) || defined(__i386__)
	if (__builtin_expect(vmio_cpu_has_prefetchw, 1)) {
		__asm__ __volatile__("prefetchw %0" : : "m"(*(const char *)p));
		return;
	}
#endif
	__builtin_prefetch(p, 1);
}

/* The line at p, to be read. */
static inline void vmio_prefetch_read(const void *p)
{
	__builtin_prefetch(p, 0);
}

#endif
