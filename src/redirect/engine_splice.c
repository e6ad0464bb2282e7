/* The splice engine: socket -> pipe -> socket, so that the payload is
 * moved by the kernel and never copied through this process. */
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include "redirect/relay_internal.h"

/* The pipe starts at the kernel's default size (or capacity, if that
 * is smaller) and doubles once it has carried GROW_AFTER times its size,
 * up to capacity: an idle connection holds few pipe pages, a busy one
 * soon moves capacity per splice. */
#define GROW_AFTER 4

/* Sets the pipe to size bytes. Returns 0, or -1 if the kernel refuses
 * (above fs.pipe-max-size, or the user's pipe pages). */
static int set_pipe_size(struct redir_dir *d, size_t size)
{
	int sz = fcntl(d->pipe_w, F_SETPIPE_SZ, (int)size);

	if (sz < 0)
		return -1;
	d->pipe_size = (size_t)sz;
	return 0;
}

static int splice_init(struct redir_dir *d)
{
	int p[2];

	if (pipe2(p, O_NONBLOCK | O_CLOEXEC) < 0)
		return -errno;
	d->pipe_r = p[0];
	d->pipe_w = p[1];
	int sz = fcntl(d->pipe_w, F_GETPIPE_SZ);
	if (sz <= 0)
		return -errno;
	d->pipe_size = (size_t)sz;
	/* Smaller than the default: what -b asks (the kernel rounds up to
	 * pages; fills are bounded by capacity all the same). */
	if (d->pipe_size > d->capacity)
		set_pipe_size(d, d->capacity);
	return 0;
}

static void maybe_grow(struct redir_dir *d)
{
	size_t next = d->pipe_size * 2;

	if (d->pipe_size >= d->capacity || d->filled < GROW_AFTER * d->pipe_size)
		return;
	d->filled = 0;
	if (next > d->capacity)
		next = d->capacity;
	/* Refused: stay at this size from now on. */
	if (set_pipe_size(d, next))
		d->capacity = d->pipe_size;
}

static long splice_fill(struct redir_dir *d, size_t max)
{
	size_t room = (d->pipe_size < d->capacity ? d->pipe_size : d->capacity) -
		      d->held;

	if (room > max)
		room = max;
	ssize_t r = splice(d->src, NULL, d->pipe_w, NULL, room,
			   SPLICE_F_NONBLOCK | SPLICE_F_MOVE);
	if (r < 0)
		return errno == EAGAIN || errno == EWOULDBLOCK ? -EAGAIN : -errno;
	d->held += (size_t)r;
	d->filled += (uint64_t)r;
	maybe_grow(d);
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
