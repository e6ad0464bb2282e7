/* The null backend: the device's own cost, with nothing behind it. The
 * device counts what it "sends"; nothing is ever received. */
#include <errno.h>
#include <stdlib.h>

#include "devices/net/backend.h"

static int null_configure(struct vnet_backend *b, uint64_t features,
			  size_t hdr_len)
{
	return 0;
}

static int null_tx(struct vnet_backend *b, unsigned pair,
		   const struct iovec *iov, unsigned niov, uint32_t cookie)
{
	return 0;
}

static int null_rx_fd(struct vnet_backend *b, unsigned pair)
{
	return -1;
}

static ssize_t null_rx(struct vnet_backend *b, unsigned pair,
		       const struct iovec *iov, unsigned niov)
{
	return -EAGAIN;
}

static void null_free(struct vnet_backend *b)
{
	free(b);
}

static const struct vnet_backend_ops null_ops = {
	.name = "null",
	.configure = null_configure,
	.tx = null_tx,
	.rx_fd = null_rx_fd,
	.rx = null_rx,
	.free = null_free,
};

struct vnet_backend *vnet_backend_null_new(unsigned pairs)
{
	struct vnet_backend *b = calloc(1, sizeof(*b));

	if (!b)
		return NULL;
	b->ops = &null_ops;
	b->pairs = pairs;
	return b;
}
