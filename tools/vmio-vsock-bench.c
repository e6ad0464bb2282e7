/* vmio-vsock-bench: one timed stream through a running `vmio vsock`, with
 * the in-tree front end (frontend/vsock_guest.h) as the guest's
 * virtio-vsock driver in this process and the host peer in a forked child,
 * as a real host program would be. With --direct, the same two processes
 * and the same message pattern over plain AF_UNIX stream sockets instead:
 * the limit this machine sets. What `make bench` runs, interleaved.
 *
 * The sender writes --msg-size chunks, round robin over --conns
 * connections; the receiver counts bytes, and checks the first and last
 * message of each connection against the pattern. Time runs from the
 * first byte sent to the last byte received (CLOCK_MONOTONIC is the same
 * clock in both processes). Ten seconds without progress is an error. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "frontend/vsock_guest.h"

#define MAX_CONNS 64
#define STALL_MS 10000
#define G2H_PORT 1234
#define H2G_PORT 5000
#define READ_SIZE 65536

static const char usage[] =
	"Usage: vmio-vsock-bench --socket PATH --uds-path PATH [options]\n"
	"       vmio-vsock-bench --direct [options]\n"
	"\n"
	"Times one stream through a running `vmio vsock` (this process is the\n"
	"guest, a forked child the host program), or with --direct over plain\n"
	"AF_UNIX stream sockets between the same two processes. Prints one\n"
	"line: <vsock|direct> <dir> msg=N conns=N bytes=N time=S MB/s=X\n"
	"\n"
	"Options:\n"
	"  --socket PATH      the device's vhost-user socket\n"
	"  --uds-path PATH    the device's --uds-path\n"
	"  --direction D      g2h (guest to host, default) or h2g\n"
	"  --msg-size N       bytes per write (default 64K)\n"
	"  --bytes N          bytes in all (default 256M; K, M, G suffixes)\n"
	"  --conns N          connections, 1-64 (default 1)\n"
	"  --rx-buf N         guest rx buffer payload size (default 4K, as\n"
	"                     Linux; at most 64K)\n"
	"  --direct           no vmio: AF_UNIX between the two processes\n"
	"  -h, --help         this text\n";

struct opts {
	const char *socket, *uds;
	bool h2g, direct;
	uint64_t msg, bytes, per_conn;
	unsigned conns;
	uint32_t rx_buf;
};

/* What the child reports through a pipe when it is done. */
struct report {
	int64_t t_ns;    /* g2h: last byte received; h2g: first byte sent */
	uint64_t bytes;  /* received (g2h) or sent (h2g) */
	int ok;
	char error[160];
};

static int bad_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static int bad_usage(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "vmio-vsock-bench: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nTry 'vmio-vsock-bench --help'.\n");
	return 2;
}

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

static void die(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "vmio-vsock-bench: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

static int parse_size(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;
	unsigned shift = 0;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s || *s == '-')
		return -1;
	switch (*end) {
	case 'k': case 'K': shift = 10; end++; break;
	case 'm': case 'M': shift = 20; end++; break;
	case 'g': case 'G': shift = 30; end++; break;
	default: break;
	}
	if (*end == 'i' && shift)
		end++;
	if ((*end == 'b' || *end == 'B') && shift)
		end++;
	if (*end || (shift && v > (UINT64_MAX >> shift)))
		return -1;
	*out = (uint64_t)v << shift;
	return 0;
}

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ---- the pattern: every message is the same msg bytes ---- */

static uint8_t pat(uint64_t msg, uint64_t off)
{
	uint64_t k = off % msg;

	return (uint8_t)((k * 2654435761u) >> 13 ^ k >> 8 ^ 0x5a);
}

static void pat_fill(uint64_t msg, uint8_t *buf)
{
	for (uint64_t i = 0; i < msg; i++)
		buf[i] = pat(msg, i);
}

/* Checks the part of buf (at stream offset off) that lies in the first
 * or the last message of a stream of total bytes. */
static bool pat_check_ends(uint64_t msg, uint64_t total, uint64_t off,
			   const uint8_t *buf, size_t n)
{
	uint64_t tail = total > msg ? total - msg : 0;

	for (size_t i = 0; i < n; i++) {
		uint64_t o = off + i;

		if (o >= msg && o < tail) {
			/* Skip to the tail. */
			if (tail - off >= n)
				break;
			i = (size_t)(tail - off);
			o = tail;
		}
		if (buf[i] != pat(msg, o))
			return false;
	}
	return true;
}

/* ---- plain sockets (the host side always; the guest side with
 * --direct) ---- */

static void set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		die("fcntl: %s", strerror(errno));
}

static int unix_listen(const char *path)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		die("socket: %s", strerror(errno));
	if (strlen(path) >= sizeof(a.sun_path))
		die("path too long: %s", path);
	strcpy(a.sun_path, path);
	unlink(path);
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    listen(fd, 128) < 0)
		die("listen on %s: %s", path, strerror(errno));
	return fd;
}

static int unix_connect(const char *path)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -1;
	if (strlen(path) >= sizeof(a.sun_path)) {
		close(fd);
		return -1;
	}
	strcpy(a.sun_path, path);
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Sends o->per_conn bytes on each of fds in o->msg writes, round robin,
 * with non-blocking writes and poll when none can take more. Fills *t0
 * at the first write. Returns 0, or -1 with err filled. */
static int fd_send_all(const struct opts *o, const int *fds, int64_t *t0,
		       uint64_t *sent_total, char *err, size_t err_size)
{
	static uint8_t buf[VSOCK_MAX_PKT_PAYLOAD * 16];
	uint64_t sent[MAX_CONNS] = { 0 };
	unsigned done = 0;
	int64_t last = now_ns();

	pat_fill(o->msg, buf);
	*t0 = now_ns();
	*sent_total = 0;
	while (done < o->conns) {
		bool progress = false;

		for (unsigned c = 0; c < o->conns; c++) {
			uint64_t at = sent[c] % o->msg;
			uint64_t n = o->msg - at;
			ssize_t r;

			if (sent[c] == o->per_conn)
				continue;
			if (n > o->per_conn - sent[c])
				n = o->per_conn - sent[c];
			r = write(fds[c], buf + at, n);
			if (r < 0 && (errno == EAGAIN || errno == EINTR))
				continue;
			if (r < 0) {
				snprintf(err, err_size, "write: %s",
					 strerror(errno));
				return -1;
			}
			sent[c] += (uint64_t)r;
			*sent_total += (uint64_t)r;
			progress = true;
			if (sent[c] == o->per_conn) {
				shutdown(fds[c], SHUT_WR);
				done++;
			}
		}
		if (progress) {
			last = now_ns();
			continue;
		}
		if (now_ns() - last > (int64_t)STALL_MS * 1000000) {
			snprintf(err, err_size,
				 "no progress for %d s after %" PRIu64
				 " bytes sent", STALL_MS / 1000, *sent_total);
			return -1;
		}
		struct pollfd p[MAX_CONNS];

		for (unsigned c = 0; c < o->conns; c++)
			p[c] = (struct pollfd){
				.fd = sent[c] == o->per_conn ? -1 : fds[c],
				.events = POLLOUT,
			};
		poll(p, o->conns, 100);
	}
	return 0;
}

/* Reads until each of fds has given o->per_conn bytes; fills *t1 at the
 * last byte. Returns 0, or -1 with err filled. */
static int fd_recv_all(const struct opts *o, const int *fds, int64_t *t1,
		       uint64_t *got_total, char *err, size_t err_size)
{
	static uint8_t buf[READ_SIZE];
	uint64_t got[MAX_CONNS] = { 0 };
	unsigned done = 0;
	int64_t last = now_ns();

	*got_total = 0;
	while (done < o->conns) {
		bool progress = false;

		for (unsigned c = 0; c < o->conns; c++) {
			ssize_t r;

			if (got[c] == o->per_conn)
				continue;
			r = read(fds[c], buf, sizeof(buf));
			if (r < 0 && (errno == EAGAIN || errno == EINTR))
				continue;
			if (r <= 0) {
				snprintf(err, err_size,
					 "connection %u: %s after %" PRIu64
					 " bytes", c,
					 r ? strerror(errno) : "early EOF",
					 got[c]);
				return -1;
			}
			if (!pat_check_ends(o->msg, o->per_conn, got[c], buf,
					    (size_t)r)) {
				snprintf(err, err_size,
					 "connection %u: wrong bytes at %"
					 PRIu64, c, got[c]);
				return -1;
			}
			got[c] += (uint64_t)r;
			*got_total += (uint64_t)r;
			progress = true;
			if (got[c] > o->per_conn) {
				snprintf(err, err_size,
					 "connection %u: %" PRIu64
					 " bytes, more than sent", c, got[c]);
				return -1;
			}
			if (got[c] == o->per_conn)
				done++;
		}
		if (progress) {
			last = now_ns();
			continue;
		}
		if (now_ns() - last > (int64_t)STALL_MS * 1000000) {
			snprintf(err, err_size,
				 "no progress for %d s after %" PRIu64
				 " bytes received", STALL_MS / 1000,
				 *got_total);
			return -1;
		}
		struct pollfd p[MAX_CONNS];

		for (unsigned c = 0; c < o->conns; c++)
			p[c] = (struct pollfd){
				.fd = got[c] == o->per_conn ? -1 : fds[c],
				.events = POLLIN,
			};
		poll(p, o->conns, 100);
	}
	*t1 = now_ns();
	return 0;
}

/* Reads one '\n'-terminated line byte by byte, so nothing after it is
 * taken; bounded by STALL_MS. */
static int read_line(int fd, char *buf, size_t size)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	size_t n = 0;

	while (n + 1 < size) {
		if (poll(&p, 1, STALL_MS) != 1 || read(fd, buf + n, 1) != 1)
			return -1;
		if (buf[n++] == '\n')
			break;
	}
	buf[n] = '\0';
	return (int)n;
}

/* ---- the host side, in the child ---- */

/* fds: socketpair ends for --direct, else NULL (the child accepts on lfd
 * for g2h, connects to the uds path for h2g). */
static void host_main(const struct opts *o, int lfd, const int *given,
		      int report_fd)
{
	struct report rep = { 0 };
	int fds[MAX_CONNS];
	int64_t t;

	if (given) {
		memcpy(fds, given, sizeof(int) * o->conns);
	} else if (!o->h2g) {
		for (unsigned c = 0; c < o->conns; c++) {
			struct pollfd p = { .fd = lfd, .events = POLLIN };

			if (poll(&p, 1, STALL_MS) != 1) {
				snprintf(rep.error, sizeof(rep.error),
					 "no guest connection in %d s",
					 STALL_MS / 1000);
				goto out;
			}
			fds[c] = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
			if (fds[c] < 0) {
				snprintf(rep.error, sizeof(rep.error),
					 "accept: %s", strerror(errno));
				goto out;
			}
		}
	} else {
		char line[64];

		for (unsigned c = 0; c < o->conns; c++) {
			int n;

			fds[c] = unix_connect(o->uds);
			if (fds[c] < 0) {
				snprintf(rep.error, sizeof(rep.error),
					 "connect to %s: %s", o->uds,
					 strerror(errno));
				goto out;
			}
			n = snprintf(line, sizeof(line), "CONNECT %u\n",
				     H2G_PORT);
			if (write(fds[c], line, (size_t)n) != n) {
				snprintf(rep.error, sizeof(rep.error),
					 "CONNECT: %s", strerror(errno));
				goto out;
			}
		}
		for (unsigned c = 0; c < o->conns; c++)
			if (read_line(fds[c], line, sizeof(line)) < 4 ||
			    strncmp(line, "OK ", 3)) {
				snprintf(rep.error, sizeof(rep.error),
					 "connection %u: no OK line", c);
				goto out;
			}
	}
	for (unsigned c = 0; c < o->conns; c++)
		set_nonblock(fds[c]);
	if (o->h2g) {
		if (!fd_send_all(o, fds, &t, &rep.bytes, rep.error,
				 sizeof(rep.error)))
			rep.ok = 1;
	} else {
		if (!fd_recv_all(o, fds, &t, &rep.bytes, rep.error,
				 sizeof(rep.error)))
			rep.ok = 1;
	}
	rep.t_ns = t;
out:
	(void)!write(report_fd, &rep, sizeof(rep));
	/* h2g: wait for the guest to be done reading before closing, so
	 * close is not seen as part of the stream. */
	if (o->h2g && rep.ok) {
		char b;
		struct pollfd p = { .fd = report_fd, .events = POLLIN };

		poll(&p, 1, STALL_MS);
		(void)!read(report_fd, &b, 1);
	}
	_exit(rep.ok ? 0 : 1);
}

/* ---- the guest side through vmio ---- */

static int vg_send_all(const struct opts *o, struct vg *g,
		       struct vg_sock **s, int64_t *t0, uint64_t *total,
		       char *err, size_t err_size)
{
	static uint8_t buf[VSOCK_MAX_PKT_PAYLOAD * 16];
	uint64_t sent[MAX_CONNS] = { 0 };
	unsigned done = 0;
	int64_t last = now_ns();

	pat_fill(o->msg, buf);
	*t0 = now_ns();
	*total = 0;
	while (done < o->conns) {
		bool progress = false;

		for (unsigned c = 0; c < o->conns; c++) {
			uint64_t at = sent[c] % o->msg;
			uint64_t n = o->msg - at;
			ssize_t r;

			if (sent[c] == o->per_conn)
				continue;
			if (n > o->per_conn - sent[c])
				n = o->per_conn - sent[c];
			/* No wait: what credit and tx slots allow now. */
			r = vg_write(s[c], buf + at, n, 0);
			if (r == -ETIMEDOUT)
				continue;
			if (r < 0) {
				snprintf(err, err_size, "vg_write: %s",
					 strerror((int)-r));
				return -1;
			}
			sent[c] += (uint64_t)r;
			*total += (uint64_t)r;
			progress = true;
			if (sent[c] == o->per_conn) {
				vg_shutdown(s[c], VSOCK_SHUTDOWN_SEND);
				done++;
			}
		}
		if (progress) {
			last = now_ns();
			continue;
		}
		if (now_ns() - last > (int64_t)STALL_MS * 1000000) {
			snprintf(err, err_size,
				 "no progress for %d s after %" PRIu64
				 " bytes sent", STALL_MS / 1000, *total);
			return -1;
		}
		if (vg_poll(g, 100) < 0) {
			snprintf(err, err_size, "vg_poll: %s", g->error);
			return -1;
		}
	}
	return 0;
}

static int vg_recv_all(const struct opts *o, struct vg *g,
		       struct vg_sock **s, int64_t *t1, uint64_t *total,
		       char *err, size_t err_size)
{
	static uint8_t buf[READ_SIZE];
	uint64_t got[MAX_CONNS] = { 0 };
	unsigned done = 0;
	int64_t last = now_ns();

	*total = 0;
	while (done < o->conns) {
		bool progress = false;

		for (unsigned c = 0; c < o->conns; c++) {
			ssize_t r;

			if (got[c] == o->per_conn)
				continue;
			r = vg_read(s[c], buf, sizeof(buf), 0);
			if (r == -ETIMEDOUT)
				continue;
			if (r <= 0) {
				snprintf(err, err_size,
					 "connection %u: %s after %" PRIu64
					 " bytes", c,
					 r ? strerror((int)-r) : "early EOF",
					 got[c]);
				return -1;
			}
			if (!pat_check_ends(o->msg, o->per_conn, got[c], buf,
					    (size_t)r)) {
				snprintf(err, err_size,
					 "connection %u: wrong bytes at %"
					 PRIu64, c, got[c]);
				return -1;
			}
			got[c] += (uint64_t)r;
			*total += (uint64_t)r;
			progress = true;
			if (got[c] > o->per_conn) {
				snprintf(err, err_size,
					 "connection %u: more than sent", c);
				return -1;
			}
			if (got[c] == o->per_conn)
				done++;
		}
		if (progress) {
			last = now_ns();
			continue;
		}
		if (now_ns() - last > (int64_t)STALL_MS * 1000000) {
			snprintf(err, err_size,
				 "no progress for %d s after %" PRIu64
				 " bytes received", STALL_MS / 1000, *total);
			return -1;
		}
		if (vg_poll(g, 100) < 0) {
			snprintf(err, err_size, "vg_poll: %s", g->error);
			return -1;
		}
	}
	*t1 = now_ns();
	return 0;
}

/* ---- the run ---- */

static double tv_s(const struct timeval *t)
{
	return (double)t->tv_sec + (double)t->tv_usec / 1e6;
}

/* CPU time of this process (the guest) and of the reaped host child. */
static void print_cpu(void)
{
	struct rusage me, child;

	getrusage(RUSAGE_SELF, &me);
	getrusage(RUSAGE_CHILDREN, &child);
	fprintf(stderr, "cpu: guest %.3f s user %.3f s sys, host %.3f s user "
		"%.3f s sys\n", tv_s(&me.ru_utime), tv_s(&me.ru_stime),
		tv_s(&child.ru_utime), tv_s(&child.ru_stime));
}

static bool read_report(int fd, struct report *rep)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	size_t n = 0;

	while (n < sizeof(*rep)) {
		ssize_t r;

		if (poll(&p, 1, STALL_MS * 2) != 1)
			return false;
		r = read(fd, (char *)rep + n, sizeof(*rep) - n);
		if (r <= 0)
			return false;
		n += (size_t)r;
	}
	return true;
}

static int run(const struct opts *o)
{
	int pair[MAX_CONNS][2], mine[MAX_CONNS], theirs[MAX_CONNS];
	struct vg_sock *s[MAX_CONNS] = { NULL };
	int rep_sk[2], lfd = -1, st;
	struct report rep;
	struct vg *g = NULL;
	char err[256] = "";
	uint64_t total = 0;
	int64_t t_me = 0;
	pid_t pid;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, rep_sk) < 0)
		die("socketpair: %s", strerror(errno));
	if (o->direct) {
		for (unsigned c = 0; c < o->conns; c++) {
			if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0,
				       pair[c]) < 0)
				die("socketpair: %s", strerror(errno));
			mine[c] = pair[c][0];
			theirs[c] = pair[c][1];
		}
	} else {
		struct vg_opts vo;

		vg_opts_init(&vo);
		vo.rx_buf_size = o->rx_buf + VSOCK_HDR_SIZE;
		g = vg_open(o->socket, STALL_MS, &vo, err, sizeof(err));
		if (!g)
			die("%s", err);
		if (o->h2g) {
			if (vg_listen(g, H2G_PORT))
				die("vg_listen: %s", g->error);
		} else {
			char path[sizeof(((struct sockaddr_un *)0)->sun_path)];

			snprintf(path, sizeof(path), "%s_%u", o->uds,
				 G2H_PORT);
			lfd = unix_listen(path);
		}
	}
	fflush(stdout);
	pid = fork();
	if (pid < 0)
		die("fork: %s", strerror(errno));
	if (pid == 0) {
		close(rep_sk[0]);
		if (o->direct)
			for (unsigned c = 0; c < o->conns; c++)
				close(mine[c]);
		host_main(o, lfd, o->direct ? theirs : NULL, rep_sk[1]);
	}
	close(rep_sk[1]);
	if (lfd >= 0)
		close(lfd);
	if (o->direct) {
		for (unsigned c = 0; c < o->conns; c++) {
			close(theirs[c]);
			set_nonblock(mine[c]);
		}
		if (o->h2g)
			st = fd_recv_all(o, mine, &t_me, &total, err,
					 sizeof(err));
		else
			st = fd_send_all(o, mine, &t_me, &total, err,
					 sizeof(err));
	} else {
		for (unsigned c = 0; c < o->conns; c++) {
			int e = 0;

			if (o->h2g)
				s[c] = vg_accept(g, H2G_PORT, false, STALL_MS,
						 &e);
			else
				s[c] = vg_connect(g, G2H_PORT, STALL_MS, &e);
			if (!s[c]) {
				kill(pid, SIGKILL);
				waitpid(pid, NULL, 0);
				die("%s: %s", o->h2g ? "accept" : "connect",
				    strerror(-e));
			}
		}
		if (o->h2g)
			st = vg_recv_all(o, g, s, &t_me, &total, err,
					 sizeof(err));
		else
			st = vg_send_all(o, g, s, &t_me, &total, err,
					 sizeof(err));
		/* g2h: the host child must still drain what is in flight;
		 * keep serving the queues until it reports. */
		if (!st && !o->h2g) {
			struct pollfd p = { .fd = rep_sk[0], .events = POLLIN };
			int64_t end = now_ns() + (int64_t)STALL_MS * 1000000;

			while (poll(&p, 1, 0) == 0 && now_ns() < end)
				vg_poll(g, 1);
		}
	}
	if (st || !read_report(rep_sk[0], &rep)) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		die("%s", err[0] ? err : "host side did not report");
	}
	/* h2g: let the host close now. */
	(void)!write(rep_sk[0], "x", 1);
	waitpid(pid, &st, 0);
	if (!rep.ok)
		die("host side: %s", rep.error);
	if (rep.bytes != o->per_conn * o->conns ||
	    total != o->per_conn * o->conns)
		die("moved %" PRIu64 "/%" PRIu64 " bytes, expected %" PRIu64,
		    total, rep.bytes, o->per_conn * o->conns);
	if (g) {
		if (g->violations)
			die("the device broke the protocol %" PRIu64
			    " times; last: %s", g->violations, g->violation);
		/* Where the packets went, for a look at why: */
		if (getenv("VSOCK_BENCH_STATS"))
			print_cpu();
		if (getenv("VSOCK_BENCH_STATS"))
			fprintf(stderr,
				"guest: %" PRIu64 " packets sent, %" PRIu64
				" received: RW %" PRIu64 ", CREDIT_UPDATE %"
				PRIu64 ", CREDIT_REQUEST %" PRIu64 "\n",
				g->pkts_tx, g->pkts_rx,
				g->rx_ops[VSOCK_OP_RW],
				g->rx_ops[VSOCK_OP_CREDIT_UPDATE],
				g->rx_ops[VSOCK_OP_CREDIT_REQUEST]);
		for (unsigned c = 0; c < o->conns; c++)
			vg_close(s[c]);
		vg_free(g);
	} else {
		for (unsigned c = 0; c < o->conns; c++)
			close(mine[c]);
	}

	int64_t t0 = o->h2g ? rep.t_ns : t_me;
	int64_t t1 = o->h2g ? t_me : rep.t_ns;
	double secs = (double)(t1 - t0) / 1e9;

	printf("%s %s msg=%" PRIu64 " conns=%u", o->direct ? "direct" : "vsock",
	       o->h2g ? "h2g" : "g2h", o->msg, o->conns);
	if (!o->direct && o->rx_buf != 4096)
		printf(" rxbuf=%u", o->rx_buf);
	printf(" bytes=%" PRIu64 " time=%.3f MB/s=%.1f\n",
	       o->per_conn * o->conns, secs,
	       (double)(o->per_conn * o->conns) / 1e6 / secs);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "socket-path", required_argument, NULL, 's' },
		{ "uds-path", required_argument, NULL, 'u' },
		{ "direction", required_argument, NULL, 'd' },
		{ "msg-size", required_argument, NULL, 'm' },
		{ "bytes", required_argument, NULL, 'b' },
		{ "conns", required_argument, NULL, 'c' },
		{ "rx-buf", required_argument, NULL, 'r' },
		{ "direct", no_argument, NULL, 'D' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct opts o = {
		.msg = 65536, .bytes = 256ull << 20, .conns = 1,
		.rx_buf = 4096,
	};
	uint64_t v;
	int c;

	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (c) {
		case 's':
			o.socket = optarg;
			break;
		case 'u':
			o.uds = optarg;
			break;
		case 'd':
			if (!strcmp(optarg, "h2g"))
				o.h2g = true;
			else if (strcmp(optarg, "g2h"))
				return bad_usage("--direction: g2h or h2g");
			break;
		case 'm':
			if (parse_size(optarg, &o.msg) || !o.msg ||
			    o.msg > VSOCK_MAX_PKT_PAYLOAD * 16)
				return bad_usage("--msg-size: 1 to 1M");
			break;
		case 'b':
			if (parse_size(optarg, &o.bytes) || !o.bytes)
				return bad_usage("--bytes: a positive size");
			break;
		case 'c':
			if (parse_size(optarg, &v) || !v || v > MAX_CONNS)
				return bad_usage("--conns: 1 to %d",
						 MAX_CONNS);
			o.conns = (unsigned)v;
			break;
		case 'r':
			if (parse_size(optarg, &v) || v < 64 ||
			    v > VSOCK_MAX_PKT_PAYLOAD)
				return bad_usage("--rx-buf: 64 to 64K");
			o.rx_buf = (uint32_t)v;
			break;
		case 'D':
			o.direct = true;
			break;
		case 'h':
			fputs(usage, stdout);
			return 0;
		default:
			return bad_usage("bad option");
		}
	}
	if (optind < argc)
		return bad_usage("unexpected argument: %s", argv[optind]);
	if (!o.direct && (!o.socket || !o.uds))
		return bad_usage("--socket and --uds-path are needed (or "
				 "--direct)");
	/* Whole messages on each connection. */
	o.per_conn = o.bytes / o.conns / o.msg * o.msg;
	if (!o.per_conn)
		o.per_conn = o.msg;
	signal(SIGPIPE, SIG_IGN);
	return run(&o);
}
