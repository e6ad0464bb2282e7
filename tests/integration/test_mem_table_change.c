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
#include <sys/wait.h>

#include "frontend/stream.h"
#include "harness.h"

#define WAIT_MS 20000

struct ctx {
	const char *sock;
	pid_t pid;
};

static int setup(void **state)
{
	static struct ctx c;

	c.sock = harness_path("remap.sock");
	c.pid = harness_spawn((const char *[]){ "loopback", "--socket-path",
						c.sock, NULL });
	if (!harness_wait_socket(c.sock, WAIT_MS))
		fail_msg("vmio did not start listening on %s", c.sock);
	*state = &c;
	return 0;
}

static int teardown(void **state)
{
	struct ctx *c = *state;
	int st = harness_stop(c->pid, WAIT_MS);

	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
	return 0;
}

static void remapping_transfer(struct ctx *c, struct vmio_stream_opts *o,
			       unsigned nregions, unsigned min_remaps)
{
	struct vmio_stream_result res;
	char err[256];
	uint64_t mem = vmio_stream_mem_needed(o, 256);
	struct vmio_fe *fe = vmio_stream_connect(c->sock, WAIT_MS, mem,
						 nregions, 256, err,
						 sizeof(err));

	if (!fe)
		fail_msg("%s", err);
	int r = vmio_stream_run(fe, o, &res);
	vmio_fe_close(fe);
	if (r)
		fail_msg("after %" PRIu64 " bytes and %u remaps: %s", res.bytes,
			 res.remaps, res.error);
	assert_int_equal(res.bytes, o->bytes);
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

static int group_teardown(void **state)
{
	harness_cleanup();
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_remap_direct, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_remap_indirect, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_next_session_after_remaps,
						setup, teardown),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, group_teardown);
}
