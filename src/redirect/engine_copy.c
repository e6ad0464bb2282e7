/* The copy engine: readv/writev through a ring buffer, so that a partial
 * write never forces a memmove and the buffer is reused in place. */
#include <errno.h>
#include <stdlib.h>
#include <sys/uio.h>

#include "redirect/relay_internal.h"

static int copy_init(struct redir_dir *d)
{
	/* Pages are touched only as data passes, so an idle connection
	 * costs little resident memory. */
	d->ring = malloc(d->capacity);
	return d->ring ? 0 : -ENOMEM;
}

static long copy_fill(struct redir_dir *d, size_t max)
{
	size_t tail = (d->head + d->held) % d->capacity;
	size_t room = d->capacity - d->held;
	struct iovec iov[2];
	int n = 0;

	if (room > max)
		room = max;
	size_t first = d->capacity - tail < room ? d->capacity - tail : room;
	iov[n++] = (struct iovec){ d->ring + tail, first };
	if (room > first)
		iov[n++] = (struct iovec){ d->ring, room - first };

	ssize_t r = readv(d->src, iov, n);
	if (r < 0)
		return errno == EAGAIN || errno == EWOULDBLOCK ? -EAGAIN : -errno;
	d->held += (size_t)r;
	return r;
}

static long copy_drain(struct redir_dir *d)
{
	size_t first = d->capacity - d->head < d->held ? d->capacity - d->head :
							 d->held;
	struct iovec iov[2];
	int n = 0;

	iov[n++] = (struct iovec){ d->ring + d->head, first };
	if (d->held > first)
		iov[n++] = (struct iovec){ d->ring, d->held - first };

	ssize_t w = writev(d->dst, iov, n);
	if (w < 0)
		return errno == EAGAIN || errno == EWOULDBLOCK ? -EAGAIN : -errno;
	d->head = (d->head + (size_t)w) % d->capacity;
	d->held -= (size_t)w;
	if (!d->held)
		d->head = 0; /* keep the next reads contiguous */
	return w;
}

static void copy_fini(struct redir_dir *d)
{
	free(d->ring);
	d->ring = NULL;
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
