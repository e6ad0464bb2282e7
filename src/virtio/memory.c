#include "virtio/memory.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/*
 * Regions are kept sorted by gpa. Since they never overlap, a range that
 * runs off the end of region i can only continue in region i + 1, which
 * keeps the multi-region walk of vmio_mem_gpa_to_iov linear.
 *
 * Every comparison below is written so that it cannot wrap: an address
 * a lies in [base, base + size) iff a >= base && a - base < size.
 */

static long page_size(void)
{
	static long cached;

	if (!cached)
		cached = sysconf(_SC_PAGESIZE);
	return cached;
}

void vmio_mem_init(struct vmio_mem *mem)
{
	memset(mem, 0, sizeof(*mem));
}

/* Whether [a, a + as) and [b, b + bs) intersect; neither end may wrap. */
static bool ranges_overlap(uint64_t a, uint64_t as, uint64_t b, uint64_t bs)
{
	return a < b + bs && b < a + as;
}

static int validate(const struct vmio_mem *mem,
		    const struct vmio_mem_region_desc *d, const char **why)
{
	if (d->size == 0) {
		*why = "region size is zero";
		return -EINVAL;
	}
	if (d->size > UINT64_MAX - d->gpa) {
		*why = "region's guest address range wraps around";
		return -EINVAL;
	}
	if (d->size > UINT64_MAX - d->uva) {
		*why = "region's user address range wraps around";
		return -EINVAL;
	}
	if (d->size > UINT64_MAX - d->mmap_offset ||
	    d->mmap_offset + d->size > SIZE_MAX) {
		*why = "region's mmap offset plus size overflows";
		return -EINVAL;
	}
	if (mem->nregions >= VMIO_MEM_MAX_REGIONS) {
		*why = "too many memory regions";
		return -ENOSPC;
	}
	for (unsigned i = 0; i < mem->nregions; i++) {
		const struct vmio_mem_region_desc *r = &mem->regions[i].d;

		if (ranges_overlap(d->gpa, d->size, r->gpa, r->size)) {
			*why = "region overlaps an existing one in guest addresses";
			return -EINVAL;
		}
		if (ranges_overlap(d->uva, d->size, r->uva, r->size)) {
			*why = "region overlaps an existing one in user addresses";
			return -EINVAL;
		}
	}
	return 0;
}

/*
 * A mapping past the end of a regular file faults with SIGBUS on first
 * touch; the VMM is not trusted to send a file as large as it claims.
 * Other kinds of fd (devices) have no meaningful size and are left to mmap.
 */
int vmio_mem_check_file_size(int fd, uint64_t end, const char **why)
{
	struct stat st;

	if (fstat(fd, &st) < 0) {
		*why = "cannot stat the region's file descriptor";
		return -errno;
	}
	if (S_ISREG(st.st_mode) && (uint64_t)st.st_size < end) {
		*why = "region extends past the end of its file";
		return -EINVAL;
	}
	return 0;
}

static int map_region(struct vmio_mem_region *r,
		      const struct vmio_mem_region_desc *d, int fd,
		      const char **why)
{
	/* mmap wants a page-aligned offset; the VMM's need not be one. */
	uint64_t start = d->mmap_offset & ~(uint64_t)(page_size() - 1);
	size_t len = (size_t)(d->mmap_offset - start + d->size);
	void *base;

	base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
		    (off_t)start);
	if (base == MAP_FAILED) {
		*why = "mmap of the region failed";
		return -errno;
	}
	*r = (struct vmio_mem_region){
		.d = *d,
		.host = (uint8_t *)base + (d->mmap_offset - start),
		.map_base = base,
		.map_size = len,
		.fd = fd,
	};
	return 0;
}

/* The region of mem identical to d (gpa, size, uva and offset), or NULL. */
static struct vmio_mem_region *find_same(const struct vmio_mem *mem,
					 const struct vmio_mem_region_desc *d)
{
	for (unsigned i = 0; i < mem->nregions; i++) {
		const struct vmio_mem_region *e = &mem->regions[i];

		if (e->d.gpa == d->gpa && e->d.size == d->size &&
		    e->d.uva == d->uva && e->d.mmap_offset == d->mmap_offset)
			return (struct vmio_mem_region *)e;
	}
	return NULL;
}

int vmio_mem_prepare(const struct vmio_mem *mem,
		     const struct vmio_mem_region_desc *d, int fd,
		     struct vmio_mem_region *r, const char **why)
{
	const char *dummy;
	int ret;

	if (!why)
		why = &dummy;
	*r = (struct vmio_mem_region){ .d = *d, .fd = -1 };
	if (fd < 0) {
		*why = "no file descriptor for the region";
		return -EBADF;
	}
	if (find_same(mem, d)) {
		close(fd);
		return 0;
	}
	ret = validate(mem, d, why);
	if (!ret)
		ret = vmio_mem_check_file_size(fd, d->mmap_offset + d->size, why);
	if (!ret)
		ret = map_region(r, d, fd, why);
	if (ret)
		close(fd);
	return ret;
}

void vmio_mem_commit(struct vmio_mem *mem, const struct vmio_mem_region *r)
{
	unsigned pos;

	if (!r->map_base) {
		find_same(mem, &r->d)->dups++;
		return;
	}
	for (pos = 0; pos < mem->nregions; pos++)
		if (mem->regions[pos].d.gpa > r->d.gpa)
			break;
	memmove(&mem->regions[pos + 1], &mem->regions[pos],
		(mem->nregions - pos) * sizeof(mem->regions[0]));
	mem->regions[pos] = *r;
	mem->nregions++;
}

int vmio_mem_add(struct vmio_mem *mem, const struct vmio_mem_region_desc *d,
		 int fd, const char **why)
{
	struct vmio_mem_region r;
	int ret = vmio_mem_prepare(mem, d, fd, &r, why);

	if (!ret)
		vmio_mem_commit(mem, &r);
	return ret;
}

static void unmap_region(struct vmio_mem_region *r)
{
	if (r->map_base) {
		munmap(r->map_base, r->map_size);
		close(r->fd);
	}
	memset(r, 0, sizeof(*r));
	r->fd = -1;
}

void vmio_mem_region_drop(struct vmio_mem_region *r)
{
	unmap_region(r);
}

/* The index of the region vmio_mem_remove would take d to mean, or -1. */
static int find_removable(const struct vmio_mem *mem,
			  const struct vmio_mem_region_desc *d)
{
	for (unsigned i = 0; i < mem->nregions; i++) {
		const struct vmio_mem_region *r = &mem->regions[i];

		if (r->d.gpa == d->gpa && r->d.size == d->size &&
		    r->d.uva == d->uva)
			return (int)i;
	}
	return -1;
}

bool vmio_mem_holds(const struct vmio_mem *mem,
		    const struct vmio_mem_region_desc *d)
{
	return find_removable(mem, d) >= 0;
}

int vmio_mem_remove(struct vmio_mem *mem, const struct vmio_mem_region_desc *d)
{
	int i = find_removable(mem, d);
	struct vmio_mem_region *r;

	if (i < 0)
		return -ENOENT;
	r = &mem->regions[i];
	if (r->dups) {
		r->dups--;
		return 0;
	}
	unmap_region(r);
	memmove(&mem->regions[i], &mem->regions[i + 1],
		(mem->nregions - (unsigned)i - 1) * sizeof(mem->regions[0]));
	mem->nregions--;
	memset(&mem->regions[mem->nregions], 0, sizeof(mem->regions[0]));
	return 0;
}

void vmio_mem_clear(struct vmio_mem *mem)
{
	for (unsigned i = 0; i < mem->nregions; i++)
		unmap_region(&mem->regions[i]);
	mem->nregions = 0;
}

void vmio_mem_move(struct vmio_mem *dst, struct vmio_mem *src)
{
	/* dst is documented to be empty; never leak a mapping if it is not. */
	vmio_mem_clear(dst);
	memcpy(dst->regions, src->regions,
	       src->nregions * sizeof(src->regions[0]));
	dst->nregions = src->nregions;
	memset(src, 0, sizeof(*src));
}

static bool in_region(uint64_t base, uint64_t size, uint64_t a)
{
	return a >= base && a - base < size;
}

/* Index of the region holding gpa, or -1. */
static int find_gpa(const struct vmio_mem *mem, uint64_t gpa)
{
	for (unsigned i = 0; i < mem->nregions; i++) {
		const struct vmio_mem_region_desc *d = &mem->regions[i].d;

		if (in_region(d->gpa, d->size, gpa))
			return (int)i;
	}
	return -1;
}

void *vmio_mem_gpa_ptr(const struct vmio_mem *mem, uint64_t gpa, uint64_t len)
{
	int i = find_gpa(mem, gpa);
	const struct vmio_mem_region *r;
	uint64_t off;

	if (i < 0)
		return NULL;
	r = &mem->regions[i];
	off = gpa - r->d.gpa;
	if ((len ? len : 1) > r->d.size - off)
		return NULL;
	return r->host + off;
}

void *vmio_mem_uva_ptr(const struct vmio_mem *mem, uint64_t uva, uint64_t len)
{
	if (!len)
		len = 1;
	for (unsigned i = 0; i < mem->nregions; i++) {
		const struct vmio_mem_region *r = &mem->regions[i];
		uint64_t off = uva - r->d.uva;

		if (in_region(r->d.uva, r->d.size, uva) &&
		    len <= r->d.size - off)
			return r->host + off;
	}
	return NULL;
}

/* The ranges of [gpa, gpa + len), len > 0, from region i, which holds
 * gpa, on. */
static int to_iov_from(const struct vmio_mem *mem, unsigned i, uint64_t gpa,
		       uint32_t len, struct iovec *iov, unsigned *niov,
		       unsigned max_iov)
{
	unsigned n = *niov;
	uint64_t left = len;

	for (;;) {
		const struct vmio_mem_region *r = &mem->regions[i];
		uint64_t off = gpa - r->d.gpa;
		uint64_t chunk = r->d.size - off;

		if (chunk > left)
			chunk = left;
		if (n >= max_iov)
			return -ENOBUFS;
		iov[n].iov_base = r->host + off;
		iov[n].iov_len = (size_t)chunk;
		n++;
		left -= chunk;
		if (!left)
			break;
		/* Sorted and disjoint: only the next region can continue it. */
		gpa += chunk;
		i++;
		if (i >= mem->nregions || mem->regions[i].d.gpa != gpa)
			return -EFAULT;
	}
	*niov = n;
	return 0;
}

int vmio_mem_gpa_to_iov(const struct vmio_mem *mem, uint64_t gpa, uint32_t len,
			struct iovec *iov, unsigned *niov, unsigned max_iov)
{
	unsigned hint;

	return vmio_mem_gpa_to_iov_search(mem, &hint, gpa, len, iov, niov,
					  max_iov);
}

int vmio_mem_gpa_to_iov_search(const struct vmio_mem *mem, unsigned *hint,
			       uint64_t gpa, uint32_t len, struct iovec *iov,
			       unsigned *niov, unsigned max_iov)
{
	int i, rc;

	if (!len)
		return 0;
	i = find_gpa(mem, gpa);
	if (i < 0)
		return -EFAULT;
	rc = to_iov_from(mem, (unsigned)i, gpa, len, iov, niov, max_iov);
	if (!rc)
		*hint = (unsigned)i;
	return rc;
}

uint64_t vmio_mem_gpa_end(const struct vmio_mem *mem)
{
	uint64_t end = 0;

	for (unsigned i = 0; i < mem->nregions; i++) {
		const struct vmio_mem_region_desc *d = &mem->regions[i].d;

		if (d->gpa + d->size > end)
			end = d->gpa + d->size;
	}
	return end;
}
