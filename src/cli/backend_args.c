/* The command line of every backend subcommand (loopback, vsock, net):
 * one getopt loop, so that help, errors, exit statuses and the common
 * options behave the same in each. */
#include "cli/backend_args.h"

#include <stdio.h>

#include "cli/serve.h"
#include "vhost-user/backend.h"
#include "vhost-user/capabilities.h"

int vmio_cli_parse_backend(const struct vmio_backend_cmdline *cl, int argc,
			   char **argv, struct vmio_backend_opts *o)
{
	char err[256];
	int c, rc;

	opterr = 0;
	while ((c = getopt_long(argc, argv, ":" VMIO_BACKEND_SHORT_OPTIONS,
				cl->longopts, NULL)) != -1) {
		if (c == 'h') {
			printf("%s%s", cl->usage, vmio_backend_opts_help);
			return 0;
		}
		if (c == '?')
			return vmio_cli_usage_error(cl->sub, "unknown option '%s'",
						    argv[optind - 1]);
		if (c == ':')
			return vmio_cli_usage_error(cl->sub,
						    "option '%s' needs a value",
						    argv[optind - 1]);
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
	vmio_cli_set_verbosity(o->verbosity);
	if (o->print_capabilities) {
		vmio_backend_print_capabilities(cl->sub);
		return 0;
	}
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
