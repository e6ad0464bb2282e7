/* The host side of Firecracker's hybrid vsock: a unix listener at
 * uds-path. A host program connects and writes `CONNECT <port>\n`; once
 * the line is complete the socket goes to the multiplexer as a
 * connection to that guest port (the multiplexer answers `OK <port>\n`
 * when the guest accepts).
 *
 * Until then the socket waits in a bounded list with its line parser
 * (connect_line.h). Each is read with MSG_PEEK, so bytes after the
 * newline stay in the socket as the start of the stream. A bad line, an
 * early EOF, or a line not finished within the connect timeout closes
 * that one socket with a log line (rate-limited); nothing else is
 * affected. */
#ifndef VMIO_DEVICES_VSOCK_HYBRID_H
#define VMIO_DEVICES_VSOCK_HYBRID_H

#include <stddef.h>

#include "devices/vsock/muxer.h"
#include "event/loop.h"

struct vsock_hybrid_config {
	const char *uds_path;
	unsigned max_pending; /* sockets awaiting their line at once */
	unsigned line_timeout_ms;
	size_t line_max;      /* --connect-line-max */
};

struct vsock_hybrid;

/* Listens on cfg->uds_path (a stale socket file is replaced, a live one
 * refused). Returns NULL with *err set to -errno (-EADDRINUSE: another
 * process serves it). */
struct vsock_hybrid *vsock_hybrid_new(struct vmio_loop *loop,
				      struct vsock_muxer *mux,
				      const struct vsock_hybrid_config *cfg,
				      int *err);
/* Closes the listener (removing the socket file it made) and every
 * socket still awaiting its line. */
void vsock_hybrid_free(struct vsock_hybrid *h);

/* Sockets awaiting their CONNECT line (for tests). */
unsigned vsock_hybrid_pending(const struct vsock_hybrid *h);

#endif
