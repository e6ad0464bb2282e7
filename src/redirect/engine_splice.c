/* The splice engine: socket -> pipe -> socket, so that the payload is
 * moved by the kernel and never copied through this process. */
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include "redirect/relay_internal.h"

static int splice_init(struct redir_dir *d)
{
	int p[2];

	if (pipe2(p, O_NONBLOCK | O_CLOEXEC) < 0)
		return -errno;
	d->pipe_r = p[0];
	d->pipe_w = p[1];
	/* The pipe is the direction's buffer; if the size asked for is
	 * refused (above fs.pipe-max-size), keep what the kernel gives and
	 * bound held by that instead. */
	int sz = fcntl(d->pipe_w, F_SETPIPE_SZ, (int)d->capacity);
	if (sz < 0)
		sz = fcntl(d->pipe_w, F_GETPIPE_SZ);
	if (sz > 0 && (size_t)sz < d->capacity)
		d->capacity = (size_t)sz;
	return 0;
}

static long splice_fill(struct redir_dir *d, size_t max)
{
	size_t room = d->capacity - d->held;

	if (room > max)
		room = max;
	ssize_t r = splice(d->src, NULL, d->pipe_w, NULL, room,
			   SPLICE_F_NONBLOCK | SPLICE_F_MOVE);
	if (r < 0)
		return errno == EAGAIN || errno == EWOULDBLOCK ? -EAGAIN : -errno;
	d->held += (size_t)r;
	return r;
}

static long splice_drain(struct redir_dir *d)
{
	ssize_t w = splice(d->pipe_r, NULL, d->dst, NULL, d->held,
			   SPLICE_F_NONBLOCK | SPLICE_F_MOVE);
	if (w < 0)
		return errno == EAGAIN || errno == EWOULDBLOCK ? -EAGAIN : -errno;
	d->held -= (size_t)w;
	return w;
}

static void splice_fini(struct redir_dir *d)
{
	if (d->pipe_r >= 0)
		close(d->pipe_r);
	if (d->pipe_w >= 0)
		close(d->pipe_w);
	d->pipe_r = d->pipe_w = -1;
}

/* Only once the pipe is empty: see can_fill in relay_internal.h. */
static bool splice_can_fill(const struct redir_dir *d)
{
	return d->held == 0;
}

const struct redir_engine_ops redir_engine_splice = {
	.init = splice_init,
	.can_fill = splice_can_fill,
	.fill = splice_fill,
	.drain = splice_drain,
	.fini = splice_fini,
};
