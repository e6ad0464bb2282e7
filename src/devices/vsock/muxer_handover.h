/* What one VM's multiplexer (muxer.h) hands a successor vmio, and how the
 * successor's multiplexer takes it back: the socket types the driver
 * negotiated, whether a VMM is attached, mergeable rx buffers, the RSTs
 * still owed to the guest, and every connection (conn_handover.h) with
 * its deadline as time left. Host sockets travel as descriptors beside
 * the record, which names each by its index in the caller's list.
 *
 * Save wants the multiplexer quiet: its queues unset (the device stopped
 * them, every chain it popped finished), so nothing moves while it is
 * written. Restore wants a fresh one, before its queues are set; it
 * reads the record as hostile input and takes nothing until all of it
 * has been read and checked. Sibling flows and the packets between VMs
 * are the router's, and travel in its own record (router_handover.h). */
#ifndef VMIO_DEVICES_VSOCK_MUXER_HANDOVER_H
#define VMIO_DEVICES_VSOCK_MUXER_HANDOVER_H

#include <stdint.h>

#include "devices/vsock/muxer.h"
#include "util/wire.h"

/* While a hand-over is under way, from before the record is written
 * until the successor answers: nothing is read from or written to a host
 * socket and no deadline passes, so that nothing the record holds
 * changes (a flush of buffered guest bytes to the host would send them
 * twice). A socket stops being watched when it first reports while
 * paused, not at the pause. Unpaused, every connection is watched again
 * as it asks. */
void vsock_muxer_pause_host(struct vsock_muxer *m, bool paused);

/* NULL if m can be handed over now (its queues stopped, its host sockets
 * paused), else why not. */
const char *vsock_muxer_handover_refusal(const struct vsock_muxer *m);

/* Appends m's record to w and the host sockets it names to fds (at most
 * max_fds in all; *nfds, in: those already there, out: after). Returns
 * 0, or -1 with *why (a refusal, or more sockets than max_fds). The fds
 * stay m's: the caller passes copies. */
int vsock_muxer_save(const struct vsock_muxer *m, struct vmio_wire_writer *w,
		     int fds[], unsigned max_fds, unsigned *nfds,
		     const char **why);

/* Reads one record into m, fresh, whose host sockets are fds[0..nfds).
 * m comes back paused (vsock_muxer_pause_host): unpause it once this
 * process has taken over.
 * Each connection takes its descriptor (fds[i] becomes -1), each index
 * at most once. Returns 0; or -1 with r failed (r->why) and m as fresh
 * as before, the connections it made gone with the descriptors they took.
 * Either way the caller closes the fds left >= 0. */
int vsock_muxer_restore(struct vsock_muxer *m, struct vmio_wire_reader *r,
			int fds[], unsigned nfds);

#endif
