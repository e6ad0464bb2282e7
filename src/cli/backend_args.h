/* The command line every backend subcommand shares (backend_args.c). */
#ifndef VMIO_CLI_BACKEND_ARGS_H
#define VMIO_CLI_BACKEND_ARGS_H

#include <stdbool.h>
#include <stdint.h>

#include "cli/options.h"

/* A backend subcommand's command line. */
struct vmio_backend_cmdline {
	const char *sub;   /* "net": for messages */
	/* The device type QEMU's vhost-user.json names ("vsock", "net") for
	 * --print-capabilities, or NULL: a device QEMU has no type for. */
	const char *qemu_type;
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

/* Reports a usage error of sub unless the directory path's socket is to
 * be made in exists. name: the option, for the message. Returns 0 or the
 * usage status. */
int vmio_cli_check_socket_dir(const char *sub, const char *name,
			      const char *path);

/* Parses a subcommand's number option (name: "--mtu") in [min, max].
 * Returns 0, or reports a usage error of sub and returns its status. */
int vmio_cli_parse_num(const char *sub, const char *name, const char *arg,
		       uint64_t min, uint64_t max, uint64_t *out);

#endif
