/* Guest memory as the VMM describes it (SET_MEM_TABLE, ADD_MEM_REG): a set
 * of regions, each mapped from a file descriptor the VMM sent. Every
 * translation is bounds-checked against the regions; nothing here trusts an
 * address that came from the guest or the VMM. */
#ifndef VMIO_VIRTIO_MEMORY_H
#define VMIO_VIRTIO_MEMORY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "util/prefetch.h"

/* Regions one table can hold; also what GET_MAX_MEM_SLOTS reports. */
#define VMIO_MEM_MAX_REGIONS 64

/* A region as the VMM describes it in a vhost-user message. */
struct vmio_mem_region_desc {
	uint64_t gpa;         /* guest physical address */
	uint64_t size;
	uint64_t uva;         /* the VMM's virtual address (ring addresses) */
	uint64_t mmap_offset; /* offset of the region in the fd */
};

struct vmio_mem_region {
	struct vmio_mem_region_desc d;
	uint8_t *host;   /* local address of gpa */
	void *map_base;  /* what mmap returned */
	size_t map_size; /* what was mapped */
	unsigned dups;   /* identical ADD_MEM_REGs since: removals to ignore */
	/* The VMM's fd it was mapped from, kept (closed with the mapping) so
	 * that a session can be handed to another process (session_state.h),
	 * which maps it again. -1 in a region not mapped. */
	int fd;
};

struct vmio_mem {
	unsigned nregions;
	struct vmio_mem_region regions[VMIO_MEM_MAX_REGIONS];
};

void vmio_mem_init(struct vmio_mem *mem);

/* Validates d (non-zero size, no overflow of gpa+size, uva+size or
 * mmap_offset+size, no overlap with a region already present in either
 * gpa or uva space, room for another region), then maps it from fd.
 * A region identical to one present (gpa, size, uva and offset) is counted,
 * not mapped again: QEMU's multi-queue vhost-user net sends each
 * ADD_MEM_REG once per queue pair, on one connection.
 * fd is always consumed: kept with the mapping (the region's fd), or
 * closed. Returns 0, or -errno with *why set to a static string naming
 * the problem. */
int vmio_mem_add(struct vmio_mem *mem, const struct vmio_mem_region_desc *d,
		 int fd, const char **why);

/* vmio_mem_add in two halves, for a caller that must know the region is
 * good before it changes anything: prepare validates d against mem and
 * maps it from fd (always consumed) into *r, leaving mem as it is; commit
 * (which cannot fail) puts *r into mem, unchanged since. A region
 * identical to one present is mapped by neither: commit counts it.
 * Returns 0, or -errno with *why set; *r is then nothing to undo. A
 * prepared region that is not committed is given back with
 * vmio_mem_region_drop. */
int vmio_mem_prepare(const struct vmio_mem *mem,
		     const struct vmio_mem_region_desc *d, int fd,
		     struct vmio_mem_region *r, const char **why);
void vmio_mem_commit(struct vmio_mem *mem, const struct vmio_mem_region *r);
void vmio_mem_region_drop(struct vmio_mem_region *r);

/* Whether vmio_mem_remove(mem, d) would find a region. */
bool vmio_mem_holds(const struct vmio_mem *mem,
		    const struct vmio_mem_region_desc *d);

/* Unmaps the region whose gpa, size and uva match d (once removed as
 * many times as it was added). -ENOENT if none. */
int vmio_mem_remove(struct vmio_mem *mem, const struct vmio_mem_region_desc *d);

/* Unmaps everything. */
void vmio_mem_clear(struct vmio_mem *mem);

/* Whether fd, a regular file, holds at least end bytes (a mapping past
 * its end faults with SIGBUS on first touch, and a VMM is not trusted to
 * send a file as large as it says); other kinds of fd pass. Returns 0,
 * or -errno with *why. */
int vmio_mem_check_file_size(int fd, uint64_t end, const char **why);

/* The highest guest-physical address + 1 of mem's regions. */
uint64_t vmio_mem_gpa_end(const struct vmio_mem *mem);

/* Moves every region of src into dst (which must be empty) and leaves src
 * empty: used to build a new table beside the old one and swap. */
void vmio_mem_move(struct vmio_mem *dst, struct vmio_mem *src);

/* A local pointer to [gpa, gpa+len) if that range lies inside one region,
 * else NULL. len 0 is treated as 1 byte for the bounds check. */
void *vmio_mem_gpa_ptr(const struct vmio_mem *mem, uint64_t gpa, uint64_t len);

/* The same for a VMM virtual address (vring addresses arrive as those). */
void *vmio_mem_uva_ptr(const struct vmio_mem *mem, uint64_t uva, uint64_t len);

/* Appends to iov[*niov..max_iov) the local ranges covering [gpa, gpa+len),
 * one entry per region crossed. Returns 0, -EFAULT if part of the range is
 * outside guest memory, or -ENOBUFS if max_iov is too small. On failure
 * *niov is unchanged. len 0 appends nothing and succeeds. */
int vmio_mem_gpa_to_iov(const struct vmio_mem *mem, uint64_t gpa, uint32_t len,
			struct iovec *iov, unsigned *niov, unsigned max_iov);
/* vmio_mem_gpa_to_iov with a search that sets *hint to the region it
 * found gpa in (untouched on failure). */
int vmio_mem_gpa_to_iov_search(const struct vmio_mem *mem, unsigned *hint,
			       uint64_t gpa, uint32_t len, struct iovec *iov,
			       unsigned *niov, unsigned max_iov);

/* The region hint names if it holds gpa, else NULL. hint is any value:
 * checked here, never trusted. */
static inline const struct vmio_mem_region *
vmio_mem_hinted_region(const struct vmio_mem *mem, unsigned hint, uint64_t gpa)
{
	const struct vmio_mem_region *r;

	if (hint >= mem->nregions)
		return NULL;
	r = &mem->regions[hint];
	return gpa >= r->d.gpa && gpa - r->d.gpa < r->d.size ? r : NULL;
}

/* Asks the CPU for the lines of a buffer at gpa, if gpa lies in the
 * hinted region; nothing otherwise (no search: a prefetch is a hint). A
 * buffer the device writes gets its first two lines asked for to write
 * (a 64-byte frame and the header before it take two); one it reads,
 * its first line (the header) to read: asked for to write, it would be
 * taken from the driver, which wrote it and writes it next. */
static inline void vmio_mem_prefetch_hinted(const struct vmio_mem *mem,
					    unsigned hint, uint64_t gpa,
					    bool write)
{
	const struct vmio_mem_region *r = vmio_mem_hinted_region(mem, hint, gpa);
	uint64_t off;

	if (!r)
		return;
	off = gpa - r->d.gpa;
	if (!write) {
		vmio_prefetch_read(r->host + off);
		return;
	}
	vmio_prefetch_write(r->host + off);
	if (off + VMIO_CACHE_LINE < r->d.size)
		vmio_prefetch_write(r->host + off + VMIO_CACHE_LINE);
}

/* vmio_mem_gpa_to_iov that first tries the region *hint names: a queue's
 * buffers lie in one region nearly always, and the data path then pays
 * one bounds check a buffer, not a call and a search. *hint is the
 * caller's (one table serves every queue of a device, each on its own
 * worker), any value: it is checked before use, never trusted. */
static inline int vmio_mem_gpa_to_iov_hinted(const struct vmio_mem *mem,
					     unsigned *hint, uint64_t gpa,
					     uint32_t len, struct iovec *iov,
					     unsigned *niov, unsigned max_iov)
{
	const struct vmio_mem_region *r = vmio_mem_hinted_region(mem, *hint,
								 gpa);
	unsigned n = *niov;

	if (r && n < max_iov && len && len <= r->d.size - (gpa - r->d.gpa)) {
		iov[n].iov_base = r->host + (gpa - r->d.gpa);
		iov[n].iov_len = len;
		*niov = n + 1;
		return 0;
	}
	return vmio_mem_gpa_to_iov_search(mem, hint, gpa, len, iov, niov,
					  max_iov);
}

#endif
