/* The vsock packet layer against chains built by hand over local buffers:
 * header layouts, every validation rule, rx chain shape and a round trip
 * through the writer and the parser. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "devices/vsock/packet.h"
#include "util/iov.h"

#define GUEST_CID 3u
#define BUF_SIZE 256u

/* A chain is 16 KiB of iovecs: keep them off the stack. */
static struct vmio_chain chain;
static uint8_t buf[BUF_SIZE];

/* Lays a chain over buf[0..total): segment i is seg[i] bytes long, and
 * the last one takes whatever is left. Readable if !writable. */
static void build(struct vmio_chain *c, uint8_t *base, size_t total,
		  const size_t *seg, unsigned nseg, bool writable)
{
	size_t off = 0;
	unsigned i;

	memset(c, 0, sizeof(*c));
	for (i = 0; i < nseg; i++) {
		size_t len = i + 1 == nseg ? total - off : seg[i];

		assert_true(off + len <= total);
		c->iov[i].iov_base = base + off;
		c->iov[i].iov_len = len;
		off += len;
	}
	if (writable) {
		c->nin = nseg;
		c->in_len = total;
	} else {
		c->nout = nseg;
		c->out_len = total;
	}
}

static struct vsock_hdr hdr_rw(uint32_t len)
{
	struct vsock_hdr h = {
		.src_cid = GUEST_CID,
		.dst_cid = VSOCK_HOST_CID,
		.src_port = 1234,
		.dst_port = 5000,
		.len = len,
		.type = VSOCK_TYPE_STREAM,
		.op = VSOCK_OP_RW,
		.flags = 0,
		.buf_alloc = 262144,
		.fwd_cnt = 77,
	};

	return h;
}

/* Encodes h into buf followed by `payload` bytes of a counting pattern. */
static size_t put_pkt(const struct vsock_hdr *h, size_t payload)
{
	size_t i;

	assert_true(VSOCK_HDR_SIZE + payload <= BUF_SIZE);
	vsock_hdr_encode(h, buf);
	for (i = 0; i < payload; i++)
		buf[VSOCK_HDR_SIZE + i] = (uint8_t)(i + 1);
	return VSOCK_HDR_SIZE + payload;
}

static enum vsock_verdict parse(const struct vsock_hdr *h, size_t payload,
				const size_t *seg, unsigned nseg,
				struct vsock_pkt *pkt, const char **why)
{
	size_t total = put_pkt(h, payload);

	build(&chain, buf, total, seg, nseg, false);
	return vsock_pkt_parse_tx(&chain, GUEST_CID, VSOCK_MAX_PKT_PAYLOAD,
				  VSOCK_TYPES_STREAM, pkt, why);
}

static void assert_hdr_equal(const struct vsock_hdr *a,
			     const struct vsock_hdr *b)
{
	assert_int_equal(a->src_cid, b->src_cid);
	assert_int_equal(a->dst_cid, b->dst_cid);
	assert_int_equal(a->src_port, b->src_port);
	assert_int_equal(a->dst_port, b->dst_port);
	assert_int_equal(a->len, b->len);
	assert_int_equal(a->type, b->type);
	assert_int_equal(a->op, b->op);
	assert_int_equal(a->flags, b->flags);
	assert_int_equal(a->buf_alloc, b->buf_alloc);
	assert_int_equal(a->fwd_cnt, b->fwd_cnt);
}

/* Gathers the parsed payload through vmio_iov_slice and checks it is the
 * counting pattern put_pkt wrote. */
static void assert_payload(const struct vsock_pkt *pkt)
{
	struct iovec out[8];
	size_t covered = 0, seen = 0;
	unsigned n, i;

	n = vmio_iov_slice(chain.iov, chain.nout, pkt->payload_off,
			    pkt->payload_len, out, 8, &covered);
	assert_int_equal(covered, pkt->payload_len);
	for (i = 0; i < n; i++) {
		const uint8_t *p = out[i].iov_base;
		size_t j;

		assert_true(out[i].iov_len > 0);
		for (j = 0; j < out[i].iov_len; j++, seen++)
			assert_int_equal(p[j], (uint8_t)(seen + 1));
	}
	assert_int_equal(seen, pkt->payload_len);
}

static void test_wire_layout(void **state)
{
	struct vsock_hdr h = {
		.src_cid = 0x0102030405060708ull,
		.dst_cid = 0x1112131415161718ull,
		.src_port = 0x21222324,
		.dst_port = 0x31323334,
		.len = 0x41424344,
		.type = 0x5152,
		.op = 0x6162,
		.flags = 0x71727374,
		.buf_alloc = 0x81828384,
		.fwd_cnt = 0x91929394,
	};
	static const uint8_t want[VSOCK_HDR_SIZE] = {
		0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01,
		0x18, 0x17, 0x16, 0x15, 0x14, 0x13, 0x12, 0x11,
		0x24, 0x23, 0x22, 0x21, 0x34, 0x33, 0x32, 0x31,
		0x44, 0x43, 0x42, 0x41, 0x52, 0x51, 0x62, 0x61,
		0x74, 0x73, 0x72, 0x71, 0x84, 0x83, 0x82, 0x81,
		0x94, 0x93, 0x92, 0x91,
	};
	uint8_t wire[VSOCK_HDR_SIZE];
	struct vsock_hdr back;

	(void)state;
	vsock_hdr_encode(&h, wire);
	assert_memory_equal(wire, want, sizeof(want));
	vsock_hdr_decode(wire, &back);
	assert_hdr_equal(&back, &h);
}

static void test_header_one_iov(void **state)
{
	struct vsock_hdr h = hdr_rw(100);
	struct vsock_pkt pkt;
	const char *why = "unset";

	(void)state;
	assert_int_equal(parse(&h, 100, NULL, 1, &pkt, &why), VSOCK_PKT_OK);
	assert_null(why);
	assert_hdr_equal(&pkt.hdr, &h);
	assert_int_equal(pkt.payload_off, VSOCK_HDR_SIZE);
	assert_int_equal(pkt.payload_len, 100);
	assert_payload(&pkt);
}

static void test_header_split_1_43(void **state)
{
	static const size_t seg[] = { 1, 43 };
	struct vsock_hdr h = hdr_rw(20);
	struct vsock_pkt pkt;
	const char *why = NULL;

	(void)state;
	assert_int_equal(parse(&h, 20, seg, 3, &pkt, &why), VSOCK_PKT_OK);
	assert_hdr_equal(&pkt.hdr, &h);
	assert_payload(&pkt);
}

static void test_header_split_three(void **state)
{
	/* Header across 3 iovecs with an empty one between, and the payload
	 * starting inside the third and running over two more. */
	static const size_t seg[] = { 10, 0, 20, 30, 7 };
	struct vsock_hdr h = hdr_rw(60);
	struct vsock_pkt pkt;
	const char *why = NULL;

	(void)state;
	assert_int_equal(parse(&h, 60, seg, 6, &pkt, &why), VSOCK_PKT_OK);
	assert_hdr_equal(&pkt.hdr, &h);
	assert_int_equal(pkt.payload_len, 60);
	assert_payload(&pkt);
}

static void test_buffer_longer_than_len(void **state)
{
	/* The driver may give more than len bytes; only len count. */
	struct vsock_hdr h = hdr_rw(10);
	struct vsock_pkt pkt;
	const char *why = NULL;

	(void)state;
	assert_int_equal(parse(&h, 50, NULL, 1, &pkt, &why), VSOCK_PKT_OK);
	assert_int_equal(pkt.payload_len, 10);
}

static void test_spoofed_src_cid(void **state)
{
	struct vsock_hdr h = hdr_rw(0);
	struct vsock_pkt pkt;
	const char *why = NULL;

	(void)state;
	h.src_cid = 4;
	assert_int_equal(parse(&h, 0, NULL, 1, &pkt, &why), VSOCK_PKT_DROP);
	assert_non_null(why);
	/* The reserved upper half counts too. */
	h.src_cid = GUEST_CID | (1ull << 32);
	assert_int_equal(parse(&h, 0, NULL, 1, &pkt, &why), VSOCK_PKT_DROP);
	/* Spoofing wins over every other fault: no RST to a forged flow. */
	h.src_cid = VSOCK_HOST_CID;
	h.type = 9;
	assert_int_equal(parse(&h, 0, NULL, 1, &pkt, &why), VSOCK_PKT_DROP);
}

static void test_bad_type(void **state)
{
	struct vsock_hdr h = hdr_rw(0);
	struct vsock_pkt pkt;
	const char *why = NULL;

	(void)state;
	h.op = VSOCK_OP_REQUEST;
	h.type = 3;
	assert_int_equal(parse(&h, 0, NULL, 1, &pkt, &why), VSOCK_PKT_RST);
	assert_non_null(why);
	/* The header is there for the RST reply. */
	assert_int_equal(pkt.hdr.src_port, 1234);
	h.type = 0xffff;
	assert_int_equal(parse(&h, 0, NULL, 1, &pkt, &why), VSOCK_PKT_RST);
	h.type = 0;
	assert_int_equal(parse(&h, 0, NULL, 1, &pkt, &why), VSOCK_PKT_RST);
	/* Seqpacket is unknown until negotiated. */
	h.type = VSOCK_TYPE_SEQPACKET;
	assert_int_equal(parse(&h, 0, NULL, 1, &pkt, &why), VSOCK_PKT_RST);
	assert_int_equal(vsock_pkt_parse_tx(&chain, GUEST_CID,
					    VSOCK_MAX_PKT_PAYLOAD,
					    VSOCK_TYPES_ALL, &pkt, &why),
			 VSOCK_PKT_OK);
	/* An RST is never answered with an RST. */
	h.type = 3;
	h.op = VSOCK_OP_RST;
	assert_int_equal(parse(&h, 0, NULL, 1, &pkt, &why), VSOCK_PKT_DROP);
}

/* An answer to a seqpacket packet is a seqpacket packet: Linux resets
 * the flow only when the RST's type is the socket's. */
static void test_seqpacket_reply(void **state)
{
	struct vsock_hdr h = hdr_rw(0), r;

	(void)state;
	h.type = VSOCK_TYPE_SEQPACKET;
	h.op = VSOCK_OP_REQUEST;
	vsock_hdr_reply(&h, VSOCK_OP_RST, &r);
	assert_int_equal(r.type, VSOCK_TYPE_SEQPACKET);
	assert_int_equal(r.op, VSOCK_OP_RST);
	assert_int_equal(r.flags, 0);
}

static void test_bad_op(void **state)
{
	struct vsock_hdr h = hdr_rw(0);
	struct vsock_pkt pkt;
	const char *why = NULL;

	(void)state;
	h.op = VSOCK_OP_INVALID;
	assert_int_equal(parse(&h, 0, NULL, 1, &pkt, &why), VSOCK_PKT_RST);
	assert_non_null(why);
	h.op = 8;
	assert_int_equal(parse(&h, 0, NULL, 1, &pkt, &why), VSOCK_PKT_RST);
	h.op = 0xffff;
	assert_int_equal(parse(&h, 0, NULL, 1, &pkt, &why), VSOCK_PKT_RST);
	for (h.op = VSOCK_OP_REQUEST; h.op <= VSOCK_OP_MAX; h.op++)
		assert_int_equal(parse(&h, 0, NULL, 1, &pkt, &why),
				 VSOCK_PKT_OK);
}

static void test_len_beyond_buffer(void **state)
{
	static const size_t seg[] = { 44, 5 };
	struct vsock_hdr h = hdr_rw(11);
	struct vsock_pkt pkt;
	const char *why = NULL;

	(void)state;
	assert_int_equal(parse(&h, 10, seg, 3, &pkt, &why), VSOCK_PKT_RST);
	assert_non_null(why);
	h.len = 10;
	assert_int_equal(parse(&h, 10, seg, 3, &pkt, &why), VSOCK_PKT_OK);
	/* Header only, len claims a payload. */
	h.len = 1;
	assert_int_equal(parse(&h, 0, NULL, 1, &pkt, &why), VSOCK_PKT_RST);
	h.len = 0xffffffff;
	assert_int_equal(parse(&h, 0, NULL, 1, &pkt, &why), VSOCK_PKT_RST);
}

static void test_len_above_max(void **state)
{
	struct vsock_hdr h = hdr_rw(33);
	struct vsock_pkt pkt;
	const char *why = NULL;
	size_t total = put_pkt(&h, 100);

	(void)state;
	build(&chain, buf, total, NULL, 1, false);
	/* The buffer holds it, the configured maximum does not. */
	assert_int_equal(vsock_pkt_parse_tx(&chain, GUEST_CID, 32,
					    VSOCK_TYPES_STREAM, &pkt, &why),
			 VSOCK_PKT_RST);
	assert_non_null(why);
	assert_int_equal(vsock_pkt_parse_tx(&chain, GUEST_CID, 33,
					    VSOCK_TYPES_STREAM, &pkt, &why),
			 VSOCK_PKT_OK);
	/* Past 64 KiB is refused before the buffer is even looked at. */
	h.len = VSOCK_MAX_PKT_PAYLOAD + 1;
	total = put_pkt(&h, 0);
	build(&chain, buf, total, NULL, 1, false);
	chain.out_len = total + VSOCK_MAX_PKT_PAYLOAD + 1; /* never read */
	assert_int_equal(vsock_pkt_parse_tx(&chain, GUEST_CID,
					    VSOCK_MAX_PKT_PAYLOAD,
					    VSOCK_TYPES_STREAM, &pkt, &why),
			 VSOCK_PKT_RST);
}

static void test_len_on_control_op(void **state)
{
	static const uint16_t ops[] = {
		VSOCK_OP_REQUEST, VSOCK_OP_RESPONSE, VSOCK_OP_SHUTDOWN,
		VSOCK_OP_CREDIT_UPDATE, VSOCK_OP_CREDIT_REQUEST,
	};
	struct vsock_hdr h = hdr_rw(4);
	struct vsock_pkt pkt;
	const char *why = NULL;
	unsigned i;

	(void)state;
	for (i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
		h.op = ops[i];
		assert_int_equal(parse(&h, 4, NULL, 1, &pkt, &why),
				 VSOCK_PKT_RST);
		assert_non_null(why);
	}
	h.op = VSOCK_OP_RST;
	assert_int_equal(parse(&h, 4, NULL, 1, &pkt, &why), VSOCK_PKT_DROP);
	/* A zero-length RW is fine (an empty seqpacket message is one). */
	h = hdr_rw(0);
	assert_int_equal(parse(&h, 0, NULL, 1, &pkt, &why), VSOCK_PKT_OK);
	assert_int_equal(pkt.payload_len, 0);
}

static void test_short_chain(void **state)
{
	static const size_t seg[] = { 20, 3 };
	struct vsock_hdr h = hdr_rw(0);
	struct vsock_pkt pkt;
	const char *why = NULL;

	(void)state;
	put_pkt(&h, 0);
	build(&chain, buf, VSOCK_HDR_SIZE - 1, seg, 3, false);
	assert_int_equal(vsock_pkt_parse_tx(&chain, GUEST_CID,
					    VSOCK_MAX_PKT_PAYLOAD,
					    VSOCK_TYPES_STREAM, &pkt, &why),
			 VSOCK_PKT_DROP);
	assert_non_null(why);
	/* Empty chain; and one whose 44 bytes are writable, not readable. */
	memset(&chain, 0, sizeof(chain));
	assert_int_equal(vsock_pkt_parse_tx(&chain, GUEST_CID,
					    VSOCK_MAX_PKT_PAYLOAD,
					    VSOCK_TYPES_STREAM, &pkt, NULL),
			 VSOCK_PKT_DROP);
	build(&chain, buf, VSOCK_HDR_SIZE, NULL, 1, true);
	assert_int_equal(vsock_pkt_parse_tx(&chain, GUEST_CID,
					    VSOCK_MAX_PKT_PAYLOAD,
					    VSOCK_TYPES_STREAM, &pkt, &why),
			 VSOCK_PKT_DROP);
	/* out_len claiming more than the iovecs hold is not trusted. */
	build(&chain, buf, 40, NULL, 1, false);
	chain.out_len = 44;
	assert_int_equal(vsock_pkt_parse_tx(&chain, GUEST_CID,
					    VSOCK_MAX_PKT_PAYLOAD,
					    VSOCK_TYPES_STREAM, &pkt, &why),
			 VSOCK_PKT_DROP);
}

static void test_flags(void **state)
{
	struct vsock_hdr h = hdr_rw(0);
	struct vsock_pkt pkt;
	const char *why = NULL;

	(void)state;
	h.op = VSOCK_OP_SHUTDOWN;
	h.flags = VSOCK_SHUTDOWN_RCV | VSOCK_SHUTDOWN_SEND | 0x80;
	assert_int_equal(parse(&h, 0, NULL, 1, &pkt, &why), VSOCK_PKT_OK);
	assert_int_equal(pkt.hdr.flags, VSOCK_SHUTDOWN_MASK);
	assert_int_equal(pkt.ignored_flags, 0x80);
	h.flags = 0;
	assert_int_equal(parse(&h, 0, NULL, 1, &pkt, &why), VSOCK_PKT_OK);
	assert_int_equal(pkt.hdr.flags, 0);

	/* EOM means nothing on a stream. */
	h = hdr_rw(0);
	h.flags = VSOCK_SEQ_EOM;
	assert_int_equal(parse(&h, 0, NULL, 1, &pkt, &why), VSOCK_PKT_OK);
	assert_int_equal(pkt.hdr.flags, 0);
	assert_int_equal(pkt.ignored_flags, VSOCK_SEQ_EOM);

	/* ... and everything on a seqpacket RW. */
	h.type = VSOCK_TYPE_SEQPACKET;
	h.flags = VSOCK_SEQ_EOM | VSOCK_SEQ_EOR | 0x100;
	put_pkt(&h, 0);
	build(&chain, buf, VSOCK_HDR_SIZE, NULL, 1, false);
	assert_int_equal(vsock_pkt_parse_tx(&chain, GUEST_CID,
					    VSOCK_MAX_PKT_PAYLOAD,
					    VSOCK_TYPES_ALL, &pkt, &why),
			 VSOCK_PKT_OK);
	assert_int_equal(pkt.hdr.flags, VSOCK_SEQ_MASK);
	assert_int_equal(pkt.ignored_flags, 0x100);

	h = hdr_rw(0);
	h.op = VSOCK_OP_REQUEST;
	h.flags = 0xffffffff;
	assert_int_equal(parse(&h, 0, NULL, 1, &pkt, &why), VSOCK_PKT_OK);
	assert_int_equal(pkt.hdr.flags, 0);
}

static void test_round_trip(void **state)
{
	/* Write a header and a payload into a 3-way split rx chain, then
	 * read the same bytes back as a tx chain. */
	static const size_t seg[] = { 7, 40, 13 };
	static const char msg[] = "hello from the host side";
	struct vsock_hdr h = hdr_rw(sizeof(msg));
	struct vsock_pkt pkt;
	const char *why = "unset";
	char back[sizeof(msg)];
	size_t total = VSOCK_HDR_SIZE + sizeof(msg);

	(void)state;
	memset(buf, 0xee, sizeof(buf));
	build(&chain, buf, total, seg, 4, true);
	assert_int_equal(vsock_pkt_check_rx(&chain, &why), 0);
	assert_int_equal(vsock_pkt_rx_capacity(&chain, VSOCK_MAX_PKT_PAYLOAD),
			 sizeof(msg));
	assert_int_equal(vsock_pkt_write_hdr(&chain, &h), 0);
	assert_int_equal(vsock_pkt_write_payload(&chain, 0, msg, 5), 5);
	assert_int_equal(vsock_pkt_write_payload(&chain, 5, msg + 5,
						 sizeof(msg) - 5),
			 sizeof(msg) - 5);
	/* Nothing past the capacity. */
	assert_int_equal(vsock_pkt_write_payload(&chain, sizeof(msg), "x", 1),
			 0);

	build(&chain, buf, total, seg, 4, false);
	assert_int_equal(vsock_pkt_parse_tx(&chain, GUEST_CID,
					    VSOCK_MAX_PKT_PAYLOAD,
					    VSOCK_TYPES_STREAM, &pkt, &why),
			 VSOCK_PKT_OK);
	assert_hdr_equal(&pkt.hdr, &h);
	assert_int_equal(vmio_chain_read(&chain, pkt.payload_off, back,
					 pkt.payload_len),
			 sizeof(msg));
	assert_memory_equal(back, msg, sizeof(msg));
}

static void test_rx_shape(void **state)
{
	struct vsock_hdr h = hdr_rw(0);
	const char *why = NULL;

	(void)state;
	build(&chain, buf, 43, NULL, 1, true);
	assert_int_equal(vsock_pkt_check_rx(&chain, &why), -1);
	assert_non_null(why);
	assert_int_equal(vsock_pkt_rx_capacity(&chain, VSOCK_MAX_PKT_PAYLOAD),
			 0);
	assert_int_equal(vsock_pkt_write_hdr(&chain, &h), -1);

	/* Exactly a header: valid, no room for payload. */
	build(&chain, buf, 44, NULL, 1, true);
	assert_int_equal(vsock_pkt_check_rx(&chain, &why), 0);
	assert_int_equal(vsock_pkt_rx_capacity(&chain, VSOCK_MAX_PKT_PAYLOAD),
			 0);

	/* Capacity capped at the maximum payload. */
	build(&chain, buf, BUF_SIZE, NULL, 1, true);
	assert_int_equal(vsock_pkt_rx_capacity(&chain, 100), 100);
	assert_int_equal(vsock_pkt_rx_capacity(&chain, 1000),
			 BUF_SIZE - VSOCK_HDR_SIZE);

	/* A readable descriptor on the rx queue is a driver bug. */
	build(&chain, buf, BUF_SIZE, NULL, 1, true);
	chain.iov[1] = chain.iov[0];
	chain.iov[0].iov_len = 1;
	chain.nout = 1;
	chain.out_len = 1;
	why = NULL;
	assert_int_equal(vsock_pkt_check_rx(&chain, &why), -1);
	assert_non_null(why);
}

static void test_rx_slice(void **state)
{
	static const size_t seg[] = { 30, 30, 30 };
	struct iovec out[4];
	size_t covered = 0;
	unsigned n;

	(void)state;
	build(&chain, buf, 120, seg, 4, true);
	/* Payload area: bytes 44..120 of a chain cut at 30, 60, 90. */
	n = vmio_iov_slice(chain.iov + chain.nout, chain.nin, VSOCK_HDR_SIZE,
			    vsock_pkt_rx_capacity(&chain, 1000), out, 4,
			    &covered);
	assert_int_equal(n, 3);
	assert_int_equal(covered, 76);
	assert_ptr_equal(out[0].iov_base, buf + 44);
	assert_int_equal(out[0].iov_len, 16);
	assert_ptr_equal(out[1].iov_base, buf + 60);
	assert_int_equal(out[2].iov_len, 30);
	/* Too few output slots: short, and says so. */
	n = vmio_iov_slice(chain.iov, chain.nin, VSOCK_HDR_SIZE, 76, out, 2,
			    &covered);
	assert_int_equal(n, 2);
	assert_int_equal(covered, 46);
	/* Asking beyond the end. */
	n = vmio_iov_slice(chain.iov, chain.nin, 100, 1000, out, 4, &covered);
	assert_int_equal(n, 1);
	assert_int_equal(covered, 20);
	n = vmio_iov_slice(chain.iov, chain.nin, 500, 10, out, 4, &covered);
	assert_int_equal(n, 0);
	assert_int_equal(covered, 0);
}

static void test_reply(void **state)
{
	struct vsock_hdr h = hdr_rw(9), r;

	(void)state;
	h.flags = 3;
	vsock_hdr_reply(&h, VSOCK_OP_RST, &r);
	assert_int_equal(r.src_cid, VSOCK_HOST_CID);
	assert_int_equal(r.dst_cid, GUEST_CID);
	assert_int_equal(r.src_port, 5000);
	assert_int_equal(r.dst_port, 1234);
	assert_int_equal(r.type, VSOCK_TYPE_STREAM);
	assert_int_equal(r.op, VSOCK_OP_RST);
	assert_int_equal(r.len, 0);
	assert_int_equal(r.flags, 0);
	assert_int_equal(r.buf_alloc, 0);
	assert_int_equal(r.fwd_cnt, 0);
	/* In place. */
	vsock_hdr_reply(&h, VSOCK_OP_RESPONSE, &h);
	assert_int_equal(h.src_port, 5000);
	assert_int_equal(h.dst_port, 1234);
	assert_int_equal(h.dst_cid, GUEST_CID);
}

static void test_types_from_features(void **state)
{
	const uint64_t s = 1ull << VIRTIO_VSOCK_F_STREAM;
	const uint64_t q = 1ull << VIRTIO_VSOCK_F_SEQPACKET;
	const uint64_t n = 1ull << VIRTIO_VSOCK_F_NO_IMPLIED_STREAM;

	(void)state;
	assert_int_equal(vsock_types_from_features(0), VSOCK_TYPES_STREAM);
	assert_int_equal(vsock_types_from_features(s), VSOCK_TYPES_STREAM);
	assert_int_equal(vsock_types_from_features(q), VSOCK_TYPES_ALL);
	assert_int_equal(vsock_types_from_features(q | n),
			 VSOCK_TYPE_BIT(VSOCK_TYPE_SEQPACKET));
	assert_int_equal(vsock_types_from_features(s | q | n),
			 VSOCK_TYPES_ALL);
	assert_int_equal(vsock_types_from_features(s | n), VSOCK_TYPES_STREAM);
	assert_string_equal(vsock_op_name(VSOCK_OP_CREDIT_REQUEST),
			    "CREDIT_REQUEST");
	assert_string_equal(vsock_op_name(99), "unknown");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_wire_layout),
		cmocka_unit_test(test_header_one_iov),
		cmocka_unit_test(test_header_split_1_43),
		cmocka_unit_test(test_header_split_three),
		cmocka_unit_test(test_buffer_longer_than_len),
		cmocka_unit_test(test_spoofed_src_cid),
		cmocka_unit_test(test_bad_type),
		cmocka_unit_test(test_seqpacket_reply),
		cmocka_unit_test(test_bad_op),
		cmocka_unit_test(test_len_beyond_buffer),
		cmocka_unit_test(test_len_above_max),
		cmocka_unit_test(test_len_on_control_op),
		cmocka_unit_test(test_short_chain),
		cmocka_unit_test(test_flags),
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_rx_shape),
		cmocka_unit_test(test_rx_slice),
		cmocka_unit_test(test_reply),
		cmocka_unit_test(test_types_from_features),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
