/* See tool_common.h. */
#include "tool_common.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/options.h"

const char *tool_name = "vmio-tool";

/* "NAME: <message>" on stderr, without the newline. */
static void __attribute__((format(printf, 1, 0))) say(const char *fmt,
						      va_list ap)
{
	fprintf(stderr, "%s: ", tool_name);
	vfprintf(stderr, fmt, ap);
}

int tool_usage_error(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	say(fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nTry '%s --help'.\n", tool_name);
	return VMIO_EXIT_USAGE;
}

void tool_die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	say(fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

int tool_other_option(int code, const char *usage)
{
	if (code == 'h') {
		fputs(usage, stdout);
		return 0;
	}
	return tool_usage_error("bad option");
}

void tool_set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		tool_die("fcntl: %s", strerror(errno));
}
