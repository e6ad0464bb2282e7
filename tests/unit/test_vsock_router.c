/* The sibling router alone: packets handed to it as parsed tx chains,
 * taken out through rx chains of chosen sizes. Real muxers (never served:
 * no queues) stand for the VMs; only their attached flag and their
 * rx-kick eventfd are used. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "devices/vsock/muxer.h"
#include "devices/vsock/packet.h"
#include "devices/vsock/router.h"
#include "event/loop.h"

#define N 3 /* VMs 0 and 1 linked; 2 alone */

struct rig {
	struct vmio_loop *loop;
	struct vsock_muxer *m[N];
	struct vsock_router *r;
};

static const uint64_t cids[N] = { 3, 4, 5 };

static struct rig *rig_new(unsigned max_flows)
{
	struct rig *g = calloc(1, sizeof(*g));

	assert_non_null(g);
	g->loop = vmio_loop_new();
	g->r = vsock_router_new(N, max_flows);
	assert_non_null(g->loop);
	assert_non_null(g->r);
	for (unsigned i = 0; i < N; i++) {
		struct vsock_muxer_config c = {
			.guest_cid = cids[i],
			.uds_path = "/nonexistent/u",
			.buf_size = 4096,
			.max_conns = 4,
			.connect_timeout_ms = 1000,
			.router = g->r,
			.vm_index = i,
		};

		g->m[i] = vsock_muxer_new(g->loop, &c);
		assert_non_null(g->m[i]);
		vsock_muxer_set_attached(g->m[i], true);
		vsock_muxer_set_types(g->m[i], VSOCK_TYPES_ALL);
	}
	vsock_router_link(g->r, 0, 1);
	return g;
}

static void rig_free(struct rig *g)
{
	for (unsigned i = 0; i < N; i++)
		vsock_muxer_free(g->m[i]);
	vsock_router_free(g->r);
	vmio_loop_free(g->loop);
	free(g);
}

/* Hands the router a packet from VM `from`: header, then len bytes of
 * payload (byte k is k * 7 + seed). */
static int send_pkt(struct rig *g, unsigned from, unsigned to_cid_idx,
		    uint32_t sport, uint32_t dport, uint16_t op,
		    uint16_t type, uint32_t flags, uint32_t len,
		    const char **why)
{
	static uint8_t buf[VSOCK_HDR_SIZE + VSOCK_MAX_PKT_PAYLOAD];
	struct vmio_chain ch = { 0 };
	struct vsock_pkt pkt = {
		.hdr = {
			.src_cid = cids[from],
			.dst_cid = to_cid_idx < N ? cids[to_cid_idx] : 99,
			.src_port = sport,
			.dst_port = dport,
			.len = len,
			.type = type,
			.op = op,
			.flags = flags,
			.buf_alloc = 1234,
			.fwd_cnt = 56,
		},
		.payload_off = VSOCK_HDR_SIZE,
		.payload_len = len,
	};

	for (uint32_t k = 0; k < len; k++)
		buf[VSOCK_HDR_SIZE + k] = (uint8_t)(k * 7 + sport);
	vsock_hdr_encode(&pkt.hdr, buf);
	ch.nout = 1;
	ch.iov[0].iov_base = buf;
	ch.iov[0].iov_len = VSOCK_HDR_SIZE + len;
	ch.out_len = VSOCK_HDR_SIZE + len;
	return vsock_router_forward(g->r, from, &pkt, &ch, false, why);
}

/* Takes VM idx's next packet into an rx chain with room bytes of
 * payload. Returns the header; payload in *data. */
static struct vsock_hdr take(struct rig *g, unsigned idx, uint32_t room,
			     uint8_t *data)
{
	static uint8_t buf[VSOCK_HDR_SIZE + VSOCK_MAX_PKT_PAYLOAD];
	struct vmio_chain ch = { 0 };
	struct vsock_hdr h;
	uint32_t n;

	ch.nin = 1;
	ch.iov[0].iov_base = buf;
	ch.iov[0].iov_len = VSOCK_HDR_SIZE + room;
	ch.in_len = VSOCK_HDR_SIZE + room;
	assert_true(vsock_router_rx_pending(g->r, idx));
	n = vsock_router_fill_rx(g->r, idx, &ch);
	assert_true(n >= VSOCK_HDR_SIZE);
	vsock_hdr_decode(buf, &h);
	assert_int_equal(n, VSOCK_HDR_SIZE + h.len);
	if (data)
		memcpy(data, buf + VSOCK_HDR_SIZE, h.len);
	return h;
}

static void test_route_and_groups(void **state)
{
	struct rig *g = rig_new(8);
	const char *why = NULL;
	struct vsock_hdr h;

	/* Linked: forwarded unchanged. */
	assert_int_equal(send_pkt(g, 0, 1, 1000, 80, VSOCK_OP_REQUEST,
				  VSOCK_TYPE_STREAM, 0, 0, &why), 0);
	h = take(g, 1, 4096, NULL);
	assert_int_equal(h.src_cid, 3);
	assert_int_equal(h.dst_cid, 4);
	assert_int_equal(h.src_port, 1000);
	assert_int_equal(h.dst_port, 80);
	assert_int_equal(h.op, VSOCK_OP_REQUEST);
	assert_int_equal(h.buf_alloc, 1234);
	assert_int_equal(h.fwd_cnt, 56);
	assert_false(vsock_router_rx_pending(g->r, 1));
	assert_int_equal(vsock_router_flows(g->r, 0), 1);
	/* The answer comes back on the same flow. */
	assert_int_equal(send_pkt(g, 1, 0, 80, 1000, VSOCK_OP_RESPONSE,
				  VSOCK_TYPE_STREAM, 0, 0, &why), 0);
	assert_int_equal(take(g, 0, 4096, NULL).op, VSOCK_OP_RESPONSE);

	/* Not linked, unknown CID, to itself, unknown flow: refused. */
	assert_int_equal(send_pkt(g, 0, 2, 1001, 80, VSOCK_OP_REQUEST,
				  VSOCK_TYPE_STREAM, 0, 0, &why), -1);
	assert_non_null(strstr(why, "group"));
	assert_int_equal(send_pkt(g, 2, 0, 1001, 80, VSOCK_OP_REQUEST,
				  VSOCK_TYPE_STREAM, 0, 0, &why), -1);
	assert_int_equal(send_pkt(g, 0, N, 1001, 80, VSOCK_OP_REQUEST,
				  VSOCK_TYPE_STREAM, 0, 0, &why), -1);
	assert_non_null(strstr(why, "CID"));
	assert_int_equal(send_pkt(g, 0, 0, 1001, 80, VSOCK_OP_REQUEST,
				  VSOCK_TYPE_STREAM, 0, 0, &why), -1);
	assert_int_equal(send_pkt(g, 0, 1, 1001, 80, VSOCK_OP_RW,
				  VSOCK_TYPE_STREAM, 0, 10, &why), -1);
	assert_non_null(strstr(why, "no such"));
	assert_false(vsock_router_rx_pending(g->r, 2));
	assert_false(vsock_router_rx_pending(g->r, 1));

	/* No VMM on the other side. */
	vsock_muxer_set_attached(g->m[1], false);
	assert_int_equal(send_pkt(g, 0, 1, 1002, 80, VSOCK_OP_REQUEST,
				  VSOCK_TYPE_STREAM, 0, 0, &why), -1);
	assert_non_null(strstr(why, "VMM"));

	/* A socket type the other driver did not negotiate. */
	vsock_muxer_set_attached(g->m[1], true);
	vsock_muxer_set_types(g->m[1], VSOCK_TYPES_STREAM);
	assert_int_equal(send_pkt(g, 0, 1, 1003, 80, VSOCK_OP_REQUEST,
				  VSOCK_TYPE_SEQPACKET, 0, 0, &why), -1);
	assert_non_null(strstr(why, "socket type"));

	/* A packet of another type than its flow's: refused, and the flow
	 * reset on the other side too (with the flow's type), not forwarded
	 * to a driver that may not take that type. */
	assert_int_equal(send_pkt(g, 0, 1, 1004, 80, VSOCK_OP_REQUEST,
				  VSOCK_TYPE_STREAM, 0, 0, &why), 0);
	assert_int_equal(take(g, 1, 4096, NULL).op, VSOCK_OP_REQUEST);
	assert_int_equal(send_pkt(g, 0, 1, 1004, 80, VSOCK_OP_RW,
				  VSOCK_TYPE_SEQPACKET, VSOCK_SEQ_EOM, 3, &why),
			 -1);
	assert_non_null(strstr(why, "type"));
	h = take(g, 1, 4096, NULL);
	assert_int_equal(h.op, VSOCK_OP_RST);
	assert_int_equal(h.type, VSOCK_TYPE_STREAM);
	assert_int_equal(h.src_port, 1004);
	assert_false(vsock_router_rx_pending(g->r, 1));
	assert_int_equal(vsock_router_flows(g->r, 0), 1);

	/* An RST ends the flow. */
	assert_int_equal(send_pkt(g, 0, 1, 1000, 80, VSOCK_OP_RST,
				  VSOCK_TYPE_STREAM, 0, 0, &why), 0);
	assert_int_equal(take(g, 1, 4096, NULL).op, VSOCK_OP_RST);
	assert_int_equal(vsock_router_flows(g->r, 0), 0);
	/* A second RST on the flow it ended (Linux sends one as it closes):
	 * dropped quietly, nothing forwarded, no RST back. */
	assert_int_equal(send_pkt(g, 1, 0, 80, 1000, VSOCK_OP_RST,
				  VSOCK_TYPE_STREAM, 0, 0, &why), 0);
	assert_false(vsock_router_rx_pending(g->r, 0));
	rig_free(g);
}

static void test_split_to_rx_buffers(void **state)
{
	struct rig *g = rig_new(8);
	static uint8_t got[3][4096];
	const char *why;
	struct vsock_hdr h;

	assert_int_equal(send_pkt(g, 0, 1, 7, 9, VSOCK_OP_REQUEST,
				  VSOCK_TYPE_SEQPACKET, 0, 0, &why), 0);
	take(g, 1, 4096, NULL);
	assert_int_equal(send_pkt(g, 0, 1, 7, 9, VSOCK_OP_RW,
				  VSOCK_TYPE_SEQPACKET,
				  VSOCK_SEQ_EOM | VSOCK_SEQ_EOR, 10000, &why),
			 0);
	for (unsigned i = 0; i < 3; i++) {
		h = take(g, 1, 4096, got[i]);
		assert_int_equal(h.len, i < 2 ? 4096 : 10000 - 8192);
		/* The message ends with its last piece only. */
		assert_int_equal(h.flags, i < 2 ? 0 : VSOCK_SEQ_MASK);
		for (uint32_t k = 0; k < h.len; k++)
			assert_int_equal(got[i][k],
					 (uint8_t)((i * 4096 + k) * 7 + 7));
	}
	assert_false(vsock_router_rx_pending(g->r, 1));
	/* A data packet cannot go into a buffer with no room for data. */
	assert_int_equal(send_pkt(g, 0, 1, 7, 9, VSOCK_OP_RW,
				  VSOCK_TYPE_SEQPACKET, 0, 1, &why), 0);
	{
		uint8_t hdr_only[VSOCK_HDR_SIZE];
		struct vmio_chain ch = { .nin = 1, .in_len = sizeof(hdr_only) };

		ch.iov[0].iov_base = hdr_only;
		ch.iov[0].iov_len = sizeof(hdr_only);
		assert_int_equal(vsock_router_fill_rx(g->r, 1, &ch), 0);
	}
	assert_int_equal(take(g, 1, 4096, NULL).len, 1);
	rig_free(g);
}

/* A receiver that takes nothing: the sender's packets queue up to the
 * pair's bound, then the connection is reset on both sides, and the
 * pair's share is given back as the receiver drains. */
static void test_pair_bound(void **state)
{
	struct rig *g = rig_new(8);
	const char *why = NULL;
	unsigned sent = 0, i;
	struct vsock_hdr h;

	assert_int_equal(send_pkt(g, 0, 1, 1, 2, VSOCK_OP_REQUEST,
				  VSOCK_TYPE_STREAM, 0, 0, &why), 0);
	while (send_pkt(g, 0, 1, 1, 2, VSOCK_OP_RW, VSOCK_TYPE_STREAM, 0,
			VSOCK_MAX_PKT_PAYLOAD, &why) == 0)
		sent++;
	assert_int_equal(sent, VSOCK_ROUTER_PAIR_BYTES / VSOCK_MAX_PKT_PAYLOAD);
	assert_non_null(strstr(why, "not taking"));
	assert_int_equal(vsock_router_flows(g->r, 0), 0);
	/* Another sender's share is its own. */
	vsock_router_link(g->r, 2, 1);
	assert_int_equal(send_pkt(g, 2, 1, 5, 6, VSOCK_OP_REQUEST,
				  VSOCK_TYPE_STREAM, 0, 0, &why), 0);
	/* The senders take turns: the flood's first packet, the other
	 * sender's, then the rest of the flood and its RST. */
	assert_int_equal(take(g, 1, 4096, NULL).src_cid, 3);
	assert_int_equal(take(g, 1, 4096, NULL).src_cid, 5);
	for (i = 0; i < sent; i++) {
		h = take(g, 1, VSOCK_MAX_PKT_PAYLOAD, NULL);
		assert_int_equal(h.op, VSOCK_OP_RW);
	}
	h = take(g, 1, 4096, NULL);
	assert_int_equal(h.op, VSOCK_OP_RST);
	assert_int_equal(h.src_port, 1);
	assert_false(vsock_router_rx_pending(g->r, 1));
	/* And the first pair may queue again. */
	assert_int_equal(send_pkt(g, 0, 1, 1, 3, VSOCK_OP_REQUEST,
				  VSOCK_TYPE_STREAM, 0, 0, &why), 0);
	rig_free(g);
}

static void test_flow_limit_and_vm_reset(void **state)
{
	struct rig *g = rig_new(2);
	const char *why = NULL;
	struct vsock_hdr h;

	assert_int_equal(send_pkt(g, 0, 1, 1, 80, VSOCK_OP_REQUEST,
				  VSOCK_TYPE_STREAM, 0, 0, &why), 0);
	assert_int_equal(send_pkt(g, 1, 0, 2, 81, VSOCK_OP_REQUEST,
				  VSOCK_TYPE_STREAM, 0, 0, &why), 0);
	assert_int_equal(send_pkt(g, 0, 1, 3, 80, VSOCK_OP_REQUEST,
				  VSOCK_TYPE_STREAM, 0, 0, &why), 0);
	assert_int_equal(send_pkt(g, 0, 1, 4, 80, VSOCK_OP_REQUEST,
				  VSOCK_TYPE_STREAM, 0, 0, &why), -1);
	assert_non_null(strstr(why, "too many"));
	assert_int_equal(vsock_router_flows(g->r, 0), 2);
	assert_int_equal(vsock_router_flows(g->r, 1), 1);
	/* VM 1 goes: VM 0 hears an RST for each of the three flows after
	 * what it had queued (the REQUEST from VM 1). */
	vsock_muxer_reset(g->m[1]);
	assert_false(vsock_router_rx_pending(g->r, 1));
	assert_int_equal(vsock_router_flows(g->r, 0), 0);
	assert_int_equal(vsock_router_flows(g->r, 1), 0);
	assert_int_equal(take(g, 0, 4096, NULL).op, VSOCK_OP_REQUEST);
	for (unsigned i = 0; i < 3; i++) {
		h = take(g, 0, 4096, NULL);
		assert_int_equal(h.op, VSOCK_OP_RST);
		assert_int_equal(h.src_cid, 4);
		assert_int_equal(h.dst_cid, 3);
	}
	assert_false(vsock_router_rx_pending(g->r, 0));
	rig_free(g);
}

/* ---- VMs on worker threads ---- */

#define TVMS 4
#define TROUNDS 20000

/* One VM on a thread of its own, with a loop of its own (so that the
 * router's wake-ups cross threads), sending to the next VM and taking
 * what the others send, and now and then losing its VMM. Each payload
 * byte says where it came from, so that a packet torn or mixed between
 * senders is seen. */
struct tvm {
	struct vsock_router *r;
	struct vmio_loop *loop;
	struct vsock_muxer *m;
	unsigned idx;
	pthread_t t;
	unsigned sent, got, resets, bad;
};

static const uint64_t tcids[TVMS] = { 3, 4, 5, 6 };

static bool tsend(struct tvm *v, uint32_t sport, uint16_t op, uint32_t len)
{
	static __thread uint8_t buf[VSOCK_HDR_SIZE + 512];
	struct vmio_chain ch = { 0 };
	struct vsock_pkt pkt = {
		.hdr = {
			.src_cid = tcids[v->idx],
			.dst_cid = tcids[(v->idx + 1) % TVMS],
			.src_port = sport,
			.dst_port = 80,
			.len = len,
			.type = VSOCK_TYPE_STREAM,
			.op = op,
			.buf_alloc = 65536,
		},
		.payload_off = VSOCK_HDR_SIZE,
		.payload_len = len,
	};
	const char *why;

	for (uint32_t k = 0; k < len; k++)
		buf[VSOCK_HDR_SIZE + k] = (uint8_t)(v->idx * 16 + sport % 16);
	vsock_hdr_encode(&pkt.hdr, buf);
	ch.nout = 1;
	ch.iov[0].iov_base = buf;
	ch.iov[0].iov_len = VSOCK_HDR_SIZE + len;
	ch.out_len = VSOCK_HDR_SIZE + len;
	return vsock_router_forward(v->r, v->idx, &pkt, &ch, false, &why) == 0;
}

/* Takes everything waiting for this VM, checking each packet. */
static void tdrain(struct tvm *v)
{
	static __thread uint8_t buf[VSOCK_HDR_SIZE + 512];
	struct vmio_chain ch = { 0 };

	ch.nin = 1;
	ch.iov[0].iov_base = buf;
	ch.iov[0].iov_len = sizeof(buf);
	ch.in_len = sizeof(buf);
	while (vsock_router_rx_pending(v->r, v->idx)) {
		struct vsock_hdr h;
		uint32_t n = vsock_router_fill_rx(v->r, v->idx, &ch);
		unsigned from;

		vsock_hdr_decode(buf, &h);
		from = (unsigned)(h.src_cid - tcids[0]);
		if (n != VSOCK_HDR_SIZE + h.len || from >= TVMS ||
		    h.dst_cid != tcids[v->idx])
			v->bad++;
		for (uint32_t k = 0; k < h.len; k++)
			if (buf[VSOCK_HDR_SIZE + k] !=
			    (uint8_t)(from * 16 + h.src_port % 16))
				v->bad++;
		v->got++;
	}
}

static void *tvm_main(void *arg)
{
	struct tvm *v = arg;

	for (unsigned round = 0; round < TROUNDS; round++) {
		uint32_t sport = 1000 + round % 8;

		/* A flow's packets; a refused one (the peer just reset, or
		 * its queue is full) ends that flow as a guest would. */
		if (!tsend(v, sport, VSOCK_OP_REQUEST, 0) ||
		    !tsend(v, sport, VSOCK_OP_RW, 1 + round % 512) ||
		    !tsend(v, sport, VSOCK_OP_RW, 300))
			tsend(v, sport, VSOCK_OP_RST, 0);
		else
			v->sent += 2;
		tsend(v, sport, VSOCK_OP_RST, 0);
		/* The wake-ups others posted to this loop. */
		vmio_loop_run_once(v->loop, 0);
		tdrain(v);
		if (round % 97 == v->idx) {
			vsock_muxer_reset(v->m);
			vsock_muxer_set_types(v->m, VSOCK_TYPES_ALL);
			v->resets++;
		}
	}
	return NULL;
}

static void test_vms_on_threads(void **state)
{
	struct vsock_router *r = vsock_router_new(TVMS, 16);
	struct tvm v[TVMS];
	unsigned got = 0, bad = 0;

	assert_non_null(r);
	for (unsigned i = 0; i < TVMS; i++) {
		struct vsock_muxer_config c = {
			.guest_cid = tcids[i],
			.uds_path = "/nonexistent/u",
			.buf_size = 4096,
			.max_conns = 4,
			.connect_timeout_ms = 1000,
			.router = r,
			.vm_index = i,
		};

		v[i] = (struct tvm){ .r = r, .idx = i };
		v[i].loop = vmio_loop_new();
		assert_non_null(v[i].loop);
		v[i].m = vsock_muxer_new(v[i].loop, &c);
		assert_non_null(v[i].m);
		vsock_muxer_set_attached(v[i].m, true);
		vsock_muxer_set_types(v[i].m, VSOCK_TYPES_ALL);
		for (unsigned j = 0; j < i; j++)
			vsock_router_link(r, i, j);
	}
	for (unsigned i = 0; i < TVMS; i++)
		assert_int_equal(pthread_create(&v[i].t, NULL, tvm_main, &v[i]),
				 0);
	for (unsigned i = 0; i < TVMS; i++)
		assert_int_equal(pthread_join(v[i].t, NULL), 0);
	for (unsigned i = 0; i < TVMS; i++) {
		vmio_loop_run_once(v[i].loop, 0);
		tdrain(&v[i]);
		got += v[i].got;
		bad += v[i].bad;
		assert_int_equal(vsock_router_flows(r, i), 0);
		print_message("# VM %u: %u data packets sent, %u packets "
			      "taken, %u resets\n",
			      i, v[i].sent, v[i].got, v[i].resets);
	}
	assert_int_equal(bad, 0);
	assert_true(got > TVMS * TROUNDS);
	for (unsigned i = 0; i < TVMS; i++) {
		vsock_muxer_free(v[i].m);
		vmio_loop_free(v[i].loop);
	}
	vsock_router_free(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_route_and_groups),
		cmocka_unit_test(test_split_to_rx_buffers),
		cmocka_unit_test(test_pair_bound),
		cmocka_unit_test(test_flow_limit_and_vm_reset),
		cmocka_unit_test(test_vms_on_threads),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
