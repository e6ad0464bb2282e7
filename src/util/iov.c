#include "util/iov.h"

#include <stdbool.h>
#include <string.h>

size_t vmio_iov_length(const struct iovec *iov, unsigned n)
{
	size_t len = 0;

	for (unsigned i = 0; i < n; i++)
		len += iov[i].iov_len;
	return len;
}

static size_t copy_iov(const struct iovec *iov, unsigned n, uint64_t offset,
		       uint8_t *buf, size_t len, bool to_iov)
{
	size_t done = 0;

	for (unsigned k = 0; k < n && done < len; k++) {
		size_t chunk;
		uint8_t *p;

		if (offset >= iov[k].iov_len) {
			offset -= iov[k].iov_len;
			continue;
		}
		p = (uint8_t *)iov[k].iov_base + offset;
		chunk = iov[k].iov_len - (size_t)offset;
		if (chunk > len - done)
			chunk = len - done;
		if (to_iov)
			memcpy(p, buf + done, chunk);
		else
			memcpy(buf + done, p, chunk);
		done += chunk;
		offset = 0;
	}
	return done;
}

size_t vmio_iov_to_buf(const struct iovec *iov, unsigned n, uint64_t offset,
		       void *dst, size_t len)
{
	return copy_iov(iov, n, offset, dst, len, false);
}

size_t vmio_iov_from_buf(const struct iovec *iov, unsigned n, uint64_t offset,
			 const void *src, size_t len)
{
	return copy_iov(iov, n, offset, (uint8_t *)src, len, true);
}

unsigned vmio_iov_slice(const struct iovec *iov, unsigned n, uint64_t off,
			uint64_t len, struct iovec *out, unsigned max_out,
			size_t *covered)
{
	unsigned i, k = 0;
	size_t done = 0;

	for (i = 0; i < n && len && k < max_out; i++) {
		size_t seg = iov[i].iov_len;
		size_t take;

		if (off >= seg) {
			off -= seg;
			continue;
		}
		take = seg - (size_t)off;
		if (take > len)
			take = (size_t)len;
		out[k].iov_base = (uint8_t *)iov[i].iov_base + off;
		out[k].iov_len = take;
		k++;
		done += take;
		len -= take;
		off = 0;
	}
	*covered = done;
	return k;
}

void vmio_iov_cursor_init(struct vmio_iov_cursor *c, const struct iovec *iov,
			  unsigned n)
{
	c->iov = iov;
	c->n = n;
	c->i = 0;
	c->off = 0;
}

void vmio_iov_cursor_skip(struct vmio_iov_cursor *c, uint64_t len)
{
	while (len && c->i < c->n) {
		size_t room = c->iov[c->i].iov_len - c->off;

		if (len < room) {
			c->off += len;
			return;
		}
		len -= room;
		c->i++;
		c->off = 0;
	}
}

uint64_t vmio_iov_cursor_copy(struct vmio_iov_cursor *dst,
			      struct vmio_iov_cursor *src)
{
	uint64_t total = 0;

	while (dst->i < dst->n && src->i < src->n) {
		const struct iovec *d = &dst->iov[dst->i];
		const struct iovec *s = &src->iov[src->i];
		size_t dn = d->iov_len - dst->off;
		size_t sn = s->iov_len - src->off;
		size_t n = dn < sn ? dn : sn;

		memcpy((uint8_t *)d->iov_base + dst->off,
		       (const uint8_t *)s->iov_base + src->off, n);
		total += n;
		dst->off += n;
		src->off += n;
		if (dst->off == d->iov_len) {
			dst->i++;
			dst->off = 0;
		}
		if (src->off == s->iov_len) {
			src->i++;
			src->off = 0;
		}
	}
	return total;
}
