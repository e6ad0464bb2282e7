/* `vmio loopback`: the demonstration device. The in-tree front end
 * (vmio-drive) streams bytes through it to show and measure the core. */
#include <stdio.h>
#include <stdlib.h>

#include "cli/cli.h"
#include "devices/loopback/loopback.h"
#include "util/log.h"

static const char loopback_usage[] =
	"Usage: vmio loopback (--socket-path PATH | --fd N) [options]\n"
	"\n"
	"A vhost-user demonstration device with two queues: what the driver\n"
	"posts on the tx queue (1) comes back on the rx queue (0) as a byte\n"
	"stream. Only the in-tree front end (vmio-drive) drives it.\n"
	"\n"
	"Options:\n";

#define LOOPBACK_DEFAULT_QUEUE_SIZE 1024

int vmio_cmd_loopback(int argc, char **argv)
{
	static const struct option longopts[] = {
		VMIO_BACKEND_LONG_OPTIONS,
		{ NULL, 0, NULL, 0 },
	};
	struct vmio_backend_opts o;
	char err[256];
	int c;

	vmio_backend_opts_init(&o, LOOPBACK_DEFAULT_QUEUE_SIZE);
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":" VMIO_BACKEND_SHORT_OPTIONS,
				longopts, NULL)) != -1) {
		if (c == 'h') {
			printf("%s%s", loopback_usage, vmio_backend_opts_help);
			return 0;
		}
		if (c == '?')
			return vmio_cli_usage_error("loopback", "unknown option '%s'",
						    argv[optind - 1]);
		if (c == ':')
			return vmio_cli_usage_error("loopback", "option '%s' needs a value",
						    argv[optind - 1]);
		if (vmio_backend_opts_handle(&o, c, optarg, err, sizeof(err)) < 0)
			return vmio_cli_usage_error("loopback", "%s", err);
	}
	if (optind < argc)
		return vmio_cli_usage_error("loopback", "unexpected argument '%s'",
					    argv[optind]);
	if (vmio_backend_opts_check(&o, err, sizeof(err)))
		return vmio_cli_usage_error("loopback", "%s", err);
	vmio_cli_set_verbosity(o.verbosity);

	if (o.print_capabilities) {
		vmio_backend_print_capabilities("loopback");
		return 0;
	}

	struct vmio_loop *loop = vmio_loop_new();
	struct vmio_loopback *lb = vmio_loopback_new(o.queue_size);
	struct vmio_backend *be =
		loop && lb ? vmio_backend_new(loop, vmio_loopback_ops(lb), lb) : NULL;
	int status = 1;
	if (!be)
		log_err("out of memory setting up the device");
	else
		status = vmio_cli_serve(loop, be, &o);

	vmio_backend_free(be);
	vmio_loopback_free(lb);
	vmio_loop_free(loop);
	return status;
}
