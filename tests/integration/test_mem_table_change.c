/* The memory table changes while data flows, as DPDK's virtio-user does:
 * SET_MEM_TABLE is re-sent for the same memory cut into a different number
 * of regions, many times mid-stream. Rings and the stream must survive:
 * every byte arrives once, in order. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <inttypes.h>
#include <signal.h>
#include <stdio.h>

#include "frontend/stream.h"
#include "harness.h"

static struct harness_loopback lb = { .name = "remap.sock" };

static void remapping_transfer(struct harness_loopback *c,
			       struct vmio_stream_opts *o, unsigned nregions,
			       unsigned min_remaps)
{
	struct vmio_stream_result res;

	harness_stream_session(c->sock, o, nregions, 256, &res);
	printf("# %" PRIu64 " bytes, %u memory table changes, %u buffers across regions\n",
	       res.bytes, res.remaps, res.crossing_bufs);
	assert_true(res.remaps >= min_remaps);
}

/* Small remap interval against deep rings: the table changes while the
 * device has chains popped and rings half full. */
static void test_remap_direct(void **state)
{
	struct vmio_stream_opts o;

	vmio_stream_opts_init(&o);
	o.bytes = 256ull << 20;
	o.tx_chunk = 65536 + 3;
	o.rx_chunk = 50000;
	o.segs = 2;
	o.verify = true;
	o.remap_every = 4ull << 20;
	remapping_transfer(*state, &o, 1, 50);
}

static void test_remap_indirect(void **state)
{
	struct vmio_stream_opts o;

	vmio_stream_opts_init(&o);
	o.bytes = 128ull << 20;
	o.tx_chunk = 30000;
	o.rx_chunk = 77777;
	o.segs = 4;
	o.indirect = true;
	o.verify = true;
	o.remap_every = 1ull << 20;
	remapping_transfer(*state, &o, 3, 100);
}

/* A session that remapped leaves nothing behind for the next one. */
static void test_next_session_after_remaps(void **state)
{
	struct vmio_stream_opts o;

	vmio_stream_opts_init(&o);
	o.bytes = 32ull << 20;
	o.verify = true;
	o.remap_every = 1ull << 20;
	remapping_transfer(*state, &o, 2, 20);
	o.remap_every = 0;
	remapping_transfer(*state, &o, 1, 0);
}

#define CASE(f) HARNESS_LOOPBACK_CASE(f, lb)

int main(void)
{
	const struct CMUnitTest tests[] = {
		CASE(test_remap_direct),
		CASE(test_remap_indirect),
		CASE(test_next_session_after_remaps),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, harness_group_teardown);
}
