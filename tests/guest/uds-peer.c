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
 *   uds-peer fnv BYTES
 *
 * Modes, output and exit codes as vsock-tool's (peer-engine.h), prefix
 * "uds-peer".
 */
#include <signal.h>

#include "peer-engine.h"

static const char *prog = "uds-peer";

static void usage(void)
{
	fprintf(stderr, "usage: %s listen PATH [options]\n"
			"       %s connect UDS_PATH PORT [options] [--retry SECS]\n"
			"       %s fnv BYTES\n"
			"options:\n" PE_OPTS_HELP, prog, prog, prog);
	exit(2);
}

/*
 * One hybrid-vsock connect: returns the fd with the stream ready, or -1
 * with *why saying what happened (errno name, or "closed" when the backend
 * closed the socket before OK: the guest refused).
 */
static int hconnect(const char *uds, unsigned port, double deadline, char *okline, size_t oklen,
		    const char **why)
{
	struct sockaddr_un a;
	pe_unix_addr(&a, uds, prog);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		*why = pe_errname(errno);
		if (fd >= 0)
			close(fd);
		return -1;
	}
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

int main(int argc, char **argv)
{
	struct pe_opts o = { .mode = PE_SINK, .expect = -1, .prog = prog };
	int count = 1, pos = 0;
	double timeout = 60, retry = 0;
	uint64_t x;
	char *posv[3];

	signal(SIGPIPE, SIG_IGN);
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (int i = 1; i < argc;) {
		if (!strcmp(argv[i], "--retry") && i + 1 < argc && pe_parse_size(argv[i + 1], &x)) {
			retry = (double)x;
			i += 2;
			continue;
		}
		int k = pe_parse_opt(argc, argv, i, &o, &count, &timeout);
		if (k < 0 || (k == 0 && (argv[i][0] == '-' || pos == 3)))
			usage();
		if (k == 0)
			posv[pos++] = argv[i++];
		else
			i += k;
	}
	if (pos == 2 && !strcmp(posv[0], "fnv") && pe_parse_size(posv[1], &x)) {
		printf("%016" PRIx64 "\n", pe_pattern_fnv(x));
		return 0;
	}

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
