/* READY=1 for a Type=notify service: one datagram to the socket that
 * $NOTIFY_SOCKET names, a path or an abstract '@' name, received here as
 * systemd would receive it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "util/sd_notify.h"

/* A datagram socket bound to name ('@': abstract), non-blocking. */
static int bind_notify(const char *name)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	size_t len = strlen(name);
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK, 0);

	assert_true(fd >= 0);
	memcpy(sa.sun_path, name, len);
	if (name[0] == '@')
		sa.sun_path[0] = '\0';
	assert_int_equal(bind(fd, (struct sockaddr *)&sa,
			      (socklen_t)(offsetof(struct sockaddr_un, sun_path) +
					  len)), 0);
	return fd;
}

static void expect_datagram(int fd, const char *want)
{
	char buf[64];
	ssize_t n = recv(fd, buf, sizeof(buf), 0);

	assert_int_equal(n, (ssize_t)strlen(want));
	assert_memory_equal(buf, want, strlen(want));
}

static void test_path(void **state)
{
	char path[64];
	int fd;

	(void)state;
	snprintf(path, sizeof(path), "/tmp/vmio-notify-%d", (int)getpid());
	unlink(path);
	fd = bind_notify(path);
	setenv("NOTIFY_SOCKET", path, 1);
	assert_int_equal(vmio_sd_notify("READY=1"), 1);
	expect_datagram(fd, "READY=1");
	close(fd);
	unlink(path);
	/* Nobody there any more. */
	assert_true(vmio_sd_notify("READY=1") < 0);
}

static void test_abstract(void **state)
{
	char name[64];
	int fd;

	(void)state;
	/* As systemd names its own: "@/org/freedesktop/systemd1/notify". */
	snprintf(name, sizeof(name), "@vmio-notify-test-%d", (int)getpid());
	fd = bind_notify(name);
	setenv("NOTIFY_SOCKET", name, 1);
	assert_int_equal(vmio_sd_notify("READY=1"), 1);
	expect_datagram(fd, "READY=1");
	close(fd);
}

static void test_unset_and_bad(void **state)
{
	(void)state;
	unsetenv("NOTIFY_SOCKET");
	assert_int_equal(vmio_sd_notify("READY=1"), 0);
	setenv("NOTIFY_SOCKET", "", 1);
	assert_int_equal(vmio_sd_notify("READY=1"), 0);
	/* Neither a path nor an abstract name (vsock addresses are not
	 * ours to speak). */
	setenv("NOTIFY_SOCKET", "vsock:2:1234", 1);
	assert_int_equal(vmio_sd_notify("READY=1"), -EAFNOSUPPORT);
	setenv("NOTIFY_SOCKET", "@", 1);
	assert_int_equal(vmio_sd_notify("READY=1"), -EAFNOSUPPORT);
	unsetenv("NOTIFY_SOCKET");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_path),
		cmocka_unit_test(test_abstract),
		cmocka_unit_test(test_unset_and_bad),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
