/* The UMEM view of guest memory (umem_view.h). */
#include "devices/net/umem_view.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static size_t page_round(size_t n)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);

	return (n + page - 1) & ~(page - 1);
}

void vnet_umem_view_unmap(struct vnet_umem_view *v)
{
	if (v->base)
		munmap(v->base, v->size);
	memset(v, 0, sizeof(*v));
}

int vnet_umem_view_map(struct vnet_umem_view *v, const struct vmio_mem *mem,
		       size_t own_size, const char **why)
{
	unsigned n = mem ? mem->nregions : 0;
	size_t size;
	void *p;

	memset(v, 0, sizeof(*v));
	if (own_size < VNET_UMEM_MIN_OWN)
		own_size = VNET_UMEM_MIN_OWN;
	v->own_size = page_round(own_size);
	size = v->own_size;
	for (unsigned i = 0; i < n; i++) {
		size_t m = page_round(mem->regions[i].map_size);

		if (m < mem->regions[i].map_size || size + m < size) {
			*why = "guest memory too large for one view";
			return -EOVERFLOW;
		}
		size += m;
	}
	/* Reserve the whole range first, so that the pieces land next to
	 * each other. */
	p = mmap(NULL, size, PROT_NONE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED) {
		*why = "cannot reserve address space for the view";
		return -errno;
	}
	v->base = p;
	v->size = size;
	if (mmap(v->base, v->own_size, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == MAP_FAILED) {
		int err = -errno;

		*why = "cannot map the view's own area";
		vnet_umem_view_unmap(v);
		return err;
	}
	size = v->own_size;
	for (unsigned i = 0; i < n; i++) {
		const struct vmio_mem_region *r = &mem->regions[i];
		size_t m = page_round(r->map_size);

		/* Old size 0: a second mapping of the same shared pages.
		 * Refused for private and (on older kernels) hugetlbfs
		 * mappings. */
		if (mremap(r->map_base, 0, m, MREMAP_MAYMOVE | MREMAP_FIXED,
			   v->base + size) == MAP_FAILED) {
			int err = -errno;

			*why = "cannot map a guest memory region a second time "
			       "(mremap; hugetlbfs memory?)";
			vnet_umem_view_unmap(v);
			return err;
		}
		v->slots[i] = (struct vnet_umem_slot){
			.host = r->host,
			.size = r->d.size,
			.off = size + (size_t)(r->host - (uint8_t *)r->map_base),
		};
		size += m;
	}
	v->nslots = n;
	return 0;
}

bool vnet_umem_view_matches(const struct vnet_umem_view *v,
			    const struct vmio_mem *mem)
{
	unsigned n = mem ? mem->nregions : 0;

	if (!v->base || v->nslots != n)
		return false;
	for (unsigned i = 0; i < n; i++)
		if (v->slots[i].host != mem->regions[i].host ||
		    v->slots[i].size != mem->regions[i].d.size)
			return false;
	return true;
}

uint64_t vnet_umem_view_offset(const struct vnet_umem_view *v, const void *p,
			       size_t len)
{
	const uint8_t *b = p;

	for (unsigned i = 0; i < v->nslots; i++) {
		const struct vnet_umem_slot *s = &v->slots[i];

		if (b >= s->host && (uint64_t)(b - s->host) <= s->size &&
		    len <= s->size - (uint64_t)(b - s->host))
			return s->off + (uint64_t)(b - s->host);
	}
	return UINT64_MAX;
}
