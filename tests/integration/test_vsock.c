/* `vmio vsock` in another process, with the in-tree front end as the
 * guest's virtio-vsock driver (frontend/vsock_guest.h) and host peers on
 * unix sockets in threads of this process: both connect directions with
 * 256 MiB checked byte for byte, half-close both ways, RST on no
 * listener, hostile guest packets, bad CONNECT lines, many concurrent
 * connections (1000 guest->host, 500 host->guest), stalled readers on
 * either side (bounded memory, no busy loop), split descriptors, credit
 * requests, fair rx, connection limits and a VMM that goes away; and
 * guest->host data spliced by reference (tx_splice.h), its buffers held
 * until the host read them.
 *
 * VSOCK_TEST=<glob> runs only the matching cases.
 *
 * cmocka's assertions are not thread-safe, so host threads only record
 * what happened; the main thread asserts after joining them. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "frontend/vsock_guest.h"
#include "harness.h"

#include <jansson.h>

#define GUEST_CID 3
#define ECHO_PORT 7000
#define BIG (256ull << 20)
#define CHUNK 65536
#define WAIT HARNESS_WAIT_MS

/* One `vmio vsock` per case, so no case sees what another left behind. */
struct vm {
	const char *extra[8]; /* more options, NULL-terminated */
	char sock[256], uds[256], ctl[256];
	pid_t pid;
	struct vg *g;
};

static unsigned vm_seq;

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int vm_setup_opts(void **state, const struct vg_opts *o)
{
	struct vm *vm = *state;
	const char *args[24] = { "vsock", "--guest-cid", "3", "--socket",
				 vm->sock, "--uds-path", vm->uds,
				 "--control", vm->ctl };
	unsigned n = 9;
	char err[256];

	vm_seq++;
	snprintf(vm->sock, sizeof(vm->sock), "%s/vhost%u.sock",
		 harness_tmpdir(), vm_seq);
	snprintf(vm->uds, sizeof(vm->uds), "%s/vm%u.vsock", harness_tmpdir(),
		 vm_seq);
	/* Every case's device answers on a control socket. */
	snprintf(vm->ctl, sizeof(vm->ctl), "%s/vm%u.ctl", harness_tmpdir(),
		 vm_seq);
	for (unsigned i = 0; vm->extra[i]; i++)
		args[n++] = vm->extra[i];
	args[n] = NULL;
	vm->pid = harness_spawn(args);
	assert_true(vm->pid > 0);
	if (!harness_wait_socket(vm->sock, WAIT))
		fail_msg("vmio vsock did not listen on %s", vm->sock);
	vm->g = vg_open(vm->sock, WAIT, o, err, sizeof(err));
	if (!vm->g)
		fail_msg("%s", err);
	return 0;
}

static int vm_setup(void **state)
{
	return vm_setup_opts(state, NULL);
}

static int vm_teardown(void **state)
{
	struct vm *vm = *state;
	int st;

	if (vm->g && vm->g->violations)
		print_message("# device violations: %" PRIu64 " (last: %s)\n",
			      vm->g->violations, vm->g->violation);
	vg_free(vm->g);
	vm->g = NULL;
	st = harness_stop(vm->pid, 5000);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
	return 0;
}

static void assert_no_violations(struct vm *vm)
{
	if (vm->g->violations)
		fail_msg("the device broke the protocol %" PRIu64
			 " times; last: %s", vm->g->violations,
			 vm->g->violation);
}

/* ---- host side ---- */

static int unix_listen(const char *path)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
	unlink(path);
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(fd, 4096), 0);
	return fd;
}

static int unix_connect(const char *path)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -1;
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Waits up to ms for fd to be readable (or at EOF). */
static bool readable(int fd, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	return poll(&p, 1, ms) == 1;
}

static bool write_all(int fd, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return false;
		p += n;
		len -= (size_t)n;
	}
	return true;
}

/* Reads one '\n'-terminated line byte by byte (so nothing after it is
 * taken), bounded by ms. Returns its length, or -1. */
static int read_line(int fd, char *buf, size_t size, int ms)
{
	size_t n = 0;

	while (n + 1 < size) {
		if (!readable(fd, ms) || read(fd, buf + n, 1) != 1)
			return -1;
		if (buf[n++] == '\n')
			break;
	}
	buf[n] = '\0';
	return (int)n;
}

/* Reads until EOF (or an error, or ms without a byte), checking the
 * pattern when check is set, else keeping up to keep_size bytes. */
struct sink {
	int fd;
	uint64_t seed;
	bool check;
	uint8_t *keep;
	size_t keep_size;
	uint64_t got;
	bool eof, bad;
	char error[160];
};

static void sink_run(struct sink *s, int ms)
{
	static __thread uint8_t buf[CHUNK];

	for (;;) {
		ssize_t n;

		if (!readable(s->fd, ms)) {
			snprintf(s->error, sizeof(s->error),
				 "host read stalled after %" PRIu64 " bytes",
				 s->got);
			return;
		}
		n = read(s->fd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			snprintf(s->error, sizeof(s->error), "read: %s",
				 strerror(errno));
			return;
		}
		if (n == 0) {
			s->eof = true;
			return;
		}
		if (s->check) {
			size_t i = vg_pattern_check(s->seed, s->got, buf,
						    (size_t)n);

			if (i != (size_t)n && !s->bad) {
				s->bad = true;
				snprintf(s->error, sizeof(s->error),
					 "wrong byte at offset %" PRIu64,
					 s->got + i);
			}
		} else if (s->keep && s->got < s->keep_size) {
			size_t k = s->keep_size - s->got;

			memcpy(s->keep + s->got, buf,
			       k < (size_t)n ? k : (size_t)n);
		}
		s->got += (uint64_t)n;
	}
}

/* A one-connection server at <uds>_<port> in a thread. */
enum srv_mode {
	SRV_SINK,        /* read to EOF, checking the pattern */
	SRV_EOF_REPLY,   /* read to EOF, then reply "got <n>\n" and close */
	SRV_STALL,       /* accept, read nothing until released, then sink */
};

struct srv {
	enum srv_mode mode;
	int lfd, fd;
	struct sink sink;
	bool release; /* __atomic: the test lets a stalled server go */
	bool accepted;
	pthread_t thread;
};

static void *srv_main(void *arg)
{
	struct srv *s = arg;

	if (!readable(s->lfd, WAIT))
		return NULL;
	s->fd = accept4(s->lfd, NULL, NULL, SOCK_CLOEXEC);
	if (s->fd < 0)
		return NULL;
	s->accepted = true;
	s->sink.fd = s->fd;
	if (s->mode == SRV_STALL) {
		int64_t end = now_ms() + 60000;

		while (!__atomic_load_n(&s->release, __ATOMIC_ACQUIRE) &&
		       now_ms() < end)
			usleep(10000);
	}
	sink_run(&s->sink, WAIT);
	if (s->mode == SRV_EOF_REPLY && s->sink.eof) {
		char reply[64];
		int n = snprintf(reply, sizeof(reply), "got %" PRIu64 "\n",
				 s->sink.got);

		write_all(s->fd, reply, (size_t)n);
	}
	close(s->fd);
	return NULL;
}

static void srv_start(struct srv *s, struct vm *vm, uint32_t port,
		      enum srv_mode mode)
{
	char path[300];

	memset(s, 0, sizeof(*s));
	s->mode = mode;
	s->fd = -1;
	s->sink.check = mode != SRV_EOF_REPLY;
	s->sink.seed = port;
	snprintf(path, sizeof(path), "%s_%u", vm->uds, port);
	s->lfd = unix_listen(path);
	assert_int_equal(pthread_create(&s->thread, NULL, srv_main, s), 0);
}

static void srv_join(struct srv *s)
{
	pthread_join(s->thread, NULL);
	close(s->lfd);
}

/* An echo server for any number of connections at <uds>_<ECHO_PORT>,
 * polling them all from one thread; each reply mirrors what came in, and
 * an EOF is passed on as shutdown(SHUT_WR). */
#define ECHO_MAX 2048
struct echo {
	int lfd;
	int fds[ECHO_MAX];
	unsigned nfds;
	unsigned accepted; /* __atomic: the echo thread counts, the test reads */
	bool stop; /* __atomic */
	pthread_t thread;
};

static void *echo_main(void *arg)
{
	static __thread struct pollfd p[ECHO_MAX + 1];
	struct echo *e = arg;
	uint8_t buf[4096];

	while (!__atomic_load_n(&e->stop, __ATOMIC_ACQUIRE)) {
		unsigned n = 0;

		p[n++] = (struct pollfd){ .fd = e->lfd, .events = POLLIN };
		for (unsigned i = 0; i < e->nfds; i++)
			p[n++] = (struct pollfd){ .fd = e->fds[i],
						  .events = POLLIN };
		if (poll(p, n, 50) <= 0)
			continue;
		if ((p[0].revents & POLLIN) && e->nfds < ECHO_MAX) {
			int fd = accept4(e->lfd, NULL, NULL, SOCK_CLOEXEC);

			if (fd >= 0) {
				e->fds[e->nfds++] = fd;
				__atomic_add_fetch(&e->accepted, 1,
						   __ATOMIC_RELAXED);
			}
		}
		for (unsigned i = 1; i < n; i++) {
			ssize_t r;

			if (!p[i].revents)
				continue;
			r = read(p[i].fd, buf, sizeof(buf));
			if (r > 0) {
				write_all(p[i].fd, buf, (size_t)r);
				continue;
			}
			/* EOF or error: done with it. */
			close(p[i].fd);
			for (unsigned k = 0; k < e->nfds; k++)
				if (e->fds[k] == p[i].fd) {
					e->fds[k] = -1;
					break;
				}
		}
		/* Compact the closed ones away. */
		unsigned k = 0;

		for (unsigned i = 0; i < e->nfds; i++)
			if (e->fds[i] >= 0)
				e->fds[k++] = e->fds[i];
		e->nfds = k;
	}
	for (unsigned i = 0; i < e->nfds; i++)
		close(e->fds[i]);
	return NULL;
}

static void echo_start(struct echo *e, struct vm *vm)
{
	char path[300];

	memset(e, 0, sizeof(*e));
	snprintf(path, sizeof(path), "%s_%u", vm->uds, ECHO_PORT);
	e->lfd = unix_listen(path);
	assert_int_equal(pthread_create(&e->thread, NULL, echo_main, e), 0);
}

static void echo_stop(struct echo *e)
{
	__atomic_store_n(&e->stop, true, __ATOMIC_RELEASE);
	pthread_join(e->thread, NULL);
	close(e->lfd);
}

/* A guest connection to the echo server that carries a message there and
 * back: proof that the device still serves new connections. */
static void healthy(struct vm *vm, const char *what)
{
	char msg[64], got[64];
	struct vg_sock *s;
	size_t n = 0;
	int err = 0;

	snprintf(msg, sizeof(msg), "healthy after %s", what);
	s = vg_connect(vm->g, ECHO_PORT, WAIT, &err);
	if (!s)
		fail_msg("after %s: connect failed: %s", what, strerror(-err));
	assert_int_equal(vg_write(s, msg, strlen(msg), WAIT),
			 (ssize_t)strlen(msg));
	while (n < strlen(msg)) {
		ssize_t r = vg_read(s, got + n, sizeof(got) - n, WAIT);

		if (r <= 0)
			fail_msg("after %s: read: %zd", what, r);
		n += (size_t)r;
	}
	assert_memory_equal(got, msg, n);
	vg_close(s);
}

/* Host-initiated: connect to uds-path, send the line, wait for OK. */
static int host_connect(struct vm *vm, uint32_t port, uint32_t *host_port)
{
	char line[64];
	int fd = unix_connect(vm->uds);
	unsigned long hp;
	char *end;
	int n;

	if (fd < 0)
		return -1;
	n = snprintf(line, sizeof(line), "CONNECT %u\n", port);
	if (!write_all(fd, line, (size_t)n) ||
	    read_line(fd, line, sizeof(line), WAIT) < 4 ||
	    strncmp(line, "OK ", 3) != 0) {
		close(fd);
		return -1;
	}
	hp = strtoul(line + 3, &end, 10);
	if (*end != '\n' || hp > UINT32_MAX) {
		close(fd);
		return -1;
	}
	if (host_port)
		*host_port = (uint32_t)hp;
	return fd;
}

/* ---- cases ---- */

static void test_guest_to_host_256m(void **state)
{
	struct vm *vm = *state;
	static uint8_t buf[CHUNK];
	struct vg_sock *s;
	static struct srv srv; /* outlives a failed assertion */
	uint64_t off = 0;
	int64_t t0;
	int err = 0;

	srv_start(&srv, vm, 1234, SRV_SINK);
	s = vg_connect(vm->g, 1234, WAIT, &err);
	if (!s)
		fail_msg("connect to port 1234: %s", strerror(-err));
	t0 = now_ms();
	while (off < BIG) {
		ssize_t n;

		vg_pattern_fill(1234, off, buf, sizeof(buf));
		n = vg_write(s, buf, sizeof(buf), WAIT);
		if (n != (ssize_t)sizeof(buf))
			fail_msg("write at %" PRIu64 ": %zd", off, n);
		off += sizeof(buf);
	}
	assert_int_equal(vg_shutdown(s, VSOCK_SHUTDOWN_SEND), 0);
	srv_join(&srv);
	print_message("# guest->host %" PRIu64 " MiB in %.2f s\n", (uint64_t)(BIG >> 20),
		      (double)(now_ms() - t0) / 1000);
	if (srv.sink.error[0])
		fail_msg("host side: %s", srv.sink.error);
	assert_true(srv.sink.eof);
	assert_int_equal(srv.sink.got, BIG);
	vg_close(s);
	assert_no_violations(vm);
}

/* Host side of a host-initiated stream: CONNECT, OK, then bytes of the
 * pattern, shutdown(SHUT_WR), and a wait for the guest's EOF. */
struct h2g {
	struct vm *vm;
	uint32_t port, host_port;
	uint64_t bytes;
	bool connected, done, peer_eof;
	pthread_t thread;
};

static void *h2g_main(void *arg)
{
	/* Per thread: test_fair_rx runs several at once. */
	static __thread uint8_t buf[CHUNK];
	struct h2g *h = arg;
	uint64_t off = 0;
	int fd = host_connect(h->vm, h->port, &h->host_port);

	if (fd < 0)
		return NULL;
	h->connected = true;
	while (off < h->bytes) {
		size_t n = h->bytes - off < CHUNK ? h->bytes - off : CHUNK;

		vg_pattern_fill(h->port, off, buf, n);
		if (!write_all(fd, buf, n))
			break;
		off += n;
	}
	h->done = off == h->bytes;
	shutdown(fd, SHUT_WR);
	h->peer_eof = readable(fd, WAIT) && read(fd, buf, 1) == 0;
	close(fd);
	return NULL;
}

static void test_host_to_guest_256m(void **state)
{
	struct vm *vm = *state;
	static uint8_t buf[CHUNK];
	static struct h2g h; /* outlives a failed assertion */
	struct vg_sock *s;
	uint64_t got = 0;
	int64_t t0;
	int err = 0;

	h = (struct h2g){ .vm = vm, .port = 5000, .bytes = BIG };
	assert_int_equal(vg_listen(vm->g, 5000), 0);
	assert_int_equal(pthread_create(&h.thread, NULL, h2g_main, &h), 0);
	s = vg_accept(vm->g, 5000, false, WAIT, &err);
	if (!s)
		fail_msg("accept on 5000: %s", strerror(-err));
	t0 = now_ms();
	for (;;) {
		ssize_t n = vg_read(s, buf, sizeof(buf), WAIT);
		size_t i;

		if (n == 0)
			break;
		if (n < 0)
			fail_msg("read after %" PRIu64 " bytes: %s", got,
				 strerror((int)-n));
		i = vg_pattern_check(5000, got, buf, (size_t)n);
		if (i != (size_t)n)
			fail_msg("wrong byte at offset %" PRIu64, got + i);
		got += (uint64_t)n;
	}
	print_message("# host->guest %" PRIu64 " MiB in %.2f s\n", got >> 20,
		      (double)(now_ms() - t0) / 1000);
	assert_int_equal(got, BIG);
	assert_int_equal(vg_shutdown(s, VSOCK_SHUTDOWN_SEND), 0);
	pthread_join(h.thread, NULL);
	assert_true(h.connected);
	assert_true(h.done);
	assert_true(h.peer_eof);
	vg_close(s);
	assert_no_violations(vm);
}

/* The guest reads to its end of the stream, as a client of a protocol
 * that reads to EOF and then replies (systemd's notify socket). */
static ssize_t read_to_eof(struct vg_sock *s, char *buf, size_t size)
{
	size_t n = 0;

	for (;;) {
		ssize_t r = vg_read(s, buf + n, size - 1 - n, WAIT);

		if (r < 0)
			return r;
		if (r == 0)
			break;
		n += (size_t)r;
		if (n == size - 1)
			break;
	}
	buf[n] = '\0';
	return (ssize_t)n;
}

static void test_half_close_guest(void **state)
{
	struct vm *vm = *state;
	struct vg_sock *s;
	static struct srv srv; /* outlives a failed assertion */
	char buf[64];
	int err = 0;

	srv_start(&srv, vm, 1235, SRV_EOF_REPLY);
	s = vg_connect(vm->g, 1235, WAIT, &err);
	if (!s)
		fail_msg("connect: %s", strerror(-err));
	assert_int_equal(vg_write(s, "hello", 5, WAIT), 5);
	/* SHUTDOWN(SEND) must become SHUT_WR: the host reads EOF while it
	 * can still write its reply. */
	assert_int_equal(vg_shutdown(s, VSOCK_SHUTDOWN_SEND), 0);
	assert_int_equal(read_to_eof(s, buf, sizeof(buf)), 6);
	assert_string_equal(buf, "got 5\n");
	srv_join(&srv);
	assert_true(srv.sink.eof);
	vg_close(s);
	assert_no_violations(vm);
}

struct half {
	struct vm *vm;
	char reply[64];
	bool ok;
	pthread_t thread;
};

static void *half_main(void *arg)
{
	struct half *h = arg;
	struct sink sk = { .keep = (uint8_t *)h->reply,
			   .keep_size = sizeof(h->reply) - 1 };

	sk.fd = host_connect(h->vm, 5001, NULL);
	if (sk.fd < 0)
		return NULL;
	if (!write_all(sk.fd, "ping", 4))
		goto out;
	shutdown(sk.fd, SHUT_WR);
	sink_run(&sk, WAIT);
	h->ok = sk.eof && sk.got == 4;
out:
	close(sk.fd);
	return NULL;
}

static void test_half_close_host(void **state)
{
	struct vm *vm = *state;
	static struct half h; /* outlives a failed assertion */
	struct vg_sock_info info;
	struct vg_sock *s;
	char buf[64];
	int err = 0;

	h = (struct half){ .vm = vm };
	assert_int_equal(vg_listen(vm->g, 5001), 0);
	assert_int_equal(pthread_create(&h.thread, NULL, half_main, &h), 0);
	s = vg_accept(vm->g, 5001, false, WAIT, &err);
	if (!s)
		fail_msg("accept: %s", strerror(-err));
	/* The host's SHUT_WR arrives as SHUTDOWN(SEND): EOF here, while the
	 * connection still carries our reply. */
	assert_int_equal(read_to_eof(s, buf, sizeof(buf)), 4);
	assert_string_equal(buf, "ping");
	vg_sock_info(s, &info);
	assert_true(info.peer_shut & VSOCK_SHUTDOWN_SEND);
	assert_false(info.reset);
	assert_int_equal(vg_write(s, "pong", 4, WAIT), 4);
	assert_int_equal(vg_shutdown(s, VSOCK_SHUTDOWN_SEND), 0);
	pthread_join(h.thread, NULL);
	assert_true(h.ok);
	assert_string_equal(h.reply, "pong");
	vg_close(s);
	assert_no_violations(vm);
}

static void test_rst_on_no_listener(void **state)
{
	struct vm *vm = *state;
	static struct vg_sock *burst[600];
	struct vg_sock *s;
	int64_t t0 = now_ms();
	int err = 0;

	/* Nothing listens at <uds>_4321. */
	s = vg_connect(vm->g, 4321, WAIT, &err);
	assert_null(s);
	assert_int_equal(err, -ECONNREFUSED);
	/* At once, not after some timeout (vhost-device-vsock #963). */
	assert_true(now_ms() - t0 < 1000);

	/* A burst of them: more RSTs than the device queues at once. */
	for (unsigned i = 0; i < 600; i++) {
		burst[i] = vg_connect_start(vm->g, 4321, &err);
		if (!burst[i])
			fail_msg("REQUEST %u: %s", i, strerror(-err));
	}
	for (unsigned i = 0; i < 600; i++) {
		assert_int_equal(vg_connect_wait(burst[i], WAIT),
				 -ECONNREFUSED);
		vg_close(burst[i]);
	}
	assert_int_equal(harness_control_num(vm->ctl,
					     "vms.0.connections_refused"),
			 601);
	assert_int_equal(harness_control_num(vm->ctl,
					     "vms.0.connections_opened"),
			 0);
	assert_no_violations(vm);
}

/* ---- hostile guest ---- */

static struct vsock_hdr guest_hdr(uint32_t src_port, uint32_t dst_port,
				  uint16_t op)
{
	return (struct vsock_hdr){
		.src_cid = GUEST_CID,
		.dst_cid = VSOCK_HOST_CID,
		.src_port = src_port,
		.dst_port = dst_port,
		.type = VSOCK_TYPE_STREAM,
		.op = op,
		.buf_alloc = 65536,
	};
}

static void send_hdr(struct vm *vm, const struct vsock_hdr *h)
{
	uint8_t wire[VSOCK_HDR_SIZE];

	vsock_hdr_encode(h, wire);
	assert_int_equal(vg_send_raw(vm->g, wire, sizeof(wire), 1, WAIT), 0);
}

/* Waits until the socket is reset; false after ms. */
static bool wait_reset(struct vm *vm, struct vg_sock *s, int ms)
{
	int64_t end = now_ms() + ms;
	struct vg_sock_info i;

	for (;;) {
		vg_sock_info(s, &i);
		if (i.reset)
			return true;
		if (now_ms() >= end)
			return false;
		vg_poll(vm->g, 100);
	}
}

static struct vg_sock *echo_conn(struct vm *vm)
{
	int err = 0;
	struct vg_sock *s = vg_connect(vm->g, ECHO_PORT, WAIT, &err);

	if (!s)
		fail_msg("connect to echo: %s", strerror(-err));
	return s;
}

static void test_hostile_packets(void **state)
{
	struct vm *vm = *state;
	struct vg_sock_info info;
	struct vsock_hdr h, got;
	uint8_t raw[VSOCK_HDR_SIZE + 64] = { 0 };
	struct vg_sock *s;
	/* Static: a failed assertion leaves the test function while the
	 * thread still uses it. */
	static struct echo e;
	unsigned before;

	echo_start(&e, vm);
	healthy(vm, "start");

	/* A forged src_cid names nobody: dropped, never answered, and no
	 * host connection is made for it. */
	before = __atomic_load_n(&e.accepted, __ATOMIC_RELAXED);
	h = guest_hdr(60001, ECHO_PORT, VSOCK_OP_REQUEST);
	h.src_cid = 99;
	send_hdr(vm, &h);
	assert_false(vg_wait_unmatched(vm->g, VSOCK_OP_RESPONSE, 60001, &got,
				       500));
	assert_int_equal(__atomic_load_n(&e.accepted, __ATOMIC_RELAXED),
			 before);
	healthy(vm, "spoofed src_cid");

	/* A type we did not offer: RST (the spec). */
	h = guest_hdr(60002, ECHO_PORT, VSOCK_OP_REQUEST);
	h.type = 7;
	send_hdr(vm, &h);
	assert_true(vg_wait_unmatched(vm->g, VSOCK_OP_RST, 60002, &got, WAIT));
	assert_int_equal(got.src_port, ECHO_PORT);
	healthy(vm, "unknown type");

	/* An unknown op: RST. */
	h = guest_hdr(60003, ECHO_PORT, 42);
	send_hdr(vm, &h);
	assert_true(vg_wait_unmatched(vm->g, VSOCK_OP_RST, 60003, &got, WAIT));
	healthy(vm, "unknown op");

	/* Less than a header: dropped. */
	h = guest_hdr(60004, ECHO_PORT, VSOCK_OP_REQUEST);
	vsock_hdr_encode(&h, raw);
	assert_int_equal(vg_send_raw(vm->g, raw, 20, 2, WAIT), 0);
	assert_false(vg_wait_unmatched(vm->g, VSOCK_OP_RESPONSE, 60004, &got,
				       300));
	healthy(vm, "short header");

	/* len claims more than the chain holds, on a live connection: that
	 * connection is reset, no other. */
	s = echo_conn(vm);
	vg_sock_info(s, &info);
	h = guest_hdr(info.local_port, info.peer_port, VSOCK_OP_RW);
	h.len = 1000;
	vsock_hdr_encode(&h, raw);
	assert_int_equal(vg_send_raw(vm->g, raw, sizeof(raw), 2, WAIT), 0);
	assert_true(wait_reset(vm, s, WAIT));
	vg_close(s);
	healthy(vm, "len beyond the buffer");

	/* fwd_cnt claiming the guest consumed bytes never sent. */
	s = echo_conn(vm);
	vg_sock_info(s, &info);
	h = guest_hdr(info.local_port, info.peer_port,
		      VSOCK_OP_CREDIT_UPDATE);
	h.buf_alloc = 262144;
	h.fwd_cnt = 12345;
	send_hdr(vm, &h);
	assert_true(wait_reset(vm, s, WAIT));
	vg_close(s);
	healthy(vm, "fwd_cnt ahead of what was sent");

	/* A RESPONSE to a connection that exists and is established: the
	 * state does not allow it; reset. */
	s = echo_conn(vm);
	vg_sock_info(s, &info);
	h = guest_hdr(info.local_port, info.peer_port, VSOCK_OP_RESPONSE);
	send_hdr(vm, &h);
	assert_true(wait_reset(vm, s, WAIT));
	vg_close(s);
	healthy(vm, "RESPONSE when established");

	/* Data after the guest said it would send no more. */
	s = echo_conn(vm);
	assert_int_equal(vg_shutdown(s, VSOCK_SHUTDOWN_SEND), 0);
	vg_sock_info(s, &info);
	h = guest_hdr(info.local_port, info.peer_port, VSOCK_OP_RW);
	h.len = 5;
	assert_int_equal(vg_send_hdr(vm->g, &h, "after", 5, WAIT), 0);
	assert_true(wait_reset(vm, s, WAIT));
	vg_close(s);
	healthy(vm, "RW after SHUTDOWN(SEND)");

	echo_stop(&e);
	assert_no_violations(vm);
}

/* RW past the credit the device gave: with the host reader stalled the
 * data has nowhere to go, so the overrun is certain; that connection is
 * reset, and it does not grow vmio. */
static void test_credit_overrun(void **state)
{
	struct vm *vm = *state;
	static uint8_t buf[CHUNK];
	struct vg_sock_info info;
	struct vg_sock *s;
	static struct srv srv; /* outlives a failed assertion */
	/* Static: a failed assertion leaves the test function while the
	 * thread still uses it. */
	static struct echo e;
	uint64_t sent = 0;
	bool reset = false;
	int err = 0;

	echo_start(&e, vm);
	srv_start(&srv, vm, 1236, SRV_STALL);
	s = vg_connect(vm->g, 1236, WAIT, &err);
	if (!s)
		fail_msg("connect: %s", strerror(-err));
	vg_sock_info(s, &info);
	while (sent < (64ull << 20) && !reset) {
		struct vsock_hdr h = guest_hdr(info.local_port, info.peer_port,
					       VSOCK_OP_RW);

		h.buf_alloc = 262144;
		h.len = CHUNK;
		assert_int_equal(vg_send_hdr(vm->g, &h, buf, CHUNK, WAIT), 0);
		sent += CHUNK;
		vg_poll(vm->g, 0);
		vg_sock_info(s, &info);
		reset = info.reset;
	}
	if (!reset)
		reset = wait_reset(vm, s, WAIT);
	print_message("# reset after %" PRIu64 " KiB sent\n", sent >> 10);
	assert_true(reset);
	__atomic_store_n(&srv.release, true, __ATOMIC_RELEASE);
	srv_join(&srv);
	vg_close(s);
	healthy(vm, "credit overrun");
	echo_stop(&e);
	assert_no_violations(vm);
}

/* ---- bad CONNECT lines ---- */

/* True if the backend closed fd (EOF or reset) within ms, without a
 * byte: no "OK" for a line it refused. */
static bool host_closed(int fd, int ms)
{
	char c;
	ssize_t n;

	if (!readable(fd, ms))
		return false;
	n = read(fd, &c, 1);
	return n == 0 || (n < 0 && errno == ECONNRESET);
}

static int send_line(struct vm *vm, const void *bytes, size_t n)
{
	int fd = unix_connect(vm->uds);

	assert_true(fd >= 0);
	assert_true(write_all(fd, bytes, n));
	return fd;
}

static void test_bad_connect_lines(void **state)
{
	struct vm *vm = *state;
	char longline[300], buf[16];
	struct vg_sock *s;
	int good, fd, err = 0;
	int64_t t0;

	assert_int_equal(vg_listen(vm->g, 5002), 0);
	/* A good connection first: it must outlive all the bad ones. The
	 * guest answers from the main thread, so connect without waiting
	 * for OK and read it afterwards. */
	good = send_line(vm, "connect 5002\n", 13);
	s = vg_accept(vm->g, 5002, false, WAIT, &err);
	if (!s)
		fail_msg("accept: %s", strerror(-err));
	assert_true(read_line(good, buf, sizeof(buf), WAIT) > 3);
	assert_memory_equal(buf, "OK ", 3);

	fd = send_line(vm, "HELLO 5002\n", 11);
	assert_true(host_closed(fd, WAIT));
	close(fd);

	fd = send_line(vm, "CONNECT five\n", 13);
	assert_true(host_closed(fd, WAIT));
	close(fd);

	fd = send_line(vm, "CONNECT 99999999999\n", 20);
	assert_true(host_closed(fd, WAIT));
	close(fd);

	memset(longline, 'a', sizeof(longline));
	fd = send_line(vm, longline, sizeof(longline));
	assert_true(host_closed(fd, WAIT));
	close(fd);

	fd = send_line(vm, "CONNECT\0 5002\n", 14);
	assert_true(host_closed(fd, WAIT));
	close(fd);

	/* Gone before the line ended (cloud-hypervisor #6621). */
	fd = send_line(vm, "CONN", 4);
	close(fd);

	/* Never finished: closed after the connect timeout (1 s here). */
	t0 = now_ms();
	fd = send_line(vm, "CONNECT 5002", 12);
	assert_true(host_closed(fd, WAIT));
	print_message("# unfinished line closed after %" PRId64 " ms\n",
		      now_ms() - t0);
	assert_true(now_ms() - t0 >= 500);
	close(fd);

	/* A port nobody listens on in the guest: our RST closes it. */
	fd = send_line(vm, "CONNECT 6000\n", 13);
	for (int64_t end = now_ms() + WAIT; now_ms() < end;) {
		vg_poll(vm->g, 50);
		if (readable(fd, 0))
			break;
	}
	assert_true(host_closed(fd, 0));
	close(fd);

	/* The good one still carries data both ways. */
	assert_true(write_all(good, "still", 5));
	memset(buf, 0, sizeof(buf));
	assert_int_equal(vg_read(s, buf, sizeof(buf), WAIT), 5);
	assert_string_equal(buf, "still");
	assert_int_equal(vg_write(s, "here", 4, WAIT), 4);
	for (int64_t end = now_ms() + WAIT; now_ms() < end;) {
		vg_poll(vm->g, 50);
		if (readable(good, 0))
			break;
	}
	assert_int_equal(read(good, buf, sizeof(buf)), 4);
	assert_memory_equal(buf, "here", 4);
	close(good);
	vg_close(s);
	assert_no_violations(vm);
}

/* ---- scale and memory ---- */

#define MANY 1000

/* With MANY connections open the control document outgrows a socket's
 * buffer: a client that never reads holds its write back, and delays
 * neither the guest's traffic nor a client that reads, until it is
 * closed for being slow (within 2 s). */
static void control_many(struct vm *vm)
{
	struct pollfd p = { .events = POLLRDHUP };
	static char buf[1 << 16];
	long long want = 0;
	size_t got = 0, full;
	json_t *doc;
	char *text;
	ssize_t r;

	for (unsigned i = 0; i < MANY; i++)
		want += snprintf(buf, sizeof(buf), "conn %u;", i);
	p.fd = unix_connect(vm->ctl);
	assert_true(p.fd >= 0);
	healthy(vm, "a control client that never reads");
	/* healthy's connection has ended: the totals have its bytes. */
	want += (long long)strlen("healthy after a control client that "
				  "never reads");
	doc = harness_control_get(vm->ctl);
	assert_int_equal(harness_json_num(doc, "vms.0.connections_open"), MANY);
	assert_int_equal(harness_json_num(doc, "vms.0.totals.bytes_from_guest"),
			 want);
	assert_int_equal(harness_json_num(doc, "vms.0.totals.bytes_to_guest"),
			 want);
	text = json_dumps(doc, JSON_COMPACT);
	full = strlen(text);
	free(text);
	json_decref(doc);
	print_message("# control document of %u connections: %zu bytes\n",
		      MANY, full);
	/* The slow client is closed by the server: the hang-up shows
	 * while its unread bytes still wait, fewer than the document. */
	assert_int_equal(poll(&p, 1, WAIT), 1);
	assert_true(p.revents & (POLLRDHUP | POLLHUP));
	while ((r = read(p.fd, buf, sizeof(buf))) > 0)
		got += (size_t)r;
	close(p.fd);
	print_message("# the client that never read had %zu bytes waiting\n",
		      got);
	assert_true(got < full);
}

static void test_many_connections(void **state)
{
	struct vm *vm = *state;
	static struct vg_sock *s[MANY];
	/* Static: a failed assertion leaves the test function while the
	 * thread still uses it. */
	static struct echo e;
	int64_t t0 = now_ms();
	int err = 0;

	echo_start(&e, vm);
	/* All REQUESTs first, then all answers: 1000 connections open at
	 * once in the device, not one after another. */
	for (unsigned i = 0; i < MANY; i++) {
		s[i] = vg_connect_start(vm->g, ECHO_PORT, &err);
		if (!s[i])
			fail_msg("connect %u: %s", i, strerror(-err));
	}
	for (unsigned i = 0; i < MANY; i++) {
		err = vg_connect_wait(s[i], WAIT);
		if (err)
			fail_msg("connection %u: %s", i, strerror(-err));
	}
	print_message("# %u connections in %" PRId64 " ms\n", MANY,
		      now_ms() - t0);
	for (unsigned i = 0; i < MANY; i++) {
		char msg[32];
		int n = snprintf(msg, sizeof(msg), "conn %u;", i);

		assert_int_equal(vg_write(s[i], msg, (size_t)n, WAIT), n);
	}
	for (unsigned i = 0; i < MANY; i++) {
		char msg[32], got[32];
		int n = snprintf(msg, sizeof(msg), "conn %u;", i);
		ssize_t k = 0;

		while (k < n) {
			ssize_t r = vg_read(s[i], got + k, (size_t)(n - k),
					    WAIT);

			if (r <= 0)
				fail_msg("read on connection %u: %zd", i, r);
			k += r;
		}
		assert_memory_equal(got, msg, (size_t)n);
	}
	assert_int_equal(__atomic_load_n(&e.accepted, __ATOMIC_RELAXED),
			 MANY);
	control_many(vm);
	for (unsigned i = 0; i < MANY; i++)
		vg_close(s[i]);
	healthy(vm, "many connections");
	echo_stop(&e);
	assert_no_violations(vm);
}

/* The host side stops reading while the guest keeps writing: the guest
 * runs out of credit (vmio buffers no more than --tx-buffer-size), other
 * connections are unaffected, and once the host reads again every byte
 * arrives in order. */
static void test_stalled_host_reader(void **state)
{
	struct vm *vm = *state;
	static uint8_t buf[CHUNK];
	const uint64_t total = 32ull << 20;
	struct vg_sock_info info;
	struct vg_sock *s;
	static struct srv srv; /* outlives a failed assertion */
	/* Static: a failed assertion leaves the test function while the
	 * thread still uses it. */
	static struct echo e;
	uint64_t off = 0;
	long rss0, rss1;
	int err = 0;

	echo_start(&e, vm);
	healthy(vm, "start");
	rss0 = harness_rss_kib(vm->pid);
	srv_start(&srv, vm, 1237, SRV_STALL);
	s = vg_connect(vm->g, 1237, WAIT, &err);
	if (!s)
		fail_msg("connect: %s", strerror(-err));
	for (;;) {
		ssize_t n;

		vg_pattern_fill(1237, off, buf, sizeof(buf));
		n = vg_write(s, buf, sizeof(buf), 1000);
		if (n > 0)
			off += (uint64_t)n;
		if (n != (ssize_t)sizeof(buf))
			break;
		if (off >= total)
			fail_msg("wrote %" PRIu64 " bytes to a stalled reader",
				 off);
	}
	vg_sock_info(s, &info);
	rss1 = harness_rss_kib(vm->pid);
	print_message("# stalled after %" PRIu64 " KiB; vmio VmRSS %ld -> "
		      "%ld KiB\n", off >> 10, rss0, rss1);
	assert_int_equal(info.peer_credit, 0);
	assert_false(info.reset);
	/* Bounded: what the host socket holds plus one 64 KiB buffer, not
	 * what the guest tried to write. */
	assert_true(off < (8ull << 20));
	assert_true(rss1 > 0 && rss1 - rss0 < 16 * 1024);
	assert_true(rss1 < 64 * 1024);
	/* Stalled is idle: no EPOLLOUT armed for nothing (vhost-device-vsock
	 * #800 burned a CPU here). */
	harness_expect_idle(vm->pid, "while a connection is stalled");
	/* Only this connection stalls. */
	healthy(vm, "a stalled connection");

	__atomic_store_n(&srv.release, true, __ATOMIC_RELEASE);
	while (off < total) {
		ssize_t n;

		vg_pattern_fill(1237, off, buf, sizeof(buf));
		n = vg_write(s, buf, sizeof(buf), WAIT);
		if (n <= 0)
			fail_msg("write after release at %" PRIu64 ": %zd",
				 off, n);
		off += (uint64_t)n;
	}
	assert_int_equal(vg_shutdown(s, VSOCK_SHUTDOWN_SEND), 0);
	srv_join(&srv);
	if (srv.sink.error[0])
		fail_msg("host side: %s", srv.sink.error);
	assert_int_equal(srv.sink.got, off);
	vg_close(s);
	echo_stop(&e);
	assert_no_violations(vm);
}

/* ---- descriptor layouts, credit, fairness ---- */

/* Header and payload in separate descriptors both ways (older Linux
 * posts rx buffers so), through an echo: 32 MiB there and back, the
 * guest writing and reading in turn as a socket user would. */
static void test_split_descriptors_echo(void **state)
{
	struct vm *vm = *state;
	static uint8_t out[CHUNK], in[CHUNK];
	const uint64_t total = 32ull << 20;
	uint64_t sent = 0, got = 0;
	struct vg_sock *s;
	/* Static: a failed assertion leaves the test function while the
	 * thread still uses it. */
	static struct echo e;
	int64_t end = now_ms() + 4 * WAIT;

	echo_start(&e, vm);
	s = echo_conn(vm);
	while (got < total) {
		ssize_t n;
		size_t i;

		if (now_ms() > end)
			fail_msg("echo stalled: sent %" PRIu64 ", got %" PRIu64,
				 sent, got);
		if (sent < total) {
			size_t k = total - sent < 16384 ? total - sent : 16384;

			vg_pattern_fill(7, sent, out, k);
			n = vg_write(s, out, k, 0);
			if (n > 0)
				sent += (uint64_t)n;
		}
		n = vg_read(s, in, sizeof(in), sent < total ? 0 : WAIT);
		if (n == -ETIMEDOUT)
			continue;
		if (n <= 0)
			fail_msg("read after %" PRIu64 " bytes: %zd", got, n);
		i = vg_pattern_check(7, got, in, (size_t)n);
		if (i != (size_t)n)
			fail_msg("wrong byte at offset %" PRIu64, got + i);
		got += (uint64_t)n;
	}
	vg_close(s);
	echo_stop(&e);
	assert_no_violations(vm);
}

/* A CREDIT_REQUEST is answered with a CREDIT_UPDATE. */
static void test_credit_request(void **state)
{
	struct vm *vm = *state;
	struct vg_sock_info info;
	struct vsock_hdr h;
	struct vg_sock *s;
	/* Static: a failed assertion leaves the test function while the
	 * thread still uses it. */
	static struct echo e;
	uint64_t before;
	int64_t end;

	echo_start(&e, vm);
	s = echo_conn(vm);
	vg_sock_info(s, &info);
	before = vm->g->rx_ops[VSOCK_OP_CREDIT_UPDATE];
	h = guest_hdr(info.local_port, info.peer_port,
		      VSOCK_OP_CREDIT_REQUEST);
	h.buf_alloc = vm->g->o.buf_alloc;
	send_hdr(vm, &h);
	end = now_ms() + WAIT;
	while (vm->g->rx_ops[VSOCK_OP_CREDIT_UPDATE] == before &&
	       now_ms() < end)
		vg_poll(vm->g, 100);
	assert_true(vm->g->rx_ops[VSOCK_OP_CREDIT_UPDATE] > before);
	vg_sock_info(s, &info);
	assert_false(info.reset);
	/* ... and says so on its control socket. */
	assert_int_equal(harness_control_num(
				 vm->ctl,
				 "vms.0.connections.0.credit_requests_received"),
			 1);
	vg_close(s);
	healthy(vm, "credit request");
	echo_stop(&e);
	assert_no_violations(vm);
}

/* The guest stops reading while the host keeps writing: the device sends
 * no more than the guest's buf_alloc (the driver counts any excess as a
 * violation), stops reading the host socket, stays small, and delivers
 * everything once the guest reads again. */
static void test_stalled_guest_reader(void **state)
{
	struct vm *vm = *state;
	static uint8_t buf[CHUNK];
	static struct h2g h; /* outlives a failed assertion */
	struct vg_sock_info info;
	struct vg_sock *s;
	uint64_t got = 0;
	long rss0, rss1;
	int err = 0;

	h = (struct h2g){ .vm = vm, .port = 5003, .bytes = 16ull << 20 };
	rss0 = harness_rss_kib(vm->pid);
	assert_int_equal(vg_listen(vm->g, 5003), 0);
	assert_int_equal(pthread_create(&h.thread, NULL, h2g_main, &h), 0);
	s = vg_accept(vm->g, 5003, false, WAIT, &err);
	if (!s)
		fail_msg("accept: %s", strerror(-err));
	for (int64_t end = now_ms() + 1500; now_ms() < end;)
		vg_poll(vm->g, 100);
	vg_sock_info(s, &info);
	rss1 = harness_rss_kib(vm->pid);
	print_message("# guest holds %u unread bytes; vmio VmRSS %ld -> %ld "
		      "KiB\n", info.unread, rss0, rss1);
	assert_true(info.unread > 0);
	assert_true(info.unread <= vm->g->o.buf_alloc);
	assert_true(rss1 - rss0 < 16 * 1024);
	assert_no_violations(vm);
	for (;;) {
		ssize_t n = vg_read(s, buf, sizeof(buf), WAIT);
		size_t i;

		if (n == 0)
			break;
		if (n < 0)
			fail_msg("read after %" PRIu64 ": %zd", got, n);
		i = vg_pattern_check(5003, got, buf, (size_t)n);
		if (i != (size_t)n)
			fail_msg("wrong byte at offset %" PRIu64, got + i);
		got += (uint64_t)n;
	}
	assert_int_equal(got, h.bytes);
	assert_int_equal(vg_shutdown(s, VSOCK_SHUTDOWN_SEND), 0);
	pthread_join(h.thread, NULL);
	assert_true(h.done);
	vg_close(s);
	assert_no_violations(vm);
}

/* Four host->guest bulk streams read in turn: each makes progress, none
 * starves the others (firecracker #6031). */
#define NFAIR 4
static void test_fair_rx(void **state)
{
	struct vm *vm = *state;
	static uint8_t buf[CHUNK];
	static struct h2g h[NFAIR]; /* outlives a failed assertion */
	struct vg_sock *s[NFAIR];
	uint64_t got[NFAIR] = { 0 };
	bool eof[NFAIR] = { false };
	unsigned left = NFAIR;
	int err = 0;

	for (unsigned i = 0; i < NFAIR; i++) {
		h[i] = (struct h2g){ .vm = vm, .port = 6100 + i,
				     .bytes = 16ull << 20 };
		assert_int_equal(vg_listen(vm->g, h[i].port), 0);
		assert_int_equal(pthread_create(&h[i].thread, NULL, h2g_main,
						&h[i]), 0);
	}
	for (unsigned i = 0; i < NFAIR; i++) {
		/* Accept in port order, whichever REQUEST came first. */
		s[i] = vg_accept(vm->g, 6100 + i, false, WAIT, &err);
		if (!s[i])
			fail_msg("accept %u: %s", i, strerror(-err));
	}
	while (left) {
		uint64_t lo = UINT64_MAX, hi = 0;

		for (unsigned i = 0; i < NFAIR; i++) {
			ssize_t n;
			size_t k;

			if (eof[i])
				continue;
			n = vg_read(s[i], buf, 16384, WAIT);
			if (n < 0)
				fail_msg("stream %u: %zd", i, n);
			if (n == 0) {
				eof[i] = true;
				left--;
				continue;
			}
			k = vg_pattern_check(6100 + i, got[i], buf, (size_t)n);
			if (k != (size_t)n)
				fail_msg("stream %u: wrong byte at %" PRIu64, i,
					 got[i] + k);
			got[i] += (uint64_t)n;
		}
		for (unsigned i = 0; i < NFAIR; i++) {
			lo = got[i] < lo ? got[i] : lo;
			hi = got[i] > hi ? got[i] : hi;
		}
		/* Each read returns at least one byte of each, so this only
		 * fails if one stream's data could not get through at all. */
		assert_true(hi - lo <= (8ull << 20));
	}
	for (unsigned i = 0; i < NFAIR; i++) {
		assert_int_equal(got[i], h[i].bytes);
		assert_int_equal(vg_shutdown(s[i], VSOCK_SHUTDOWN_SEND), 0);
		pthread_join(h[i].thread, NULL);
		vg_close(s[i]);
	}
	assert_no_violations(vm);
}

/* Stream bytes in the same write as the CONNECT line belong to the
 * stream: the line parser must stop at the newline. */
static void test_connect_line_with_data(void **state)
{
	struct vm *vm = *state;
	static const char msg[] = "CONNECT 5004\nearly data";
	struct vg_sock *s;
	char buf[64];
	size_t n = 0;
	int fd, err = 0;

	assert_int_equal(vg_listen(vm->g, 5004), 0);
	fd = send_line(vm, msg, sizeof(msg) - 1);
	s = vg_accept(vm->g, 5004, false, WAIT, &err);
	if (!s)
		fail_msg("accept: %s", strerror(-err));
	while (n < 10) {
		ssize_t r = vg_read(s, buf + n, sizeof(buf) - 1 - n, WAIT);

		if (r <= 0)
			fail_msg("read: %zd", r);
		n += (size_t)r;
	}
	buf[n] = '\0';
	assert_string_equal(buf, "early data");
	assert_true(read_line(fd, buf, sizeof(buf), WAIT) > 3);
	assert_memory_equal(buf, "OK ", 3);
	close(fd);
	vg_close(s);
	assert_no_violations(vm);
}

/* Many host programs connect at once; the guest accepts them all and
 * each gets its own OK and its own data. */
#define MANY_HOST 500
static void test_many_host_connections(void **state)
{
	struct vm *vm = *state;
	static int fd[MANY_HOST];
	static struct vg_sock *s[MANY_HOST];
	char line[32], buf[32];
	int err = 0;

	assert_int_equal(vg_listen(vm->g, 5005), 0);
	for (unsigned i = 0; i < MANY_HOST; i++)
		fd[i] = send_line(vm, "CONNECT 5005\n", 13);
	for (unsigned i = 0; i < MANY_HOST; i++) {
		s[i] = vg_accept(vm->g, 5005, false, WAIT, &err);
		if (!s[i])
			fail_msg("accept %u: %s", i, strerror(-err));
	}
	for (unsigned i = 0; i < MANY_HOST; i++) {
		int n = snprintf(line, sizeof(line), "to %u", i);

		assert_int_equal(vg_write(s[i], line, (size_t)n, WAIT), n);
	}
	/* Each host socket: its OK line, then exactly its own bytes. */
	for (unsigned i = 0; i < MANY_HOST; i++) {
		int n = snprintf(line, sizeof(line), "to %u", i);
		int got = 0;

		for (int64_t end = now_ms() + WAIT; now_ms() < end;) {
			vg_poll(vm->g, 0);
			if (readable(fd[i], 10))
				break;
		}
		assert_true(read_line(fd[i], buf, sizeof(buf), WAIT) > 3);
		assert_memory_equal(buf, "OK ", 3);
		while (got < n) {
			ssize_t r;

			for (int64_t end = now_ms() + WAIT; now_ms() < end;) {
				vg_poll(vm->g, 0);
				if (readable(fd[i], 10))
					break;
			}
			r = read(fd[i], buf + got, (size_t)(n - got));
			if (r <= 0)
				fail_msg("host socket %u: %zd", i, r);
			got += (int)r;
		}
		assert_memory_equal(buf, line, (size_t)n);
		close(fd[i]);
	}
	for (unsigned i = 0; i < MANY_HOST; i++)
		vg_close(s[i]);
	assert_no_violations(vm);
}

/* The guest never answers a host-initiated REQUEST: after the connect
 * timeout (1 s here) the host socket is closed, and a late RESPONSE to it
 * is answered with RST rather than resurrecting it. */
static void test_guest_never_answers(void **state)
{
	struct vm *vm = *state;
	struct vg_sock *s;
	int64_t t0;
	int fd, err = 0;

	assert_int_equal(vg_listen(vm->g, 5006), 0);
	t0 = now_ms();
	fd = send_line(vm, "CONNECT 5006\n", 13);
	/* Take the REQUEST into the backlog, but do not answer it. */
	for (int64_t end = now_ms() + WAIT; now_ms() < end;) {
		vg_poll(vm->g, 50);
		if (readable(fd, 0))
			break;
	}
	assert_true(host_closed(fd, 0));
	print_message("# unanswered REQUEST: host socket closed after %" PRId64
		      " ms\n", now_ms() - t0);
	assert_true(now_ms() - t0 >= 500);
	close(fd);

	s = vg_accept(vm->g, 5006, false, WAIT, &err);
	if (s) {
		/* Accepted late: the device no longer knows the flow. */
		assert_true(wait_reset(vm, s, WAIT));
		vg_close(s);
	}
	assert_no_violations(vm);
}

/* ---- lifetimes and limits ---- */

/* The host service closes at once: the guest reads EOF, not a hang. */
static void test_host_closes_first(void **state)
{
	struct vm *vm = *state;
	struct vg_sock *s;
	char path[300], buf[16];
	int lfd, fd, err = 0;
	ssize_t n;

	snprintf(path, sizeof(path), "%s_%u", vm->uds, 1239);
	lfd = unix_listen(path);
	s = vg_connect(vm->g, 1239, WAIT, &err);
	if (!s)
		fail_msg("connect: %s", strerror(-err));
	assert_true(readable(lfd, WAIT));
	fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	assert_true(fd >= 0);
	close(fd);
	close(lfd);
	n = vg_read(s, buf, sizeof(buf), WAIT);
	assert_true(n == 0 || n == -ECONNRESET);
	vg_close(s);
	assert_no_violations(vm);
}

/* The VMM goes away with connections open: their host sockets are
 * closed, and a new VMM session starts clean. */
static void test_guest_gone(void **state)
{
	struct vm *vm = *state;
	static struct srv srv; /* outlives a failed assertion */
	static struct echo e;
	struct vg_sock *s;
	char err_s[256];
	int err = 0;

	srv_start(&srv, vm, 1240, SRV_SINK);
	s = vg_connect(vm->g, 1240, WAIT, &err);
	if (!s)
		fail_msg("connect: %s", strerror(-err));
	assert_int_equal(vg_write(s, "x", 1, WAIT), 1);
	vg_free(vm->g);
	vm->g = NULL;
	/* The host side sees its connection end (EOF, or an error: the
	 * pattern check is not what matters here). */
	srv_join(&srv);
	assert_true(srv.sink.eof || strncmp(srv.sink.error, "read:", 5) == 0);

	/* With no VMM attached nobody can answer a CONNECT: it is refused
	 * at once, not after --connect-timeout (2 s). */
	int64_t t0 = now_ms();
	char line[64];
	int fd = unix_connect(vm->uds);
	assert_true(fd >= 0);
	assert_true(write_all(fd, "CONNECT 7000\n", 13));
	assert_int_equal(read_line(fd, line, sizeof(line), WAIT), -1);
	assert_true(now_ms() - t0 < 1000);
	close(fd);

	vm->g = vg_open(vm->sock, WAIT, NULL, err_s, sizeof(err_s));
	if (!vm->g)
		fail_msg("%s", err_s);
	echo_start(&e, vm);
	healthy(vm, "a new VMM session");
	echo_stop(&e);
	assert_no_violations(vm);
}

/* --max-connections: the one over the limit is refused at once, and a
 * closed connection frees its place. */
static void test_connection_limit(void **state)
{
	struct vm *vm = *state;
	static struct echo e;
	struct vg_sock *s[4], *x;
	int err = 0;
	int64_t t0;

	echo_start(&e, vm);
	for (unsigned i = 0; i < 4; i++)
		s[i] = echo_conn(vm);
	t0 = now_ms();
	x = vg_connect(vm->g, ECHO_PORT, WAIT, &err);
	assert_null(x);
	assert_true(err == -ECONNREFUSED || err == -ECONNRESET);
	assert_true(now_ms() - t0 < 1000);
	vg_close(s[0]);
	/* The device frees the slot once it has seen our RST. */
	for (int64_t end = now_ms() + WAIT; now_ms() < end;) {
		x = vg_connect(vm->g, ECHO_PORT, WAIT, &err);
		if (x)
			break;
		vg_poll(vm->g, 50);
	}
	assert_non_null(x);
	vg_close(x);
	for (unsigned i = 1; i < 4; i++)
		vg_close(s[i]);
	echo_stop(&e);
	assert_no_violations(vm);
}

/* ---- live counters (--control) ---- */

/* The connection's counters in the control document, while it is open
 * and once it has ended. */
static void test_control_counters(void **state)
{
	struct vm *vm = *state;
	static struct echo e;
	struct vg_sock_info info;
	char msg[3000], got[3000];
	struct vg_sock *s;
	json_t *doc, *conn;
	size_t n = 0;

	echo_start(&e, vm);
	s = echo_conn(vm);
	vg_sock_info(s, &info);
	memset(msg, 'm', sizeof(msg));
	assert_int_equal(vg_write(s, msg, sizeof(msg), WAIT),
			 (ssize_t)sizeof(msg));
	while (n < sizeof(msg)) {
		ssize_t r = vg_read(s, got + n, sizeof(got) - n, WAIT);

		assert_true(r > 0);
		n += (size_t)r;
	}
	doc = harness_control_get(vm->ctl);
	assert_string_equal(json_string_value(json_object_get(doc, "device")),
			    "vsock");
	assert_int_equal(harness_json_num(doc, "vms.0.guest_cid"), 3);
	assert_int_equal(harness_json_num(doc, "vms.0.sessions"), 1);
	assert_int_equal(harness_json_num(doc, "vms.0.protocol_errors"), 0);
	assert_int_equal(harness_json_num(doc, "vms.0.connections_open"), 1);
	conn = json_array_get(json_object_get(
		json_array_get(json_object_get(doc, "vms"), 0), "connections"), 0);
	assert_string_equal(json_string_value(json_object_get(conn, "state")),
			    "established");
	assert_string_equal(
		json_string_value(json_object_get(conn, "initiator")), "guest");
	assert_int_equal(harness_json_num(conn, "guest_port"), info.local_port);
	assert_int_equal(harness_json_num(conn, "host_port"), ECHO_PORT);
	assert_int_equal(harness_json_num(conn, "bytes_from_guest"),
			 sizeof(msg));
	assert_int_equal(harness_json_num(conn, "bytes_to_guest"), sizeof(msg));
	/* REQUEST, RESPONSE and at least one RW each way. */
	assert_true(harness_json_num(conn, "packets_from_guest") >= 2);
	assert_true(harness_json_num(conn, "packets_to_guest") >= 2);
	json_decref(doc);

	vg_close(s);
	/* Once the device has seen the close, the VM's totals keep it. */
	for (int64_t end = now_ms() + WAIT; now_ms() < end;) {
		if (harness_control_num(vm->ctl, "vms.0.connections_ended"))
			break;
		vg_poll(vm->g, 20);
	}
	doc = harness_control_get(vm->ctl);
	assert_int_equal(harness_json_num(doc, "vms.0.connections_ended"), 1);
	assert_int_equal(harness_json_num(doc, "vms.0.connections_open"), 0);
	assert_int_equal(harness_json_num(doc, "vms.0.totals.bytes_from_guest"),
			 sizeof(msg));
	assert_int_equal(harness_json_num(doc, "vms.0.totals.bytes_to_guest"),
			 sizeof(msg));
	json_decref(doc);
	echo_stop(&e);
	assert_no_violations(vm);
}

/* Clients that connect to the control socket and never read, more than
 * it serves at once: the guest's traffic goes on, and a client that does
 * read still gets its document. */
static void test_control_slow_clients(void **state)
{
	struct vm *vm = *state;
	static struct echo e;
	int idle[24];

	echo_start(&e, vm);
	for (unsigned i = 0; i < 24; i++) {
		idle[i] = unix_connect(vm->ctl);
		assert_true(idle[i] >= 0);
	}
	healthy(vm, "24 control clients that never read");
	/* The idle ones may hold every slot for a moment: a reader is
	 * served once they are written to (or closed after 2 s). */
	json_t *doc = NULL;
	for (int64_t end = now_ms() + WAIT; !doc && now_ms() < end;) {
		int fd = unix_connect(vm->ctl);
		char c;

		assert_true(fd >= 0);
		/* Closed at once when every slot is taken: no byte. */
		if (readable(fd, WAIT) && recv(fd, &c, 1, MSG_PEEK) == 1)
			doc = harness_control_get(vm->ctl);
		close(fd);
		if (!doc)
			vg_poll(vm->g, 50);
	}
	assert_non_null(doc);
	assert_int_equal(harness_json_num(doc, "vms.0.sessions"), 1);
	json_decref(doc);
	healthy(vm, "a control client that read");
	for (unsigned i = 0; i < 24; i++)
		close(idle[i]);
	echo_stop(&e);
	assert_no_violations(vm);
}

/* ---- main ---- */

/* ---- Guest -> host by reference (devices/vsock/tx_splice.h): the front
 * end overwrites every tx buffer the moment it comes back used, and the
 * host, reading slowly and in pieces smaller than a packet, still reads
 * exactly what was sent (a chain given back before its bytes were read
 * shows as 0xa5 bytes); a host reader that stalls holds no more chains
 * than --tx-hold gives one connection while another connection on the
 * same tx ring goes on; --tx-copy carries the same and says so. The
 * device's counters (-vv, logged at the guest's reset) say which path
 * carried the bytes. ---- */

static struct vm vm_zc = { .extra = { "--tx-splice" } },
		 vm_zc_stall = { .extra = { "--tx-splice", "--tx-hold", "4" } },
		 vm_zc_copy = { .extra = { "--tx-copy" } };

/* The counter `name` (a "NAME N" in the stats line the device logs when
 * the guest goes), after the guest went. */
static uint64_t zc_stat(const char *name)
{
	char needle[64], line[1024];
	int64_t end;
	FILE *f;
	uint64_t v = UINT64_MAX;

	snprintf(needle, sizeof(needle), "%s ", name);
	for (end = now_ms() + WAIT; now_ms() < end;
	     usleep(10000))
		if (harness_log_contains("used-ring flushes"))
			break;
	f = fopen(harness_path("vmio.log"), "r");
	if (!f)
		return v;
	while (fgets(line, sizeof(line), f)) {
		const char *p = strstr(line, "used-ring flushes");

		if (p && (p = strstr(line, needle)))
			v = strtoull(p + strlen(needle), NULL, 10);
	}
	fclose(f);
	return v;
}

/* A host reader at <uds>_<port>: accepts one connection, waits until
 * released (if stall), then reads to EOF in reads of `piece` bytes,
 * checking the pattern of seed port. */
struct zc_reader {
	uint32_t port;
	size_t piece;
	bool stall;
	bool release; /* __atomic */
	bool accepted; /* __atomic */
	int lfd;
	uint64_t got;
	bool eof;
	char error[160];
	pthread_t thread;
};

static void *zc_reader_main(void *arg)
{
	struct zc_reader *r = arg;
	static __thread uint8_t buf[CHUNK];
	int fd;

	if (!readable(r->lfd, WAIT)) {
		snprintf(r->error, sizeof(r->error), "no connection");
		return NULL;
	}
	fd = accept4(r->lfd, NULL, NULL, SOCK_CLOEXEC);
	if (fd < 0) {
		snprintf(r->error, sizeof(r->error), "accept: %s",
			 strerror(errno));
		return NULL;
	}
	__atomic_store_n(&r->accepted, true, __ATOMIC_RELEASE);
	if (r->stall) {
		int64_t end = now_ms() + 60000;

		while (!__atomic_load_n(&r->release, __ATOMIC_ACQUIRE) &&
		       now_ms() < end)
			usleep(5000);
	}
	for (unsigned reads = 0;; reads++) {
		ssize_t n;
		size_t i;

		if (!readable(fd, WAIT)) {
			snprintf(r->error, sizeof(r->error),
				 "read stalled after %" PRIu64 " bytes",
				 r->got);
			break;
		}
		n = read(fd, buf, r->piece);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			r->eof = n == 0;
			if (n < 0)
				snprintf(r->error, sizeof(r->error),
					 "read: %s", strerror(errno));
			break;
		}
		i = vg_pattern_check(r->port, r->got, buf, (size_t)n);
		if (i != (size_t)n) {
			snprintf(r->error, sizeof(r->error),
				 "wrong byte 0x%02x at offset %" PRIu64,
				 buf[i], r->got + i);
			break;
		}
		r->got += (uint64_t)n;
		/* Slow now and then, so the guest runs ahead of it. */
		if (reads % 64 == 63)
			usleep(200);
	}
	close(fd);
	return NULL;
}

static void zc_reader_start(struct zc_reader *r, struct vm *vm, uint32_t port,
			 size_t piece, bool stall)
{
	char path[300];

	memset(r, 0, sizeof(*r));
	r->port = port;
	r->piece = piece;
	r->stall = stall;
	snprintf(path, sizeof(path), "%s_%u", vm->uds, port);
	r->lfd = unix_listen(path);
	assert_int_equal(pthread_create(&r->thread, NULL, zc_reader_main, r), 0);
}

static void zc_reader_join(struct zc_reader *r)
{
	pthread_join(r->thread, NULL);
	close(r->lfd);
	if (r->error[0])
		fail_msg("host reader of port %u: %s", r->port, r->error);
	assert_true(r->eof);
}

/* Writes len bytes of the pattern of port s was connected to, from off. */
static void zc_guest_send(struct vg_sock *s, uint32_t port, uint64_t off,
		       uint64_t len)
{
	static uint8_t buf[CHUNK];

	while (len) {
		size_t k = len < sizeof(buf) ? (size_t)len : sizeof(buf);
		ssize_t n;

		vg_pattern_fill(port, off, buf, k);
		n = vg_write(s, buf, k, WAIT);
		if (n != (ssize_t)k)
			fail_msg("guest write at %" PRIu64 ": %zd", off, n);
		off += k;
		len -= k;
	}
}

/* -vv (the stats line at the guest's reset), a fresh log, and a front
 * end that scribbles over every tx buffer it gets back. */
static int zc_setup(void **state)
{
	struct vm *vm = *state;
	struct vg_opts o;
	unsigned n = 0;

	while (vm->extra[n])
		n++;
	if (n < 2 || strcmp(vm->extra[n - 1], "-v")) {
		vm->extra[n++] = "-v";
		vm->extra[n++] = "-v";
	}
	vg_opts_init(&o);
	o.tx_scribble = true;
	/* The stall case wants many chains, each large enough to be
	 * spliced (the device copies smaller packets). */
	o.tx_pkt_max = vm == &vm_zc_stall ? 16384 : VSOCK_MAX_PKT_PAYLOAD;
	harness_log_clear();
	return vm_setup_opts(state, &o);
}

/* 64 MiB to a host that reads 1000 bytes at a time (pieces of an skb:
 * its memory is freed only once read through) and pauses. */
static void zc_transfer(struct vm *vm, uint32_t port)
{
	static struct zc_reader r;
	struct vg_sock *s;
	int err = 0;

	zc_reader_start(&r, vm, port, 1000, false);
	s = vg_connect(vm->g, port, WAIT, &err);
	if (!s)
		fail_msg("connect: %s", strerror(-err));
	zc_guest_send(s, port, 0, 64ull << 20);
	assert_int_equal(vg_shutdown(s, VSOCK_SHUTDOWN_SEND), 0);
	zc_reader_join(&r);
	assert_int_equal(r.got, 64ull << 20);
	vg_close(s);
}

static void test_spliced_bytes_survive_reuse(void **state)
{
	struct vm *vm = *state;

	if (!harness_log_contains("guest-to-host data: spliced"))
		fail_msg("vmio does not splice here (kernel before 6.5?)");
	zc_transfer(vm, 5100);
	assert_no_violations(vm);
	vg_free(vm->g);
	vm->g = NULL;
	/* By reference, but for what a full socket did not take (copied
	 * into the connection's buffer, then sent from there). */
	{
		uint64_t sp = zc_stat("tx spliced");

		uint64_t cp = zc_stat("copied");

		if (!sp || sp == UINT64_MAX || sp + cp != (64ull << 20))
			fail_msg("%" PRIu64 " bytes spliced, %" PRIu64
				 " copied, of 64 MiB", sp, cp);
	}
}

static void test_copy_path(void **state)
{
	struct vm *vm = *state;

	assert_true(harness_log_contains("guest-to-host data: copied "
					 "(--tx-copy"));
	zc_transfer(vm, 5101);
	assert_no_violations(vm);
	vg_free(vm->g);
	vm->g = NULL;
	assert_int_equal(zc_stat("tx spliced"), 0);
	assert_int_equal(zc_stat("copied"), 64ull << 20);
}

/* Tx slots the device has not given back. */
static unsigned zc_tx_in_flight(struct vm *vm)
{
	vg_poll(vm->g, 0);
	return vm->g->o.tx_slots - vm->g->tx_nfree;
}

/* --tx-hold 4: one connection holds at most 2. Port A's reader stalls
 * with A's credit spent in 16 KiB packets (dozens would fit the socket);
 * port B then carries 16 MiB through the same tx ring, and A's bytes are
 * all there, in order, once its reader goes on. */
static void test_stalled_reader_bounded(void **state)
{
	struct vm *vm = *state;
	static struct zc_reader ra, rb;
	/* Packets large enough to be spliced (smaller ones are copied). */
	static uint8_t buf[65536];
	struct vg_sock *a, *b;
	uint64_t sent = 0;
	unsigned most = 0;
	int err = 0;

	zc_reader_start(&ra, vm, 5200, CHUNK, true);
	a = vg_connect(vm->g, 5200, WAIT, &err);
	if (!a)
		fail_msg("connect A: %s", strerror(-err));
	/* Until the credit is spent: the device holds what it spliced and
	 * copies the rest into A's buffer. */
	for (;;) {
		ssize_t n;

		vg_pattern_fill(5200, sent, buf, sizeof(buf));
		n = vg_write(a, buf, sizeof(buf), 300);
		if (n > 0)
			sent += (uint64_t)n;
		if (n != (ssize_t)sizeof(buf))
			break;
		if (sent > (64ull << 20))
			fail_msg("A never ran out of credit");
	}
	/* The device had 300 ms to take every chain posted. */
	most = zc_tx_in_flight(vm);
	if (most > 2)
		fail_msg("%u tx chains held for one connection (at most 2)",
			 most);
	assert_true(sent >= 256 * 1024 - sizeof(buf));

	zc_reader_start(&rb, vm, 5201, CHUNK, false);
	b = vg_connect(vm->g, 5201, WAIT, &err);
	if (!b)
		fail_msg("connect B: %s", strerror(-err));
	zc_guest_send(b, 5201, 0, 16ull << 20);
	assert_int_equal(vg_shutdown(b, VSOCK_SHUTDOWN_SEND), 0);
	zc_reader_join(&rb);
	assert_int_equal(rb.got, 16ull << 20);
	/* B's last chains go back once vmio sees its reader's progress
	 * (the EPOLLOUT watch, or the 100 ms tick): wait for that, bounded. */
	for (int waited = 0; zc_tx_in_flight(vm) > 2 && waited < WAIT;
	     waited += 10)
		usleep(10000);
	if (zc_tx_in_flight(vm) > 2)
		fail_msg("%u tx chains still held with only A stalled",
			 zc_tx_in_flight(vm));

	__atomic_store_n(&ra.release, true, __ATOMIC_RELEASE);
	assert_int_equal(vg_shutdown(a, VSOCK_SHUTDOWN_SEND), 0);
	zc_reader_join(&ra);
	assert_int_equal(ra.got, sent);
	vg_close(a);
	vg_close(b);
	assert_no_violations(vm);
	vg_free(vm->g);
	vm->g = NULL;
	assert_true(zc_stat("tx spliced") > 0);
	assert_true(zc_stat("at most") <= 4);
}

static struct vm vm_g2h, vm_h2g, vm_half_g, vm_half_h, vm_rst, vm_hostile,
	vm_overrun, vm_lines = { .extra = { "--connect-timeout", "1000" } },
	vm_many = { .extra = { "--max-connections", "2048" } }, vm_stall,
	vm_split, vm_creq, vm_gstall, vm_fair, vm_hclose, vm_gone,
	vm_limit = { .extra = { "--max-connections", "4" } }, vm_early,
	vm_many_host,
	vm_noanswer = { .extra = { "--connect-timeout", "1000" } },
	vm_ctl_counters, vm_ctl_slow, vm_cut617_g2h, vm_cut617_echo,
	vm_cut_odd_echo, vm_cut_ind_echo, vm_cut_ind_g2h, vm_cut_mrg_h2g;
/* The same cases with mergeable rx buffers: 4 KiB buffers as Linux posts
 * them, and a ring of odd sizes from 1 byte to 64 KiB. */
/* --poll-us: the queues are looked at again before kicks go back on;
 * the streams still arrive whole, and an idle device does not spin. */
static struct vm vm_poll = { .extra = { "--poll-us", "1000" } };

static void test_poll_us(void **state)
{
	struct vm *vm = *state;

	test_guest_to_host_256m(state);
	test_host_to_guest_256m(state);
	harness_expect_idle(vm->pid, "after streams with --poll-us 1000");
}

static struct vm vm_mrg_h2g, vm_mrg_odd_h2g, vm_mrg_g2h, vm_mrg_hostile,
	vm_mrg_many, vm_mrg_creq, vm_mrg_fair, vm_mrg_big;
static const uint32_t odd_sizes[] = { 1, 7, 46, 100, 4096, 65536, 3, 45,
				      300, 2048, 44, 47, 65535, 4097 };

static int mrg_setup(void **state)
{
	struct vg_opts o;

	vg_opts_init(&o);
	o.mergeable = true;
	return vm_setup_opts(state, &o);
}

static int mrg_odd_setup(void **state)
{
	struct vg_opts o;

	vg_opts_init(&o);
	o.mergeable = true;
	o.rx_sizes = odd_sizes;
	o.n_rx_sizes = sizeof(odd_sizes) / sizeof(odd_sizes[0]);
	return vm_setup_opts(state, &o);
}

static int mrg_many_setup(void **state)
{
	struct vg_opts o;

	vg_opts_init(&o);
	o.mergeable = true;
	o.buf_alloc = 16384;
	o.credit_threshold = 4096;
	return vm_setup_opts(state, &o);
}

/* With mergeable buffers a host stream reaches the guest in packets of
 * up to 64 KiB over 4 KiB buffers, not 4 KiB packets: the point of the
 * feature. */
static void test_mrg_big_packets(void **state)
{
	struct vm *vm = *state;
	uint64_t rw_before = vm->g->rx_ops[VSOCK_OP_RW], rw;

	assert_true(vm->g->mrg);
	test_host_to_guest_256m(state);
	rw = vm->g->rx_ops[VSOCK_OP_RW] - rw_before;
	print_message("# %" PRIu64 " RW packets for %" PRIu64 " MiB: %" PRIu64
		      " bytes each on average\n",
		      rw, (uint64_t)(BIG >> 20), rw ? (uint64_t)BIG / rw : 0);
	assert_true(rw > 0);
	assert_true(BIG / rw > 16384);
}

static int split_setup(void **state)
{
	struct vg_opts o;

	vg_opts_init(&o);
	o.rx_cut.first = VSOCK_HDR_SIZE;
	o.tx_cut.first = VSOCK_HDR_SIZE;
	return vm_setup_opts(state, &o);
}

/* Chains cut as drivers cut them (struct vg_cut): the device must read
 * and write a packet across any descriptors, as the spec allows. */

/* Linux 6.17 and late 6.12.y: the header alone, then the payload in
 * pieces of 32 KiB (a 64 KiB packet is three descriptors). */
static int cut617_setup(void **state)
{
	struct vg_opts o;

	vg_opts_init(&o);
	o.tx_cut = (struct vg_cut){ .first = VSOCK_HDR_SIZE, .piece = 32768 };
	return vm_setup_opts(state, &o);
}

/* Cuts inside the header and payloads over dozens of descriptors. */
static int cut_odd_setup(void **state)
{
	struct vg_opts o;

	vg_opts_init(&o);
	o.queue_size = 1024;
	o.tx_slots = 15; /* 67 descriptors each for 44 + 64 KiB */
	o.tx_cut = (struct vg_cut){ .first = 20, .piece = 1000 };
	o.rx_cut = (struct vg_cut){ .first = 13, .piece = 700 };
	return vm_setup_opts(state, &o);
}

/* The same through indirect tables, one ring slot a chain. */
static int cut_indirect_setup(void **state)
{
	struct vg_opts o;

	vg_opts_init(&o);
	o.tx_cut = (struct vg_cut){ .first = 30, .piece = 4096,
				    .indirect = true };
	o.rx_cut = (struct vg_cut){ .first = VSOCK_HDR_SIZE, .piece = 1024,
				    .indirect = true };
	return vm_setup_opts(state, &o);
}

/* Mergeable buffers, each cut in pieces: a packet's bytes cross both
 * buffer and descriptor edges. */
static int cut_mrg_setup(void **state)
{
	struct vg_opts o;

	vg_opts_init(&o);
	o.mergeable = true;
	o.queue_size = 1024;
	o.rx_bufs = 100; /* 10 descriptors each */
	o.rx_cut = (struct vg_cut){ .first = 10, .piece = 512 };
	return vm_setup_opts(state, &o);
}

static int many_setup(void **state)
{
	struct vg_opts o;

	vg_opts_init(&o);
	/* A thousand sockets of 256 KiB each would only cost memory here. */
	o.buf_alloc = 16384;
	o.credit_threshold = 4096;
	return vm_setup_opts(state, &o);
}

#define VM_CASE(f, vm)                                                     \
	cmocka_unit_test_prestate_setup_teardown(f, vm_setup, vm_teardown, \
						 &(vm))

int main(void)
{
	const struct CMUnitTest tests[] = {
		VM_CASE(test_guest_to_host_256m, vm_g2h),
		VM_CASE(test_host_to_guest_256m, vm_h2g),
		VM_CASE(test_half_close_guest, vm_half_g),
		VM_CASE(test_half_close_host, vm_half_h),
		VM_CASE(test_rst_on_no_listener, vm_rst),
		VM_CASE(test_control_counters, vm_ctl_counters),
		VM_CASE(test_control_slow_clients, vm_ctl_slow),
		VM_CASE(test_hostile_packets, vm_hostile),
		VM_CASE(test_credit_overrun, vm_overrun),
		VM_CASE(test_bad_connect_lines, vm_lines),
		cmocka_unit_test_prestate_setup_teardown(
			test_many_connections, many_setup, vm_teardown,
			&vm_many),
		VM_CASE(test_stalled_host_reader, vm_stall),
		cmocka_unit_test_prestate_setup_teardown(
			test_split_descriptors_echo, split_setup, vm_teardown,
			&vm_split),
		cmocka_unit_test_prestate_setup_teardown(
			test_guest_to_host_256m, cut617_setup, vm_teardown,
			&vm_cut617_g2h),
		cmocka_unit_test_prestate_setup_teardown(
			test_split_descriptors_echo, cut617_setup, vm_teardown,
			&vm_cut617_echo),
		cmocka_unit_test_prestate_setup_teardown(
			test_split_descriptors_echo, cut_odd_setup,
			vm_teardown, &vm_cut_odd_echo),
		cmocka_unit_test_prestate_setup_teardown(
			test_split_descriptors_echo, cut_indirect_setup,
			vm_teardown, &vm_cut_ind_echo),
		cmocka_unit_test_prestate_setup_teardown(
			test_guest_to_host_256m, cut_indirect_setup,
			vm_teardown, &vm_cut_ind_g2h),
		cmocka_unit_test_prestate_setup_teardown(
			test_host_to_guest_256m, cut_mrg_setup, vm_teardown,
			&vm_cut_mrg_h2g),
		VM_CASE(test_credit_request, vm_creq),
		VM_CASE(test_stalled_guest_reader, vm_gstall),
		VM_CASE(test_fair_rx, vm_fair),
		VM_CASE(test_host_closes_first, vm_hclose),
		VM_CASE(test_guest_gone, vm_gone),
		VM_CASE(test_connection_limit, vm_limit),
		VM_CASE(test_connect_line_with_data, vm_early),
		VM_CASE(test_many_host_connections, vm_many_host),
		VM_CASE(test_guest_never_answers, vm_noanswer),
#define MRG_CASE(f, setup, vm)                                            \
	cmocka_unit_test_prestate_setup_teardown(f, setup, vm_teardown, &(vm))
		VM_CASE(test_poll_us, vm_poll),
		MRG_CASE(test_host_to_guest_256m, mrg_setup, vm_mrg_h2g),
		MRG_CASE(test_host_to_guest_256m, mrg_odd_setup,
			 vm_mrg_odd_h2g),
		MRG_CASE(test_mrg_big_packets, mrg_setup, vm_mrg_big),
		MRG_CASE(test_guest_to_host_256m, mrg_setup, vm_mrg_g2h),
		MRG_CASE(test_hostile_packets, mrg_setup, vm_mrg_hostile),
		MRG_CASE(test_many_connections, mrg_many_setup, vm_mrg_many),
		MRG_CASE(test_credit_request, mrg_setup, vm_mrg_creq),
		MRG_CASE(test_fair_rx, mrg_odd_setup, vm_mrg_fair),
		MRG_CASE(test_spliced_bytes_survive_reuse, zc_setup, vm_zc),
		MRG_CASE(test_stalled_reader_bounded, zc_setup, vm_zc_stall),
		MRG_CASE(test_copy_path, zc_setup, vm_zc_copy),
	};

	struct rlimit nofile;

	/* A thousand connections take a thousand fds here and in vmio
	 * (which inherits the limit): lift the soft limit to the hard one. */
	if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 &&
	    nofile.rlim_cur < nofile.rlim_max) {
		nofile.rlim_cur = nofile.rlim_max;
		setrlimit(RLIMIT_NOFILE, &nofile);
	}
	/* A host socket the device closed must not kill us with SIGPIPE. */
	signal(SIGPIPE, SIG_IGN);
	/* VSOCK_TEST=<glob> runs only the matching cases. */
	if (getenv("VSOCK_TEST"))
		cmocka_set_test_filter(getenv("VSOCK_TEST"));
	harness_test_filter();
	return cmocka_run_group_tests(tests, NULL, harness_group_teardown);
}
