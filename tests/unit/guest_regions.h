/* Guest memory for the ring tests: regions backed by memfds, at VMM
 * addresses unrelated to their guest addresses so that a gpa/uva mix-up
 * shows. */
#ifndef VMIO_TESTS_UNIT_GUEST_REGIONS_H
#define VMIO_TESTS_UNIT_GUEST_REGIONS_H

#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#include "virtio/memory.h"

/* A memfd of size bytes, as a VMM makes for guest memory or a log (a
 * cmocka test fails if it cannot). */
static inline int test_memfd(size_t size)
{
	int fd = memfd_create("vmio-test", MFD_CLOEXEC);

	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, (off_t)size), 0);
	return fd;
}

/* Adds [gpa, gpa + size) at VMM address uva (a cmocka test fails if it
 * cannot). */
static inline void guest_region_add(struct vmio_mem *mem, uint64_t gpa,
				    uint64_t size, uint64_t uva)
{
	struct vmio_mem_region_desc d = {
		.gpa = gpa, .size = size, .uva = uva, .mmap_offset = 0,
	};
	const char *why = NULL;

	assert_int_equal(vmio_mem_add(mem, &d, test_memfd(size), &why), 0);
}

/* The local address of gpa (fails the test if it is not guest memory). */
static inline void *guest_ptr(struct vmio_mem *mem, uint64_t gpa)
{
	void *p = vmio_mem_gpa_ptr(mem, gpa, 1);

	assert_non_null(p);
	return p;
}

#endif
