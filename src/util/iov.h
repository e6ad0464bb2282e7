/* Scatter lists (struct iovec arrays): copying to and from flat buffers,
 * from one list to another, and slicing. The one place vmio walks an iovec
 * array byte by byte; every device and backend copies through it. */
#ifndef VMIO_UTIL_IOV_H
#define VMIO_UTIL_IOV_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

/* The bytes the n segments hold. */
size_t vmio_iov_length(const struct iovec *iov, unsigned n);

/* Copies up to len bytes from the list, offset bytes in, to dst; returns
 * how many (fewer where the list ends first). */
size_t vmio_iov_to_buf(const struct iovec *iov, unsigned n, uint64_t offset,
		       void *dst, size_t len);
/* Copies up to len bytes of src into the list, offset bytes in; returns
 * how many. */
size_t vmio_iov_from_buf(const struct iovec *iov, unsigned n, uint64_t offset,
			 const void *src, size_t len);

/* Describes bytes [off, off + len) of the list in up to max_out segments
 * of out (pointing into the same memory). Returns the segments written;
 * *covered is the bytes they hold (less than len where the list ends or
 * max_out runs out first). */
unsigned vmio_iov_slice(const struct iovec *iov, unsigned n, uint64_t off,
			uint64_t len, struct iovec *out, unsigned max_out,
			size_t *covered);

/* A position in a list, so that copying between two lists walks each
 * segment once however their pieces fall. */
struct vmio_iov_cursor {
	const struct iovec *iov;
	unsigned n;
	unsigned i;
	size_t off; /* into iov[i] */
};

void vmio_iov_cursor_init(struct vmio_iov_cursor *c, const struct iovec *iov,
			  unsigned n);
/* Moves on len bytes (or to the end). */
void vmio_iov_cursor_skip(struct vmio_iov_cursor *c, uint64_t len);
/* Copies from src to dst until either ends; returns the bytes copied. */
uint64_t vmio_iov_cursor_copy(struct vmio_iov_cursor *dst,
			      struct vmio_iov_cursor *src);

#endif
