/* The vmio binary: one program, a subcommand per job. */
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

#include "cli/cmd_loopback.h"
#include "cli/cmd_net.h"
#include "cli/cmd_redirect.h"
#include "cli/cmd_reload.h"
#include "cli/cmd_stats.h"
#include "cli/cmd_vsock.h"
#include "cli/serve.h"
#include "handover/start_path.h"

/* A subcommand's entry point: argv[0] is the subcommand's name. Returns
 * the process exit status. */
typedef int (*vmio_cmd_fn)(int argc, char **argv);

struct subcommand {
	const char *name;
	vmio_cmd_fn fn;
	const char *summary;
};

static const struct subcommand subcommands[] = {
	{ "loopback", vmio_cmd_loopback,
	  "vhost-user demonstration device (tx queue loops back to rx)" },
	{ "vsock", vmio_cmd_vsock,
	  "vhost-user virtio-vsock device (host side: unix sockets)" },
	{ "net", vmio_cmd_net,
	  "vhost-user virtio-net device (host side: a TAP, AF_XDP sockets,\n"
	  "             or nothing)" },
	{ "redirect", vmio_cmd_redirect,
	  "socat-style relay between two sockets" },
	{ "stats", vmio_cmd_stats,
	  "print a running device's live counters (its --control socket)" },
	{ "reload", vmio_cmd_reload,
	  "hand a running vmio over to the binary installed now (its\n"
	  "             --control socket; SIGHUP does the same)" },
};

static void print_usage(FILE *f)
{
	fprintf(f, "Usage: vmio [--help] [--version] COMMAND [options]\n"
		   "\n"
		   "A userspace data plane for the I/O between virtual machines and\n"
		   "their host.\n"
		   "\n"
		   "Commands:\n");
	for (size_t i = 0; i < sizeof(subcommands) / sizeof(subcommands[0]); i++)
		fprintf(f, "  %-10s %s\n", subcommands[i].name, subcommands[i].summary);
	fprintf(f, "\nRun 'vmio COMMAND --help' for a command's options.\n");
}

/* Every connection costs a descriptor (vsock: its host socket; redirect:
 * two), and vmio waits with epoll, so the soft limit's usual 1024 is a
 * limit of habit: take what the hard limit allows. Raising the hard limit
 * is the administrator's (LimitNOFILE=, ulimit -Hn; README). */
static void raise_nofile(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

int main(int argc, char **argv)
{
	raise_nofile();
	/* Now, before an upgrade can rename another file over it. */
	vmio_start_path_init(argc, argv);
	if (argc < 2) {
		print_usage(stderr);
		return VMIO_EXIT_USAGE;
	}
	const char *cmd = argv[1];
	if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
		print_usage(stdout);
		return 0;
	}
	if (!strcmp(cmd, "--version")) {
		printf("vmio %s\n", VMIO_VERSION);
		return 0;
	}
	for (size_t i = 0; i < sizeof(subcommands) / sizeof(subcommands[0]); i++) {
		if (!strcmp(cmd, subcommands[i].name))
			return subcommands[i].fn(argc - 1, argv + 1);
	}
	return vmio_cli_usage_error(NULL, "unknown command '%s'", cmd);
}
