/* `vmio loopback`: the demonstration device. The in-tree front end
 * (vmio-drive) streams bytes through it to show and measure the core. */
#include "cli/cmd_loopback.h"

#include <stdio.h>
#include <stdlib.h>

#include "cli/backend_args.h"
#include "cli/control.h"
#include "cli/serve.h"
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

struct loopback_parts {
	struct vmio_loop *loop;
	struct vmio_backend *be;
};

static int add_parts(void *opaque, struct vmio_control *c)
{
	struct loopback_parts *p = opaque;

	return vmio_control_add_backend(c, "backends", p->loop, p->be);
}

int vmio_cmd_loopback(int argc, char **argv)
{
	static const struct option longopts[] = {
		VMIO_BACKEND_LONG_OPTIONS,
		{ NULL, 0, NULL, 0 },
	};
	const struct vmio_backend_cmdline cl = {
		.sub = "loopback",
		.usage = loopback_usage,
		.longopts = longopts,
	};
	struct vmio_backend_opts o;
	int rc;

	vmio_backend_opts_init(&o, LOOPBACK_DEFAULT_QUEUE_SIZE);
	rc = vmio_cli_parse_backend(&cl, argc, argv, &o);
	if (rc >= 0)
		return rc;

	struct vmio_loop *loop = vmio_loop_new();
	struct vmio_loopback *lb =
		loop ? vmio_loopback_new(loop, o.queue_size) : NULL;
	struct vmio_backend *be =
		loop && lb ? vmio_backend_new(loop, vmio_loopback_ops(lb), lb) : NULL;
	struct loopback_parts parts = { loop, be };
	struct vmio_control *ctl = NULL;
	int status = 1;
	if (!be)
		log_err("out of memory setting up the device");
	else if (!vmio_control_open(loop, "loopback", o.control_path,
				    add_parts, &parts, &ctl))
		status = vmio_cli_serve(loop, be, &o);

	vmio_control_free(ctl);
	vmio_backend_free(be);
	vmio_loopback_free(lb);
	vmio_loop_free(loop);
	return status;
}
