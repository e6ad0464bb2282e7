#include "util/byte_ring.h"

#include <string.h>

/* Up to max bytes from buffer offset `from` on, wrapping once. */
static unsigned pieces(const struct vmio_byte_ring *r, size_t from,
		       size_t avail, size_t max, struct iovec iov[2])
{
	size_t n = avail < max ? avail : max;
	size_t first = r->size - from;

	if (!n)
		return 0;
	if (first >= n) {
		iov[0] = (struct iovec){ r->buf + from, n };
		return 1;
	}
	iov[0] = (struct iovec){ r->buf + from, first };
	iov[1] = (struct iovec){ r->buf, n - first };
	return 2;
}

unsigned vmio_byte_ring_data(const struct vmio_byte_ring *r, size_t max,
			     struct iovec iov[2])
{
	return pieces(r, r->head, r->len, max, iov);
}

unsigned vmio_byte_ring_space(const struct vmio_byte_ring *r, size_t max,
			      struct iovec iov[2])
{
	return pieces(r, vmio_byte_ring_pos(r, r->len), r->size - r->len, max,
		      iov);
}

void vmio_byte_ring_produced(struct vmio_byte_ring *r, size_t n)
{
	r->len += n;
}

void vmio_byte_ring_unproduce(struct vmio_byte_ring *r, size_t n)
{
	r->len -= n;
	if (!r->len)
		r->head = 0;
}

void vmio_byte_ring_consumed(struct vmio_byte_ring *r, size_t n)
{
	r->len -= n;
	r->head = r->len ? vmio_byte_ring_pos(r, n) : 0;
}

int vmio_byte_ring_put(struct vmio_byte_ring *r, const void *src, size_t n)
{
	struct iovec iov[2];
	unsigned k;

	if (n > vmio_byte_ring_room(r))
		return -1;
	k = vmio_byte_ring_space(r, n, iov);
	for (size_t i = 0, off = 0; i < k; off += iov[i++].iov_len)
		memcpy(iov[i].iov_base, (const uint8_t *)src + off,
		       iov[i].iov_len);
	r->len += n;
	return 0;
}

void vmio_byte_ring_take(struct vmio_byte_ring *r, void *dst, size_t n)
{
	struct iovec iov[2];
	unsigned k = vmio_byte_ring_data(r, n, iov);

	for (size_t i = 0, off = 0; dst && i < k; off += iov[i++].iov_len)
		memcpy((uint8_t *)dst + off, iov[i].iov_base, iov[i].iov_len);
	vmio_byte_ring_consumed(r, n);
}
