/* The instance of a socket-activated connection: from LISTEN_FDNAMES
 * (systemd 257 and later), or, when systemd named the descriptor
 * "connection" (before 257), from the directory of the accepted socket's
 * own address, which is the listener's path. */
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
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "cli/socket_instance.h"

static void test_from_path(void **state)
{
	char name[32];

	(void)state;
	assert_int_equal(vmio_instance_from_path("/run/vmio/net/vm1/vhost.sock",
						 name, sizeof(name)), 0);
	assert_string_equal(name, "vm1");
	assert_int_equal(vmio_instance_from_path("net/web-2/x", name,
						 sizeof(name)), 0);
	assert_string_equal(name, "web-2");
	/* No directory, the root, a hidden one, an empty component. */
	assert_int_equal(vmio_instance_from_path("vhost.sock", name,
						 sizeof(name)), -EINVAL);
	assert_int_equal(vmio_instance_from_path("/vhost.sock", name,
						 sizeof(name)), -EINVAL);
	assert_int_equal(vmio_instance_from_path("/run/.x/vhost.sock", name,
						 sizeof(name)), -EINVAL);
	assert_int_equal(vmio_instance_from_path("/run//vhost.sock", name,
						 sizeof(name)), -EINVAL);
	assert_int_equal(vmio_instance_from_path("/run/vmio/net/vm1/vhost.sock",
						 name, 3), -ENAMETOOLONG);
}

/* A listener at DIR/NAME/vhost.sock, a client, and the accepted end. */
struct accepted {
	char dir[32], path[96];
	int listener, client, conn;
};

static void accept_one(struct accepted *a, const char *name)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char sub[64];

	snprintf(a->dir, sizeof(a->dir), "/tmp/vmio-instance-XXXXXX");
	assert_non_null(mkdtemp(a->dir));
	snprintf(sub, sizeof(sub), "%s/%s", a->dir, name);
	assert_int_equal(mkdir(sub, 0700), 0);
	snprintf(a->path, sizeof(a->path), "%s/vhost.sock", sub);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", a->path);
	a->listener = socket(AF_UNIX, SOCK_STREAM, 0);
	a->client = socket(AF_UNIX, SOCK_STREAM, 0);
	assert_int_equal(bind(a->listener, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(a->listener, 1), 0);
	assert_int_equal(connect(a->client, (struct sockaddr *)&sa, sizeof(sa)), 0);
	a->conn = accept(a->listener, NULL, NULL);
	assert_true(a->conn >= 0);
}

static void release(struct accepted *a, const char *name)
{
	char sub[64];

	close(a->conn);
	close(a->client);
	close(a->listener);
	unlink(a->path);
	snprintf(sub, sizeof(sub), "%s/%s", a->dir, name);
	rmdir(sub);
	rmdir(a->dir);
}

static void test_accepted_connection(void **state)
{
	struct accepted a;
	const char *why = NULL;
	char name[32];

	(void)state;
	accept_one(&a, "vm1");
	/* systemd 252: FileDescriptorName= ignored, "connection" instead. */
	assert_int_equal(vmio_socket_instance(a.conn, "connection", name,
					      sizeof(name), &why), 0);
	assert_string_equal(name, "vm1");
	/* Unset or empty: the address as well. */
	assert_int_equal(vmio_socket_instance(a.conn, NULL, name,
					      sizeof(name), &why), 0);
	assert_string_equal(name, "vm1");
	assert_int_equal(vmio_socket_instance(a.conn, "", name, sizeof(name),
					      &why), 0);
	assert_string_equal(name, "vm1");
	/* systemd 257: FileDescriptorName=%i is the name, taken as it is. */
	assert_int_equal(vmio_socket_instance(a.conn, "vm7", name,
					      sizeof(name), &why), 0);
	assert_string_equal(name, "vm7");
	/* A name that would leave /etc/vmio/net/, or a list. */
	assert_int_equal(vmio_socket_instance(a.conn, "../x", name,
					      sizeof(name), &why), -EINVAL);
	assert_int_equal(vmio_socket_instance(a.conn, "a:b", name,
					      sizeof(name), &why), -EINVAL);
	assert_non_null(why);
	release(&a, "vm1");
}

static void test_unnamed_socket(void **state)
{
	const char *why = NULL;
	char name[32];
	int sv[2];

	(void)state;
	/* A socketpair (a VMM's own --fd) has no address to go by. */
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	assert_int_equal(vmio_socket_instance(sv[0], "connection", name,
					      sizeof(name), &why), -EINVAL);
	assert_non_null(why);
	close(sv[0]);
	close(sv[1]);
	assert_int_equal(vmio_socket_instance(-1, NULL, name, sizeof(name),
					      &why), -EBADF);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_from_path),
		cmocka_unit_test(test_accepted_connection),
		cmocka_unit_test(test_unnamed_socket),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
