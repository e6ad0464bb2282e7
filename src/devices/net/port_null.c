/* The null port: the device's own cost, with nothing behind it. The
 * device counts what it "sends"; nothing is received, unless the port
 * is a source (--null-source SIZE): then every receive gets the same
 * SIZE-byte frame, as fast as the guest posts buffers, so that a guest
 * in rxonly measures the device's rx path alone, as txonly does tx.
 *
 * The device reads a pair only while its rx_fd polls readable, so a
 * source needs a descriptor that always does: an eventfd per pair,
 * made with a count of 1 and never read, which costs no system call per
 * frame. (/dev/zero would not do: it has no poll method and epoll_ctl
 * refuses it with EPERM.) When the guest runs out of
 * buffers the device stops watching the descriptor until the guest
 * kicks, so an idle guest costs nothing. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "devices/net/port_null.h"
#include "devices/net/virtio_net.h"
#include "util/iov.h"

struct null_port {
	struct vnet_port b;
	size_t hdr_len;   /* from configure */
	/* The header every frame gets: no flags, no GSO, one buffer. Made
	 * at configure, not per frame: a header built on the stack and
	 * copied at once is read back from stores still in flight, which
	 * waits for every older store to reach the cache, the frames into
	 * guest lines the other core holds included. */
	uint8_t hdr[VIRTIO_NET_HDR_LEN];
	size_t frame_len; /* 0: not a source */
	uint8_t frame[VNET_NULL_SOURCE_MAX];
	int fds[]; /* per pair, when a source */
};

static struct null_port *to_null(struct vnet_port *b)
{
	return (struct null_port *)b;
}

static int null_configure(struct vnet_port *b, uint64_t features,
			  size_t hdr_len)
{
	struct null_port *n = to_null(b);

	n->hdr_len = hdr_len;
	memset(n->hdr, 0, sizeof(n->hdr));
	if (hdr_len >= VIRTIO_NET_HDR_LEN)
		n->hdr[VIRTIO_NET_HDR_NUM_BUFFERS_OFFSET] = 1; /* le16 1 */
	return 0;
}

static int null_tx(struct vnet_port *b, unsigned pair,
		   const struct iovec *iov, unsigned niov, uint32_t cookie)
{
	return 0;
}

static int null_rx_fd(struct vnet_port *b, unsigned pair)
{
	struct null_port *n = to_null(b);

	return n->frame_len ? n->fds[pair] : -1;
}

/* The frame behind a zeroed header: no flags, no GSO, one buffer. */
static ssize_t null_rx(struct vnet_port *b, unsigned pair,
		       const struct iovec *iov, unsigned niov)
{
	struct null_port *n = to_null(b);
	const uint8_t *hdr = n->hdr;

	if (!n->frame_len)
		return -EAGAIN;
	if (iov[0].iov_len < n->hdr_len + n->frame_len &&
	    vmio_iov_length(iov, niov) < n->hdr_len + n->frame_len)
		return -EMSGSIZE;
	/* Drivers post a buffer in one piece: two copies, no walk. */
	if (iov[0].iov_len >= n->hdr_len + n->frame_len) {
		memcpy(iov[0].iov_base, hdr, n->hdr_len);
		memcpy((uint8_t *)iov[0].iov_base + n->hdr_len, n->frame,
		       n->frame_len);
	} else {
		vmio_iov_from_buf(iov, niov, 0, hdr, n->hdr_len);
		vmio_iov_from_buf(iov, niov, n->hdr_len, n->frame,
				  n->frame_len);
	}
	return (ssize_t)(n->hdr_len + n->frame_len);
}

static void null_free(struct vnet_port *b)
{
	struct null_port *n = to_null(b);

	for (unsigned i = 0; n->frame_len && i < b->pairs; i++)
		if (n->fds[i] >= 0)
			close(n->fds[i]);
	free(n);
}

/* Nothing beside the command line: the successor makes its own. */
static int null_save(struct vnet_port *b, struct vmio_wire_writer *w,
		     int fds[], unsigned max, unsigned *nfds, const char **why)
{
	return 0;
}

static const struct vnet_port_ops null_ops = {
	.name = "null",
	.configure = null_configure,
	.tx = null_tx,
	.rx_fd = null_rx_fd,
	.rx = null_rx,
	.save = null_save,
	.free = null_free,
};

/* Broadcast to, from a locally administered address, the IEEE's local
 * experimental ethertype: a frame no stack takes for real traffic. */
static void make_frame(uint8_t *f, size_t len)
{
	static const uint8_t eth[VNET_ETH_HLEN] = {
		0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
		0x02, 0x00, 0x00, 0x00, 0x00, 0x01,
		0x88, 0xb5,
	};

	memset(f, 0, len);
	memcpy(f, eth, sizeof(eth));
}

struct vnet_port *vnet_port_null_new(unsigned pairs, size_t source_len,
					   int *err)
{
	struct null_port *n;

	*err = -EINVAL;
	if (source_len && (source_len < VNET_NULL_SOURCE_MIN ||
			   source_len > VNET_NULL_SOURCE_MAX))
		return NULL;
	*err = -ENOMEM;
	n = calloc(1, sizeof(*n) + (source_len ? pairs * sizeof(int) : 0));
	if (!n)
		return NULL;
	n->b.ops = &null_ops;
	n->b.pairs = pairs;
	n->hdr_len = VIRTIO_NET_HDR_LEN;
	if (!source_len)
		return &n->b;
	n->frame_len = source_len;
	make_frame(n->frame, source_len);
	for (unsigned i = 0; i < pairs; i++)
		n->fds[i] = -1;
	for (unsigned i = 0; i < pairs; i++) {
		n->fds[i] = eventfd(1, EFD_CLOEXEC | EFD_NONBLOCK);
		if (n->fds[i] < 0) {
			*err = -errno;
			null_free(&n->b);
			return NULL;
		}
	}
	return &n->b;
}
