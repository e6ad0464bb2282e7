/* vmio-bad-vmm: a VMM that misbehaves on a vhost-user socket, one way at
 * a time, for the isolation test (tests/integration/test_isolation.c) and
 * benchmark (scripts/bench-isolation.sh): while it holds one VM's socket,
 * the other VMs of the same `vmio vsock` must keep their service.
 *
 * Kinds (each repeats until SIGTERM, SIGINT or --duration-ms; whenever the
 * backend closes the connection, it connects again and starts over):
 *   partial            the first 6 bytes of a 12-byte header, then nothing
 *                      for --hold-ms (default: until the backend closes),
 *                      then close and again
 *   partial-reconnect  the same with --hold-ms 1050 by default: a bit over
 *                      vmio's default --message-timeout of 1000 ms
 *   no-read            GET_FEATURES and GET_PROTOCOL_FEATURES, over and
 *                      over, never reading a reply (SO_RCVBUF at its least;
 *                      AF_UNIX stream sockets bound what is in flight by
 *                      the sender's buffer, so the backend's fills anyway);
 *                      with --hold-ms, a fresh connection that often
 *   churn              connect, one valid GET_FEATURES, close, as fast as
 *                      it can (every other round closes without sending)
 *   huge-size          a whole header whose size field says 2 GiB
 *                      (0x80000000), then nothing for --hold-ms (default:
 *                      until the backend closes), then close and again
 *   kick-storm         a proper vsock session (the in-tree driver), then
 *                      writes to its rx and tx kick eventfds as fast as it
 *                      can with nothing new in the rings, as a guest
 *                      writing its notify register in a loop would
 *
 * It waits for nothing without a bound: every wait is a poll of at most
 * 100 ms that also looks at the clock and at the signal flag. It prints
 * "ready" on stdout (flushed) once it has misbehaved the first time, and
 * on exit one line of counts:
 *   vmio-bad-vmm: kind=K connects=N closed_by_backend=N bytes_sent=N kicks=N
 * Exit status 0 on SIGTERM, SIGINT or the end of --duration-ms; 1 if it
 * never connected; 2 on a usage error. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "cli/options.h"
#include "frontend/vsock_guest.h"
#include "util/clock.h"
#include "vhost-user/protocol.h"

#define DEFAULT_DURATION_MS (600 * 1000)
#define RECONNECT_HOLD_MS 1050
#define POLL_MS 100

enum kind { PARTIAL, PARTIAL_RECONNECT, NO_READ, CHURN, HUGE_SIZE,
	    KICK_STORM };

static const char *const kind_names[] = {
	[PARTIAL] = "partial",
	[PARTIAL_RECONNECT] = "partial-reconnect",
	[NO_READ] = "no-read",
	[CHURN] = "churn",
	[HUGE_SIZE] = "huge-size",
	[KICK_STORM] = "kick-storm",
};

static const char usage[] =
	"Usage: vmio-bad-vmm --socket PATH --kind KIND [--hold-ms N]\n"
	"                    [--duration-ms N]\n"
	"\n"
	"Misbehaves on the vhost-user socket PATH until SIGTERM, SIGINT or\n"
	"--duration-ms (default 600000). KIND: partial, partial-reconnect,\n"
	"no-read, churn, huge-size, kick-storm (see the top of\n"
	"tools/vmio-bad-vmm.c).\n"
	"  --hold-ms N      how long to hold a connection before closing it and\n"
	"                   connecting again (partial, huge-size: default until\n"
	"                   the backend closes; partial-reconnect: 1050;\n"
	"                   no-read: default until the backend closes)\n"
	"  --duration-ms N  stop after N ms\n";

static volatile sig_atomic_t stop;

static struct {
	uint64_t connects, closed_by_backend, bytes_sent, kicks;
} count;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static int64_t end_ms;

static bool done(void)
{
	return stop || vmio_now_ms() >= end_ms;
}

/* A non-blocking connection to path, or -1 (backlog full, no listener
 * yet: the caller waits a little and tries again). */
static int try_connect(const char *path)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

	if (fd < 0)
		return -1;
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		int e = errno;

		close(fd);
		errno = e;
		return -1;
	}
	count.connects++;
	return fd;
}

/* Connects, retrying every few ms until done(). */
static int connect_retry(const char *path)
{
	while (!done()) {
		int fd = try_connect(path);

		if (fd >= 0)
			return fd;
		poll(NULL, 0, errno == EAGAIN ? 1 : 10);
	}
	return -1;
}

/* Sends all of buf unless the backend goes away, done() or the clock
 * passes until: 1 sent, 0 the backend closed, -1 out of time. */
static int send_all(int fd, const void *buf, size_t len, int64_t until)
{
	size_t off = 0;

	while (off < len) {
		ssize_t n = send(fd, (const char *)buf + off, len - off,
				 MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n > 0) {
			off += (size_t)n;
			count.bytes_sent += (uint64_t)n;
			continue;
		}
		if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
			struct pollfd p = { .fd = fd, .events = POLLOUT };

			if (done() || vmio_now_ms() >= until)
				return -1;
			poll(&p, 1, POLL_MS);
			continue;
		}
		return 0;
	}
	return 1;
}

/* Holds fd, sending nothing, for hold_ms (< 0: forever) or until the
 * backend closes it (true) or done(). Reads and drops what comes. */
static bool hold(int fd, int hold_ms)
{
	int64_t until = hold_ms < 0 ? INT64_MAX : vmio_now_ms() + hold_ms;

	while (!done() && vmio_now_ms() < until) {
		struct pollfd p = { .fd = fd, .events = POLLIN | POLLRDHUP };
		char buf[256];

		if (poll(&p, 1, POLL_MS) <= 0)
			continue;
		if (p.revents & (POLLHUP | POLLERR | POLLRDHUP))
			return true;
		if (read(fd, buf, sizeof(buf)) == 0)
			return true;
	}
	return false;
}

/* Whether the backend closed fd, without reading a byte of it. */
static bool peer_closed(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLRDHUP };

	return poll(&p, 1, 0) == 1 &&
	       (p.revents & (POLLHUP | POLLERR | POLLRDHUP));
}

static bool said_ready;

static void ready(void)
{
	if (said_ready)
		return;
	said_ready = true;
	printf("ready\n");
	fflush(stdout);
}

static struct vhost_user_header header(uint32_t request, uint32_t size)
{
	return (struct vhost_user_header){ .request = request,
					   .flags = VHOST_USER_VERSION,
					   .size = size };
}

/* One connection of the partial kinds and huge-size: what to send first,
 * then hold. */
static void run_hold(const char *path, const void *first, size_t len,
		     int hold_ms)
{
	while (!done()) {
		int fd = connect_retry(path), rc;

		if (fd < 0)
			return;
		rc = send_all(fd, first, len, INT64_MAX);
		if (rc > 0) {
			ready();
			if (hold(fd, hold_ms))
				count.closed_by_backend++;
		} else if (rc == 0) {
			count.closed_by_backend++;
		}
		close(fd);
	}
}

static void run_no_read(const char *path, int hold_ms)
{
	struct vhost_user_header req[2] = {
		header(VHOST_USER_GET_FEATURES, 0),
		header(VHOST_USER_GET_PROTOCOL_FEATURES, 0),
	};

	while (!done()) {
		int fd = connect_retry(path), least = 1;
		int64_t until;

		if (fd < 0)
			return;
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &least, sizeof(least));
		until = hold_ms < 0 ? INT64_MAX : vmio_now_ms() + hold_ms;
		while (!done() && vmio_now_ms() < until) {
			int rc = send_all(fd, req, sizeof(req), until);

			if (rc > 0)
				ready();
			if (rc == 0 || peer_closed(fd)) {
				count.closed_by_backend++;
				break;
			}
		}
		close(fd);
	}
}

static void run_churn(const char *path)
{
	struct vhost_user_header req = header(VHOST_USER_GET_FEATURES, 0);

	for (uint64_t round = 0; !done(); round++) {
		int fd = connect_retry(path);

		if (fd < 0)
			return;
		if (round % 2 == 0 && send(fd, &req, sizeof(req),
					   MSG_NOSIGNAL | MSG_DONTWAIT) ==
					      (ssize_t)sizeof(req))
			count.bytes_sent += sizeof(req);
		close(fd);
		ready();
	}
}

static int bad_usage(const char *msg)
{
	fprintf(stderr, "vmio-bad-vmm: %s\nTry 'vmio-bad-vmm --help'.\n", msg);
	return 2;
}

static bool parse_ms(const char *s, int *out)
{
	uint64_t v;

	if (vmio_parse_u64(s, 24ull * 3600 * 1000, &v))
		return false;
	*out = (int)v;
	return true;
}

/* One vsock session, then kicks on both queues until done(). The rings
 * never change: every kick is one the device finds nothing for. */
static void run_kick_storm(const char *path)
{
	struct vg_opts o;
	struct vg *vg;
	char err[256] = "";

	vg_opts_init(&o);
	vg = vg_open(path, 5000, &o, err, sizeof(err));
	if (!vg) {
		fprintf(stderr, "vmio-bad-vmm: %s\n", err);
		return;
	}
	count.connects++;
	printf("ready\n");
	fflush(stdout);
	while (!done()) {
		for (int i = 0; i < 4096; i++) {
			uint64_t one = 1;
			int fd = vg->fe->queues[i & 1].kick_fd;

			if (write(fd, &one, sizeof(one)) == sizeof(one))
				count.kicks++;
		}
	}
	vg_free(vg);
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "kind", required_argument, NULL, 'k' },
		{ "hold-ms", required_argument, NULL, 'H' },
		{ "duration-ms", required_argument, NULL, 'd' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *path = NULL;
	int kind = -1, hold_ms = -1, duration_ms = DEFAULT_DURATION_MS, c;
	struct sigaction sa = { .sa_handler = on_signal };

	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (c) {
		case 's':
			path = optarg;
			break;
		case 'k':
			for (int k = 0; k <= KICK_STORM; k++)
				if (!strcmp(optarg, kind_names[k]))
					kind = k;
			if (kind < 0)
				return bad_usage("--kind: partial, "
						 "partial-reconnect, no-read, "
						 "churn, huge-size or "
						 "kick-storm");
			break;
		case 'H':
			if (!parse_ms(optarg, &hold_ms))
				return bad_usage("--hold-ms: milliseconds");
			break;
		case 'd':
			if (!parse_ms(optarg, &duration_ms))
				return bad_usage("--duration-ms: milliseconds");
			break;
		case 'h':
			fputs(usage, stdout);
			return 0;
		default:
			return bad_usage("bad option");
		}
	}
	if (optind < argc)
		return bad_usage("unexpected argument");
	if (!path || kind < 0)
		return bad_usage("--socket and --kind are needed");
	if (strlen(path) >= sizeof(((struct sockaddr_un *)0)->sun_path))
		return bad_usage("--socket: path too long");
	if (kind == PARTIAL_RECONNECT && hold_ms < 0)
		hold_ms = RECONNECT_HOLD_MS;

	/* No SA_RESTART: a signal ends the poll it arrives in. */
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	end_ms = vmio_now_ms() + duration_ms;

	switch (kind) {
	case PARTIAL:
	case PARTIAL_RECONNECT: {
		struct vhost_user_header h = header(VHOST_USER_GET_FEATURES, 0);

		run_hold(path, &h, 6, hold_ms);
		break;
	}
	case HUGE_SIZE: {
		struct vhost_user_header h =
			header(VHOST_USER_SET_FEATURES, 0x80000000u);

		run_hold(path, &h, sizeof(h), hold_ms);
		break;
	}
	case NO_READ:
		run_no_read(path, hold_ms);
		break;
	case CHURN:
		run_churn(path);
		break;
	case KICK_STORM:
		run_kick_storm(path);
		break;
	}
	printf("vmio-bad-vmm: kind=%s connects=%" PRIu64
	       " closed_by_backend=%" PRIu64 " bytes_sent=%" PRIu64
	       " kicks=%" PRIu64 "\n",
	       kind_names[kind], count.connects, count.closed_by_backend,
	       count.bytes_sent, count.kicks);
	return count.connects ? 0 : 1;
}
