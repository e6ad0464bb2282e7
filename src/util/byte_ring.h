/* A bounded byte FIFO over a buffer its user owns: what a socket did not
 * take yet, or what a peer sent before its reader asked. Held bytes and
 * free room are each at most two pieces (the buffer wraps), described as
 * an iovec pair so that one readv or writev moves them; a partial write
 * never costs a memmove. The one ring vmio keeps bytes in: vhost-user's
 * reply outbox, the vsock device's per-connection buffer, redirect's copy
 * engine and the test driver's receive buffers. */
#ifndef VMIO_UTIL_BYTE_RING_H
#define VMIO_UTIL_BYTE_RING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

struct vmio_byte_ring {
	uint8_t *buf; /* size bytes; may be set after init (allocated on first use) */
	size_t size;
	size_t head;  /* offset of the first byte held */
	size_t len;   /* bytes held */
};

static inline void vmio_byte_ring_init(struct vmio_byte_ring *r, void *buf,
				       size_t size)
{
	*r = (struct vmio_byte_ring){ .buf = buf, .size = size };
}
static inline size_t vmio_byte_ring_len(const struct vmio_byte_ring *r)
{
	return r->len;
}
static inline size_t vmio_byte_ring_room(const struct vmio_byte_ring *r)
{
	return r->size - r->len;
}
static inline bool vmio_byte_ring_empty(const struct vmio_byte_ring *r)
{
	return r->len == 0;
}
/* The buffer offset of the i-th byte held (i may be len: the tail). */
static inline size_t vmio_byte_ring_pos(const struct vmio_byte_ring *r,
					size_t i)
{
	return (r->head + i) % r->size;
}

/* The first max bytes held (all of them if fewer), in order, as one or
 * two pieces of iov. Returns the pieces: 0 when nothing is held. */
unsigned vmio_byte_ring_data(const struct vmio_byte_ring *r, size_t max,
			     struct iovec iov[2]);
/* The first max bytes of free room after the held bytes, as one or two
 * pieces. Returns the pieces: 0 when the ring is full. */
unsigned vmio_byte_ring_space(const struct vmio_byte_ring *r, size_t max,
			      struct iovec iov[2]);
/* n bytes (at most the room) were written into the space: they are held
 * now, after the others. */
void vmio_byte_ring_produced(struct vmio_byte_ring *r, size_t n);
/* The first n bytes held (at most len) are gone. An emptied ring starts
 * again at the buffer's start, so that the next fill is one piece. */
void vmio_byte_ring_consumed(struct vmio_byte_ring *r, size_t n);
/* The last n bytes held (at most len) are gone: taken back from the
 * tail, as a message never completed. */
void vmio_byte_ring_unproduce(struct vmio_byte_ring *r, size_t n);
/* Takes the first n bytes held (at most len) off the ring, copying them
 * to dst (NULL: drops them). */
void vmio_byte_ring_take(struct vmio_byte_ring *r, void *dst, size_t n);
/* Copies n bytes in after the others. Returns 0, or -1 (and copies
 * nothing) when they do not fit. */
int vmio_byte_ring_put(struct vmio_byte_ring *r, const void *src, size_t n);

#endif
