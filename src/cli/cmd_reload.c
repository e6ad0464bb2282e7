/* `vmio reload`: asks a running vmio, on its --control socket, to hand
 * over to the binary now installed where it was started from, and says
 * how that went (control.h has the exchange). */
#include "cli/cmd_reload.h"

#include <errno.h>
#include <getopt.h>
#include <stddef.h>
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

static const char reload_usage[] =
	"Usage: vmio reload [--timeout MS] [--control] PATH\n"
	"\n"
	"Asks the vmio serving the control socket PATH (its --control) to\n"
	"hand over to the binary now installed at the path it was started\n"
	"from, as SIGHUP does, and waits for the outcome. `vmio vsock`\n"
	"hands over every VM's session, connection and byte; `vmio net` its\n"
	"session, TAP queues and control state (--tap, --null; --xdp answers\n"
	"that it cannot yet); `vmio redirect` its listening sockets (its open\n"
	"relays finish in the old process).\n"
	"\n"
	"Options:\n"
	"  --timeout MS   give up after MS milliseconds (default 60000)\n"
	"  -h, --help     show this help\n"
	"\n"
	"Exit status: 0 a new vmio took over (its pid is printed); 1 it did\n"
	"not (the reason is printed; the old one goes on serving) or the\n"
	"socket could not be asked; 2 usage.\n";

/* The request is the name this end is bound to (control.h). */
static int bind_request(int fd)
{
	struct sockaddr_un me = { .sun_family = AF_UNIX };
	int n = snprintf(me.sun_path + 1, sizeof(me.sun_path) - 1, "%s%d",
			 VMIO_CONTROL_RELOAD_NAME, (int)getpid());

	return bind(fd, (struct sockaddr *)&me,
		    (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 +
				(size_t)n));
}

/* One exchange: connect as a reload client, read the answer to EOF into
 * buf. Returns NULL, or what went wrong. */
static const char *ask(const char *path, unsigned timeout_ms, char *buf,
		       size_t size)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct timeval tv = { .tv_sec = timeout_ms / 1000,
			      .tv_usec = (timeout_ms % 1000) * 1000 };
	size_t got = 0;
	int fd, err = 0;

	if (strlen(path) >= sizeof(sa.sun_path))
		return "path too long for a unix socket";
	strcpy(sa.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return strerror(errno);
	/* The CLI waits: blocking calls, bounded by the timeout. */
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (bind_request(fd) < 0 ||
	    connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		err = errno;
	while (!err && got + 1 < size) {
		ssize_t n = read(fd, buf + got, size - 1 - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			err = errno;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	close(fd);
	buf[got] = '\0';
	if (err == EAGAIN || err == EWOULDBLOCK)
		return "timed out waiting for the outcome";
	if (err == ECONNREFUSED)
		return "nothing serves it (connection refused)";
	return err ? strerror(err) : NULL;
}

/* The string value of key in a one-line JSON object, escapes kept. */
static const char *field(char *doc, const char *key)
{
	char pat[32];
	char *p, *end;

	snprintf(pat, sizeof(pat), "\"%s\":\"", key);
	p = strstr(doc, pat);
	if (!p)
		return NULL;
	p += strlen(pat);
	for (end = p; *end && *end != '"'; end++)
		if (*end == '\\' && end[1])
			end++;
	*end = '\0';
	return p;
}

static int report(const char *path, char *answer)
{
	static const char ok[] = "{\"reload\":\"ok\",\"pid\":";
	const char *why;

	if (!strncmp(answer, ok, sizeof(ok) - 1)) {
		printf("vmio reload: %s: handed over to pid %ld\n", path,
		       strtol(answer + sizeof(ok) - 1, NULL, 10));
		return 0;
	}
	why = field(answer, "error");
	vmio_log_raw(VMIO_LOG_ERR, "vmio reload: %s: hand-over failed: %s",
		     path, why ? why : "(no reason given)");
	return 1;
}

int vmio_cmd_reload(int argc, char **argv)
{
	enum { OPT_TIMEOUT = 0x100, OPT_CONTROL };
	static const struct option longopts[] = {
		{ "timeout", required_argument, NULL, OPT_TIMEOUT },
		{ "control", required_argument, NULL, OPT_CONTROL },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *path = NULL, *why = NULL;
	uint64_t timeout_ms = 60000;
	char answer[4096], name[64];
	int c;

	opterr = 0;
	while ((c = getopt_long(argc, argv, "+h", longopts, NULL)) != -1) {
		switch (c) {
		case OPT_TIMEOUT:
			if (vmio_parse_u64(optarg, 3600000, &timeout_ms) ||
			    !timeout_ms)
				return vmio_cli_usage_error("reload",
					"--timeout: '%s' is not 1 to 3600000 ms",
					optarg);
			break;
		case OPT_CONTROL:
			path = optarg;
			break;
		case 'h':
			fputs(reload_usage, stdout);
			return 0;
		default:
			vmio_cli_option_name(argv, name, sizeof(name));
			return vmio_cli_usage_error("reload",
						    "unknown option '%s'", name);
		}
	}
	if (!path && optind < argc)
		path = argv[optind++];
	if (!path || optind != argc)
		return vmio_cli_usage_error("reload", path ? "one PATH only"
							   : "PATH is required");
	why = ask(path, (unsigned)timeout_ms, answer, sizeof(answer));
	if (why) {
		vmio_log_raw(VMIO_LOG_ERR, "vmio reload: %s: %s", path, why);
		return 1;
	}
	if (strncmp(answer, "{\"reload\":", 10)) {
		vmio_log_raw(VMIO_LOG_ERR,
			     "vmio reload: %s: no answer to the request (%s)",
			     path, answer[0] ? "a vmio that cannot hand over?"
					     : "the socket closed without one");
		return 1;
	}
	return report(path, answer);
}
