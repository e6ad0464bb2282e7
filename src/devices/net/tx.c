/* Guest to backend. Each chain is one frame: the virtio-net header, then
 * the frame. The header is copied out once and validated there; the
 * backend gets that copy, not the guest's bytes, so a guest that rewrites
 * the header after the check changes nothing. The frame's own bytes go
 * from guest memory to the backend as they are (its length, the one thing
 * the header is checked against, is fixed by our copy of the chain). */
#include "devices/net/device_internal.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

void vnet_reschedule(struct vmio_vq *vq)
{
	uint64_t one = 1;

	if (vq->kick_fd >= 0 && write(vq->kick_fd, &one, sizeof(one)) < 0 &&
	    errno != EAGAIN)
		log_warn("net: cannot reschedule queue %u: %s", vq->index,
			 strerror(errno));
}

/* Fills d->iov with hdr then the chain's readable part from skip bytes
 * on. Returns the number of segments, or 0 if they do not fit writev. */
static unsigned tx_segments(struct vnet_device *d, struct virtio_net_hdr *hdr,
			    size_t skip)
{
	const struct vmio_chain *c = &d->chain;
	unsigned n = 0;

	d->iov[n++] = (struct iovec){ .iov_base = hdr, .iov_len = d->hdr_len };
	for (unsigned i = 0; i < c->nout; i++) {
		const struct iovec *s = &c->iov[i];

		if (skip >= s->iov_len) {
			skip -= s->iov_len;
			continue;
		}
		if (n == VNET_MAX_IOV)
			return 0;
		d->iov[n++] = (struct iovec){
			.iov_base = (uint8_t *)s->iov_base + skip,
			.iov_len = s->iov_len - skip,
		};
		skip = 0;
	}
	return n;
}

static void tx_drop(struct vnet_device *d, struct vnet_pair *p,
		    enum vnet_hdr_verdict v, size_t frame_len)
{
	d->stats.tx_invalid[v]++;
	log_ratelimited(&d->rl, VMIO_LOG_WARN,
			"net: tx queue %u: dropped a %zu-byte frame: %s",
			p->tx->index, frame_len, vnet_hdr_verdict_name(v));
}

/* One chain: validate, hand over, count. The chain is pushed by the
 * caller whatever happens here. */
static void tx_one(struct vnet_device *d, struct vnet_pair *p)
{
	const struct vmio_chain *c = &d->chain;
	struct virtio_net_hdr hdr = { 0 };
	enum vnet_hdr_verdict v;
	size_t frame_len;
	unsigned n;
	int rc;

	if (c->out_len < d->hdr_len) {
		d->stats.tx_bad_chain++;
		return;
	}
	/* Drivers put the header in one descriptor (or in front of the
	 * frame in it): copy it straight, else gather it. */
	if (c->nout && c->iov[0].iov_len >= d->hdr_len)
		memcpy(&hdr, c->iov[0].iov_base, d->hdr_len);
	else
		vmio_chain_read(c, 0, &hdr, d->hdr_len);
	frame_len = (size_t)(c->out_len - d->hdr_len);
	v = vnet_hdr_check_tx(&hdr, frame_len, d->features, d->cfg.mtu);
	if (v != VNET_HDR_OK) {
		tx_drop(d, p, v, frame_len);
		return;
	}
	/* Meaningless on tx (5.1.6.2); the backend need not see the
	 * guest's value. */
	hdr.num_buffers = 0;
	n = tx_segments(d, &hdr, d->hdr_len);
	if (!n) {
		d->stats.tx_bad_chain++;
		return;
	}
	rc = d->be->ops->tx(d->be, p->index, d->iov, n);
	if (rc) {
		d->stats.tx_backend_errors++;
		log_ratelimited(&d->rl, VMIO_LOG_WARN,
				"net: tx queue %u: %s backend dropped a frame: %s",
				p->tx->index, d->be->ops->name, strerror(-rc));
		return;
	}
	d->stats.tx_frames++;
	d->stats.tx_bytes += frame_len;
}

/* Returns 1 if the budget ran out, 0 if the ring is empty, -1 if the
 * queue broke. */
static int tx_drain(struct vnet_device *d, struct vnet_pair *p,
		    unsigned *budget)
{
	unsigned pushed = 0;
	int got = 0;

	while (*budget) {
		got = vmio_vq_pop(p->tx, d->mem, &d->chain);
		if (got <= 0)
			break;
		(*budget)--;
		tx_one(d, p);
		vmio_vq_push(p->tx, d->chain.head, 0);
		pushed++;
	}
	if (pushed) {
		if (d->be->ops->tx_flush)
			d->be->ops->tx_flush(d->be, p->index);
		vmio_vq_flush_and_notify(p->tx);
	}
	if (got < 0)
		return -1;
	return *budget ? 0 : 1;
}

/* Kicks are off while we drain; before sleeping we turn them on and look
 * once more, for buffers posted before the driver saw them on. */
void vnet_tx_run(struct vnet_pair *p)
{
	struct vnet_device *d = p->d;
	unsigned budget = VNET_TX_BUDGET;
	int rc;

	if (!p->tx || !d->mem)
		return;
	for (;;) {
		vmio_vq_enable_kicks(p->tx, false);
		rc = tx_drain(d, p, &budget);
		if (rc < 0)
			return;
		if (rc > 0) {
			vnet_reschedule(p->tx);
			return;
		}
		if (!vmio_vq_enable_kicks(p->tx, true))
			return;
	}
}
