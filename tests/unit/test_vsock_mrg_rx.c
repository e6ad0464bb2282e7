/* Mergeable rx buffers alone: the view over several buffers with
 * num_buffers cut out, and what finish writes and reports, for buffers of
 * every size, the header straddling them included; and the plain layout
 * as the view of one buffer. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "devices/vsock/mrg_rx.h"

#define MAXB 8

struct bufs {
	uint8_t mem[MAXB][70000];
	struct vmio_chain c[MAXB];
	const struct vmio_chain *p[MAXB];
	unsigned n;
};

/* Buffers of the given sizes, each split into iovecs of at most step
 * bytes (0: one iovec), filled with 0xee. */
static void make(struct bufs *b, const uint32_t *sizes, unsigned n,
		 uint32_t step)
{
	b->n = n;
	for (unsigned i = 0; i < n; i++) {
		struct vmio_chain *c = &b->c[i];
		uint32_t off = 0;

		memset(b->mem[i], 0xee, sizes[i] + 16);
		*c = (struct vmio_chain){ .in_len = sizes[i] };
		while (off < sizes[i]) {
			uint32_t len = step && sizes[i] - off > step
					       ? step
					       : sizes[i] - off;

			c->iov[c->nin++] = (struct iovec){
				.iov_base = b->mem[i] + off, .iov_len = len };
			off += len;
		}
		b->p[i] = c;
	}
}

/* The packet as the buffers hold it, end to end, for used[0..k). */
static uint32_t gather(const struct bufs *b, const uint32_t *used, unsigned k,
		       uint8_t *out)
{
	uint32_t at = 0;

	for (unsigned i = 0; i < k; i++) {
		memcpy(out + at, b->mem[i], used[i]);
		at += used[i];
	}
	return at;
}

static void one_case(const uint32_t *sizes, unsigned n, uint32_t step,
		     uint32_t payload)
{
	static struct bufs b;
	static struct vsock_mrg m;
	static uint8_t data[65536], out[70000 * MAXB];
	struct vsock_hdr h = { .src_cid = 2, .dst_cid = 3, .op = VSOCK_OP_RW,
			       .type = VSOCK_TYPE_STREAM, .len = payload };
	struct vsock_hdr got;
	uint32_t used[MAXB], total = 0, w;
	unsigned k;

	make(&b, sizes, n, step);
	vsock_mrg_begin(&m, true);
	for (unsigned i = 0; i < n; i++) {
		assert_true(vsock_mrg_add(&m, b.p[i]));
		total += sizes[i];
	}
	assert_int_equal(m.room, total);
	if (!vsock_mrg_fits(&m, payload)) {
		assert_true(total < VSOCK_MRG_HDR_SIZE + payload);
		return;
	}
	assert_true(vsock_mrg_payload_room(&m) >= payload);
	for (uint32_t i = 0; i < payload; i++)
		data[i] = (uint8_t)(i * 13 + 1);
	/* Written as the single-packet code writes: header at 0, payload
	 * at 44 of the view. */
	assert_int_equal(vsock_pkt_write_hdr(&m.view, &h), 0);
	assert_int_equal(vsock_pkt_write_payload(&m.view, 0, data, payload),
			 payload);
	w = VSOCK_HDR_SIZE + payload;
	k = vsock_mrg_finish(&m, b.p, w, used);
	assert_true(k >= 1 && k <= n);
	/* No more buffers than needed, every one but the last full. */
	for (unsigned i = 0; i + 1 < k; i++)
		assert_int_equal(used[i], sizes[i]);
	assert_true(used[k - 1] >= 1);
	assert_int_equal(gather(&b, used, k, out), VSOCK_MRG_HDR_SIZE + payload);
	vsock_hdr_decode(out, &got);
	assert_int_equal(got.len, payload);
	assert_int_equal(got.op, VSOCK_OP_RW);
	assert_int_equal(out[VSOCK_HDR_SIZE] | out[VSOCK_HDR_SIZE + 1] << 8,
			 k);
	assert_memory_equal(out + VSOCK_MRG_HDR_SIZE, data, payload);
	/* Nothing written beyond the packet. */
	if (k < n)
		assert_int_equal(b.mem[k][0], 0xee);
	assert_int_equal(b.mem[k - 1][used[k - 1]], 0xee);
}

static void test_sizes(void **state)
{
	static const uint32_t sets[][MAXB] = {
		{ 4096, 4096, 4096, 4096 },
		{ 46, 4096 },
		{ 44, 2, 100 },
		{ 45, 1, 1, 10 },
		{ 1, 1, 44, 1, 200 },
		{ 43, 3, 5 },
		{ 65536 + 46 },
		{ 7, 65535, 100 },
	};
	static const unsigned counts[] = { 4, 2, 3, 4, 5, 3, 1, 3 };
	static const uint32_t payloads[] = { 0, 1, 2, 50, 100, 4050, 4051,
					     8000, 12000, 65536 };
	static const uint32_t steps[] = { 0, 1, 3, 44, 1000 };

	for (unsigned s = 0; s < sizeof(counts) / sizeof(counts[0]); s++)
		for (unsigned p = 0; p < sizeof(payloads) / sizeof(payloads[0]);
		     p++)
			for (unsigned t = 0; t < 5; t++) {
				uint32_t iovs = 0;

				/* A chain has at most VMIO_CHAIN_MAX_IOV
				 * iovecs, and so has the view: more is the
				 * add's refusal, tested below. */
				for (unsigned i = 0; i < counts[s]; i++)
					iovs += steps[t] ? sets[s][i] / steps[t] + 1
							 : 1;
				if (iovs > VMIO_CHAIN_MAX_IOV - 8)
					continue;
				one_case(sets[s], counts[s], steps[t],
					 payloads[p]);
			}
}

static void test_limits(void **state)
{
	static struct bufs b;
	static struct vsock_mrg m;
	uint32_t sizes[MAXB], used[MAXB];

	/* No more than VSOCK_MRG_MAX_BUFS buffers in one packet. */
	for (unsigned i = 0; i < MAXB; i++)
		sizes[i] = 10;
	make(&b, sizes, MAXB, 0);
	vsock_mrg_begin(&m, true);
	for (unsigned i = 0; i < VSOCK_MRG_MAX_BUFS; i++)
		assert_true(vsock_mrg_add(&m, b.p[i % MAXB]));
	assert_false(vsock_mrg_add(&m, b.p[0]));
	/* A buffer of more iovecs than the view has left is refused whole. */
	sizes[0] = sizes[1] = 1000;
	make(&b, sizes, 2, 1);
	vsock_mrg_begin(&m, true);
	assert_true(vsock_mrg_add(&m, b.p[0]));
	assert_int_equal(m.view.nin, 998); /* less num_buffers's two */
	assert_false(vsock_mrg_add(&m, b.p[1]));
	assert_int_equal(m.n, 1);
	assert_int_equal(m.view.nin, 998);
	assert_int_equal(m.room, 1000);
	/* Too little room for a header: nothing fits, finish refuses. */
	sizes[0] = 45;
	make(&b, sizes, 1, 0);
	vsock_mrg_begin(&m, true);
	assert_true(vsock_mrg_add(&m, b.p[0]));
	assert_false(vsock_mrg_fits(&m, 0));
	assert_int_equal(vsock_mrg_payload_room(&m), 0);
	assert_int_equal(vsock_mrg_finish(&m, b.p, VSOCK_HDR_SIZE, used), 0);
}

/* The plain layout is the view's one-buffer case: the buffer as it is
 * (no num_buffers cut out, every iovec kept), one buffer per packet, and
 * finish writes nothing and reports what was written. */
static void test_plain(void **state)
{
	static struct bufs b;
	static struct vsock_mrg m;
	static const uint8_t data[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };
	uint32_t sizes[2] = { 100, 100 }, used[2];

	make(&b, sizes, 2, 3);
	vsock_mrg_begin(&m, false);
	assert_true(vsock_mrg_add(&m, b.p[0]));
	assert_int_equal(m.view.nin, b.c[0].nin);
	assert_int_equal(m.view.in_len, 100);
	assert_false(vsock_mrg_add(&m, b.p[1]));
	assert_true(vsock_mrg_fits(&m, 100 - VSOCK_HDR_SIZE));
	assert_false(vsock_mrg_fits(&m, 100 - VSOCK_HDR_SIZE + 1));
	assert_int_equal(vsock_mrg_payload_room(&m), 100 - VSOCK_HDR_SIZE);
	assert_int_equal(vsock_pkt_write_payload(&m.view, 0, data, 8), 8);
	assert_int_equal(vsock_mrg_finish(&m, b.p, VSOCK_HDR_SIZE + 8, used),
			 1);
	assert_int_equal(used[0], VSOCK_HDR_SIZE + 8);
	/* The payload right after the header, where num_buffers would be. */
	assert_memory_equal(b.mem[0] + VSOCK_HDR_SIZE, data, 8);
	assert_int_equal(b.mem[0][VSOCK_HDR_SIZE + 8], 0xee);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sizes),
		cmocka_unit_test(test_limits),
		cmocka_unit_test(test_plain),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
