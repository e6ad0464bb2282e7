/* The copy engine: readv/writev through a byte ring, so that a partial
 * write never forces a memmove and the buffer is reused in place. */
#include <errno.h>
#include <stdlib.h>
#include <sys/uio.h>

#include "redirect/relay_internal.h"

static long errno_result(void)
{
	return errno == EAGAIN || errno == EWOULDBLOCK ? -EAGAIN : -errno;
}

static int copy_init(struct redir_dir *d)
{
	/* Pages are touched only as data passes, so an idle connection
	 * costs little resident memory. */
	vmio_byte_ring_init(&d->ring, malloc(d->capacity), d->capacity);
	return d->ring.buf ? 0 : -ENOMEM;
}

static long copy_fill(struct redir_dir *d, size_t max)
{
	struct iovec iov[2];
	unsigned n = vmio_byte_ring_space(&d->ring, max, iov);
	ssize_t r = readv(d->src, iov, (int)n);

	if (r < 0)
		return errno_result();
	vmio_byte_ring_produced(&d->ring, (size_t)r);
	d->held = vmio_byte_ring_len(&d->ring);
	return r;
}

static long copy_drain(struct redir_dir *d)
{
	struct iovec iov[2];
	unsigned n = vmio_byte_ring_data(&d->ring, SIZE_MAX, iov);
	ssize_t w = writev(d->dst, iov, (int)n);

	if (w < 0)
		return errno_result();
	vmio_byte_ring_consumed(&d->ring, (size_t)w);
	d->held = vmio_byte_ring_len(&d->ring);
	return w;
}

static void copy_fini(struct redir_dir *d)
{
	free(d->ring.buf);
	d->ring.buf = NULL;
}

static bool copy_can_fill(const struct redir_dir *d)
{
	return d->held < d->capacity;
}

const struct redir_engine_ops redir_engine_copy = {
	.init = copy_init,
	.can_fill = copy_can_fill,
	.fill = copy_fill,
	.drain = copy_drain,
	.fini = copy_fini,
};
