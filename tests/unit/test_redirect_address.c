/* socat-style address parsing for vmio redirect: every keyword, every
 * option, and each way an address can be wrong. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>
#include <sys/socket.h>

#include "redirect/address.h"

static struct redir_addr a;
static char err[256];

static void ok(const char *text)
{
	err[0] = '\0';
	if (redir_addr_parse(text, &a, err, sizeof(err)))
		fail_msg("'%s' refused: %s", text, err);
}

/* The text is refused and the message names what is wrong. */
static void bad(const char *text, const char *names)
{
	err[0] = '\0';
	if (!redir_addr_parse(text, &a, err, sizeof(err)))
		fail_msg("'%s' accepted", text);
	if (!strstr(err, names))
		fail_msg("'%s': message '%s' lacks '%s'", text, err, names);
}

static void test_unix_keywords(void **state)
{
	ok("UNIX-LISTEN:/tmp/x.sock");
	assert_int_equal(a.kind, REDIR_UNIX_LISTEN);
	assert_int_equal(a.family, AF_UNIX);
	assert_int_equal(a.socktype, SOCK_STREAM);
	assert_string_equal(a.path, "/tmp/x.sock");
	assert_true(redir_addr_is_passive(&a));
	assert_false(a.fork);

	ok("unix-connect:rel/path");
	assert_int_equal(a.kind, REDIR_UNIX_CONNECT);
	assert_string_equal(a.path, "rel/path");
	assert_string_equal(a.keyword, "UNIX-CONNECT");
	assert_false(redir_addr_is_passive(&a));

	ok("Unix-Client:/c");
	assert_int_equal(a.kind, REDIR_UNIX_CLIENT);
	assert_int_equal(a.socktype, SOCK_STREAM);

	ok("UNIX-RECV:/r");
	assert_int_equal(a.kind, REDIR_UNIX_RECV);
	assert_int_equal(a.socktype, SOCK_DGRAM);
	assert_true(redir_addr_is_passive(&a));

	ok("UNIX-SENDTO:/s");
	assert_int_equal(a.kind, REDIR_UNIX_SENDTO);
	assert_int_equal(a.socktype, SOCK_DGRAM);
	assert_false(redir_addr_is_passive(&a));
}

static void test_tcp_keywords(void **state)
{
	ok("TCP-LISTEN:8080");
	assert_int_equal(a.kind, REDIR_TCP_LISTEN);
	assert_int_equal(a.family, AF_INET);
	assert_int_equal(a.port, 8080);
	ok("tcp4-listen:0");
	assert_int_equal(a.family, AF_INET);
	assert_int_equal(a.port, 0);
	ok("TCP6-LISTEN:65535");
	assert_int_equal(a.family, AF_INET6);
	assert_int_equal(a.port, 65535);

	ok("TCP:localhost:80");
	assert_int_equal(a.kind, REDIR_TCP_CONNECT);
	assert_int_equal(a.family, AF_UNSPEC);
	assert_string_equal(a.host, "localhost");
	assert_int_equal(a.port, 80);
	ok("tcp4:127.0.0.1:1");
	assert_int_equal(a.family, AF_INET);
	assert_string_equal(a.host, "127.0.0.1");
	ok("TCP6:[::1]:443");
	assert_int_equal(a.family, AF_INET6);
	assert_string_equal(a.host, "::1");
	assert_int_equal(a.port, 443);
	/* Unbracketed, the port is after the last colon. */
	ok("TCP6:fe80::1:22");
	assert_string_equal(a.host, "fe80::1");
	assert_int_equal(a.port, 22);
}

static void test_vsock_keywords(void **state)
{
	ok("VSOCK-LISTEN:1234");
	assert_int_equal(a.kind, REDIR_VSOCK_LISTEN);
	assert_int_equal(a.family, AF_VSOCK);
	assert_int_equal(a.port, 1234);
	ok("vsock-listen:4294967295");
	assert_int_equal(a.port, UINT32_MAX);
	ok("VSOCK-CONNECT:2:5000");
	assert_int_equal(a.kind, REDIR_VSOCK_CONNECT);
	assert_int_equal(a.cid, 2);
	assert_int_equal(a.port, 5000);
	/* type= parses as in socat; resolving refuses all but stream. */
	ok("VSOCK-LISTEN:1,type=2");
	assert_int_equal(a.socktype, SOCK_DGRAM);
	ok("VSOCK-CONNECT:2:1,type=5");
	assert_int_equal(a.socktype, SOCK_SEQPACKET);
}

static void test_options(void **state)
{
	ok("UNIX-LISTEN:/x,fork,reuseaddr,unlink-early,backlog=16");
	assert_true(a.fork);
	assert_true(a.reuseaddr);
	assert_true(a.unlink_early);
	assert_int_equal(a.backlog, 16);
	assert_string_equal(a.path, "/x");

	ok("UNIX-LISTEN:/x,FORK,Type=5");
	assert_true(a.fork);
	assert_int_equal(a.socktype, SOCK_SEQPACKET);
	ok("UNIX-CONNECT:/x,type=5");
	assert_int_equal(a.socktype, SOCK_SEQPACKET);
	ok("UNIX-CLIENT:/x,type=1");
	assert_int_equal(a.socktype, SOCK_STREAM);

	ok("UNIX-CONNECT:/x,bind=/tmp/me");
	assert_true(a.has_bind);
	assert_string_equal(a.bind, "/tmp/me");
	ok("TCP:h:1,bind=10.0.0.1:5000,reuseaddr");
	assert_string_equal(a.bind, "10.0.0.1:5000");
	assert_true(a.reuseaddr);
	ok("TCP-LISTEN:80,bind=127.0.0.1,fork,backlog=65535");
	assert_string_equal(a.bind, "127.0.0.1");
	assert_int_equal(a.backlog, 65535);
	ok("UNIX-RECV:/r,fork,unlink-early");
	assert_true(a.fork);
	ok("VSOCK-LISTEN:1,fork,backlog=1");
	assert_true(a.fork);
}

static void test_bad_keywords(void **state)
{
	bad("", "unsupported address ''");
	bad("OPEN:/etc/passwd", "unsupported address 'OPEN'");
	bad("EXEC:sh", "'EXEC'");
	bad("UDP:h:1", "'UDP'");
	bad("-", "'-'");
	bad("UNIX-LISTEN", "missing ':'");
	bad("TCP,fork", "missing ':'");
	bad("UNIX-LISTENX:/a", "'UNIX-LISTENX'");
}

static void test_bad_params(void **state)
{
	char longpath[200];

	bad("UNIX-LISTEN:", "empty path");
	bad("UNIX-CONNECT:,fork", "empty path");
	memset(longpath, 'p', sizeof(longpath));
	memcpy(longpath, "UNIX-LISTEN:", 12);
	longpath[sizeof(longpath) - 1] = '\0';
	bad(longpath, "path longer than");
	bad("TCP-LISTEN:65536", "bad port '65536'");
	bad("TCP-LISTEN:", "bad port");
	bad("TCP-LISTEN:-1", "bad port");
	bad("TCP-LISTEN:0x50", "bad port");
	bad("TCP-LISTEN:80x", "bad port");
	bad("TCP:host", "no ':port'");
	bad("TCP::80", "bad host");
	bad("TCP:h:0", "bad port '0'");
	bad("TCP:h:99999", "bad port");
	bad("TCP6:[::1]", "[ipv6-address]:port");
	bad("TCP6:[::1:80", "[ipv6-address]:port");
	bad("VSOCK-LISTEN:4294967296", "bad port");
	bad("VSOCK-CONNECT:2", "cid:port");
	bad("VSOCK-CONNECT:x:1", "cid:port");
	bad("VSOCK-CONNECT:2:", "cid:port");
}

static void test_bad_options(void **state)
{
	bad("UNIX-LISTEN:/x,nonsense", "unsupported option 'nonsense'");
	bad("UNIX-LISTEN:/x,mode=600", "unsupported option 'mode'");
	bad("UNIX-LISTEN:/x,averyveryveryverylongoptionnamethatdoesnotfit",
	    "unsupported option");
	bad("UNIX-LISTEN:/x,", "empty option");
	bad("UNIX-LISTEN:/x,,fork", "empty option");
	bad("UNIX-LISTEN:/x,=1", "unsupported option '=1'");
	bad("UNIX-LISTEN:/x,fork=1", "'fork' takes no value");
	bad("UNIX-CONNECT:/x,fork", "'fork' does not apply to UNIX-CONNECT");
	bad("TCP:h:1,fork", "'fork' does not apply to TCP");
	bad("UNIX-CONNECT:/x,unlink-early", "'unlink-early' does not apply");
	bad("TCP-LISTEN:1,unlink-early", "'unlink-early' does not apply");
	bad("UNIX-LISTEN:/x,bind=/y", "'bind' does not apply to UNIX-LISTEN");
	bad("VSOCK-CONNECT:2:1,bind=x", "'bind' does not apply");
	bad("TCP:h:1,bind", "'bind' needs '=value'");
	bad("TCP:h:1,bind=", "'bind': bad value");
	bad("UNIX-LISTEN:/x,backlog=0", "'backlog'");
	bad("UNIX-LISTEN:/x,backlog=65536", "'backlog'");
	bad("UNIX-LISTEN:/x,backlog=abc", "'backlog'");
	bad("UNIX-CONNECT:/x,backlog=4", "'backlog' does not apply");
	bad("UNIX-LISTEN:/x,type=2", "'type': '2' is not supported");
	bad("UNIX-LISTEN:/x,type=", "'type'");
	bad("TCP-LISTEN:1,type=5", "'type' does not apply to TCP-LISTEN");
	bad("UNIX-RECV:/r,type=5", "'type' does not apply to UNIX-RECV");
	bad("VSOCK-LISTEN:1,type=3", "'type': '3' is not supported");
	bad("VSOCK-LISTEN:1,bind=2", "'bind' does not apply to VSOCK-LISTEN");
	bad("UNIX-LISTEN:/x,type", "'type' needs '=value'");
	bad("UNIX-LISTEN:/x,backlog", "'backlog' needs '=value'");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_unix_keywords),
		cmocka_unit_test(test_tcp_keywords),
		cmocka_unit_test(test_vsock_keywords),
		cmocka_unit_test(test_options),
		cmocka_unit_test(test_bad_keywords),
		cmocka_unit_test(test_bad_params),
		cmocka_unit_test(test_bad_options),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
