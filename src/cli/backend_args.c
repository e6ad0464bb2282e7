/* The command line of every backend subcommand (loopback, vsock, net):
 * one getopt loop, so that help, errors, exit statuses and the common
 * options behave the same in each. */
#include "cli/backend_args.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "cli/serve.h"
#include "vhost-user/backend.h"
#include "vhost-user/capabilities.h"

/* The backend program conventions: with --print-capabilities, other
 * options and arguments are ignored, so it is looked for before any is
 * parsed (and a bad one could refuse it). */
static bool wants_capabilities(int argc, char **argv)
{
	for (int i = 1; i < argc && strcmp(argv[i], "--"); i++)
		if (!strcmp(argv[i], "--print-capabilities"))
			return true;
	return false;
}

/* --fd must be a unix stream socket: a file, pipe or datagram socket
 * would fail later with a message about something else. */
static int check_fd(const char *sub, int fd)
{
	struct stat st;
	int type = 0, domain = 0;
	socklen_t len = sizeof(type);

	if (fstat(fd, &st) < 0)
		return vmio_cli_usage_error(sub, "--fd %d: %s", fd,
					    strerror(errno));
	if (!S_ISSOCK(st.st_mode))
		return vmio_cli_usage_error(
			sub, "--fd %d is not a socket (a VMM passes one end of "
			"a unix stream socket)",
			fd);
	if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) < 0 ||
	    (len = sizeof(domain),
	     getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) < 0) ||
	    type != SOCK_STREAM || domain != AF_UNIX)
		return vmio_cli_usage_error(
			sub, "--fd %d is not a unix stream socket", fd);
	return 0;
}

/* The directory a socket is to be made in must exist, for --socket as
 * for --uds-path: better a usage error now than a failed bind later. */
int vmio_cli_check_socket_dir(const char *sub, const char *name,
			      const char *path)
{
	const char *slash = strrchr(path, '/');
	char dir[4096];
	struct stat st;

	if (!slash)
		snprintf(dir, sizeof(dir), ".");
	else if (slash == path)
		snprintf(dir, sizeof(dir), "/");
	else
		snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
	if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode))
		return vmio_cli_usage_error(
			sub, "%s: directory '%s' does not exist", name, dir);
	return 0;
}

int vmio_cli_parse_backend(const struct vmio_backend_cmdline *cl, int argc,
			   char **argv, struct vmio_backend_opts *o)
{
	char err[256], name[64];
	int c, rc;

	if (wants_capabilities(argc, argv)) {
		if (!cl->qemu_type)
			return vmio_cli_usage_error(
				cl->sub, "--print-capabilities: vmio %s is "
				"a test device with no type in QEMU's "
				"vhost-user schema",
				cl->sub);
		vmio_backend_print_capabilities(cl->qemu_type);
		return 0;
	}
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":" VMIO_BACKEND_SHORT_OPTIONS,
				cl->longopts, NULL)) != -1) {
		if (c == 'h') {
			printf("%s%s", cl->usage, vmio_backend_opts_help);
			return 0;
		}
		/* As vhost-device-vsock answers it. */
		if (c == 'V') {
			printf("vmio %s\n", VMIO_VERSION);
			return 0;
		}
		if (c == '?' || c == ':')
			vmio_cli_option_name(argv, name, sizeof(name));
		if (c == '?')
			return vmio_cli_usage_error(cl->sub, "unknown option '%s'",
						    name);
		if (c == ':')
			return vmio_cli_usage_error(cl->sub,
						    "option '%s' needs a value",
						    name);
		if (cl->seen)
			cl->seen(cl->opaque, c);
		if (c < VMIO_OPT_COMMON_BASE && c != 'v' && c != 'q' &&
		    cl->own) {
			rc = cl->own(cl->opaque, c, optarg);
			if (rc)
				return rc;
			continue;
		}
		if (vmio_backend_opts_handle(o, c, optarg, err, sizeof(err)) < 0)
			return vmio_cli_usage_error(cl->sub, "%s", err);
	}
	if (optind < argc)
		return vmio_cli_usage_error(cl->sub, "unexpected argument '%s'",
					    argv[optind]);
	if (!(cl->sockets_elsewhere && cl->sockets_elsewhere(cl->opaque)) &&
	    vmio_backend_opts_check(o, err, sizeof(err)))
		return vmio_cli_usage_error(cl->sub, "%s", err);
	if (o->fd >= 0 && (rc = check_fd(cl->sub, o->fd)))
		return rc;
	if (o->socket_path &&
	    (rc = vmio_cli_check_socket_dir(cl->sub, "--socket",
					    o->socket_path)))
		return rc;
	if (o->control_path &&
	    (rc = vmio_cli_check_socket_dir(cl->sub, "--control",
					    o->control_path)))
		return rc;
	vmio_cli_set_verbosity(o->verbosity);
	return -1;
}

int vmio_cli_parse_num(const char *sub, const char *name, const char *arg,
		       uint64_t min, uint64_t max, uint64_t *out)
{
	if (vmio_parse_u64(arg, max, out) || *out < min)
		return vmio_cli_usage_error(
			sub, "%s: '%s' is not a number from %llu to %llu", name,
			arg, (unsigned long long)min, (unsigned long long)max);
	return 0;
}
