/* The event loop: dispatch, removal during dispatch, stale events. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "event/loop.h"

struct counter {
	struct vmio_loop *loop;
	int calls;
	int remove_fd; /* fd to remove from inside the callback, or -1 */
};

static void count_cb(void *opaque, int fd, uint32_t events)
{
	struct counter *c = opaque;
	uint64_t v;
	c->calls++;
	if (read(fd, &v, sizeof(v)) < 0)
		fail_msg("eventfd read failed");
	if (c->remove_fd >= 0)
		vmio_loop_remove(c->loop, c->remove_fd);
}

static void signal_fd(int fd)
{
	uint64_t one = 1;
	assert_int_equal(write(fd, &one, sizeof(one)), sizeof(one));
}

static void test_dispatch_and_remove(void **state)
{
	struct vmio_loop *loop = vmio_loop_new();
	int fd = eventfd(0, EFD_NONBLOCK);
	struct counter c = { .loop = loop, .remove_fd = -1 };

	assert_int_equal(vmio_loop_add(loop, fd, EPOLLIN, count_cb, &c), 0);
	assert_int_equal(vmio_loop_add(loop, fd, EPOLLIN, count_cb, &c), -EEXIST);
	assert_int_equal(vmio_loop_run_once(loop, 0), 0);
	signal_fd(fd);
	assert_int_equal(vmio_loop_run_once(loop, 1000), 1);
	assert_int_equal(c.calls, 1);

	vmio_loop_remove(loop, fd);
	signal_fd(fd);
	assert_int_equal(vmio_loop_run_once(loop, 0), 0);
	assert_int_equal(c.calls, 1);
	vmio_loop_remove(loop, fd); /* second removal is a no-op */

	close(fd);
	vmio_loop_free(loop);
}

static void test_remove_other_during_dispatch(void **state)
{
	/* Two fds ready in one batch; the first callback removes the second:
	 * the second must not run. */
	struct vmio_loop *loop = vmio_loop_new();
	int a = eventfd(0, EFD_NONBLOCK), b = eventfd(0, EFD_NONBLOCK);
	struct counter ca = { .loop = loop, .remove_fd = b };
	struct counter cb = { .loop = loop, .remove_fd = a };

	assert_int_equal(vmio_loop_add(loop, a, EPOLLIN, count_cb, &ca), 0);
	assert_int_equal(vmio_loop_add(loop, b, EPOLLIN, count_cb, &cb), 0);
	signal_fd(a);
	signal_fd(b);
	assert_int_equal(vmio_loop_run_once(loop, 1000), 1);
	assert_int_equal(ca.calls + cb.calls, 1);

	close(a);
	close(b);
	vmio_loop_free(loop);
}

static void test_modify_and_errors(void **state)
{
	struct vmio_loop *loop = vmio_loop_new();
	int fd = eventfd(0, EFD_NONBLOCK);
	struct counter c = { .loop = loop, .remove_fd = -1 };

	assert_int_equal(vmio_loop_modify(loop, fd, EPOLLIN), -ENOENT);
	assert_int_equal(vmio_loop_add(loop, -1, EPOLLIN, count_cb, &c), -EINVAL);
	assert_int_equal(vmio_loop_add(loop, fd, 0, count_cb, &c), 0);
	signal_fd(fd);
	assert_int_equal(vmio_loop_run_once(loop, 0), 0);
	assert_int_equal(vmio_loop_modify(loop, fd, EPOLLIN), 0);
	assert_int_equal(vmio_loop_run_once(loop, 1000), 1);
	assert_int_equal(c.calls, 1);

	close(fd);
	vmio_loop_free(loop);
}

static void stop_cb(void *opaque, int fd, uint32_t events)
{
	uint64_t v;
	if (read(fd, &v, sizeof(v)) < 0)
		fail_msg("eventfd read failed");
	vmio_loop_stop(opaque);
}

static void test_run_until_stop(void **state)
{
	struct vmio_loop *loop = vmio_loop_new();
	int fd = eventfd(0, EFD_NONBLOCK);
	assert_int_equal(vmio_loop_add(loop, fd, EPOLLIN, stop_cb, loop), 0);
	signal_fd(fd);
	assert_int_equal(vmio_loop_run(loop), 0);
	close(fd);
	vmio_loop_free(loop);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_dispatch_and_remove),
		cmocka_unit_test(test_remove_other_during_dispatch),
		cmocka_unit_test(test_modify_and_errors),
		cmocka_unit_test(test_run_until_stop),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
