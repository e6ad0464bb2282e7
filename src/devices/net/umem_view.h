/* Guest memory seen as one AF_XDP UMEM. The kernel takes a UMEM as one
 * range of our address space, registered and pinned whole, and names every
 * buffer by its offset in that range; guest memory is up to
 * VMIO_MEM_MAX_REGIONS mappings wherever mmap put them. So we lay out a
 * view: an area of vmio's own first (frames for the copy path, and room in
 * front of the first guest byte for the kernel's headroom arithmetic), then
 * a second mapping of each region, back to back (mremap of the shared
 * mapping with old size 0: the same pages, nothing copied). With no guest
 * memory the view is the area of our own alone: the copy path's UMEM. */
#ifndef VMIO_DEVICES_NET_UMEM_VIEW_H
#define VMIO_DEVICES_NET_UMEM_VIEW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "virtio/memory.h"

/* The smallest area of our own: the fill ring's headroom arithmetic may
 * put a chunk's start this far in front of a guest buffer. */
#define VNET_UMEM_MIN_OWN 4096u

struct vnet_umem_slot {
	const uint8_t *host; /* memory.c's address of the region's first byte */
	uint64_t size;
	uint64_t off; /* the same byte's offset in the view */
};

struct vnet_umem_view {
	uint8_t *base; /* NULL: nothing mapped */
	size_t size;
	size_t own_size; /* [0, own_size) is ours */
	unsigned nslots;
	struct vnet_umem_slot slots[VMIO_MEM_MAX_REGIONS];
};

/* Maps a view of own_size bytes of our own (rounded up to pages, at least
 * VNET_UMEM_MIN_OWN) followed by every region of mem (mem may be NULL).
 * Returns 0, or -errno with *why naming what failed; nothing stays mapped
 * then. */
int vnet_umem_view_map(struct vnet_umem_view *v, const struct vmio_mem *mem,
		       size_t own_size, const char **why);
void vnet_umem_view_unmap(struct vnet_umem_view *v);

/* Whether v shows exactly mem's regions (same local addresses, sizes). */
bool vnet_umem_view_matches(const struct vnet_umem_view *v,
			    const struct vmio_mem *mem);

/* The view offset of [p, p + len), memory.c's address of guest bytes, if
 * the range lies inside one region; else UINT64_MAX. */
uint64_t vnet_umem_view_offset(const struct vnet_umem_view *v, const void *p,
			       size_t len);

#endif
