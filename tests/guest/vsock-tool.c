/*
 * vsock-tool: the guest's end of the vsock guest tests (busybox has no
 * AF_VSOCK). Built static, it runs in the test guest only: on a host,
 * AF_VSOCK reaches whatever hypervisor the host itself runs under.
 *
 *   vsock-tool listen PORT [options]
 *   vsock-tool connect CID PORT [options] [--retry SECS]
 *   vsock-tool unix-listen PATH [options]
 *   vsock-tool unix-connect PATH [options] [--retry SECS]
 *   vsock-tool tcp-listen PORT [options]
 *   vsock-tool tcp-connect IPV4 PORT [options] [--retry SECS]
 *   vsock-tool seq-connect CID PORT [--timeout S]  seqpacket: seq_client
 *   vsock-tool seq-listen PORT [--timeout S]       seqpacket: one seq_echo
 *   vsock-tool fnv BYTES          checksum of the first BYTES of the pattern
 *   vsock-tool cid                the guest's own CID (from the device config)
 *   vsock-tool nic-stats IFACE    the NIC driver's counters (ethtool -S: busybox
 *                                 has no ethtool), one "name value" a line
 *
 * The unix modes are the guest-side peers of a relay running in the guest
 * (`vmio redirect` between vsock and unix sockets): the same engine on
 * both ends of the relay, so its result lines compare with the host's.
 * The tcp modes are both ends of the virtio-net guest test (net_test.sh):
 * in the guest, and on the host inside the test's network namespace.
 *
 * Output and modes: see peer-engine.h. A failed connect prints
 *   vsock-tool: connect cid=C port=P result=error errno=ECONNRESET ms=N
 * (path=PATH for unix) and exits 3. Exit 0: every connection did what its
 * mode promised; 1: one did not; 2: usage error or time limit.
 */
#include <arpa/inet.h>
#include <linux/ethtool.h>
#include <linux/sockios.h>
#include <linux/vm_sockets.h>
#include <net/if.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/ioctl.h>

#include "peer-engine.h"
#include "seq-engine.h"

static const char *prog = "vsock-tool";

static void usage(void)
{
	fprintf(stderr, "usage: %s listen PORT [options]\n"
			"       %s connect CID PORT [options] [--retry SECS]\n"
			"       %s unix-listen PATH [options]\n"
			"       %s unix-connect PATH [options] [--retry SECS]\n"
			"       %s tcp-listen PORT [options]\n"
			"       %s tcp-connect IPV4 PORT [options] [--retry SECS]\n"
			"       %s seq-connect CID PORT [--timeout S]\n"
			"       %s seq-listen PORT [--timeout S]\n"
			"       %s fnv BYTES\n"
			"       %s cid\n"
			"       %s nic-stats IFACE\n"
			"options:\n" PE_OPTS_HELP, prog, prog, prog, prog, prog, prog, prog, prog, prog, prog, prog);
	exit(2);
}

/* Connects once; returns the fd or -errno. */
static int dial(const struct sockaddr *a, socklen_t len)
{
	int fd = socket(a->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, a, len) < 0) {
		int e = errno;
		close(fd);
		return -e;
	}
	return fd;
}

/* Where a connect or listen goes: the socket address, and its key=value
 * text for the result lines. */
struct target {
	struct sockaddr_storage sa;
	socklen_t len;
	char text[160];
};

static void vsock_target(struct target *t, unsigned cid, unsigned port)
{
	struct sockaddr_vm *a = (struct sockaddr_vm *)&t->sa;
	*a = (struct sockaddr_vm){ .svm_family = AF_VSOCK, .svm_cid = cid, .svm_port = port };
	t->len = sizeof(*a);
	snprintf(t->text, sizeof(t->text), "cid=%u port=%u", cid, port);
}

static void unix_target(struct target *t, const char *path)
{
	pe_unix_addr((struct sockaddr_un *)&t->sa, path, prog);
	t->len = sizeof(struct sockaddr_un);
	snprintf(t->text, sizeof(t->text), "path=%s", path);
}

/* addr is NULL for INADDR_ANY; false if it is not an IPv4 address. */
static bool tcp_target(struct target *t, const char *addr, unsigned port)
{
	struct sockaddr_in *a = (struct sockaddr_in *)&t->sa;
	*a = (struct sockaddr_in){ .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	t->len = sizeof(*a);
	snprintf(t->text, sizeof(t->text), "addr=%s port=%u", addr ? addr : "any", port);
	return !addr || inet_pton(AF_INET, addr, &a->sin_addr) == 1;
}

/* A stream listener on t; the fd, or -1 with errno set. */
static int listen_target(const struct target *t)
{
	int one = 1, fd = socket(t->sa.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd >= 0 && ((t->sa.ss_family == AF_INET &&
			 setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0) ||
			bind(fd, (const struct sockaddr *)&t->sa, t->len) < 0 || listen(fd, 128) < 0)) {
		int e = errno;
		close(fd);
		fd = -1;
		errno = e;
	}
	return fd;
}

/* One SIOCETHTOOL request on iface; 0 or -1 with errno set. */
static int ethtool(int fd, const char *iface, void *cmd)
{
	struct ifreq ifr;
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", iface);
	ifr.ifr_data = cmd;
	return ioctl(fd, SIOCETHTOOL, &ifr);
}

/* nic-stats IFACE: what `ethtool -S IFACE` prints. */
static int nic_stats(const char *iface)
{
	struct ethtool_drvinfo info = { .cmd = ETHTOOL_GDRVINFO };
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || ethtool(fd, iface, &info) < 0) {
		printf("%s: nic-stats %s result=error errno=%s\n", prog, iface, pe_errname(errno));
		return 1;
	}
	uint32_t n = info.n_stats;
	struct ethtool_gstrings *names = calloc(1, sizeof(*names) + (size_t)n * ETH_GSTRING_LEN);
	struct ethtool_stats *vals = calloc(1, sizeof(*vals) + (size_t)n * sizeof(uint64_t));
	if (!names || !vals)
		return 2;
	*names = (struct ethtool_gstrings){ .cmd = ETHTOOL_GSTRINGS, .string_set = ETH_SS_STATS, .len = n };
	*vals = (struct ethtool_stats){ .cmd = ETHTOOL_GSTATS, .n_stats = n };
	if (ethtool(fd, iface, names) < 0 || ethtool(fd, iface, vals) < 0) {
		printf("%s: nic-stats %s result=error errno=%s\n", prog, iface, pe_errname(errno));
		return 1;
	}
	for (uint32_t i = 0; i < n; i++)
		printf("%.*s %" PRIu64 "\n", ETH_GSTRING_LEN, (char *)names->data + i * ETH_GSTRING_LEN,
		       (uint64_t)vals->data[i]);
	free(names);
	free(vals);
	close(fd);
	return 0;
}

/* seq-connect CID PORT / seq-listen PORT: seqpacket (seq-engine.h). */
static int seq_main(int pos, char **posv, double timeout)
{
	uint64_t cid = 0, port;
	struct target t;
	int fd;

	if (!pe_parse_size(posv[pos - 1], &port) || (pos == 3 && !pe_parse_size(posv[1], &cid)))
		usage();
	vsock_target(&t, pos == 3 ? (unsigned)cid : VMADDR_CID_ANY, (unsigned)port);
	fd = socket(AF_VSOCK, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (pos == 3) {
		if (fd < 0 || connect(fd, (struct sockaddr *)&t.sa, t.len) < 0) {
			printf("%s: seq connect %s result=error errno=%s\n", prog, t.text,
			       pe_errname(errno));
			return 3;
		}
		return seq_client(fd, prog, "g2h", timeout);
	}
	if (fd < 0 || bind(fd, (struct sockaddr *)&t.sa, t.len) < 0 || listen(fd, 4) < 0) {
		printf("%s: seq listen %s result=error errno=%s\n", prog, t.text, pe_errname(errno));
		return 2;
	}
	printf("%s: listening seq %s\n", prog, t.text);
	seq_setup_fd(fd, timeout);
	int c = accept(fd, NULL, NULL);
	if (c < 0) {
		printf("%s: seq accept %s result=error errno=%s\n", prog, t.text, pe_errname(errno));
		return 1;
	}
	return seq_echo(c, prog, "h2g-echo", timeout);
}

int main(int argc, char **argv)
{
	struct pe_opts o = { .mode = PE_SINK, .expect = -1, .prog = prog };
	int count = 1;
	double timeout = 60, retry = 0;
	uint64_t x;
	char *posv[3];

	signal(SIGPIPE, SIG_IGN);
	setvbuf(stdout, NULL, _IOLBF, 0);
	int pos = pe_parse_cmdline(argc, argv, &o, &count, &timeout, &retry, posv);
	if (pos < 0)
		usage();
	if (pe_fnv_command(pos, posv))
		return 0;

	if (pos == 1 && !strcmp(posv[0], "cid")) {
		unsigned int cid = 0;
		int fd = open("/dev/vsock", O_RDONLY | O_CLOEXEC);
		if (fd < 0 || ioctl(fd, IOCTL_VM_SOCKETS_GET_LOCAL_CID, &cid) < 0) {
			printf("%s: cid result=error errno=%s\n", prog, pe_errname(errno));
			return 1;
		}
		printf("%u\n", cid);
		return 0;
	}

	if (pos == 2 && !strcmp(posv[0], "nic-stats"))
		return nic_stats(posv[1]);

	if ((pos == 3 && !strcmp(posv[0], "seq-connect")) ||
	    (pos == 2 && !strcmp(posv[0], "seq-listen")))
		return seq_main(pos, posv, timeout);

	struct pe_run r = { .lfd = -1, .cap = count > 0 ? count : 16 };
	r.conns = calloc((size_t)r.cap, sizeof(*r.conns));
	if (!r.conns)
		return 2;
	double start = pe_now();
	r.deadline = start + timeout;

	struct target t;
	if (pos == 2 && (!strcmp(posv[0], "listen") || !strcmp(posv[0], "unix-listen") ||
			 !strcmp(posv[0], "tcp-listen"))) {
		if (!strcmp(posv[0], "unix-listen")) {
			unix_target(&t, posv[1]);
			r.lfd = pe_unix_listen(posv[1], 128, prog);
		} else if (pe_parse_size(posv[1], &x) && x <= 65535 && !strcmp(posv[0], "tcp-listen")) {
			tcp_target(&t, NULL, (unsigned)x);
			r.lfd = listen_target(&t);
		} else if (pe_parse_size(posv[1], &x) && !strcmp(posv[0], "listen")) {
			vsock_target(&t, VMADDR_CID_ANY, (unsigned)x);
			/* The text names the port alone, as before. */
			snprintf(t.text, sizeof(t.text), "port=%u", (unsigned)x);
			r.lfd = listen_target(&t);
		} else {
			usage();
		}
		if (r.lfd < 0) {
			printf("%s: listen %s result=error errno=%s\n", prog, t.text,
			       pe_errname(errno));
			return 2;
		}
		r.want = count;
		printf("%s: listening %s\n", prog, t.text);
		return pe_loop(&r, &o);
	}
	uint64_t cid, port;
	if (pos == 3 && !strcmp(posv[0], "connect") && pe_parse_size(posv[1], &cid) &&
	    pe_parse_size(posv[2], &port))
		vsock_target(&t, (unsigned)cid, (unsigned)port);
	else if (pos == 2 && !strcmp(posv[0], "unix-connect"))
		unix_target(&t, posv[1]);
	else if (!(pos == 3 && !strcmp(posv[0], "tcp-connect") && pe_parse_size(posv[2], &port) &&
		   port <= 65535 && tcp_target(&t, posv[1], (unsigned)port)))
		usage();
	if (count < 1)
		usage();
	/* All connections are established before any data flows: with
	 * --count N they are N concurrent streams. */
	double cmax = 0;
	for (int i = 0; i < count; i++) {
		int fd;
		double t0;
		for (;;) {
			t0 = pe_now();
			fd = dial((struct sockaddr *)&t.sa, t.len);
			if (fd >= 0 || pe_now() - start >= retry)
				break;
			usleep(100 * 1000);
		}
		double ms = (pe_now() - t0) * 1e3;
		if (fd < 0) {
			printf("%s: connect %s conn=%d result=error errno=%s ms=%.0f\n", prog, t.text, i,
			       pe_errname(-fd), ms);
			return 3;
		}
		cmax = ms > cmax ? ms : cmax;
		pe_conn_init(&r.conns[r.n++], fd, i, &o);
	}
	if (count > 1)
		printf("%s: connected %d to %s in %.0f ms (slowest %.0f ms)\n", prog, count, t.text,
		       (pe_now() - start) * 1e3, cmax);
	return pe_loop(&r, &o);
}
