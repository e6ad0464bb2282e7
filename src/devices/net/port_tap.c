/* The TAP port: one /dev/net/tun descriptor per queue pair on a
 * multi-queue TAP with a virtio-net header in front of every frame, so
 * that guest buffers go to the kernel and back with writev and readv and
 * vmio copies nothing. The kernel checks the header again, but only what
 * the device validated reaches it. */
#include <errno.h>
#include <fcntl.h>
#include <linux/if_tun.h>
#include <net/if.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "devices/net/port_tap.h"
#include "devices/net/virtio_net.h"
#include "util/log.h"
#include "virtio/features.h"

struct tap_queue {
	int fd;
	/* The kernel steers frames to it. Written on the pair's loop; read
	 * also by a snapshot for the fd store on the device's. */
	atomic_bool attached;
};

struct tap_port {
	struct vnet_port b;
	char name[IFNAMSIZ];
	/* Whether vmio created the interface: it lives as long as a queue
	 * is open (not persistent), which a hand-over keeps. */
	bool created;
	/* What configure applied last (-1: nothing yet): a successor finds
	 * the interface set up and leaves it as it is. */
	int hdr_len_set, offloads_set;
	struct tap_queue q[]; /* one per pair */
};

static struct tap_port *tap_of(struct vnet_port *b)
{
	return (struct tap_port *)b;
}

/* What the guest accepts on rx is what the TAP may hand us: the kernel
 * then leaves checksums and segmentation of received frames to it. */
static unsigned tun_offloads(uint64_t features)
{
	unsigned f = 0;

	if (features & VMIO_BIT(VIRTIO_NET_F_GUEST_CSUM)) {
		f |= TUN_F_CSUM;
		if (features & VMIO_BIT(VIRTIO_NET_F_GUEST_TSO4))
			f |= TUN_F_TSO4;
		if (features & VMIO_BIT(VIRTIO_NET_F_GUEST_TSO6))
			f |= TUN_F_TSO6;
	}
	return f;
}

static int tap_configure(struct vnet_port *b, uint64_t features,
			 size_t hdr_len)
{
	struct tap_port *t = tap_of(b);
	int sz = (int)hdr_len, off = (int)tun_offloads(features);

	if (sz == t->hdr_len_set && off == t->offloads_set)
		return 0;
	t->hdr_len_set = t->offloads_set = -1;
	/* Both settings belong to the interface: one descriptor will do. */
	if (ioctl(t->q[0].fd, TUNSETVNETHDRSZ, &sz) < 0) {
		log_err("net: tap %s: cannot set the vnet header size to %d: %s",
			t->name, sz, strerror(errno));
		return -errno;
	}
	if (ioctl(t->q[0].fd, TUNSETOFFLOAD, (unsigned)off) < 0) {
		log_err("net: tap %s: cannot set offloads: %s", t->name,
			strerror(errno));
		return -errno;
	}
	t->hdr_len_set = sz;
	t->offloads_set = off;
	return 0;
}

static int tap_tx(struct vnet_port *b, unsigned pair,
		  const struct iovec *iov, unsigned niov, uint32_t cookie)
{
	ssize_t n = writev(tap_of(b)->q[pair].fd, iov, (int)niov);

	return n < 0 ? -errno : 0;
}

static int tap_rx_fd(struct vnet_port *b, unsigned pair)
{
	return tap_of(b)->q[pair].fd;
}

static ssize_t tap_rx(struct vnet_port *b, unsigned pair,
		      const struct iovec *iov, unsigned niov)
{
	ssize_t n = readv(tap_of(b)->q[pair].fd, iov, (int)niov);

	return n < 0 ? -errno : n;
}

static void tap_free(struct vnet_port *b)
{
	struct tap_port *t = tap_of(b);

	for (unsigned i = 0; i < b->pairs; i++)
		close(t->q[i].fd);
	free(t);
}

/* A detached queue gets no frames, and the ones it held are dropped:
 * what a guest that stopped serving the pair would never read anyway. */
static int tap_set_pair_enabled(struct vnet_port *b, unsigned pair,
				bool on)
{
	struct tap_port *t = tap_of(b);
	struct tap_queue *q = &t->q[pair];
	struct ifreq ifr = { 0 };

	if (pair == 0 ||
	    atomic_load_explicit(&q->attached, memory_order_relaxed) == on)
		return 0;
	ifr.ifr_flags = on ? IFF_ATTACH_QUEUE : IFF_DETACH_QUEUE;
	/* EINVAL: the queue is already so (the kernel refuses to attach an
	 * attached queue or detach a detached one), which a record kept
	 * for a crash can have missed: its snapshot is read while pairs
	 * steer. The kernel's word wins. */
	if (ioctl(q->fd, TUNSETQUEUE, &ifr) < 0 && errno != EINVAL) {
		log_warn("net: tap %s: cannot %s queue %u: %s", t->name,
			 on ? "attach" : "detach", pair, strerror(errno));
		return -errno;
	}
	atomic_store_explicit(&q->attached, on, memory_order_relaxed);
	return 0;
}

/* The record: the interface's name, whether vmio created it, the
 * offloads it offers, what configure applied (vnet header size and TUN
 * offloads), and whether each queue is attached; its fds are the queues,
 * which keep the interface (and its addresses) alive. */
static int tap_save(struct vnet_port *b, struct vmio_wire_writer *w,
		    int fds[], unsigned max, unsigned *nfds, const char **why)
{
	struct tap_port *t = tap_of(b);

	if (max - *nfds < b->pairs) {
		*why = "more TAP queues than the record takes";
		return -1;
	}
	vmio_wire_put_u32(w, (uint32_t)strlen(t->name));
	vmio_wire_put_bytes(w, t->name, strlen(t->name));
	vmio_wire_put_u8(w, t->created);
	vmio_wire_put_u64(w, b->offloads);
	vmio_wire_put_u32(w, (uint32_t)t->hdr_len_set);
	vmio_wire_put_u32(w, (uint32_t)t->offloads_set);
	for (unsigned i = 0; i < b->pairs; i++) {
		vmio_wire_put_u8(w, atomic_load_explicit(&t->q[i].attached,
							memory_order_relaxed));
		fds[(*nfds)++] = t->q[i].fd;
	}
	return 0;
}

static const struct vnet_port_ops tap_ops = {
	.name = "tap",
	.configure = tap_configure,
	.tx = tap_tx,
	.rx_fd = tap_rx_fd,
	.rx = tap_rx,
	.set_pair_enabled = tap_set_pair_enabled,
	.save = tap_save,
	.free = tap_free,
};

static int tun_set_iff(int fd, const char *name, short flags)
{
	struct ifreq ifr = { 0 };

	ifr.ifr_flags = flags;
	memcpy(ifr.ifr_name, name, strlen(name));
	return ioctl(fd, TUNSETIFF, &ifr) < 0 ? -errno : 0;
}

/* Opens one queue of the TAP. TUNSETIFF creates the interface if it is
 * missing and attaches another queue if it exists with the same
 * multi-queue flag; an existing single-queue TAP does for one pair. */
static int tap_open_queue(const char *name, unsigned pairs, const char **why)
{
	const short flags = IFF_TAP | IFF_NO_PI | IFF_VNET_HDR;
	int fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
	int rc;

	if (fd < 0) {
		*why = "cannot open /dev/net/tun";
		return -errno;
	}
	rc = tun_set_iff(fd, name, flags | IFF_MULTI_QUEUE);
	if (rc == -EINVAL && pairs == 1)
		rc = tun_set_iff(fd, name, flags);
	if (rc == 0)
		return fd;
	close(fd);
	if (rc == -EPERM)
		*why = "no permission to create or attach it (needs "
		       "CAP_NET_ADMIN, or a TAP owned by this user)";
	else if (rc == -EINVAL && pairs > 1)
		*why = "it is not a multi-queue TAP (use --queues 1, or "
		       "recreate it with multi_queue), or not a TAP at all";
	else if (rc == -EINVAL)
		*why = "it exists and is not a TAP";
	else if (rc == -EBUSY)
		*why = "another process holds it (or all its queues)";
	else
		*why = "TUNSETIFF failed";
	return rc;
}

/* The virtio-net offloads a TAP may carry. */
static uint64_t tap_offload_bits(void)
{
	return VMIO_BIT(VIRTIO_NET_F_CSUM) |
	       VMIO_BIT(VIRTIO_NET_F_GUEST_CSUM) |
	       VMIO_BIT(VIRTIO_NET_F_HOST_TSO4) |
	       VMIO_BIT(VIRTIO_NET_F_HOST_TSO6) |
	       VMIO_BIT(VIRTIO_NET_F_GUEST_TSO4) |
	       VMIO_BIT(VIRTIO_NET_F_GUEST_TSO6);
}

/* The offloads this kernel's TAP takes, probed on a live queue:
 * TUNSETOFFLOAD refuses flags it does not know. */
static uint64_t tap_probe_offloads(int fd)
{
	if (ioctl(fd, TUNSETOFFLOAD, TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6) < 0)
		return 0;
	ioctl(fd, TUNSETOFFLOAD, 0);
	return tap_offload_bits();
}

struct vnet_port *vnet_port_tap_new(const char *name, unsigned pairs,
					  int *err, const char **why)
{
	struct tap_port *t;

	if (!name[0] || strlen(name) >= IFNAMSIZ) {
		*err = -EINVAL;
		*why = "interface names are 1 to 15 bytes";
		return NULL;
	}
	t = calloc(1, sizeof(*t) + pairs * sizeof(t->q[0]));
	if (!t) {
		*err = -ENOMEM;
		*why = "out of memory";
		return NULL;
	}
	t->b.ops = &tap_ops;
	t->b.pairs = 0;
	t->hdr_len_set = t->offloads_set = -1;
	memcpy(t->name, name, strlen(name) + 1);
	t->created = if_nametoindex(name) == 0;
	for (unsigned i = 0; i < pairs; i++) {
		int fd = tap_open_queue(name, pairs, why);

		if (fd < 0) {
			*err = fd;
			tap_free(&t->b);
			return NULL;
		}
		t->q[i].fd = fd;
		atomic_init(&t->q[i].attached, true);
		t->b.pairs = i + 1;
	}
	t->b.offloads = tap_probe_offloads(t->q[0].fd);
	/* Until the guest starts serving them. */
	for (unsigned i = 1; i < pairs; i++)
		tap_set_pair_enabled(&t->b, i, false);
	return &t->b;
}

/* One queue a predecessor opened: a TAP of that name, with a vnet
 * header of the size it says it applied. */
static const char *check_queue(int fd, const char *name, unsigned pairs,
			       int hdr_len)
{
	const short want = IFF_TAP | IFF_NO_PI | IFF_VNET_HDR;
	struct ifreq ifr = { 0 };
	int sz = 0;

	if (ioctl(fd, TUNGETIFF, &ifr) < 0)
		return "a queue is not a TAP's";
	if (strncmp(ifr.ifr_name, name, IFNAMSIZ) ||
	    (ifr.ifr_flags & want) != want ||
	    (pairs > 1 && !(ifr.ifr_flags & IFF_MULTI_QUEUE)))
		return "a queue is another interface's, or not a multi-queue TAP with a vnet header";
	if (hdr_len >= 0 &&
	    (ioctl(fd, TUNGETVNETHDRSZ, &sz) < 0 || sz != hdr_len))
		return "the TAP's vnet header size is not the one recorded";
	return NULL;
}

struct vnet_port *vnet_port_tap_restore(const char *name, unsigned pairs,
					struct vmio_wire_reader *r, int fds[],
					unsigned nfds)
{
	uint32_t len = vmio_wire_get_count(r, 1);
	const uint8_t *rec_name = vmio_wire_get_bytes(r, len);
	bool created = vmio_wire_get_u8(r) != 0;
	uint64_t offloads = vmio_wire_get_u64(r);
	int hdr_len = (int)vmio_wire_get_u32(r);
	int offs = (int)vmio_wire_get_u32(r);
	struct tap_port *t;
	const char *why;

	if (!vmio_wire_ok(r))
		return NULL;
	if (len != strlen(name) || memcmp(rec_name, name, len)) {
		vmio_wire_fail(r, "the predecessor served another TAP (--tap changed)");
		return NULL;
	}
	if (nfds != pairs) {
		vmio_wire_fail(r, "not one descriptor per TAP queue");
		return NULL;
	}
	if (offloads & ~tap_offload_bits() ||
	    hdr_len < -1 || hdr_len > VIRTIO_NET_HDR_LEN ||
	    offs < -1 ||
	    (offs > 0 && offs & ~(TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6))) {
		vmio_wire_fail(r, "TAP settings out of range");
		return NULL;
	}
	t = calloc(1, sizeof(*t) + pairs * sizeof(t->q[0]));
	if (!t) {
		vmio_wire_fail(r, "out of memory");
		return NULL;
	}
	t->b.ops = &tap_ops;
	t->b.offloads = offloads;
	t->created = created;
	t->hdr_len_set = hdr_len;
	t->offloads_set = offs;
	memcpy(t->name, name, strlen(name) + 1);
	for (unsigned i = 0; i < pairs; i++)
		atomic_init(&t->q[i].attached, vmio_wire_get_u8(r) != 0);
	why = vmio_wire_ok(r) ? NULL : r->why;
	for (unsigned i = 0; !why && i < pairs; i++)
		why = check_queue(fds[i], name, pairs, hdr_len);
	if (why) {
		if (vmio_wire_ok(r))
			vmio_wire_fail(r, why);
		free(t);
		return NULL;
	}
	/* The queues are the port's now. */
	for (unsigned i = 0; i < pairs; i++) {
		t->q[i].fd = fds[i];
		fds[i] = -1;
	}
	t->b.pairs = pairs;
	t->b.handed_over = true;
	log_info("net: tap %s (%s by vmio) taken over with its %u queue%s",
		 name, created ? "created" : "not created", pairs,
		 pairs == 1 ? "" : "s");
	return &t->b;
}
