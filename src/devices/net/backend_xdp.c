/* The AF_XDP backend, copy mode: one XSK per queue pair, bound to queue
 * Q + pair of the interface, each with a UMEM of vmio's own. Transmit
 * copies the frame (without its virtio-net header: an XSK carries no
 * offloads) into a free UMEM frame and puts it on the TX ring; receive
 * copies a frame from the RX ring into the guest's buffers behind a
 * zeroed header and gives the UMEM frame back to the fill ring.
 *
 * Every ring and the UMEM are sized once at start: the first half of a
 * UMEM's frames belongs to the fill and RX rings, the second half to TX
 * and completion, so that no ring can overflow and nothing grows with
 * what the peer or the guest sends. libxdp attaches its XSK redirect
 * program (native XDP where the driver has it, else generic). */
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
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <bpf/libbpf.h>
#include <xdp/libxdp.h>
#include <xdp/xsk.h>

#include "devices/net/backend.h"
#include "devices/net/virtio_net.h"
#include "util/log.h"

#define XDP_FRAME_SIZE XSK_UMEM__DEFAULT_FRAME_SIZE
/* Entries of each ring, and frames on each side of a UMEM. */
#define XDP_RING_SIZE 1024u
#define XDP_UMEM_FRAMES (2 * XDP_RING_SIZE)
/* Frames put on the TX ring before we kick without waiting for the
 * device's flush: the kernel's copy path sends 32 per sendto. */
#define XDP_TX_KICK_BATCH 32u
/* Tries, 50 ms apart, at binding a queue the kernel still holds. */
#define XDP_BUSY_TRIES 20u

struct xdp_queue {
	void *area;
	struct xsk_umem *umem;
	struct xsk_socket *xsk;
	struct xsk_ring_prod fq, tx;
	struct xsk_ring_cons cq, rx;
	unsigned queue_id;
	unsigned tx_unkicked; /* put on the TX ring since the last kick */
	unsigned ntx_free;
	uint64_t tx_free[XDP_RING_SIZE]; /* UMEM addresses we may send from */
};

struct xdp_backend {
	struct vnet_backend b;
	char name[IFNAMSIZ];
	size_t hdr_len;
	const char *xdp_mode; /* "native" or "generic" */
	struct xdp_queue *q; /* one per pair */
};

static struct xdp_backend *xdp_of(struct vnet_backend *b)
{
	return (struct xdp_backend *)b;
}

static int xdp_configure(struct vnet_backend *b, uint64_t features,
			 size_t hdr_len)
{
	(void)features;
	xdp_of(b)->hdr_len = hdr_len;
	return 0;
}

/* Entries on the TX ring the kernel has not taken yet. */
static unsigned tx_unsent(const struct xdp_queue *q)
{
	return q->tx.cached_prod - __atomic_load_n(q->tx.consumer,
						   __ATOMIC_ACQUIRE);
}

/* In copy mode a sendto sends at most a batch, so we kick until the ring
 * is empty, a bounded number of times (a device that stopped taking
 * frames must not hold the loop). */
static void tx_kick(struct xdp_queue *q)
{
	q->tx_unkicked = 0;
	if (!xsk_ring_prod__needs_wakeup(&q->tx))
		return;
	for (unsigned i = 0; i < XDP_RING_SIZE / XDP_TX_KICK_BATCH + 2; i++) {
		if (!tx_unsent(q))
			return;
		if (sendto(xsk_socket__fd(q->xsk), NULL, 0, MSG_DONTWAIT,
			   NULL, 0) < 0 &&
		    errno != EAGAIN && errno != EBUSY && errno != ENOBUFS &&
		    errno != EINTR)
			return;
	}
}

/* Takes back the frames the kernel is done with. */
static void tx_reap(struct xdp_queue *q)
{
	uint32_t idx;
	unsigned n = xsk_ring_cons__peek(&q->cq, XDP_RING_SIZE, &idx);

	for (unsigned i = 0; i < n && q->ntx_free < XDP_RING_SIZE; i++)
		q->tx_free[q->ntx_free++] =
			*xsk_ring_cons__comp_addr(&q->cq, idx + i);
	if (n)
		xsk_ring_cons__release(&q->cq, n);
}

static int xdp_tx(struct vnet_backend *b, unsigned pair,
		  const struct iovec *iov, unsigned niov)
{
	struct xdp_backend *x = xdp_of(b);
	struct xdp_queue *q = &x->q[pair];
	size_t skip = x->hdr_len, len = 0;
	struct xdp_desc *desc;
	uint64_t addr;
	uint8_t *dst;
	uint32_t idx;

	for (unsigned i = 0; i < niov; i++)
		len += iov[i].iov_len;
	if (len < skip || len - skip > XDP_FRAME_SIZE)
		return -EMSGSIZE;
	if (!q->ntx_free)
		tx_reap(q);
	if (!q->ntx_free) {
		tx_kick(q);
		tx_reap(q);
	}
	if (!q->ntx_free || xsk_ring_prod__reserve(&q->tx, 1, &idx) != 1)
		return -EAGAIN;
	addr = q->tx_free[--q->ntx_free];
	dst = xsk_umem__get_data(q->area, addr);
	len = 0;
	for (unsigned i = 0; i < niov; i++) {
		size_t n = iov[i].iov_len;
		const uint8_t *s = iov[i].iov_base;

		if (skip >= n) {
			skip -= n;
			continue;
		}
		memcpy(dst + len, s + skip, n - skip);
		len += n - skip;
		skip = 0;
	}
	desc = xsk_ring_prod__tx_desc(&q->tx, idx);
	desc->addr = addr;
	desc->len = (uint32_t)len;
	desc->options = 0;
	xsk_ring_prod__submit(&q->tx, 1);
	if (++q->tx_unkicked >= XDP_TX_KICK_BATCH)
		tx_kick(q);
	return 0;
}

static void xdp_tx_flush(struct vnet_backend *b, unsigned pair)
{
	struct xdp_queue *q = &xdp_of(b)->q[pair];

	if (q->tx_unkicked)
		tx_kick(q);
	tx_reap(q);
}

static int xdp_rx_fd(struct vnet_backend *b, unsigned pair)
{
	return xsk_socket__fd(xdp_of(b)->q[pair].xsk);
}

/* Gives a UMEM frame back to the kernel. The fill ring has room for
 * every receive frame, so this cannot fail. */
static void fill_one(struct xdp_queue *q, uint64_t addr)
{
	uint32_t idx;

	if (xsk_ring_prod__reserve(&q->fq, 1, &idx) != 1)
		return;
	*xsk_ring_prod__fill_addr(&q->fq, idx) = addr;
	xsk_ring_prod__submit(&q->fq, 1);
}

static ssize_t xdp_rx(struct vnet_backend *b, unsigned pair,
		      const struct iovec *iov, unsigned niov)
{
	struct xdp_backend *x = xdp_of(b);
	struct xdp_queue *q = &x->q[pair];
	struct virtio_net_hdr hdr = { 0 };
	const struct xdp_desc *desc;
	size_t room = 0;
	uint64_t addr;
	uint32_t idx, len;
	ssize_t rc;

	if (xsk_ring_cons__peek(&q->rx, 1, &idx) != 1) {
		if (xsk_ring_prod__needs_wakeup(&q->fq))
			recvfrom(xsk_socket__fd(q->xsk), NULL, 0, MSG_DONTWAIT,
				 NULL, NULL);
		return -EAGAIN;
	}
	desc = xsk_ring_cons__rx_desc(&q->rx, idx);
	addr = xsk_umem__add_offset_to_addr(desc->addr);
	len = desc->len;
	for (unsigned i = 0; i < niov; i++)
		room += iov[i].iov_len;
	if (len > XDP_FRAME_SIZE ||
	    xsk_umem__extract_addr(desc->addr) >=
		    (uint64_t)XDP_UMEM_FRAMES * XDP_FRAME_SIZE ||
	    addr + len > (uint64_t)XDP_UMEM_FRAMES * XDP_FRAME_SIZE) {
		rc = -EIO;
	} else if (room < x->hdr_len || room - x->hdr_len < len) {
		rc = -EMSGSIZE;
	} else {
		if (x->hdr_len == VIRTIO_NET_HDR_LEN)
			hdr.num_buffers = htole16(1);
		vnet_iov_write(iov, niov, 0, &hdr, x->hdr_len);
		vnet_iov_write(iov, niov, x->hdr_len,
			  xsk_umem__get_data(q->area, addr), len);
		rc = (ssize_t)(x->hdr_len + len);
	}
	xsk_ring_cons__release(&q->rx, 1);
	fill_one(q, xsk_umem__extract_addr(desc->addr));
	return rc;
}

static const char *xdp_pair_mode(struct vnet_backend *b, unsigned pair)
{
	(void)pair;
	return strcmp(xdp_of(b)->xdp_mode, "native") ? "copy (generic XDP)"
						     : "copy (native XDP)";
}

static void xdp_queue_close(struct xdp_queue *q)
{
	if (q->xsk)
		xsk_socket__delete(q->xsk);
	if (q->umem)
		xsk_umem__delete(q->umem);
	if (q->area)
		munmap(q->area, (size_t)XDP_UMEM_FRAMES * XDP_FRAME_SIZE);
	q->xsk = NULL;
	q->umem = NULL;
	q->area = NULL;
}

static void xdp_free(struct vnet_backend *b)
{
	struct xdp_backend *x = xdp_of(b);

	for (unsigned i = 0; i < b->pairs; i++)
		xdp_queue_close(&x->q[i]);
	free(x->q);
	free(x);
}

static const struct vnet_backend_ops xdp_ops = {
	.name = "xdp",
	.configure = xdp_configure,
	.tx = xdp_tx,
	.tx_flush = xdp_tx_flush,
	.rx_fd = xdp_rx_fd,
	.rx = xdp_rx,
	.pair_mode = xdp_pair_mode,
	.free = xdp_free,
};

/* libbpf and libxdp narrate what they try (and what they fall back
 * from) on stderr: that is debug output for us; our errors say why. */
__attribute__((format(printf, 2, 0))) static int
lib_print(const char *lib, const char *fmt, va_list ap)
{
	char line[512];
	size_t n;

	if (vmio_log_get_level() < VMIO_LOG_DEBUG)
		return 0;
	vsnprintf(line, sizeof(line), fmt, ap);
	n = strlen(line);
	if (n && line[n - 1] == '\n')
		line[n - 1] = '\0';
	log_debug("net: %s: %s", lib, line);
	return 0;
}

__attribute__((format(printf, 2, 0))) static int
libxdp_print(enum libxdp_print_level level, const char *fmt, va_list ap)
{
	(void)level;
	return lib_print("libxdp", fmt, ap);
}

__attribute__((format(printf, 2, 0))) static int
libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	(void)level;
	return lib_print("libbpf", fmt, ap);
}

/* The interface's receive queues (combined + rx), or 0 if its driver
 * does not say. */
static unsigned iface_rx_queues(const char *name)
{
	struct ethtool_channels ch = { .cmd = ETHTOOL_GCHANNELS };
	struct ifreq ifr = { 0 };
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	unsigned n = 0;

	if (fd < 0)
		return 0;
	memcpy(ifr.ifr_name, name, strlen(name));
	ifr.ifr_data = (void *)&ch;
	if (ioctl(fd, SIOCETHTOOL, &ifr) == 0)
		n = ch.combined_count + ch.rx_count;
	close(fd);
	return n;
}

static const char *xsk_why(int err)
{
	switch (err) {
	case -EPERM:
	case -EACCES:
		return "no permission (AF_XDP and XDP programs need "
		       "CAP_NET_RAW, CAP_NET_ADMIN and CAP_BPF, or root)";
	case -ENODEV:
		return "no such interface";
	case -EOPNOTSUPP:
		return "XDP not supported by the interface";
	case -EBUSY:
		return "the queue has an XSK already, or another XDP program "
		       "is attached";
	case -EINVAL:
		return "the kernel refused the XSK (queue out of range?)";
	case -ENOMEM:
	case -ENOBUFS:
		return "cannot register the UMEM (memlock limit?)";
	default:
		return "cannot create the XSK";
	}
}

static int xdp_queue_open_once(struct xdp_backend *x, struct xdp_queue *q,
			       uint32_t xdp_flags)
{
	const struct xsk_umem_config ucfg = {
		.fill_size = XDP_RING_SIZE,
		.comp_size = XDP_RING_SIZE,
		.frame_size = XDP_FRAME_SIZE,
		.frame_headroom = 0,
		.flags = 0,
	};
	const struct xsk_socket_config scfg = {
		.rx_size = XDP_RING_SIZE,
		.tx_size = XDP_RING_SIZE,
		.xdp_flags = xdp_flags,
		.bind_flags = XDP_USE_NEED_WAKEUP,
	};
	const size_t size = (size_t)XDP_UMEM_FRAMES * XDP_FRAME_SIZE;
	uint32_t idx;
	int rc;

	q->area = mmap(NULL, size, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (q->area == MAP_FAILED) {
		q->area = NULL;
		return -errno;
	}
	rc = xsk_umem__create(&q->umem, q->area, size, &q->fq, &q->cq, &ucfg);
	if (rc) {
		q->umem = NULL;
		return rc;
	}
	rc = xsk_socket__create(&q->xsk, x->name, q->queue_id, q->umem, &q->rx,
				&q->tx, &scfg);
	if (rc) {
		q->xsk = NULL;
		return rc;
	}
	/* Receive frames first half, send frames the second. */
	if (xsk_ring_prod__reserve(&q->fq, XDP_RING_SIZE, &idx) !=
	    XDP_RING_SIZE)
		return -ENOBUFS;
	for (unsigned i = 0; i < XDP_RING_SIZE; i++)
		*xsk_ring_prod__fill_addr(&q->fq, idx + i) =
			(uint64_t)i * XDP_FRAME_SIZE;
	xsk_ring_prod__submit(&q->fq, XDP_RING_SIZE);
	for (unsigned i = 0; i < XDP_RING_SIZE; i++)
		q->tx_free[i] = (uint64_t)(XDP_RING_SIZE + i) * XDP_FRAME_SIZE;
	q->ntx_free = XDP_RING_SIZE;
	return 0;
}

/* A queue an XSK just left stays taken until the kernel's deferred
 * release of its UMEM has run (EBUSY, for some milliseconds after a
 * previous vmio exits): no event says when, so we try again, from
 * scratch, for up to a second before calling the queue busy. */
static int xdp_queue_open(struct xdp_backend *x, struct xdp_queue *q,
			  uint32_t xdp_flags)
{
	int rc;

	for (unsigned i = 0;; i++) {
		rc = xdp_queue_open_once(x, q, xdp_flags);
		if (rc != -EBUSY || i == XDP_BUSY_TRIES)
			return rc;
		xdp_queue_close(q);
		nanosleep(&(struct timespec){ .tv_nsec = 50 * 1000 * 1000 },
			  NULL);
	}
}

/* Opens pair 0's queue in native mode, else generic (said once); the
 * other pairs follow in the mode that worked. */
static int xdp_open_queues(struct xdp_backend *x, unsigned pairs)
{
	uint32_t flags = XDP_FLAGS_DRV_MODE;
	int rc = xdp_queue_open(x, &x->q[0], flags);

	x->xdp_mode = "native";
	if (rc && rc != -EPERM && rc != -EACCES && rc != -ENODEV &&
	    rc != -ENOMEM && rc != -EBUSY) {
		int native = rc;

		xdp_queue_close(&x->q[0]);
		flags = XDP_FLAGS_SKB_MODE;
		rc = xdp_queue_open(x, &x->q[0], flags);
		if (!rc) {
			x->xdp_mode = "generic";
			log_info("net: xdp %s: no native XDP (%s): using "
				 "generic (SKB) XDP, slower",
				 x->name, strerror(-native));
		}
	}
	x->b.pairs = 1;
	for (unsigned i = 1; i < pairs && !rc; i++) {
		rc = xdp_queue_open(x, &x->q[i], flags);
		x->b.pairs = i + 1;
	}
	return rc;
}

struct vnet_backend *vnet_backend_xdp_new(const char *name, unsigned queue,
					  unsigned pairs, int *err,
					  const char **why)
{
	struct xdp_backend *x;
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
	nq = iface_rx_queues(name);
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
	libxdp_set_print(libxdp_print);
	libbpf_set_print(libbpf_print);
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
	memcpy(x->name, name, strlen(name) + 1);
	for (unsigned i = 0; i < pairs; i++)
		x->q[i].queue_id = queue + i;
	*err = xdp_open_queues(x, pairs);
	if (*err) {
		*why = xsk_why(*err);
		xdp_free(&x->b);
		return NULL;
	}
	for (unsigned i = 0; i < pairs; i++)
		log_info("net: xdp %s queue %u (pair %u): copy mode, %s XDP",
			 name, queue + i, i, x->xdp_mode);
	return &x->b;
}
