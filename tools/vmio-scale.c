/* vmio-scale: `vmio vsock` at scale, without a VM. This process plays
 * many guests at once with the in-tree front end (frontend/vsock_guest.h,
 * one driver per VM of the --config file vmio was started with), and
 * forked children play the host programs (scale_host.h). What the scale
 * section of `make bench` runs (scripts/bench-scale.sh):
 *
 *   idle     many idle connections per VM: vmio's memory and descriptors
 *            per connection and the time to open them; then a few VMs
 *            streaming among them against the same streams through a
 *            second vmio that serves nothing else (scale_idle.h)
 *   latency  request/response round trips of many VMs, beside one VM
 *            streaming and beside it idle (scale_latency.h)
 *   handover the pause a hand-over costs streaming guests, and what it
 *            leaks after many in a row (scale_handover.h) */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "cli/options.h"
#include "scale_handover.h"
#include "scale_idle.h"
#include "scale_latency.h"
#include "tool_common.h"
#include "vsock_transfer.h"

static const char usage[] =
	"Usage: vmio-scale idle --config FILE --pid PID [options]\n"
	"       vmio-scale latency --config FILE [options]\n"
	"       vmio-scale handover --config FILE --vmio PATH --control PATH\n"
	"                           [options] [-- VSOCK-OPTIONS]\n"
	"\n"
	"Drives a running `vmio vsock --config FILE` (the same FILE) with one\n"
	"in-tree guest per VM in this process; host programs listen at each\n"
	"VM's <uds-path>_<port> in child processes. Prints key=value lines.\n"
	"\n"
	"idle: CONNS established idle guest-to-host connections per VM, held\n"
	"by the host side; vmio's VmRSS and descriptors before and after, and\n"
	"the time to open them all. With --busy N, then N of the VMs stream\n"
	"(one new connection each) while the rest stay idle, against N VMs\n"
	"of a second vmio (--alone-config, --alone-pid) streaming alone, in\n"
	"--pairs rounds of one run each; vmio's CPU seconds over each run.\n"
	"  --config FILE        vmio A's VMs (required)\n"
	"  --pid PID            vmio A's process (required)\n"
	"  --conns N            idle connections per VM (default 1024)\n"
	"  --window N           REQUESTs outstanding per guest (default 64)\n"
	"  --busy N             streaming VMs, 0-64 (default 0: none)\n"
	"  --alone-config FILE  vmio B's VMs; the first N stream\n"
	"  --alone-pid PID      vmio B's process\n"
	"  --pairs N            A B rounds (default 5)\n"
	"  --bytes N            bytes per run, all streams (default 2G)\n"
	"  --msg-size N         bytes per write (default 64K)\n"
	"\n"
	"latency: one VM (--bulk-vm) streams from a child process, phase by\n"
	"phase, while every other VM does request/response, one outstanding\n"
	"each; p50 and p99 of the round trips beside the streamer idle and\n"
	"running.\n"
	"  --config FILE        the VMs (required, at least 2)\n"
	"  --bulk-vm I          the streaming VM's index in FILE (default 0)\n"
	"  --rounds N           idle and running phases each (default 3)\n"
	"  --phase-ms MS        length of a phase (default 2000)\n"
	"  --msg-size N         request and response bytes (default 64)\n"
	"  --bulk-msg N         the streamer's writes (default 64K)\n"
	"\n"
	"handover: starts `vmio vsock --control PATH --config FILE` and the\n"
	"VSOCK-OPTIONS itself (and waits for each successor), opens --conns\n"
	"connections per VM, --streams of them two-way streams (every byte\n"
	"checked), and reloads it (`vmio reload PATH`) --reloads times while\n"
	"they stream: each reload's pause (the largest gap between two reads\n"
	"of a stream across it), the time `vmio reload` took, and vmio's CPU\n"
	"time for it (the old process's to its exit, the successor's). Then\n"
	"--leak-reloads in a row with the streams quiet: the serving vmio's\n"
	"descriptors and mappings before and after (status 1 if they differ).\n"
	"  --config FILE        the VMs (required)\n"
	"  --vmio PATH          the vmio binary (required)\n"
	"  --control PATH       its --control socket (required)\n"
	"  --log FILE           vmio's stderr (default: ours)\n"
	"  --conns N            connections per VM, streams included (default 64)\n"
	"  --window N           REQUESTs outstanding per guest (default 64)\n"
	"  --streams N          two-way streams, spread over the VMs (default 4)\n"
	"  --rate N             bytes a second per stream each way (default\n"
	"                       8M; 0: as fast as they go)\n"
	"  --reloads N          reloads while streaming (default 20)\n"
	"  --leak-reloads N     reloads in a row after (default 0)\n"
	"  --settle-ms MS       streaming between reloads (default 300)\n"
	"\n"
	"  -h, --help           this text\n";

enum {
	OPT_CONFIG = 256, OPT_PID, OPT_CONNS, OPT_WINDOW, OPT_BUSY,
	OPT_ALONE_CONFIG, OPT_ALONE_PID, OPT_PAIRS, OPT_BYTES, OPT_MSG,
	OPT_BULK_VM, OPT_ROUNDS, OPT_PHASE, OPT_BULK_MSG, OPT_VMIO,
	OPT_CONTROL, OPT_LOG, OPT_STREAMS, OPT_RATE, OPT_RELOADS,
	OPT_LEAK_RELOADS, OPT_SETTLE, OPT_END,
};

/* The subcommands, as bits: which take each option. */
enum { IDLE = 1, LATENCY = 2, HANDOVER = 4 };
static const unsigned char takes[OPT_END - OPT_CONFIG] = {
	[OPT_CONFIG - OPT_CONFIG] = IDLE | LATENCY | HANDOVER,
	[OPT_PID - OPT_CONFIG] = IDLE,
	[OPT_CONNS - OPT_CONFIG] = IDLE | HANDOVER,
	[OPT_WINDOW - OPT_CONFIG] = IDLE | HANDOVER,
	[OPT_BUSY - OPT_CONFIG] = IDLE,
	[OPT_ALONE_CONFIG - OPT_CONFIG] = IDLE,
	[OPT_ALONE_PID - OPT_CONFIG] = IDLE,
	[OPT_PAIRS - OPT_CONFIG] = IDLE,
	[OPT_BYTES - OPT_CONFIG] = IDLE,
	[OPT_MSG - OPT_CONFIG] = IDLE | LATENCY,
	[OPT_BULK_VM - OPT_CONFIG] = LATENCY,
	[OPT_ROUNDS - OPT_CONFIG] = LATENCY,
	[OPT_PHASE - OPT_CONFIG] = LATENCY,
	[OPT_BULK_MSG - OPT_CONFIG] = LATENCY,
	[OPT_VMIO - OPT_CONFIG] = HANDOVER,
	[OPT_CONTROL - OPT_CONFIG] = HANDOVER,
	[OPT_LOG - OPT_CONFIG] = HANDOVER,
	[OPT_STREAMS - OPT_CONFIG] = HANDOVER,
	[OPT_RATE - OPT_CONFIG] = HANDOVER,
	[OPT_RELOADS - OPT_CONFIG] = HANDOVER,
	[OPT_LEAK_RELOADS - OPT_CONFIG] = HANDOVER,
	[OPT_SETTLE - OPT_CONFIG] = HANDOVER,
};

/* A number option within [min, max], or a usage error naming it. */
static int number(const char *name, const char *arg, uint64_t min,
		  uint64_t max, uint64_t *out)
{
	if (vmio_parse_u64(arg, max, out) || *out < min) {
		tool_usage_error("--%s: %s is not %llu to %llu", name, arg,
				 (unsigned long long)min,
				 (unsigned long long)max);
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "config", required_argument, NULL, OPT_CONFIG },
		{ "pid", required_argument, NULL, OPT_PID },
		{ "conns", required_argument, NULL, OPT_CONNS },
		{ "window", required_argument, NULL, OPT_WINDOW },
		{ "busy", required_argument, NULL, OPT_BUSY },
		{ "alone-config", required_argument, NULL, OPT_ALONE_CONFIG },
		{ "alone-pid", required_argument, NULL, OPT_ALONE_PID },
		{ "pairs", required_argument, NULL, OPT_PAIRS },
		{ "bytes", required_argument, NULL, OPT_BYTES },
		{ "msg-size", required_argument, NULL, OPT_MSG },
		{ "bulk-vm", required_argument, NULL, OPT_BULK_VM },
		{ "rounds", required_argument, NULL, OPT_ROUNDS },
		{ "phase-ms", required_argument, NULL, OPT_PHASE },
		{ "bulk-msg", required_argument, NULL, OPT_BULK_MSG },
		{ "vmio", required_argument, NULL, OPT_VMIO },
		{ "control", required_argument, NULL, OPT_CONTROL },
		{ "log", required_argument, NULL, OPT_LOG },
		{ "streams", required_argument, NULL, OPT_STREAMS },
		{ "rate", required_argument, NULL, OPT_RATE },
		{ "reloads", required_argument, NULL, OPT_RELOADS },
		{ "leak-reloads", required_argument, NULL, OPT_LEAK_RELOADS },
		{ "settle-ms", required_argument, NULL, OPT_SETTLE },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct scale_idle_opts io = {
		.conns = 1024, .window = 64, .pairs = 5, .bytes = 2ull << 30,
		.msg = 65536,
	};
	struct scale_latency_opts lo = {
		.rounds = 3, .phase_ms = 2000, .msg = 64, .bulk_msg = 65536,
	};
	struct scale_handover_opts ho = {
		.conns = 64, .window = 64, .streams = 4, .rate = 8000000,
		.reloads = 20, .settle_ms = 300,
	};
	const char *wrong = NULL; /* an option of another subcommand */
	unsigned cmd;
	uint64_t v;
	int c;

	tool_name = "vmio-scale";
	if (argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
		fputs(usage, stdout);
		return 0;
	}
	cmd = argc < 2                        ? 0
	      : !strcmp(argv[1], "idle")     ? IDLE
	      : !strcmp(argv[1], "latency")  ? LATENCY
	      : !strcmp(argv[1], "handover") ? HANDOVER
					     : 0;
	if (!cmd)
		return tool_usage_error("idle, latency or handover first");
	optind = 2;
	int li = -1;

	while ((c = getopt_long(argc, argv, "+h", longopts, &li)) != -1) {
		if (c >= OPT_CONFIG && c < OPT_END &&
		    !(takes[c - OPT_CONFIG] & cmd) && li >= 0)
			wrong = longopts[li].name;
		switch (c) {
		case OPT_CONFIG:
			io.config = lo.config = ho.config = optarg;
			break;
		case OPT_VMIO:
			ho.vmio = optarg;
			break;
		case OPT_CONTROL:
			ho.control = optarg;
			break;
		case OPT_LOG:
			ho.log = optarg;
			break;
		case OPT_STREAMS:
			if (number("streams", optarg, 1, 16, &v))
				return VMIO_EXIT_USAGE;
			ho.streams = (unsigned)v;
			break;
		case OPT_RATE:
			if (number("rate", optarg, 0, UINT32_MAX, &ho.rate))
				return VMIO_EXIT_USAGE;
			break;
		case OPT_RELOADS:
		case OPT_LEAK_RELOADS:
			if (number(c == OPT_RELOADS ? "reloads"
						    : "leak-reloads",
				   optarg, 0, 100000, &v))
				return VMIO_EXIT_USAGE;
			*(c == OPT_RELOADS ? &ho.reloads : &ho.leak_reloads) =
				(unsigned)v;
			break;
		case OPT_SETTLE:
			if (number("settle-ms", optarg, 10, 60000,
				   &ho.settle_ms))
				return VMIO_EXIT_USAGE;
			break;
		case OPT_ALONE_CONFIG:
			io.alone_config = optarg;
			break;
		case OPT_PID:
		case OPT_ALONE_PID:
			if (number(c == OPT_PID ? "pid" : "alone-pid", optarg,
				   1, INT32_MAX, &v))
				return VMIO_EXIT_USAGE;
			*(c == OPT_PID ? &io.pid : &io.alone_pid) = (pid_t)v;
			break;
		case OPT_CONNS:
			if (number("conns", optarg, 1, 1u << 20, &v))
				return VMIO_EXIT_USAGE;
			io.conns = ho.conns = (unsigned)v;
			break;
		case OPT_WINDOW:
			if (number("window", optarg, 1, 4096, &v))
				return VMIO_EXIT_USAGE;
			io.window = ho.window = (unsigned)v;
			break;
		case OPT_BUSY:
			if (number("busy", optarg, 0, XFER_MAX_CONNS, &v))
				return VMIO_EXIT_USAGE;
			io.busy = (unsigned)v;
			break;
		case OPT_PAIRS:
		case OPT_ROUNDS:
			if (number(c == OPT_PAIRS ? "pairs" : "rounds", optarg,
				   1, 1000, &v))
				return VMIO_EXIT_USAGE;
			io.pairs = lo.rounds = (unsigned)v;
			break;
		case OPT_BYTES:
			if (number("bytes", optarg, 1, UINT64_MAX, &io.bytes))
				return VMIO_EXIT_USAGE;
			break;
		case OPT_MSG:
			if (number("msg-size", optarg, 1, XFER_MAX_MSG, &v))
				return VMIO_EXIT_USAGE;
			io.msg = lo.msg = v;
			break;
		case OPT_BULK_VM:
			if (number("bulk-vm", optarg, 0, 1000, &v))
				return VMIO_EXIT_USAGE;
			lo.bulk_vm = (unsigned)v;
			break;
		case OPT_PHASE:
			if (number("phase-ms", optarg, 10, 3600000,
				   &lo.phase_ms))
				return VMIO_EXIT_USAGE;
			break;
		case OPT_BULK_MSG:
			if (number("bulk-msg", optarg, 1, XFER_MAX_MSG,
				   &lo.bulk_msg))
				return VMIO_EXIT_USAGE;
			break;
		default:
			return tool_other_option(c, usage);
		}
	}
	/* handover: what follows "--" is vmio's. */
	if (cmd == HANDOVER && optind > 2 && !strcmp(argv[optind - 1], "--")) {
		ho.vmio_args = argv + optind;
		ho.n_vmio_args = (unsigned)(argc - optind);
		optind = argc;
	}
	if (optind < argc)
		return tool_usage_error("unexpected argument: %s", argv[optind]);
	if (wrong)
		return tool_usage_error("--%s: not an option of %s", wrong,
					argv[1]);
	if (!io.config)
		return tool_usage_error("--config FILE is needed");
	/* The host children report a peer that went away; not a signal. */
	signal(SIGPIPE, SIG_IGN);
	if (cmd == LATENCY)
		return scale_latency(&lo);
	if (cmd == HANDOVER) {
		if (!ho.vmio || !ho.control)
			return tool_usage_error("handover: --vmio PATH and "
						"--control PATH are needed");
		return scale_handover(&ho);
	}
	if (!io.pid)
		return tool_usage_error("idle: --pid PID (vmio's) is needed");
	if (io.busy && (!io.alone_config || !io.alone_pid))
		return tool_usage_error("--busy: --alone-config and "
					"--alone-pid are needed");
	return scale_idle(&io);
}
