/* The virtio-vsock packet: the 44-byte little-endian header that starts
 * every chain on the rx and tx queues, and the payload that follows it.
 *
 * This layer is pure: it decodes, validates and encodes headers over
 * struct vmio_chain and never touches a socket or a connection. Everything
 * in a tx chain was written by the guest and is hostile; the parser is the
 * only place that looks at raw header bytes, and the rest of the device
 * works on the host-order struct vsock_hdr it produces.
 *
 * Facts are from the virtio spec, "Socket Device". */
#ifndef VMIO_DEVICES_VSOCK_PACKET_H
#define VMIO_DEVICES_VSOCK_PACKET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "virtio/virtqueue.h"

#define VSOCK_HDR_SIZE 44u

/* Well-known CID of the host. CIDs 0, 1, 0xffffffff and ~0 are reserved. */
#define VSOCK_HOST_CID 2u

/* The largest payload one packet carries, in either direction (Linux's
 * VIRTIO_VSOCK_MAX_PKT_BUF_SIZE, and what Firecracker accepts). */
#define VSOCK_MAX_PKT_PAYLOAD (64u * 1024u)

/* Device feature bits (virtio feature numbers, not masks). */
#define VIRTIO_VSOCK_F_STREAM 0
#define VIRTIO_VSOCK_F_SEQPACKET 1
#define VIRTIO_VSOCK_F_NO_IMPLIED_STREAM 2

enum vsock_type {
	VSOCK_TYPE_STREAM = 1,
	VSOCK_TYPE_SEQPACKET = 2,
};

/* Sets of socket types, as masks of 1 << type: what the parser accepts. */
#define VSOCK_TYPE_BIT(t) (1u << (t))
#define VSOCK_TYPES_STREAM VSOCK_TYPE_BIT(VSOCK_TYPE_STREAM)
#define VSOCK_TYPES_ALL                                                        \
	(VSOCK_TYPE_BIT(VSOCK_TYPE_STREAM) |                                   \
	 VSOCK_TYPE_BIT(VSOCK_TYPE_SEQPACKET))

enum vsock_op {
	VSOCK_OP_INVALID = 0,
	VSOCK_OP_REQUEST = 1,
	VSOCK_OP_RESPONSE = 2,
	VSOCK_OP_RST = 3,
	VSOCK_OP_SHUTDOWN = 4,
	VSOCK_OP_RW = 5,
	VSOCK_OP_CREDIT_UPDATE = 6,
	VSOCK_OP_CREDIT_REQUEST = 7,
};
#define VSOCK_OP_MAX VSOCK_OP_CREDIT_REQUEST

/* SHUTDOWN flags: the peer will receive / send no more. Permanent once
 * seen; a later SHUTDOWN with a bit clear does not take it back. */
#define VSOCK_SHUTDOWN_RCV 1u
#define VSOCK_SHUTDOWN_SEND 2u
#define VSOCK_SHUTDOWN_MASK (VSOCK_SHUTDOWN_RCV | VSOCK_SHUTDOWN_SEND)

/* RW flags on seqpacket: last packet of a message / of a record. */
#define VSOCK_SEQ_EOM 1u
#define VSOCK_SEQ_EOR 2u
#define VSOCK_SEQ_MASK (VSOCK_SEQ_EOM | VSOCK_SEQ_EOR)

/* The header in host byte order. */
struct vsock_hdr {
	uint64_t src_cid;
	uint64_t dst_cid;
	uint32_t src_port;
	uint32_t dst_port;
	uint32_t len;
	uint16_t type;
	uint16_t op;
	uint32_t flags;
	uint32_t buf_alloc;
	uint32_t fwd_cnt;
};

/* A parsed tx packet. The payload is not copied: it is the readable part
 * of the chain from byte payload_off (always VSOCK_HDR_SIZE) for
 * payload_len (== hdr.len) bytes. */
struct vsock_pkt {
	struct vsock_hdr hdr;
	uint64_t payload_off;
	uint32_t payload_len;
	/* Flag bits the guest set that mean nothing for this op and type.
	 * They are cleared from hdr.flags (see vsock_pkt_parse_tx); kept here
	 * only so that the caller can log them. */
	uint32_t ignored_flags;
};

/* What the device does with a tx packet. */
enum vsock_verdict {
	/* Valid: hand it to the connection it names. */
	VSOCK_PKT_OK = 0,
	/* Ignore it and touch nothing: the header is missing, forged
	 * (src_cid is not the guest's) or itself an RST, so it cannot be
	 * trusted to name a connection, and answering it could loop. Log it,
	 * rate-limited. */
	VSOCK_PKT_DROP,
	/* Invalid, but it names a flow of this guest: reset that flow (close
	 * the connection on its port pair, if there is one) and answer with
	 * an RST built by vsock_hdr_reply(). Never returned for a packet
	 * whose op is RST, so an RST is never answered with one. */
	VSOCK_PKT_RST,
};

/* Converts between the wire image and host order. */
void vsock_hdr_decode(const uint8_t wire[VSOCK_HDR_SIZE],
		      struct vsock_hdr *h);
void vsock_hdr_encode(const struct vsock_hdr *h,
		      uint8_t wire[VSOCK_HDR_SIZE]);

/* The socket types a driver may use given the negotiated device features:
 * STREAM if F_STREAM was negotiated, or if F_NO_IMPLIED_STREAM was not
 * (the spec: "If no feature bit has been negotiated, the device SHOULD act
 * as if VIRTIO_VSOCK_F_STREAM has been negotiated", and without
 * NO_IMPLIED_STREAM it MAY keep stream on with SEQPACKET alone, which is
 * what Linux expects); SEQPACKET if F_SEQPACKET was negotiated. */
unsigned vsock_types_from_features(uint64_t features);

/* Parses the packet at the start of a chain popped from the tx queue.
 *
 *   guest_cid   the only src_cid the guest may use
 *   max_payload largest len accepted (at most VSOCK_MAX_PKT_PAYLOAD makes
 *               sense; the caller passes its configured limit)
 *   types       mask of accepted types (VSOCK_TYPES_*), from
 *               vsock_types_from_features()
 *
 * The header may be split across the readable iovecs in any way. Writable
 * descriptors in a tx chain are ignored (the device writes nothing there).
 *
 * Returns a verdict. out->hdr is filled whenever the chain held 44 bytes
 * (so the caller can log ports, and build an RST for VSOCK_PKT_RST);
 * out->payload_* only with VSOCK_PKT_OK. *why (if why is not NULL) names
 * the problem for a log line, or is NULL with VSOCK_PKT_OK.
 *
 * Checks, in order:
 *   - at least 44 readable bytes                        else DROP
 *   - src_cid == guest_cid (all 64 bits)                else DROP
 *   - type in `types`                                   else RST (spec)
 *   - op in REQUEST..CREDIT_REQUEST                     else RST
 *   - len <= max_payload, len <= readable bytes - 44    else RST
 *   - len == 0 unless op is RW                          else RST
 * where RST becomes DROP if op is RST. dst_cid is not checked here: where
 * a packet may go (host, sibling VMs) is the multiplexer's decision.
 *
 * Flags: bits that mean nothing for the op and type are cleared from
 * hdr.flags and reported in ignored_flags, not rejected. Meaningful are
 * RCV|SEND on SHUTDOWN and EOM|EOR on a seqpacket RW; nothing else. Why not
 * reject: flags never size or place anything, so an unknown bit cannot hurt
 * us once cleared; Linux's own receive path ignores unknown bits the same
 * way; a new bit would come with a feature we did not offer; and an RST on
 * an established stream for a cosmetic bit would lose the guest's data.
 * SHUTDOWN with no bit set is accepted too (it changes nothing). */
enum vsock_verdict vsock_pkt_parse_tx(const struct vmio_chain *c,
				      uint64_t guest_cid, uint32_t max_payload,
				      unsigned types, struct vsock_pkt *out,
				      const char **why);

/* Fills out with a header answering `in` (ports and CIDs swapped, same
 * type) with the given op; len, flags, buf_alloc and fwd_cnt are zero, for
 * the caller to set (an RST for an unknown flow carries no credit). */
void vsock_hdr_reply(const struct vsock_hdr *in, uint16_t op,
		     struct vsock_hdr *out);

/* Checks the shape of a chain popped from the rx queue: at least 44
 * writable bytes and no readable descriptor. A readable descriptor on the
 * rx queue is a driver bug (the spec: "Virtqueue buffers for incoming
 * packets are write-only"): the caller should log it and treat the queue
 * as broken (vmio_vq_set_broken) rather than guess what the driver meant.
 * Returns 0, or -1 with *why set. */
int vsock_pkt_check_rx(const struct vmio_chain *c, const char **why);
/* The same for a buffer of a mergeable packet (mrg_rx.h), which may be
 * any size: no readable descriptor, at least one writable byte. */
int vsock_pkt_check_rx_buf(const struct vmio_chain *c, const char **why);

/* Payload bytes an rx chain can take: writable bytes after the header,
 * capped at max_payload; 0 if the header does not fit. */
uint32_t vsock_pkt_rx_capacity(const struct vmio_chain *c,
			       uint32_t max_payload);

/* Writes the header at the start of the chain's writable part. Returns 0,
 * or -1 if the writable part is shorter than 44 bytes (nothing written).
 * h->len is written as given: the caller sets it to the payload it wrote. */
int vsock_pkt_write_hdr(const struct vmio_chain *c, const struct vsock_hdr *h);

/* Copies payload into an rx chain after the header, `off` bytes into the
 * payload. Returns bytes copied. For data read from a host socket prefer
 * vmio_iov_slice() over the writable part and readv() into it. */
size_t vsock_pkt_write_payload(const struct vmio_chain *c, uint32_t off,
			       const void *src, size_t len);

/* Payloads as scatter lists (util/iov.h), without copying, for
 * writev/readv on guest memory:
 *   tx payload: vmio_iov_slice(c->iov, c->nout, pkt->payload_off + done,
 *                              pkt->payload_len - done, ...)
 *   rx payload: vmio_iov_slice(c->iov + c->nout, c->nin, VSOCK_HDR_SIZE,
 *                              vsock_pkt_rx_capacity(c, max), ...) */

const char *vsock_op_name(uint16_t op);

#endif
