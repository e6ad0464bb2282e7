/* The AF_XDP port: one XSK per queue pair, bound to queue Q + pair of
 * the interface. Two ways of moving frames, per pair:
 *
 * No copy (the default). The UMEM is the guest's memory (umem_view.h:
 * registered whole, in unaligned chunk mode, so that any guest address is
 * a valid buffer address). A transmitted frame goes on the TX ring as it
 * lies in guest memory, and its chain stays held until the completion
 * ring gives its address back. Receive buffers are posted to the fill
 * ring as the guest offers them: the kernel writes the frame behind the
 * room the device keeps for the virtio-net header. The kernel puts a
 * frame at chunk start + XDP_PACKET_HEADROOM + the UMEM's headroom and
 * writes nothing else, so posting buf + hdr_len - (256 + headroom), with
 * headroom sized so that a chunk ends where the largest frame would,
 * makes a frame land at buf + hdr_len and never past the buffer; the
 * first frame's place is checked, and anything else turns the pair to
 * copying. A frame spread over several guest buffers (the header aside)
 * is copied into a frame of our own.
 *
 * Copy (--xdp-copy, or where the above cannot be done: said once). Each
 * XSK has a UMEM of its own; transmit copies the frame into a free UMEM
 * frame, receive copies from the RX ring into the guest's buffers behind
 * a zeroed header. The first half of the frames belongs to the fill and
 * RX rings, the second to TX and completion, so that no ring overflows.
 *
 * Every ring and table is sized once: nothing grows with what the peer or
 * the guest sends. libxdp attaches its XSK redirect program (native XDP
 * where the driver has it, else generic). Guest memory is only known
 * once the VMM sends it, so each pair starts with a copy-mode XSK (which
 * also finds every error at start) and is rebuilt on guest memory when
 * its queues start (attach).
 *
 * A queue an XSK just left stays taken until the kernel's deferred
 * release of its UMEM has run (EBUSY, for some milliseconds), and no event
 * says when. At start (before the loop runs) we wait for it; in attach,
 * which runs in a loop callback, the XSK is tried again from a timer
 * every XDP_BUSY_RETRY_MS, up to XDP_BUSY_TRIES times, and attach answers
 * VNET_ATTACH_LATER: the device calls nothing on the pair until we call
 * its attached. */
#include <endian.h>
#include <errno.h>
#include <linux/ethtool.h>
#include <linux/if_link.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <bpf/libbpf.h>
#include <xdp/libxdp.h>
#include <xdp/xsk.h>

#include "devices/net/port_xdp.h"
#include "devices/net/xdp_rx.h"
#include "devices/net/xdp_tx.h"
#include "devices/net/xdp_xsk.h"
#include "devices/net/held.h"
#include "devices/net/umem_view.h"
#include "devices/net/virtio_net.h"
#include "devices/net/xdp_reserve.h"
#include "devices/net/xsk_map.h"
#include "util/iov.h"
#include "util/log.h"

static int xdp_configure(struct vnet_port *b, uint64_t features,
			 size_t hdr_len)
{
	(void)features;
	xdp_of(b)->hdr_len = hdr_len;
	return 0;
}

/* ---- Attach and detach: no-copy pairs follow the guest's memory ------- */

/* From now on every pair copies; why is said once. */
static void go_copy(struct xdp_port *x, const char *why, int err)
{
	if (!x->copy)
		log_warn("net: xdp %s: no copy-free path: %s%s%s; copying "
			 "frames through a UMEM of vmio's own",
			 x->name, why, err ? ": " : "",
			 err ? strerror(-err) : "");
	x->copy = true;
}

static bool any_on_view(const struct xdp_port *x)
{
	for (unsigned i = 0; i < x->b.pairs; i++)
		if (x->q[i].mode == Q_NOCOPY || x->q[i].want == Q_NOCOPY)
			return true;
	return false;
}

/* The view shows mem, or we go copying. */
static bool view_ready(struct xdp_port *x, const struct vmio_mem *mem)
{
	const char *why = NULL;
	int rc;

	if (vnet_umem_view_matches(&x->view, mem))
		return true;
	if (any_on_view(x)) {
		/* The device detaches every pair before the table
		 * changes; a pair on the old view means it did not. */
		log_err("net: xdp %s: guest memory changed under a running "
			"pair; keeping the old view", x->name);
		return false;
	}
	vnet_umem_view_unmap(&x->view);
	rc = vnet_umem_view_map(&x->view, mem,
				(size_t)x->b.pairs * vxdp_pair_frames(x) *
					XDP_FRAME_SIZE,
				&why);
	if (rc) {
		go_copy(x, why, rc);
		return false;
	}
	return true;
}

static int open_later(struct xdp_port *x, unsigned pair, bool nocopy);
static void on_retry(void *opaque);

/* What a try at pair's XSK in attach came to (rc): said, and for a
 * no-copy one that failed, copying from now on. Returns 0 or
 * VNET_ATTACH_LATER (the copy XSK waits for its queue). */
static int opened(struct xdp_port *x, unsigned pair, bool nocopy, int rc)
{
	struct xdp_queue *q = &x->q[pair];

	if (!rc) {
		if (nocopy)
			log_info("net: xdp %s queue %u (pair %u): %s", x->name,
				 q->queue_id, pair, vxdp_pair_mode(&x->b, pair));
		return 0;
	}
	if (nocopy) {
		go_copy(x, vxdp_xsk_why(rc), rc);
		return open_later(x, pair, false);
	}
	log_err("net: xdp %s queue %u: cannot reopen the XSK: %s", x->name,
		q->queue_id, vxdp_xsk_why(rc));
	return 0;
}

/* Opens pair's XSK now, or, if its queue is still busy, from the retry
 * timer (VNET_ATTACH_LATER). */
static int open_later(struct xdp_port *x, unsigned pair, bool nocopy)
{
	struct xdp_queue *q = &x->q[pair];
	int rc = vxdp_queue_open_once(x, pair, nocopy);

	if (rc != -EBUSY)
		return opened(x, pair, nocopy, rc);
	/* The timer is ours only while we wait: no timer outlives the
	 * wait, and so none the device's loop. */
	if (!x->b.loop || vmio_timer_init(&q->retry, x->b.loop, on_retry, q))
		return opened(x, pair, nocopy, -EBUSY);
	log_debug("net: xdp %s queue %u: still busy; trying again every "
		  "%u ms", x->name, q->queue_id, XDP_BUSY_RETRY_MS);
	q->want = nocopy ? Q_NOCOPY : Q_COPY;
	q->busy_tries = 1;
	vmio_timer_arm_ms(&q->retry, XDP_BUSY_RETRY_MS);
	return VNET_ATTACH_LATER;
}

static void on_retry(void *opaque)
{
	struct xdp_queue *q = opaque;
	struct xdp_port *x = q->x;
	unsigned pair = (unsigned)(q - x->q);
	bool nocopy = q->want == Q_NOCOPY;
	int rc = vxdp_queue_open_once(x, pair, nocopy);

	if (rc == -EBUSY && q->busy_tries++ < XDP_BUSY_TRIES) {
		vmio_timer_arm_ms(&q->retry, XDP_BUSY_RETRY_MS);
		return;
	}
	vmio_timer_fini(&q->retry);
	q->want = Q_NONE;
	if (opened(x, pair, nocopy, rc) == VNET_ATTACH_LATER)
		return;
	if (x->b.attached)
		x->b.attached(x->b.attached_opaque, pair);
}

static int xdp_attach(struct vnet_port *b, unsigned pair,
		      const struct vmio_mem *mem)
{
	struct xdp_port *x = xdp_of(b);
	struct xdp_queue *q = &x->q[pair];

	if (q->want != Q_NONE)
		return VNET_ATTACH_LATER; /* still waiting for the queue */
	if (x->b.max_frame > XDP_NOCOPY_MAX_FRAME)
		go_copy(x, "a frame above 1518 bytes (--mtu above 1500) does "
			   "not fit the guest's smallest receive buffer", 0);
	if (x->copy || !mem || !mem->nregions)
		return q->mode == Q_NONE ? open_later(x, pair, false) : 0;
	if (q->mode == Q_NOCOPY && vnet_umem_view_matches(&x->view, mem))
		return 0;
	if (q->mode == Q_NOCOPY || !view_ready(x, mem))
		return 0;
	vxdp_queue_close(q);
	return open_later(x, pair, true);
}

/* Before the XSK goes: the frames it received are worth giving. */
static void keep_late_frames(struct xdp_port *x, struct xdp_queue *q)
{
	unsigned got;

	q->late_pos = 0;
	q->nlate = vxdp_rx_process(x, q, q->late, XDP_LATE_MAX, &got);
	/* What found no guest buffer is lost (counted); the spares go back
	 * unused. */
	vnet_reserve_detach(&q->res);
}

static void xdp_detach(struct vnet_port *b, unsigned pair)
{
	struct xdp_port *x = xdp_of(b);
	struct xdp_queue *q = &x->q[pair];

	if (q->want != Q_NONE) {
		/* Given up: the next attach starts again. */
		vmio_timer_fini(&q->retry);
		q->want = Q_NONE;
	}
	if (q->mode != Q_NOCOPY)
		return;
	keep_late_frames(x, q);
	/* Deleting the socket unbinds it (and waits for the receive path
	 * to be done with it): after this the kernel writes no guest
	 * memory, and every frame sent is out of guest memory. */
	vxdp_queue_close(q);
	if (!any_on_view(x))
		vnet_umem_view_unmap(&x->view);
}

/* ---- Hand-over and crash: the successor opens its own XSKs ---------- */

/* The record: the interface, its first queue and whether it copies, for
 * the successor to check against its command line. No descriptors: an
 * XSK, its rings and its UMEM are not handed over but opened again by
 * the successor (libxdp's program is shared by every XSK of the
 * interface, whoever opened it); frames that arrive while no XSK is
 * bound go to the host's stack, and what the rings held when a process
 * died is served again from the used index. */
static int xdp_save(struct vnet_port *b, struct vmio_wire_writer *w, int fds[],
		    unsigned max, unsigned *nfds, const char **why)
{
	struct xdp_port *x = xdp_of(b);

	(void)fds;
	(void)max;
	(void)nfds;
	(void)why;
	vmio_wire_put_u32(w, (uint32_t)strlen(x->name));
	vmio_wire_put_bytes(w, x->name, strlen(x->name));
	vmio_wire_put_u32(w, x->q[0].queue_id);
	vmio_wire_put_u8(w, x->copy_asked);
	return 0;
}

/* Every XSK closed, so that the successor can bind the queues. */
static void xdp_release(struct vnet_port *b)
{
	struct xdp_port *x = xdp_of(b);

	for (unsigned i = 0; i < b->pairs; i++) {
		struct xdp_queue *q = &x->q[i];

		if (q->want != Q_NONE) {
			vmio_timer_fini(&q->retry);
			q->want = Q_NONE;
		}
		vxdp_queue_close(q);
	}
	vnet_umem_view_unmap(&x->view);
	log_info("net: xdp %s: XSKs closed for the successor", x->name);
}

int vnet_port_xdp_check_record(struct vmio_wire_reader *r, const char *name,
			       unsigned queue, bool copy, unsigned nfds)
{
	uint32_t len = vmio_wire_get_count(r, 1);
	const uint8_t *rec_name = vmio_wire_get_bytes(r, len);
	uint32_t rec_queue = vmio_wire_get_u32(r);
	bool rec_copy = vmio_wire_get_u8(r) != 0;

	if (!vmio_wire_ok(r))
		return -1;
	if (len != strlen(name) || memcmp(rec_name, name, len) ||
	    rec_queue != queue)
		vmio_wire_fail(r, "the predecessor served another interface or queue (--xdp changed)");
	else if (rec_copy != copy)
		vmio_wire_fail(r, "the predecessor copied otherwise (--xdp-copy changed)");
	else if (nfds)
		vmio_wire_fail(r, "descriptors an AF_XDP port has no use for");
	return vmio_wire_ok(r) ? 0 : -1;
}

struct vnet_port *vnet_port_xdp_restore(const char *name, unsigned queue,
					unsigned pairs, bool copy,
					unsigned reserve,
					struct vmio_wire_reader *r,
					unsigned nfds)
{
	struct vnet_port *b;
	const char *why;
	int err;

	if (vnet_port_xdp_check_record(r, name, queue, copy, nfds))
		return NULL;
	b = vnet_port_xdp_new(name, queue, pairs, copy, reserve, &err, &why);
	if (!b) {
		/* The reader keeps a pointer: a start's, one at a time. */
		static char msg[160];

		snprintf(msg, sizeof(msg), "AF_XDP on %s: %s (%s)", name, why,
			 strerror(-err));
		vmio_wire_fail(r, msg);
	}
	return b;
}

static const struct vnet_port_ops xdp_ops = {
	.name = "xdp",
	.configure = xdp_configure,
	.tx = vxdp_tx,
	.tx_reap = vxdp_tx_reap,
	.tx_flush = vxdp_tx_flush,
	.rx_fd = vxdp_rx_fd,
	.rx = vxdp_rx,
	.rx_posts = vxdp_rx_posts,
	.rx_post = vxdp_rx_post,
	.rx_reap = vxdp_rx_reap,
	.set_pair_enabled = vxdp_set_pair_enabled,
	.attach = xdp_attach,
	.detach = xdp_detach,
	.pair_mode = vxdp_pair_mode,
	.pair_counters = vxdp_pair_counters,
	.save = xdp_save,
	.release = xdp_release,
	.free = vxdp_free,
};

struct vnet_port *vnet_port_xdp_new(const char *name, unsigned queue,
					  unsigned pairs, bool copy,
					  unsigned reserve, int *err,
					  const char **why)
{
	struct xdp_port *x;
	unsigned nq;

	if (!name[0] || strlen(name) >= IFNAMSIZ) {
		*err = -EINVAL;
		*why = "interface names are 1 to 15 bytes";
		return NULL;
	}
	if (!if_nametoindex(name)) {
		*err = -ENODEV;
		*why = "no such interface";
		return NULL;
	}
	nq = vxdp_iface_rx_queues(name);
	if (nq && queue + pairs > nq) {
		static char msg[96];

		snprintf(msg, sizeof(msg),
			 "queue out of range: it has %u queue(s), %u needed "
			 "from queue %u",
			 nq, pairs, queue);
		*err = -ERANGE;
		*why = msg;
		return NULL;
	}
	libxdp_set_print(vxdp_libxdp_print);
	libbpf_set_print(vxdp_libbpf_print);
	x = calloc(1, sizeof(*x));
	if (x)
		x->q = calloc(pairs, sizeof(x->q[0]));
	if (!x || !x->q) {
		free(x);
		*err = -ENOMEM;
		*why = "out of memory";
		return NULL;
	}
	x->b.ops = &xdp_ops;
	x->hdr_len = VIRTIO_NET_HDR_LEN;
	x->copy = copy;
	x->copy_asked = copy;
	x->reserve = reserve;
	memcpy(x->name, name, strlen(name) + 1);
	for (unsigned i = 0; i < pairs; i++) {
		struct xdp_queue *q = &x->q[i];

		q->queue_id = queue + i;
		q->rx_efd = -1;
		q->x = x;
		if (vnet_held_init(&q->rx_held, XDP_RING_SIZE) ||
		    vnet_held_init(&q->tx_held, XDP_RING_SIZE) ||
		    vnet_reserve_init(&q->res, reserve, XDP_SPARE_MAX,
				      XDP_FRAME_SIZE) ||
		    !(q->late = calloc(XDP_LATE_MAX, sizeof(q->late[0])))) {
			x->b.pairs = i + 1;
			vxdp_free(&x->b);
			*err = -ENOMEM;
			*why = "out of memory";
			return NULL;
		}
	}
	x->b.pairs = pairs;
	*err = vxdp_open_queues(x, pairs);
	if (*err) {
		*why = vxdp_xsk_why(*err);
		x->b.pairs = pairs;
		vxdp_free(&x->b);
		return NULL;
	}
	for (unsigned i = 0; i < pairs; i++)
		log_info("net: xdp %s queue %u (pair %u): %s XDP, %s", name,
			 queue + i, i, x->xdp_mode,
			 copy ? "copy (--xdp-copy)"
			      : "no copy once the guest's memory is known");
	return &x->b;
}
