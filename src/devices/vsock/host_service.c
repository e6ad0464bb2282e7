/* The host services a guest connects to; see host_service.h. */
#include "devices/vsock/host_service.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "devices/vsock/peer_log.h"

_Static_assert(sizeof(((struct sockaddr_un *)0)->sun_path) ==
		       VSOCK_SERVICE_PATH_MAX,
	       "VSOCK_SERVICE_PATH_MAX is sun_path's size");

int vsock_service_path(const char *uds_path, uint32_t port, char *buf,
		       size_t size)
{
	return snprintf(buf, size, "%s_%u", uds_path, port);
}

int vsock_service_connect(const char *uds_path, const struct vsock_hdr *h,
			  struct vmio_ratelimit *rl, char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd, n;

	n = vsock_service_path(uds_path, h->dst_port, sa.sun_path,
			       sizeof(sa.sun_path));
	memcpy(path, sa.sun_path, sizeof(sa.sun_path));
	if (n < 0 || (size_t)n >= sizeof(sa.sun_path)) {
		vsock_peer_log(rl, VMIO_LOG_WARN,
			       "vsock: %s_%u: path too long", uds_path,
			       h->dst_port);
		return -1;
	}
	fd = socket(AF_UNIX,
		    (h->type == VSOCK_TYPE_SEQPACKET ? SOCK_SEQPACKET
						     : SOCK_STREAM) |
			    SOCK_NONBLOCK | SOCK_CLOEXEC,
		    0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		vsock_peer_log(rl, VMIO_LOG_INFO,
			       "vsock: guest connect to host port %u: %s: %s; "
			       "RST",
			       h->dst_port, sa.sun_path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}
