/* The virtio-vsock header: decode, validate, encode. See packet.h. */
#include "devices/vsock/packet.h"

#include <endian.h>
#include <string.h>

/* Field offsets in the wire header (packed, little-endian). */
#define OFF_SRC_CID 0
#define OFF_DST_CID 8
#define OFF_SRC_PORT 16
#define OFF_DST_PORT 20
#define OFF_LEN 24
#define OFF_TYPE 28
#define OFF_OP 30
#define OFF_FLAGS 32
#define OFF_BUF_ALLOC 36
#define OFF_FWD_CNT 40

/* memcpy keeps the loads and stores free of alignment assumptions: the
 * wire buffer is a byte array. */
static uint64_t get64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return le64toh(v);
}

static uint32_t get32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return le32toh(v);
}

static uint16_t get16(const uint8_t *p)
{
	uint16_t v;

	memcpy(&v, p, sizeof(v));
	return le16toh(v);
}

static void put64(uint8_t *p, uint64_t v)
{
	v = htole64(v);
	memcpy(p, &v, sizeof(v));
}

static void put32(uint8_t *p, uint32_t v)
{
	v = htole32(v);
	memcpy(p, &v, sizeof(v));
}

static void put16(uint8_t *p, uint16_t v)
{
	v = htole16(v);
	memcpy(p, &v, sizeof(v));
}

void vsock_hdr_decode(const uint8_t wire[VSOCK_HDR_SIZE], struct vsock_hdr *h)
{
	h->src_cid = get64(wire + OFF_SRC_CID);
	h->dst_cid = get64(wire + OFF_DST_CID);
	h->src_port = get32(wire + OFF_SRC_PORT);
	h->dst_port = get32(wire + OFF_DST_PORT);
	h->len = get32(wire + OFF_LEN);
	h->type = get16(wire + OFF_TYPE);
	h->op = get16(wire + OFF_OP);
	h->flags = get32(wire + OFF_FLAGS);
	h->buf_alloc = get32(wire + OFF_BUF_ALLOC);
	h->fwd_cnt = get32(wire + OFF_FWD_CNT);
}

void vsock_hdr_encode(const struct vsock_hdr *h, uint8_t wire[VSOCK_HDR_SIZE])
{
	put64(wire + OFF_SRC_CID, h->src_cid);
	put64(wire + OFF_DST_CID, h->dst_cid);
	put32(wire + OFF_SRC_PORT, h->src_port);
	put32(wire + OFF_DST_PORT, h->dst_port);
	put32(wire + OFF_LEN, h->len);
	put16(wire + OFF_TYPE, h->type);
	put16(wire + OFF_OP, h->op);
	put32(wire + OFF_FLAGS, h->flags);
	put32(wire + OFF_BUF_ALLOC, h->buf_alloc);
	put32(wire + OFF_FWD_CNT, h->fwd_cnt);
}

unsigned vsock_types_from_features(uint64_t features)
{
	unsigned types = 0;

	if ((features & (1ull << VIRTIO_VSOCK_F_STREAM)) ||
	    !(features & (1ull << VIRTIO_VSOCK_F_NO_IMPLIED_STREAM)))
		types |= VSOCK_TYPE_BIT(VSOCK_TYPE_STREAM);
	if (features & (1ull << VIRTIO_VSOCK_F_SEQPACKET))
		types |= VSOCK_TYPE_BIT(VSOCK_TYPE_SEQPACKET);
	return types;
}

static bool type_allowed(uint16_t type, unsigned types)
{
	return type < 32 && (types & (1u << type));
}

/* The flag bits that carry meaning for this op and type. */
static uint32_t meaningful_flags(uint16_t type, uint16_t op)
{
	if (op == VSOCK_OP_SHUTDOWN)
		return VSOCK_SHUTDOWN_MASK;
	if (op == VSOCK_OP_RW && type == VSOCK_TYPE_SEQPACKET)
		return VSOCK_SEQ_MASK;
	return 0;
}

/* An invalid packet that names a flow is reset, unless it is itself an
 * RST: answering an RST with an RST is how two peers loop (and a stale
 * RST answered would kill a reused port pair). */
static enum vsock_verdict reject(const struct vsock_hdr *h, const char **why,
				 const char *reason)
{
	if (why)
		*why = reason;
	return h->op == VSOCK_OP_RST ? VSOCK_PKT_DROP : VSOCK_PKT_RST;
}

enum vsock_verdict vsock_pkt_parse_tx(const struct vmio_chain *c,
				      uint64_t guest_cid, uint32_t max_payload,
				      unsigned types, struct vsock_pkt *out,
				      const char **why)
{
	uint8_t wire[VSOCK_HDR_SIZE];
	struct vsock_hdr *h = &out->hdr;
	uint64_t room;
	uint32_t keep;

	memset(out, 0, sizeof(*out));
	if (why)
		*why = NULL;

	/* out_len is the sum of the readable iovecs as the virtqueue layer
	 * computed it; the copy below is the real test, so a chain whose
	 * out_len overstates its iovecs cannot get a header of stale bytes. */
	if (c->out_len < VSOCK_HDR_SIZE ||
	    vmio_chain_read(c, 0, wire, sizeof(wire)) != sizeof(wire)) {
		if (why)
			*why = "tx chain shorter than the 44-byte header";
		return VSOCK_PKT_DROP;
	}
	vsock_hdr_decode(wire, h);

	/* A forged source is not answered: the reply would go to a flow the
	 * guest does not own (the spec: guest_cid MUST be the source). */
	if (h->src_cid != guest_cid) {
		if (why)
			*why = "src_cid is not the guest's CID";
		return VSOCK_PKT_DROP;
	}
	if (!type_allowed(h->type, types))
		return reject(h, why, "unknown or unnegotiated socket type");
	if (h->op == VSOCK_OP_INVALID || h->op > VSOCK_OP_MAX)
		return reject(h, why, "unknown op");
	if (h->len > max_payload)
		return reject(h, why, "len above the maximum packet payload");
	room = c->out_len - VSOCK_HDR_SIZE;
	if (h->len > room)
		return reject(h, why, "len beyond the buffer carrying it");
	if (h->len && h->op != VSOCK_OP_RW)
		return reject(h, why, "payload on a packet that is not RW");

	keep = meaningful_flags(h->type, h->op);
	out->ignored_flags = h->flags & ~keep;
	h->flags &= keep;

	out->payload_off = VSOCK_HDR_SIZE;
	out->payload_len = h->len;
	return VSOCK_PKT_OK;
}

void vsock_hdr_reply(const struct vsock_hdr *in, uint16_t op,
		     struct vsock_hdr *out)
{
	/* Built in a local so that in and out may be the same header. */
	struct vsock_hdr r = {
		.src_cid = in->dst_cid,
		.dst_cid = in->src_cid,
		.src_port = in->dst_port,
		.dst_port = in->src_port,
		.type = in->type,
		.op = op,
	};

	*out = r;
}

int vsock_pkt_check_rx(const struct vmio_chain *c, const char **why)
{
	const char *bad = NULL;

	if (c->nout)
		bad = "rx chain has readable descriptors";
	else if (c->in_len < VSOCK_HDR_SIZE)
		bad = "rx chain shorter than the 44-byte header";
	if (why)
		*why = bad;
	return bad ? -1 : 0;
}

int vsock_pkt_check_rx_buf(const struct vmio_chain *c, const char **why)
{
	const char *bad = NULL;

	if (c->nout)
		bad = "rx chain has readable descriptors";
	else if (!c->in_len)
		bad = "rx chain with no writable byte";
	if (why)
		*why = bad;
	return bad ? -1 : 0;
}

uint32_t vsock_pkt_rx_capacity(const struct vmio_chain *c,
			       uint32_t max_payload)
{
	uint64_t room;

	if (c->in_len < VSOCK_HDR_SIZE)
		return 0;
	room = c->in_len - VSOCK_HDR_SIZE;
	return room < max_payload ? (uint32_t)room : max_payload;
}

int vsock_pkt_write_hdr(const struct vmio_chain *c, const struct vsock_hdr *h)
{
	uint8_t wire[VSOCK_HDR_SIZE];

	if (c->in_len < VSOCK_HDR_SIZE)
		return -1;
	vsock_hdr_encode(h, wire);
	return vmio_chain_write(c, 0, wire, sizeof(wire)) == sizeof(wire) ? 0
									   : -1;
}

size_t vsock_pkt_write_payload(const struct vmio_chain *c, uint32_t off,
			       const void *src, size_t len)
{
	return vmio_chain_write(c, (uint64_t)VSOCK_HDR_SIZE + off, src, len);
}

const char *vsock_op_name(uint16_t op)
{
	static const char *const names[] = {
		[VSOCK_OP_INVALID] = "INVALID",
		[VSOCK_OP_REQUEST] = "REQUEST",
		[VSOCK_OP_RESPONSE] = "RESPONSE",
		[VSOCK_OP_RST] = "RST",
		[VSOCK_OP_SHUTDOWN] = "SHUTDOWN",
		[VSOCK_OP_RW] = "RW",
		[VSOCK_OP_CREDIT_UPDATE] = "CREDIT_UPDATE",
		[VSOCK_OP_CREDIT_REQUEST] = "CREDIT_REQUEST",
	};

	return op <= VSOCK_OP_MAX ? names[op] : "unknown";
}
