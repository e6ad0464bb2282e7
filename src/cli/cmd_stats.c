/* `vmio stats`: connects to a --control socket, reads its one document
 * and prints it, indented, or as it came with --json. */
#include "cli/cmd_stats.h"

#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "cli/control.h"
#include "cli/options.h"
#include "cli/serve.h"
#include "util/log.h"

static const char stats_usage[] =
	"Usage: vmio stats [--json] [--timeout MS] PATH\n"
	"\n"
	"Prints the live counters of the vmio device that serves the control\n"
	"socket PATH (the option of that name of each device): vhost-user\n"
	"sessions and errors, per VM and per connection for vsock, per queue\n"
	"pair for net, per connection for redirect.\n"
	"\n"
	"Options:\n"
	"  --json               print the JSON document as it came, on one line\n"
	"  --timeout MS         give up after MS milliseconds (default 5000)\n"
	"  -h, --help           show this help\n"
	"\n"
	"Exit status: 0 printed; 1 the socket could not be read (no such\n"
	"socket, nobody serving it, timeout, a document cut short); 2 usage.\n";

/* Two spaces a level; strings (and what is escaped in them) untouched. */
static void print_pretty(const char *doc, size_t len)
{
	unsigned depth = 0;
	bool in_str = false, esc = false;

	for (size_t i = 0; i < len; i++) {
		char c = doc[i];

		if (in_str) {
			putchar(c);
			if (esc)
				esc = false;
			else if (c == '\\')
				esc = true;
			else if (c == '"')
				in_str = false;
			continue;
		}
		switch (c) {
		case '"':
			in_str = true;
			putchar(c);
			break;
		case '{':
		case '[':
			putchar(c);
			/* An empty one stays on its line. */
			if (i + 1 < len && doc[i + 1] == (c == '{' ? '}' : ']')) {
				putchar(doc[++i]);
				break;
			}
			depth++;
			printf("\n%*s", (int)depth * 2, "");
			break;
		case '}':
		case ']':
			if (depth)
				depth--;
			printf("\n%*s%c", (int)depth * 2, "", c);
			break;
		case ',':
			printf(",\n%*s", (int)depth * 2, "");
			break;
		case ':':
			fputs(": ", stdout);
			break;
		case '\n':
			break;
		default:
			putchar(c);
		}
	}
	putchar('\n');
}

/* Reads the whole document into *out (*len bytes). Returns 0, or an
 * error message. */
static const char *read_doc(const char *path, unsigned timeout_ms,
			    char **out, size_t *len)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct timeval tv = { .tv_sec = timeout_ms / 1000,
			      .tv_usec = (timeout_ms % 1000) * 1000 };
	size_t cap = VMIO_CONTROL_DOC_MAX + 2, got = 0;
	char *buf;
	int fd;

	if (strlen(path) >= sizeof(sa.sun_path))
		return "path too long for a unix socket";
	memcpy(sa.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return strerror(errno);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int e = errno;

		close(fd);
		return e == ECONNREFUSED ? "nothing serves it (connection refused)"
					 : strerror(e);
	}
	buf = malloc(cap);
	if (!buf) {
		close(fd);
		return "out of memory";
	}
	for (;;) {
		ssize_t n = read(fd, buf + got, cap - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int e = errno;

			close(fd);
			free(buf);
			return e == EAGAIN || e == EWOULDBLOCK ? "timed out"
							       : strerror(e);
		}
		if (!n)
			break;
		got += (size_t)n;
		if (got == cap) {
			close(fd);
			free(buf);
			return "the document is larger than any vmio sends";
		}
	}
	close(fd);
	while (got && (buf[got - 1] == '\n' || buf[got - 1] == '\r'))
		got--;
	if (!got || buf[0] != '{' || buf[got - 1] != '}') {
		free(buf);
		return got ? "the answer is no complete JSON object"
			   : "the socket closed without an answer (a slow "
			     "client is closed after 2 s; or not a vmio "
			     "control socket)";
	}
	/* What the server sends in place of a document past its cap. */
	if (!strncmp(buf, "{\"truncated\":true", 17)) {
		free(buf);
		return "the device's counters are larger than its control "
		       "socket sends";
	}
	*out = buf;
	*len = got;
	return NULL;
}

int vmio_cmd_stats(int argc, char **argv)
{
	enum { OPT_JSON = 0x100, OPT_TIMEOUT };
	static const struct option longopts[] = {
		{ "json", no_argument, NULL, OPT_JSON },
		{ "timeout", required_argument, NULL, OPT_TIMEOUT },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	bool raw = false;
	uint64_t timeout_ms = 5000;
	int c;

	opterr = 0;
	while ((c = getopt_long(argc, argv, "+h", longopts, NULL)) != -1) {
		switch (c) {
		case OPT_JSON:
			raw = true;
			break;
		case OPT_TIMEOUT:
			if (vmio_parse_u64(optarg, 3600000, &timeout_ms) ||
			    !timeout_ms)
				return vmio_cli_usage_error(
					"stats",
					"--timeout: '%s' is not a number of "
					"milliseconds from 1 to 3600000",
					optarg);
			break;
		case 'h':
			fputs(stats_usage, stdout);
			return 0;
		default: {
			char name[64];

			vmio_cli_option_name(argv, name, sizeof(name));
			return vmio_cli_usage_error("stats",
						    "unknown option '%s'", name);
		}
		}
	}
	if (optind + 1 != argc)
		return vmio_cli_usage_error(
			"stats", optind == argc ? "PATH is required"
						: "one PATH only");

	const char *path = argv[optind];
	char *doc = NULL;
	size_t len = 0;
	const char *why = read_doc(path, (unsigned)timeout_ms, &doc, &len);

	if (why) {
		vmio_log_raw(VMIO_LOG_ERR, "vmio stats: %s: %s", path, why);
		return 1;
	}
	if (raw) {
		fwrite(doc, 1, len, stdout);
		putchar('\n');
	} else {
		print_pretty(doc, len);
	}
	free(doc);
	return fflush(stdout) ? 1 : 0;
}
