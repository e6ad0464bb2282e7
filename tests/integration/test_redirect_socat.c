/* `vmio redirect` as a drop-in for socat: socat's address aliases, -u and
 * -U, STDIO, and the options nodelay, keepalive, connect-timeout=, mode=,
 * user= and group=, each checked from outside the process (the bytes at
 * both ends, the socket file, `ss`). Needs IPv6 on loopback (::1). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

#define BIG (1u << 20)

static uint8_t pattern[BIG];

static void pattern_init(void)
{
	for (size_t i = 0; i < sizeof(pattern); i++)
		pattern[i] = (uint8_t)((i * 131u) ^ (i >> 7) ^ (i >> 13));
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- sockets ---- */

static struct sockaddr_un unix_sa(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	return sa;
}

/* A loopback address of family (127.0.0.1 or ::1) and port. */
static socklen_t loop_sa(int family, uint16_t port, struct sockaddr_storage *ss)
{
	memset(ss, 0, sizeof(*ss));
	if (family == AF_INET6) {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;

		s6->sin6_family = AF_INET6;
		s6->sin6_addr = in6addr_loopback;
		s6->sin6_port = htons(port);
		return sizeof(*s6);
	}
	struct sockaddr_in *s4 = (struct sockaddr_in *)ss;

	s4->sin_family = AF_INET;
	s4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	s4->sin_port = htons(port);
	return sizeof(*s4);
}

static int listen_unix_backlog(const char *path, int backlog)
{
	struct sockaddr_un sa = unix_sa(path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	unlink(path);
	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(fd, backlog), 0);
	return fd;
}

static int listen_unix(const char *path)
{
	return listen_unix_backlog(path, 8);
}

/* A TCP listener on loopback; *port 0 picks one. */
static int listen_tcp(int family, uint16_t *port, int backlog)
{
	struct sockaddr_storage ss;
	socklen_t len = loop_sa(family, *port, &ss);
	int one = 1, fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(fd, (struct sockaddr *)&ss, len) || listen(fd, backlog))
		fail_msg("cannot listen on TCP %s: %s (this test needs IPv6 on loopback)",
			 family == AF_INET6 ? "[::1]" : "127.0.0.1",
			 strerror(errno));
	assert_int_equal(getsockname(fd, (struct sockaddr *)&ss, &len), 0);
	*port = ntohs(family == AF_INET6 ?
			      ((struct sockaddr_in6 *)&ss)->sin6_port :
			      ((struct sockaddr_in *)&ss)->sin_port);
	return fd;
}

/* A port nobody listens on right now, for the relay to take. */
static uint16_t free_port(void)
{
	uint16_t port = 0;
	int fd = listen_tcp(AF_INET6, &port, 1);

	close(fd);
	return port;
}

/* Connects, retrying until the relay is there (bounded). */
static int connect_retry(const struct sockaddr *sa, socklen_t len)
{
	for (int64_t end = now_ms() + HARNESS_WAIT_MS; now_ms() < end;) {
		int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);

		assert_true(fd >= 0);
		if (connect(fd, sa, len) == 0)
			return fd;
		close(fd);
		usleep(10000);
	}
	fail_msg("nothing to connect to (family %d)", sa->sa_family);
	return -1;
}

static int connect_unix(const char *path)
{
	struct sockaddr_un sa = unix_sa(path);

	return connect_retry((struct sockaddr *)&sa, sizeof(sa));
}

static int connect_tcp(int family, uint16_t port)
{
	struct sockaddr_storage ss;
	socklen_t len = loop_sa(family, port, &ss);

	return connect_retry((struct sockaddr *)&ss, len);
}

/* One connect attempt: 0 or errno. */
static int connect_once(int family, uint16_t port)
{
	struct sockaddr_storage ss;
	socklen_t len = loop_sa(family, port, &ss);
	int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0), rc;

	assert_true(fd >= 0);
	rc = connect(fd, (struct sockaddr *)&ss, len) ? errno : 0;
	close(fd);
	return rc;
}

/* Reads fd to its end, bounded: bytes read; *end is 0 for EOF or the
 * errno the stream ended with (ECONNRESET: the peer closed with our data
 * unread). */
static size_t read_to_end(int fd, uint8_t *buf, size_t cap, int *end)
{
	size_t got = 0;

	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ssize_t n;

		if (poll(&p, 1, HARNESS_WAIT_MS) != 1)
			fail_msg("no EOF after %zu bytes", got);
		n = read(fd, buf + got, cap - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			*end = n ? errno : 0;
			return got;
		}
		got += (size_t)n;
		if (got == cap)
			fail_msg("more than %zu bytes", cap);
	}
}

static void write_all(int fd, const void *buf, size_t n)
{
	const uint8_t *p = buf;

	while (n) {
		ssize_t w = write(fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			fail_msg("write: %s", strerror(errno));
		p += w;
		n -= (size_t)w;
	}
}

/* Sends msg, shuts down writing, and expects msg back then EOF. */
static void roundtrip(int fd, const char *msg)
{
	uint8_t buf[256];
	int end;

	write_all(fd, msg, strlen(msg));
	shutdown(fd, SHUT_WR);
	size_t n = read_to_end(fd, buf, sizeof(buf), &end);
	if (end || n != strlen(msg) || memcmp(buf, msg, n))
		fail_msg("'%s': got %zu bytes back, end %s", msg, n,
			 strerror(end));
	close(fd);
}

/* ---- servers: each a thread serving one listener ---- */

struct server {
	int lfd;
	unsigned conns;   /* to serve, one after the other */
	bool echo;        /* echo each; else: send greet, read to the end */
	bool shut_after_greet;
	const char *greet;
	uint8_t got[256]; /* not echo: what the last connection sent */
	size_t got_n;
	int got_end;
	pthread_t thread;
};

static void *server_main(void *opaque)
{
	static __thread uint8_t buf[65536];
	struct server *s = opaque;

	for (unsigned i = 0; i < s->conns; i++) {
		struct pollfd p = { .fd = s->lfd, .events = POLLIN };

		if (poll(&p, 1, HARNESS_WAIT_MS) != 1)
			break;
		int fd = accept4(s->lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			break;
		if (!s->echo) {
			if (s->greet)
				(void)!write(fd, s->greet, strlen(s->greet));
			if (s->shut_after_greet)
				shutdown(fd, SHUT_WR);
			s->got_n = 0;
			for (;;) {
				struct pollfd q = { .fd = fd, .events = POLLIN };
				ssize_t n;

				if (poll(&q, 1, HARNESS_WAIT_MS) != 1) {
					s->got_end = ETIMEDOUT;
					break;
				}
				n = read(fd, s->got + s->got_n,
					 sizeof(s->got) - s->got_n);
				if (n <= 0) {
					s->got_end = n ? errno : 0;
					break;
				}
				s->got_n += (size_t)n;
			}
			close(fd);
			continue;
		}
		for (;;) {
			struct pollfd q = { .fd = fd, .events = POLLIN };
			ssize_t n;

			if (poll(&q, 1, HARNESS_WAIT_MS) != 1)
				break;
			n = read(fd, buf, sizeof(buf));
			if (n <= 0)
				break;
			write_all(fd, buf, (size_t)n);
		}
		close(fd);
	}
	return NULL;
}

static void server_start(struct server *s)
{
	assert_int_equal(pthread_create(&s->thread, NULL, server_main, s), 0);
}

static void server_join(struct server *s)
{
	pthread_join(s->thread, NULL);
	close(s->lfd);
}

/* ---- vmio ---- */

/* text with {A} and {B} (the unix paths), {P} (the relay's port) and {Q}
 * (the server's) filled in. */
static const char *fill(char *out, size_t size, const char *text,
			uint16_t p, uint16_t q)
{
	size_t o = 0;

	for (const char *t = text; *t && o + 1 < size; t++) {
		if (t[0] == '{' && t[1] && t[2] == '}') {
			char v[128];

			switch (t[1]) {
			case 'A': snprintf(v, sizeof(v), "%s", harness_path("a.sock")); break;
			case 'B': snprintf(v, sizeof(v), "%s", harness_path("b.sock")); break;
			case 'P': snprintf(v, sizeof(v), "%u", p); break;
			default: snprintf(v, sizeof(v), "%u", q); break;
			}
			o += (size_t)snprintf(out + o, size - o, "%s", v);
			t += 2;
			continue;
		}
		out[o++] = *t;
	}
	out[o < size ? o : size - 1] = '\0';
	return out;
}

/* ---- the cases ---- */

/* Every alias of socat's for what vmio serves, through a real relay:
 * the client on ADDRESS1 ('u' unix, '4' 127.0.0.1, '6' ::1), an echo
 * server on ADDRESS2 (the same letters). */
static void test_aliases(void **state)
{
	static const struct {
		const char *a1, *a2;
		char client, server;
	} cases[] = {
		{ "UNIX-L:{A}", "UNIX:{B}", 'u', 'u' },
		{ "unix-listen:{A}", "Unix-Client:{B}", 'u', 'u' },
		{ "UNIX-LISTEN:{A}", "unix-connect:{B}", 'u', 'u' },
		{ "TCP-L:{P}", "UNIX-CONNECT:{B}", '4', 'u' },
		{ "tcp-l:{P}", "UNIX:{B}", '6', 'u' },
		{ "TCP-LISTEN:{P}", "UNIX:{B}", '6', 'u' },
		{ "TCP4-L:{P}", "UNIX:{B}", '4', 'u' },
		{ "tcp4-listen:{P}", "UNIX:{B}", '4', 'u' },
		{ "TCP6-L:{P}", "UNIX:{B}", '6', 'u' },
		{ "TCP6-LISTEN:{P}", "UNIX:{B}", '6', 'u' },
		{ "UNIX-L:{A}", "TCP:127.0.0.1:{Q}", 'u', '4' },
		{ "UNIX-L:{A}", "tcp-connect:127.0.0.1:{Q}", 'u', '4' },
		{ "UNIX-L:{A}", "TCP:[::1]:{Q}", 'u', '6' },
		{ "UNIX-L:{A}", "TCP4:127.0.0.1:{Q}", 'u', '4' },
		{ "UNIX-L:{A}", "TCP4-CONNECT:127.0.0.1:{Q}", 'u', '4' },
		{ "UNIX-L:{A}", "TCP6:[::1]:{Q}", 'u', '6' },
		{ "UNIX-L:{A}", "tcp6-connect:[::1]:{Q}", 'u', '6' },
	};
	char a1[256], a2[256], msg[64];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct server s = { .conns = 1, .echo = true };
		uint16_t p = free_port(), q = 0;
		int fd;

		if (cases[i].server == 'u')
			s.lfd = listen_unix(harness_path("b.sock"));
		else
			s.lfd = listen_tcp(cases[i].server == '6' ? AF_INET6 : AF_INET,
					   &q, 8);
		server_start(&s);
		fill(a1, sizeof(a1), cases[i].a1, p, q);
		fill(a2, sizeof(a2), cases[i].a2, p, q);
		pid_t pid = harness_spawn((const char *[]){ "redirect", a1, a2,
							    NULL });
		if (cases[i].client == 'u')
			fd = connect_unix(harness_path("a.sock"));
		else
			fd = connect_tcp(cases[i].client == '6' ? AF_INET6 : AF_INET,
					 p);
		snprintf(msg, sizeof(msg), "alias %s %s", cases[i].a1, cases[i].a2);
		roundtrip(fd, msg);
		server_join(&s);
		harness_expect_exit(pid, 0);
	}
}

/* What socat takes and vmio does not is refused, by name, as a usage
 * error (exit 2), before anything is opened. */
static void test_refused(void **state)
{
	static const char *const cases[][6] = {
		{ "redirect", "EXEC:ls", "UNIX:/nonexistent/b", NULL, "EXEC" },
		{ "redirect", "UDP-LISTEN:1", "-", NULL, "UDP-LISTEN" },
		{ "redirect", "OPENSSL:h:1", "-", NULL, "OPENSSL" },
		{ "redirect", "UNIX-L:/nonexistent/a,sndbuf=1", "-", NULL, "'sndbuf'" },
		{ "redirect", "-", "TCP:h:1,crnl", NULL, "'crnl'" },
		{ "redirect", "UNIX-CONNECT:/x,mode=600", "-", NULL, "'mode' does not apply" },
		{ "redirect", "UNIX-L:/nonexistent/a,user=no-such-user-zz", "-", NULL, "no such user" },
		{ "redirect", "-", "STDIO", NULL, "STDIO on both sides" },
		{ "redirect", "UNIX-L:/nonexistent/a,fork", "-", NULL, "STDIO with fork" },
	};
	static const char *const flags[][7] = {
		{ "redirect", "-u", "-U", "UNIX-L:/nonexistent/a", "-", NULL, "-u and -U" },
		{ "redirect", "-U", "UNIX-RECV:/nonexistent/a", "UNIX:/x", NULL, NULL, "-U with UNIX-RECV" },
	};
	char out[512], err[1024];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int st = harness_run(cases[i], HARNESS_WAIT_MS, out, sizeof(out),
				     err, sizeof(err));

		if (st < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 2 ||
		    !strstr(err, cases[i][4]))
			fail_msg("%s %s: status 0x%x, stderr '%s' (wanted '%s')",
				 cases[i][1], cases[i][2], st, err, cases[i][4]);
	}
	for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++) {
		int st = harness_run(flags[i], HARNESS_WAIT_MS, out, sizeof(out),
				     err, sizeof(err));

		if (st < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 2 ||
		    !strstr(err, flags[i][6]))
			fail_msg("%s: status 0x%x, stderr '%s'", flags[i][6], st,
				 err);
	}
}

/* -u: ADDRESS1 to ADDRESS2 only. The server's greeting is never read
 * (the client gets none of it), what the client sends arrives. */
static void test_one_way_u(void **state)
{
	const char *a = harness_path("a.sock");
	struct server s = { .lfd = listen_unix(harness_path("b.sock")),
			    .conns = 1, .greet = "from-b" };
	char a1[200], a2[200];
	uint8_t buf[64];
	int end;

	server_start(&s);
	snprintf(a1, sizeof(a1), "UNIX-LISTEN:%s", a);
	snprintf(a2, sizeof(a2), "UNIX-CONNECT:%s", harness_path("b.sock"));
	pid_t pid = harness_spawn((const char *[]){ "redirect", "-u", a1, a2,
						    NULL });
	int fd = connect_unix(a);

	write_all(fd, "to-b", 4);
	shutdown(fd, SHUT_WR);
	assert_int_equal(read_to_end(fd, buf, sizeof(buf), &end), 0);
	close(fd);
	server_join(&s);
	assert_int_equal(s.got_n, 4);
	assert_memory_equal(s.got, "to-b", 4);
	/* The end came after the data, as EOF, or as a reset for the
	 * greeting vmio left unread. */
	assert_true(s.got_end == 0 || s.got_end == ECONNRESET);
	harness_expect_exit(pid, 0);
}

/* -U: ADDRESS2 to ADDRESS1 only. The client's bytes are never read: the
 * server gets none, and the client's end is the reset of a peer that
 * closed with them unread. */
static void test_one_way_U(void **state)
{
	const char *a = harness_path("a.sock");
	struct server s = { .lfd = listen_unix(harness_path("b.sock")),
			    .conns = 1, .greet = "from-b",
			    .shut_after_greet = true };
	char a1[200], a2[200];
	uint8_t buf[64];
	int end;

	server_start(&s);
	snprintf(a1, sizeof(a1), "UNIX-L:%s", a);
	snprintf(a2, sizeof(a2), "UNIX:%s", harness_path("b.sock"));
	pid_t pid = harness_spawn((const char *[]){ "redirect", "-U", a1, a2,
						    NULL });
	int fd = connect_unix(a);

	write_all(fd, "to-b", 4);
	size_t n = read_to_end(fd, buf, sizeof(buf), &end);
	assert_int_equal(n, 6);
	assert_memory_equal(buf, "from-b", 6);
	assert_true(end == 0 || end == ECONNRESET);
	close(fd);
	server_join(&s);
	assert_int_equal(s.got_n, 0);
	harness_expect_exit(pid, 0);
}

/* Writes in to wfd (then closes it) while reading rfd to EOF into out;
 * both pipes, non-blocking. Returns the bytes read. */
static size_t pipe_duplex(int wfd, const uint8_t *in, size_t n, int rfd,
			  uint8_t *out, size_t cap)
{
	size_t sent = 0, got = 0;
	bool rd_done = false;

	fcntl(wfd, F_SETFL, O_NONBLOCK);
	fcntl(rfd, F_SETFL, O_NONBLOCK);
	if (!n) {
		close(wfd);
		wfd = -1;
	}
	while (wfd >= 0 || !rd_done) {
		struct pollfd p[2] = { { .fd = wfd, .events = POLLOUT },
				       { .fd = rd_done ? -1 : rfd, .events = POLLIN } };

		if (poll(p, 2, HARNESS_WAIT_MS) <= 0)
			fail_msg("stdio stalled: %zu sent, %zu read", sent, got);
		if (wfd >= 0 && p[0].revents) {
			ssize_t w = write(wfd, in + sent, n - sent);

			if (w < 0 && errno != EAGAIN)
				fail_msg("write to stdin: %s", strerror(errno));
			sent += w > 0 ? (size_t)w : 0;
			if (sent == n) {
				close(wfd);
				wfd = -1;
			}
		}
		if (!rd_done && p[1].revents) {
			ssize_t r = read(rfd, out + got, cap - got);

			if (r == 0)
				rd_done = true;
			else if (r < 0 && errno != EAGAIN)
				fail_msg("read stdout: %s", strerror(errno));
			else if (r > 0 && (got += (size_t)r) == cap)
				fail_msg("more than %zu bytes on stdout", cap);
		}
	}
	close(rfd);
	return got;
}

/* STDIO as ADDRESS1 ("-"), on pipes: stdin goes to an echo server and
 * comes back on stdout, byte for byte; closing stdin ends it all. */
static void test_stdio_pipes(void **state)
{
	static uint8_t out[BIG + 1];
	struct server s = { .lfd = listen_unix(harness_path("b.sock")),
			    .conns = 1, .echo = true };
	char a2[200];
	int in[2], o[2];

	assert_int_equal(pipe2(in, O_CLOEXEC), 0);
	assert_int_equal(pipe2(o, O_CLOEXEC), 0);
	server_start(&s);
	snprintf(a2, sizeof(a2), "UNIX:%s", harness_path("b.sock"));
	pid_t pid = harness_spawn_stdio((const char *[]){ "redirect", "-", a2,
							  NULL }, in[0], o[1]);
	close(in[0]);
	close(o[1]);
	size_t got = pipe_duplex(in[1], pattern, BIG, o[0], out, sizeof(out));
	assert_int_equal(got, BIG);
	assert_memory_equal(out, pattern, BIG);
	server_join(&s);
	harness_expect_exit(pid, 0);
}

/* STDIO as ADDRESS2: a unix client's bytes come out on stdout, and what
 * goes in on stdin reaches the client. */
static void test_stdio_address2(void **state)
{
	const char *a = harness_path("a.sock");
	char a1[200];
	uint8_t buf[64];
	int in[2], o[2], end;

	assert_int_equal(pipe2(in, O_CLOEXEC), 0);
	assert_int_equal(pipe2(o, O_CLOEXEC), 0);
	snprintf(a1, sizeof(a1), "UNIX-LISTEN:%s", a);
	pid_t pid = harness_spawn_stdio((const char *[]){ "redirect", a1,
							  "STDIO", NULL },
					in[0], o[1]);
	close(in[0]);
	close(o[1]);
	int fd = connect_unix(a);

	write_all(fd, "abc", 3);
	shutdown(fd, SHUT_WR);
	assert_int_equal(read_to_end(o[0], buf, sizeof(buf), &end), 3);
	assert_int_equal(end, 0);
	assert_memory_equal(buf, "abc", 3);
	write_all(in[1], "xyz", 3);
	close(in[1]);
	assert_int_equal(read_to_end(fd, buf, sizeof(buf), &end), 3);
	assert_int_equal(end, 0);
	assert_memory_equal(buf, "xyz", 3);
	close(fd);
	close(o[0]);
	harness_expect_exit(pid, 0);
}

/* Datagrams to stdout (the message engine into a pipe): each one's
 * bytes in order, and the empty datagram (EOF) closes stdout. */
static void test_stdio_datagrams(void **state)
{
	const char *r = harness_path("r.sock");
	struct sockaddr_un sa = unix_sa(r);
	char a1[200];
	uint8_t buf[64];
	int o[2], end, fd = -1;

	assert_int_equal(pipe2(o, O_CLOEXEC), 0);
	snprintf(a1, sizeof(a1), "UNIX-RECV:%s", r);
	pid_t pid = harness_spawn_stdio((const char *[]){ "redirect", a1, "-",
							  NULL }, -1, o[1]);
	close(o[1]);
	for (int64_t t = now_ms() + HARNESS_WAIT_MS; now_ms() < t; usleep(10000)) {
		fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		if (!connect(fd, (struct sockaddr *)&sa, sizeof(sa)))
			break;
		close(fd);
		fd = -1;
	}
	assert_true(fd >= 0);
	assert_int_equal(send(fd, "a", 1, 0), 1);
	assert_int_equal(send(fd, "bb", 2, 0), 2);
	assert_int_equal(send(fd, "ccc", 3, 0), 3);
	assert_int_equal(send(fd, "", 0, 0), 0);
	assert_int_equal(read_to_end(o[0], buf, sizeof(buf), &end), 6);
	assert_int_equal(end, 0);
	assert_memory_equal(buf, "abbccc", 6);
	close(fd);
	close(o[0]);
	harness_expect_exit(pid, 0);
}

/* Files epoll will not watch: stdin from a regular file (and from
 * /dev/null), stdout into one. */
static void test_stdio_files(void **state)
{
	static uint8_t out[BIG];
	const char *inp = harness_path("stdin.bin"), *outp = harness_path("stdout.bin");
	char a2[200];

	snprintf(a2, sizeof(a2), "UNIX:%s", harness_path("b.sock"));
	int in = open(inp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	int o = open(outp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	assert_true(in >= 0 && o >= 0);
	write_all(in, pattern, BIG);
	assert_int_equal(lseek(in, 0, SEEK_SET), 0);

	struct server s = { .lfd = listen_unix(harness_path("b.sock")),
			    .conns = 1, .echo = true };
	server_start(&s);
	pid_t pid = harness_spawn_stdio((const char *[]){ "redirect", "-", a2,
							  NULL }, in, o);
	harness_expect_exit(pid, 0);
	server_join(&s);
	assert_int_equal(pread(o, out, sizeof(out), 0), BIG);
	assert_memory_equal(out, pattern, BIG);
	close(in);
	close(o);

	/* /dev/null: EOF at once, passed on; the server gets nothing. */
	struct server s2 = { .lfd = listen_unix(harness_path("b.sock")),
			     .conns = 1 };
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	server_start(&s2);
	pid = harness_spawn_stdio((const char *[]){ "redirect", "-", a2, NULL },
				  null, null);
	harness_expect_exit(pid, 0);
	server_join(&s2);
	assert_int_equal(s2.got_n, 0);
	assert_int_equal(s2.got_end, 0);
	close(null);
}

/* mode=, user=, group= on the socket files vmio makes, there before the
 * listener takes connections. As root the owner is anyone's; otherwise
 * our own (chown to oneself is allowed). */
static void test_unix_perms(void **state)
{
	const char *a = harness_path("a.sock"), *r = harness_path("r.sock");
	unsigned uid = geteuid() ? (unsigned)geteuid() : 12345;
	unsigned gid = geteuid() ? (unsigned)getegid() : 54321;
	char a1[256], a2[200];
	struct stat st;

	snprintf(a1, sizeof(a1), "UNIX-L:%s,fork,mode=640,user=%u,group=%u", a,
		 uid, gid);
	snprintf(a2, sizeof(a2), "UNIX:%s", harness_path("nobody.sock"));
	pid_t pid = harness_spawn((const char *[]){ "redirect", a1, a2, NULL });
	if (!harness_wait_socket(a, HARNESS_WAIT_MS))
		fail_msg("vmio redirect does not listen on %s", a);
	assert_int_equal(stat(a, &st), 0);
	assert_true(S_ISSOCK(st.st_mode));
	assert_int_equal(st.st_mode & 07777, 0640);
	assert_int_equal(st.st_uid, uid);
	assert_int_equal(st.st_gid, gid);
	harness_stop(pid, HARNESS_WAIT_MS);

	/* UNIX-RECV connects ADDRESS2 at once: give it something there. */
	int lfd = listen_unix(harness_path("b.sock"));
	snprintf(a1, sizeof(a1), "UNIX-RECV:%s,perm=600", r);
	snprintf(a2, sizeof(a2), "UNIX:%s", harness_path("b.sock"));
	pid = harness_spawn((const char *[]){ "redirect", a1, a2, NULL });
	/* A datagram socket receives from its bind on, so its file must
	 * have the mode from the moment it exists. */
	for (int64_t end = now_ms() + HARNESS_WAIT_MS;
	     stat(r, &st) < 0 && now_ms() < end;)
		usleep(1000);
	assert_int_equal(stat(r, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0600);
	harness_stop(pid, HARNESS_WAIT_MS);
	close(lfd);
}

/* A TCP listener whose accept queue is full (backlog 0, one connection
 * in it) drops further SYNs: a connect to it never completes, so only
 * connect-timeout= ends it. */
static int full_listener(uint16_t *port, int *queued)
{
	int lfd = listen_tcp(AF_INET, port, 0);

	*queued = connect_tcp(AF_INET, *port);
	return lfd;
}

/* ADDRESS2 a2 (connect-timeout=0.3) cannot be reached: the timer ends
 * the client's connection, and vmio exits 1 naming the timeout. */
static void address2_times_out(const char *a2)
{
	char a1[200];
	uint8_t buf[16];
	int end;

	harness_log_clear();
	snprintf(a1, sizeof(a1), "UNIX-LISTEN:%s", harness_path("a.sock"));
	pid_t pid = harness_spawn((const char *[]){ "redirect", a1, a2, NULL });
	int fd = connect_unix(harness_path("a.sock"));
	int64_t t0 = now_ms();

	assert_int_equal(read_to_end(fd, buf, sizeof(buf), &end), 0);
	assert_true(now_ms() - t0 >= 250);
	close(fd);
	harness_expect_exit(pid, 1);
	assert_true(harness_log_contains("timed out"));
}

static void test_connect_timeout(void **state)
{
	uint16_t port = 0;
	int queued, lfd = full_listener(&port, &queued);
	char a1[200], a2[200];
	int64_t t0;

	snprintf(a2, sizeof(a2), "TCP:127.0.0.1:%u,connect-timeout=0.3", port);
	address2_times_out(a2);

	/* ADDRESS1: before anything else runs. */
	harness_log_clear();
	snprintf(a1, sizeof(a1), "TCP4:127.0.0.1:%u,connect-timeout=0.3", port);
	snprintf(a2, sizeof(a2), "UNIX:%s", harness_path("nobody.sock"));
	t0 = now_ms();
	pid_t pid = harness_spawn((const char *[]){ "redirect", a1, a2, NULL });
	harness_expect_exit(pid, 1);
	assert_true(now_ms() - t0 >= 250);
	assert_true(harness_log_contains("timed out"));
	close(queued);
	close(lfd);
}

/* A unix listener whose accept queue is full refuses a non-blocking
 * connect at once (EAGAIN); socat's blocking connect waits for room, and
 * so does vmio, retrying on a timer: bounded by connect-timeout=, and
 * through once the listener accepts. */
static void test_unix_queue_full(void **state)
{
	const char *a = harness_path("a.sock"), *b = harness_path("b.sock");
	char a1[200], a2[200];
	uint8_t buf[16];
	int end;

	/* Backlog 0 holds one connection: the test's own. */
	int lfd = listen_unix_backlog(b, 0), queued = connect_unix(b);

	snprintf(a2, sizeof(a2), "UNIX:%s,connect-timeout=0.3", b);
	address2_times_out(a2);

	/* No timeout: vmio waits until the queue has room, then relays. */
	harness_log_clear();
	snprintf(a1, sizeof(a1), "UNIX-LISTEN:%s", a);
	snprintf(a2, sizeof(a2), "UNIX-CONNECT:%s", b);
	pid_t pid = harness_spawn((const char *[]){ "redirect", "-d", a1, a2,
						    NULL });
	int fd = connect_unix(a);
	write_all(fd, "late", 4);
	shutdown(fd, SHUT_WR);
	for (int64_t end2 = now_ms() + HARNESS_WAIT_MS;
	     !harness_log_contains("accept queue is full: retrying") &&
	     now_ms() < end2;)
		usleep(10000);
	assert_true(harness_log_contains("accept queue is full: retrying"));
	/* vmio is retrying: make room, then serve it. */
	int first = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	assert_true(first >= 0);
	close(first);
	close(queued);
	struct server s = { .lfd = lfd, .conns = 1, .echo = true };
	server_start(&s);
	assert_int_equal(read_to_end(fd, buf, sizeof(buf), &end), 4);
	assert_int_equal(end, 0);
	assert_memory_equal(buf, "late", 4);
	close(fd);
	server_join(&s);
	harness_expect_exit(pid, 0);
}

/* What `ss` says of the established TCP sockets on port (as source if
 * sport, else as destination). */
static void ss_line(uint16_t port, bool sport, char *out, size_t size)
{
	char cmd[128];
	FILE *f;
	size_t n;

	snprintf(cmd, sizeof(cmd),
		 "ss -Htnoe state established '( %s = :%u )' 2>&1",
		 sport ? "sport" : "dport", port);
	f = popen(cmd, "r");
	if (!f)
		fail_msg("cannot run ss (iproute2): %s", strerror(errno));
	n = fread(out, 1, size - 1, f);
	out[n] = '\0';
	if (pclose(f) != 0)
		fail_msg("ss failed (iproute2 is needed): %s", out);
}

/* keepalive is visible from outside: ss shows the keepalive timer on
 * the socket vmio accepted, and on the one it connected; nodelay (not
 * visible there, see the unit test) rides along and must not break
 * anything. */
static void test_keepalive_nodelay(void **state)
{
	uint16_t p = free_port(), q = 0;
	struct server s = { .lfd = listen_tcp(AF_INET, &q, 8), .conns = 1,
			    .echo = true };
	char a1[128], a2[128], ss[2048];

	server_start(&s);
	snprintf(a1, sizeof(a1), "TCP-LISTEN:%u,nodelay,keepalive", p);
	snprintf(a2, sizeof(a2), "TCP:127.0.0.1:%u,keepalive,nodelay", q);
	pid_t pid = harness_spawn((const char *[]){ "redirect", a1, a2, NULL });
	int fd = connect_tcp(AF_INET, p);

	/* Once a byte is back, both of vmio's sockets exist. */
	write_all(fd, "k", 1);
	{
		struct pollfd pf = { .fd = fd, .events = POLLIN };
		char c;

		assert_int_equal(poll(&pf, 1, HARNESS_WAIT_MS), 1);
		assert_int_equal(read(fd, &c, 1), 1);
	}
	ss_line(p, true, ss, sizeof(ss));
	if (!strstr(ss, "keepalive"))
		fail_msg("no keepalive timer on the accepted socket: %s", ss);
	ss_line(q, false, ss, sizeof(ss));
	if (!strstr(ss, "keepalive"))
		fail_msg("no keepalive timer on the connected socket: %s", ss);
	roundtrip(fd, "rest");
	server_join(&s);
	harness_expect_exit(pid, 0);
}

/* TCP-LISTEN serves IPv6 and IPv4 on one socket; TCP4-LISTEN and
 * TCP6-LISTEN one family each. */
static void test_tcp_listen_families(void **state)
{
	static const struct {
		const char *kw;
		bool v4, v6;
	} cases[] = {
		{ "TCP-LISTEN", true, true },
		{ "TCP4-LISTEN", true, false },
		{ "TCP6-LISTEN", false, true },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		unsigned n = cases[i].v4 + cases[i].v6;
		struct server s = { .lfd = listen_unix(harness_path("b.sock")),
				    .conns = n, .echo = true };
		uint16_t p = free_port();
		char a1[64], a2[200];

		server_start(&s);
		snprintf(a1, sizeof(a1), "%s:%u,fork", cases[i].kw, p);
		snprintf(a2, sizeof(a2), "UNIX:%s", harness_path("b.sock"));
		pid_t pid = harness_spawn((const char *[]){ "redirect", a1, a2,
							    NULL });
		int first = cases[i].v6 ? AF_INET6 : AF_INET;

		roundtrip(connect_tcp(first, p), "first family");
		if (n == 2)
			roundtrip(connect_tcp(AF_INET, p), "IPv4 too");
		else
			assert_int_equal(connect_once(first == AF_INET6 ? AF_INET :
								      AF_INET6, p),
					 ECONNREFUSED);
		server_join(&s);
		int st = harness_stop(pid, HARNESS_WAIT_MS);
		assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_aliases),
		cmocka_unit_test(test_refused),
		cmocka_unit_test(test_one_way_u),
		cmocka_unit_test(test_one_way_U),
		cmocka_unit_test(test_stdio_pipes),
		cmocka_unit_test(test_stdio_address2),
		cmocka_unit_test(test_stdio_files),
		cmocka_unit_test(test_stdio_datagrams),
		cmocka_unit_test(test_unix_perms),
		cmocka_unit_test(test_connect_timeout),
		cmocka_unit_test(test_unix_queue_full),
		cmocka_unit_test(test_keepalive_nodelay),
		cmocka_unit_test(test_tcp_listen_families),
	};

	signal(SIGPIPE, SIG_IGN);
	pattern_init();
	harness_test_filter();
	return cmocka_run_group_tests(tests, NULL, harness_group_teardown);
}
