/* The table of a queue's legal states (vhost-user/queue_state.h): every
 * path the core takes through it is allowed, the moves it never makes are
 * not, and an illegal move is not silent: the VMM hears of it on the
 * queue's error fd, and a home's breaks the queue. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cmocka.h>

#include "vhost-user/backend_state.h"
#include "vhost-user/queue_state.h"

static void walk_bq(const enum vmio_bq_state *path, size_t n)
{
	for (size_t i = 0; i + 1 < n; i++)
		assert_true(vmio_bq_state_legal(path[i], path[i + 1]));
}

static void test_queue_paths(void **state)
{
	/* Served on another thread: each command out, then answered. */
	static const enum vmio_bq_state remote[] = {
		VMIO_BQ_IDLE,	 VMIO_BQ_STARTING, VMIO_BQ_RUNNING,
		VMIO_BQ_PAUSING, VMIO_BQ_PAUSED,   VMIO_BQ_STARTING,
		VMIO_BQ_PAUSING, VMIO_BQ_PAUSED,   VMIO_BQ_HALTING,
		VMIO_BQ_IDLE,
	};
	/* Served on the backend's loop: every command answered at once. */
	static const enum vmio_bq_state local[] = {
		VMIO_BQ_IDLE,	VMIO_BQ_RUNNING, VMIO_BQ_PAUSED,
		VMIO_BQ_RUNNING, VMIO_BQ_IDLE,
	};

	(void)state;
	walk_bq(remote, sizeof(remote) / sizeof(remote[0]));
	walk_bq(local, sizeof(local) / sizeof(local[0]));
	assert_true(vmio_bq_state_legal(VMIO_BQ_RUNNING, VMIO_BQ_HALTING));
	assert_true(vmio_bq_state_legal(VMIO_BQ_PAUSED, VMIO_BQ_IDLE));
}

static void test_queue_moves_never_made(void **state)
{
	(void)state;
	/* A second command while one is out. */
	assert_false(vmio_bq_state_legal(VMIO_BQ_STARTING, VMIO_BQ_HALTING));
	assert_false(vmio_bq_state_legal(VMIO_BQ_PAUSING, VMIO_BQ_STARTING));
	assert_false(vmio_bq_state_legal(VMIO_BQ_HALTING, VMIO_BQ_RUNNING));
	assert_false(vmio_bq_state_legal(VMIO_BQ_HALTING, VMIO_BQ_PAUSED));
	/* Paused without having run; running again without a start. */
	assert_false(vmio_bq_state_legal(VMIO_BQ_IDLE, VMIO_BQ_PAUSED));
	assert_false(vmio_bq_state_legal(VMIO_BQ_IDLE, VMIO_BQ_PAUSING));
	assert_false(vmio_bq_state_legal(VMIO_BQ_PAUSING, VMIO_BQ_RUNNING));
	/* The home: a timer's look only after the kicks were let go. */
	assert_true(vmio_home_state_legal(VMIO_HOME_STOPPED,
					  VMIO_HOME_WATCHING));
	assert_true(vmio_home_state_legal(VMIO_HOME_WATCHING,
					  VMIO_HOME_LOOKING));
	assert_false(vmio_home_state_legal(VMIO_HOME_STOPPED,
					   VMIO_HOME_LOOKING));
	assert_false(vmio_home_state_legal(VMIO_HOME_POLLED,
					   VMIO_HOME_WATCHING));
	/* The backend: a message waits only while the front end is there. */
	assert_true(vmio_be_state_legal(VMIO_BE_WAITING, VMIO_BE_CLOSING));
	assert_false(vmio_be_state_legal(VMIO_BE_CLOSING, VMIO_BE_WAITING));
}

static uint64_t drain(int fd)
{
	uint64_t n = 0;

	if (read(fd, &n, sizeof(n)) != sizeof(n))
		return 0;
	return n;
}

static void test_illegal_move_is_told(void **state)
{
	struct vmio_backend_queue q;

	(void)state;
	memset(&q, 0, sizeof(q));
	vmio_vq_init(&q.vq, 1);
	q.err_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	assert_true(q.err_fd >= 0);

	/* Legal: nothing said. */
	vmio_bq_move(&q, VMIO_BQ_STARTING);
	vmio_bq_move(&q, VMIO_BQ_RUNNING);
	assert_int_equal(drain(q.err_fd), 0);
	/* The loop's: the VMM is told, the move is made. */
	vmio_bq_move(&q, VMIO_BQ_HALTING);
	vmio_bq_move(&q, VMIO_BQ_STARTING);
	assert_int_equal(q.state, VMIO_BQ_STARTING);
	assert_int_equal(drain(q.err_fd), 1);
	assert_false(q.vq.broken);
	/* The home's: the queue breaks. */
	vmio_home_move(&q, VMIO_HOME_WATCHING);
	assert_false(q.vq.broken);
	vmio_home_move(&q, VMIO_HOME_POLLED);
	assert_true(q.vq.broken);
	assert_int_equal(q.home_state, VMIO_HOME_POLLED);
	close(q.err_fd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_queue_paths),
		cmocka_unit_test(test_queue_moves_never_made),
		cmocka_unit_test(test_illegal_move_is_told),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
