/* The in-tree front end as a guest's virtio-vsock driver, for tests and
 * benchmarks of `vmio vsock` from a plain process.
 *
 * Two layers:
 *   packets  rx buffers posted (and re-posted once reaped) on queue 0,
 *            packets sent on queue 1, each cut into descriptors as the
 *            options say (struct vg_cut), and their buffers reclaimed
 *            once used; vg_send_raw sends any bytes at
 *            all, for hostile-guest tests
 *   sockets  a minimal stream socket with the spec's credit accounting on
 *            top, so a test reads like socket code: vg_connect, vg_listen
 *            and vg_accept, vg_write, vg_read, vg_shutdown, vg_close;
 *            and seqpacket sockets (vg_connect_type, or a host REQUEST
 *            of that type) with vg_send_msg and vg_recv_msg, messages as
 *            Linux cuts them: RW packets, EOM (and EOR) on the last
 *
 * Single-threaded: nothing happens unless the test calls in, and every
 * call that waits takes a timeout in milliseconds. The driver checks the
 * device as it goes (an RW beyond the credit we gave, a used length that
 * disagrees with the header, a packet for the wrong CID) and counts each
 * such violation in vg->violations with the last one in vg->violation, so
 * a test can assert the device never broke the protocol.
 *
 * VG_TRACE=1 in the environment logs every received packet to stderr.
 *
 * Each socket keeps the limits of a Linux 6.12 guest (vsock_guest_limits.h)
 * unless told otherwise: it refuses an RW one packet past what Linux
 * queues (or past the credit), and then resets the connection as Linux
 * does (RST to the device, ENOBUFS to the next read); and it keeps what
 * it sends within its own buf_alloc as well as the host's. A refusal for
 * the packet count is no violation of the spec: it is counted in
 * rx_refused_pkts, not in violations.
 *
 * Packets that name no socket of ours are not answered (Linux would send
 * an RST; a test wants to see them instead): they go to a small queue
 * read with vg_next_unmatched. */
#ifndef VMIO_FRONTEND_VSOCK_GUEST_H
#define VMIO_FRONTEND_VSOCK_GUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "devices/vsock/packet.h"
#include "frontend/frontend.h"
#include "frontend/vsock_guest_limits.h"

/* How a driver cuts a packet's bytes (tx) or a receive buffer (rx) into
 * descriptors. Virtio lets it cut anywhere, and Linux has cut several
 * ways: the header apart from the payload (rx before 6.x, tx always),
 * the payload in pieces of 32 KiB (tx from 6.17 and late 6.12.y). The
 * zero value is one descriptor for the whole. */
struct vg_cut {
	uint32_t first;  /* bytes of the first descriptor: 0 none apart,
			  * VSOCK_HDR_SIZE the header alone, fewer cuts the
			  * header itself */
	uint32_t piece;  /* the rest in descriptors of at most this many
			  * bytes (0: the rest in one) */
	bool indirect;   /* the chain through an indirect table (the device
			  * offers VIRTIO_RING_F_INDIRECT_DESC) */
};
/* The most descriptors a cut may make of one chain. */
#define VG_CUT_MAX_DESC 72u

struct vg_opts {
	uint64_t guest_cid;      /* our CID (default 3) */
	uint16_t queue_size;     /* of both queues (default 256) */
	unsigned rx_bufs;        /* rx buffers kept posted (default 128) */
	uint32_t rx_buf_size;    /* bytes each, header included (default
				  * 4096 + 44, like Linux's 4 KiB payload) */
	struct vg_cut rx_cut;    /* each rx buffer's descriptors */
	unsigned tx_slots;       /* tx buffers of 44 + 64 KiB (default 64) */
	struct vg_cut tx_cut;    /* each packet's descriptors */
	uint32_t buf_alloc;      /* each socket's receive buffer (default
				  * 256 KiB, Linux's default) */
	uint32_t credit_threshold; /* send CREDIT_UPDATE once the host's view
				    * of our free space drops below this
				    * (default 64 KiB, as Linux) */
	unsigned max_sockets;    /* default 4096 */
	bool seqpacket;          /* negotiate VIRTIO_VSOCK_F_SEQPACKET
				  * (default true) */
	uint32_t tx_pkt_max;     /* largest RW payload we send (default and
				  * at most 64 KiB) */
	bool siblings;           /* accept packets from other guests' CIDs
				  * (sibling VMs behind one vmio), not only
				  * from the host's */
	bool mergeable;          /* negotiate VIRTIO_VSOCK_F_MRG_RXBUF
				  * (devices/vsock/mrg_rx.h) and reassemble
				  * packets that span rx buffers */
	const uint32_t *rx_sizes; /* with mergeable: buffer i is
				   * rx_sizes[i % n_rx_sizes] bytes (any
				   * size from 1), not rx_buf_size */
	unsigned n_rx_sizes;
	bool tx_scribble;        /* overwrite every tx buffer (0xa5) the
				  * moment it comes back used: a device that
				  * gives a buffer back before the host read
				  * it shows as wrong bytes on the host */
	uint32_t rx_pkt_overhead; /* what each queued rx packet costs against
				   * buf_alloc, as Linux 6.12.94 counts it
				   * (default VG_LINUX_PKT_OVERHEAD, 576, or
				   * $VG_RX_PKT_OVERHEAD); 0 checks the bytes
				   * only and drops an RW past the credit
				   * without a reset, as Linux 6.1 does */
	bool tx_cap;             /* bytes in flight within our own buf_alloc
				  * too, not only the host's (Linux 6.12.69
				  * and 6.1 stable; default true, false with
				  * $VG_TX_CAP=0) */
};

void vg_opts_init(struct vg_opts *o);

struct vg_sock;
struct vg_listener;

/* What the driver holds: public for tests to look at, not to change. */
struct vg {
	struct vmio_fe *fe;
	struct vg_opts o;

	uint64_t *rx_gpa;   /* per rx buffer */
	uint64_t *rx_table_gpa; /* per rx buffer, its indirect table */
	uint32_t *rx_size;  /* per rx buffer */
	bool mrg;           /* mergeable rx buffers negotiated */
	/* A mergeable packet being put together from its buffers. */
	uint8_t *asm_buf;   /* VSOCK_MRG_HDR_SIZE + 64 KiB */
	uint32_t asm_len;
	unsigned asm_bufs, asm_want; /* buffers taken, and num_buffers */
	uint32_t asm_room;  /* bytes of the buffers taken */
	uint64_t *tx_gpa;   /* per tx slot */
	uint64_t *tx_table_gpa; /* per tx slot, its indirect table */
	unsigned *tx_free;  /* stack of free tx slots */
	unsigned tx_nfree;
	bool rx_dirty;      /* re-posted rx buffers not kicked yet */

	struct vg_sock **socks;
	unsigned nsocks;
	struct vg_listener *listeners;
	unsigned last_sock; /* index of the last lookup's hit */
	uint32_t next_port; /* for vg_connect's local ports */

	bool ctl_owed;      /* some socket owes a control packet */

	/* RSTs owed to REQUESTs that no listener takes. */
	struct vsock_hdr rstq[64];
	unsigned rstq_len;

	/* Packets for no socket of ours, oldest first. */
	struct vsock_hdr unmatched[256];
	unsigned unmatched_head, unmatched_len;
	uint64_t unmatched_dropped;

	uint64_t pkts_rx, pkts_tx;
	uint64_t rx_ops[VSOCK_OP_MAX + 1]; /* packets received, by op */
	uint64_t violations;
	char violation[160];

	/* The Linux limits at work (o.rx_pkt_overhead, o.tx_cap). */
	uint64_t rx_refused_pkts;  /* RWs refused for one packet too many */
	uint64_t rx_refused_bytes; /* RWs refused past the credit (each also
				    * a violation) */
	uint64_t rx_resets;        /* connections reset for a refusal */
	uint64_t rx_coalesced;     /* small RWs copied into the one before */
	unsigned rx_queue_peak;    /* most packets a socket held unread */
	uint64_t tx_cap_waits;     /* waits for credit that the host's
				    * buf_alloc alone would have spared */
	char refusal[200];         /* the last refusal, said in full */
	char error[160];    /* why the last call failed */
};

/* Connects to the backend at path (bounded by timeout_ms), negotiates
 * VERSION_1 | EVENT_IDX | INDIRECT_DESC, creates guest memory, sets up
 * queues 0 and 1 and posts the rx buffers. o may be NULL for defaults.
 * Returns NULL with err filled on failure. */
struct vg *vg_open(const char *path, int timeout_ms, const struct vg_opts *o,
		   char *err, size_t err_size);
/* Frees the driver and every socket without sending anything, as a guest
 * that dies; closes the vhost-user connection. */
void vg_free(struct vg *g);

/* Reaps both queues, handling every packet that arrived, and waits up to
 * timeout_ms for something to arrive if nothing had; then sends the
 * control packets that handling queued (RST to a REQUEST for no
 * listener, CREDIT_UPDATE answering CREDIT_REQUEST). Returns the number
 * of used entries reaped on both queues (0 on timeout), -errno on
 * error. */
int vg_poll(struct vg *g, int timeout_ms);

/* vg_poll for many guests of one process at once (at most
 * VG_POLL_MANY_MAX): each is serviced, and the wait, when none had
 * anything, ends as soon as any of them is signalled. -E2BIG for more. */
#define VG_POLL_MANY_MAX 1024u
int vg_poll_many(struct vg *const *gs, unsigned n, int timeout_ms);

/* Sends a packet: hdr (encoded as given, len included: it is not set from
 * payload_len) then payload. Waits up to timeout_ms for a free tx slot.
 * Returns 0 or -errno. */
int vg_send_hdr(struct vg *g, const struct vsock_hdr *hdr,
		const void *payload, uint32_t payload_len, int timeout_ms);
/* Sends n raw bytes as the readable part of one chain, cut into ndesc
 * (1..4) descriptors of about equal size: a header of any length, with any
 * field. n at most 44 + 64 KiB. */
int vg_send_raw(struct vg *g, const void *bytes, size_t n, unsigned ndesc,
		int timeout_ms);

/* Pops the oldest packet that named no socket of ours, waiting up to
 * timeout_ms for one. Returns true with *h filled. */
bool vg_next_unmatched(struct vg *g, struct vsock_hdr *h, int timeout_ms);
/* Waits for an unmatched packet with this op and dst_port (our port),
 * discarding the others. */
bool vg_wait_unmatched(struct vg *g, uint16_t op, uint32_t dst_port,
		       struct vsock_hdr *h, int timeout_ms);

/* Sockets. Every function that can wait takes timeout_ms; errors are
 * negative errno: -ETIMEDOUT, -ECONNRESET (the host sent RST, or we reset
 * the connection), -ECONNREFUSED (RST in answer to our REQUEST), -EPIPE
 * (we shut down sending), -ENOTCONN, -ENOBUFS (once, from the first read
 * after we refused a packet and reset the connection). */

/* REQUEST to the host (CID 2) port; waits for RESPONSE or RST. Returns
 * the socket, or NULL with *err (may be NULL) set. */
struct vg_sock *vg_connect(struct vg *g, uint32_t port, int timeout_ms,
			   int *err);
/* vg_connect from local_port, as a guest program that bound it first
 * (systemd's sd_notify binds the privileged 1023, and down from there
 * while those are taken); NULL with -EADDRINUSE when a socket of ours
 * has that port with that peer port. */
struct vg_sock *vg_connect_from(struct vg *g, uint32_t local_port,
				uint32_t port, int timeout_ms, int *err);
/* Sends a REQUEST and returns at once; vg_connect_wait finishes it. For
 * opening many connections without a round trip each. */
struct vg_sock *vg_connect_start(struct vg *g, uint32_t port, int *err);
/* The same for a socket of the given type (VSOCK_TYPE_*). */
struct vg_sock *vg_connect_type(struct vg *g, uint16_t type, uint32_t port,
				int timeout_ms, int *err);
int vg_connect_wait(struct vg_sock *s, int timeout_ms);
/* The same to another CID: a sibling guest (needs o.siblings). */
struct vg_sock *vg_connect_cid(struct vg *g, uint64_t cid, uint32_t port,
			       int timeout_ms, int *err);
struct vg_sock *vg_connect_cid_start(struct vg *g, uint64_t cid,
				     uint32_t port, int *err);

/* Accepts host-initiated REQUESTs to port from now on (others are
 * answered with RST, as Linux does). The accepted socket has the type of
 * the REQUEST. */
int vg_listen(struct vg *g, uint32_t port);
/* Waits for a REQUEST to port and answers RESPONSE (the socket is
 * returned) or, with refuse, RST (NULL is returned, *err 0). */
struct vg_sock *vg_accept(struct vg *g, uint32_t port, bool refuse,
			  int timeout_ms, int *err);

/* Writes len bytes, waiting for credit as needed. Returns the bytes
 * written (== len unless the wait timed out or the connection broke, when
 * it is the part that went out, or -errno if none did). */
ssize_t vg_write(struct vg_sock *s, const void *buf, size_t len,
		 int timeout_ms);
/* Reads up to len bytes, waiting until at least one is there. Returns
 * the bytes read, 0 at end of stream (the host shut down sending, or
 * reset the connection after doing so, and everything was read), or
 * -errno (-ECONNRESET for an RST without a SHUTDOWN(SEND) before it;
 * -ENOBUFS first, as Linux reports it, when we refused a packet and
 * reset the connection: what was queued before it is read after that). */
ssize_t vg_read(struct vg_sock *s, void *buf, size_t len, int timeout_ms);
/* Seqpacket messages. vg_send_msg sends one message of len bytes (RW
 * packets of at most tx_pkt_max, within the credit, EOM on the last, EOR
 * too with VG_MSG_EOR) and returns the bytes sent, which is len unless the
 * wait timed out or the connection broke; -EMSGSIZE, as Linux, when len
 * exceeds the host's buf_alloc (or with tx_cap our own, if smaller),
 * unless VG_MSG_FORCE (for tests of a guest that ignores it). len 0 sends an empty RW with EOM.
 * vg_recv_msg waits for a complete message, copies up to len bytes of it
 * and drops the rest, and returns its whole length (0 at end of stream,
 * -errno as vg_read); *flags (may be NULL) gets VG_MSG_EOR if it ended a
 * record, VG_MSG_TRUNC if len was too small. */
#define VG_MSG_EOR 1u
#define VG_MSG_TRUNC 2u
#define VG_MSG_FORCE 4u
ssize_t vg_send_msg(struct vg_sock *s, const void *buf, size_t len,
		    unsigned flags, int timeout_ms);
ssize_t vg_recv_msg(struct vg_sock *s, void *buf, size_t len,
		    unsigned *flags, int timeout_ms);

/* SHUTDOWN with VSOCK_SHUTDOWN_RCV / _SEND. */
int vg_shutdown(struct vg_sock *s, uint32_t flags);
/* RST (unless the connection is already reset) and frees the socket. */
void vg_close(struct vg_sock *s);

/* What the socket knows, for assertions. */
struct vg_sock_info {
	uint32_t local_port, peer_port;
	bool established, reset;
	uint32_t peer_shut;   /* SHUTDOWN flags the host sent */
	uint32_t peer_credit; /* bytes we may send now */
	uint32_t peer_buf_alloc;
	uint32_t unread;      /* received, not read */
	unsigned queued_pkts; /* packets holding them, as Linux counts */
	bool refused;         /* we reset the connection for a refusal */
};
void vg_sock_info(const struct vg_sock *s, struct vg_sock_info *i);

/* A pattern of bytes whose value at any stream offset is computable, for
 * checking long transfers without a copy. vg_pattern_check returns the
 * index of the first wrong byte, or len. */
void vg_pattern_fill(uint64_t seed, uint64_t off, void *buf, size_t len);
size_t vg_pattern_check(uint64_t seed, uint64_t off, const void *buf,
			size_t len);

#endif
