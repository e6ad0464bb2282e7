/* --threads N and --cpus LIST: how many workers (event/workers.h) a
 * subcommand runs, and where. */
#ifndef VMIO_CLI_WORKERS_ARGS_H
#define VMIO_CLI_WORKERS_ARGS_H

#include "event/workers.h"

struct vmio_workers_opts {
	unsigned threads; /* --threads; 0: the default */
	unsigned cpus[VMIO_MAX_WORKERS];
	unsigned ncpus;   /* --cpus; 0: not pinned */
};

/* The help text lines for the two options, for a usage string. */
#define VMIO_WORKERS_OPTS_HELP                                                  \
	"  --threads N              worker threads, each with an event loop of\n" \
	"                           its own (default: the CPUs this process may\n" \
	"                           run on, never more than there is work for)\n" \
	"  --cpus LIST              pin worker K to the K-th CPU of LIST\n"         \
	"                           (\"0-3,8\"), round robin if there are more\n"  \
	"                           workers than CPUs\n"

/* Parse --threads and --cpus for subcommand sub. Return 0, or report a
 * usage error and return its status. */
int vmio_workers_parse_threads(const char *sub, const char *arg,
			       struct vmio_workers_opts *o);
int vmio_workers_parse_cpus(const char *sub, const char *arg,
			    struct vmio_workers_opts *o);

/* The workers to run for `work` units that can go to separate workers
 * (VMs, queue pairs): --threads, or else as many as --cpus names, or
 * else the CPUs this process may run on; never more than the work. */
unsigned vmio_workers_opts_count(const struct vmio_workers_opts *o,
				 unsigned work);

/* A pool of vmio_workers_opts_count(o, work) workers pinned as --cpus
 * says; NULL (logged) on failure. */
struct vmio_workers *vmio_workers_from_opts(const struct vmio_workers_opts *o,
					    unsigned work);

#endif
