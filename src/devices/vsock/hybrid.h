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
 * affected.
 *
 * Seqpacket: a unix socket file has one type, so seqpacket host programs
 * have a listener of their own at `<uds-path>.seqpacket`, an AF_UNIX
 * SOCK_SEQPACKET socket. Its protocol is the same with messages: the
 * first message is exactly `CONNECT <port>\n` (anything else in it, or a
 * message without the newline at its end, is refused), the answer is the
 * one message `OK <port>\n`, and every later message crosses to the
 * guest's SOCK_SEQPACKET socket as one message. */
#ifndef VMIO_DEVICES_VSOCK_HYBRID_H
#define VMIO_DEVICES_VSOCK_HYBRID_H

#include <stdbool.h>
#include <stddef.h>

#include "devices/vsock/muxer.h"
#include "event/loop.h"

/* Appended to uds-path for the seqpacket listener. */
#define VSOCK_HYBRID_SEQPACKET_SUFFIX ".seqpacket"

struct vsock_hybrid_config {
	const char *uds_path;
	unsigned max_pending; /* sockets awaiting their line at once */
	unsigned line_timeout_ms;
	size_t line_max;      /* --connect-line-max */
};

struct vsock_hybrid;

/* Listens on cfg->uds_path and on its seqpacket twin (a stale socket file
 * is replaced, a live one refused). Returns NULL with *err set to -errno (-EADDRINUSE: another
 * process serves it). */
struct vsock_hybrid *vsock_hybrid_new(struct vmio_loop *loop,
				      struct vsock_muxer *mux,
				      const struct vsock_hybrid_config *cfg,
				      int *err);
/* While a hand-over is under way (hybrid_handover.h): nothing accepted or
 * read, no line timed out, so nothing the record holds changes. */
void vsock_hybrid_pause(struct vsock_hybrid *h, bool paused);

/* Closes the listeners (removing the socket files they made) and every
 * socket still awaiting its line. */
void vsock_hybrid_free(struct vsock_hybrid *h);

#endif
