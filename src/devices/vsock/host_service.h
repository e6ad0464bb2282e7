/* The host services a guest connects to: a guest REQUEST to host port P
 * reaches the unix socket at <uds-path>_<P> (Firecracker's hybrid vsock),
 * of the guest socket's type: a seqpacket guest socket reaches a
 * SOCK_SEQPACKET service, and a service of the other type refuses
 * (EPROTOTYPE). A unix connect never blocks: it succeeds, or fails
 * (EAGAIN when the listener's backlog is full, a refusal too). */
#ifndef VMIO_DEVICES_VSOCK_HOST_SERVICE_H
#define VMIO_DEVICES_VSOCK_HOST_SERVICE_H

#include <stddef.h>
#include <stdint.h>

#include "devices/vsock/packet.h"

struct vmio_ratelimit;

/* Writes <uds_path>_<port> into buf, as snprintf does (the return value
 * too: >= size when cut). */
int vsock_service_path(const char *uds_path, uint32_t port, char *buf,
		       size_t size);

/* Connects to the service guest REQUEST h asks for. Returns the
 * connected fd (non-blocking, close-on-exec), or -1 after logging why
 * through rl. path (at least VSOCK_SERVICE_PATH_MAX bytes) gets the
 * service's path. */
#define VSOCK_SERVICE_PATH_MAX 108 /* sun_path */
int vsock_service_connect(const char *uds_path, const struct vsock_hdr *h,
			  struct vmio_ratelimit *rl, char *path);

#endif
