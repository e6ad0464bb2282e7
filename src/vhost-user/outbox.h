/* Replies waiting for the front end to read them: a bounded byte queue,
 * written to the socket without waiting. vmio's replies carry no file
 * descriptors, so bytes are all there is to keep. A front end follows
 * each request by reading its reply, so a well-behaved one never leaves
 * more than a reply or two here; the bound is what a hostile one costs. */
#ifndef VMIO_VHOST_USER_OUTBOX_H
#define VMIO_VHOST_USER_OUTBOX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/byte_ring.h"
#include "vhost-user/protocol.h"

/* Eight of the largest replies. */
#define VHOST_USER_OUTBOX_SIZE                                                 \
	(8 * (sizeof(struct vhost_user_header) + VHOST_USER_MAX_PAYLOAD))

struct vhost_user_outbox {
	uint8_t buf[VHOST_USER_OUTBOX_SIZE];
	struct vmio_byte_ring ring; /* over buf */
};

static inline void vhost_user_outbox_init(struct vhost_user_outbox *o)
{
	vmio_byte_ring_init(&o->ring, o->buf, sizeof(o->buf));
}
static inline bool vhost_user_outbox_empty(const struct vhost_user_outbox *o)
{
	return vmio_byte_ring_empty(&o->ring);
}
static inline size_t vhost_user_outbox_room(const struct vhost_user_outbox *o)
{
	return vmio_byte_ring_room(&o->ring);
}

/* Queues msg's header and payload (its fds are not sent). Returns 0, or
 * -ENOBUFS when it does not fit, leaving the outbox as it was. */
int vhost_user_outbox_put(struct vhost_user_outbox *o,
			  const struct vhost_user_msg *msg);
/* The bytes waiting, in order, into out (room for
 * VHOST_USER_OUTBOX_SIZE): what a hand-over carries. Returns how many. */
size_t vhost_user_outbox_copy(const struct vhost_user_outbox *o, void *out);
/* Queues n bytes another process left waiting. Returns 0, or -ENOBUFS
 * when they do not fit an empty outbox's room. */
int vhost_user_outbox_preload(struct vhost_user_outbox *o, const void *bytes,
			      size_t n);
/* Writes what the socket takes now. Returns 0 (the outbox may still hold
 * bytes), or -errno when the socket failed. */
int vhost_user_outbox_flush(struct vhost_user_outbox *o, int sock);

#endif
