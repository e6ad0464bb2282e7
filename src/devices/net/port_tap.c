/* The TAP port: one /dev/net/tun descriptor per queue pair on a
 * multi-queue TAP with a virtio-net header in front of every frame, so
 * that guest buffers go to the kernel and back with writev and readv and
 * vmio copies nothing. The kernel checks the header again, but only what
 * the device validated reaches it. */
#include <errno.h>
#include <fcntl.h>
#include <linux/if_tun.h>
#include <net/if.h>
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
	bool attached; /* the kernel steers frames to it */
};

struct tap_port {
	struct vnet_port b;
	char name[IFNAMSIZ];
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
	int sz = (int)hdr_len;

	/* Both settings belong to the interface: one descriptor will do. */
	if (ioctl(t->q[0].fd, TUNSETVNETHDRSZ, &sz) < 0) {
		log_err("net: tap %s: cannot set the vnet header size to %d: %s",
			t->name, sz, strerror(errno));
		return -errno;
	}
	if (ioctl(t->q[0].fd, TUNSETOFFLOAD, tun_offloads(features)) < 0) {
		log_err("net: tap %s: cannot set offloads: %s", t->name,
			strerror(errno));
		return -errno;
	}
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

	if (pair == 0 || q->attached == on)
		return 0;
	ifr.ifr_flags = on ? IFF_ATTACH_QUEUE : IFF_DETACH_QUEUE;
	if (ioctl(q->fd, TUNSETQUEUE, &ifr) < 0) {
		log_warn("net: tap %s: cannot %s queue %u: %s", t->name,
			 on ? "attach" : "detach", pair, strerror(errno));
		return -errno;
	}
	q->attached = on;
	return 0;
}

static const struct vnet_port_ops tap_ops = {
	.name = "tap",
	.configure = tap_configure,
	.tx = tap_tx,
	.rx_fd = tap_rx_fd,
	.rx = tap_rx,
	.set_pair_enabled = tap_set_pair_enabled,
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

/* The offloads this kernel's TAP takes, probed on a live queue:
 * TUNSETOFFLOAD refuses flags it does not know. */
static uint64_t tap_probe_offloads(int fd)
{
	if (ioctl(fd, TUNSETOFFLOAD, TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6) < 0)
		return 0;
	ioctl(fd, TUNSETOFFLOAD, 0);
	return VMIO_BIT(VIRTIO_NET_F_CSUM) |
	       VMIO_BIT(VIRTIO_NET_F_GUEST_CSUM) |
	       VMIO_BIT(VIRTIO_NET_F_HOST_TSO4) |
	       VMIO_BIT(VIRTIO_NET_F_HOST_TSO6) |
	       VMIO_BIT(VIRTIO_NET_F_GUEST_TSO4) |
	       VMIO_BIT(VIRTIO_NET_F_GUEST_TSO6);
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
	memcpy(t->name, name, strlen(name) + 1);
	for (unsigned i = 0; i < pairs; i++) {
		int fd = tap_open_queue(name, pairs, why);

		if (fd < 0) {
			*err = fd;
			tap_free(&t->b);
			return NULL;
		}
		t->q[i] = (struct tap_queue){ .fd = fd, .attached = true };
		t->b.pairs = i + 1;
	}
	t->b.offloads = tap_probe_offloads(t->q[0].fd);
	/* Until the guest starts serving them. */
	for (unsigned i = 1; i < pairs; i++)
		tap_set_pair_enabled(&t->b, i, false);
	return &t->b;
}
