#include "virtio/vq_signal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

#include "util/log.h"

void vmio_vq_signal(int fd)
{
	uint64_t one = 1;
	ssize_t r;

	if (fd < 0)
		return;
	/* EAGAIN means the counter is saturated: the reader wakes anyway. */
	do
		r = write(fd, &one, sizeof(one));
	while (r < 0 && errno == EINTR);
}

void vmio_vq_set_transport(struct vmio_vq *vq,
			   const struct vmio_vq_transport *t, void *opaque)
{
	vq->transport = t;
	vq->transport_opaque = opaque;
}

static void notify_eventfd(void *opaque)
{
	vmio_vq_signal(*(const int *)opaque);
}

const struct vmio_vq_transport vmio_vq_eventfd_transport = {
	.notify = notify_eventfd,
};

void vmio_vq_notify(struct vmio_vq *vq)
{
	if (vq->transport && vq->transport->notify)
		vq->transport->notify(vq->transport_opaque);
}

void vmio_vq_set_broken(struct vmio_vq *vq, const char *fmt, ...)
{
	char msg[256];
	va_list ap;

	if (vq->broken)
		return;
	vq->broken = true;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (vq->name)
		log_err("virtqueue %u (%s) broken: %s", vq->index, vq->name,
			msg);
	else
		log_err("virtqueue %u broken: %s", vq->index, msg);
	/* The transport tells the VMM (vhost-user: the error fd); it
	 * decides whether to reset. */
	if (vq->transport && vq->transport->broken)
		vq->transport->broken(vq->transport_opaque);
}
