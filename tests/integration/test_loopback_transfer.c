/* `vmio loopback` in another process, driven through its socket by the
 * in-tree front end in this one: bytes go out on tx and come back on rx,
 * and every byte is checked. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <inttypes.h>
#include <stdio.h>
#include <signal.h>

#include "frontend/stream.h"
#include "harness.h"

static struct harness_loopback lb = { .name = "transfer.sock" };

/* Runs one checked session and reports its throughput. */
static void transfer(struct harness_loopback *c,
		     const struct vmio_stream_opts *o, unsigned nregions,
		     uint16_t qsize, struct vmio_stream_result *res)
{
	harness_stream_session(c->sock, o, nregions, qsize, res);
	printf("# %" PRIu64 " bytes in %.3f s: %.1f MB/s\n", res->bytes,
	       res->seconds, (double)res->bytes / res->seconds / 1e6);
}

static void test_one_gib_checked(void **state)
{
	struct vmio_stream_opts o;
	struct vmio_stream_result res;

	vmio_stream_opts_init(&o);
	o.bytes = 1ull << 30;
	o.verify = true;
	transfer(*state, &o, 1, 256, &res);
}

/* tx and rx buffers of unrelated odd sizes, several per chain: the device
 * must cut and join chains as a byte stream, with no byte lost or moved. */
static void test_mismatched_chunks(void **state)
{
	struct vmio_stream_opts o;
	struct vmio_stream_result res;

	vmio_stream_opts_init(&o);
	o.bytes = 64ull << 20;
	o.tx_chunk = 65536 + 7;
	o.rx_chunk = 3001;
	o.segs = 3;
	o.verify = true;
	transfer(*state, &o, 1, 128, &res);

	o.bytes = (16ull << 20) + 5;
	o.tx_chunk = 1000;
	o.rx_chunk = 70000;
	o.segs = 1;
	transfer(*state, &o, 1, 256, &res);
}

/* Indirect tables, and guest memory in three regions, so that buffers and
 * tables straddle region boundaries and become several iovecs. */
static void test_indirect_three_regions(void **state)
{
	struct vmio_stream_opts o;
	struct vmio_stream_result res;

	vmio_stream_opts_init(&o);
	o.bytes = 256ull << 20;
	o.tx_chunk = 65536 + 100;
	o.rx_chunk = 40000;
	o.segs = 5;
	o.indirect = true;
	o.verify = true;
	transfer(*state, &o, 3, 256, &res);
	assert_true(res.crossing_bufs > 0);
}

static void test_direct_three_regions(void **state)
{
	struct vmio_stream_opts o;
	struct vmio_stream_result res;

	vmio_stream_opts_init(&o);
	o.bytes = 128ull << 20;
	o.tx_chunk = 123457;
	o.rx_chunk = 65536;
	o.segs = 2;
	o.verify = true;
	transfer(*state, &o, 3, 256, &res);
	assert_true(res.crossing_bufs > 0);
}

#define CASE(f) HARNESS_LOOPBACK_CASE(f, lb)

int main(void)
{
	const struct CMUnitTest tests[] = {
		CASE(test_one_gib_checked),
		CASE(test_mismatched_chunks),
		CASE(test_indirect_three_regions),
		CASE(test_direct_three_regions),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, harness_group_teardown);
}
