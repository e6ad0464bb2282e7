/* Resolving vmio redirect addresses into socket addresses, vsock above
 * all. Resolution only: this runs on the host, where an AF_VSOCK socket
 * would reach the host's own hypervisor, so no socket is ever opened
 * here (the guest test, tests/guest/redirect_test.sh, opens them). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <linux/vm_sockets.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "redirect/endpoint.h"

static struct redir_endpoint ep;
static char err[256];

/* Parses and resolves text; returns resolve's result, err its message. */
static int resolve(const char *text)
{
	struct redir_addr a;

	err[0] = '\0';
	if (redir_addr_parse(text, &a, err, sizeof(err)))
		fail_msg("'%s' does not parse: %s", text, err);
	return redir_endpoint_resolve(&ep, &a, err, sizeof(err));
}

/* ep holds a vsock stream address for cid and port. */
static void assert_vm(unsigned cid, unsigned port)
{
	const struct sockaddr_vm *vm = (const struct sockaddr_vm *)&ep.sa;

	assert_int_equal(ep.sa_len, sizeof(struct sockaddr_vm));
	assert_int_equal(vm->svm_family, AF_VSOCK);
	assert_int_equal(vm->svm_cid, cid);
	assert_int_equal(vm->svm_port, port);
	assert_int_equal(ep.bind_len, 0);
}

static void assert_described(const char *want)
{
	char buf[64];

	assert_string_equal(redir_endpoint_describe(&ep, buf, sizeof(buf)), want);
}

static void test_vsock_listen(void **state)
{
	assert_int_equal(resolve("VSOCK-LISTEN:5000,fork,backlog=8,reuseaddr"), 0);
	assert_vm(VMADDR_CID_ANY, 5000);
	assert_described("VSOCK-LISTEN:5000");
	/* The whole 32-bit port space, as the kernel has it. */
	assert_int_equal(resolve("vsock-listen:4294967295"), 0);
	assert_vm(VMADDR_CID_ANY, UINT32_MAX);
}

static void test_vsock_connect(void **state)
{
	assert_int_equal(resolve("VSOCK-CONNECT:2:6000"), 0);
	assert_vm(VMADDR_CID_HOST, 6000);
	assert_described("VSOCK-CONNECT:2:6000");
	assert_int_equal(resolve("VSOCK-CONNECT:4294967295:1,type=1"), 0);
	assert_vm(UINT32_MAX, 1);
}

static void test_vsock_refused(void **state)
{
	assert_int_equal(resolve("VSOCK-LISTEN:5000,type=2"), -1);
	assert_non_null(strstr(err, "AF_VSOCK datagrams are not supported"));
	assert_int_equal(resolve("VSOCK-CONNECT:2:1,type=2"), -1);
	assert_non_null(strstr(err, "VSOCK-CONNECT: type=2"));
	assert_int_equal(resolve("VSOCK-LISTEN:5000,type=5"), -1);
	assert_non_null(strstr(err, "only stream vsock sockets"));
}

/* The other families still resolve as before beside vsock. */
static void test_unix_and_tcp(void **state)
{
	assert_int_equal(resolve("UNIX-CONNECT:/tmp/x.sock"), 0);
	assert_int_equal(ep.sa.ss_family, AF_UNIX);
	assert_described("UNIX-CONNECT:/tmp/x.sock");
	assert_int_equal(resolve("TCP4-LISTEN:8080,bind=127.0.0.1"), 0);
	assert_int_equal(ep.sa.ss_family, AF_INET);
	assert_described("TCP4-LISTEN:8080");
}

/* TCP-LISTEN with no version and no bind= listens on ::, dual-stack;
 * bind= keeps the family of what it names. */
static void test_tcp_listen_families(void **state)
{
	const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)&ep.sa;

	assert_int_equal(resolve("TCP-L:8080"), 0);
	assert_int_equal(ep.sa.ss_family, AF_INET6);
	assert_int_equal(ntohs(s6->sin6_port), 8080);
	assert_true(IN6_IS_ADDR_UNSPECIFIED(&s6->sin6_addr));
	assert_described("TCP-LISTEN:8080");
	assert_int_equal(resolve("TCP6-LISTEN:1"), 0);
	assert_int_equal(ep.sa.ss_family, AF_INET6);
	assert_int_equal(resolve("TCP-LISTEN:1,bind=127.0.0.1"), 0);
	assert_int_equal(ep.sa.ss_family, AF_INET);
}

static void test_user_group(void **state)
{
	assert_int_equal(resolve("UNIX-LISTEN:/x,user=root,group=root"), 0);
	assert_int_equal(ep.uid, 0);
	assert_int_equal(ep.gid, 0);
	assert_int_equal(resolve("UNIX-LISTEN:/x,user=1234,group=5678"), 0);
	assert_int_equal(ep.uid, 1234);
	assert_int_equal(ep.gid, 5678);
	assert_int_equal(resolve("UNIX-LISTEN:/x"), 0);
	assert_int_equal(ep.uid, -1);
	assert_int_equal(ep.gid, -1);
	assert_int_equal(resolve("UNIX-LISTEN:/x,user=no-such-user-here"), -1);
	assert_non_null(strstr(err, "no such user 'no-such-user-here'"));
	assert_int_equal(resolve("UNIX-RECV:/x,group=no-such-group-here"), -1);
	assert_non_null(strstr(err, "no such group 'no-such-group-here'"));
}

static int sockopt(int fd, int level, int name)
{
	int v = -1;
	socklen_t len = sizeof(v);

	assert_int_equal(getsockopt(fd, level, name, &v, &len), 0);
	return v;
}

/* nodelay and keepalive reach the socket of each connection (a TCP
 * socket, never connected: the options are set on any). */
static void test_tune(void **state)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	assert_int_equal(resolve("TCP:127.0.0.1:1"), 0);
	assert_int_equal(redir_endpoint_tune(&ep, fd), 0);
	assert_int_equal(sockopt(fd, IPPROTO_TCP, TCP_NODELAY), 0);
	assert_int_equal(sockopt(fd, SOL_SOCKET, SO_KEEPALIVE), 0);
	assert_int_equal(resolve("TCP:127.0.0.1:1,nodelay"), 0);
	assert_int_equal(redir_endpoint_tune(&ep, fd), 0);
	assert_int_not_equal(sockopt(fd, IPPROTO_TCP, TCP_NODELAY), 0);
	assert_int_equal(sockopt(fd, SOL_SOCKET, SO_KEEPALIVE), 0);
	assert_int_equal(resolve("TCP-LISTEN:1,keepalive"), 0);
	assert_int_equal(redir_endpoint_tune(&ep, fd), 0);
	assert_int_not_equal(sockopt(fd, SOL_SOCKET, SO_KEEPALIVE), 0);
	close(fd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_vsock_listen),
		cmocka_unit_test(test_vsock_connect),
		cmocka_unit_test(test_vsock_refused),
		cmocka_unit_test(test_unix_and_tcp),
		cmocka_unit_test(test_tcp_listen_families),
		cmocka_unit_test(test_user_group),
		cmocka_unit_test(test_tune),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
