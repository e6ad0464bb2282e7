/* vmio-drive: streams a byte pattern through a running `vmio loopback`
 * with the in-tree front end, and reports the throughput. What `make demo`
 * and `make bench` run. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/options.h"
#include "frontend/stream.h"
#include "tool_common.h"

#define CONNECT_TIMEOUT_MS 10000

static const char usage[] =
	"Usage: vmio-drive --socket PATH [options]\n"
	"\n"
	"Streams bytes through a running `vmio loopback` device: a pattern\n"
	"goes out on its tx queue and comes back on its rx queue.\n"
	"\n"
	"Options:\n"
	"  --socket PATH       the device's vhost-user socket (required)\n"
	"  --bytes N           bytes to move (default 1G; K, M, G suffixes)\n"
	"  --chunk N           bytes per buffer (default 64K)\n"
	"  --queue-size N      entries per queue, a power of two (default 256)\n"
	"  --mem N             guest memory (default: what the buffers need)\n"
	"  --regions N         memory table regions, 1-8 (default 1)\n"
	"  --verify            check every byte received\n"
	"  --remap-every N     re-send SET_MEM_TABLE every N bytes\n"
	"  --indirect          post chains as indirect descriptor tables\n"
	"  --segs N            buffers per chain (default 1)\n"
	"  -h, --help          this text\n";

struct drive_opts {
	const char *socket;
	struct vmio_stream_opts stream;
	uint64_t mem;
	uint64_t queue_size;
	uint64_t regions;
};

enum {
	OPT_SOCKET = 256,
	OPT_BYTES,
	OPT_CHUNK,
	OPT_QUEUE_SIZE,
	OPT_MEM,
	OPT_REGIONS,
	OPT_VERIFY,
	OPT_REMAP,
	OPT_INDIRECT,
	OPT_SEGS,
};

static int handle_size_opt(struct drive_opts *d, int c, const char *arg)
{
	uint64_t v;

	if (vmio_parse_u64(arg, UINT64_MAX, &v))
		return tool_usage_error("bad size '%s'", arg);
	switch (c) {
	case OPT_BYTES:
		d->stream.bytes = v;
		break;
	case OPT_CHUNK:
		if (v == 0 || v > (1u << 30))
			return tool_usage_error("--chunk must be 1..1G, not '%s'", arg);
		d->stream.tx_chunk = d->stream.rx_chunk = (uint32_t)v;
		break;
	case OPT_QUEUE_SIZE:
		if (v == 0 || v > VIRTQ_MAX_SIZE || (v & (v - 1)))
			return tool_usage_error("--queue-size must be a power of two up to 32768, not '%s'",
					 arg);
		d->queue_size = v;
		break;
	case OPT_MEM:
		d->mem = v;
		break;
	case OPT_REGIONS:
		if (v == 0 || v > VHOST_USER_MEM_TABLE_MAX_REGIONS)
			return tool_usage_error("--regions must be 1..8, not '%s'", arg);
		d->regions = v;
		break;
	case OPT_REMAP:
		d->stream.remap_every = v;
		break;
	case OPT_SEGS:
		if (v == 0 || v > 64)
			return tool_usage_error("--segs must be 1..64, not '%s'", arg);
		d->stream.segs = (unsigned)v;
		break;
	}
	return 0;
}

/* Returns -1 to go on, or an exit status. */
static int parse_args(int argc, char **argv, struct drive_opts *d)
{
	static const struct option longopts[] = {
		{ "socket", required_argument, NULL, OPT_SOCKET },
		{ "bytes", required_argument, NULL, OPT_BYTES },
		{ "chunk", required_argument, NULL, OPT_CHUNK },
		{ "queue-size", required_argument, NULL, OPT_QUEUE_SIZE },
		{ "mem", required_argument, NULL, OPT_MEM },
		{ "regions", required_argument, NULL, OPT_REGIONS },
		{ "verify", no_argument, NULL, OPT_VERIFY },
		{ "remap-every", required_argument, NULL, OPT_REMAP },
		{ "indirect", no_argument, NULL, OPT_INDIRECT },
		{ "segs", required_argument, NULL, OPT_SEGS },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c, r;

	opterr = 0;
	while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
		switch (c) {
		case 'h':
			fputs(usage, stdout);
			return 0;
		case OPT_SOCKET:
			d->socket = optarg;
			break;
		case OPT_VERIFY:
			d->stream.verify = true;
			break;
		case OPT_INDIRECT:
			d->stream.indirect = true;
			break;
		case ':':
			return tool_usage_error("option '%s' needs a value",
					 argv[optind - 1]);
		case '?':
			return tool_usage_error("unknown option '%s'", argv[optind - 1]);
		default:
			r = handle_size_opt(d, c, optarg);
			if (r)
				return r;
		}
	}
	if (optind < argc)
		return tool_usage_error("unexpected argument '%s'", argv[optind]);
	if (!d->socket)
		return tool_usage_error("%s", "--socket PATH is required");
	return -1;
}

int main(int argc, char **argv)
{
	struct drive_opts d = { .queue_size = 256, .regions = 1 };
	struct vmio_stream_result res;
	struct vmio_fe *fe;
	char err[256];
	int r;

	tool_name = "vmio-drive";
	vmio_stream_opts_init(&d.stream);
	r = parse_args(argc, argv, &d);
	if (r >= 0)
		return r;
	/* A backend that goes away mid-stream is an error we report, not a
	 * signal that kills us silently. */
	signal(SIGPIPE, SIG_IGN);

	uint64_t need = vmio_stream_mem_needed(&d.stream,
					       (uint16_t)d.queue_size);
	if (!d.mem)
		d.mem = need;
	if (d.mem < need) {
		fprintf(stderr, "vmio-drive: --mem %" PRIu64 " is too small: these buffers need %" PRIu64 " bytes\n",
			d.mem, need);
		return 1;
	}
	fe = vmio_stream_connect(d.socket, CONNECT_TIMEOUT_MS, d.mem,
				 (unsigned)d.regions, (uint16_t)d.queue_size,
				 err, sizeof(err));
	if (!fe) {
		fprintf(stderr, "vmio-drive: %s\n", err);
		return 1;
	}
	r = vmio_stream_run(fe, &d.stream, &res);
	vmio_fe_close(fe);
	if (r) {
		fprintf(stderr, "vmio-drive: after %" PRIu64 " bytes: %s\n",
			res.bytes, res.error);
		return 1;
	}
	printf("moved %" PRIu64 " bytes in %.3f s: %.1f MB/s%s\n", res.bytes,
	       res.seconds,
	       res.seconds > 0 ? (double)res.bytes / res.seconds / 1e6 : 0.0,
	       d.stream.verify ? " (every byte checked)" : "");
	return 0;
}
