/* The vsock multiplexer: between the device's two virtqueues and the
 * per-connection state machines (connection.h), after Firecracker's muxer.
 *
 *   tx queue   guest packets: parsed (vsock_pkt_parse_tx), routed by port
 *              pair to their connection, or answered here: an RST for a
 *              flow that has no connection, a connect() to
 *              `<uds-path>_<port>` for a REQUEST to the host
 *   rx queue   packets for the guest: synthetic RSTs first (they answer
 *              packets of no connection, and are bounded), then the
 *              connections with something pending, one packet each per
 *              turn in a FIFO, so a bulk sender cannot starve the others
 *              (host data is the exception: a turn sends one batch, up
 *              to VSOCK_CONN_TO_GUEST_BATCH_BYTES from one read, in as many
 *              rx chains as that takes; a bulk sender then gets up to
 *              64 KiB per turn rather than one 4 KiB buffer, and the
 *              others still get their turn before its next)
 *   host fds   watched exactly as vsock_conn_epoll_events says after every
 *              call into a connection: no EPOLLIN while the guest cannot
 *              take data, no EPOLLOUT unless data waits
 *   timer      one loop timer, ticking only while something has a deadline:
 *              a host-initiated connection the guest did not answer, a
 *              connection the guest closed whose data the host will not
 *              take (expiry.h)
 *
 * Work per callback is bounded (chains per batch); what is left is
 * resumed on the loop's next turn (vmio_defer), after it has served
 * everything else. No rx chain is held between callbacks; a tx chain
 * whose payload went to the host socket by reference (tx_splice.h) is,
 * until the host read it, within cfg.tx_hold_max. Held chains go back
 * out of order (a split ring allows it), when a look at the socket's
 * SIOCOUTQ says so: on every tx turn, on an edge-triggered EPOLLOUT of a
 * dup of the socket (the kernel wakes it as the reader frees what we
 * sent) and on the tick while any is held. A queue stop or a memory
 * table change gives every held chain back at once.
 *
 * Everything runs on the one loop the muxer was given. */
#ifndef VMIO_DEVICES_VSOCK_MUXER_H
#define VMIO_DEVICES_VSOCK_MUXER_H

#include <stdint.h>

#include "devices/vsock/mrg_rx.h"
#include "devices/vsock/muxer_config.h"
#include "devices/vsock/stats.h"
#include "event/loop.h"
#include "virtio/memory.h"
#include "virtio/virtqueue.h"

struct vsock_muxer;

struct vsock_muxer *vsock_muxer_new(struct vmio_loop *loop,
				    const struct vsock_muxer_config *cfg);
/* Closes every host socket and frees every connection. */
void vsock_muxer_free(struct vsock_muxer *m);

/* The device's queues and the guest memory, or NULL when stopped / being
 * remapped. The muxer serves a queue only while it is set. */
void vsock_muxer_set_queues(struct vsock_muxer *m, struct vmio_vq *rx,
			    struct vmio_vq *tx, struct vmio_mem *mem);

/* Socket types the guest may use (vsock_types_from_features). */
void vsock_muxer_set_types(struct vsock_muxer *m, unsigned types);
/* Whether the driver negotiated mergeable rx buffers (mrg_rx.h): every
 * rx packet is then written in that layout. Off after a reset. */
void vsock_muxer_set_mergeable(struct vsock_muxer *m, bool on);

/* Serves queue vq, one of those set: on queue start and on every kick.
 * Serving tx serves rx after it. Any other vq is not the muxer's. */
void vsock_muxer_kick(struct vsock_muxer *m, const struct vmio_vq *vq);

/* A host program on uds-path asked for the guest's port peer_port, on a
 * connection of the given type (VSOCK_TYPE_*: a seqpacket fd is an AF_UNIX
 * SOCK_SEQPACKET socket). Takes fd in every case: returns 0 with a
 * connection whose REQUEST goes to the guest, or -ENOTCONN (no VMM
 * attached) / -EPROTONOSUPPORT (the guest did not negotiate that type) /
 * -ENOSPC / -ENOMEM with fd closed. *local_port (may be NULL)
 * is the host-side port allocated. */
int vsock_muxer_connect_local_type(struct vsock_muxer *m, int fd,
				   uint16_t type, uint32_t peer_port,
				   uint32_t *local_port);

/* Whether a VMM is attached (it negotiated features, and has not gone
 * since). A host CONNECT with none attached is refused at once: nobody can
 * answer it, so waiting out --connect-timeout only hides that. While the
 * guest boots, a VMM is attached and a CONNECT waits for the driver. The
 * router (cfg.router) is told, and of the socket types too. */
void vsock_muxer_set_attached(struct vsock_muxer *m, bool attached);

/* The journal of its open connections (conn_journal.h), a memfd, or -1:
 * the muxer's, to be kept where a crash cannot take it. */
int vsock_muxer_journal_fd(const struct vsock_muxer *m);
/* The process is ending (a stop, or the end of a hand-over): the journal
 * stays as it is, for whichever vmio takes the session next. The
 * connections the teardown closes after this are closed on the host's
 * side only, the guest still has them open, so they stay in it (and the
 * next vmio resets them). */
void vsock_muxer_let_go_journal(struct vsock_muxer *m);

/* A dead vmio served this guest with the connections journal_fd (its
 * journal) names: each is owed an RST, sent before anything else on rx.
 * Returns how many. After the session is restored (a reset forgets
 * them). */
unsigned vsock_muxer_owe_rsts(struct vsock_muxer *m, int journal_fd);

/* This VM's counters. */
const struct vsock_vm_stats *vsock_muxer_stats(const struct vsock_muxer *m);

/* The guest is gone: closes every host socket, frees every connection and
 * forgets every queued RST. */
void vsock_muxer_reset(struct vsock_muxer *m);

struct vmio_json;
/* The VM's counters and its connections', as members of the object being
 * written (stats.h). On the muxer's loop. */
void vsock_muxer_write_stats(const struct vsock_muxer *m,
			     struct vmio_json *j);

#endif
