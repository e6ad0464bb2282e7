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
	/* No version: dual-stack (resolved to ::, or 0.0.0.0 without
	 * IPv6). */
	ok("TCP-LISTEN:8080");
	assert_int_equal(a.kind, REDIR_TCP_LISTEN);
	assert_int_equal(a.family, AF_UNSPEC);
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

/* vsock-buffer=: not given is the engine's choice, 0 the kernel's, else
 * a size with an optional binary suffix; vsock addresses only. */
static void test_vsock_buffer(void **state)
{
	ok("VSOCK-CONNECT:2:1");
	assert_int_equal(a.vsock_buffer, REDIR_VSOCK_BUFFER_UNSET);
	ok("VSOCK-CONNECT:2:1,vsock-buffer=0");
	assert_int_equal(a.vsock_buffer, 0);
	ok("VSOCK-CONNECT:2:1,vsock-buffer=4m");
	assert_int_equal(a.vsock_buffer, 4u << 20);
	ok("VSOCK-LISTEN:1,VSOCK-BUFFER=512K");
	assert_int_equal(a.vsock_buffer, 512u << 10);
	ok("VSOCK-CONNECT:2:1,vsock-buffer=4096");
	assert_int_equal(a.vsock_buffer, 4096);
	ok("VSOCK-CONNECT:2:1,vsock-buffer=64m");
	assert_int_equal(a.vsock_buffer, REDIR_VSOCK_BUFFER_MAX);
	bad("VSOCK-CONNECT:2:1,vsock-buffer=4095", "'4095' is not 0 (the kernel's) or 4k to 64m");
	bad("VSOCK-CONNECT:2:1,vsock-buffer=65m", "'65m' is not");
	bad("VSOCK-CONNECT:2:1,vsock-buffer=1g", "'1g' is not");
	bad("VSOCK-CONNECT:2:1,vsock-buffer=4x", "'4x' is not");
	bad("VSOCK-CONNECT:2:1,vsock-buffer=m", "'m' is not");
	bad("VSOCK-CONNECT:2:1,vsock-buffer=-1", "'-1' is not");
	bad("VSOCK-CONNECT:2:1,vsock-buffer=99999999999999999999999k", "is not");
	bad("VSOCK-CONNECT:2:1,vsock-buffer", "needs '=value'");
	bad("UNIX-CONNECT:/x,vsock-buffer=1m", "vsock-buffer");
	bad("TCP:h:1,vsock-buffer=1m", "vsock-buffer");
	ok("UNIX-CONNECT:/x");
	assert_int_equal(a.vsock_buffer, 0);
}

/* socat's aliases (socat(1), ADDRESS TYPES), messages in the canonical
 * spelling. */
static void test_aliases(void **state)
{
	static const struct {
		const char *text;
		enum redir_kind kind;
		int family;
		const char *keyword;
	} cases[] = {
		{ "UNIX-L:/x", REDIR_UNIX_LISTEN, AF_UNIX, "UNIX-LISTEN" },
		{ "unix-l:/x", REDIR_UNIX_LISTEN, AF_UNIX, "UNIX-LISTEN" },
		{ "UNIX:/x", REDIR_UNIX_CLIENT, AF_UNIX, "UNIX-CLIENT" },
		{ "unix-client:/x", REDIR_UNIX_CLIENT, AF_UNIX, "UNIX-CLIENT" },
		{ "Unix-Connect:/x", REDIR_UNIX_CONNECT, AF_UNIX, "UNIX-CONNECT" },
		{ "TCP-L:1", REDIR_TCP_LISTEN, AF_UNSPEC, "TCP-LISTEN" },
		{ "tcp-listen:1", REDIR_TCP_LISTEN, AF_UNSPEC, "TCP-LISTEN" },
		{ "TCP4-L:1", REDIR_TCP_LISTEN, AF_INET, "TCP4-LISTEN" },
		{ "TCP6-L:1", REDIR_TCP_LISTEN, AF_INET6, "TCP6-LISTEN" },
		{ "TCP-CONNECT:h:1", REDIR_TCP_CONNECT, AF_UNSPEC, "TCP" },
		{ "tcp4-connect:h:1", REDIR_TCP_CONNECT, AF_INET, "TCP4" },
		{ "TCP6-CONNECT:[::1]:1", REDIR_TCP_CONNECT, AF_INET6, "TCP6" },
		{ "VSOCK-L:1", REDIR_VSOCK_LISTEN, AF_VSOCK, "VSOCK-LISTEN" },
		{ "STDIO", REDIR_STDIO, AF_UNSPEC, "STDIO" },
		{ "stdio", REDIR_STDIO, AF_UNSPEC, "STDIO" },
		{ "-", REDIR_STDIO, AF_UNSPEC, "STDIO" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		ok(cases[i].text);
		if (a.kind != cases[i].kind || a.family != cases[i].family ||
		    strcmp(a.keyword, cases[i].keyword))
			fail_msg("'%s': kind %d family %d keyword %s",
				 cases[i].text, a.kind, a.family, a.keyword);
	}
	ok("UNIX-L:/x,fork");
	assert_true(a.fork);
	assert_false(redir_addr_is_passive(&(struct redir_addr){ .kind = REDIR_STDIO }));
	assert_true(redir_addr_connects(&(struct redir_addr){ .kind = REDIR_TCP_CONNECT }));
	assert_false(redir_addr_connects(&(struct redir_addr){ .kind = REDIR_STDIO }));
}

static void test_socat_options(void **state)
{
	ok("TCP:h:1,nodelay,keepalive,connect-timeout=2.5");
	assert_true(a.nodelay);
	assert_true(a.keepalive);
	assert_int_equal(a.connect_timeout_ns, 2500000000ull);
	ok("TCP-LISTEN:1,tcp-nodelay,so-keepalive,so-reuseaddr");
	assert_true(a.nodelay);
	assert_true(a.keepalive);
	assert_true(a.reuseaddr);
	ok("UNIX-CONNECT:/x,connect-timeout=.000001");
	assert_int_equal(a.connect_timeout_ns, 1000);
	ok("UNIX-CLIENT:/x,connect-timeout=86400");
	assert_int_equal(a.connect_timeout_ns, 86400ull * 1000000000u);
	ok("VSOCK-CONNECT:2:1,connect-timeout=1");
	ok("UNIX-SENDTO:/x,connect-timeout=1");
	ok("UNIX-LISTEN:/x,mode=0660,user=nobody,group=0");
	assert_true(a.has_mode);
	assert_int_equal(a.mode, 0660);
	assert_string_equal(a.user, "nobody");
	assert_string_equal(a.group, "0");
	ok("UNIX-RECV:/x,perm=7777,owner=1");
	assert_int_equal(a.mode, 07777);
	assert_string_equal(a.user, "1");
	ok("UNIX-LISTEN:/x,mode=0");
	assert_true(a.has_mode);
	assert_int_equal(a.mode, 0);
	ok("UNIX-LISTEN:/x");
	assert_false(a.has_mode);
	assert_string_equal(a.user, "");
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
	/* socat's types that vmio does not serve are named as socat's. */
	bad("OPEN:/etc/passwd", "socat's address type OPEN is not supported");
	bad("exec:sh", "socat's address type EXEC");
	bad("UDP:h:1", "address type UDP ");
	bad("UNIX-RECVFROM:/x", "address type UNIX-RECVFROM ");
	bad("ABSTRACT-LISTEN:x", "address type ABSTRACT-LISTEN ");
	bad("STDIN", "address type STDIN ");
	bad("PIPE", "address type PIPE ");
	bad("FOO:x", "unsupported address 'FOO'");
	bad("STDIO:x", "STDIO takes no ':' parameters");
	bad("-:x", "STDIO takes no ':' parameters");
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
	bad("UNIX-LISTEN:/x,sndbuf=4096", "unsupported option 'sndbuf'");
	bad("TCP:h:1,crlf", "unsupported option 'crlf'");
	bad("UNIX-CONNECT:/x,mode=600", "'mode' does not apply to UNIX-CONNECT");
	bad("UNIX-LISTEN:/x,mode=800", "'mode': '800' is not an octal mode");
	bad("UNIX-LISTEN:/x,mode=17777", "is not an octal mode");
	bad("UNIX-LISTEN:/x,mode=", "is not an octal mode");
	bad("UNIX-LISTEN:/x,mode", "'mode' needs '=value'");
	bad("TCP-LISTEN:1,user=root", "'user' does not apply to TCP-LISTEN");
	bad("UNIX-CONNECT:/x,group=0", "'group' does not apply");
	bad("UNIX-LISTEN:/x,user=", "'user': '' is not a user or group name");
	bad("UNIX-LISTEN:/x,nodelay", "'nodelay' does not apply to UNIX-LISTEN");
	bad("UNIX-CONNECT:/x,keepalive", "'keepalive' does not apply");
	bad("TCP:h:1,nodelay=1", "'nodelay' takes no value");
	bad("TCP-LISTEN:1,connect-timeout=1", "'connect-timeout' does not apply to TCP-LISTEN");
	bad("TCP:h:1,connect-timeout", "'connect-timeout' needs '=value'");
	bad("TCP:h:1,connect-timeout=0", "'connect-timeout': '0' is not");
	bad("TCP:h:1,connect-timeout=-1", "'connect-timeout'");
	bad("TCP:h:1,connect-timeout=1.", "'connect-timeout'");
	bad("TCP:h:1,connect-timeout=0.0000001", "'connect-timeout'");
	bad("TCP:h:1,connect-timeout=86401", "'connect-timeout'");
	bad("TCP:h:1,connect-timeout=1e3", "'connect-timeout'");
	bad("STDIO,fork", "'fork' does not apply to STDIO");
	bad("-,reuseaddr", "'reuseaddr' does not apply to STDIO");
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
		cmocka_unit_test(test_vsock_buffer),
		cmocka_unit_test(test_options),
		cmocka_unit_test(test_aliases),
		cmocka_unit_test(test_socat_options),
		cmocka_unit_test(test_bad_keywords),
		cmocka_unit_test(test_bad_params),
		cmocka_unit_test(test_bad_options),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
