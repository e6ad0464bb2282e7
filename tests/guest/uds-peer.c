/*
 * uds-peer: the host's end of the vsock guest tests, on the unix sockets
 * of the hybrid vsock scheme that `vmio vsock` implements.
 *
 *   uds-peer listen PATH [options]
 *       a host service: the backend connects here (PATH is <uds-path>_PORT)
 *       when the guest connects to CID 2 port PORT
 *   uds-peer connect UDS_PATH PORT [options] [--retry SECS]
 *       connects to the backend's uds-path, writes "CONNECT PORT\n" and
 *       waits for "OK <n>\n"; the backend closing the socket instead (no
 *       listener in the guest) is retried for up to SECS seconds
 *   uds-peer seq-listen PATH [--timeout S]
 *       a seqpacket host service at PATH: echoes the messages of one
 *       connection (seq-engine.h)
 *   uds-peer seq-connect UDS_PATH PORT [--timeout S] [--retry SECS]
 *       connects to the backend's seqpacket listener, UDS_PATH.seqpacket,
 *       sends the message "CONNECT PORT\n", waits for the message
 *       "OK <n>\n", then runs seq_client against an echo in the guest
 *   uds-peer trickle UDS_PATH PORT [trickle options]
 *       connects to the backend's uds-path (UDS_PATH.seqpacket with
 *       --seqpacket) as connect and seq-connect do, then writes the
 *       trickle (trickle-engine.h) to a guest that holds it unread
 *   uds-peer fnv BYTES
 *
 * Modes, output and exit codes as vsock-tool's (peer-engine.h), prefix
 * "uds-peer".
 */
#include <signal.h>

#include "peer-engine.h"
#include "seq-engine.h"
#include "trickle-engine.h"

static const char *prog = "uds-peer";

static void usage(void)
{
	fprintf(stderr, "usage: %s listen PATH [options]\n"
			"       %s connect UDS_PATH PORT [options] [--retry SECS]\n"
			"       %s seq-listen PATH [--timeout S]\n"
			"       %s seq-connect UDS_PATH PORT [--timeout S] [--retry SECS]\n"
			"       %s trickle UDS_PATH PORT [trickle options]\n"
			"       %s fnv BYTES\n"
			"options:\n" PE_OPTS_HELP "trickle options:\n" TRICKLE_OPTS_HELP,
		prog, prog, prog, prog, prog, prog);
	exit(2);
}

/* Connects a unix socket of this type to path: the fd, or -1 with *why
 * the errno's name. */
static int dial_unix(const char *path, int type, const char **why)
{
	struct sockaddr_un a;
	pe_unix_addr(&a, path, prog);
	int fd = socket(AF_UNIX, type | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		*why = pe_errname(errno);
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

/*
 * One hybrid-vsock connect: returns the fd with the stream ready, or -1
 * with *why saying what happened (errno name, or "closed" when the backend
 * closed the socket before OK: the guest refused).
 */
static int hconnect(const char *uds, unsigned port, double deadline, char *okline, size_t oklen,
		    const char **why)
{
	int fd = dial_unix(uds, SOCK_STREAM, why);
	if (fd < 0)
		return -1;
	char line[64];
	int n = snprintf(line, sizeof(line), "CONNECT %u\n", port);
	if (write(fd, line, (size_t)n) != n) {
		*why = pe_errname(errno);
		close(fd);
		return -1;
	}
	/* Byte by byte: what follows the OK line is the stream's data. */
	size_t len = 0;
	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		int ms = (int)((deadline - pe_now()) * 1e3);
		if (ms <= 0 || poll(&p, 1, ms) <= 0) {
			*why = "timeout-waiting-for-OK";
			close(fd);
			return -1;
		}
		char ch;
		ssize_t k = read(fd, &ch, 1);
		if (k <= 0) {
			*why = k == 0 ? "closed" : pe_errname(errno);
			close(fd);
			return -1;
		}
		if (ch == '\n')
			break;
		if (len + 1 < oklen)
			okline[len++] = ch;
	}
	okline[len] = 0;
	if (strncmp(okline, "OK ", 3)) {
		*why = "bad-reply";
		close(fd);
		return -1;
	}
	return fd;
}

/* The seqpacket hybrid connect: one message each way. Returns the fd, or
 * -1 with *why set ("closed": the guest refused). */
static int seq_hconnect(const char *uds, unsigned port, double timeout, const char **why)
{
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)], line[64];
	int n = snprintf(path, sizeof(path), "%s.seqpacket", uds);
	if (n < 0 || (size_t)n >= sizeof(path)) {
		*why = "path-too-long";
		return -1;
	}
	int fd = dial_unix(path, SOCK_SEQPACKET, why);
	if (fd < 0)
		return -1;
	seq_setup_fd(fd, timeout);
	n = snprintf(line, sizeof(line), "CONNECT %u\n", port);
	ssize_t k = send(fd, line, (size_t)n, MSG_NOSIGNAL);
	if (k == n)
		k = seq_recv(fd, (unsigned char *)line, sizeof(line) - 1);
	if (k <= 0 || k >= (ssize_t)sizeof(line) || strncmp(line, "OK ", 3) ||
	    line[k - 1] != '\n') {
		*why = k == 0 ? "closed" : k < 0 ? pe_errname(errno) : "bad-reply";
		close(fd);
		return -1;
	}
	return fd;
}

static int seq_main(int pos, char **posv, double timeout, double retry)
{
	uint64_t port;
	const char *why = "?";
	double start = pe_now();
	int fd;

	if (pos == 2) {
		int lfd = pe_unix_listen_type(posv[1], SOCK_SEQPACKET, 4, prog);
		if (lfd < 0) {
			printf("%s: seq listen path=%s result=error errno=%s\n", prog, posv[1],
			       pe_errname(errno));
			return 2;
		}
		printf("%s: listening seq path=%s\n", prog, posv[1]);
		seq_setup_fd(lfd, timeout);
		fd = accept(lfd, NULL, NULL);
		if (fd < 0) {
			printf("%s: seq accept result=error errno=%s\n", prog, pe_errname(errno));
			return 1;
		}
		return seq_echo(fd, prog, "g2h-echo", timeout);
	}
	if (!pe_parse_size(posv[2], &port))
		usage();
	while ((fd = seq_hconnect(posv[1], (unsigned)port, timeout, &why)) < 0 &&
	       pe_now() - start < retry)
		usleep(100 * 1000);
	if (fd < 0) {
		printf("%s: seq connect port=%u result=error why=%s\n", prog, (unsigned)port, why);
		return 3;
	}
	return seq_client(fd, prog, "h2g", timeout);
}

/* trickle UDS_PATH PORT [options]: the hybrid connect of either type,
 * retried while the guest has not listened yet, then trickle_write. */
static int trickle_main(int argc, char **argv)
{
	struct trickle_opts o;
	uint64_t port;
	const char *why = "?";
	char ok[64];
	int fd;

	if (argc < 4 || !pe_parse_size(argv[3], &port) || !trickle_parse(argc, argv, 4, &o))
		usage();
	double start = pe_now();
	for (;;) {
		fd = o.seqpacket ? seq_hconnect(argv[2], (unsigned)port, o.timeout, &why)
				 : hconnect(argv[2], (unsigned)port, start + o.timeout, ok, sizeof(ok), &why);
		if (fd >= 0 || pe_now() - start >= o.retry)
			break;
		usleep(100 * 1000);
	}
	if (fd < 0) {
		printf("%s: trickle %s port=%u result=error why=%s\n", prog, trickle_kind(&o),
		       (unsigned)port, why);
		return 3;
	}
	return trickle_write(fd, prog, &o);
}

int main(int argc, char **argv)
{
	struct pe_opts o = { .mode = PE_SINK, .expect = -1, .prog = prog };
	int count = 1;
	double timeout = 60, retry = 0;
	char *posv[3];

	signal(SIGPIPE, SIG_IGN);
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc > 1 && !strcmp(argv[1], "trickle"))
		return trickle_main(argc, argv);
	int pos = pe_parse_cmdline(argc, argv, &o, &count, &timeout, &retry, posv);
	if (pos < 0)
		usage();
	if (pe_fnv_command(pos, posv))
		return 0;

	if ((pos == 3 && !strcmp(posv[0], "seq-connect")) ||
	    (pos == 2 && !strcmp(posv[0], "seq-listen")))
		return seq_main(pos, posv, timeout, retry);

	struct pe_run r = { .lfd = -1, .cap = count > 0 ? count : 16 };
	r.conns = calloc((size_t)r.cap, sizeof(*r.conns));
	if (!r.conns)
		return 2;
	double start = pe_now();
	r.deadline = start + timeout;

	if (pos == 2 && !strcmp(posv[0], "listen")) {
		r.lfd = pe_unix_listen(posv[1], 256, prog);
		if (r.lfd < 0) {
			printf("%s: listen path=%s result=error errno=%s\n", prog, posv[1],
			       pe_errname(errno));
			return 2;
		}
		r.want = count;
		printf("%s: listening path=%s\n", prog, posv[1]);
		return pe_loop(&r, &o);
	}
	uint64_t port;
	if (pos != 3 || strcmp(posv[0], "connect") || !pe_parse_size(posv[2], &port) || count < 1)
		usage();
	double cmax = 0;
	for (int i = 0; i < count; i++) {
		int fd;
		double t0;
		const char *why = "?";
		char ok[64];
		int tries = 0;
		for (;;) {
			t0 = pe_now();
			tries++;
			fd = hconnect(posv[1], (unsigned)port, r.deadline, ok, sizeof(ok), &why);
			if (fd >= 0 || pe_now() - start >= retry)
				break;
			usleep(100 * 1000);
		}
		double ms = (pe_now() - t0) * 1e3;
		if (fd < 0) {
			printf("%s: connect port=%u conn=%d result=error why=%s ms=%.0f tries=%d\n", prog,
			       (unsigned)port, i, why, ms, tries);
			return 3;
		}
		if (count == 1 || o.verbose)
			printf("%s: connect port=%u conn=%d reply=\"%s\" ms=%.0f tries=%d\n", prog,
			       (unsigned)port, i, ok, ms, tries);
		cmax = ms > cmax ? ms : cmax;
		pe_conn_init(&r.conns[r.n++], fd, i, &o);
	}
	if (count > 1)
		printf("%s: connected %d to port=%u in %.0f ms (slowest %.0f ms)\n", prog, count,
		       (unsigned)port, (pe_now() - start) * 1e3, cmax);
	return pe_loop(&r, &o);
}
