/* vmio-redirect-bench: times one relay (`vmio redirect`, socat) moving a
 * checked byte stream into a unix stream sink; what `make bench` runs.
 *
 * Three roles:
 *   sink  listens on a unix stream path, accepts one connection and reads
 *         until EOF or --bytes, checking every byte against the pattern;
 *   send  sends the pattern into a unix datagram path (one empty datagram
 *         at the end means EOF to `vmio redirect`'s UNIX-RECV), a unix
 *         stream path or TCP 127.0.0.1:port;
 *   run   does a whole measured run: a forked sink, the relay command
 *         (forked and exec'd), the sender in this process; then reaps the
 *         relay with wait4 for its CPU time, and reads /proc/stat for the
 *         whole machine's. With --streams N, N connections at once, each
 *         with a sink process and a sender thread of its own (a forking
 *         relay's clients); with --term, the relay, which keeps
 *         accepting, is asked to end (SIGTERM) once the sinks have
 *         everything, and its CPU time is read from /proc/PID/stat just
 *         before: what moving the data cost, not its teardown.
 *
 * The pattern has a prime period (1000003 bytes), so it lines up with no
 * message or buffer size: a lost, repeated or reordered chunk shows as
 * wrong bytes. MB = 10^6 bytes, timed at the sink from its first byte to
 * its last. Every wait is bounded by --timeout seconds without progress. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <linux/vm_sockets.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/options.h"
#include "util/clock.h"
#include "util/proc_stat.h"
#include "util/unix_socket.h"

#define PERIOD 1000003u
#define MAX_MSG (1u << 20)  /* largest --msg, and the sink's read size */
#define MAX_STREAMS 16u
#define GIB (1024.0 * 1024 * 1024)

/* Exit status of `run` when the relay refused its command line (it exited
 * 2, vmio's usage-error status, before taking input). */
#define EXIT_REFUSED 3

/* How long `run` waits for other jobs to calm down before it starts. */
#define QUIET_WAIT_MS 3000

static const char usage[] =
	"Usage: vmio-redirect-bench sink --path PATH [--bytes N] [--timeout S]\n"
	"                                [--stall-after N --stall-ms MS]\n"
	"       vmio-redirect-bench send --to KIND:WHERE --bytes N [--msg N]\n"
	"                                [--timeout S]\n"
	"       vmio-redirect-bench run --sink PATH --to KIND:WHERE --bytes N\n"
	"                               [--msg N] [--timeout S] [--streams N]\n"
	"                               [--term] -- RELAY...\n"
	"       vmio-redirect-bench run --direct --to KIND:WHERE --bytes N\n"
	"                               [--msg N] [--timeout S]\n"
	"       vmio-redirect-bench relay --from udg:PATH --to vsock:CID:PORT\n"
	"                                 [--timeout S]\n"
	"       vmio-redirect-bench take --pid PID --bytes N [--timeout S]\n"
	"\n"
	"Moves N bytes of a checked pattern through a relay into a unix stream\n"
	"sink. KIND:WHERE is udg:PATH (unix datagrams, an empty one at the end),\n"
	"ust:PATH (unix stream) or tcp:PORT (TCP to 127.0.0.1).\n"
	"\n"
	"  sink   accept one connection on PATH, read to EOF or --bytes N,\n"
	"         check, and print bytes=N time=S MB/s=X intact=0|1;\n"
	"         --stall-after N --stall-ms MS: once N bytes are in, read\n"
	"         nothing for MS milliseconds (a stalled reader), then go on;\n"
	"         --answer N: write N bytes of the pattern back on the\n"
	"         connection, C (--answer-chunk, default 16) for each 64 KiB\n"
	"         read, the rest at the end; the line adds answered=N\n"
	"  send   send N bytes in --msg byte messages (default 64K), then EOF;\n"
	"         outq_max= is the most of them the kernel held charged to\n"
	"         the socket after a send (SIOCOUTQ)\n"
	"  run    start a sink on PATH, then RELAY (which reads KIND:WHERE and\n"
	"         writes to PATH), send into it, wait for the relay to exit and\n"
	"         print the sink's line with the relay's CPU seconds (user+sys,\n"
	"         from wait4) and the whole machine's (busy time in /proc/stat)\n"
	"         per GiB; others_cpu is what other processes used meanwhile,\n"
	"         quiet=0 that the machine did not go idle in 3 s first.\n"
	"         Exits 3 with 'refused: MESSAGE' when the relay exits 2 before\n"
	"         it takes input (a usage error), 1 on any failure.\n"
	"         --streams N (1 to 16): N connections at once (ust or tcp),\n"
	"         each carrying --bytes N to a sink of its own; MB/s is all\n"
	"         their bytes from the first byte to the last at any sink.\n"
	"         --term: the relay keeps serving (a forking listener): send it\n"
	"         SIGTERM once the sinks have everything; its CPU is its\n"
	"         utime+stime in /proc/PID/stat just before, and it must exit 0.\n"
	"         --direct: no relay: the sink itself listens on (or binds)\n"
	"         KIND:WHERE and the sender sends straight to it, the limit a\n"
	"         relay from that socket type is measured against.\n"
	"  relay  the plainest copy relay, for a guest's benchmark: bind a\n"
	"         unix datagram socket at PATH, connect a vsock stream to\n"
	"         CID:PORT, then recv() each datagram and write() it all,\n"
	"         blocking, until an empty datagram; then shut the stream\n"
	"         down and wait for its peer to close. Inside a guest only:\n"
	"         on a host, AF_VSOCK reaches the host's own hypervisor.\n"
	"  take   the reverse direction of a guest's `vmio redirect\n"
	"         UNIX-RECV:... VSOCK-CONNECT:...`, which vmio does not relay:\n"
	"         take a copy of process PID's connected vsock stream socket\n"
	"         (pidfd_getfd: root) and read N bytes of the pattern from\n"
	"         it, poll then non-blocking recv; prints took bytes=N\n"
	"         intact=0|1 refused=R (recvs that met EAGAIN after POLLIN)\n"
	"         refused_max_ms= (the longest such spell). Guest only.\n"
	"\n"
	"Sizes take K, M, G suffixes. --timeout: seconds without progress\n"
	"before giving up (default 10).\n";

/* ---- the pattern ---- */

static uint8_t *pattern; /* PERIOD + MAX_MSG bytes: any span of a stream */

static void pattern_init(void)
{
	pattern = malloc(PERIOD + MAX_MSG);
	if (!pattern) {
		fprintf(stderr, "vmio-redirect-bench: out of memory\n");
		exit(1);
	}
	for (uint32_t i = 0; i < PERIOD + MAX_MSG; i++) {
		uint32_t k = i % PERIOD;

		pattern[i] = (uint8_t)((k * 2654435761u) >> 15 ^ k ^ k >> 9);
	}
}

/* The pattern bytes from stream offset pos on (at least MAX_MSG). */
static const uint8_t *pattern_at(uint64_t pos)
{
	return pattern + pos % PERIOD;
}

/* ---- small helpers ---- */

/* Busy CPU seconds of the whole machine since boot: all but idle and
 * iowait (guest time is in user already). */
static double machine_busy_s(void)
{
	unsigned long long v[8] = { 0 };
	FILE *f = fopen("/proc/stat", "r");
	int n = 0;

	if (f) {
		n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu",
			   &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6],
			   &v[7]);
		fclose(f);
	}
	if (n != 8)
		return 0;
	return (double)(v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) /
	       (double)sysconf(_SC_CLK_TCK);
}

/* Waits up to limit_ms for the machine to be nearly idle (at most one
 * 10 ms tick busy in 100 ms), so that other jobs on a shared machine run
 * outside the measurement where they can. Returns whether it got there. */
static bool wait_quiet(int limit_ms)
{
	int64_t end = (int64_t)vmio_now_ns() + (int64_t)limit_ms * 1000000;

	do {
		double b0 = machine_busy_s();

		usleep(100000);
		if (machine_busy_s() - b0 < 0.015)
			return true;
	} while ((int64_t)vmio_now_ns() < end);
	return false;
}

/* ---- the sink ---- */

struct sink_result {
	uint64_t bytes;
	int64_t first_ns, last_ns;
	int intact;
	char error[200];
};

/* Waits up to timeout_ms for fd to be readable: 0, or -1 on timeout. */
static int wait_readable(int fd, int timeout_ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	int r;

	while ((r = poll(&p, 1, timeout_ms)) < 0 && errno == EINTR)
		;
	return r == 1 ? 0 : -1;
}

/* Accepts one connection on lfd and reads it, checking each byte, to EOF
 * or until want bytes (0: no limit) are in. Stopping at want is needed:
 * socat (1.7.4) does not take the sender's empty datagram for an EOF, and
 * only ends once the sink has closed. The listener may be non-blocking:
 * the accepted socket is blocking, reads bounded by poll. */
/* --stall-after N --stall-ms MS: the sink stops reading for MS once N
 * bytes are in (ms 0: never). */
struct stall {
	uint64_t after;
	int ms;
};

/* --answer N --answer-chunk C: the sink writes N bytes of the pattern back
 * on the same connection while it reads, C bytes for each 64 KiB that
 * came in (one datagram of the sender's), the rest once its input ends:
 * the host answering a guest's relay while the forward direction runs. */
struct answer {
	uint64_t bytes, chunk;
	uint64_t sent;
};

/* Writes the answer due after `in` bytes came in (all of it at the end).
 * Returns 0, or -1 with r->error set. */
static int answer_due(int fd, struct answer *a, uint64_t in, bool end,
		      struct sink_result *r)
{
	uint64_t due = end ? a->bytes : in / 65536 * a->chunk;

	if (due > a->bytes)
		due = a->bytes;
	while (a->sent < due) {
		size_t n = (size_t)(due - a->sent < MAX_MSG ? due - a->sent :
							       MAX_MSG);
		ssize_t w = write(fd, pattern_at(a->sent), n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0) {
			snprintf(r->error, sizeof(r->error),
				 "answering: %s after %" PRIu64 " bytes",
				 strerror(errno), a->sent);
			return -1;
		}
		a->sent += (uint64_t)w;
	}
	return 0;
}

static void sink_run(int lfd, bool dgram, uint64_t want, int timeout_ms,
		     int accept_ms, const struct stall *stall,
		     struct answer *answer, struct sink_result *r)
{
	static uint8_t buf[MAX_MSG];
	bool stalled = false;
	int fd;

	*r = (struct sink_result){ 0 };
	/* A datagram socket is read as it is: an empty datagram is EOF. */
	if (dgram) {
		fd = dup(lfd);
		goto read;
	}
	/* Sinks of other streams wait on the same listener: one that woke
	 * for a connection another took waits again. */
	do {
		if (wait_readable(lfd, accept_ms)) {
			snprintf(r->error, sizeof(r->error),
				 "no connection in %d s", accept_ms / 1000);
			return;
		}
		fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	} while (fd < 0 && (errno == EAGAIN || errno == EWOULDBLOCK));
	if (fd < 0) {
		snprintf(r->error, sizeof(r->error), "accept: %s",
			 strerror(errno));
		return;
	}
read:
	for (;;) {
		ssize_t n;

		if (wait_readable(fd, timeout_ms)) {
			snprintf(r->error, sizeof(r->error),
				 "no byte for %d s after %" PRIu64 " bytes",
				 timeout_ms / 1000, r->bytes);
			break;
		}
		n = read(fd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			snprintf(r->error, sizeof(r->error),
				 "read: %s after %" PRIu64 " bytes",
				 strerror(errno), r->bytes);
			break;
		}
		if (n == 0) {
			if (want && r->bytes != want)
				snprintf(r->error, sizeof(r->error),
					 "EOF after %" PRIu64 " of %" PRIu64
					 " bytes", r->bytes, want);
			else if (!answer_due(fd, answer, r->bytes, true, r))
				r->intact = 1;
			break;
		}
		if (!r->bytes)
			r->first_ns = r->last_ns = (int64_t)vmio_now_ns();
		if (memcmp(buf, pattern_at(r->bytes), (size_t)n)) {
			size_t i = 0;

			while (buf[i] == pattern_at(r->bytes)[i])
				i++;
			snprintf(r->error, sizeof(r->error),
				 "wrong byte at %" PRIu64, r->bytes + i);
			break;
		}
		r->bytes += (uint64_t)n;
		r->last_ns = (int64_t)vmio_now_ns();
		if (answer_due(fd, answer, r->bytes, false, r))
			break;
		if (stall->ms && !stalled && r->bytes >= stall->after) {
			/* Nothing read meanwhile: what the relay still sends
			 * waits in the sink's socket and behind it. */
			stalled = true;
			usleep((useconds_t)stall->ms * 1000);
		}
		/* A datagram sink reads on to the empty datagram: its
		 * sender has no other way to end. */
		if (want && r->bytes >= want && (!dgram || r->bytes > want)) {
			/* Whatever is already there past the end is too
			 * much; waiting for more would only slow every run. */
			if (r->bytes > want ||
			    recv(fd, buf, 1, MSG_DONTWAIT | MSG_PEEK) > 0)
				snprintf(r->error, sizeof(r->error),
					 "more than %" PRIu64 " bytes", want);
			else if (!answer_due(fd, answer, r->bytes, true, r))
				r->intact = 1;
			break;
		}
	}
	close(fd);
}

static double sink_mbps(const struct sink_result *r)
{
	double s = (double)(r->last_ns - r->first_ns) / 1e9;

	return s > 0 ? (double)r->bytes / 1e6 / s : 0;
}

/* The line both `sink` and `run` print first. */
static void print_sink_result(const struct sink_result *r)
{
	printf("bytes=%" PRIu64 " time=%.3f MB/s=%.1f intact=%d",
	       r->bytes, (double)(r->last_ns - r->first_ns) / 1e9,
	       sink_mbps(r), r->intact);
}

/* ---- the sender ---- */

enum kind { KIND_UDG, KIND_UST, KIND_TCP };

struct target {
	enum kind kind;
	const char *path; /* udg, ust */
	uint16_t port;    /* tcp */
};

static int parse_target(const char *text, struct target *t)
{
	const char *colon = strchr(text, ':');
	uint64_t port;

	if (!colon || !colon[1])
		return -1;
	t->path = colon + 1;
	if (!strncmp(text, "udg:", 4)) {
		t->kind = KIND_UDG;
	} else if (!strncmp(text, "ust:", 4)) {
		t->kind = KIND_UST;
	} else if (!strncmp(text, "tcp:", 4)) {
		t->kind = KIND_TCP;
		if (vmio_parse_u64(t->path, 65535, &port) || !port)
			return -1;
		t->port = (uint16_t)port;
	} else {
		return -1;
	}
	return 0;
}

/* One attempt to reach the relay's input: a connected socket, or -1 (the
 * relay may not be listening or bound yet). */
static int target_open(const struct target *t)
{
	struct sockaddr_un un = { .sun_family = AF_UNIX };
	struct sockaddr_in in = {
		.sin_family = AF_INET,
		.sin_port = htons(t->port),
		.sin_addr.s_addr = htonl(INADDR_LOOPBACK),
	};
	struct sockaddr *a = (struct sockaddr *)&un;
	socklen_t len = sizeof(un);
	int fd;

	if (t->kind == KIND_TCP) {
		a = (struct sockaddr *)&in;
		len = sizeof(in);
	} else if (strlen(t->path) >= sizeof(un.sun_path)) {
		errno = ENAMETOOLONG;
		return -1;
	} else {
		strcpy(un.sun_path, t->path);
	}
	fd = socket(t->kind == KIND_TCP ? AF_INET : AF_UNIX,
		    (t->kind == KIND_UDG ? SOCK_DGRAM : SOCK_STREAM) |
			    SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (connect(fd, a, len) < 0) {
		int e = errno;

		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

/* Sends bytes of the pattern in msg-byte messages on a connected blocking
 * socket, then the end: an empty datagram, or a write shutdown. Returns 0,
 * or -1 with err filled. */
/* send_all, with the most the kernel held charged to the socket after a
 * send (SIOCOUTQ: its send memory on a unix socket) in *outq_max when
 * not NULL: how much of the sender's data sits in kernel queues. */
static int send_all_outq(int fd, const struct target *t, uint64_t bytes,
			 uint64_t msg, int timeout_ms, uint64_t *outq_max,
			 char *err, size_t size)
{
	struct timeval tv = { .tv_sec = timeout_ms / 1000 };
	uint64_t sent = 0;

	/* A relay that stops reading fails the send, rather than hangs it. */
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	while (sent < bytes) {
		size_t n = (size_t)(bytes - sent < msg ? bytes - sent : msg);
		ssize_t r = send(fd, pattern_at(sent), n, MSG_NOSIGNAL);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			snprintf(err, size, "send: %s after %" PRIu64 " bytes",
				 errno == EAGAIN ? "no progress" :
						   strerror(errno), sent);
			return -1;
		}
		sent += (uint64_t)r;
		if (outq_max) {
			int q = 0;

			if (!ioctl(fd, SIOCOUTQ, &q) && (uint64_t)q > *outq_max)
				*outq_max = (uint64_t)q;
		}
	}
	if (t->kind == KIND_UDG ? send(fd, "", 0, MSG_NOSIGNAL) < 0 :
				  shutdown(fd, SHUT_WR) < 0) {
		snprintf(err, size, "sending EOF: %s", strerror(errno));
		return -1;
	}
	return 0;
}

static int send_all(int fd, const struct target *t, uint64_t bytes,
		    uint64_t msg, int timeout_ms, char *err, size_t size)
{
	return send_all_outq(fd, t, bytes, msg, timeout_ms, NULL, err, size);
}

/* ---- run: sink, relay and sender ---- */

struct opts {
	const char *path;   /* sink: --path; run: --sink */
	struct target to;
	bool have_to;
	uint64_t bytes, msg;
	int timeout_ms;
	unsigned streams;   /* run: connections at once */
	bool term;          /* run: SIGTERM the relay once the data is in */
	bool direct;        /* run: no relay, the sink on the target */
	struct stall stall; /* sink */
	struct answer answer; /* sink */
	pid_t pid;          /* take */
	const char *from;   /* relay: the datagram path */
	uint32_t vsock_cid, vsock_port; /* relay: where to */
	char **relay;       /* run: the command after -- */
};

/* Forks the sink on lfd; its result comes back through *report_fd. */
static pid_t start_sink(const struct opts *o, int lfd, int *report_fd)
{
	int p[2];
	pid_t pid;

	if (pipe2(p, O_CLOEXEC) < 0)
		return -1;
	pid = fork();
	if (pid == 0) {
		struct sink_result r;
		struct answer none = { 0 };

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		close(p[0]);
		/* The relay connects to the sink only once the sender is in:
		 * give it the time for both. */
		sink_run(lfd, o->direct && o->to.kind == KIND_UDG, o->bytes,
			 o->timeout_ms, 3 * o->timeout_ms, &o->stall, &none,
			 &r);
		(void)!write(p[1], &r, sizeof(r));
		_exit(0);
	}
	close(p[1]);
	*report_fd = p[0];
	return pid;
}

/* Forks and execs the relay with its stdout and stderr in a memfd, read
 * afterwards: a pipe nobody drains during the run could block a chatty
 * relay, and our stdout carries only the result line. */
static pid_t start_relay(char **argv, int *stderr_fd)
{
	int fd = memfd_create("relay-stderr", MFD_CLOEXEC);
	pid_t pid;

	if (fd < 0)
		return -1;
	pid = fork();
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		dup2(fd, 1);
		dup2(fd, 2);
		execvp(argv[0], argv);
		fprintf(stderr, "vmio-redirect-bench: %s: %s\n", argv[0],
			strerror(errno));
		_exit(127);
	}
	*stderr_fd = fd;
	return pid;
}

/* The first line the relay wrote to stderr. */
static void relay_first_line(int fd, char *line, size_t size)
{
	ssize_t n = pread(fd, line, size - 1, 0);

	line[n > 0 ? n : 0] = '\0';
	line[strcspn(line, "\n")] = '\0';
}

/* Waits up to timeout_ms for the relay to exit: 0 with its status and
 * rusage, or -1 if it is still running. */
static int reap(pid_t pid, int timeout_ms, int *status, struct rusage *ru)
{
	int64_t end = (int64_t)vmio_now_ns() + (int64_t)timeout_ms * 1000000;

	for (;;) {
		pid_t r = wait4(pid, status, WNOHANG, ru);

		if (r == pid)
			return 0;
		if (r < 0 && errno != EINTR)
			return -1;
		if ((int64_t)vmio_now_ns() > end)
			return -1;
		usleep(2000);
	}
}

static double tv_s(const struct timeval *t)
{
	return (double)t->tv_sec + (double)t->tv_usec / 1e6;
}

/* Connects to the relay's input once it is there. Returns the socket, -1
 * with err filled, or -2 if the relay refused its command line (exited 2
 * first; its message in err). An exited relay is left to reap (WNOWAIT):
 * its pid stays ours until then. */
static int reach_relay(const struct opts *o, pid_t relay, int relay_err,
		       char *err, size_t size)
{
	int64_t end = (int64_t)vmio_now_ns() + (int64_t)o->timeout_ms * 1000000;
	int fd;

	while ((fd = target_open(&o->to)) < 0) {
		siginfo_t si = { 0 };

		if (!waitid(P_PID, (id_t)relay, &si,
			    WEXITED | WNOHANG | WNOWAIT) && si.si_pid) {
			char line[200];

			relay_first_line(relay_err, line, sizeof(line));
			if (si.si_code == CLD_EXITED && si.si_status == 2) {
				snprintf(err, size, "%s", line);
				return -2;
			}
			snprintf(err, size,
				 "relay ended (code %d, status %d) before its input was ready: %s",
				 si.si_code, si.si_status, line);
			return -1;
		}
		if ((int64_t)vmio_now_ns() > end) {
			snprintf(err, size,
				 "relay input not ready in %d s: %s",
				 o->timeout_ms / 1000, strerror(errno));
			return -1;
		}
		usleep(5000);
	}
	return fd;
}

/* The sinks' results as one: every byte of every stream, from the first
 * to reach any sink to the last. */
static void merge_results(struct sink_result *all,
			  const struct sink_result *r, unsigned n)
{
	*all = r[0];
	for (unsigned i = 1; i < n; i++) {
		if (r[i].bytes && (!all->bytes || r[i].first_ns < all->first_ns))
			all->first_ns = r[i].first_ns;
		if (r[i].last_ns > all->last_ns)
			all->last_ns = r[i].last_ns;
		all->bytes += r[i].bytes;
		if (all->intact && !r[i].intact) {
			all->intact = 0;
			snprintf(all->error, sizeof(all->error), "stream %u: %s",
				 i + 1, r[i].error);
		}
	}
}

/* One stream's sender, in a thread of its own so that the streams run
 * at once. */
struct sender {
	const struct opts *o;
	int fd;
	pthread_t thread;
	char err[200];
};

static void *sender_main(void *opaque)
{
	struct sender *s = opaque;

	send_all(s->fd, &s->o->to, s->o->bytes, s->o->msg, s->o->timeout_ms,
		 s->err, sizeof(s->err));
	close(s->fd);
	return NULL;
}

/* Sends every stream, the first on fd (the relay is known to be there),
 * the others on connections of their own; the first failure in err. */
static void send_streams(const struct opts *o, int fd, char *err,
			 size_t size)
{
	struct sender s[MAX_STREAMS];
	unsigned n;

	for (n = 0; n < o->streams; n++) {
		s[n] = (struct sender){ .o = o, .fd = n ? target_open(&o->to) : fd };
		if (s[n].fd < 0) {
			snprintf(err, size, "stream %u: connect: %s", n + 1,
				 strerror(errno));
			break;
		}
		if (pthread_create(&s[n].thread, NULL, sender_main, &s[n])) {
			snprintf(err, size, "stream %u: no thread", n + 1);
			close(s[n].fd);
			break;
		}
	}
	for (unsigned i = 0; i < n; i++) {
		pthread_join(s[i].thread, NULL);
		if (s[i].err[0] && !err[0])
			snprintf(err, size, "stream %u: %s", i + 1, s[i].err);
	}
}

/* utime + stime of a running process in seconds; -1 if it cannot be
 * read. */
static double proc_cpu_s(pid_t pid)
{
	long ticks = vmio_proc_cpu_ticks(pid);

	return ticks < 0 ? -1 : (double)ticks / (double)sysconf(_SC_CLK_TCK);
}

/* --direct: the sink's socket on the target itself. Returns the fd, or
 * -errno. */
static int listen_direct(const struct target *t, struct stat *st)
{
	struct sockaddr_in in = {
		.sin_family = AF_INET,
		.sin_port = htons(t->port),
		.sin_addr.s_addr = htonl(INADDR_LOOPBACK),
	};
	int one = 1, fd;

	if (t->kind == KIND_UST)
		return vmio_unix_listen(t->path, 1, "sink", st);
	if (t->kind == KIND_UDG) {
		fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		if (fd < 0)
			return -errno;
		unlink(t->path);
		int rc = vmio_unix_bind_socket(fd, t->path, SOCK_DGRAM, 0,
					       "sink", st);
		if (rc) {
			close(fd);
			return rc;
		}
		return fd;
	}
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(fd, (struct sockaddr *)&in, sizeof(in)) < 0 ||
	    listen(fd, 1) < 0) {
		int e = errno;

		close(fd);
		return -e;
	}
	return fd;
}

/* --direct: the sender straight into the sink, no relay between. */
static int cmd_run_direct(const struct opts *o)
{
	struct sink_result r = { .error = "sink died" };
	char err[300] = "";
	struct stat lst = { 0 };
	int lfd = listen_direct(&o->to, &lst), report_fd, fd;
	pid_t sink;

	if (lfd < 0) {
		fprintf(stderr, "vmio-redirect-bench: listen on the target: %s\n",
			strerror(-lfd));
		return 1;
	}
	sink = start_sink(o, lfd, &report_fd);
	if (sink < 0) {
		fprintf(stderr, "vmio-redirect-bench: fork: %s\n",
			strerror(errno));
		return 1;
	}
	bool quiet = wait_quiet(QUIET_WAIT_MS);
	double busy0 = machine_busy_s();
	fd = target_open(&o->to);
	close(lfd);
	if (fd < 0) {
		snprintf(err, sizeof(err), "connect: %s", strerror(errno));
		kill(sink, SIGKILL);
	} else {
		send_all(fd, &o->to, o->bytes, o->msg, o->timeout_ms, err,
			 sizeof(err));
		close(fd);
	}
	if (read(report_fd, &r, sizeof(r)) != sizeof(r))
		r = (struct sink_result){ .error = "no data sent" };
	double busy = machine_busy_s() - busy0, gib = (double)r.bytes / GIB;
	struct rusage self, children;

	waitpid(sink, NULL, 0);
	if (o->to.kind != KIND_TCP)
		vmio_unix_unlink_if_same(o->to.path, &lst);
	/* As in cmd_run: what neither the sender nor the sink used. */
	getrusage(RUSAGE_SELF, &self);
	getrusage(RUSAGE_CHILDREN, &children);
	double others = busy - tv_s(&self.ru_utime) - tv_s(&self.ru_stime) -
			tv_s(&children.ru_utime) - tv_s(&children.ru_stime);
	print_sink_result(&r);
	printf(" relay_cpu=0.000 relay_s/GiB=0.000 machine_cpu=%.3f "
	       "machine_s/GiB=%.3f others_cpu=%.2f quiet=%d", busy,
	       gib > 0 ? busy / gib : 0, others > 0 ? others : 0, quiet);
	if (!r.intact)
		printf(" error=\"sink: %s\"", r.error);
	if (err[0])
		printf(" %s=\"%s\"", r.intact ? "error" : "then", err);
	printf("\n");
	return r.intact && !err[0] ? 0 : 1;
}

static int cmd_run(const struct opts *o)
{
	struct sink_result r = { .error = "sink died" }, rs[MAX_STREAMS];
	int lfd, report_fd[MAX_STREAMS], relay_err, fd, st = 0, rc = 1;
	char err[300] = "";
	struct rusage ru = { 0 };
	struct stat lst;
	pid_t sink[MAX_STREAMS], relay;
	double busy0, relay_cpu = -1;
	unsigned sinks;
	bool quiet;

	lfd = vmio_unix_listen(o->path, (int)o->streams, "sink", &lst);
	if (lfd < 0) {
		fprintf(stderr, "vmio-redirect-bench: listen on %s: %s\n",
			o->path, strerror(-lfd));
		return 1;
	}
	/* One sink per stream, each taking one of the relay's connections. */
	for (sinks = 0; sinks < o->streams; sinks++) {
		sink[sinks] = start_sink(o, lfd, &report_fd[sinks]);
		if (sink[sinks] < 0)
			break;
	}
	close(lfd);
	if (sinks < o->streams) {
		fprintf(stderr, "vmio-redirect-bench: fork: %s\n",
			strerror(errno));
		for (unsigned i = 0; i < sinks; i++)
			kill(sink[i], SIGKILL);
		return 1;
	}
	/* A file left by an earlier run must not pass for the relay's. */
	if (o->to.kind != KIND_TCP)
		unlink(o->to.path);

	quiet = wait_quiet(QUIET_WAIT_MS);
	busy0 = machine_busy_s();
	relay = start_relay(o->relay, &relay_err);
	if (relay < 0) {
		fprintf(stderr, "vmio-redirect-bench: starting the relay: %s\n",
			strerror(errno));
		return 1;
	}
	fd = reach_relay(o, relay, relay_err, err, sizeof(err));
	if (fd >= 0) {
		send_streams(o, fd, err, sizeof(err));
	} else {
		/* No data is coming: do not wait out the sinks' timeout. */
		for (unsigned i = 0; i < sinks; i++)
			kill(sink[i], SIGKILL);
	}
	/* The sinks always report within their own timeouts, or die. */
	for (unsigned i = 0; i < sinks; i++)
		if (read(report_fd[i], &rs[i], sizeof(rs[i])) != sizeof(rs[i]))
			rs[i] = (struct sink_result){ .error = "no data sent" };
	merge_results(&r, rs, sinks);
	/* The machine's share ends with the data: socat lingers idle for
	 * half a second after an EOF, and other jobs would fill that in. */
	double busy = machine_busy_s() - busy0;
	if (o->term) {
		relay_cpu = proc_cpu_s(relay);
		kill(relay, SIGTERM);
	}
	if (reap(relay, o->timeout_ms, &st, &ru)) {
		kill(relay, SIGKILL);
		reap(relay, o->timeout_ms, &st, &ru);
		if (!err[0])
			snprintf(err, sizeof(err),
				 "relay still running %d s after the end",
				 o->timeout_ms / 1000);
	} else if (!err[0] && (!WIFEXITED(st) || WEXITSTATUS(st))) {
		snprintf(err, sizeof(err), "relay exited with status 0x%x",
			 st);
	}
	if (relay_cpu < 0)
		relay_cpu = tv_s(&ru.ru_utime) + tv_s(&ru.ru_stime);
	double gib = (double)r.bytes / GIB;
	struct rusage self, children;

	for (unsigned i = 0; i < sinks; i++)
		waitpid(sink[i], NULL, 0);
	/* The machine's CPU that neither the relay, the senders (this
	 * process) nor the sinks used: other jobs, kernel threads. */
	getrusage(RUSAGE_SELF, &self);
	getrusage(RUSAGE_CHILDREN, &children);
	double others = busy - tv_s(&self.ru_utime) - tv_s(&self.ru_stime) -
			tv_s(&children.ru_utime) - tv_s(&children.ru_stime);
	vmio_unix_unlink_if_same(o->path, &lst);
	if (fd == -2) {
		printf("refused: %s\n", err);
		return EXIT_REFUSED;
	}
	print_sink_result(&r);
	printf(" relay_cpu=%.3f relay_s/GiB=%.3f machine_cpu=%.3f "
	       "machine_s/GiB=%.3f others_cpu=%.2f quiet=%d", relay_cpu,
	       gib > 0 ? relay_cpu / gib : 0, busy, gib > 0 ? busy / gib : 0,
	       others > 0 ? others : 0, quiet);
	if (!r.intact)
		printf(" error=\"sink: %s\"", r.error);
	if (err[0])
		printf(" %s=\"%s\"", r.intact ? "error" : "then", err);
	if (r.intact && !err[0])
		rc = 0;
	printf("\n");
	if (rc) {
		char line[200];

		relay_first_line(relay_err, line, sizeof(line));
		if (line[0])
			fprintf(stderr, "relay stderr: %s\n", line);
	}
	return rc;
}

/* ---- the standalone roles ---- */

static int cmd_sink(const struct opts *o)
{
	struct sink_result r;
	struct answer a = o->answer;
	struct stat st;
	int lfd = vmio_unix_listen(o->path, 1, "sink", &st);

	if (lfd < 0) {
		fprintf(stderr, "vmio-redirect-bench: listen on %s: %s\n",
			o->path, strerror(-lfd));
		return 1;
	}
	sink_run(lfd, false, o->bytes, o->timeout_ms, o->timeout_ms, &o->stall,
		 &a, &r);
	close(lfd);
	vmio_unix_unlink_if_same(o->path, &st);
	print_sink_result(&r);
	if (a.bytes)
		printf(" answered=%" PRIu64, a.sent);
	if (!r.intact)
		printf(" error=\"%s\"", r.error);
	printf("\n");
	return r.intact ? 0 : 1;
}

static int cmd_send(const struct opts *o)
{
	int64_t end = (int64_t)vmio_now_ns() + (int64_t)o->timeout_ms * 1000000, t0;
	uint64_t outq_max = 0;
	char err[200];
	int fd;

	while ((fd = target_open(&o->to)) < 0) {
		if ((int64_t)vmio_now_ns() > end) {
			fprintf(stderr, "vmio-redirect-bench: cannot reach the "
				"target in %d s: %s\n", o->timeout_ms / 1000,
				strerror(errno));
			return 1;
		}
		usleep(5000);
	}
	t0 = (int64_t)vmio_now_ns();
	if (send_all_outq(fd, &o->to, o->bytes, o->msg, o->timeout_ms,
			  &outq_max, err, sizeof(err))) {
		fprintf(stderr, "vmio-redirect-bench: %s\n", err);
		close(fd);
		return 1;
	}
	close(fd);
	printf("sent bytes=%" PRIu64 " msg=%" PRIu64 " time=%.3f outq_max=%" PRIu64
	       "\n", o->bytes, o->msg,
	       (double)((int64_t)vmio_now_ns() - t0) / 1e9, outq_max);
	return 0;
}

/* The plainest relay: what a user would write in a few lines, and what
 * the seed's "copying packets via userspace" was measured against. */
static int cmd_relay(const struct opts *o)
{
	static uint8_t buf[MAX_MSG];
	struct sockaddr_vm vm = {
		.svm_family = AF_VSOCK,
		.svm_cid = o->vsock_cid,
		.svm_port = o->vsock_port,
	};
	struct timeval tv = { .tv_sec = o->timeout_ms / 1000 };
	uint64_t bytes = 0;
	struct stat st;
	const char *what = NULL;
	int v, d = -1, rc;

	v = socket(AF_VSOCK, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (v < 0 || connect(v, (struct sockaddr *)&vm, sizeof(vm)) < 0) {
		fprintf(stderr, "vmio-redirect-bench: relay: vsock %u:%u: %s\n",
			o->vsock_cid, o->vsock_port, strerror(errno));
		return 1;
	}
	d = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	unlink(o->from);
	rc = d < 0 ? -errno : vmio_unix_bind_socket(d, o->from, SOCK_DGRAM, 0,
						    "relay", &st);
	if (rc) {
		fprintf(stderr, "vmio-redirect-bench: relay: bind %s: %s\n",
			o->from, strerror(-rc));
		return 1;
	}
	/* Every wait bounded: a sender or a sink that stops fails the run. */
	setsockopt(d, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(v, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	setsockopt(v, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	for (;;) {
		ssize_t n = recv(d, buf, sizeof(buf), 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			what = "recv";
			break;
		}
		if (n == 0)
			break;
		for (ssize_t off = 0; off < n;) {
			ssize_t w = write(v, buf + off, (size_t)(n - off));

			if (w < 0 && errno == EINTR)
				continue;
			if (w < 0) {
				what = "write";
				break;
			}
			off += w;
		}
		if (what)
			break;
		bytes += (uint64_t)n;
	}
	if (!what && shutdown(v, SHUT_WR) < 0)
		what = "shutdown";
	/* The sink closes once it has everything. */
	while (!what && read(v, buf, sizeof(buf)) > 0)
		;
	if (what)
		fprintf(stderr, "vmio-redirect-bench: relay: %s: %s after %" PRIu64
			" bytes\n", what, strerror(errno), bytes);
	else
		printf("relayed bytes=%" PRIu64 "\n", bytes);
	vmio_unix_unlink_if_same(o->from, &st);
	close(d);
	close(v);
	return what ? 1 : 0;
}

/* ---- take: the reverse direction of a guest's relay ---- */

/* How long take's poll waits before it looks at its deadline. */
#define TAKE_WAIT_MS 200

/* A copy of the connected AF_VSOCK stream socket process pid holds, or
 * -1 (errno set) while it has none. */
static int take_vsock_of(int pidfd)
{
	for (int fd = 0; fd < 1024; fd++) {
		int dom = 0, type = 0, mine;
		socklen_t len = sizeof(dom);
		struct sockaddr_vm peer;
		socklen_t plen = sizeof(peer);

		mine = (int)syscall(SYS_pidfd_getfd, pidfd, fd, 0);
		if (mine < 0)
			continue;
		if (!getsockopt(mine, SOL_SOCKET, SO_DOMAIN, &dom, &len) &&
		    dom == AF_VSOCK && (len = sizeof(type)) &&
		    !getsockopt(mine, SOL_SOCKET, SO_TYPE, &type, &len) &&
		    type == SOCK_STREAM &&
		    !getpeername(mine, (struct sockaddr *)&peer, &plen))
			return mine;
		close(mine);
	}
	errno = ENOENT;
	return -1;
}

struct take_result {
	uint64_t bytes, reads;
	uint64_t refused;     /* poll said POLLIN, a MSG_DONTWAIT recv EAGAIN */
	int64_t refused_max_ns; /* the longest such spell before data came */
	int intact;
	char error[200];
};

/* Reads want bytes of the pattern from fd the way a level-triggered relay
 * would: poll, then a non-blocking recv, counting the recvs that refuse
 * what poll called readable. Never a blocking recv: on a vsock socket in
 * a sockmap that sleeps holding the socket's lock, which stops the
 * guest's whole vsock receive path and the kernel's sends on this socket
 * meanwhile (docs/known-kernel-issues.md). A refused recv is followed by
 * a 1 ms pause, so that a refusal that lasts cannot make this reader the
 * one that spins. */
static void take_run(int fd, uint64_t want, int timeout_ms,
		     struct take_result *r)
{
	static uint8_t buf[MAX_MSG];
	int64_t last = (int64_t)vmio_now_ns(), refused_since = 0;

	*r = (struct take_result){ 0 };
	while (r->bytes < want) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ssize_t n;

		if ((int64_t)vmio_now_ns() - last >
		    (int64_t)timeout_ms * 1000000) {
			snprintf(r->error, sizeof(r->error),
				 "no byte for %d s after %" PRIu64 " bytes%s",
				 timeout_ms / 1000, r->bytes,
				 refused_since ? ", poll saying POLLIN" : "");
			return;
		}
		if (poll(&p, 1, TAKE_WAIT_MS) != 1 || !(p.revents & POLLIN))
			continue;
		n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN) {
			r->refused++;
			if (!refused_since)
				refused_since = (int64_t)vmio_now_ns();
			usleep(1000);
			continue;
		}
		if (n <= 0) {
			snprintf(r->error, sizeof(r->error),
				 "%s after %" PRIu64 " of %" PRIu64 " bytes",
				 n ? strerror(errno) : "EOF", r->bytes, want);
			return;
		}
		last = (int64_t)vmio_now_ns();
		if (refused_since && last - refused_since > r->refused_max_ns)
			r->refused_max_ns = last - refused_since;
		refused_since = 0;
		if (r->bytes + (uint64_t)n > want ||
		    memcmp(buf, pattern_at(r->bytes), (size_t)n)) {
			snprintf(r->error, sizeof(r->error),
				 "wrong or extra bytes after %" PRIu64,
				 r->bytes);
			return;
		}
		r->bytes += (uint64_t)n;
		r->reads++;
	}
	r->intact = 1;
}

/* The reverse direction of `vmio redirect UNIX-RECV:... VSOCK-CONNECT:...`
 * in a guest, which vmio does not relay (UNIX-RECV has no peer to send
 * to): the host's answer stays in vmio's vsock socket. This takes a copy
 * of that socket (pidfd_getfd, root in the guest) and reads the answer
 * from it, checking every byte, while vmio's sockmap still holds it. */
static int cmd_take(const struct opts *o)
{
	int64_t end = (int64_t)vmio_now_ns() + (int64_t)o->timeout_ms * 1000000;
	int pidfd = (int)syscall(SYS_pidfd_open, o->pid, 0), fd;
	struct take_result r;
	int64_t t0;

	if (pidfd < 0) {
		fprintf(stderr, "vmio-redirect-bench: take: pidfd_open %d: %s\n",
			(int)o->pid, strerror(errno));
		return 1;
	}
	while ((fd = take_vsock_of(pidfd)) < 0) {
		if ((int64_t)vmio_now_ns() > end || errno == EPERM) {
			fprintf(stderr, "vmio-redirect-bench: take: process %d "
				"holds no connected vsock stream: %s\n",
				(int)o->pid, strerror(errno));
			return 1;
		}
		usleep(10000);
	}
	close(pidfd);
	t0 = (int64_t)vmio_now_ns();
	take_run(fd, o->bytes, o->timeout_ms, &r);
	close(fd);
	printf("took bytes=%" PRIu64 " reads=%" PRIu64 " time=%.3f intact=%d "
	       "refused=%" PRIu64 " refused_max_ms=%.1f", r.bytes, r.reads,
	       (double)((int64_t)vmio_now_ns() - t0) / 1e9, r.intact,
	       r.refused, (double)r.refused_max_ns / 1e6);
	if (!r.intact)
		printf(" error=\"%s\"", r.error);
	printf("\n");
	return r.intact ? 0 : 1;
}

/* vsock:CID:PORT, relay's --to. */
static int parse_vsock(const char *text, struct opts *o)
{
	const char *colon;
	uint64_t cid, port;
	char num[16];

	if (strncmp(text, "vsock:", 6))
		return -1;
	text += 6;
	colon = strchr(text, ':');
	if (!colon || (size_t)(colon - text) >= sizeof(num))
		return -1;
	memcpy(num, text, (size_t)(colon - text));
	num[colon - text] = '\0';
	if (vmio_parse_u64(num, UINT32_MAX, &cid) ||
	    vmio_parse_u64(colon + 1, UINT32_MAX, &port))
		return -1;
	o->vsock_cid = (uint32_t)cid;
	o->vsock_port = (uint32_t)port;
	return 0;
}

/* ---- the command line ---- */

static int bad_usage(const char *what, const char *arg)
{
	fprintf(stderr, "vmio-redirect-bench: %s%s%s\n"
		"Try 'vmio-redirect-bench --help'.\n", what, arg ? ": " : "",
		arg ? arg : "");
	return 2;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "path", required_argument, NULL, 'p' },
		{ "sink", required_argument, NULL, 'p' },
		{ "to", required_argument, NULL, 't' },
		{ "bytes", required_argument, NULL, 'n' },
		{ "msg", required_argument, NULL, 'm' },
		{ "timeout", required_argument, NULL, 'T' },
		{ "streams", required_argument, NULL, 'S' },
		{ "term", no_argument, NULL, 'K' },
		{ "direct", no_argument, NULL, 'D' },
		{ "stall-after", required_argument, NULL, 'A' },
		{ "stall-ms", required_argument, NULL, 'W' },
		{ "from", required_argument, NULL, 'F' },
		{ "answer", required_argument, NULL, 'a' },
		{ "answer-chunk", required_argument, NULL, 'c' },
		{ "pid", required_argument, NULL, 'P' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct opts o = { .msg = 65536, .timeout_ms = 10000, .streams = 1,
			  .answer.chunk = 16 };
	const char *role;
	uint64_t v;
	int c;

	if (argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
		printf("%s", usage);
		return 0;
	}
	if (argc < 2)
		return bad_usage("a role is needed (sink, send, run, relay or take)",
				 NULL);
	role = argv[1];
	optind = 2;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+h", longopts, NULL)) != -1) {
		switch (c) {
		case 'h':
			printf("%s", usage);
			return 0;
		case 'p':
			o.path = optarg;
			break;
		case 't':
			if (!strcmp(role, "take")) {
		if (!o.pid || !o.bytes || optind != argc)
			return bad_usage("take takes --pid PID --bytes N", NULL);
		return cmd_take(&o);
	}
	if (!strcmp(role, "relay")) {
				if (parse_vsock(optarg, &o))
					return bad_usage("--to: not vsock:CID:PORT",
							 optarg);
				o.have_to = true;
				break;
			}
			if (parse_target(optarg, &o.to))
				return bad_usage("--to: not udg:PATH, ust:PATH or tcp:PORT",
						 optarg);
			o.have_to = true;
			break;
		case 'n':
			if (vmio_parse_u64(optarg, UINT64_MAX, &o.bytes))
				return bad_usage("--bytes: not a size", optarg);
			break;
		case 'm':
			if (vmio_parse_u64(optarg, MAX_MSG, &o.msg) || !o.msg)
				return bad_usage("--msg: not 1 to 1M", optarg);
			break;
		case 'T':
			if (vmio_parse_u64(optarg, 3600, &v) || !v)
				return bad_usage("--timeout: not 1 to 3600 seconds",
						 optarg);
			o.timeout_ms = (int)v * 1000;
			break;
		case 'S':
			if (vmio_parse_u64(optarg, MAX_STREAMS, &v) || !v)
				return bad_usage("--streams: not 1 to 16", optarg);
			o.streams = (unsigned)v;
			break;
		case 'K':
			o.term = true;
			break;
		case 'D':
			o.direct = true;
			break;
		case 'A':
			if (vmio_parse_u64(optarg, UINT64_MAX, &o.stall.after))
				return bad_usage("--stall-after: not a size", optarg);
			break;
		case 'W':
			if (vmio_parse_u64(optarg, 3600000, &v))
				return bad_usage("--stall-ms: not 0 to 3600000",
						 optarg);
			o.stall.ms = (int)v;
			break;
		case 'a':
			if (vmio_parse_u64(optarg, UINT64_MAX, &o.answer.bytes))
				return bad_usage("--answer: not a size", optarg);
			break;
		case 'c':
			if (vmio_parse_u64(optarg, MAX_MSG, &o.answer.chunk) ||
			    !o.answer.chunk)
				return bad_usage("--answer-chunk: not 1 to 1M",
						 optarg);
			break;
		case 'P':
			if (vmio_parse_u64(optarg, INT32_MAX, &v) || !v)
				return bad_usage("--pid: not a process id", optarg);
			o.pid = (pid_t)v;
			break;
		case 'F':
			if (strncmp(optarg, "udg:", 4) || !optarg[4])
				return bad_usage("--from: not udg:PATH", optarg);
			o.from = optarg + 4;
			break;
		default:
			return bad_usage("unknown option or missing value",
					 argv[optind - 1]);
		}
	}
	signal(SIGPIPE, SIG_IGN);
	pattern_init();
	if (!strcmp(role, "sink")) {
		if (!o.path || optind != argc)
			return bad_usage("sink takes --path PATH", NULL);
		return cmd_sink(&o);
	}
	if (!strcmp(role, "send")) {
		if (!o.have_to || !o.bytes || optind != argc)
			return bad_usage("send takes --to KIND:WHERE --bytes N",
					 NULL);
		return cmd_send(&o);
	}
	if (!strcmp(role, "take")) {
		if (!o.pid || !o.bytes || optind != argc)
			return bad_usage("take takes --pid PID --bytes N", NULL);
		return cmd_take(&o);
	}
	if (!strcmp(role, "relay")) {
		if (!o.from || !o.have_to || optind != argc)
			return bad_usage("relay takes --from udg:PATH --to vsock:CID:PORT",
					 NULL);
		return cmd_relay(&o);
	}
	if (!strcmp(role, "run") && o.direct) {
		if (!o.have_to || !o.bytes || optind != argc || o.streams > 1)
			return bad_usage("run --direct takes --to KIND:WHERE "
					 "--bytes N, and no relay", NULL);
		return cmd_run_direct(&o);
	}
	if (!strcmp(role, "run")) {
		if (!o.path || !o.have_to || !o.bytes || optind >= argc)
			return bad_usage("run takes --sink PATH --to KIND:WHERE "
					 "--bytes N -- RELAY...", NULL);
		if (o.streams > 1 && o.to.kind == KIND_UDG)
			return bad_usage("--streams: datagrams have no "
					 "connections to count", NULL);
		o.relay = argv + optind;
		return cmd_run(&o);
	}
	return bad_usage("unknown role", role);
}
