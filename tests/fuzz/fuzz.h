/* The libFuzzer entry point every target defines. */
#ifndef VMIO_TESTS_FUZZ_H
#define VMIO_TESTS_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Guest memory for a target: a memfd of size bytes (for vmio_mem regions
 * to map, as a VMM's would be) in *fd, and the target's own shared
 * mapping of it, returned. Aborts on failure: without memory a target
 * has nothing to test. */
static inline uint8_t *fuzz_guest_memory(const char *name, size_t size,
					 int *fd)
{
	void *p;

	*fd = memfd_create(name, MFD_CLOEXEC);
	if (*fd < 0 || ftruncate(*fd, (off_t)size) < 0)
		abort();
	p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, *fd, 0);
	if (p == MAP_FAILED)
		abort();
	return p;
}

#endif
