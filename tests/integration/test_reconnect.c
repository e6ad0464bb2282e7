/* The front end goes away without any cleanup, as a VMM that crashes
 * would, and comes back: each new session gets a fresh device, and the
 * process outlives them all and still exits cleanly. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "frontend/stream.h"
#include "harness.h"

#define QSIZE 256

static struct harness_loopback lb = { .name = "reconnect.sock" };

static int teardown(void **state)
{
	struct harness_loopback *c = *state;

	/* Still alive after every session, and clean on SIGTERM. */
	assert_int_equal(harness_wait_exit(c->pid, 0), -1);
	return harness_loopback_teardown(state);
}

static void test_reconnect_three_times(void **state)
{
	struct harness_loopback *c = *state;
	struct vmio_stream_opts o;
	struct vmio_stream_result res;

	vmio_stream_opts_init(&o);
	o.bytes = 24ull << 20;
	o.tx_chunk = 10000;
	o.rx_chunk = 4096;
	o.verify = true;
	for (unsigned i = 0; i < 4; i++) {
		o.seed = i; /* stale data from the last session would show */
		harness_stream_session(c->sock, &o, 1, QSIZE, &res);
	}
	/* Four sessions, none of them a protocol error. */
	assert_int_equal(harness_control_num(c->ctl, "backends.0.sessions"), 4);
	assert_int_equal(
		harness_control_num(c->ctl, "backends.0.protocol_errors"), 0);
}

/* Posts one tx chain and a smaller rx chain and waits until the device
 * has delivered part of the tx chain: the device now remembers a partly
 * consumed chain. */
static void leave_partial_tx(struct vmio_fe *fe)
{
	struct vmio_dvq *rx = vmio_fe_queue(fe, 0);
	struct vmio_dvq *tx = vmio_fe_queue(fe, 1);
	uint64_t tx_gpa = vmio_fe_alloc(fe, 1000, 64);
	uint64_t rx_gpa = vmio_fe_alloc(fe, 10, 64);
	uint32_t len = 0;

	assert_true(tx_gpa != UINT64_MAX && rx_gpa != UINT64_MAX);
	memset(vmio_fe_ptr(fe, tx_gpa), 0xee, 1000);
	struct vmio_dbuf t = { .gpa = tx_gpa, .len = 1000 };
	struct vmio_dbuf r = { .gpa = rx_gpa, .len = 10, .writable = true };
	assert_true(vmio_dvq_add(rx, &r, 1, (void *)1) >= 0);
	vmio_dvq_kick(rx);
	assert_true(vmio_dvq_add(tx, &t, 1, (void *)2) >= 0);
	vmio_dvq_kick(tx);

	vmio_dvq_want_interrupt(rx);
	void *tok = vmio_dvq_get_used(rx, &len);
	if (!tok) {
		assert_int_equal(vmio_dvq_wait(rx, HARNESS_WAIT_MS), 1);
		tok = vmio_dvq_get_used(rx, &len);
	}
	assert_ptr_equal(tok, (void *)1);
	assert_int_equal(len, 10);
	/* The tx chain is not done: 990 bytes wait for rx space. */
	assert_null(vmio_dvq_get_used(tx, &len));
}

/* Disconnecting in the middle of a chain must not leak the remembered
 * offset into the next session. */
static void test_reconnect_mid_chain(void **state)
{
	struct harness_loopback *c = *state;
	struct vmio_stream_opts o;
	struct vmio_stream_result res;

	vmio_stream_opts_init(&o);
	o.bytes = 8ull << 20;
	o.tx_chunk = 1000;
	o.rx_chunk = 777;
	o.verify = true;
	for (unsigned i = 0; i < 3; i++) {
		uint64_t mem = vmio_stream_mem_needed(&o, QSIZE);
		struct vmio_fe *fe = harness_connect(c->sock, mem, 1, QSIZE);

		leave_partial_tx(fe);
		vmio_fe_close(fe);
		harness_stream_session(c->sock, &o, 1, QSIZE, &res);
	}
}

#define CASE(f)                                                              \
	cmocka_unit_test_prestate_setup_teardown(f, harness_loopback_setup,  \
						 teardown, &lb)

int main(void)
{
	const struct CMUnitTest tests[] = {
		CASE(test_reconnect_three_times),
		CASE(test_reconnect_mid_chain),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, harness_group_teardown);
}
