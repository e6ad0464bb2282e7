/* The dirty-page log; see dirty_log.h. */
#include "virtio/dirty_log.h"

#include <errno.h>
#include <sys/mman.h>
#include <unistd.h>

#include "util/fd.h"

int vmio_dirty_log_map(struct vmio_dirty_log *log, int fd, uint64_t size,
		       uint64_t offset, const char **why)
{
	long page = sysconf(_SC_PAGESIZE);
	uint64_t start, end;
	void *p;

	if (!size || size > VMIO_LOG_MAX_BYTES) {
		*why = "a log of no bytes, or more than 1 GiB";
		vmio_close_fd(&fd);
		return -EINVAL;
	}
	if (offset > UINT64_MAX - size) {
		*why = "the log's offset and size overflow";
		vmio_close_fd(&fd);
		return -EINVAL;
	}
	/* mmap wants a page-aligned offset: map from the page below. */
	start = offset & ~(uint64_t)(page - 1);
	end = offset + size;
	if (vmio_mem_check_file_size(fd, end, why)) {
		*why = "the log's file is smaller than its offset and size";
		vmio_close_fd(&fd);
		return -EINVAL;
	}
	p = mmap(NULL, end - start, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
		 (off_t)start);
	vmio_close_fd(&fd);
	if (p == MAP_FAILED) {
		*why = "the log's fd cannot be mapped at that offset and size";
		return -errno;
	}
	vmio_dirty_log_unmap(log);
	log->map_base = p;
	log->map_size = end - start;
	log->bits = (uint8_t *)p + (offset - start);
	log->size = size;
	return 0;
}

void vmio_dirty_log_unmap(struct vmio_dirty_log *log)
{
	if (log->map_base)
		munmap(log->map_base, log->map_size);
	log->map_base = NULL;
	log->map_size = 0;
	log->bits = NULL;
	log->size = 0;
}

bool vmio_dirty_log_covers(const struct vmio_dirty_log *log,
			   const struct vmio_mem *mem)
{
	uint64_t pages = (vmio_mem_gpa_end(mem) + (1u << VMIO_LOG_PAGE_SHIFT) -
			  1) >> VMIO_LOG_PAGE_SHIFT;

	return log->bits && (pages + 7) / 8 <= log->size;
}

void vmio_dirty_log_mark_gpa(struct vmio_dirty_log *log, uint64_t gpa,
			     uint64_t len)
{
	uint64_t page, last;

	if (!len || !log->bits)
		return;
	page = gpa >> VMIO_LOG_PAGE_SHIFT;
	last = (gpa + len - 1) >> VMIO_LOG_PAGE_SHIFT;
	if (gpa + len - 1 < gpa)
		last = UINT64_MAX >> VMIO_LOG_PAGE_SHIFT;
	for (; page <= last; page++) {
		if (page / 8 >= log->size) {
			__atomic_fetch_add(&log->misses, last - page + 1,
					   __ATOMIC_RELAXED);
			return;
		}
		__atomic_fetch_or(&log->bits[page / 8], (uint8_t)(1u << page % 8),
				  __ATOMIC_RELAXED);
	}
}

void vmio_dirty_log_mark_host(struct vmio_dirty_log *log,
			      const struct vmio_mem *mem, const void *p,
			      size_t len)
{
	const uint8_t *at = p;

	while (len) {
		const struct vmio_mem_region *r = NULL;
		uint64_t off, n;

		for (unsigned i = 0; i < mem->nregions; i++) {
			const struct vmio_mem_region *c = &mem->regions[i];

			if (c->host && at >= c->host &&
			    (uint64_t)(at - c->host) < c->d.size) {
				r = c;
				break;
			}
		}
		if (!r)
			return;
		off = (uint64_t)(at - r->host);
		n = r->d.size - off < len ? r->d.size - off : len;
		vmio_dirty_log_mark_gpa(log, r->d.gpa + off, n);
		at += n;
		len -= n;
	}
}

void vmio_dirty_log_mark_iov(struct vmio_dirty_log *log,
			     const struct vmio_mem *mem,
			     const struct iovec *iov, unsigned niov,
			     uint64_t len)
{
	for (unsigned i = 0; i < niov && len; i++) {
		size_t n = iov[i].iov_len < len ? iov[i].iov_len : len;

		vmio_dirty_log_mark_host(log, mem, iov[i].iov_base, n);
		len -= n;
	}
}
