/* Guest to port. Each chain is one frame: the virtio-net header, then
 * the frame. The header is copied out once and validated there; the
 * port gets that copy, not the guest's bytes, so a guest that rewrites
 * the header after the check changes nothing. The frame's own bytes go
 * from guest memory to the port as they are (its length, the one thing
 * the header is checked against, is fixed by our copy of the chain). */
#include "devices/net/tx.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "util/iov.h"

/* Fills p->iov with hdr then the chain's readable part from skip bytes
 * on. Returns the number of segments, or 0 if they do not fit writev. */
static unsigned tx_segments(struct vnet_device *d, struct vnet_pair *p,
			    struct virtio_net_hdr *hdr, size_t skip)
{
	const struct vmio_chain *c = &p->chain;
	size_t covered;
	unsigned n;

	p->iov[0] = (struct iovec){ .iov_base = hdr, .iov_len = d->hdr_len };
	/* Drivers put the header in the first descriptor (alone or ahead
	 * of the frame): the rest is the chain's own segments. */
	if (c->nout && c->nout < VNET_MAX_IOV && c->iov[0].iov_len >= skip) {
		n = 1;
		if (c->iov[0].iov_len > skip)
			p->iov[n++] = (struct iovec){
				.iov_base = (uint8_t *)c->iov[0].iov_base + skip,
				.iov_len = c->iov[0].iov_len - skip,
			};
		for (unsigned i = 1; i < c->nout; i++)
			p->iov[n++] = c->iov[i];
		return n;
	}
	n = vmio_iov_slice(c->iov, c->nout, skip, UINT64_MAX, p->iov + 1,
			   VNET_MAX_IOV - 1, &covered);
	if (covered < c->out_len - skip)
		return 0;
	return 1 + n;
}

static void tx_drop(struct vnet_device *d, struct vnet_pair *p,
		    enum vnet_hdr_verdict v, size_t frame_len)
{
	p->stats.tx_invalid[v]++;
	log_ratelimited(&p->rl, VMIO_LOG_WARN,
			"net: tx queue %u: dropped a %zu-byte frame: %s",
			p->tx->index, frame_len, vnet_hdr_verdict_name(v));
}

enum tx_fate {
	TX_DONE,    /* the guest may have the chain back */
	TX_HELD,    /* the port keeps it; tx_reap gives it back */
	TX_BLOCKED, /* the port is full: try this chain again later */
};

/* One chain: validate, hand over, count. */
static enum tx_fate tx_one(struct vnet_device *d, struct vnet_pair *p)
{
	const struct vmio_chain *c = &p->chain;
	struct virtio_net_hdr hdr = { 0 };
	enum vnet_hdr_verdict v;
	size_t frame_len;
	unsigned n;
	int rc;

	if (c->out_len < d->hdr_len) {
		p->stats.tx_bad_chain++;
		return TX_DONE;
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
		return TX_DONE;
	}
	/* Meaningless on tx (5.1.6.2); the port need not see the
	 * guest's value. */
	hdr.num_buffers = 0;
	n = tx_segments(d, p, &hdr, d->hdr_len);
	if (!n) {
		p->stats.tx_bad_chain++;
		return TX_DONE;
	}
	rc = d->be->ops->tx(d->be, p->index, p->iov, n, c->head);
	if (rc == -EAGAIN)
		return TX_BLOCKED;
	if (rc < 0) {
		p->stats.tx_backend_errors++;
		log_ratelimited(&p->rl, VMIO_LOG_WARN,
				"net: tx queue %u: %s backend dropped a frame: %s",
				p->tx->index, d->be->ops->name, strerror(-rc));
		return TX_DONE;
	}
	p->stats.tx_frames++;
	p->stats.tx_bytes += frame_len;
	if (rc != VNET_TX_HELD)
		return TX_DONE;
	p->tx_held++;
	p->tx_held_vq = p->tx;
	return TX_HELD;
}

unsigned vnet_tx_reap(struct vnet_pair *p)
{
	struct vnet_device *d = p->d;
	unsigned n;

	if (!d->be->ops->tx_reap || !p->tx_held)
		return 0;
	n = d->be->ops->tx_reap(d->be, p->index, p->cookies, VNET_TX_BUDGET);
	for (unsigned i = 0; i < n; i++)
		vmio_vq_push(p->tx_held_vq, (uint16_t)p->cookies[i], 0);
	p->tx_held -= n < p->tx_held ? n : p->tx_held;
	if (n)
		vmio_vq_flush_and_notify(p->tx_held_vq);
	return n;
}

/* Why a drain stopped; TX_POLL: dry, looking again next turn. */
enum tx_stop { TX_EMPTY, TX_BUDGET, TX_FULL, TX_BROKEN, TX_POLL };

static enum tx_stop tx_drain(struct vnet_device *d, struct vnet_pair *p,
			     unsigned *budget)
{
	enum tx_stop why = TX_BUDGET;
	unsigned handed = 0;

	while (*budget) {
		int got = vmio_vq_pop(p->tx, p->mem, &p->chain);
		enum tx_fate fate;

		if (got <= 0) {
			why = got < 0 ? TX_BROKEN : TX_EMPTY;
			break;
		}
		fate = tx_one(d, p);
		if (fate == TX_BLOCKED) {
			vmio_vq_unpop(p->tx, 1);
			why = TX_FULL;
			break;
		}
		(*budget)--;
		handed++;
		vmio_poll_window_worked(&p->tx_poll);
		if (fate == TX_DONE)
			vmio_vq_push(p->tx, p->chain.head, 0);
	}
	if (handed && d->be->ops->tx_flush)
		d->be->ops->tx_flush(d->be, p->index);
	vnet_tx_reap(p);
	vmio_vq_flush_and_notify(p->tx);
	return why;
}

static void on_retry(void *opaque)
{
	struct vnet_pair *p = opaque;

	vnet_tx_reap(p);
	vnet_tx_run(p);
}

/* Looks at tx again in VNET_RETRY_NS: a full port, and frames it
 * keeps, send no event. */
static void tx_retry_later(struct vnet_pair *p)
{
	if (!vmio_timer_armed(&p->retry))
		vmio_timer_arm_ns(&p->retry, VNET_RETRY_NS);
}

/* The next turn a budget asked for: what a kick calls. */
static void on_again(void *opaque)
{
	vnet_tx_run(opaque);
}

int vnet_tx_init(struct vnet_pair *p)
{
	vmio_defer_init(&p->tx_again, p->loop, on_again, p);
	return vmio_timer_init(&p->retry, p->loop, on_retry, p);
}

void vnet_tx_fini(struct vnet_pair *p)
{
	vmio_timer_fini(&p->retry);
	vmio_defer_cancel(&p->tx_again);
}

/* Kicks are off while we drain. When the ring runs dry after work, the
 * polling policy (poll.h) may have us look again on the loop's next turn
 * with kicks still off; else we turn them on and look once more, for
 * buffers posted before the driver saw them on. A full port, or
 * frames it still keeps, bring us back on the retry timer: neither sends
 * an event. */
void vnet_tx_run(struct vnet_pair *p)
{
	struct vnet_device *d = p->d;
	unsigned budget = VNET_TX_BUDGET;
	enum tx_stop why;

	if (!p->tx || !p->mem || p->attaching)
		return;
	for (;;) {
		vnet_kicks_off(p->tx);
		why = tx_drain(d, p, &budget);
		if (why != TX_EMPTY)
			break;
		if (vmio_poll_window_dry_now(&p->tx_poll)) {
			why = TX_POLL;
			break;
		}
		if (!vmio_vq_enable_kicks(p->tx, true))
			break;
	}
	if (why == TX_BUDGET || why == TX_POLL)
		vmio_defer_schedule(&p->tx_again);
	if (why == TX_FULL || (why != TX_BROKEN && p->tx_held))
		tx_retry_later(p);
}
