/* A queue's marks while logging, out of line (vq_state.h): the calls
 * behind vmio_vq_logged's and vmio_vq_log_iov's one branch. */
#include "virtio/vq_state.h"

void vmio_vq_mark(struct vmio_vq *vq, const void *p, size_t len)
{
	vmio_dirty_log_mark_host(vq->log, vq->log_mem, p, len);
}

void vmio_vq_mark_iov(struct vmio_vq *vq, const struct iovec *iov,
		      unsigned niov, uint64_t len)
{
	vmio_dirty_log_mark_iov(vq->log, vq->log_mem, iov, niov, len);
}

void vmio_vq_mark_ring(struct vmio_vq *vq, const void *base, size_t elem,
		       unsigned at, unsigned n)
{
	const unsigned char *b = base;
	unsigned first;

	if (n > vq->size)
		n = vq->size;
	first = vq->size - at < n ? vq->size - at : n;
	vmio_vq_mark(vq, b + (size_t)at * elem, first * elem);
	if (n > first)
		vmio_vq_mark(vq, b, (n - first) * elem);
}
