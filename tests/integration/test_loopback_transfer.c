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

	c.sock = harness_path("transfer.sock");
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

	/* Whatever the test did, the backend must exit cleanly on SIGTERM. */
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
	return 0;
}

/* Runs one session: connect, stream, check, close. */
static void transfer(struct ctx *c, const struct vmio_stream_opts *o,
		     unsigned nregions, uint16_t qsize,
		     struct vmio_stream_result *res)
{
	char err[256];
	uint64_t mem = vmio_stream_mem_needed(o, qsize);
	struct vmio_fe *fe = vmio_stream_connect(c->sock, WAIT_MS, mem,
						 nregions, qsize, err,
						 sizeof(err));

	if (!fe)
		fail_msg("%s", err);
	int r = vmio_stream_run(fe, o, res);
	vmio_fe_close(fe);
	if (r)
		fail_msg("after %" PRIu64 " bytes: %s", res->bytes, res->error);
	assert_int_equal(res->bytes, o->bytes);
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

static int group_teardown(void **state)
{
	harness_cleanup();
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_one_gib_checked, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_mismatched_chunks, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_indirect_three_regions,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_direct_three_regions,
						setup, teardown),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, group_teardown);
}
