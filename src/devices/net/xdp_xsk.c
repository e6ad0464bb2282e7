/* The XSKs and their modes through the AF_XDP port; see xdp_xsk.h. */
#include "devices/net/xdp_xsk.h"

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
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

#include "devices/net/held.h"
#include "devices/net/umem_view.h"
#include "devices/net/virtio_net.h"
#include "devices/net/xdp_reserve.h"
#include "devices/net/xsk_map.h"
#include "util/iov.h"
#include "util/log.h"

const char *vxdp_pair_mode(struct vnet_port *b, unsigned pair)
{
	const struct xdp_port *x = xdp_of(b);
	bool native = !strcmp(x->xdp_mode, "native");

	switch (x->q[pair].mode) {
	case Q_NOCOPY:
		return native ? "no-copy (native XDP)" : "no-copy (generic XDP)";
	case Q_COPY:
		return native ? "copy (native XDP)" : "copy (generic XDP)";
	case Q_NONE:
		break;
	}
	return "stopped";
}

/* The kernel's counters of q's XSK, plus those of the ones before. */
static struct xdp_statistics queue_stats(const struct xdp_queue *q)
{
	struct xdp_statistics st = { 0 }, sum = q->past;
	socklen_t len = sizeof(st);

	if (q->xsk && !getsockopt(xsk_socket__fd(q->xsk), SOL_XDP,
				  XDP_STATISTICS, &st, &len)) {
		sum.rx_dropped += st.rx_dropped;
		sum.rx_invalid_descs += st.rx_invalid_descs;
		sum.tx_invalid_descs += st.tx_invalid_descs;
		sum.rx_ring_full += st.rx_ring_full;
		sum.rx_fill_ring_empty_descs += st.rx_fill_ring_empty_descs;
	}
	return sum;
}

void vxdp_queue_close(struct xdp_queue *q)
{
	q->past = queue_stats(q);
	if (q->rx_efd >= 0)
		close(q->rx_efd);
	q->rx_efd = -1;
	if (q->xsk)
		xsk_socket__delete(q->xsk);
	if (q->umem)
		xsk_umem__delete(q->umem);
	if (q->area)
		munmap(q->area, (size_t)XDP_UMEM_FRAMES * XDP_FRAME_SIZE);
	q->xsk = NULL;
	q->umem = NULL;
	q->area = NULL;
	q->mode = Q_NONE;
	/* libxdp leaves some cached indices of a ring it sets up as they
	 * were: a new XSK must find them zero. */
	memset(&q->fq, 0, sizeof(q->fq));
	memset(&q->tx, 0, sizeof(q->tx));
	memset(&q->cq, 0, sizeof(q->cq));
	memset(&q->rx, 0, sizeof(q->rx));
	q->tx_unkicked = 0;
	q->ntx_free = 0;
}

/* What the kernel dropped on the way to and from pair's XSKs. */
void vxdp_pair_counters(struct vnet_port *b, unsigned pair,
			      char *buf, size_t size)
{
	const struct xdp_queue *q = &xdp_of(b)->q[pair];
	const struct vnet_reserve_counters *c = &q->res.c;
	struct xdp_statistics st = queue_stats(q);

	snprintf(buf, size,
		 "xsk_rx_dropped=%llu xsk_rx_ring_full=%llu "
		 "xsk_fill_ring_empty=%llu xsk_rx_invalid=%llu "
		 "xsk_tx_invalid=%llu rx_direct=%llu rx_reserve=%llu "
		 "rx_reordered=%llu reserve_lost=%llu reserve_frames=%u "
		 "reserve_peak=%u",
		 (unsigned long long)st.rx_dropped,
		 (unsigned long long)st.rx_ring_full,
		 (unsigned long long)st.rx_fill_ring_empty_descs,
		 (unsigned long long)st.rx_invalid_descs,
		 (unsigned long long)st.tx_invalid_descs,
		 (unsigned long long)c->direct, (unsigned long long)c->reserve,
		 (unsigned long long)c->reordered,
		 (unsigned long long)c->lost, q->res.nframes, c->peak);
}

void vxdp_free(struct vnet_port *b)
{
	struct xdp_port *x = xdp_of(b);

	for (unsigned i = 0; i < b->pairs; i++) {
		vmio_timer_fini(&x->q[i].retry);
		vxdp_queue_close(&x->q[i]);
		vnet_held_free(&x->q[i].rx_held);
		vnet_held_free(&x->q[i].tx_held);
		vnet_reserve_fini(&x->q[i].res);
		free(x->q[i].late);
	}
	vnet_umem_view_unmap(&x->view);
	free(x->q);
	free(x);
}

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

__attribute__((format(printf, 2, 0))) int
vxdp_libxdp_print(enum libxdp_print_level level, const char *fmt, va_list ap)
{
	(void)level;
	return lib_print("libxdp", fmt, ap);
}

__attribute__((format(printf, 2, 0))) int
vxdp_libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	(void)level;
	return lib_print("libbpf", fmt, ap);
}

/* The interface's receive queues (combined + rx), or 0 if its driver
 * does not say. */
unsigned vxdp_iface_rx_queues(const char *name)
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

const char *vxdp_xsk_why(int err)
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

/* libxdp 1.3 (Debian 12's) makes its AF_XDP sockets without
 * SOCK_CLOEXEC. A successor vmio is spawned while the pairs still run
 * (cli/device_handover.h): one that inherited an XSK would keep the
 * queue bound for as long as it lives, and its own XSK on that queue
 * would find it busy. Marked as soon as libxdp returns; a spawn on
 * another worker inside that window costs a refused hand-over, no
 * more. */
static void xsk_fd_cloexec(int fd)
{
	if (fd >= 0 && fcntl(fd, F_SETFD, FD_CLOEXEC) < 0)
		log_warn("net: cannot mark an AF_XDP socket close-on-exec: %s",
			 strerror(errno));
}

static int xsk_open(struct xdp_port *x, struct xdp_queue *q, void *area,
		    size_t size, const struct xsk_umem_config *ucfg,
		    uint16_t bind_flags)
{
	const struct xsk_socket_config scfg = {
		.rx_size = XDP_RING_SIZE,
		.tx_size = XDP_RING_SIZE,
		.xdp_flags = x->xdp_flags,
		.bind_flags = XDP_USE_NEED_WAKEUP | bind_flags,
	};
	int rc = xsk_umem__create(&q->umem, area, size, &q->fq, &q->cq, ucfg);

	if (rc) {
		q->umem = NULL;
		return rc;
	}
	xsk_fd_cloexec(xsk_umem__fd(q->umem));
	rc = xsk_socket__create(&q->xsk, x->name, q->queue_id, q->umem, &q->rx,
				&q->tx, &scfg);
	if (rc)
		q->xsk = NULL;
	else
		xsk_fd_cloexec(xsk_socket__fd(q->xsk));
	return rc;
}

/* A copy-mode XSK: a UMEM of our own, receive frames first half, send
 * frames the second, all receive frames on the fill ring. */
static int copy_open_once(struct xdp_port *x, struct xdp_queue *q)
{
	const struct xsk_umem_config ucfg = {
		.fill_size = XDP_RING_SIZE,
		.comp_size = XDP_RING_SIZE,
		.frame_size = XDP_FRAME_SIZE,
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
	rc = xsk_open(x, q, q->area, size, &ucfg, 0);
	if (rc)
		return rc;
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
	q->mode = Q_COPY;
	return 0;
}

/* Frames of our own in the view per pair: bounce frames, then the
 * receive reserve. */
unsigned vxdp_pair_frames(const struct xdp_port *x)
{
	return XDP_BOUNCE_FRAMES + x->reserve;
}

static uint32_t fill_ring_size(const struct xdp_port *x)
{
	uint32_t n = XDP_RING_SIZE;

	while (n < XDP_RING_SIZE + x->reserve)
		n *= 2;
	return n;
}

/* A no-copy XSK on the view: unaligned chunks, so that any guest address
 * may be a buffer; our bounce frames are the pair's slice of the view's
 * own area. The fill ring starts empty: the guest fills it. Bound in the
 * kernel's copy mode even where the driver could DMA into the UMEM: a
 * guest buffer may cross 4 KiB pages that are not contiguous for DMA, and
 * the kernel drops such a fill entry without ever giving it back. */
static int nocopy_open_once(struct xdp_port *x, struct xdp_queue *q,
			    unsigned pair)
{
	const struct xsk_umem_config ucfg = {
		/* Room for the guest's buffers and the whole reserve. */
		.fill_size = fill_ring_size(x),
		.comp_size = XDP_RING_SIZE,
		.frame_size = XDP_FRAME_SIZE,
		.frame_headroom = nocopy_headroom(x),
		.flags = XDP_UMEM_UNALIGNED_CHUNK_FLAG,
	};
	int rc = xsk_open(x, q, x->view.base, x->view.size, &ucfg, XDP_COPY);
	struct epoll_event ev = { .events = EPOLLIN };

	if (rc)
		return rc;
	q->rx_efd = epoll_create1(EPOLL_CLOEXEC);
	if (q->rx_efd < 0 || epoll_ctl(q->rx_efd, EPOLL_CTL_ADD,
				       xsk_socket__fd(q->xsk), &ev))
		return -errno;
	q->rx_armed = true;
	q->bounce_off = (uint64_t)pair * vxdp_pair_frames(x) * XDP_FRAME_SIZE;
	vnet_reserve_place(&q->res,
			   x->view.base + q->bounce_off +
				   XDP_BOUNCE_FRAMES * XDP_FRAME_SIZE,
			   q->bounce_off + XDP_BOUNCE_FRAMES * XDP_FRAME_SIZE,
			   chunk_front(x), x->hdr_len, x->b.max_frame);
	for (unsigned i = 0; i < XDP_BOUNCE_FRAMES; i++)
		q->tx_free[i] = q->bounce_off + (uint64_t)i * XDP_FRAME_SIZE;
	q->ntx_free = XDP_BOUNCE_FRAMES;
	q->mode = Q_NOCOPY;
	return 0;
}

/* Takes pair's queue out of the XSK map, or puts it back. */
static void steer(struct xdp_port *x, unsigned pair)
{
	struct xdp_queue *q = &x->q[pair];
	int rc;

	if (!q->xsk)
		return;
	rc = vnet_xsk_map_set(x->name, q->queue_id,
			      q->steer_off ? -1 : xsk_socket__fd(q->xsk));
	if (rc)
		log_warn("net: xdp %s queue %u: cannot %s the XSK map: %s",
			 x->name, q->queue_id,
			 q->steer_off ? "leave" : "join", strerror(-rc));
}

/* A pair the guest does not serve gets no frames in its XSK, where they
 * would wait unread: the redirect program passes them up to the host's
 * stack. Pair 0 always gets its frames, as with TAP. */
int vxdp_set_pair_enabled(struct vnet_port *b, unsigned pair,
				bool on)
{
	struct xdp_port *x = xdp_of(b);

	if (pair == 0 || x->q[pair].steer_off == !on)
		return 0;
	x->q[pair].steer_off = !on;
	steer(x, pair);
	return 0;
}

/* One try at pair's XSK; on failure nothing of it is left. */
int vxdp_queue_open_once(struct xdp_port *x, unsigned pair, bool nocopy)
{
	struct xdp_queue *q = &x->q[pair];
	int rc = nocopy ? nocopy_open_once(x, q, pair) : copy_open_once(x, q);

	if (rc) {
		vxdp_queue_close(q);
		return rc;
	}
	/* libxdp put the new XSK in the map. */
	if (q->steer_off)
		steer(x, pair);
	return 0;
}

/* At start only, before the loop runs: a busy queue (see the top) is
 * waited for, for up to a second, before it counts as busy. */
static int queue_open(struct xdp_port *x, unsigned pair, bool nocopy)
{
	int rc;

	for (unsigned i = 0;; i++) {
		rc = vxdp_queue_open_once(x, pair, nocopy);
		if (rc != -EBUSY || i == XDP_BUSY_TRIES)
			return rc;
		nanosleep(&(struct timespec){ .tv_nsec = XDP_BUSY_RETRY_MS *
							 1000 * 1000 },
			  NULL);
	}
}

/* Opens pair 0's queue in native mode, else generic (said once); the
 * other pairs follow in the mode that worked. */
int vxdp_open_queues(struct xdp_port *x, unsigned pairs)
{
	int rc;

	x->xdp_flags = XDP_FLAGS_DRV_MODE;
	x->xdp_mode = "native";
	rc = queue_open(x, 0, false);
	if (rc && rc != -EPERM && rc != -EACCES && rc != -ENODEV &&
	    rc != -ENOMEM && rc != -EBUSY) {
		int native = rc;

		x->xdp_flags = XDP_FLAGS_SKB_MODE;
		rc = queue_open(x, 0, false);
		if (!rc) {
			x->xdp_mode = "generic";
			log_info("net: xdp %s: no native XDP (%s): using "
				 "generic (SKB) XDP, slower",
				 x->name, strerror(-native));
		}
	}
	x->b.pairs = 1;
	for (unsigned i = 1; i < pairs && !rc; i++) {
		rc = queue_open(x, i, false);
		x->b.pairs = i + 1;
	}
	return rc;
}

