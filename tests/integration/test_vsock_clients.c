/* Two host programs of 2026 against `vmio vsock`, each acted out byte for
 * byte, with the in-tree driver (frontend/vsock_guest.h) as the guest:
 *
 * systemd-ssh-proxy (v259), `ssh vsock-mux/PATH`: it connects to the
 * hybrid socket at PATH and writes "CONNECT <port>\n". Its rule for the
 * reply, in our words: it looks at no more than 9 bytes of the stream,
 * the length of "OK 65535\n", and only by peeking (MSG_PEEK), with a 5 s
 * receive timeout. Whenever the bytes it has seen so far are a complete
 * line it consumes that much, before peeking further. The reply counts
 * as such only while it starts with "OK " and a '\n' comes within the 9
 * bytes: the line, and nothing after it, is then read off the socket and
 * the socket goes to ssh. If instead the 9 bytes fill up without a '\n',
 * or the bytes do not start with "OK ", or nothing comes within 5 s, it
 * hands the socket to ssh untouched, the bytes left in front of the
 * guest's (when it had already consumed part, it gives up: EIO). A
 * socket closed before any byte is "port not open" (ECONNREFUSED). So a
 * reply of up to 9 bytes, "OK 1024\n" to "OK 65535\n", is taken off
 * whether the guest's banner came in the same peek or not, and
 * Firecracker's "OK 1073741824\n" is left for ssh to choke on.
 *
 * The cases: the first port of the default range; ten proxies at once
 * over a range that crosses from 4 to 5 digits, each reading the banner
 * the guest wrote for its own port, an eleventh refused for want of a
 * port, and a port freed reused; the top of the port space, wrapping;
 * and --host-port-range 1073741824-2147483647, where the reply stays in
 * the stream, as before vmio counted from 1024.
 *
 * systemd's vmm.notify_socket=vsock-stream:2:PORT: PID 1's sd_notify
 * binds the privileged port 1023 (lower ones while that is taken),
 * connects to the host (CID 2) at PORT, sends one message ("READY=1\n
 * STATUS=Startup finished in ..." when boot is done; no SO_PASSCRED, no
 * credentials for its own pid), shuts down its sending side and waits in
 * recv() for the host to close: EOF is success, a byte is a protocol
 * error. vmio carries it to a listener at <uds-path>_PORT, which reads
 * the message, sees EOF and closes; the guest must see the close within
 * a bounded time, and vmio's --control must show nothing left of the
 * connection. Several notifications in a row come from the same port
 * 1023: each finds the last one gone.
 *
 * Host programs run in threads that only record what happened (cmocka's
 * assertions are not thread-safe); the main thread drives the guest. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "frontend/vsock_guest.h"
#include "harness.h"

#define WAIT HARNESS_WAIT_MS
#define SSH_PORT 22
#define NOTIFY_PORT 8888

/* systemd-ssh-proxy's window: strlen("OK 65535\n"). */
#define PROXY_WINDOW 9
/* ... and its receive timeout while it waits for the reply. */
#define PROXY_TIMEOUT_S 5

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- systemd-ssh-proxy, vsock-mux/PATH -------------------------------- */

enum proxy_verdict {
	PROXY_CONSUMED,  /* the reply was read off; the socket goes to ssh */
	PROXY_UNTOUCHED, /* handed to ssh with nothing read off */
	PROXY_FAILED,    /* gave up: errno in err */
};

struct proxy {
	const char *uds;
	enum proxy_verdict verdict;
	int err;
	char taken[PROXY_WINDOW + 1]; /* the bytes it read off */
	/* What ssh then reads, to EOF. */
	char stream[256];
	size_t stream_len;
	bool stream_eof;
	/* With hold, ssh keeps the socket, as a session does, until the
	 * test releases it. */
	bool hold;
	bool done;    /* __atomic: ssh read the stream */
	bool release; /* __atomic */
	bool joined;
	pthread_t thread;
};

/* Reads exactly n bytes off fd, as ssh-proxy's discarding recv does (a
 * short one is its EIO). */
static bool proxy_take(int fd, char *into, size_t n)
{
	return recv(fd, into, n, 0) == (ssize_t)n;
}

/* The reply handling of ssh-proxy, step for step: peek into a 9-byte
 * window, consume what was peeked before peeking again, look at the bytes
 * one at a time. */
static void proxy_skip_reply(struct proxy *p, int fd)
{
	static const char prefix[] = "OK ";
	struct timeval tv = { .tv_sec = PROXY_TIMEOUT_S };
	char *w = p->taken;
	size_t taken = 0, seen = 0, pos = 0;

	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	for (;;) {
		if (pos >= seen) {
			ssize_t n;

			if (seen >= PROXY_WINDOW)
				goto no_reply; /* no '\n' in the window */
			if (seen > taken) {
				if (!proxy_take(fd, w + taken, seen - taken))
					goto eio;
				taken = seen;
			}
			n = recv(fd, w + seen, PROXY_WINDOW - seen, MSG_PEEK);
			if (n < 0) {
				if (errno != EAGAIN)
					goto fail;
				goto no_reply; /* timed out */
			}
			if (n == 0) {
				p->verdict = PROXY_FAILED;
				p->err = taken ? EIO : ECONNREFUSED;
				return;
			}
			seen += (size_t)n;
		}
		if (pos < strlen(prefix) && w[pos] != prefix[pos])
			goto no_reply;
		if (w[pos++] == '\n')
			break;
	}
	if (pos > taken && !proxy_take(fd, w + taken, pos - taken))
		goto eio;
	w[pos] = '\0';
	p->verdict = PROXY_CONSUMED;
	return;
no_reply:
	if (taken)
		goto eio;
	w[0] = '\0';
	p->verdict = PROXY_UNTOUCHED;
	return;
eio:
	errno = EIO;
fail:
	p->verdict = PROXY_FAILED;
	p->err = errno;
}

/* ssh with the socket: everything to EOF. */
static void ssh_read(struct proxy *p, int fd)
{
	struct timeval tv = { .tv_sec = WAIT / 1000 };

	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	while (p->stream_len < sizeof(p->stream) - 1) {
		ssize_t n = recv(fd, p->stream + p->stream_len,
				 sizeof(p->stream) - 1 - p->stream_len, 0);

		if (n <= 0) {
			p->stream_eof = n == 0;
			break;
		}
		p->stream_len += (size_t)n;
	}
	p->stream[p->stream_len] = '\0';
}

static void *proxy_main(void *arg)
{
	struct proxy *p = arg;
	char line[32];
	int n, fd = harness_unix_connect(p->uds, SOCK_STREAM);

	if (fd < 0) {
		p->verdict = PROXY_FAILED;
		p->err = errno;
		return NULL;
	}
	n = snprintf(line, sizeof(line), "CONNECT %u\n", SSH_PORT);
	if (send(fd, line, (size_t)n, MSG_NOSIGNAL) != n) {
		p->verdict = PROXY_FAILED;
		p->err = errno;
	} else {
		proxy_skip_reply(p, fd);
		if (p->verdict != PROXY_FAILED)
			ssh_read(p, fd);
	}
	__atomic_store_n(&p->done, true, __ATOMIC_RELEASE);
	for (int64_t end = now_ms() + 2 * WAIT;
	     p->hold && !__atomic_load_n(&p->release, __ATOMIC_ACQUIRE) &&
	     now_ms() < end;)
		usleep(1000);
	close(fd);
	return NULL;
}

static void proxy_start(struct proxy *p, const char *uds, bool hold)
{
	memset(p, 0, sizeof(*p));
	p->uds = uds;
	p->hold = hold;
	assert_int_equal(pthread_create(&p->thread, NULL, proxy_main, p), 0);
}

/* The guest's sshd: accepts on port 22 and at once writes its banner,
 * naming the host port the connection came from, then shuts down
 * sending, so that the host's stream is the banner and its end. Returns
 * the socket, and the banner in `banner`. */
static struct vg_sock *sshd_accept(struct vg *g, char *banner, size_t size)
{
	struct vg_sock_info info;
	struct vg_sock *s;
	int n, err = 0;

	s = vg_accept(g, SSH_PORT, false, WAIT, &err);
	if (!s)
		fail_msg("accept: %s", strerror(-err));
	vg_sock_info(s, &info);
	n = snprintf(banner, size, "SSH-2.0-OpenSSH_9.9 vmio-host-port-%u\r\n",
		     info.peer_port);
	assert_int_equal(vg_write(s, banner, (size_t)n, WAIT), n);
	assert_int_equal(vg_shutdown(s, VSOCK_SHUTDOWN_SEND), 0);
	return s;
}

/* Drives the guest until ssh has read the stream. */
static void proxy_wait(struct vg *g, struct proxy *p)
{
	int64_t end = now_ms() + 2 * WAIT;

	while (!__atomic_load_n(&p->done, __ATOMIC_ACQUIRE)) {
		if (now_ms() > end)
			fail_msg("the proxy did not finish reading");
		vg_poll(g, 10);
	}
}

/* Lets the proxy close its socket, and joins it. */
static void proxy_join(struct vg *g, struct proxy *p)
{
	int64_t end = now_ms() + 2 * WAIT;

	if (p->joined)
		return;
	__atomic_store_n(&p->release, true, __ATOMIC_RELEASE);
	while (pthread_tryjoin_np(p->thread, NULL) == EBUSY) {
		if (now_ms() > end)
			fail_msg("the proxy thread did not finish");
		vg_poll(g, 10);
	}
	p->joined = true;
}

/* Drives the guest until vmio holds n connections. */
static void wait_open(struct harness_vsock *vm, long long n)
{
	for (int64_t end = now_ms() + WAIT;
	     harness_control_num(vm->ctl, "vms.0.connections_open") != n;) {
		if (now_ms() > end)
			fail_msg("vmio does not come to %lld connections", n);
		vg_poll(vm->g, 20);
	}
}

/* The proxy consumed exactly `OK <port>\n` and ssh read exactly the
 * banner, then EOF. */
static void expect_clean(const struct proxy *p, uint32_t port,
			 const char *banner)
{
	char ok[32];

	snprintf(ok, sizeof(ok), "OK %u\n", port);
	if (p->verdict != PROXY_CONSUMED)
		fail_msg("ssh-proxy did not take the reply off (verdict %d, "
			 "%s); ssh read \"%s\"", p->verdict,
			 p->verdict == PROXY_FAILED ? strerror(p->err) : "-",
			 p->stream);
	assert_string_equal(p->taken, ok);
	assert_true(strlen(ok) <= PROXY_WINDOW);
	assert_true(p->stream_eof);
	assert_string_equal(p->stream, banner);
}

/* vmio answers the port it handed out. */
static uint32_t banner_port(const char *banner)
{
	const char *k = strstr(banner, "host-port-");

	assert_non_null(k);
	return (uint32_t)strtoul(k + strlen("host-port-"), NULL, 10);
}

/* The default range: the first connection gets 1024, and "OK 1024\n"
 * goes, leaving the banner whole. */
static void test_ssh_proxy_default_range(void **state)
{
	struct harness_vsock *vm = *state;
	static struct proxy p; /* outlives a failed assertion */
	char banner[80];
	struct vg_sock *s;

	assert_int_equal(vg_listen(vm->g, SSH_PORT), 0);
	proxy_start(&p, vm->uds, false);
	s = sshd_accept(vm->g, banner, sizeof(banner));
	proxy_join(vm->g, &p);
	expect_clean(&p, banner_port(banner), banner);
	assert_int_equal(banner_port(banner), 1024);
	vg_close(s);
}

/* Ten proxies at once over 9995-10004: replies of 8 and of 9 bytes, the
 * latter filling the window exactly, each proxy reading the banner for
 * its own port. An eleventh finds every port of the range in use towards
 * port 22: vmio closes it, which the proxy reports as a port not open.
 * A port freed is handed out again, the ones in use skipped. */
#define RANGE_N 10
static struct harness_vsock vm_cross = {
	.extra = { "--host-port-range", "9995-10004" }
};

static void test_ssh_proxy_ports_cross_digits(void **state)
{
	struct harness_vsock *vm = *state;
	static struct proxy p[RANGE_N + 2];
	static struct vg_sock *s[RANGE_N];
	static char banner[RANGE_N][80];
	bool seen[RANGE_N] = { false };
	char again[80];
	struct vg_sock *t;

	assert_int_equal(vg_listen(vm->g, SSH_PORT), 0);
	for (unsigned i = 0; i < RANGE_N; i++)
		proxy_start(&p[i], vm->uds, true);
	for (unsigned i = 0; i < RANGE_N; i++)
		s[i] = sshd_accept(vm->g, banner[i], sizeof(banner[i]));
	for (unsigned i = 0; i < RANGE_N; i++)
		proxy_wait(vm->g, &p[i]);
	/* Each proxy got one of the ports, its own banner with it. */
	for (unsigned i = 0; i < RANGE_N; i++) {
		uint32_t port;
		unsigned k;

		assert_int_equal(p[i].verdict, PROXY_CONSUMED);
		port = (uint32_t)strtoul(p[i].taken + 3, NULL, 10);
		assert_in_range(port, 9995, 10004);
		assert_false(seen[port - 9995]);
		seen[port - 9995] = true;
		for (k = 0; k < RANGE_N && banner_port(banner[k]) != port; k++)
			;
		assert_true(k < RANGE_N);
		expect_clean(&p[i], port, banner[k]);
	}

	/* No port left towards 22: refused at once. */
	proxy_start(&p[RANGE_N], vm->uds, false);
	proxy_join(vm->g, &p[RANGE_N]);
	assert_int_equal(p[RANGE_N].verdict, PROXY_FAILED);
	assert_int_equal(p[RANGE_N].err, ECONNREFUSED);
	assert_int_equal(harness_control_num(vm->ctl, "vms.0.connections_open"),
			 RANGE_N);

	/* The session on 9999 ends (ssh closes, sshd closes); once vmio
	 * dropped the connection the next proxy gets 9999, the ports still
	 * in use skipped. */
	for (unsigned i = 0; i < RANGE_N; i++) {
		if (banner_port(banner[i]) != 9999)
			continue;
		for (unsigned k = 0; k < RANGE_N; k++)
			if (strcmp(p[k].stream, banner[i]) == 0)
				proxy_join(vm->g, &p[k]);
		vg_close(s[i]);
		s[i] = NULL;
	}
	wait_open(vm, RANGE_N - 1);
	proxy_start(&p[RANGE_N + 1], vm->uds, false);
	t = sshd_accept(vm->g, again, sizeof(again));
	proxy_join(vm->g, &p[RANGE_N + 1]);
	expect_clean(&p[RANGE_N + 1], 9999, again);
	vg_close(t);
	for (unsigned i = 0; i < RANGE_N; i++) {
		proxy_join(vm->g, &p[i]);
		vg_close(s[i]);
	}
}

/* The top of the port space, one connection after another: "OK 65535\n"
 * fills the window exactly, and the range wraps back to its start. */
static struct harness_vsock vm_top = {
	.extra = { "--host-port-range", "65533-65535" }
};

static void test_ssh_proxy_top_ports(void **state)
{
	static const uint32_t want[] = { 65533, 65534, 65535, 65533, 65534 };
	struct harness_vsock *vm = *state;
	static struct proxy p;
	char banner[80];

	assert_int_equal(vg_listen(vm->g, SSH_PORT), 0);
	for (unsigned i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		struct vg_sock *s;

		proxy_start(&p, vm->uds, false);
		s = sshd_accept(vm->g, banner, sizeof(banner));
		proxy_join(vm->g, &p);
		assert_int_equal(banner_port(banner), want[i]);
		expect_clean(&p, want[i], banner);
		vg_close(s);
		/* Gone from vmio's table before the range comes round. */
		wait_open(vm, 0);
	}
}

/* Firecracker's base: "OK 1073741824\n" does not fit the window, the
 * proxy hands the socket over untouched, and ssh reads the reply in
 * front of the banner, what every connection did before vmio counted
 * from 1024. */
static struct harness_vsock vm_fc = {
	.extra = { "--host-port-range", "1073741824-2147483647" }
};

static void test_ssh_proxy_firecracker_base(void **state)
{
	struct harness_vsock *vm = *state;
	static struct proxy p;
	char banner[80], want[128];
	struct vg_sock *s;

	assert_int_equal(vg_listen(vm->g, SSH_PORT), 0);
	proxy_start(&p, vm->uds, false);
	s = sshd_accept(vm->g, banner, sizeof(banner));
	proxy_join(vm->g, &p);
	assert_int_equal(p.verdict, PROXY_UNTOUCHED);
	assert_string_equal(p.taken, "");
	snprintf(want, sizeof(want), "OK 1073741824\n%s", banner);
	assert_true(p.stream_eof);
	assert_string_equal(p.stream, want);
	vg_close(s);
}

/* ---- systemd's vmm.notify_socket=vsock-stream:2:PORT ------------------ */

/* The VMM's listener at <uds-path>_NOTIFY_PORT: takes one connection,
 * reads it to EOF, and closes it. */
struct notify_host {
	int lfd;
	char got[256];
	size_t len;
	bool eof;
	int64_t closed_ms; /* __atomic: when it closes, 0 before */
	char error[128];
	pthread_t thread;
};

static void *notify_host_main(void *arg)
{
	struct notify_host *h = arg;
	int fd;

	if (!harness_wait_fd(h->lfd, POLLIN, WAIT)) {
		snprintf(h->error, sizeof(h->error), "no connection came");
		return NULL;
	}
	fd = accept4(h->lfd, NULL, NULL, SOCK_CLOEXEC);
	if (fd < 0) {
		snprintf(h->error, sizeof(h->error), "accept: %s",
			 strerror(errno));
		return NULL;
	}
	while (h->len < sizeof(h->got) - 1) {
		ssize_t n;

		if (!harness_wait_fd(fd, POLLIN, WAIT)) {
			snprintf(h->error, sizeof(h->error),
				 "no EOF after %zu bytes", h->len);
			break;
		}
		n = read(fd, h->got + h->len, sizeof(h->got) - 1 - h->len);
		if (n <= 0) {
			h->eof = n == 0;
			break;
		}
		h->len += (size_t)n;
	}
	h->got[h->len] = '\0';
	/* Stamped before: the guest may see the close before close()
	 * returns here. */
	__atomic_store_n(&h->closed_ms, now_ms(), __ATOMIC_RELEASE);
	close(fd);
	return NULL;
}

/* One sd_notify() from the guest's PID 1: from port 1023, the message,
 * SHUT_WR, then a wait for the host's close. Asserts the host got the
 * message and its EOF, and the guest the close, within a second of it. */
static void notify_once(struct harness_vsock *vm, const char *msg)
{
	static struct notify_host h; /* outlives a failed assertion */
	char path[300], c;
	struct vg_sock *s;
	int64_t closed;
	ssize_t r;
	int err = 0;

	memset(&h, 0, sizeof(h));
	snprintf(path, sizeof(path), "%s_%u", vm->uds, NOTIFY_PORT);
	h.lfd = harness_unix_listen(path);
	assert_int_equal(pthread_create(&h.thread, NULL, notify_host_main, &h),
			 0);
	s = vg_connect_from(vm->g, 1023, NOTIFY_PORT, WAIT, &err);
	if (!s)
		fail_msg("connect from port 1023: %s", strerror(-err));
	assert_int_equal(vg_write(s, msg, strlen(msg), WAIT),
			 (ssize_t)strlen(msg));
	assert_int_equal(vg_shutdown(s, VSOCK_SHUTDOWN_SEND), 0);
	/* recv(fd, &c, 1): EOF once the host closed. A Linux guest reads
	 * EOF for a SHUTDOWN and for an RST alike. */
	r = vg_read(s, &c, 1, WAIT);
	closed = __atomic_load_n(&h.closed_ms, __ATOMIC_ACQUIRE);
	pthread_join(h.thread, NULL);
	close(h.lfd);
	unlink(path);
	if (h.error[0])
		fail_msg("host: %s", h.error);
	assert_true(h.eof);
	assert_string_equal(h.got, msg);
	if (r != 0 && r != -ECONNRESET)
		fail_msg("the guest's wait for the close ended with %zd", r);
	assert_true(closed > 0);
	print_message("# guest saw the host's close after %" PRId64 " ms\n",
		      now_ms() - closed);
	assert_true(now_ms() - closed < 1000);
	vg_close(s);
}

/* Three notifications in a row, as PID 1 sends them over a boot, each
 * from port 1023 again; then nothing of them is left in vmio. */
static void test_notify_socket(void **state)
{
	static const char *const msgs[] = {
		"READY=1\nSTATUS=Startup finished in 1.618s.",
		"X_SYSTEMD_UNIT_ACTIVE=multi-user.target\n",
		"STOPPING=1\nSTATUS=Shutting down...",
	};
	struct harness_vsock *vm = *state;
	long long bytes = 0;
	json_t *doc;
	const unsigned n = sizeof(msgs) / sizeof(msgs[0]);

	for (unsigned i = 0; i < n; i++) {
		notify_once(vm, msgs[i]);
		bytes += (long long)strlen(msgs[i]);
	}
	for (int64_t end = now_ms() + WAIT;
	     harness_control_num(vm->ctl, "vms.0.connections_ended") < n;) {
		if (now_ms() > end)
			fail_msg("vmio still holds a notify connection");
		vg_poll(vm->g, 20);
	}
	doc = harness_control_get(vm->ctl);
	assert_int_equal(harness_json_num(doc, "vms.0.connections_open"), 0);
	assert_int_equal(harness_json_num(doc, "vms.0.connections_opened"), n);
	assert_int_equal(harness_json_num(doc, "vms.0.connections_ended"), n);
	assert_int_equal(harness_json_num(doc, "vms.0.connections_refused"), 0);
	assert_int_equal(json_array_size(json_object_get(
				 json_array_get(json_object_get(doc, "vms"), 0),
				 "connections")),
			 0);
	assert_int_equal(harness_json_num(doc, "vms.0.totals.bytes_from_guest"),
			 bytes);
	assert_int_equal(harness_json_num(doc, "vms.0.totals.bytes_to_guest"),
			 0);
	json_decref(doc);
	if (vm->g->violations)
		fail_msg("the device broke the protocol: %s",
			 vm->g->violation);
}

static struct harness_vsock vm_default, vm_notify;

#define VM_CASE(f, vm)                                                     \
	cmocka_unit_test_prestate_setup_teardown(f, harness_vsock_setup,   \
						 harness_vsock_teardown, &(vm))

int main(void)
{
	const struct CMUnitTest tests[] = {
		VM_CASE(test_ssh_proxy_default_range, vm_default),
		VM_CASE(test_ssh_proxy_ports_cross_digits, vm_cross),
		VM_CASE(test_ssh_proxy_top_ports, vm_top),
		VM_CASE(test_ssh_proxy_firecracker_base, vm_fc),
		VM_CASE(test_notify_socket, vm_notify),
	};

	harness_test_filter();
	return cmocka_run_group_tests(tests, NULL, harness_group_teardown);
}
