/* The RST queue; see rst_queue.h. */
#include "devices/vsock/rst_queue.h"

bool vsock_rstq_push(struct vsock_rstq *q, const struct vsock_hdr *h)
{
	if (vsock_rstq_full(q))
		return false;
	q->q[(q->head + q->len) % VSOCK_RSTQ_SIZE] = *h;
	q->len++;
	return true;
}

const struct vsock_hdr *vsock_rstq_peek(const struct vsock_rstq *q)
{
	return &q->q[q->head];
}

void vsock_rstq_pop(struct vsock_rstq *q)
{
	q->head = (q->head + 1) % VSOCK_RSTQ_SIZE;
	q->len--;
}

void vsock_rstq_clear(struct vsock_rstq *q)
{
	q->head = q->len = 0;
}
