/* What one VM's vsock device hands a successor vmio, beside the
 * vhost-user session (vhost-user/session_state.h): its multiplexer
 * (muxer_handover.h: connections, credit, bytes held each way, RSTs
 * owed) and its hybrid listener (hybrid_handover.h: listeners, host
 * sockets half way through their CONNECT line). The order of steps,
 * both sides:
 *
 *   old: hold the session (its queues stop), vsock_device_pause_host,
 *        save the session, vsock_device_save; send both records
 *   new: vsock_device_restore (paused), a backend on its ops,
 *        restore the session (held)
 *   old, once the new one has taken over: vsock_device_handed_over and
 *        the session's, then free both
 *   new: vsock_device_pause_host(false), resume the session
 *   old, if the new one failed: vsock_device_pause_host(false), resume
 *        the session: nothing was lost, nothing was sent twice */
#ifndef VMIO_DEVICES_VSOCK_DEVICE_HANDOVER_H
#define VMIO_DEVICES_VSOCK_DEVICE_HANDOVER_H

#include <stdbool.h>

#include "devices/vsock/device.h"
#include "util/wire.h"

/* No host socket or listener watched, no deadline passing, while paused. */
void vsock_device_pause_host(struct vsock_device *d, bool paused);

/* Appends d's record to w and its host sockets and listeners to fds (at
 * most max_fds in all; *nfds in: those already there, out: after).
 * Returns 0, or -1 with *why. d must be paused and its queues stopped.
 * The fds stay d's: the caller passes copies. */
int vsock_device_save(const struct vsock_device *d, struct vmio_wire_writer *w,
		      int fds[], unsigned max_fds, unsigned *nfds,
		      const char **why);

/* A device taken back from one record, configured as cfg, whose
 * descriptors are fds[0..nfds): each one it takes becomes -1 there. It
 * comes back paused. NULL with r failed (r->why) when the record does
 * not fit; either way the caller closes the fds left >= 0. */
struct vsock_device *vsock_device_restore(struct vmio_loop *loop,
					  const struct vsock_device_config *cfg,
					  struct vmio_wire_reader *r, int fds[],
					  unsigned nfds);

/* The successor took over: freeing d sends nothing and leaves the socket
 * files, all the successor's now. */
void vsock_device_handed_over(struct vsock_device *d);

#endif
