#include "cli/options.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vhost-user/protocol.h"
#include "virtio/ring.h"

int vmio_parse_u64(const char *text, uint64_t max, uint64_t *out)
{
	if (!text || !isdigit((unsigned char)text[0]))
		return -EINVAL;

	char *end;
	errno = 0;
	unsigned long long v = strtoull(text, &end, 0);
	if (errno == ERANGE)
		return -ERANGE;
	if (errno || end == text)
		return -EINVAL;

	unsigned shift = 0;
	switch (tolower((unsigned char)*end)) {
	case 'k':
		shift = 10;
		end++;
		break;
	case 'm':
		shift = 20;
		end++;
		break;
	case 'g':
		shift = 30;
		end++;
		break;
	}
	if (*end != '\0')
		return -EINVAL;
	if (shift && v > (UINT64_MAX >> shift))
		return -ERANGE;
	v <<= shift;
	if (v > max)
		return -ERANGE;
	*out = v;
	return 0;
}

void vmio_cli_option_name(char **argv, char *buf, size_t size)
{
	if (optopt && optopt != '?')
		snprintf(buf, size, "-%c", optopt);
	else
		snprintf(buf, size, "%s", argv[optind - 1]);
}

/* One number of a CPU list: digits only, no unit. */
static int parse_cpu(const char **p, unsigned max_cpu, unsigned *out)
{
	unsigned long v = 0;

	if (!isdigit((unsigned char)**p))
		return -EINVAL;
	while (isdigit((unsigned char)**p)) {
		v = v * 10 + (unsigned long)(**p - '0');
		if (v > max_cpu)
			return -ERANGE;
		(*p)++;
	}
	*out = (unsigned)v;
	return 0;
}

int vmio_parse_cpu_list(const char *text, unsigned max_cpu, unsigned *cpus,
			unsigned cap)
{
	const char *p = text;
	unsigned n = 0;

	for (;;) {
		unsigned lo, hi;
		int rc = parse_cpu(&p, max_cpu, &lo);

		if (rc)
			return rc;
		hi = lo;
		if (*p == '-') {
			p++;
			rc = parse_cpu(&p, max_cpu, &hi);
			if (rc)
				return rc;
			if (hi < lo)
				return -EINVAL;
		}
		for (unsigned c = lo; c <= hi; c++) {
			for (unsigned k = 0; k < n; k++)
				if (cpus[k] == c)
					return -EINVAL;
			if (n == cap)
				return -ERANGE;
			cpus[n++] = c;
		}
		if (!*p)
			return (int)n;
		if (*p++ != ',')
			return -EINVAL;
	}
}

const char vmio_backend_opts_help[] =
	"  --socket-path PATH   listen for the VMM on the unix socket PATH\n"
	"                       (also spelled --socket)\n"
	"  --fd N               serve the already-connected socket N instead\n"
	"                       (and exit when it closes), or accept VMMs on\n"
	"                       N if it is a listening socket (systemd socket\n"
	"                       activation)\n"
	"  --print-capabilities print the backend's capabilities as JSON and exit\n"
	"  --queue-size N       largest virtqueue accepted, a power of two\n"
	"                       up to 32768\n"
	"  --message-timeout MS how long the VMM may take to finish a vhost-user\n"
	"                       message it started, or to read the replies\n"
	"                       waiting for it, before its connection is closed\n"
	"                       (default 1000)\n"
	"  --idle-kicks RATE[:BURST]\n"
	"                       kicks that find no new work in the ring served\n"
	"                       at once, per queue: RATE a second, BURST at\n"
	"                       a time (default 2000:512); past that the queue\n"
	"                       is looked at on a timer until the kicks stop or\n"
	"                       bring work (0: serve every kick)\n"
	"  --control PATH       answer each connection to the unix socket PATH\n"
	"                       with the live counters as JSON (vmio stats PATH)\n"
	"  -v, --verbose        log more (repeat for debug messages)\n"
	"  -q, --quiet          log errors only\n"
	"  -h, --help           show this help\n"
	"  -V, --version        print vmio's version\n";

void vmio_backend_opts_init(struct vmio_backend_opts *o, uint16_t default_queue_size)
{
	*o = (struct vmio_backend_opts){
		.fd = -1,
		.queue_size = default_queue_size,
		.message_timeout_ms = VHOST_USER_MSG_TIMEOUT_MS,
		.idle_kicks = { VMIO_KICK_IDLE_RATE, VMIO_KICK_IDLE_BURST },
	};
}

static int parse_queue_size(const char *arg, uint16_t *out)
{
	uint64_t v;
	if (vmio_parse_u64(arg, VIRTQ_MAX_SIZE, &v) || v == 0 || (v & (v - 1)))
		return -1;
	*out = (uint16_t)v;
	return 0;
}

static int parse_fd(const char *arg, int *out)
{
	uint64_t v;
	if (vmio_parse_u64(arg, INT32_MAX, &v))
		return -1;
	*out = (int)v;
	return 0;
}

int vmio_backend_opts_handle(struct vmio_backend_opts *o, int code,
			     const char *arg, char *err, size_t err_size)
{
	switch (code) {
	case VMIO_OPT_SOCKET_PATH:
		if (!arg[0]) {
			snprintf(err, err_size, "--socket-path: empty path");
			return -1;
		}
		o->socket_path = arg;
		return 1;
	case VMIO_OPT_FD:
		if (parse_fd(arg, &o->fd)) {
			snprintf(err, err_size,
				 "--fd: '%s' is not a file descriptor number", arg);
			return -1;
		}
		return 1;
	case VMIO_OPT_PRINT_CAPS:
		o->print_capabilities = true;
		return 1;
	case VMIO_OPT_QUEUE_SIZE:
		if (parse_queue_size(arg, &o->queue_size)) {
			snprintf(err, err_size,
				 "--queue-size: '%s' is not a power of two between 1 and %u",
				 arg, VIRTQ_MAX_SIZE);
			return -1;
		}
		return 1;
	case VMIO_OPT_MESSAGE_TIMEOUT: {
		uint64_t ms;
		if (vmio_parse_u64(arg, 3600000, &ms) || ms == 0) {
			snprintf(err, err_size,
				 "--message-timeout: '%s' is not a number of "
				 "milliseconds from 1 to 3600000",
				 arg);
			return -1;
		}
		o->message_timeout_ms = (unsigned)ms;
		return 1;
	}
	case VMIO_OPT_CONTROL:
		o->control_path = arg;
		return 1;
	case VMIO_OPT_IDLE_KICKS:
		if (vmio_kick_budget_parse(arg, &o->idle_kicks)) {
			snprintf(err, err_size,
				 "--idle-kicks: '%s' is not RATE or RATE:BURST "
				 "(RATE 0 to %u a second, BURST 1 to %u)",
				 arg, VMIO_KICK_IDLE_RATE_MAX,
				 VMIO_KICK_IDLE_RATE_MAX);
			return -1;
		}
		return 1;
	case 'v':
		o->verbosity++;
		return 1;
	case 'q':
		o->verbosity = -1;
		return 1;
	}
	return 0;
}

int vmio_backend_opts_check(const struct vmio_backend_opts *o, char *err,
			    size_t err_size)
{
	if (o->print_capabilities)
		return 0;
	if (o->socket_path && o->fd >= 0) {
		snprintf(err, err_size, "--socket-path and --fd exclude each other");
		return -1;
	}
	if (!o->socket_path && o->fd < 0) {
		snprintf(err, err_size, "one of --socket-path PATH or --fd N is required");
		return -1;
	}
	return 0;
}
