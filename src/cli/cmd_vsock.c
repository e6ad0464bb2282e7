/* `vmio vsock`: a vhost-user virtio-vsock device whose host side is
 * Firecracker's hybrid vsock over unix sockets. Options follow rust-vmm's
 * vhost-device-vsock so that it can replace it on the same command line. */
#include "cli/cmd_vsock.h"

#include <stdio.h>
#include <string.h>
#include <sys/un.h>

#include "cli/backend_args.h"
#include "cli/serve.h"
#include "cli/vsock_handover.h"
#include "cli/vsock_serve.h"
#include "cli/vsock_vms.h"
#include "cli/workers_args.h"
#include "devices/vsock/connect_line.h"
#include "devices/vsock/guest_backlog.h"
#include "devices/vsock/muxer.h"
#include "devices/vsock/tx_splice.h"
#include "util/log.h"

#define VSOCK_DEFAULT_QUEUE_SIZE 1024
#define VSOCK_DEFAULT_GUEST_CID 3
/* Linux's own buf_alloc. With 64 KiB (vhost-device-vsock's default) a
 * guest has one 64 KiB packet in flight and waits a credit round trip for
 * each: make bench measured guest-to-host at 0.36 of a direct unix socket
 * with 64 KiB and 0.63 with 256 KiB. The buffer is allocated only when the
 * host socket is full, so the cost is paid by stalled readers alone. */
#define VSOCK_DEFAULT_BUF_SIZE (256u * 1024)
#define VSOCK_DEFAULT_MAX_CONNS 1024
#define VSOCK_DEFAULT_CONNECT_TIMEOUT_MS 2000
#define VSOCK_DEFAULT_LINE_MAX 64

/* Bounds that keep a typo from becoming a denial of service of our own:
 * every connection may allocate --tx-buffer-size bytes (its bound, and the
 * CIDs', are in vsock_vms.h). */
#define VSOCK_MAX_MAX_CONNS (1u << 20)
#define VSOCK_MAX_CONNECT_TIMEOUT_MS 3600000u

static const char vsock_usage[] =
	"Usage: vmio vsock [--guest-cid N] --uds-path PATH (--socket PATH | --fd N)\n"
	"                  [options]\n"
	"       vmio vsock --vm guest-cid=N,socket=PATH,uds-path=PATH[,...]\n"
	"                  [--vm ...] [options]\n"
	"       vmio vsock --config FILE [options]\n"
	"\n"
	"A vhost-user virtio-vsock device (QEMU: -device vhost-user-vsock-pci).\n"
	"Guest connections to the host (CID 2) port P go to the unix socket\n"
	"PATH_P; host programs reach guest port P by connecting to PATH and\n"
	"writing \"CONNECT P\\n\" (answered \"OK <host port>\\n\" once the guest\n"
	"accepts), as Firecracker's hybrid vsock does.\n"
	"Seqpacket sockets reach SOCK_SEQPACKET unix sockets: PATH_P too, and\n"
	"PATH.seqpacket for host programs, where the CONNECT and OK lines are\n"
	"one message each; messages up to --tx-buffer-size keep their bounds.\n"
	"\n"
	"Device options:\n"
	"  --guest-cid N            the guest's CID, 3 to 4294967294 (default 3)\n"
	"  --uds-path PATH          host-side unix socket prefix (required); its\n"
	"                           directory must exist\n"
	"  --tx-buffer-size N       per-connection buffer for guest data the host\n"
	"                           socket has not taken yet, and the buf_alloc\n"
	"                           advertised to the guest (default 256k)\n"
	"  --max-connections N      connections at once, and host sockets that may\n"
	"                           await their CONNECT line (default 1024)\n"
	"  --connect-timeout MS     time for the guest to accept a host connection,\n"
	"                           and for a host program to finish its CONNECT\n"
	"                           line (default 2000)\n"
	"  --connect-line-max N     longest CONNECT line in bytes, newline included\n"
	"                           (default 64, 16 to 256)\n"
	"  --groups a+b             sibling groups: accepted as vhost-device-vsock\n"
	"                           does, with no effect for one VM\n"
	"  --forward-cid, --forward-listen\n"
	"                           vhost-device-vsock's AF_VSOCK backend: refused\n"
	"                           (the host side is --uds-path)\n"
	"  --poll-us N              after a queue that had work runs dry, look at\n"
	"                           it again once a loop turn for up to N\n"
	"                           microseconds before waiting for the guest's\n"
	"                           notification: fewer wake-ups, a busier CPU;\n"
	"                           the worker's other VMs run between the looks\n"
	"                           (0 to 1000, default 0)\n"
	"  --tx-copy                copy guest-to-host data into the host socket\n"
	"                           (the default)\n"
	"  --tx-splice              splice packets of 16 KiB or more from the\n"
	"                           guest's pages into stream host sockets by\n"
	"                           reference (Linux 6.5 and later); see\n"
	"                           vmio-vsock(1) for what a queue stop costs\n"
	"  --tx-hold N              tx chains a VM may have waiting for the host\n"
	"                           to read their spliced pages (1 to 4096,\n"
	"                           default 32; one connection at most half);\n"
	"                           beyond it, data is copied\n"
	"  --rx-packet-overhead N   bytes of the guest's receive buffer each of\n"
	"                           our packets is counted as, beside the byte\n"
	"                           credit: a connection never has more than\n"
	"                           buf_alloc / N packets unread in the guest\n"
	"                           (Linux 6.12 resets it past about\n"
	"                           buf_alloc / 576), and small host writes to a\n"
	"                           guest that fell behind are merged (64 to\n"
	"                           65536, default 1024; 0: bytes only, no\n"
	"                           merging)\n"
	"  --host-port-range A-B    host-side ports of host-initiated connections,\n"
	"                           the N of \"OK N\" (default 1024-65535, counting\n"
	"                           up; Firecracker's is 1073741824-2147483647)\n"
	"  --handover-timeout MS    how long a successor has to take over at a\n"
	"                           reload (100 to 3600000, default 10000)\n"
	"  --fd-store               keep every VM's session in systemd's fd\n"
	"                           store (the units pass it), so that after a\n"
	"                           crash or a restart the guests keep their\n"
	"                           device: their open connections are reset,\n"
	"                           new ones work; needs NOTIFY_SOCKET and\n"
	"                           FileDescriptorStoreMax=\n"
	"\n"
	"Threads (a VM lives on one worker; one VM, one worker):\n"
	VMIO_WORKERS_OPTS_HELP
	"\n"
	"Several VMs in one process (instead of --guest-cid, --uds-path,\n"
	"--tx-buffer-size, --queue-size, --groups, --socket and --fd):\n"
	"  --vm KEY=VALUE,...       one VM (repeatable); keys guest-cid, socket,\n"
	"                           uds-path (required), tx-buffer-size,\n"
	"                           queue-size, groups=a+b (default \"default\"),\n"
	"                           thread=K (its worker, from 0; default: the\n"
	"                           VMs are dealt out over the workers in turn)\n"
	"  --config FILE            the VMs from a YAML file: a vms: list of\n"
	"                           mappings with the same keys; beside it,\n"
	"                           the options above for every VM as\n"
	"                           top-level keys (max_connections: 4096),\n"
	"                           the command line's winning\n"
	"  A guest reaches a sibling's CID when the two share a group; else RST.\n"
	"\n"
	"Hand-over (an upgrade the guests do not notice): SIGHUP, or `vmio\n"
	"reload` on --control, starts the binary now at the path this one was\n"
	"started from, with the same arguments, and hands it every VM's\n"
	"vhost-user session and listener, its connections with their credit\n"
	"and the bytes held each way, and --control. Once it has taken over\n"
	"this process exits 0. If it fails first (no binary there, it exits\n"
	"or refuses the state, --handover-timeout passes, a VM has spliced\n"
	"chains in flight or dirty logging on) this process goes on serving\n"
	"and says why. The successor refuses a VM list that changed. Without a\n"
	"hand-over, an exit costs every guest its vsock device (QEMU does not\n"
	"reconnect vhost-user-vsock), unless --fd-store kept the sessions for\n"
	"the vmio systemd starts next. Run by hand, without systemd, there is\n"
	"no store: a crash costs the device, as without --fd-store.\n"
	"\n"
	"Common options (--queue-size defaults to 1024):\n";

enum {
	OPT_GUEST_CID = 1,
	OPT_UDS_PATH,
	OPT_TX_BUFFER_SIZE,
	OPT_MAX_CONNS,
	OPT_CONNECT_TIMEOUT,
	OPT_LINE_MAX,
	OPT_VM,
	OPT_CONFIG,
	OPT_GROUPS,
	OPT_THREADS,
	OPT_CPUS,
	OPT_POLL_US,
	OPT_TX_COPY,
	OPT_TX_SPLICE,
	OPT_TX_HOLD,
	OPT_FORWARD,
	OPT_RX_PKT_OVERHEAD,
	OPT_HOST_PORT_RANGE,
	OPT_HANDOVER_TIMEOUT,
	OPT_FD_STORE,
};

struct vsock_opts {
	struct vsock_vm_list vms; /* --vm, --config */
	const char *config;
	const char *single_opt;   /* a single-VM option given, for messages */
	uint64_t guest_cid;
	const char *uds_path;
	uint64_t buf_size;
	uint64_t max_conns;
	uint64_t connect_timeout_ms;
	uint64_t line_max;
	uint64_t poll_us;
	bool tx_copy;   /* --tx-copy: the default, said explicitly */
	bool tx_splice; /* --tx-splice */
	uint64_t tx_hold;
	uint64_t rx_pkt_overhead;
	uint32_t port_first, port_last;
	uint64_t handover_timeout_ms;
	bool fd_store; /* --fd-store */
	struct vmio_workers_opts workers;
	/* The options the command line gave (getopt codes), which a
	 * config file's do not override. */
	int given[64];
	unsigned ngiven;
};

/* --host-port-range A-B: both inclusive, A <= B. */
static int parse_port_range(struct vsock_opts *v, const char *arg)
{
	const char *dash = strchr(arg, '-');
	char first[16];
	uint64_t a, b;

	if (!dash || (size_t)(dash - arg) >= sizeof(first))
		return vmio_cli_usage_error(
			"vsock", "--host-port-range: '%s' is not FIRST-LAST",
			arg);
	memcpy(first, arg, (size_t)(dash - arg));
	first[dash - arg] = '\0';
	/* 4294967295 is VMADDR_PORT_ANY: "no port" to every vsock stack. */
	if (vmio_parse_u64(first, UINT32_MAX - 1, &a) ||
	    vmio_parse_u64(dash + 1, UINT32_MAX - 1, &b))
		return vmio_cli_usage_error(
			"vsock", "--host-port-range: '%s' is not two ports "
			"(0 to 4294967294; 4294967295 is VMADDR_PORT_ANY) "
			"joined by '-'", arg);
	if (a > b)
		return vmio_cli_usage_error(
			"vsock", "--host-port-range: %llu is above %llu",
			(unsigned long long)a, (unsigned long long)b);
	v->port_first = (uint32_t)a;
	v->port_last = (uint32_t)b;
	return 0;
}

static int handle_opt(void *vp, int c, const char *arg)
{
	struct vsock_opts *v = vp;
	char err[512];
	int rc;

	switch (c) {
	case OPT_GUEST_CID:
		/* Checked apart from the range so that the message says why
		 * 0, 1 and 2 are not guest CIDs. */
		if (vmio_parse_u64(arg, UINT64_MAX, &v->guest_cid))
			return vmio_cli_usage_error(
				"vsock", "--guest-cid: '%s' is not a number",
				arg);
		if (v->guest_cid <= 2)
			return vmio_cli_usage_error(
				"vsock",
				"--guest-cid: %s is reserved (0: hypervisor, 1: "
				"local, 2: host); use 3 or above",
				arg);
		if (v->guest_cid > VSOCK_MAX_GUEST_CID)
			return vmio_cli_usage_error(
				"vsock", "--guest-cid: %s is above %llu", arg,
				VSOCK_MAX_GUEST_CID);
		return 0;
	case OPT_UDS_PATH:
		if (!arg[0])
			return vmio_cli_usage_error("vsock",
						    "--uds-path: empty path");
		v->uds_path = arg;
		return 0;
	case OPT_TX_BUFFER_SIZE:
		return vmio_cli_parse_num("vsock", "--tx-buffer-size", arg, 1, VSOCK_MAX_BUF_SIZE,
				 &v->buf_size);
	case OPT_MAX_CONNS:
		return vmio_cli_parse_num("vsock", "--max-connections", arg, 1,
				 VSOCK_MAX_MAX_CONNS, &v->max_conns);
	case OPT_CONNECT_TIMEOUT:
		return vmio_cli_parse_num("vsock", "--connect-timeout", arg, 1,
				 VSOCK_MAX_CONNECT_TIMEOUT_MS,
				 &v->connect_timeout_ms);
	case OPT_LINE_MAX:
		return vmio_cli_parse_num("vsock", "--connect-line-max", arg,
				 VSOCK_CONNECT_LINE_MAX_MIN,
				 VSOCK_CONNECT_LINE_MAX_LIMIT, &v->line_max);
	case OPT_VM:
		if (vsock_vms_parse_arg(&v->vms, arg, err, sizeof(err)))
			return vmio_cli_usage_error("vsock", "%s", err);
		return 0;
	case OPT_GROUPS:
		if (vsock_vms_check_groups(arg, err, sizeof(err)))
			return vmio_cli_usage_error("vsock", "%s", err);
		return 0;
	case OPT_FORWARD:
		return vmio_cli_usage_error("vsock", "%s", VSOCK_VMS_NO_FORWARD);
	case OPT_POLL_US:
		return vmio_cli_parse_num("vsock", "--poll-us", arg, 0, 1000,
					  &v->poll_us);
	case OPT_TX_COPY:
		v->tx_copy = true;
		return 0;
	case OPT_TX_SPLICE:
		v->tx_splice = true;
		return 0;
	case OPT_TX_HOLD:
		return vmio_cli_parse_num("vsock", "--tx-hold", arg, 1,
					  VSOCK_MUX_TX_HOLD_MAX, &v->tx_hold);
	case OPT_RX_PKT_OVERHEAD:
		rc = vmio_cli_parse_num("vsock", "--rx-packet-overhead", arg, 0,
					65536, &v->rx_pkt_overhead);
		if (rc)
			return rc;
		if (v->rx_pkt_overhead && v->rx_pkt_overhead < 64)
			return vmio_cli_usage_error(
				"vsock", "--rx-packet-overhead: %s is below 64 "
				"(0 turns the packet bound off)", arg);
		return 0;
	case OPT_HOST_PORT_RANGE:
		return parse_port_range(v, arg);
	case OPT_FD_STORE:
		v->fd_store = true;
		return 0;
	case OPT_HANDOVER_TIMEOUT:
		return vmio_cli_parse_num("vsock", "--handover-timeout", arg,
					  100, 3600000,
					  &v->handover_timeout_ms);
	case OPT_THREADS:
		return vmio_workers_parse_threads("vsock", arg, &v->workers);
	case OPT_CPUS:
		return vmio_workers_parse_cpus("vsock", arg, &v->workers);
	case OPT_CONFIG:
		if (v->config)
			return vmio_cli_usage_error(
				"vsock", "--config: given twice");
		v->config = arg;
		return 0;
	}
	return -1;
}

/* The uds-path's directory must exist, and the longest guest-to-host
 * path, PATH_4294967295, must fit a unix socket address: better refused
 * now than an RST for every port later. */
static int check_uds_path(const char *name, const char *path)
{
	struct sockaddr_un sa;

	if (strlen(path) + sizeof("_4294967295") > sizeof(sa.sun_path))
		return vmio_cli_usage_error(
			"vsock",
			"%s: '%s' is too long for a unix socket (at "
			"most %zu bytes, to leave room for _PORT)",
			name, path, sizeof(sa.sun_path) - sizeof("_4294967295"));
	return vmio_cli_check_socket_dir("vsock", name, path);
}

/* --rx-packet-overhead as the device takes it: 0 there is its default. */
static uint32_t pkt_overhead(const struct vsock_opts *v)
{
	return v->rx_pkt_overhead ? (uint32_t)v->rx_pkt_overhead
				  : VSOCK_MUX_NO_PACKET_BOUND;
}

/* The VMs served, the options' values for all of them. */
static int serve(const struct vmio_backend_opts *o, const struct vsock_opts *v,
		 bool single)
{
	const struct vsock_serve s = {
		.vms = &v->vms,
		.device = {
			.buf_size = (uint32_t)v->buf_size,
			.max_conns = (unsigned)v->max_conns,
			.connect_timeout_ms = (unsigned)v->connect_timeout_ms,
			.connect_line_max = (size_t)v->line_max,
			.poll_ns = (uint32_t)v->poll_us * 1000,
			.tx_copy = !v->tx_splice,
			.tx_hold_max = (unsigned)v->tx_hold,
			.rx_pkt_overhead = pkt_overhead(v),
			.port_first = v->port_first,
			.port_last = v->port_last,
		},
		.workers = &v->workers,
		.backend = o,
		.single = single,
		.handover_timeout_ms = (unsigned)v->handover_timeout_ms,
		.fd_store = v->fd_store,
	};

	return vsock_serve(&s);
}

/* The single-VM form, its options checked: the VM list of one it is. */
static int serve_single(const struct vmio_backend_opts *o,
			struct vsock_opts *v)
{
	struct vsock_vm_spec *s = vsock_vms_add(&v->vms);

	if (!s || !(s->uds_path = strdup(v->uds_path)) ||
	    (o->socket_path && !(s->socket = strdup(o->socket_path)))) {
		log_err("out of memory setting up the device");
		return 1;
	}
	s->guest_cid = v->guest_cid;
	return serve(o, v, true);
}

/* --vm / --config: every single-VM option is refused (as
 * vhost-device-vsock does), the VMs are checked, then served. */
static int main_multi(const struct vmio_backend_opts *o, struct vsock_opts *v)
{
	char err[512];
	int rc;

	if (v->single_opt)
		return vmio_cli_usage_error(
			"vsock", "%s cannot be used with --vm or --config "
			"(give it per VM)",
			v->single_opt);
	if (vsock_vms_check(&v->vms, err, sizeof(err)))
		return vmio_cli_usage_error("vsock", "%s%s%s%s",
					    v->config ? "--config " : "--vm",
					    v->config ? v->config : "",
					    ": ", err);
	for (unsigned i = 0; i < v->vms.n; i++) {
		char name[48];

		snprintf(name, sizeof(name), "VM %u: uds-path", i + 1);
		rc = check_uds_path(name, v->vms.vms[i].uds_path);
		if (rc)
			return rc;
		snprintf(name, sizeof(name), "VM %u: socket", i + 1);
		rc = vmio_cli_check_socket_dir("vsock", name,
					       v->vms.vms[i].socket);
		if (rc)
			return rc;
	}
	return serve(o, v, false);
}

/* Options that name the one VM of the single-VM form. */
static const char *single_vm_option(int c);

static void note_option(void *vp, int c)
{
	struct vsock_opts *v = vp;

	if (v->ngiven < sizeof(v->given) / sizeof(v->given[0]))
		v->given[v->ngiven++] = c;
	if (single_vm_option(c))
		v->single_opt = single_vm_option(c);
}

static bool has_vm_list(void *vp)
{
	const struct vsock_opts *v = vp;

	return v->vms.n || v->config;
}

static const char *single_vm_option(int c)
{
	switch (c) {
	case OPT_GUEST_CID:
		return "--guest-cid";
	case OPT_UDS_PATH:
		return "--uds-path";
	case OPT_TX_BUFFER_SIZE:
		return "--tx-buffer-size";
	case VMIO_OPT_QUEUE_SIZE:
		return "--queue-size";
	case VMIO_OPT_SOCKET_PATH:
		return "--socket";
	case VMIO_OPT_FD:
		return "--fd";
	case OPT_GROUPS:
		return "--groups";
	}
	return NULL;
}

static const struct option vsock_longopts[] = {
	{ "guest-cid", required_argument, NULL, OPT_GUEST_CID },
	{ "uds-path", required_argument, NULL, OPT_UDS_PATH },
	{ "tx-buffer-size", required_argument, NULL,
	  OPT_TX_BUFFER_SIZE },
	{ "max-connections", required_argument, NULL, OPT_MAX_CONNS },
	{ "connect-timeout", required_argument, NULL,
	  OPT_CONNECT_TIMEOUT },
	{ "connect-line-max", required_argument, NULL, OPT_LINE_MAX },
	{ "vm", required_argument, NULL, OPT_VM },
	{ "config", required_argument, NULL, OPT_CONFIG },
	{ "groups", required_argument, NULL, OPT_GROUPS },
	{ "threads", required_argument, NULL, OPT_THREADS },
	{ "cpus", required_argument, NULL, OPT_CPUS },
	{ "poll-us", required_argument, NULL, OPT_POLL_US },
	{ "tx-copy", no_argument, NULL, OPT_TX_COPY },
	{ "tx-splice", no_argument, NULL, OPT_TX_SPLICE },
	{ "tx-hold", required_argument, NULL, OPT_TX_HOLD },
	{ "rx-packet-overhead", required_argument, NULL,
	  OPT_RX_PKT_OVERHEAD },
	{ "host-port-range", required_argument, NULL,
	  OPT_HOST_PORT_RANGE },
	{ "handover-timeout", required_argument, NULL,
	  OPT_HANDOVER_TIMEOUT },
	{ "fd-store", no_argument, NULL, OPT_FD_STORE },
	/* vhost-device-vsock's AF_VSOCK backend: refused by name. */
	{ "forward-cid", required_argument, NULL, OPT_FORWARD },
	{ "forward-listen", required_argument, NULL, OPT_FORWARD },
	VMIO_BACKEND_LONG_OPTIONS,
	{ NULL, 0, NULL, 0 },
};

static int vsock_main(int argc, char **argv, struct vsock_opts *vp);

/* Whether a config file may set option code: the command's options for
 * every VM, not those of one VM (they go under vms:), nor the ones about
 * the command line itself. */
static bool file_may_set(int code)
{
	switch (code) {
	case OPT_VM:
	case OPT_CONFIG:
	case VMIO_OPT_PRINT_CAPS:
	case 'h':
	case 'V':
	case 'v':
	case 'q':
		return false;
	}
	return !single_vm_option(code);
}

/* Whether the command line gave code; --tx-copy and --tx-splice are one
 * choice. */
static bool given_on_command_line(const struct vsock_opts *v, int code)
{
	bool tx = code == OPT_TX_COPY || code == OPT_TX_SPLICE;

	for (unsigned i = 0; i < v->ngiven; i++)
		if (v->given[i] == code ||
		    (tx && (v->given[i] == OPT_TX_COPY ||
			    v->given[i] == OPT_TX_SPLICE)))
			return true;
	return false;
}

/* A config file's option: value as its long option takes it, flags
 * true or false. Returns 0 or an exit status. */
static int apply_file_option(struct vmio_backend_opts *o, struct vsock_opts *v,
			     const struct vsock_file_option *f)
{
	const struct option *lo = vsock_longopts;
	const char *arg = f->value;
	char err[256];

	while (lo->name && strcmp(lo->name, f->name))
		lo++;
	if (!lo->name || !file_may_set(lo->val))
		return vmio_cli_usage_error(
			"vsock", "--config %s:%u: unknown option '%s' (options "
			"for every VM, as the long options are named; a VM's "
			"own keys go under vms:)",
			v->config, f->line, f->name);
	if (given_on_command_line(v, lo->val))
		return 0;
	if (lo->has_arg == no_argument) {
		if (!strcmp(arg, "false"))
			return 0;
		if (strcmp(arg, "true"))
			return vmio_cli_usage_error(
				"vsock", "--config %s:%u: %s: '%s' is not true "
				"or false", v->config, f->line, f->name, arg);
		arg = NULL;
	}
	if (lo->val < VMIO_OPT_COMMON_BASE)
		return handle_opt(v, lo->val, arg);
	if (vmio_backend_opts_handle(o, lo->val, arg, err, sizeof(err)) < 0)
		return vmio_cli_usage_error("vsock", "--config %s:%u: %s",
					    v->config, f->line, err);
	return 0;
}

/* --config: its VMs, and its options where the command line gave none.
 * Returns 0 or an exit status. */
static int load_config(struct vmio_backend_opts *o, struct vsock_opts *v)
{
	char err[512];
	int rc;

	if (v->vms.n)
		return vmio_cli_usage_error(
			"vsock", "--vm and --config cannot be used together");
	if (vsock_vms_load_config(&v->vms, v->config, err, sizeof(err)))
		return vmio_cli_usage_error("vsock", "%s", err);
	for (unsigned i = 0; i < v->vms.nopts; i++) {
		rc = apply_file_option(o, v, &v->vms.opts[i]);
		if (rc)
			return rc;
	}
	if (o->control_path)
		return vmio_cli_check_socket_dir("vsock", "--control",
						 o->control_path);
	return 0;
}

/* Which guest-to-host path runs, said once (-v). */
static void log_tx_path(const struct vsock_opts *v)
{
	const char *why;
	bool ok = vsock_splice_supported(&why);

	if (!v->tx_splice)
		log_info("vsock: guest-to-host data: copied (--tx-copy, the "
			 "default; --tx-splice splices)");
	else if (ok)
		log_info("vsock: guest-to-host data: spliced by reference on "
			 "stream sockets (%s), at most %u tx chains held per "
			 "VM; seqpacket copied",
			 why, v->tx_hold ? (unsigned)v->tx_hold
					 : VSOCK_MUX_TX_HOLD_DEFAULT);
	else
		log_info("vsock: guest-to-host data: copied (%s)", why);
}

int vmio_cmd_vsock(int argc, char **argv)
{
	struct vsock_opts v = {
		/* vhost-device-vsock's default: its synopsis needs no CID. */
		.guest_cid = VSOCK_DEFAULT_GUEST_CID,
		.buf_size = VSOCK_DEFAULT_BUF_SIZE,
		.max_conns = VSOCK_DEFAULT_MAX_CONNS,
		.connect_timeout_ms = VSOCK_DEFAULT_CONNECT_TIMEOUT_MS,
		.handover_timeout_ms = VSOCK_HANDOVER_TIMEOUT_MS,
		.line_max = VSOCK_DEFAULT_LINE_MAX,
		.rx_pkt_overhead = VSOCK_BACKLOG_OVERHEAD_DEFAULT,
	};
	int rc = vsock_main(argc, argv, &v);

	vsock_vms_release(&v.vms);
	return rc;
}

static int vsock_main(int argc, char **argv, struct vsock_opts *vp)
{
	struct vsock_opts *v = vp;
	const struct vmio_backend_cmdline cl = {
		.sub = "vsock", .qemu_type = "vsock", .usage = vsock_usage,
		.longopts = vsock_longopts,
		.own = handle_opt, .seen = note_option,
		.sockets_elsewhere = has_vm_list, .opaque = v,
	};
	struct vmio_backend_opts o;
	bool multi;
	int rc;

	vmio_backend_opts_init(&o, VSOCK_DEFAULT_QUEUE_SIZE);
	rc = vmio_cli_parse_backend(&cl, argc, argv, &o);
	if (rc >= 0)
		return rc;
	if (v->config && (rc = load_config(&o, v)))
		return rc;
	if (v->tx_copy && v->tx_splice)
		return vmio_cli_usage_error("vsock", "--tx-copy and --tx-splice "
						     "exclude each other");
	log_tx_path(v);
	multi = has_vm_list(v);
	if (multi)
		return main_multi(&o, v);
	if (!v->uds_path)
		return vmio_cli_usage_error("vsock",
					    "--uds-path PATH is required");
	rc = check_uds_path("--uds-path", v->uds_path);
	if (rc)
		return rc;
	if (o.socket_path && vsock_vms_is_listener(v->uds_path, o.socket_path))
		return vmio_cli_usage_error(
			"vsock", "--socket %s is where host programs connect "
			"(--uds-path %s, and %s.seqpacket)",
			o.socket_path, v->uds_path, v->uds_path);
	if (o.socket_path && vsock_vms_in_namespace(v->uds_path, o.socket_path))
		return vmio_cli_usage_error(
			"vsock", "--socket %s is where the guest reaches host "
			"ports (%s_<port>)",
			o.socket_path, v->uds_path);
	return serve_single(&o, v);
}
