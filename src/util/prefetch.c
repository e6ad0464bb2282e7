#include "util/prefetch.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

bool vmio_cpu_has_prefetchw;

/* Before main, and before any thread: every binary that links the
 * library gets it without a call, and nothing writes it after. */
__attribute__((constructor)) static void detect_prefetchw(void)
{
#if defined(__x86_64__) || defined(__i386__)
	unsigned a, b, c, d;

	if (__get_cpuid(0x80000001, &a, &b, &c, &d))
		vmio_cpu_has_prefetchw = c & bit_PRFCHW;
#endif
}
