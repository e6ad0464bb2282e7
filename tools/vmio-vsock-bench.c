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
#include <limits.h>
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

#include "cli/options.h"
#include "frontend/vsock_guest.h"
#include "util/clock.h"

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
	"  --mergeable        negotiate mergeable rx buffers: --rx-buf bytes\n"
	"                     each, header included, packets of up to 64K\n"
	"                     spanning them\n"
	"  -h, --help         this text\n";

struct opts {
	const char *socket, *uds;
	bool h2g, direct;
	uint64_t msg, bytes, per_conn;
	unsigned conns;
	uint32_t rx_buf;
	bool mergeable;
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

/* ---- the transfer: one round-robin loop over --conns connections of
 * either kind (plain fds, or vg sockets) ---- */

/* What a connection's read or write returns when it cannot move a byte
 * now (not an errno: those come back negated). */
#define IO_AGAIN ((ssize_t)INT_MIN)

/* How to move bytes on connection c of ctx: write and read return the
 * bytes moved (read: 0 at end of stream), IO_AGAIN, or -errno; wait
 * blocks up to 100 ms for any active connection to be ready, and fills
 * err on a failure. */
struct conn_ops {
	const char *write_name; /* for the error message */
	ssize_t (*write)(void *ctx, unsigned c, const void *buf, size_t n);
	ssize_t (*read)(void *ctx, unsigned c, void *buf, size_t n);
	void (*shut_wr)(void *ctx, unsigned c);
	int (*wait)(void *ctx, const bool *active, unsigned conns, bool out,
		    char *err, size_t err_size);
};

struct conns {
	const struct conn_ops *ops;
	void *ctx;
};

/* Sends (send) or receives o->per_conn bytes on each connection, round
 * robin, never blocking in a read or write and waiting when none can
 * move a byte. Sending writes o->msg pattern messages and shuts each
 * connection down for writing when its share is out; receiving checks
 * the first and last message of each. Fills *t with the time of the
 * first write (send) or of the last byte read (receive), *total with the
 * bytes moved. Returns 0, or -1 with err filled. */
static int transfer_all(const struct opts *o, const struct conns *cs,
			bool send, int64_t *t, uint64_t *total, char *err,
			size_t err_size)
{
	static uint8_t out[VSOCK_MAX_PKT_PAYLOAD * 16], in[READ_SIZE];
	uint64_t moved[MAX_CONNS] = { 0 };
	bool active[MAX_CONNS];
	unsigned done = 0;
	int64_t last = (int64_t)vmio_now_ns();

	for (unsigned c = 0; c < o->conns; c++)
		active[c] = true;
	if (send) {
		pat_fill(o->msg, out);
		*t = (int64_t)vmio_now_ns();
	}
	*total = 0;
	while (done < o->conns) {
		bool progress = false;

		for (unsigned c = 0; c < o->conns; c++) {
			ssize_t r;

			if (!active[c])
				continue;
			if (send) {
				uint64_t at = moved[c] % o->msg;
				uint64_t n = o->msg - at;

				if (n > o->per_conn - moved[c])
					n = o->per_conn - moved[c];
				r = cs->ops->write(cs->ctx, c, out + at, n);
			} else {
				r = cs->ops->read(cs->ctx, c, in, sizeof(in));
			}
			if (r == IO_AGAIN)
				continue;
			if (send && r < 0) {
				snprintf(err, err_size, "%s: %s",
					 cs->ops->write_name, strerror((int)-r));
				return -1;
			}
			if (!send && r <= 0) {
				snprintf(err, err_size,
					 "connection %u: %s after %" PRIu64
					 " bytes", c,
					 r ? strerror((int)-r) : "early EOF",
					 moved[c]);
				return -1;
			}
			if (!send && !pat_check_ends(o->msg, o->per_conn,
						     moved[c], in, (size_t)r)) {
				snprintf(err, err_size,
					 "connection %u: wrong bytes at %"
					 PRIu64, c, moved[c]);
				return -1;
			}
			moved[c] += (uint64_t)r;
			*total += (uint64_t)r;
			progress = true;
			if (moved[c] > o->per_conn) {
				snprintf(err, err_size,
					 "connection %u: %" PRIu64
					 " bytes, more than sent", c, moved[c]);
				return -1;
			}
			if (moved[c] == o->per_conn) {
				if (send)
					cs->ops->shut_wr(cs->ctx, c);
				active[c] = false;
				done++;
			}
		}
		if (progress) {
			last = (int64_t)vmio_now_ns();
			continue;
		}
		if ((int64_t)vmio_now_ns() - last > (int64_t)STALL_MS * 1000000) {
			snprintf(err, err_size,
				 "no progress for %d s after %" PRIu64
				 " bytes %s", STALL_MS / 1000, *total,
				 send ? "sent" : "received");
			return -1;
		}
		if (cs->ops->wait(cs->ctx, active, o->conns, send, err,
				  err_size))
			return -1;
	}
	if (!send)
		*t = (int64_t)vmio_now_ns();
	return 0;
}

/* Plain sockets: ctx is the array of fds, non-blocking. */

static ssize_t fd_io_result(ssize_t r)
{
	if (r >= 0)
		return r;
	if (errno == EAGAIN || errno == EINTR)
		return IO_AGAIN;
	return -errno;
}

static ssize_t fd_conn_write(void *ctx, unsigned c, const void *buf,
			     size_t n)
{
	return fd_io_result(write(((int *)ctx)[c], buf, n));
}

static ssize_t fd_conn_read(void *ctx, unsigned c, void *buf, size_t n)
{
	return fd_io_result(read(((int *)ctx)[c], buf, n));
}

static void fd_conn_shut_wr(void *ctx, unsigned c)
{
	shutdown(((int *)ctx)[c], SHUT_WR);
}

static int fd_conn_wait(void *ctx, const bool *active, unsigned conns,
			bool out, char *err, size_t err_size)
{
	struct pollfd p[MAX_CONNS];

	for (unsigned c = 0; c < conns; c++)
		p[c] = (struct pollfd){
			.fd = active[c] ? ((int *)ctx)[c] : -1,
			.events = out ? POLLOUT : POLLIN,
		};
	poll(p, conns, 100);
	return 0;
}

static const struct conn_ops fd_conn_ops = {
	.write_name = "write",
	.write = fd_conn_write,
	.read = fd_conn_read,
	.shut_wr = fd_conn_shut_wr,
	.wait = fd_conn_wait,
};

/* The guest's sockets through vmio. */
struct vg_conns {
	struct vg *g;
	struct vg_sock **s;
};

/* vg_write and vg_read with no wait move what credit, tx slots and the
 * rx queue allow now, and say -ETIMEDOUT when that is nothing. */
static ssize_t vg_io_result(ssize_t r)
{
	return r == -ETIMEDOUT ? IO_AGAIN : r;
}

static ssize_t vg_conn_write(void *ctx, unsigned c, const void *buf,
			     size_t n)
{
	return vg_io_result(vg_write(((struct vg_conns *)ctx)->s[c], buf, n,
				     0));
}

static ssize_t vg_conn_read(void *ctx, unsigned c, void *buf, size_t n)
{
	return vg_io_result(vg_read(((struct vg_conns *)ctx)->s[c], buf, n,
				    0));
}

static void vg_conn_shut_wr(void *ctx, unsigned c)
{
	vg_shutdown(((struct vg_conns *)ctx)->s[c], VSOCK_SHUTDOWN_SEND);
}

static int vg_conn_wait(void *ctx, const bool *active, unsigned conns,
			bool out, char *err, size_t err_size)
{
	struct vg *g = ((struct vg_conns *)ctx)->g;

	if (vg_poll(g, 100) < 0) {
		snprintf(err, err_size, "vg_poll: %s", g->error);
		return -1;
	}
	return 0;
}

static const struct conn_ops vg_conn_ops = {
	.write_name = "vg_write",
	.write = vg_conn_write,
	.read = vg_conn_read,
	.shut_wr = vg_conn_shut_wr,
	.wait = vg_conn_wait,
};

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
	struct conns cs = { &fd_conn_ops, fds };

	if (!transfer_all(o, &cs, o->h2g, &t, &rep.bytes, rep.error,
			  sizeof(rep.error)))
		rep.ok = 1;
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
		/* With mergeable buffers a buffer is the size Linux posts in
		 * all (4 KiB), the header inside it; packets span them. */
		vo.mergeable = o->mergeable;
		vo.rx_buf_size = o->mergeable ? o->rx_buf
					      : o->rx_buf + VSOCK_HDR_SIZE;
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
		struct conns cs = { &fd_conn_ops, mine };

		st = transfer_all(o, &cs, !o->h2g, &t_me, &total, err,
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
		struct vg_conns vc = { g, s };
		struct conns cs = { &vg_conn_ops, &vc };

		st = transfer_all(o, &cs, !o->h2g, &t_me, &total, err,
				  sizeof(err));
		/* g2h: the host child must still drain what is in flight;
		 * keep serving the queues until it reports. */
		if (!st && !o->h2g) {
			struct pollfd p = { .fd = rep_sk[0], .events = POLLIN };
			int64_t end = (int64_t)vmio_now_ns() + (int64_t)STALL_MS * 1000000;

			while (poll(&p, 1, 0) == 0 && (int64_t)vmio_now_ns() < end)
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
	if (!o->direct && o->mergeable)
		printf(" mergeable");
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
		{ "mergeable", no_argument, NULL, 'M' },
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
			if (vmio_parse_u64(optarg, VSOCK_MAX_PKT_PAYLOAD * 16,
					   &o.msg) || !o.msg)
				return bad_usage("--msg-size: 1 to 1M");
			break;
		case 'b':
			if (vmio_parse_u64(optarg, UINT64_MAX, &o.bytes) ||
			    !o.bytes)
				return bad_usage("--bytes: a positive size");
			break;
		case 'c':
			if (vmio_parse_u64(optarg, MAX_CONNS, &v) || !v)
				return bad_usage("--conns: 1 to %d",
						 MAX_CONNS);
			o.conns = (unsigned)v;
			break;
		case 'r':
			if (vmio_parse_u64(optarg, VSOCK_MAX_PKT_PAYLOAD, &v) ||
			    v < 64)
				return bad_usage("--rx-buf: 64 to 64K");
			o.rx_buf = (uint32_t)v;
			break;
		case 'D':
			o.direct = true;
			break;
		case 'M':
			o.mergeable = true;
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
