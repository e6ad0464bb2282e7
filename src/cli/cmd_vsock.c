/* `vmio vsock`: a vhost-user virtio-vsock device whose host side is
 * Firecracker's hybrid vsock over unix sockets. Options follow rust-vmm's
 * vhost-device-vsock so that it can replace it on the same command line. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "cli/cli.h"
#include "devices/vsock/connect_line.h"
#include "devices/vsock/device.h"
#include "util/log.h"

#define VSOCK_DEFAULT_QUEUE_SIZE 1024
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
 * every connection may allocate --tx-buffer-size bytes. */
#define VSOCK_MAX_BUF_SIZE (1u << 30)
#define VSOCK_MAX_MAX_CONNS (1u << 20)
#define VSOCK_MAX_CONNECT_TIMEOUT_MS 3600000u

/* The largest CID: 2^32 - 1 (VMADDR_CID_ANY) is reserved, and the spec
 * keeps the upper 32 bits zero. */
#define VSOCK_MAX_GUEST_CID 0xfffffffeull

static const char vsock_usage[] =
	"Usage: vmio vsock --guest-cid N --uds-path PATH (--socket PATH | --fd N)\n"
	"                  [options]\n"
	"\n"
	"A vhost-user virtio-vsock device (QEMU: -device vhost-user-vsock-pci).\n"
	"Guest connections to the host (CID 2) port P go to the unix socket\n"
	"PATH_P; host programs reach guest port P by connecting to PATH and\n"
	"writing \"CONNECT P\\n\" (answered \"OK <host port>\\n\" once the guest\n"
	"accepts), as Firecracker's hybrid vsock does.\n"
	"\n"
	"Device options:\n"
	"  --guest-cid N            the guest's CID, 3 to 4294967294 (required)\n"
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
	"  --vm, --config           several VMs in one process: not supported yet\n"
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
};

struct vsock_opts {
	bool have_cid;
	uint64_t guest_cid;
	const char *uds_path;
	uint64_t buf_size;
	uint64_t max_conns;
	uint64_t connect_timeout_ms;
	uint64_t line_max;
};

static int handle_opt(void *opaque, int c, const char *arg)
{
	struct vsock_opts *v = opaque;

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
		v->have_cid = true;
		return 0;
	case OPT_UDS_PATH:
		if (!arg[0])
			return vmio_cli_usage_error("vsock",
						    "--uds-path: empty path");
		v->uds_path = arg;
		return 0;
	case OPT_TX_BUFFER_SIZE:
		return vmio_cli_parse_num("vsock", "--tx-buffer-size", arg, 1,
					  VSOCK_MAX_BUF_SIZE, &v->buf_size);
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
					  VSOCK_CONNECT_LINE_MAX_LIMIT,
					  &v->line_max);
	case OPT_VM:
	case OPT_CONFIG:
		return vmio_cli_usage_error(
			"vsock", "%s: not supported yet (one VM per process)",
			c == OPT_VM ? "--vm" : "--config");
	}
	return -1;
}

/* The uds-path's directory must exist, and the longest guest-to-host
 * path, PATH_4294967295, must fit a unix socket address: better refused
 * now than an RST for every port later. */
static int check_uds_path(const char *path)
{
	struct sockaddr_un sa;
	const char *slash = strrchr(path, '/');
	char dir[PATH_MAX];
	struct stat st;

	if (strlen(path) + sizeof("_4294967295") > sizeof(sa.sun_path))
		return vmio_cli_usage_error(
			"vsock",
			"--uds-path: '%s' is too long for a unix socket (at "
			"most %zu bytes, to leave room for _PORT)",
			path, sizeof(sa.sun_path) - sizeof("_4294967295"));
	if (!slash)
		snprintf(dir, sizeof(dir), ".");
	else if (slash == path)
		snprintf(dir, sizeof(dir), "/");
	else
		snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
	if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode))
		return vmio_cli_usage_error(
			"vsock", "--uds-path: directory '%s' does not exist",
			dir);
	return 0;
}

static int run(const struct vmio_backend_opts *o, const struct vsock_opts *v)
{
	struct vsock_device_config cfg = {
		.guest_cid = v->guest_cid,
		.uds_path = v->uds_path,
		.buf_size = (uint32_t)v->buf_size,
		.max_conns = (unsigned)v->max_conns,
		.connect_timeout_ms = (unsigned)v->connect_timeout_ms,
		.connect_line_max = (size_t)v->line_max,
		.max_queue_size = o->queue_size,
	};
	struct vmio_loop *loop = vmio_loop_new();
	struct vsock_device *dev = NULL;
	struct vmio_backend *be = NULL;
	int status = 1, rc = -ENOMEM;

	if (loop)
		dev = vsock_device_new(loop, &cfg, &rc);
	if (!dev) {
		log_err("cannot serve --uds-path %s: %s", v->uds_path,
			rc == -EADDRINUSE ? "another process is serving it"
					  : strerror(-rc));
	} else {
		log_info("vsock: guest CID %llu, host sockets at %s",
			 (unsigned long long)v->guest_cid, v->uds_path);
		be = vmio_backend_new(loop, vsock_device_ops(dev), dev);
		if (!be)
			log_err("out of memory setting up the device");
		else
			status = vmio_cli_serve(loop, be, o);
	}
	vmio_backend_free(be);
	vsock_device_free(dev);
	vmio_loop_free(loop);
	return status;
}

int vmio_cmd_vsock(int argc, char **argv)
{
	static const struct option longopts[] = {
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
		VMIO_BACKEND_LONG_OPTIONS,
		{ NULL, 0, NULL, 0 },
	};
	struct vsock_opts v = {
		.buf_size = VSOCK_DEFAULT_BUF_SIZE,
		.max_conns = VSOCK_DEFAULT_MAX_CONNS,
		.connect_timeout_ms = VSOCK_DEFAULT_CONNECT_TIMEOUT_MS,
		.line_max = VSOCK_DEFAULT_LINE_MAX,
	};
	const struct vmio_backend_cmdline cl = {
		.sub = "vsock",
		.usage = vsock_usage,
		.longopts = longopts,
		.own = handle_opt,
		.opaque = &v,
	};
	struct vmio_backend_opts o;
	int rc;

	vmio_backend_opts_init(&o, VSOCK_DEFAULT_QUEUE_SIZE);
	rc = vmio_cli_parse_backend(&cl, argc, argv, &o);
	if (rc >= 0)
		return rc;
	if (!v.have_cid)
		return vmio_cli_usage_error("vsock", "--guest-cid N is required");
	if (!v.uds_path)
		return vmio_cli_usage_error("vsock",
					    "--uds-path PATH is required");
	rc = check_uds_path(v.uds_path);
	if (rc)
		return rc;
	return run(&o, &v);
}
