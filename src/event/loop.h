/* A small epoll event loop. Callers register file descriptors with a
 * callback; a callback may add or remove any watch, its own included. The
 * vhost-user core and the devices take the loop from their caller, as
 * libvhost-user does, so a program can run several devices in one loop or
 * give a device a loop of its own on another thread. */
#ifndef VMIO_EVENT_LOOP_H
#define VMIO_EVENT_LOOP_H

#include <stdint.h>
#include <sys/epoll.h>

struct vmio_loop;

typedef void (*vmio_fd_cb)(void *opaque, int fd, uint32_t events);

struct vmio_loop *vmio_loop_new(void);
void vmio_loop_free(struct vmio_loop *loop);

/* events are EPOLLIN/EPOLLOUT/...; the watch is level-triggered. Returns 0,
 * or -errno (-EEXIST if fd is already watched). */
int vmio_loop_add(struct vmio_loop *loop, int fd, uint32_t events,
		  vmio_fd_cb cb, void *opaque);
int vmio_loop_modify(struct vmio_loop *loop, int fd, uint32_t events);
/* Removing an fd that is not watched is a no-op. Call it before close(fd). */
void vmio_loop_remove(struct vmio_loop *loop, int fd);

/* Waits up to timeout_ms (-1: forever) and dispatches what is ready.
 * Returns the number of callbacks run, or -errno. EINTR counts as 0. */
int vmio_loop_run_once(struct vmio_loop *loop, int timeout_ms);
/* Runs until vmio_loop_stop(). Returns 0, or -errno on an epoll failure. */
int vmio_loop_run(struct vmio_loop *loop);
void vmio_loop_stop(struct vmio_loop *loop);

#endif
