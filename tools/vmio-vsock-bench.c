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
 * clock in both processes). Ten seconds without progress is an error.
 *
 * With --echo, request/response instead (round_trips.h): the sender of
 * the direction writes a --msg-size request on each connection and the
 * other side echoes it, one round trip outstanding per connection, for
 * --seconds after a warm-up; the sender times each round trip and reads
 * vmio's CPU time (/proc/PID/stat, the PID from SO_PEERCRED on the
 * vhost-user socket) over the same span. */
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
#include "cli/vsock_vms.h"
#include "frontend/frontend.h"
#include "frontend/vsock_guest.h"
#include "util/clock.h"
#include "util/proc_stat.h"
#include "round_trips.h"
#include "tool_common.h"
#include "vsock_transfer.h"

#define G2H_PORT 1234
#define H2G_PORT 5000

static const char usage[] =
	"Usage: vmio-vsock-bench --socket PATH --uds-path PATH [options]\n"
	"       vmio-vsock-bench --direct [options]\n"
	"\n"
	"Times one stream through a running `vmio vsock` (this process is the\n"
	"guest, a forked child the host program), or with --direct over plain\n"
	"AF_UNIX stream sockets between the same two processes. Prints one\n"
	"line: <vsock|direct> <dir> msg=N conns=N bytes=N time=S MB/s=X\n"
	"With --echo: <vsock|direct> echo <dir> msg=N conns=N round_trips=N\n"
	"time=S rr/s=X p50_us=X p99_us=X vmio_s/1000rt=X (vmio's CPU seconds\n"
	"per 1000 round trips; not with --direct)\n"
	"\n"
	"Options:\n"
	"  --socket PATH      the device's vhost-user socket\n"
	"  --uds-path PATH    the device's --uds-path\n"
	"  --direction D      g2h (guest to host, default) or h2g; with\n"
	"                     --echo, the request's way (the answer comes back)\n"
	"  --msg-size N       bytes per write (default 64K; with --echo, of a\n"
	"                     request, default 64)\n"
	"  --bytes N          bytes in all (default 256M; K, M, G suffixes)\n"
	"  --conns N          connections, 1-64 (default 1)\n"
	"  --guest-cid N      the guest's CID: the VM's guest-cid (default 3)\n"
	"  --rx-buf N         guest rx buffer payload size (default 4K, as\n"
	"                     Linux; at most 64K)\n"
	"  --buffer-size N    each guest socket's receive buffer, the\n"
	"                     buf_alloc it advertises (Linux's\n"
	"                     SO_VM_SOCKETS_BUFFER_SIZE; default 256K, as\n"
	"                     Linux; 4K to 64M)\n"
	"  --echo             request/response round trips, not a stream\n"
	"  --seconds N        --echo: how long to time them (default 5;\n"
	"                     SIGUSR1 ends them sooner: its pid is on stderr)\n"
	"  --direct           no vmio: AF_UNIX between the two processes\n"
	"  --crash-probe N    for N seconds (or until SIGTERM), a guest that\n"
	"                     outlives vmio's crashes: one session, a\n"
	"                     connection each way doing round trips, each\n"
	"                     reset counted and the connection opened again;\n"
	"                     prints each first answer after a reset and\n"
	"                     vsock crash-probe resets=N g2h_resets=N\n"
	"                     h2g_resets=N round_trips=N max_gap_ms=X; fails\n"
	"                     if a connection is not open again or not\n"
	"                     answered within 10 s\n"
	"  --mergeable        negotiate mergeable rx buffers: --rx-buf bytes\n"
	"                     each, header included, packets of up to 64K\n"
	"                     spanning them\n"
	"  --tx-piece N       the guest sends each packet as its header in one\n"
	"                     descriptor and the payload in pieces of at most\n"
	"                     N bytes (Linux 6.17: 32K); default one descriptor\n"
	"  --rx-piece N       the guest posts each rx buffer in descriptors of\n"
	"                     at most N bytes (default one)\n"
	"  -h, --help         this text\n"
	"\n"
	"VSOCK_BENCH_STATS=1 in the environment adds, on stderr, the CPU\n"
	"time of each end and how often each slept (cpu: guest ..., host\n"
	"...; wakeups guest N host M; with --direct, the two ends) and the\n"
	"guest's packet counts.\n";

struct opts {
	const char *socket, *uds;
	bool h2g, direct;
	struct xfer_plan plan;
	uint64_t bytes;
	uint32_t rx_buf;
	uint32_t buffer_size; /* the guest's buf_alloc; 0: vg's default */
	uint64_t cid;
	bool mergeable;
	uint32_t tx_piece, rx_piece; /* 0: one descriptor */
	bool echo;
	bool crash_probe;
	uint64_t seconds;  /* --echo, --crash-probe */
	pid_t vmio;        /* the device's process; 0: none or unknown */
};

/* What the requester of --echo measured. */
struct echo_result {
	uint64_t round_trips;
	double secs, p50_us, p99_us;
	double vmio_s;     /* vmio's CPU seconds meanwhile; < 0: unknown */
};

/* What the child reports through a pipe when it is done. */
struct report {
	int64_t t_ns;    /* g2h: last byte received; h2g: first byte sent */
	uint64_t bytes;  /* received (g2h) or sent (h2g) */
	struct echo_result echo; /* --echo --direction h2g */
	int ok;
	char error[160];
};

/* ---- plain sockets (the host side always; the guest side with
 * --direct) ---- */

static int unix_listen(const char *path)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		tool_die("socket: %s", strerror(errno));
	if (strlen(path) >= sizeof(a.sun_path))
		tool_die("path too long: %s", path);
	strcpy(a.sun_path, path);
	unlink(path);
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    listen(fd, 128) < 0)
		tool_die("listen on %s: %s", path, strerror(errno));
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
 * taken; bounded by XFER_STALL_MS. */
static int read_line(int fd, char *buf, size_t size)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	size_t n = 0;

	while (n + 1 < size) {
		if (poll(&p, 1, XFER_STALL_MS) != 1 || read(fd, buf + n, 1) != 1)
			return -1;
		if (buf[n++] == '\n')
			break;
	}
	buf[n] = '\0';
	return (int)n;
}

/* ---- what each side does ---- */

static void keep_rt(void *sm, unsigned c, int64_t ns)
{
	(void)c;
	rt_keep(sm, ns);
}

/* The requester of --echo: a warm-up, then --seconds of round trips with
 * vmio's CPU time over the same span; then it shuts each connection
 * down for writing, which ends the echo. */
static int request(const struct opts *o, const struct xfer_conns *cs,
		   struct echo_result *res, char *err, size_t err_size)
{
	struct rt_conn rc[XFER_MAX_CONNS] = { { 0 } };
	struct rt_samples sm;
	long c0 = -1, c1 = -1;
	int64_t t0;
	int st;

	rt_samples_init(&sm);
	st = rt_phase(cs, rc, o->plan.conns, o->plan.msg, RT_WARMUP_MS, NULL,
		      NULL, err, err_size);
	if (!st) {
		if (o->vmio > 0)
			c0 = vmio_proc_cpu_ticks(o->vmio);
		t0 = (int64_t)vmio_now_ns();
		st = rt_phase(cs, rc, o->plan.conns, o->plan.msg,
			      o->seconds * 1000, keep_rt, &sm, err, err_size);
		res->secs = (double)((int64_t)vmio_now_ns() - t0) / 1e9;
		if (o->vmio > 0)
			c1 = vmio_proc_cpu_ticks(o->vmio);
	}
	if (!st) {
		rt_sort(&sm);
		res->round_trips = sm.all;
		res->p50_us = rt_pct_us(&sm, 50);
		res->p99_us = rt_pct_us(&sm, 99);
		res->vmio_s = c0 >= 0 && c1 >= 0
				      ? (double)(c1 - c0) /
						(double)sysconf(_SC_CLK_TCK)
				      : -1;
		for (unsigned c = 0; c < o->plan.conns; c++)
			cs->ops->shut_wr(cs->ctx, c);
	}
	rt_samples_free(&sm);
	return st;
}

/* One side's part, the sender's (g2h: the guest; h2g: the host) or the
 * other's: the stream's writes or reads, or with --echo the requests or
 * the echo. *t and *bytes as xfer_all; *res for the requester. */
static int play(const struct opts *o, const struct xfer_conns *cs,
		bool sender, int64_t *t, uint64_t *bytes,
		struct echo_result *res, char *err, size_t err_size)
{
	if (!o->echo)
		return xfer_all(&o->plan, cs, sender, t, bytes, err, err_size);
	if (sender)
		return request(o, cs, res, err, err_size);
	return rt_echo(cs, o->plan.conns, bytes, err, err_size);
}

/* ---- the host side, in the child ---- */

/* fds: socketpair ends for --direct, else NULL (the child accepts on lfd
 * for g2h, connects to the uds path for h2g). */
static void host_main(const struct opts *o, int lfd, const int *given,
		      int report_fd)
{
	struct report rep = { 0 };
	int fds[XFER_MAX_CONNS];
	int64_t t = 0;

	if (given) {
		memcpy(fds, given, sizeof(int) * o->plan.conns);
	} else if (!o->h2g) {
		for (unsigned c = 0; c < o->plan.conns; c++) {
			struct pollfd p = { .fd = lfd, .events = POLLIN };

			if (poll(&p, 1, XFER_STALL_MS) != 1) {
				snprintf(rep.error, sizeof(rep.error),
					 "no guest connection in %d s",
					 XFER_STALL_MS / 1000);
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

		for (unsigned c = 0; c < o->plan.conns; c++) {
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
		for (unsigned c = 0; c < o->plan.conns; c++)
			if (read_line(fds[c], line, sizeof(line)) < 4 ||
			    strncmp(line, "OK ", 3)) {
				snprintf(rep.error, sizeof(rep.error),
					 "connection %u: no OK line", c);
				goto out;
			}
	}
	for (unsigned c = 0; c < o->plan.conns; c++)
		tool_set_nonblock(fds[c]);
	struct xfer_conns cs = { &xfer_fd_ops, fds };

	if (!play(o, &cs, o->h2g, &t, &rep.bytes, &rep.echo, rep.error,
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

		poll(&p, 1, XFER_STALL_MS);
		(void)!read(report_fd, &b, 1);
	}
	_exit(rep.ok ? 0 : 1);
}

/* --echo's SIGUSR1: the round trips end now, on both sides (the
 * requester is the guest or the host child, as the direction says). */
static volatile sig_atomic_t echo_child;

static void echo_on_usr1(int sig)
{
	(void)sig;
	rt_stop = 1;
	if (echo_child > 0)
		kill((pid_t)echo_child, SIGUSR1);
}

/* ---- the run ---- */

static double tv_s(const struct timeval *t)
{
	return (double)t->tv_sec + (double)t->tv_usec / 1e6;
}

/* CPU time of this process (the guest, or with --direct the guest's
 * end) and of the reaped host child: each stage's cost, beside vmio's;
 * and how often each end slept (voluntary context switches): the
 * hand-offs a stream through vmio makes where a direct one runs on. */
static void print_cpu(void)
{
	struct rusage me, child;

	getrusage(RUSAGE_SELF, &me);
	getrusage(RUSAGE_CHILDREN, &child);
	fprintf(stderr, "cpu: guest %.3f s user %.3f s sys, host %.3f s user "
		"%.3f s sys; wakeups guest %ld host %ld\n",
		tv_s(&me.ru_utime), tv_s(&me.ru_stime),
		tv_s(&child.ru_utime), tv_s(&child.ru_stime),
		me.ru_nvcsw, child.ru_nvcsw);
}

/* Where the packets went and what each connection holds, for a look at
 * why (VSOCK_BENCH_STATS), after a run or a failed one. */
static void print_guest(const struct vg *g, struct vg_sock *const *s,
			unsigned conns)
{
	fprintf(stderr, "guest: %" PRIu64 " packets sent, %" PRIu64
		" received: RW %" PRIu64 ", CREDIT_UPDATE %" PRIu64
		", CREDIT_REQUEST %" PRIu64 "; refused %" PRIu64 " (packets) %"
		PRIu64 " (bytes), coalesced %" PRIu64 "\n", g->pkts_tx,
		g->pkts_rx, g->rx_ops[VSOCK_OP_RW],
		g->rx_ops[VSOCK_OP_CREDIT_UPDATE],
		g->rx_ops[VSOCK_OP_CREDIT_REQUEST], g->rx_refused_pkts,
		g->rx_refused_bytes, g->rx_coalesced);
	for (unsigned c = 0; c < conns && s[c]; c++) {
		struct vg_sock_info i;

		vg_sock_info(s[c], &i);
		fprintf(stderr, "guest connection %u: %s, unread %u in %u "
			"packets, credit to the host %u of %u, host shut %u\n",
			c, i.reset ? "reset" : i.established ? "established"
							    : "not established",
			i.unread, i.queued_pkts, i.peer_credit,
			i.peer_buf_alloc, i.peer_shut);
	}
}

static bool read_report(int fd, struct report *rep)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	size_t n = 0;

	while (n < sizeof(*rep)) {
		ssize_t r;

		if (poll(&p, 1, XFER_STALL_MS * 2) != 1)
			return false;
		r = read(fd, (char *)rep + n, sizeof(*rep) - n);
		if (r <= 0)
			return false;
		n += (size_t)r;
	}
	return true;
}

/* The device's process, from the vhost-user connection (the process
 * that listens on it); 0 if the kernel does not say. */
static pid_t peer_pid(int fd)
{
	struct ucred cr;
	socklen_t n = sizeof(cr);

	return getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &n) ? 0 : cr.pid;
}

static void print_echo(const struct opts *o, const struct echo_result *r)
{
	printf("%s echo %s msg=%" PRIu64 " conns=%u round_trips=%" PRIu64
	       " time=%.3f rr/s=%.0f p50_us=%.1f p99_us=%.1f",
	       o->direct ? "direct" : "vsock", o->h2g ? "h2g" : "g2h",
	       o->plan.msg, o->plan.conns, r->round_trips, r->secs,
	       (double)r->round_trips / r->secs, r->p50_us, r->p99_us);
	if (r->vmio_s >= 0 && r->round_trips)
		printf(" vmio_s/1000rt=%.4f",
		       r->vmio_s * 1000 / (double)r->round_trips);
	putchar('\n');
}

static int run(struct opts *o)
{
	int pair[XFER_MAX_CONNS][2], mine[XFER_MAX_CONNS], theirs[XFER_MAX_CONNS];
	struct vg_sock *s[XFER_MAX_CONNS] = { NULL };
	int rep_sk[2], lfd = -1, st;
	struct report rep;
	struct echo_result res = { 0 };
	struct vg *g = NULL;
	char err[256] = "";
	uint64_t total = 0;
	int64_t t_me = 0;
	pid_t pid;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, rep_sk) < 0)
		tool_die("socketpair: %s", strerror(errno));
	if (o->direct) {
		for (unsigned c = 0; c < o->plan.conns; c++) {
			if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0,
				       pair[c]) < 0)
				tool_die("socketpair: %s", strerror(errno));
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
		vo.guest_cid = o->cid;
		if (o->buffer_size)
			vo.buf_alloc = o->buffer_size;
		if (o->tx_piece)
			vo.tx_cut = (struct vg_cut){ .first = VSOCK_HDR_SIZE,
						     .piece = o->tx_piece };
		if (o->rx_piece) {
			vo.rx_cut = (struct vg_cut){ .piece = o->rx_piece };
			/* The ring holds every buffer's descriptors. */
			vo.queue_size = 1024;
		}
		g = vg_open(o->socket, XFER_STALL_MS, &vo, err, sizeof(err));
		if (!g)
			tool_die("%s", err);
		o->vmio = peer_pid(g->fe->sock);
		if (o->h2g) {
			if (vg_listen(g, H2G_PORT))
				tool_die("vg_listen: %s", g->error);
		} else {
			char path[sizeof(((struct sockaddr_un *)0)->sun_path)];

			snprintf(path, sizeof(path), "%s_%u", o->uds,
				 G2H_PORT);
			lfd = unix_listen(path);
		}
	}
	if (o->echo) {
		struct sigaction sa = { .sa_handler = echo_on_usr1 };

		sigaction(SIGUSR1, &sa, NULL);
		fprintf(stderr, "echo: pid=%ld\n", (long)getpid());
	}
	fflush(stdout);
	pid = fork();
	if (pid < 0)
		tool_die("fork: %s", strerror(errno));
	if (pid > 0)
		echo_child = pid;
	if (pid == 0) {
		close(rep_sk[0]);
		if (o->direct)
			for (unsigned c = 0; c < o->plan.conns; c++)
				close(mine[c]);
		host_main(o, lfd, o->direct ? theirs : NULL, rep_sk[1]);
	}
	close(rep_sk[1]);
	if (lfd >= 0)
		close(lfd);
	if (o->direct) {
		for (unsigned c = 0; c < o->plan.conns; c++) {
			close(theirs[c]);
			tool_set_nonblock(mine[c]);
		}
		struct xfer_conns cs = { &xfer_fd_ops, mine };

		st = play(o, &cs, !o->h2g, &t_me, &total, &res, err,
			  sizeof(err));
	} else {
		for (unsigned c = 0; c < o->plan.conns; c++) {
			int e = 0;

			if (o->h2g)
				s[c] = vg_accept(g, H2G_PORT, false, XFER_STALL_MS,
						 &e);
			else
				s[c] = vg_connect(g, G2H_PORT, XFER_STALL_MS, &e);
			if (!s[c]) {
				kill(pid, SIGKILL);
				waitpid(pid, NULL, 0);
				tool_die("%s: %s", o->h2g ? "accept" : "connect",
				    strerror(-e));
			}
		}
		struct xfer_vg vc = { s, &g, 1 };
		struct xfer_conns cs = { &xfer_vg_ops, &vc };

		st = play(o, &cs, !o->h2g, &t_me, &total, &res, err,
			  sizeof(err));
		/* g2h: the host child must still drain what is in flight;
		 * keep serving the queues until it reports. */
		if (!st && !o->h2g) {
			struct pollfd p = { .fd = rep_sk[0], .events = POLLIN };
			int64_t end = (int64_t)vmio_now_ns() + (int64_t)XFER_STALL_MS * 1000000;

			while (poll(&p, 1, 0) == 0 && (int64_t)vmio_now_ns() < end)
				vg_poll(g, 1);
		}
	}
	if (st || !read_report(rep_sk[0], &rep)) {
		if (g && getenv("VSOCK_BENCH_STATS"))
			print_guest(g, s, o->plan.conns);
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		tool_die("%s", err[0] ? err : "host side did not report");
	}
	/* h2g: let the host close now. */
	(void)!write(rep_sk[0], "x", 1);
	waitpid(pid, &st, 0);
	if (!rep.ok)
		tool_die("host side: %s", rep.error);
	if (!o->echo && (rep.bytes != o->plan.per_conn * o->plan.conns ||
			 total != o->plan.per_conn * o->plan.conns))
		tool_die("moved %" PRIu64 "/%" PRIu64 " bytes, expected %" PRIu64,
		    total, rep.bytes, o->plan.per_conn * o->plan.conns);
	if (g) {
		if (g->violations)
			tool_die("the device broke the protocol %" PRIu64
			    " times; last: %s", g->violations, g->violation);
		if (getenv("VSOCK_BENCH_STATS"))
			print_guest(g, s, o->plan.conns);
		for (unsigned c = 0; c < o->plan.conns; c++)
			vg_close(s[c]);
		vg_free(g);
	} else {
		for (unsigned c = 0; c < o->plan.conns; c++)
			close(mine[c]);
	}

	if (getenv("VSOCK_BENCH_STATS"))
		print_cpu();
	if (o->echo) {
		print_echo(o, o->h2g ? &rep.echo : &res);
		return 0;
	}

	int64_t t0 = o->h2g ? rep.t_ns : t_me;
	int64_t t1 = o->h2g ? t_me : rep.t_ns;
	double secs = (double)(t1 - t0) / 1e9;

	printf("%s %s msg=%" PRIu64 " conns=%u", o->direct ? "direct" : "vsock",
	       o->h2g ? "h2g" : "g2h", o->plan.msg, o->plan.conns);
	if (!o->direct && o->rx_buf != 4096)
		printf(" rxbuf=%u", o->rx_buf);
	if (!o->direct && o->mergeable)
		printf(" mergeable");
	if (!o->direct && o->buffer_size)
		printf(" buffer=%u", o->buffer_size);
	if (!o->direct && o->tx_piece)
		printf(" tx_piece=%u", o->tx_piece);
	if (!o->direct && o->rx_piece)
		printf(" rx_piece=%u", o->rx_piece);
	printf(" bytes=%" PRIu64 " time=%.3f MB/s=%.1f\n",
	       o->plan.per_conn * o->plan.conns, secs,
	       (double)(o->plan.per_conn * o->plan.conns) / 1e6 / secs);
	return 0;
}

/* ---- --crash-probe: a guest that outlives vmio's crashes ---- */

/* One vhost-user session for the whole run, and two connections on it,
 * one opened by each side: g2h (the guest connects to the host program
 * at <uds-path>_1234) and h2g (the host program connects through
 * <uds-path>, CONNECT 5000); the guest does round trips on them in turn,
 * PROBE_MSG bytes each, echoed by the host program and checked byte for
 * byte. A reset (ECONNRESET: what the vmio started after a crash sends
 * for every connection its journal names) is counted and the connection
 * opened again at once, the same way. Each first answer on a connection
 * opened again is printed, with CLOCK_MONOTONIC times (the clock
 * systemd's *TimestampMonotonic use), so that a test can measure from a
 * restart to the first new connection of each way:
 *   crash-probe: answered way=g2h n=K reset_ns=T answered_ns=T gap_ms=X
 * (n: resets of that way so far; gap: since the last answer before the
 * reset). It fails when a connection cannot be opened again, or an open
 * one is not answered, within PROBE_BOUND_MS, when an answer is wrong,
 * when a connection ends other than by a reset, or when the device broke
 * the protocol. A round trip on each every 5 ms at most (the machine's
 * cores are for vmio). SIGTERM or SIGINT, or the end of --crash-probe
 * SECONDS, ends it: one line
 *   vsock crash-probe resets=N g2h_resets=N h2g_resets=N round_trips=N
 *   max_gap_ms=X
 * and exit 0. */
#define PROBE_MSG 64
#define PROBE_BOUND_MS 10000
#define PROBE_SLICE_MS 100
#define PROBE_PACE_US 5000 /* between one round trip of each and the next */

struct pconn {
	const char *way;
	bool h2g;
	struct vg_sock *s;
	uint64_t seed, rts;   /* this connection's pattern, round trips */
	unsigned resets;
	int64_t reset_ns;     /* when its last reset was seen; 0: none owed */
	int64_t last_ns;      /* its last answer (or its opening) */
	int64_t answer_before_reset_ns;
};

static volatile sig_atomic_t probe_stop;

static void probe_on_signal(int sig)
{
	(void)sig;
	probe_stop = 1;
}

/* The host program: echoes every connection it has, accepting those the
 * guest opens and opening one into the guest for each byte on ctl. Ends
 * when ctl does (the guest's process is gone or done). */
static void probe_host(int lfd, const char *uds, int ctl)
{
	enum { MAXC = 16 };
	struct pollfd p[2 + MAXC];
	int n = 0;

	/* A SIGTERM to the group (timeout(1)'s) ends the guest, not this:
	 * closing its connections here would end them without a reset. */
	signal(SIGTERM, SIG_IGN);
	signal(SIGINT, SIG_IGN);
	p[0] = (struct pollfd){ .fd = ctl, .events = POLLIN };
	p[1] = (struct pollfd){ .fd = lfd, .events = POLLIN };
	for (;;) {
		if (poll(p, (nfds_t)(2 + n), -1) < 0) {
			if (errno == EINTR)
				continue;
			_exit(1);
		}
		if (p[0].revents) {
			char b, line[64];
			int fd, len;

			if (read(ctl, &b, 1) != 1)
				_exit(0);
			fd = unix_connect(uds);
			len = snprintf(line, sizeof(line), "CONNECT %u\n",
				       H2G_PORT);
			/* A vmio that dies meanwhile: the guest asks again. */
			if (fd >= 0 && (write(fd, line, (size_t)len) != len ||
					read_line(fd, line, sizeof(line)) < 4 ||
					strncmp(line, "OK ", 3))) {
				close(fd);
				fd = -1;
			}
			if (fd >= 0 && n < MAXC)
				p[2 + n++] = (struct pollfd){ .fd = fd,
							      .events = POLLIN };
			else if (fd >= 0)
				close(fd);
		}
		if (p[1].revents & POLLIN) {
			int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);

			if (fd >= 0 && n < MAXC)
				p[2 + n++] = (struct pollfd){ .fd = fd,
							      .events = POLLIN };
			else if (fd >= 0)
				close(fd);
		}
		for (int i = 0; i < n; i++) {
			char buf[4096];
			ssize_t r;

			if (!p[2 + i].revents)
				continue;
			r = read(p[2 + i].fd, buf, sizeof(buf));
			if (r > 0 && write(p[2 + i].fd, buf, (size_t)r) == r)
				continue;
			/* Its end: closed with the vmio that died. */
			close(p[2 + i].fd);
			p[2 + i] = p[2 + --n];
			i--;
		}
	}
}

/* Opens c again (or the first time), trying until PROBE_BOUND_MS after
 * since. 0, or -1 with err. */
static int probe_open(struct vg *g, struct pconn *c, int ctl, int64_t since,
		      char *err, size_t err_size)
{
	int e = 0;

	while (!probe_stop) {
		int64_t left = since + (int64_t)PROBE_BOUND_MS * 1000000 -
			       (int64_t)vmio_now_ns();

		if (left <= 0)
			break;
		if (c->h2g) {
			if (write(ctl, "h", 1) != 1) {
				snprintf(err, err_size, "the host program is gone");
				return -1;
			}
			c->s = vg_accept(g, H2G_PORT, false,
					 (int)(left / 1000000) + 1, &e);
		} else {
			c->s = vg_connect(g, G2H_PORT,
					  (int)(left / 1000000) + 1, &e);
		}
		if (c->s) {
			c->seed++;
			c->rts = 0;
			c->last_ns = (int64_t)vmio_now_ns();
			return 0;
		}
		/* Refused or reset while vmio was down: again. */
		usleep(20000);
	}
	if (probe_stop)
		return 1;
	snprintf(err, err_size, "%s: no new connection within %d s of %s "
		 "(last: %s)", c->way, PROBE_BOUND_MS / 1000,
		 c->resets ? "its reset" : "the start",
		 e ? strerror(-e) : "timed out");
	return -1;
}

/* One round trip on c: 1 answered, 0 reset, 2 stopped, -1 failed. */
static int probe_rt(struct pconn *c, char *err, size_t err_size)
{
	uint8_t req[PROBE_MSG], got[PROBE_MSG];
	size_t done = 0;
	uint64_t off = c->rts * PROBE_MSG;

	vg_pattern_fill(c->seed, off, req, PROBE_MSG);
	for (int phase = 0; phase < 2; phase++) {
		done = 0;
		while (done < PROBE_MSG) {
			ssize_t n = phase ? vg_read(c->s, got + done,
						    PROBE_MSG - done,
						    PROBE_SLICE_MS)
					  : vg_write(c->s, req + done,
						     PROBE_MSG - done,
						     PROBE_SLICE_MS);

			if (n == -ECONNRESET)
				return 0;
			if (n > 0) {
				done += (size_t)n;
				continue;
			}
			if (n == 0 && phase) {
				snprintf(err, err_size, "%s: the connection "
					 "ended without a reset", c->way);
				return -1;
			}
			if (n != -ETIMEDOUT && n != 0) {
				snprintf(err, err_size, "%s: %s: %s", c->way,
					 phase ? "read" : "write",
					 strerror((int)-n));
				return -1;
			}
			if (probe_stop)
				return 2;
			if ((int64_t)vmio_now_ns() - c->last_ns >
			    (int64_t)PROBE_BOUND_MS * 1000000) {
				snprintf(err, err_size, "%s: no answer for %d s",
					 c->way, PROBE_BOUND_MS / 1000);
				return -1;
			}
		}
	}
	if (vg_pattern_check(c->seed, off, got, PROBE_MSG) != PROBE_MSG) {
		snprintf(err, err_size, "%s: a wrong answer at byte %" PRIu64,
			 c->way, off);
		return -1;
	}
	return 1;
}

static int crash_probe(const struct opts *o)
{
	struct pconn cs[2] = {
		{ .way = "g2h", .h2g = false, .seed = 1000 },
		{ .way = "h2g", .h2g = true, .seed = 2000 },
	};
	char err[256] = "", path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	int ctl[2], lfd, st = 0;
	uint64_t rts = 0;
	int64_t max_gap = 0, end;
	struct vg *g;
	struct sigaction sa = { .sa_handler = probe_on_signal };
	pid_t pid;

	g = vg_open(o->socket, XFER_STALL_MS, NULL, err, sizeof(err));
	if (!g)
		tool_die("%s", err);
	if (vg_listen(g, H2G_PORT))
		tool_die("vg_listen: %s", g->error);
	snprintf(path, sizeof(path), "%s_%u", o->uds, G2H_PORT);
	lfd = unix_listen(path);
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ctl) < 0)
		tool_die("socketpair: %s", strerror(errno));
	fflush(stdout);
	pid = fork();
	if (pid < 0)
		tool_die("fork: %s", strerror(errno));
	if (pid == 0) {
		close(ctl[0]);
		probe_host(lfd, o->uds, ctl[1]);
	}
	close(ctl[1]);
	close(lfd);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("crash-probe: pid=%ld\n", (long)getpid());
	end = (int64_t)vmio_now_ns() + (int64_t)o->seconds * 1000000000;
	for (unsigned i = 0; i < 2 && !st; i++)
		st = probe_open(g, &cs[i], ctl[0], (int64_t)vmio_now_ns(), err,
				sizeof(err));
	while (!st && !probe_stop && (int64_t)vmio_now_ns() < end) {
		usleep(PROBE_PACE_US);
		for (unsigned i = 0; i < 2 && !st; i++) {
			struct pconn *c = &cs[i];
			int r = probe_rt(c, err, sizeof(err));
			int64_t now = (int64_t)vmio_now_ns();

			if (r < 0) {
				st = -1;
			} else if (r == 2) {
				break;
			} else if (r == 0) {
				c->resets++;
				c->reset_ns = now;
				c->answer_before_reset_ns = c->last_ns;
				vg_close(c->s);
				c->s = NULL;
				st = probe_open(g, c, ctl[0], now, err,
						sizeof(err));
				if (st > 0)
					st = 0;
			} else {
				rts++;
				c->rts++;
				if (c->reset_ns) {
					int64_t gap = now -
						      c->answer_before_reset_ns;

					if (gap > max_gap)
						max_gap = gap;
					printf("crash-probe: answered way=%s "
					       "n=%u reset_ns=%" PRId64
					       " answered_ns=%" PRId64
					       " gap_ms=%.1f\n", c->way,
					       c->resets, c->reset_ns, now,
					       (double)gap / 1e6);
					c->reset_ns = 0;
				} else if (c->rts == 1) {
					printf("crash-probe: answered way=%s "
					       "n=0 answered_ns=%" PRId64 "\n",
					       c->way, now);
				}
				c->last_ns = now;
			}
		}
	}
	if (!st && g->violations) {
		snprintf(err, sizeof(err), "the device broke the protocol %"
			 PRIu64 " times; last: %s", g->violations,
			 g->violation);
		st = -1;
	}
	printf("vsock crash-probe resets=%u g2h_resets=%u h2g_resets=%u "
	       "round_trips=%" PRIu64 " max_gap_ms=%.1f\n",
	       cs[0].resets + cs[1].resets, cs[0].resets, cs[1].resets, rts,
	       (double)max_gap / 1e6);
	for (unsigned i = 0; i < 2; i++)
		if (cs[i].s)
			vg_close(cs[i].s);
	close(ctl[0]);
	waitpid(pid, NULL, 0);
	vg_free(g);
	if (st < 0)
		tool_die("%s", err);
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
		{ "buffer-size", required_argument, NULL, 'B' },
		{ "guest-cid", required_argument, NULL, 'g' },
		{ "direct", no_argument, NULL, 'D' },
		{ "mergeable", no_argument, NULL, 'M' },
		{ "tx-piece", required_argument, NULL, 'T' },
		{ "rx-piece", required_argument, NULL, 'R' },
		{ "echo", no_argument, NULL, 'E' },
		{ "seconds", required_argument, NULL, 'S' },
		{ "crash-probe", required_argument, NULL, 'C' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct opts o = {
		.plan = { .msg = 65536, .conns = 1 },
		.bytes = 256ull << 20, .rx_buf = 4096, .cid = 3, .seconds = 5,
	};
	bool msg_given = false;
	uint64_t v;
	int c;

	tool_name = "vmio-vsock-bench";
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
				return tool_usage_error("--direction: g2h or h2g");
			break;
		case 'm':
			if (vmio_parse_u64(optarg, XFER_MAX_MSG,
					   &o.plan.msg) || !o.plan.msg)
				return tool_usage_error("--msg-size: 1 to 1M");
			msg_given = true;
			break;
		case 'b':
			if (vmio_parse_u64(optarg, UINT64_MAX, &o.bytes) ||
			    !o.bytes)
				return tool_usage_error("--bytes: a positive size");
			break;
		case 'c':
			if (vmio_parse_u64(optarg, XFER_MAX_CONNS, &v) || !v)
				return tool_usage_error("--conns: 1 to %d",
						 XFER_MAX_CONNS);
			o.plan.conns = (unsigned)v;
			break;
		case 'r':
			if (vmio_parse_u64(optarg, VSOCK_MAX_PKT_PAYLOAD, &v) ||
			    v < 64)
				return tool_usage_error("--rx-buf: 64 to 64K");
			o.rx_buf = (uint32_t)v;
			break;
		case 'B':
			if (vmio_parse_u64(optarg, 64u << 20, &v) || v < 4096)
				return tool_usage_error("--buffer-size: 4K to 64M");
			o.buffer_size = (uint32_t)v;
			break;
		case 'g':
			if (vmio_parse_u64(optarg, VSOCK_MAX_GUEST_CID, &o.cid) ||
			    o.cid < VSOCK_MIN_GUEST_CID)
				return tool_usage_error("--guest-cid: 3 to "
							"4294967294");
			break;
		case 'D':
			o.direct = true;
			break;
		case 'M':
			o.mergeable = true;
			break;
		case 'T':
		case 'R':
			/* At most VG_CUT_MAX_DESC descriptors a chain. */
			if (vmio_parse_u64(optarg, VSOCK_MAX_PKT_PAYLOAD, &v) ||
			    v < 1024)
				return tool_usage_error("--%s-piece: 1K to 64K",
							c == 'T' ? "tx" : "rx");
			if (c == 'T')
				o.tx_piece = (uint32_t)v;
			else
				o.rx_piece = (uint32_t)v;
			break;
		case 'E':
			o.echo = true;
			break;
		case 'C':
			if (vmio_parse_u64(optarg, 86400, &o.seconds) ||
			    !o.seconds)
				return tool_usage_error("--crash-probe: 1 to 86400 "
							"seconds");
			o.crash_probe = true;
			break;
		case 'S':
			if (vmio_parse_u64(optarg, 3600, &o.seconds) ||
			    !o.seconds)
				return tool_usage_error("--seconds: 1 to 3600");
			break;
		default:
			return tool_other_option(c, usage);
		}
	}
	if (optind < argc)
		return tool_usage_error("unexpected argument: %s", argv[optind]);
	if (!o.direct && (!o.socket || !o.uds))
		return tool_usage_error("--socket and --uds-path are needed "
					"(or --direct)");
	if (o.direct && o.buffer_size)
		return tool_usage_error("--buffer-size is the guest's: not with "
					"--direct");
	if (o.echo && !msg_given)
		o.plan.msg = 64;
	/* Whole messages on each connection. */
	o.plan.per_conn = o.bytes / o.plan.conns / o.plan.msg * o.plan.msg;
	if (!o.plan.per_conn)
		o.plan.per_conn = o.plan.msg;
	signal(SIGPIPE, SIG_IGN);
	if (o.crash_probe) {
		if (o.direct || o.echo)
			return tool_usage_error("--crash-probe goes with neither "
						"--direct nor --echo");
		return crash_probe(&o);
	}
	return run(&o);
}
