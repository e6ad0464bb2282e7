/* The subcommands of the vmio binary and what they share. */
#ifndef VMIO_CLI_CLI_H
#define VMIO_CLI_CLI_H

#include "cli/options.h"
#include "event/loop.h"
#include "vhost-user/backend.h"

/* A subcommand's entry point: argv[0] is the subcommand's name. Returns
 * the process exit status. */
typedef int (*vmio_cmd_fn)(int argc, char **argv);

int vmio_cmd_loopback(int argc, char **argv);
int vmio_cmd_vsock(int argc, char **argv);
int vmio_cmd_net(int argc, char **argv);
int vmio_cmd_redirect(int argc, char **argv);

/* Applies -v/-q to the log level. */
void vmio_cli_set_verbosity(int verbosity);

/* Stops loop on SIGTERM or SIGINT, logging which, after calling on_stop
 * (may be NULL); ignores SIGPIPE. One watcher per process. Returns 0, or
 * -1 (logged). */
int vmio_cli_watch_signals(struct vmio_loop *loop, void (*on_stop)(void *),
			   void *opaque);
void vmio_cli_unwatch_signals(void);

/* Serves the backend as the options say (listen on --socket-path or adopt
 * --fd) until SIGTERM or SIGINT, or, with --fd, until that front end goes
 * away. Returns the exit status. */
int vmio_cli_serve(struct vmio_loop *loop, struct vmio_backend *be,
		   const struct vmio_backend_opts *o);

/* A backend subcommand's command line. */
struct vmio_backend_cmdline {
	const char *sub;   /* "net": for messages and --print-capabilities */
	const char *usage; /* help text printed before the common options' */
	const struct option *longopts; /* its own, then VMIO_BACKEND_LONG_OPTIONS */
	/* Handles one of its own options (getopt codes below
	 * VMIO_OPT_COMMON_BASE). Returns 0, or an exit status after
	 * reporting the error. NULL if it has none. */
	int (*own)(void *opaque, int code, const char *arg);
	/* Told of every option before it is handled, common ones too. May
	 * be NULL. */
	void (*seen)(void *opaque, int code);
	/* True if the options given so far name the backend sockets some
	 * other way (vsock's --vm), so that --socket-path or --fd is not
	 * required. May be NULL. */
	bool (*sockets_elsewhere)(void *opaque);
	void *opaque;
};

/* Parses argv into o and the subcommand's own options; applies -v/-q.
 * Returns -1 to go on, or an exit status: 0 after --help or
 * --print-capabilities, VMIO_EXIT_USAGE after a usage error. */
int vmio_cli_parse_backend(const struct vmio_backend_cmdline *cl, int argc,
			   char **argv, struct vmio_backend_opts *o);

/* Parses a subcommand's number option (name: "--mtu") in [min, max].
 * Returns 0, or reports a usage error of sub and returns its status. */
int vmio_cli_parse_num(const char *sub, const char *name, const char *arg,
		       uint64_t min, uint64_t max, uint64_t *out);

/* Reports a usage error: "vmio SUB: MESSAGE" and a hint to --help.
 * Returns VMIO_EXIT_USAGE. */
int vmio_cli_usage_error(const char *sub, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#endif
