#include "event/loop.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>

/* Watches are kept in a table indexed by fd so lookup is O(1); epoll's
 * data carries the fd and a generation count, so an event for a watch that
 * was removed (and perhaps re-added for a reused fd) during the same batch
 * is recognised as stale and dropped. */
struct watch {
	vmio_fd_cb cb;
	void *opaque;
	uint32_t generation;
	bool active;
};

struct vmio_loop {
	int epfd;
	bool stop;
	struct watch *watches;
	size_t nwatches;
	uint32_t next_generation;
};

#define LOOP_MAX_EVENTS 64

static uint64_t pack(int fd, uint32_t generation)
{
	return ((uint64_t)generation << 32) | (uint32_t)fd;
}

struct vmio_loop *vmio_loop_new(void)
{
	struct vmio_loop *loop = calloc(1, sizeof(*loop));
	if (!loop)
		return NULL;
	loop->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (loop->epfd < 0) {
		free(loop);
		return NULL;
	}
	loop->next_generation = 1;
	return loop;
}

void vmio_loop_free(struct vmio_loop *loop)
{
	if (!loop)
		return;
	close(loop->epfd);
	free(loop->watches);
	free(loop);
}

static int ensure_slot(struct vmio_loop *loop, int fd)
{
	if ((size_t)fd < loop->nwatches)
		return 0;
	size_t n = loop->nwatches ? loop->nwatches : 64;
	while (n <= (size_t)fd)
		n *= 2;
	struct watch *w = realloc(loop->watches, n * sizeof(*w));
	if (!w)
		return -ENOMEM;
	for (size_t i = loop->nwatches; i < n; i++)
		w[i] = (struct watch){ 0 };
	loop->watches = w;
	loop->nwatches = n;
	return 0;
}

int vmio_loop_add(struct vmio_loop *loop, int fd, uint32_t events,
		  vmio_fd_cb cb, void *opaque)
{
	if (fd < 0 || !cb)
		return -EINVAL;
	int rc = ensure_slot(loop, fd);
	if (rc)
		return rc;
	struct watch *w = &loop->watches[fd];
	if (w->active)
		return -EEXIST;
	uint32_t gen = loop->next_generation++;
	struct epoll_event ev = { .events = events, .data.u64 = pack(fd, gen) };
	if (epoll_ctl(loop->epfd, EPOLL_CTL_ADD, fd, &ev) < 0)
		return -errno;
	*w = (struct watch){ .cb = cb, .opaque = opaque, .generation = gen,
			     .active = true };
	return 0;
}

int vmio_loop_modify(struct vmio_loop *loop, int fd, uint32_t events)
{
	if (fd < 0 || (size_t)fd >= loop->nwatches || !loop->watches[fd].active)
		return -ENOENT;
	struct epoll_event ev = {
		.events = events,
		.data.u64 = pack(fd, loop->watches[fd].generation),
	};
	if (epoll_ctl(loop->epfd, EPOLL_CTL_MOD, fd, &ev) < 0)
		return -errno;
	return 0;
}

void vmio_loop_remove(struct vmio_loop *loop, int fd)
{
	if (fd < 0 || (size_t)fd >= loop->nwatches || !loop->watches[fd].active)
		return;
	epoll_ctl(loop->epfd, EPOLL_CTL_DEL, fd, NULL);
	loop->watches[fd].active = false;
}

int vmio_loop_run_once(struct vmio_loop *loop, int timeout_ms)
{
	struct epoll_event events[LOOP_MAX_EVENTS];
	int n = epoll_wait(loop->epfd, events, LOOP_MAX_EVENTS, timeout_ms);
	if (n < 0)
		return errno == EINTR ? 0 : -errno;
	int ran = 0;
	for (int i = 0; i < n; i++) {
		int fd = (int)(uint32_t)events[i].data.u64;
		uint32_t gen = (uint32_t)(events[i].data.u64 >> 32);
		if ((size_t)fd >= loop->nwatches)
			continue;
		struct watch *w = &loop->watches[fd];
		if (!w->active || w->generation != gen)
			continue;
		w->cb(w->opaque, fd, events[i].events);
		ran++;
	}
	return ran;
}

int vmio_loop_run(struct vmio_loop *loop)
{
	loop->stop = false;
	while (!loop->stop) {
		int rc = vmio_loop_run_once(loop, -1);
		if (rc < 0)
			return rc;
	}
	return 0;
}

void vmio_loop_stop(struct vmio_loop *loop)
{
	loop->stop = true;
}
