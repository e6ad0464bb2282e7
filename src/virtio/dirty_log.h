/* The dirty-page log of a live migration (vhost-user SET_LOG_BASE): one
 * bit per 4 KiB page of guest-physical memory, bit (gpa / 4096) % 8 of
 * byte gpa / 4096 / 8, in a shared mapping the VMM reads and clears while
 * the device writes it. Every byte a device writes into guest memory
 * while the VMM logs must be marked, before the used entry that hands it
 * to the driver is published: the VMM copies marked pages again, and a
 * page it does not know changed reaches the destination stale.
 *
 * A mark is an atomic OR of one byte (the VMM clears bits concurrently).
 * A page beyond the log is not marked but counted (misses): a log too
 * small for the memory table is a VMM's error, never a write outside the
 * mapping. */
#ifndef VMIO_VIRTIO_DIRTY_LOG_H
#define VMIO_VIRTIO_DIRTY_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "virtio/memory.h"

#define VMIO_LOG_PAGE_SHIFT 12
/* The largest log mapped: 2^30 bytes cover 32 TiB of guest memory. */
#define VMIO_LOG_MAX_BYTES (1ull << 30)

struct vmio_dirty_log {
	uint8_t *bits; /* NULL: none mapped */
	uint64_t size; /* bytes of bits */
	void *map_base;
	size_t map_size;
	/* Marks of pages beyond the log, from any queue's thread. */
	uint64_t misses;
};

/* Maps size bytes of fd from offset (SET_LOG_BASE's payload) in place of
 * what log had; fd is always consumed. Returns 0, or -errno with *why:
 * a size of 0 or above VMIO_LOG_MAX_BYTES, an offset that overflows, a
 * failed mmap (log then unchanged). */
int vmio_dirty_log_map(struct vmio_dirty_log *log, int fd, uint64_t size,
		       uint64_t offset, const char **why);
void vmio_dirty_log_unmap(struct vmio_dirty_log *log);

/* Whether log has a bit for every page of mem. */
bool vmio_dirty_log_covers(const struct vmio_dirty_log *log,
			   const struct vmio_mem *mem);

/* Marks the pages of guest-physical [gpa, gpa + len). */
void vmio_dirty_log_mark_gpa(struct vmio_dirty_log *log, uint64_t gpa,
			     uint64_t len);
/* Marks the guest memory under local [p, p + len), found through mem's
 * regions (a range outside them, not guest memory, is left alone). */
void vmio_dirty_log_mark_host(struct vmio_dirty_log *log,
			      const struct vmio_mem *mem, const void *p,
			      size_t len);
/* Marks the first len bytes of iov (what a device wrote into a chain's
 * writable part). */
void vmio_dirty_log_mark_iov(struct vmio_dirty_log *log,
			     const struct vmio_mem *mem,
			     const struct iovec *iov, unsigned niov,
			     uint64_t len);

#endif
