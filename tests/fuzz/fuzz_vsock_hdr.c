/* Fuzzes the vsock tx packet parser and the credit arithmetic: the guest
 * controls every byte of a tx chain and how it is cut into descriptors.
 *
 * Input: a PREFIX-byte layout header (missing bytes read as zero), then the
 * bytes of the chain's readable part.
 *   [0]      iovecs = 1 + [0] % MAX_SEG
 *   [1..7]   lengths of all iovecs but the last (which takes the rest)
 *   [8]      bit 0: seqpacket negotiated; bit 1: max payload 1 + [9] * 4
 *            instead of 64 KiB; bit 2: threshold from [9]
 *   [9]      see [8]
 *   [10..13] starting value of our credit counters (LE), to cross 2^32
 * Each iovec is its own heap block, so ASan catches a read past any of
 * them, not only past the whole chain.
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "devices/vsock/credit.h"
#include "devices/vsock/packet.h"
#include "fuzz.h"
#include "util/iov.h"
#include "virtio/virtqueue.h"

#define PREFIX 14u
#define MAX_SEG 8u
#define GUEST_CID 3u

/* A chain is 16 KiB of iovecs: one for reading, one for writing. */
static struct vmio_chain tx, rx;

static void free_segs(struct vmio_chain *c, unsigned n)
{
	unsigned i;

	for (i = 0; i < n; i++)
		free(c->iov[i].iov_base);
}

/* Cuts data[0..len) into n heap blocks as the layout says. */
static void cut(struct vmio_chain *c, const uint8_t *data, size_t len,
		const uint8_t *lay, unsigned n, bool writable)
{
	size_t off = 0;
	unsigned i;

	memset(c, 0, sizeof(*c));
	for (i = 0; i < n; i++) {
		size_t seg = i + 1 == n ? len - off : lay[i];

		if (seg > len - off)
			seg = len - off;
		/* +1 keeps malloc(0) from returning NULL; iov_len stays
		 * exact, so the spare byte is never legitimately read. */
		c->iov[i].iov_base = malloc(seg + 1);
		assert(c->iov[i].iov_base);
		if (data)
			memcpy(c->iov[i].iov_base, data + off, seg);
		c->iov[i].iov_len = seg;
		off += seg;
	}
	if (writable) {
		c->nin = n;
		c->in_len = len;
	} else {
		c->nout = n;
		c->out_len = len;
	}
}

static uint32_t meaningful(const struct vsock_hdr *h)
{
	if (h->op == VSOCK_OP_SHUTDOWN)
		return VSOCK_SHUTDOWN_MASK;
	if (h->op == VSOCK_OP_RW && h->type == VSOCK_TYPE_SEQPACKET)
		return VSOCK_SEQ_MASK;
	return 0;
}

/* The payload slices must lie inside the iovecs and add up to len. */
static void check_payload(const struct vsock_pkt *pkt, const uint8_t *body)
{
	struct iovec out[MAX_SEG];
	size_t covered = 0, at = 0;
	unsigned n, i, j;

	n = vmio_iov_slice(tx.iov, tx.nout, pkt->payload_off,
			    pkt->payload_len, out, MAX_SEG, &covered);
	assert(covered == pkt->payload_len);
	for (i = 0; i < n; i++) {
		bool inside = false;

		for (j = 0; j < tx.nout; j++) {
			const uint8_t *b = tx.iov[j].iov_base;
			const uint8_t *p = out[i].iov_base;

			const uint8_t *e = b + tx.iov[j].iov_len;

			if (p >= b && p + out[i].iov_len <= e)
				inside = true;
		}
		assert(inside);
		assert(memcmp(out[i].iov_base, body + pkt->payload_off + at,
			      out[i].iov_len) == 0);
		at += out[i].iov_len;
	}
}

static void check_ok(const struct vsock_pkt *pkt, const uint8_t *body,
		     uint32_t max_payload, unsigned types)
{
	const struct vsock_hdr *h = &pkt->hdr;
	struct vsock_hdr raw = *h;
	uint8_t wire[VSOCK_HDR_SIZE];

	assert(h->src_cid == GUEST_CID);
	assert(h->type < 32 && (types & (1u << h->type)));
	assert(h->op >= VSOCK_OP_REQUEST && h->op <= VSOCK_OP_MAX);
	assert(h->len <= max_payload);
	assert(pkt->payload_off == VSOCK_HDR_SIZE);
	assert(pkt->payload_len == h->len);
	assert((uint64_t)VSOCK_HDR_SIZE + h->len <= tx.out_len);
	assert(h->op == VSOCK_OP_RW || h->len == 0);
	assert((h->flags & ~meaningful(h)) == 0);
	assert((pkt->ignored_flags & meaningful(h)) == 0);

	/* Nothing but the flags was altered on the way in. */
	raw.flags |= pkt->ignored_flags;
	vsock_hdr_encode(&raw, wire);
	assert(memcmp(wire, body, VSOCK_HDR_SIZE) == 0);
	check_payload(pkt, body);
}

/* Field by field: the struct has tail padding. */
static bool same_hdr(const struct vsock_hdr *a, const struct vsock_hdr *b)
{
	return a->src_cid == b->src_cid && a->dst_cid == b->dst_cid &&
	       a->src_port == b->src_port && a->dst_port == b->dst_port &&
	       a->len == b->len && a->type == b->type && a->op == b->op &&
	       a->flags == b->flags && a->buf_alloc == b->buf_alloc &&
	       a->fwd_cnt == b->fwd_cnt;
}

/* Writes the header into an rx chain cut like the tx chain and reads it
 * back through a readable chain over the same blocks. */
static void round_trip(const struct vsock_hdr *h, size_t len,
		       const uint8_t *lay, unsigned n)
{
	const char *why = NULL;
	struct vsock_pkt back;
	enum vsock_verdict v;

	cut(&rx, NULL, len, lay, n, true);
	if (vsock_pkt_check_rx(&rx, &why) == 0) {
		assert(vsock_pkt_rx_capacity(&rx, VSOCK_MAX_PKT_PAYLOAD) ==
		       (len - VSOCK_HDR_SIZE < VSOCK_MAX_PKT_PAYLOAD
				? len - VSOCK_HDR_SIZE
				: VSOCK_MAX_PKT_PAYLOAD));
		uint8_t wire[VSOCK_HDR_SIZE];
		struct vsock_hdr dec;

		assert(vsock_pkt_write_hdr(&rx, h) == 0);
		rx.nout = rx.nin;
		rx.out_len = rx.in_len;
		rx.nin = 0;
		rx.in_len = 0;
		assert(vmio_chain_read(&rx, 0, wire, sizeof(wire)) ==
		       sizeof(wire));
		vsock_hdr_decode(wire, &dec);
		assert(same_hdr(&dec, h));
		v = vsock_pkt_parse_tx(&rx, GUEST_CID, VSOCK_MAX_PKT_PAYLOAD,
				       VSOCK_TYPES_ALL, &back, &why);
		if (v != VSOCK_PKT_DROP) {
			assert(back.hdr.src_port == h->src_port);
			assert(back.hdr.fwd_cnt == h->fwd_cnt);
		}
		n = rx.nout;
	} else {
		assert(why);
		assert(vsock_pkt_write_hdr(&rx, h) == -1);
		assert(vsock_pkt_rx_capacity(&rx, VSOCK_MAX_PKT_PAYLOAD) == 0);
	}
	free_segs(&rx, n);
}

/* Drives one connection's credit with the guest's numbers. */
static void credit(const struct vsock_hdr *h, uint32_t start, uint8_t opt,
		   uint8_t arg)
{
	struct vsock_credit c, before;
	uint32_t free_now, flight, send, ba = 0, fc = 0;
	int rc;

	vsock_credit_init(&c, 65536, (opt & 4) ? arg * 512u : 0);
	c.rx_cnt = c.fwd_cnt = c.adv_fwd_cnt = start;
	vsock_credit_peer_init(&c, h->buf_alloc, start - h->src_port);

	free_now = vsock_credit_peer_free(&c);
	assert(free_now <= VSOCK_CREDIT_PEER_BUF_MAX);
	send = h->dst_port < free_now ? h->dst_port : free_now;
	assert(vsock_credit_sent(&c, send));
	flight = vsock_credit_in_flight(&c);
	assert(flight == send);

	before = c;
	rc = vsock_credit_peer_update(&c, h->buf_alloc ^ h->flags, h->fwd_cnt);
	if (rc == 0) {
		assert(vsock_credit_in_flight(&c) <= flight);
		assert(vsock_credit_peer_free(&c) <= VSOCK_CREDIT_PEER_BUF_MAX);
	} else {
		assert(c.peer_fwd_cnt == before.peer_fwd_cnt &&
		       c.peer_buf_alloc == before.peer_buf_alloc &&
		       c.tx_cnt == before.tx_cnt &&
		       c.requested == before.requested);
	}

	/* Our receive side: the guest sends len, we drain part of it. */
	rc = vsock_credit_rx(&c, h->len);
	assert(vsock_credit_rx_pending(&c) <= c.buf_alloc);
	if (rc == 0)
		assert(vsock_credit_consumed(&c, h->len % (h->len / 2 + 1)));
	rc = vsock_credit_rx(&c, h->dst_port);
	assert(vsock_credit_rx_pending(&c) <= c.buf_alloc);
	assert(vsock_credit_guest_view(&c) <= c.buf_alloc);
	if (vsock_credit_update_needed(&c)) {
		assert(c.fwd_cnt != c.adv_fwd_cnt);
		vsock_credit_advertise(&c, &ba, &fc);
		assert(ba == c.buf_alloc && fc == c.fwd_cnt);
		assert(!vsock_credit_update_needed(&c));
	}
	if (vsock_credit_request_needed(&c)) {
		vsock_credit_mark_requested(&c);
		assert(!vsock_credit_request_needed(&c));
	}
	(void)rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t pre[PREFIX] = { 0 };
	const uint8_t *body = data + (size < PREFIX ? size : PREFIX);
	size_t len = size < PREFIX ? 0 : size - PREFIX;
	unsigned n, types;
	uint32_t max_payload, start;
	struct vsock_pkt pkt;
	const char *why = NULL;
	enum vsock_verdict v;

	memcpy(pre, data, size < PREFIX ? size : PREFIX);
	n = 1 + pre[0] % MAX_SEG;
	types = (pre[8] & 1) ? VSOCK_TYPES_ALL : VSOCK_TYPES_STREAM;
	max_payload = (pre[8] & 2) ? 1u + pre[9] * 4u : VSOCK_MAX_PKT_PAYLOAD;
	start = (uint32_t)pre[10] | (uint32_t)pre[11] << 8 |
		(uint32_t)pre[12] << 16 | (uint32_t)pre[13] << 24;

	cut(&tx, body, len, pre + 1, n, false);
	v = vsock_pkt_parse_tx(&tx, GUEST_CID, max_payload, types, &pkt, &why);
	switch (v) {
	case VSOCK_PKT_OK:
		assert(!why);
		check_ok(&pkt, body, max_payload, types);
		break;
	case VSOCK_PKT_RST:
		assert(why);
		assert(pkt.hdr.op != VSOCK_OP_RST);
		assert(pkt.hdr.src_cid == GUEST_CID);
		break;
	case VSOCK_PKT_DROP:
		assert(why);
		break;
	default:
		assert(!"unknown verdict");
	}
	(void)vsock_op_name(pkt.hdr.op);

	if (len >= VSOCK_HDR_SIZE) {
		credit(&pkt.hdr, start, pre[8], pre[9]);
		round_trip(&pkt.hdr, len, pre + 1, n);
	}
	free_segs(&tx, n);
	return 0;
}
