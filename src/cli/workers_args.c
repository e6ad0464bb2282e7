#include "cli/workers_args.h"

#include <errno.h>

#include "cli/options.h"
#include "cli/serve.h"
#include "util/log.h"

int vmio_workers_parse_threads(const char *sub, const char *arg,
			       struct vmio_workers_opts *o)
{
	uint64_t v;

	if (vmio_parse_u64(arg, VMIO_MAX_WORKERS, &v) || !v)
		return vmio_cli_usage_error(
			sub, "--threads: '%s' is not a number from 1 to %u",
			arg, VMIO_MAX_WORKERS);
	o->threads = (unsigned)v;
	return 0;
}

int vmio_workers_parse_cpus(const char *sub, const char *arg,
			    struct vmio_workers_opts *o)
{
	int n = vmio_parse_cpu_list(arg, VMIO_MAX_CPU, o->cpus,
				    VMIO_MAX_WORKERS);

	if (n == -ERANGE)
		return vmio_cli_usage_error(
			sub, "--cpus: '%s' names a CPU above %u or more than "
			"%u CPUs",
			arg, VMIO_MAX_CPU, VMIO_MAX_WORKERS);
	if (n < 0)
		return vmio_cli_usage_error(
			sub, "--cpus: '%s' is not a list of CPUs such as "
			"0-3,8 (each named once)",
			arg);
	o->ncpus = (unsigned)n;
	return 0;
}

unsigned vmio_workers_opts_count(const struct vmio_workers_opts *o,
				 unsigned work)
{
	unsigned n = o->threads ? o->threads
		     : o->ncpus ? o->ncpus
				: vmio_cpus_allowed();

	if (n > work)
		n = work;
	if (n > VMIO_MAX_WORKERS)
		n = VMIO_MAX_WORKERS;
	return n ? n : 1;
}

struct vmio_workers *vmio_workers_from_opts(const struct vmio_workers_opts *o,
					    unsigned work)
{
	struct vmio_workers *w = vmio_workers_new(
		vmio_workers_opts_count(o, work), o->ncpus ? o->cpus : NULL,
		o->ncpus);

	if (!w)
		log_err("out of memory setting up the worker threads");
	return w;
}
