/* What the hybrid listener (hybrid.h) hands a successor vmio: its two
 * listening sockets (their backlog of host programs not yet accepted
 * stays in them) and every host socket still awaiting its CONNECT line,
 * with the bytes of the line read so far and the time left to finish it.
 * The descriptors travel beside the record, named by index.
 *
 * The successor reads the record as hostile input: each listener must be
 * a listening unix socket of its type whose file is still at the path
 * this vmio serves, and each partial line is fed again to a fresh parser,
 * which must take all of it and still want more. */
#ifndef VMIO_DEVICES_VSOCK_HYBRID_HANDOVER_H
#define VMIO_DEVICES_VSOCK_HYBRID_HANDOVER_H

#include "devices/vsock/hybrid.h"
#include "util/wire.h"

/* Appends h's record to w (h paused: vsock_hybrid_pause) and its sockets to fds (at most max_fds in
 * all; *nfds in: those there, out: after). Returns 0, or -1 with *why.
 * The fds stay h's: the caller passes copies. */
int vsock_hybrid_save(const struct vsock_hybrid *h, struct vmio_wire_writer *w,
		      int fds[], unsigned max_fds, unsigned *nfds,
		      const char **why);

/* A hybrid listener taken back from one record, for mux, whose sockets
 * are fds[0..nfds): each taken (fds[i] becomes -1) at most once. It
 * comes back paused: unpause it once this process has taken over. NULL
 * with r failed (r->why) when the record does not fit, nothing taken;
 * either way the caller closes the fds left >= 0. */
struct vsock_hybrid *vsock_hybrid_restore(struct vmio_loop *loop,
					  struct vsock_muxer *mux,
					  const struct vsock_hybrid_config *cfg,
					  struct vmio_wire_reader *r, int fds[],
					  unsigned nfds);

/* The successor took over: freeing h leaves the socket files, which are
 * the successor's now. */
void vsock_hybrid_handed_over(struct vsock_hybrid *h);

#endif
