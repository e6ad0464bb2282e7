/* The RST queue: RSTs the device owes the guest for packets no
 * connection takes (a flow it does not know, a refused connect, a bad
 * packet) and for connections whose deadline passed, after Firecracker's
 * muxer (which queues them as rx "RST ops"). A ring of headers, bounded:
 * when it is full the multiplexer stops taking tx packets until the rx
 * queue drains it, so an RST is never dropped and the ring never grows.
 * Served before anything else on the rx queue (rx_sched.h). */
#ifndef VMIO_DEVICES_VSOCK_RST_QUEUE_H
#define VMIO_DEVICES_VSOCK_RST_QUEUE_H

#include <stdbool.h>

#include "devices/vsock/packet.h"

#define VSOCK_RSTQ_SIZE 256

struct vsock_rstq {
	struct vsock_hdr q[VSOCK_RSTQ_SIZE];
	unsigned head, len;
};

static inline bool vsock_rstq_empty(const struct vsock_rstq *q)
{
	return !q->len;
}

static inline bool vsock_rstq_full(const struct vsock_rstq *q)
{
	return q->len == VSOCK_RSTQ_SIZE;
}

/* Queues h (an RST header, as it goes to the guest); false if full. */
bool vsock_rstq_push(struct vsock_rstq *q, const struct vsock_hdr *h);
/* The oldest RST (the queue is not empty), and taking it off. */
const struct vsock_hdr *vsock_rstq_peek(const struct vsock_rstq *q);
void vsock_rstq_pop(struct vsock_rstq *q);
/* Forgets every RST (the guest is gone). */
void vsock_rstq_clear(struct vsock_rstq *q);

#endif
