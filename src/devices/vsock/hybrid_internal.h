/* The hybrid listener's state and the calls its hand-over
 * (hybrid_handover.c) makes; not for anything else. */
#ifndef VMIO_DEVICES_VSOCK_HYBRID_INTERNAL_H
#define VMIO_DEVICES_VSOCK_HYBRID_INTERNAL_H

#include <stdint.h>
#include <sys/stat.h>

#include "devices/vsock/connect_line.h"
#include "devices/vsock/expiry.h"
#include "devices/vsock/hybrid.h"
#include "devices/vsock/peer_log.h"

#define HYBRID_BACKLOG 128

struct hy_pending {
	struct hy_pending *prev, *next;
	struct vsock_hybrid *h;
	int fd;
	uint16_t type; /* VSOCK_TYPE_STREAM or VSOCK_TYPE_SEQPACKET */
	uint64_t deadline_ns;
	struct vsock_connect_line line;
};

/* One listening socket: uds-path (stream) or its seqpacket twin. */
struct hy_listener {
	struct vsock_hybrid *h;
	uint16_t type;
	int fd;
	char *path;
	struct stat st; /* the socket file we made */
};

struct vsock_hybrid {
	struct vmio_loop *loop;
	struct vsock_muxer *mux;
	struct vsock_hybrid_config cfg;
	char *path;
	struct hy_listener lis[2]; /* stream, seqpacket */
	/* The tick, while a socket awaits its line (the line timeout is
	 * its "connect" deadline, expiry.h). */
	struct vsock_expiry expiry;
	struct hy_pending *pending;
	unsigned npending;
	bool paused; /* a hand-over is under way: nothing watched */
	struct vmio_ratelimit rl;
};

/* A hybrid without listeners or pending sockets yet (NULL: no memory). */
struct vsock_hybrid *vsock_hybrid_alloc(struct vmio_loop *loop,
					struct vsock_muxer *mux,
					const struct vsock_hybrid_config *cfg);
/* Serves fd, listening at path (stream) or its seqpacket twin, whose
 * file is st. Returns 0 or -errno. */
int vsock_hybrid_listen_fd(struct vsock_hybrid *h, uint16_t type, int fd,
			   const struct stat *st);
/* A host socket awaiting the rest of its CONNECT line (its bytes so far
 * in line), until deadline_ns. Takes fd; returns 0 or -errno (fd
 * closed). */
int vsock_hybrid_pending_add(struct vsock_hybrid *h, int fd, uint16_t type,
			     uint64_t deadline_ns,
			     const struct vsock_connect_line *line);

#endif
