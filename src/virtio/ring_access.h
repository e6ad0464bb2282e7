/* Single ring fields in memory the guest writes concurrently: read and
 * written with relaxed atomics, so that the compiler touches each of them
 * exactly once where the code says; and the ring areas' mapping. */
#ifndef VMIO_VIRTIO_RING_ACCESS_H
#define VMIO_VIRTIO_RING_ACCESS_H

#include <endian.h>
#include <stdint.h>

#include "virtio/memory.h"

static inline uint16_t vmio_ld16(const uint16_t *p)
{
	return le16toh(__atomic_load_n(p, __ATOMIC_RELAXED));
}

static inline uint16_t vmio_ld16_acquire(const uint16_t *p)
{
	return le16toh(__atomic_load_n(p, __ATOMIC_ACQUIRE));
}

static inline uint64_t vmio_ld64(const uint64_t *p)
{
	return le64toh(__atomic_load_n(p, __ATOMIC_RELAXED));
}

static inline void vmio_st16(uint16_t *p, uint16_t v)
{
	__atomic_store_n(p, htole16(v), __ATOMIC_RELAXED);
}

static inline void vmio_st16_release(uint16_t *p, uint16_t v)
{
	__atomic_store_n(p, htole16(v), __ATOMIC_RELEASE);
}

/* The local address of a ring area of len bytes at VMM address uva,
 * aligned to align there and here, or NULL (outside guest memory, across
 * regions, or misaligned). */
static inline void *vmio_ring_area(const struct vmio_mem *mem, uint64_t uva,
				   uint64_t len, uintptr_t align)
{
	void *p = vmio_mem_uva_ptr(mem, uva, len);

	if (!p || ((uintptr_t)p & (align - 1)) || (uva & (align - 1)))
		return NULL;
	return p;
}

#endif
