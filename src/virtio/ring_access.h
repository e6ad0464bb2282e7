/* Single ring fields in memory the guest writes concurrently: read and
 * written with relaxed atomics, so that the compiler touches each of them
 * exactly once where the code says. */
#ifndef VMIO_VIRTIO_RING_ACCESS_H
#define VMIO_VIRTIO_RING_ACCESS_H

#include <endian.h>
#include <stdint.h>

static inline uint16_t vmio_ld16(const uint16_t *p)
{
	return le16toh(__atomic_load_n(p, __ATOMIC_RELAXED));
}

static inline uint16_t vmio_ld16_acquire(const uint16_t *p)
{
	return le16toh(__atomic_load_n(p, __ATOMIC_ACQUIRE));
}

static inline void vmio_st16(uint16_t *p, uint16_t v)
{
	__atomic_store_n(p, htole16(v), __ATOMIC_RELAXED);
}

static inline void vmio_st16_release(uint16_t *p, uint16_t v)
{
	__atomic_store_n(p, htole16(v), __ATOMIC_RELEASE);
}

#endif
