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
 *   vsock-tool trickle-listen PORT [trickle options] one trickle_read
 *                                 (trickle-engine.h), stream or seqpacket
 *   vsock-tool fnv BYTES          checksum of the first BYTES of the pattern
 *   vsock-tool cid                the guest's own CID (from the device config)
 *   vsock-tool nic-stats IFACE    the NIC driver's counters (ethtool -S: busybox
 *                                 has no ethtool), one "name value" a line
 *   vsock-tool nic-queues IFACE   the NIC's packets and bytes per queue, from
 *                                 whatever the running kernel reports them in,
 *                                 as "rx_queue_N_packets V" ("tx_...", "_bytes")
 *                                 lines and a "source NAME" line (below)
 *   vsock-tool nic-channels IFACE N  the NIC's combined channels set to N
 *                                 (ethtool -L IFACE combined N)
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
#include <linux/genetlink.h>
#include <linux/netlink.h>
#include <linux/sockios.h>
#include <linux/vm_sockets.h>
#include <net/if.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/ioctl.h>

#include "peer-engine.h"
#include "seq-engine.h"
#include "trickle-engine.h"

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
			"       %s trickle-listen PORT [trickle options]\n"
			"       %s fnv BYTES\n"
			"       %s cid\n"
			"       %s nic-stats IFACE\n"
			"       %s nic-queues IFACE\n"
			"       %s nic-channels IFACE N\n"
			"options:\n" PE_OPTS_HELP "trickle options:\n" TRICKLE_OPTS_HELP,
		prog, prog, prog, prog, prog, prog, prog, prog, prog, prog, prog, prog, prog, prog);
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

/* Per-queue counters, wherever the kernel keeps them. Linux 6.1's
 * virtio_net lists them in ethtool -S as rx_queue_N_packets; from 6.10 on
 * it reports per-queue packets and bytes only through the netdev generic
 * netlink family's QSTATS_GET (ethtool -S keeps drops, kicks and XDP
 * counts, as rx0_drops...). So: netdev qstats first, where the family has
 * it and the driver answers; the ethtool names (either form) otherwise. */
enum { Q_PACKETS, Q_BYTES, Q_FIELDS };
#define Q_MAX 64
struct queue_counts {
	bool seen[2][Q_MAX]; /* [0] rx, [1] tx */
	uint64_t v[2][Q_MAX][Q_FIELDS];
};

/* From include/uapi/linux/netdev.h (Linux 6.9+), which Debian 12's
 * linux-libc-dev (6.1) does not have. */
#define NETDEV_FAMILY "netdev"
#define NETDEV_CMD_QSTATS_GET_ 12
#define NETDEV_A_QSTATS_IFINDEX_ 1
#define NETDEV_A_QSTATS_QUEUE_TYPE_ 2
#define NETDEV_A_QSTATS_QUEUE_ID_ 3
#define NETDEV_A_QSTATS_SCOPE_ 4
#define NETDEV_A_QSTATS_RX_PACKETS_ 8
#define NETDEV_A_QSTATS_RX_BYTES_ 9
#define NETDEV_A_QSTATS_TX_PACKETS_ 10
#define NETDEV_A_QSTATS_TX_BYTES_ 11
#define NETDEV_QSTATS_SCOPE_QUEUE_ 1

static void nl_put_attr(struct nlmsghdr *h, uint16_t type, const void *data, uint16_t len)
{
	struct nlattr *a = (struct nlattr *)((char *)h + NLMSG_ALIGN(h->nlmsg_len));
	a->nla_type = type;
	a->nla_len = (uint16_t)(NLA_HDRLEN + len);
	memcpy((char *)a + NLA_HDRLEN, data, len);
	h->nlmsg_len = NLMSG_ALIGN(h->nlmsg_len) + NLA_ALIGN(a->nla_len);
}

/* An unsigned attribute of 1, 2, 4 or 8 bytes (netlink's "uint"). */
static uint64_t nl_uint(const struct nlattr *a)
{
	const void *p = (const char *)a + NLA_HDRLEN;
	switch (a->nla_len - NLA_HDRLEN) {
	case 1: return *(const uint8_t *)p;
	case 2: { uint16_t v; memcpy(&v, p, 2); return v; }
	case 4: { uint32_t v; memcpy(&v, p, 4); return v; }
	case 8: { uint64_t v; memcpy(&v, p, 8); return v; }
	default: return 0;
	}
}

/* Sends the request in buf and walks every reply message (a dump's too)
 * through cb, until DONE; 0, or -errno (from an NLMSG_ERROR too). */
static int nl_talk(int fd, struct nlmsghdr *req, void (*cb)(const struct nlmsghdr *, void *), void *arg)
{
	struct sockaddr_nl k = { .nl_family = AF_NETLINK };
	if (sendto(fd, req, req->nlmsg_len, 0, (struct sockaddr *)&k, sizeof(k)) < 0)
		return -errno;
	static char buf[65536];
	for (;;) {
		ssize_t n = recv(fd, buf, sizeof(buf), 0);
		if (n < 0)
			return -errno;
		for (struct nlmsghdr *h = (struct nlmsghdr *)buf; NLMSG_OK(h, (size_t)n); h = NLMSG_NEXT(h, n)) {
			if (h->nlmsg_type == NLMSG_DONE)
				return 0;
			if (h->nlmsg_type == NLMSG_ERROR) {
				const struct nlmsgerr *e = NLMSG_DATA(h);
				if (e->error)
					return e->error;
				if (!(req->nlmsg_flags & NLM_F_DUMP))
					return 0;
				continue;
			}
			cb(h, arg);
			/* A dump ends at DONE only: its messages need not carry
			 * NLM_F_MULTI (genlmsg_iput() in 6.12's netdev family
			 * sets no flag). */
			if (!(req->nlmsg_flags & NLM_F_DUMP))
				return 0;
		}
	}
}

/* The attributes of a generic netlink message, by type (0 if absent). */
static void genl_attrs(const struct nlmsghdr *h, const struct nlattr **tb, int max)
{
	memset(tb, 0, sizeof(*tb) * (size_t)(max + 1));
	const char *p = (const char *)NLMSG_DATA(h) + GENL_HDRLEN;
	int left = (int)h->nlmsg_len - NLMSG_HDRLEN - GENL_HDRLEN;
	while (left >= NLA_HDRLEN) {
		const struct nlattr *a = (const struct nlattr *)p;
		if (a->nla_len < NLA_HDRLEN || a->nla_len > left)
			break;
		int t = a->nla_type & NLA_TYPE_MASK;
		if (t <= max)
			tb[t] = a;
		p += NLA_ALIGN(a->nla_len);
		left -= NLA_ALIGN(a->nla_len);
	}
}

static void family_cb(const struct nlmsghdr *h, void *arg)
{
	const struct nlattr *tb[CTRL_ATTR_MAX + 1];
	genl_attrs(h, tb, CTRL_ATTR_MAX);
	if (tb[CTRL_ATTR_FAMILY_ID])
		*(int *)arg = (int)nl_uint(tb[CTRL_ATTR_FAMILY_ID]);
}

struct qstats_arg {
	unsigned ifindex;
	struct queue_counts *q;
	int entries;
};

static void qstats_cb(const struct nlmsghdr *h, void *arg)
{
	struct qstats_arg *qa = arg;
	const struct nlattr *tb[NETDEV_A_QSTATS_TX_BYTES_ + 1];
	genl_attrs(h, tb, NETDEV_A_QSTATS_TX_BYTES_);
	if (!tb[NETDEV_A_QSTATS_IFINDEX_] || nl_uint(tb[NETDEV_A_QSTATS_IFINDEX_]) != qa->ifindex ||
	    !tb[NETDEV_A_QSTATS_QUEUE_TYPE_] || !tb[NETDEV_A_QSTATS_QUEUE_ID_])
		return;
	uint64_t type = nl_uint(tb[NETDEV_A_QSTATS_QUEUE_TYPE_]), id = nl_uint(tb[NETDEV_A_QSTATS_QUEUE_ID_]);
	if (type > 1 || id >= Q_MAX)
		return;
	int pk = type ? NETDEV_A_QSTATS_TX_PACKETS_ : NETDEV_A_QSTATS_RX_PACKETS_;
	int by = type ? NETDEV_A_QSTATS_TX_BYTES_ : NETDEV_A_QSTATS_RX_BYTES_;
	if (!tb[pk])
		return;
	qa->q->seen[type][id] = true;
	qa->q->v[type][id][Q_PACKETS] = nl_uint(tb[pk]);
	qa->q->v[type][id][Q_BYTES] = tb[by] ? nl_uint(tb[by]) : 0;
	qa->entries++;
}

/* Per-queue counters from netdev's QSTATS_GET; the number of queues found
 * (0: no such family, command or driver support), or -errno. */
static int queues_from_qstats(const char *iface, struct queue_counts *q)
{
	unsigned ifindex = if_nametoindex(iface);
	if (!ifindex)
		return -errno;
	int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_GENERIC);
	if (fd < 0)
		return -errno;
	union {
		struct nlmsghdr h;
		char b[256];
	} req;
	memset(&req, 0, sizeof(req));
	struct genlmsghdr g = { .cmd = CTRL_CMD_GETFAMILY, .version = 1 };
	req.h = (struct nlmsghdr){ .nlmsg_len = NLMSG_LENGTH(GENL_HDRLEN), .nlmsg_type = GENL_ID_CTRL,
				   .nlmsg_flags = NLM_F_REQUEST, .nlmsg_seq = 1 };
	memcpy(NLMSG_DATA(&req.h), &g, sizeof(g));
	nl_put_attr(&req.h, CTRL_ATTR_FAMILY_NAME, NETDEV_FAMILY, sizeof(NETDEV_FAMILY));
	int family = 0, rc = nl_talk(fd, &req.h, family_cb, &family);
	if (rc < 0 || !family) {
		close(fd);
		return (rc == -ENOENT || !family) ? 0 : rc; /* ENOENT: a kernel before 6.5 */
	}
	memset(&req, 0, sizeof(req));
	g = (struct genlmsghdr){ .cmd = NETDEV_CMD_QSTATS_GET_, .version = 1 };
	req.h = (struct nlmsghdr){ .nlmsg_len = NLMSG_LENGTH(GENL_HDRLEN), .nlmsg_type = (uint16_t)family,
				   .nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP, .nlmsg_seq = 2 };
	memcpy(NLMSG_DATA(&req.h), &g, sizeof(g));
	uint32_t scope = NETDEV_QSTATS_SCOPE_QUEUE_;
	nl_put_attr(&req.h, NETDEV_A_QSTATS_IFINDEX_, &ifindex, sizeof(ifindex));
	nl_put_attr(&req.h, NETDEV_A_QSTATS_SCOPE_, &scope, sizeof(scope));
	struct qstats_arg qa = { .ifindex = ifindex, .q = q };
	rc = nl_talk(fd, &req.h, qstats_cb, &qa);
	close(fd);
	/* EOPNOTSUPP: a driver without per-queue stats; EINVAL: a kernel whose
	 * netdev family has no QSTATS_GET (6.5 to 6.8). */
	if (rc == -EOPNOTSUPP || rc == -EINVAL)
		return 0;
	return rc < 0 ? rc : qa.entries;
}

/* Per-queue counters from ethtool -S names: rx_queue_N_packets (Linux
 * 6.1's virtio_net) or rxN_packets; the number of queues found. */
static int queues_from_ethtool(const char *iface, struct queue_counts *q)
{
	struct ethtool_drvinfo info = { .cmd = ETHTOOL_GDRVINFO };
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || ethtool(fd, iface, &info) < 0) {
		int e = errno;
		if (fd >= 0)
			close(fd);
		return -e;
	}
	uint32_t n = info.n_stats;
	struct ethtool_gstrings *names = calloc(1, sizeof(*names) + (size_t)n * ETH_GSTRING_LEN);
	struct ethtool_stats *vals = calloc(1, sizeof(*vals) + (size_t)n * sizeof(uint64_t));
	int found = 0;
	if (!names || !vals) {
		found = -ENOMEM;
		goto out;
	}
	*names = (struct ethtool_gstrings){ .cmd = ETHTOOL_GSTRINGS, .string_set = ETH_SS_STATS, .len = n };
	*vals = (struct ethtool_stats){ .cmd = ETHTOOL_GSTATS, .n_stats = n };
	if (ethtool(fd, iface, names) < 0 || ethtool(fd, iface, vals) < 0) {
		found = -errno;
		goto out;
	}
	for (uint32_t i = 0; i < n; i++) {
		char name[ETH_GSTRING_LEN + 1], dir[3], what[ETH_GSTRING_LEN + 1];
		unsigned id;
		int end = 0;
		snprintf(name, sizeof(name), "%.*s", ETH_GSTRING_LEN, (char *)names->data + i * ETH_GSTRING_LEN);
		if (!(sscanf(name, "%2[rtx]_queue_%u_%32[a-z]%n", dir, &id, what, &end) == 3 && !name[end]) &&
		    !(sscanf(name, "%2[rtx]%u_%32[a-z]%n", dir, &id, what, &end) == 3 && !name[end]))
			continue;
		int t = !strcmp(dir, "rx") ? 0 : !strcmp(dir, "tx") ? 1 : -1;
		int f = !strcmp(what, "packets") ? Q_PACKETS : !strcmp(what, "bytes") ? Q_BYTES : -1;
		if (t < 0 || f < 0 || id >= Q_MAX)
			continue;
		if (!q->seen[t][id])
			found++;
		q->seen[t][id] = true;
		q->v[t][id][f] = vals->data[i];
	}
out:
	free(names);
	free(vals);
	close(fd);
	return found;
}

/* nic-channels IFACE N: what `ethtool -L IFACE combined N` does. */
static int nic_channels(const char *iface, const char *count)
{
	struct ethtool_channels ch = { .cmd = ETHTOOL_GCHANNELS };
	char *end;
	unsigned long n = strtoul(count, &end, 10);
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	if (*end || !n || n > UINT32_MAX) {
		printf("%s: nic-channels %s: '%s' is not a channel count\n", prog, iface, count);
		return 2;
	}
	if (fd < 0 || ethtool(fd, iface, &ch) < 0) {
		printf("%s: nic-channels %s result=error errno=%s\n", prog, iface, pe_errname(errno));
		return 1;
	}
	ch.cmd = ETHTOOL_SCHANNELS;
	ch.combined_count = (uint32_t)n;
	if (ethtool(fd, iface, &ch) < 0) {
		printf("%s: nic-channels %s %lu result=error errno=%s (at most %u)\n", prog, iface, n,
		       pe_errname(errno), ch.max_combined);
		return 1;
	}
	close(fd);
	printf("%s: nic-channels %s combined=%lu result=ok\n", prog, iface, n);
	return 0;
}

/* nic-queues IFACE: per-queue packets and bytes, and where they came from. */
static int nic_queues(const char *iface)
{
	static struct queue_counts q;
	const char *source = "netdev-qstats";
	int n = queues_from_qstats(iface, &q);
	if (n <= 0) {
		memset(&q, 0, sizeof(q));
		source = "ethtool";
		n = queues_from_ethtool(iface, &q);
	}
	if (n < 0) {
		printf("%s: nic-queues %s result=error errno=%s\n", prog, iface, pe_errname(-n));
		return 1;
	}
	printf("source %s\n", n ? source : "none");
	for (int t = 0; t < 2; t++)
		for (int id = 0; id < Q_MAX; id++)
			if (q.seen[t][id])
				printf("%s_queue_%d_packets %" PRIu64 "\n%s_queue_%d_bytes %" PRIu64 "\n", t ? "tx" : "rx", id,
				       q.v[t][id][Q_PACKETS], t ? "tx" : "rx", id, q.v[t][id][Q_BYTES]);
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

/* trickle-listen PORT [options]: accepts one connection and reads it as
 * trickle_read says. */
static int trickle_main(int argc, char **argv)
{
	struct trickle_opts o;
	struct target t;
	uint64_t port;

	if (argc < 3 || !pe_parse_size(argv[2], &port) || !trickle_parse(argc, argv, 3, &o))
		usage();
	vsock_target(&t, VMADDR_CID_ANY, (unsigned)port);
	int fd = socket(AF_VSOCK, (o.seqpacket ? SOCK_SEQPACKET : SOCK_STREAM) | SOCK_CLOEXEC, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&t.sa, t.len) < 0 || listen(fd, 1) < 0) {
		printf("%s: trickle listen %s result=error errno=%s\n", prog, t.text, pe_errname(errno));
		return 2;
	}
	printf("%s: listening trickle %s %s\n", prog, trickle_kind(&o), t.text);
	trickle_setup_fd(fd, o.timeout);
	int c = accept(fd, NULL, NULL);
	if (c < 0) {
		printf("%s: trickle accept %s result=error errno=%s\n", prog, t.text, pe_errname(errno));
		return 1;
	}
	close(fd);
	return trickle_read(c, prog, &o);
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
	if (argc > 1 && !strcmp(argv[1], "trickle-listen"))
		return trickle_main(argc, argv);
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
	if (pos == 2 && !strcmp(posv[0], "nic-queues"))
		return nic_queues(posv[1]);
	if (pos == 3 && !strcmp(posv[0], "nic-channels"))
		return nic_channels(posv[1], posv[2]);

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
