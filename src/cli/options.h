/* Option parsing shared by every vmio subcommand: numbers with units, and
 * the options every vhost-user backend program takes (QEMU's "Backend
 * program conventions": --socket-path, --fd, --print-capabilities). */
#ifndef VMIO_CLI_OPTIONS_H
#define VMIO_CLI_OPTIONS_H

#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vhost-user/kick_guard.h"

/* Exit status for a command line that cannot be used. */
#define VMIO_EXIT_USAGE 2

/* Parses a non-negative integer: decimal or 0x hex, with an optional
 * binary unit suffix k, m or g (case-insensitive; "64k" = 65536). Rejects
 * signs, empty strings, trailing characters, and values above max.
 * Returns 0, or -EINVAL / -ERANGE. */
int vmio_parse_u64(const char *text, uint64_t max, uint64_t *out);

/* Names the option getopt_long just refused ('?' or ':'): a short one
 * inside a cluster ("-xy") by optopt, as "-x", not by the word it came
 * in; a long one as it was written. */
void vmio_cli_option_name(char **argv, char *buf, size_t size);

/* Parses a CPU list as taskset and cgroups write it: "0-3,8,10-11",
 * each CPU at most max_cpu and named once, into cpus (room for cap).
 * Returns the count, or -EINVAL (not a list, or a CPU twice) / -ERANGE
 * (a CPU above max_cpu, or more than cap of them). */
int vmio_parse_cpu_list(const char *text, unsigned max_cpu, unsigned *cpus,
			unsigned cap);

/* Options every backend subcommand accepts. */
struct vmio_backend_opts {
	const char *socket_path; /* --socket-path / --socket */
	int fd;                  /* --fd; -1 when absent */
	bool print_capabilities;
	uint16_t queue_size;     /* --queue-size: largest ring accepted */
	int verbosity;           /* -v (repeatable) raises, -q lowers */
	unsigned message_timeout_ms; /* --message-timeout */
	struct vmio_kick_budget idle_kicks; /* --idle-kicks */
	const char *control_path; /* --control: live counters, or NULL */
};

/* getopt_long codes of the common options; subcommands use codes below
 * VMIO_OPT_COMMON_BASE for their own long-only options. */
enum {
	VMIO_OPT_COMMON_BASE = 0x1000,
	VMIO_OPT_SOCKET_PATH,
	VMIO_OPT_FD,
	VMIO_OPT_PRINT_CAPS,
	VMIO_OPT_QUEUE_SIZE,
	VMIO_OPT_MESSAGE_TIMEOUT,
	VMIO_OPT_CONTROL,
	VMIO_OPT_IDLE_KICKS,
};

/* The struct option entries for the common options (with -h/--help,
 * -v/--verbose and -q/--quiet); append to a subcommand's own. */
#define VMIO_BACKEND_LONG_OPTIONS                                              \
	{ "socket-path", required_argument, NULL, VMIO_OPT_SOCKET_PATH },      \
	{ "socket", required_argument, NULL, VMIO_OPT_SOCKET_PATH },           \
	{ "fd", required_argument, NULL, VMIO_OPT_FD },                        \
	{ "print-capabilities", no_argument, NULL, VMIO_OPT_PRINT_CAPS },      \
	{ "queue-size", required_argument, NULL, VMIO_OPT_QUEUE_SIZE },        \
	{ "message-timeout", required_argument, NULL,                          \
	  VMIO_OPT_MESSAGE_TIMEOUT },                                          \
	{ "control", required_argument, NULL, VMIO_OPT_CONTROL },              \
	{ "idle-kicks", required_argument, NULL, VMIO_OPT_IDLE_KICKS },        \
	{ "help", no_argument, NULL, 'h' },                                    \
	{ "version", no_argument, NULL, 'V' },                                 \
	{ "verbose", no_argument, NULL, 'v' },                                 \
	{ "quiet", no_argument, NULL, 'q' }

#define VMIO_BACKEND_SHORT_OPTIONS "hvqV"

/* The help text lines for the common options. */
extern const char vmio_backend_opts_help[];

void vmio_backend_opts_init(struct vmio_backend_opts *o, uint16_t default_queue_size);

/* Handles one getopt_long result if it is a common option. Returns 1 if
 * handled, 0 if the code is not a common one, -1 on a bad value (with a
 * message in err). 'h' is not handled here: the subcommand prints help. */
int vmio_backend_opts_handle(struct vmio_backend_opts *o, int code,
			     const char *arg, char *err, size_t err_size);

/* Checks the combination once all options are parsed: exactly one of
 * --socket-path and --fd unless only capabilities are asked for. Returns
 * 0, or -1 with a message in err. */
int vmio_backend_opts_check(const struct vmio_backend_opts *o, char *err,
			    size_t err_size);

#endif
