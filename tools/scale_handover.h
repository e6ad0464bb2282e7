/* `vmio-scale handover`: what a hand-over (issue 36) costs the guests of
 * one `vmio vsock`. This process starts vmio itself (as the subreaper of
 * what it starts, so that each successor becomes its child and the old
 * process's CPU time comes back from wait4), plays one in-tree guest per
 * VM of the --config file, opens conns connections per VM (held by a
 * host child, scale_host.h), a few of them two-way streams whose host
 * ends it holds itself, and then:
 *
 *   pauses  reloads vmio (`vmio reload` on --control) again and again
 *           while the streams run both ways, every byte checked; the
 *           pause of a reload is the largest gap between two reads of
 *           one stream that spans the reload (last byte before, first
 *           byte after), the worst of every stream and direction;
 *           beside it the largest gap in the streaming that follows,
 *           which no reload spans (what the machine's load alone does)
 *   leaks   then, the streams idle, reloads it once, and leak_reloads
 *           times in a row: the serving process's descriptors
 *           (/proc/PID/fd) and mappings (/proc/PID/maps) before and
 *           after those must be equal
 *
 * and for each reload, the time `vmio reload` took and vmio's CPU time:
 * the old process's from the request to its exit (wait4) and the
 * successor's up to then (/proc/PID/task/N/schedstat). */
#ifndef VMIO_TOOLS_SCALE_HANDOVER_H
#define VMIO_TOOLS_SCALE_HANDOVER_H

#include <stdint.h>

struct scale_handover_opts {
	const char *config;     /* the VMs, --config as vmio reads it */
	const char *vmio;       /* the binary to start */
	const char *control;    /* its --control socket */
	const char *log;        /* its stderr (NULL: ours) */
	char *const *vmio_args; /* more `vmio vsock` arguments */
	unsigned n_vmio_args;
	unsigned conns, window; /* connections per VM, streams included;
				 * REQUESTs out at once per guest */
	unsigned streams;       /* two-way streams, spread over the VMs */
	unsigned reloads, leak_reloads;
	uint64_t rate;          /* bytes a second each stream carries each
				 * way (0: as fast as it goes) */
	uint64_t settle_ms;     /* streaming between two reloads */
};

/* Prints the figures; returns the exit status (1 for a leak). */
int scale_handover(const struct scale_handover_opts *o);

#endif
