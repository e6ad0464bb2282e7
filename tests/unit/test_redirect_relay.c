/* The relay core and its engines, driven in this process on a loop of its
 * own: what a single pump of the relay must get right at the edges of a
 * batch, where the timing of a real transfer only sometimes lands. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "redirect/relay.h"
#include "util/clock.h"
#include "util/fd.h"

/* The relay's per-event budget (relay.c, PUMP_BUDGET): a pump stops
 * once it moved this much, and the rest waits for the next event. */
#define BUDGET (4u * 1024 * 1024)
/* Messages sized so that one batch (16 slots) stays under the budget
 * and the next one, 15 messages and the end, goes past it. */
#define MSG_SIZE 139264u
#define MSGS 31u

struct outcome {
	bool done;
	int error;
};

static void on_done(void *opaque, struct redir_relay *r, int error)
{
	struct outcome *o = opaque;

	o->done = true;
	o->error = error;
	redir_relay_free(r);
}

/* Room for everything the test queues at once, forced past wmem_max:
 * the test needs CAP_NET_ADMIN (root), as the suite does. */
static void big_sndbuf(int fd, int bytes)
{
	int got = 0;
	socklen_t len = sizeof(got);

	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &bytes, sizeof(bytes)))
		fail_msg("SO_SNDBUFFORCE: %s: this test needs root (CAP_NET_ADMIN) to queue %u bytes at once",
			 strerror(errno), MSGS * MSG_SIZE);
	assert_int_equal(getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &got, &len), 0);
	assert_true(got >= bytes);
}

/* Reads what is queued on the non-blocking fd into nothing; the bytes
 * read, and whether EOF came. */
static size_t drain_sink(int fd, bool *eof)
{
	static uint8_t buf[65536];
	size_t total = 0;
	ssize_t n;

	*eof = false;
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		total += (size_t)n;
	if (n == 0)
		*eof = true;
	return total;
}

/* The end of datagrams (an empty one) read in the same batch as the
 * messages that exhaust the pump's budget: the source socket has nothing
 * more to wake the relay with, so the end must be taken from the batch
 * then, not from a later read. Seen in the guest (redirect_sockmap_test
 * on Linux 6.1 under load): the relay waited forever after the last
 * byte. */
static void test_msg_end_in_the_batch_past_the_budget(void **state)
{
	int src[2], dst[2];
	struct vmio_loop *loop = vmio_loop_new();
	struct outcome o = { 0 };
	uint8_t *msg = calloc(1, MSG_SIZE);
	size_t got = 0;
	bool eof = false;

	(void)state;
	assert_non_null(loop);
	assert_non_null(msg);
	assert_true(MSG_SIZE * 16 < BUDGET && MSG_SIZE * MSGS >= BUDGET);
	/* A connected pair: the receive queue's length limit
	 * (net.unix.max_dgram_qlen) does not apply between peers. */
	assert_int_equal(socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, src), 0);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, dst), 0);
	big_sndbuf(src[0], 16 << 20);
	big_sndbuf(dst[0], 16 << 20);
	for (unsigned i = 0; i < MSGS; i++)
		assert_int_equal(send(src[0], msg, MSG_SIZE, MSG_DONTWAIT), MSG_SIZE);
	assert_int_equal(send(src[0], "", 0, MSG_DONTWAIT), 0);
	assert_non_null(redir_relay_new_one_way(loop, src[1], dst[0],
						REDIR_ENGINE_AUTO, 0, "test",
						on_done, &o));
	assert_int_equal(vmio_fd_set_nonblock(dst[1]), 0);

	uint64_t end = vmio_now_ns() + 5000000000ull;
	while (!o.done && vmio_now_ns() < end) {
		assert_true(vmio_loop_run_once(loop, 100) >= 0);
		got += drain_sink(dst[1], &eof);
	}
	if (!o.done)
		fail_msg("the relay did not end within 5 s of the empty datagram (%zu of %u bytes passed on)",
			 got, MSGS * MSG_SIZE);
	assert_int_equal(o.error, 0);
	got += drain_sink(dst[1], &eof);
	assert_int_equal(got, MSGS * MSG_SIZE);
	assert_true(eof);
	close(src[0]);
	close(dst[1]);
	vmio_loop_free(loop);
	free(msg);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_msg_end_in_the_batch_past_the_budget),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
