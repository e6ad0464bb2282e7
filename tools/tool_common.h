/* What the tools in tools/ share beside option parsing (cli/options.h):
 * their messages and exit statuses. Each tool names itself once in
 * tool_name, so every message it prints starts the same way. */
#ifndef VMIO_TOOLS_TOOL_COMMON_H
#define VMIO_TOOLS_TOOL_COMMON_H

#include <stdnoreturn.h>

/* "vmio-vsock-bench", set by main before anything is printed. */
extern const char *tool_name;

/* Prints "NAME: <message>" and the hint to try --help on stderr; returns
 * the usage exit status (2), for main to return. */
int tool_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Prints "NAME: <message>" on stderr and exits with status 1. */
noreturn void tool_die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The end of every tool's option switch, for the codes it does not take
 * itself: 'h' prints usage on stdout (status 0), anything else is a usage
 * error (status 2). Returns the exit status, for main to return. */
int tool_other_option(int code, const char *usage);

/* Makes fd non-blocking, or dies. */
void tool_set_nonblock(int fd);

#endif
