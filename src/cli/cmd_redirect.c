/* `vmio redirect`: socat's two-address relay. ADDRESS1 listens (or
 * connects, or receives datagrams); for each connection it yields,
 * ADDRESS2 is connected and the two are relayed (redirect/connection.h). `fork`
 * means "keep accepting", not a process per connection: the connections
 * of one process are dealt out over its worker threads, each relayed on
 * one worker's loop, and ADDRESS1 stays on worker 0. */
#include "cli/cmd_redirect.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/backend_args.h"
#include "cli/control.h"
#include "cli/redirect_handover.h"
#include "handover/takeover.h"
#include "redirect/connection.h"
#include "util/json.h"
#include "cli/serve.h"
#include "cli/workers_args.h"
#include "event/workers.h"
#include "redirect/address.h"
#include "redirect/endpoint.h"
#include "redirect/engine_choice.h"
#include "redirect/first_connection.h"
#include "redirect/listener.h"
#include "redirect/relay.h"
#include "redirect/sockmap.h"
#include "util/log.h"
#include "util/sd_notify.h"

static const char redirect_usage[] =
	"Usage: vmio redirect [options] ADDRESS1 ADDRESS2\n"
	"\n"
	"Relays between two sockets, as `socat ADDRESS1 ADDRESS2` does:\n"
	"ADDRESS1 listens (or connects); for each connection on it, ADDRESS2\n"
	"is connected and bytes flow both ways until both sides are done.\n"
	"\n"
	"Addresses (keywords are case-insensitive):\n"
	"  UNIX-LISTEN:path         listen on a unix stream socket\n"
	"  UNIX-CONNECT:path        connect to a unix stream socket\n"
	"  UNIX-CLIENT:path         the same, or a datagram socket if the\n"
	"                           peer at path is one\n"
	"  UNIX-RECV:path           (ADDRESS1 only) bind a unix datagram\n"
	"                           socket and relay what it receives at once,\n"
	"                           one way: ADDRESS2's data is not read. An\n"
	"                           empty datagram is EOF, as in socat\n"
	"  UNIX-SENDTO:path         send datagrams to the socket at path\n"
	"                           (bind=path: where replies come back)\n"
	"  TCP-LISTEN:port          listen on TCP, IPv6 and IPv4 (dual-stack on\n"
	"                           ::, IPv4 alone without IPv6); TCP4-LISTEN:\n"
	"                           IPv4 only, TCP6-LISTEN: IPv6 only\n"
	"  TCP:host:port            connect over TCP (TCP4:, TCP6:[addr]:port)\n"
	"  VSOCK-LISTEN:port        listen on a vsock stream socket (any CID)\n"
	"  VSOCK-CONNECT:cid:port   connect over vsock (CID 2: the host)\n"
	"  STDIO, -                 read stdin, write stdout (one connection)\n"
	"socat's aliases are taken: UNIX-L, UNIX (UNIX-CLIENT), TCP-L, TCP4-L,\n"
	"TCP6-L, TCP-CONNECT, TCP4-CONNECT, TCP6-CONNECT, VSOCK-L; socat's other\n"
	"address types are refused by name.\n"
	"\n"
	"Datagram and seqpacket ends keep message boundaries: each message\n"
	"goes on as one message, or as bytes to a stream; each read from a\n"
	"stream goes to a datagram end as one message (64k at most). EOF\n"
	"reaches a datagram end as an empty datagram.\n"
	"\n"
	"Address options (after the address, comma-separated):\n"
	"  fork          keep accepting after the first connection; the\n"
	"                connections share one process, dealt out over its\n"
	"                worker threads (--threads)\n"
	"  reuseaddr     set SO_REUSEADDR\n"
	"  unlink-early  remove the listening socket's path first (a stale\n"
	"                socket file is replaced in any case)\n"
	"  bind=ADDR     local address: a path for unix, host[:port] for TCP\n"
	"                (on TCP-LISTEN, the address to listen on; not on vsock)\n"
	"  backlog=N     listen queue length\n"
	"  type=5        seqpacket unix socket (UNIX-LISTEN, -CONNECT, -CLIENT;\n"
	"                on vsock, type=5 and type=2 are refused)\n"
	"  nodelay       TCP_NODELAY on each TCP connection\n"
	"  keepalive     SO_KEEPALIVE on each TCP connection\n"
	"  connect-timeout=SECONDS  give up a connect after SECONDS (0.5: half\n"
	"                a second; the kernel's limit otherwise)\n"
	"  vsock-buffer=SIZE  vsock only: SO_VM_SOCKETS_BUFFER_SIZE, the\n"
	"                socket's receive buffer and (Linux 6.12.69+) the most\n"
	"                it has in flight; default 4m for the sockmap engine,\n"
	"                whose kernel retries wait 4 ms each time credit runs\n"
	"                out, else the kernel's (0: the kernel's; 4k to 64m)\n"
	"  mode=OCTAL, user=NAME, group=NAME  the socket file of UNIX-LISTEN\n"
	"                or UNIX-RECV: the mode from its creation on, the\n"
	"                owner before it listens\n"
	"Any other option is refused by name.\n"
	"\n"
	"Options:\n"
	"  --engine E        auto, copy, splice or sockmap. sockmap: the\n"
	"                    kernel forwards UNIX-RECV's datagrams to a\n"
	"                    stream ADDRESS2 (vsock: Linux 6.4+) through a\n"
	"                    BPF program, never through this process (root,\n"
	"                    or CAP_BPF and CAP_NET_ADMIN; no other pair:\n"
	"                    see README). auto:\n"
	"                    sockmap where it applies and loads (the log\n"
	"                    says which runs, and why), else splice for\n"
	"                    stream to stream; a\n"
	"                    direction with a datagram or seqpacket end\n"
	"                    otherwise uses the message engine\n"
	"  -b, --buffer-size N  bytes in flight per direction (default 256k;\n"
	"                    splice: 1m, its pipe growing to it as data flows);\n"
	"                    from a datagram or seqpacket end into another, the\n"
	"                    largest message taken: a larger one is dropped and\n"
	"                    logged, never cut, and the exit status is 1 (into\n"
	"                    a stream, any datagram up to 256k is taken); up\n"
	"                    to 16 messages are held per direction. sockmap:\n"
	"                    the send buffer of ADDRESS2 (default 4m)\n"
	"  -u                one way only, ADDRESS1 to ADDRESS2: ADDRESS2 is\n"
	"                    never read\n"
	"  -U                one way only, ADDRESS2 to ADDRESS1: ADDRESS1 is\n"
	"                    never read\n"
	"  --stats           print bytes and throughput of each connection\n"
	"                    when it ends, and a total on exit, to stderr\n"
	"  --control PATH    answer each connection to the unix socket PATH\n"
	"                    with the live counters as JSON (vmio stats PATH);\n"
	"                    `vmio reload PATH` asks there for a hand-over\n"
	"  --handover-timeout MS  how long a successor has to take over\n"
	"                    (default 10000)\n"
	"  --drain-timeout S after a hand-over, how long this process lets\n"
	"                    its open relays run before it closes them\n"
	"                    (default 600; 0: until they end)\n"
	"  -v, -d, --verbose log more (repeatable)\n"
	"  -q, --quiet       log errors only\n"
	"  -h, --help        show this help\n"
	"\n"
	"Threads (a connection lives on one worker, and worker 0 also accepts;\n"
	"one connection, one worker: only a forking listener gets more):\n"
	VMIO_WORKERS_OPTS_HELP
	"\n"
	"Without fork, it exits once the first connection is done (0 if it\n"
	"finished cleanly and dropped no message). SIGTERM or SIGINT close\n"
	"everything and exit 0 (1 if a message was dropped).\n"
	"\n"
	"Hand-over (an upgrade without a refused connect): SIGHUP, or\n"
	"`vmio reload` on --control, starts the binary now at the path this\n"
	"one was started from, with the same arguments, and gives it the\n"
	"listening sockets (ADDRESS1's and --control's). Once it has taken\n"
	"over, this process accepts no more, lets its open relays finish\n"
	"(--drain-timeout) and exits 0. If the successor fails first (no\n"
	"binary there, it exits, it refuses the state, --handover-timeout\n"
	"passes) this process goes on serving and says why. ADDRESS1 must\n"
	"listen: UNIX-RECV and connecting addresses cannot hand over yet.\n";

enum {
	OPT_ENGINE = 0x100,
	OPT_STATS,
	OPT_THREADS,
	OPT_CPUS,
	OPT_CONTROL,
	OPT_HANDOVER_TIMEOUT,
	OPT_DRAIN_TIMEOUT,
};

struct redirect {
	struct redir_endpoint ep[2];
	enum redir_engine engine; /* --engine */
	struct redir_engine_choice choice;
	size_t buffer;
	bool buffer_given;
	unsigned dirs;            /* REDIR_BOTH; -u, -U: one */
	bool stats;
	struct vmio_workers_opts threads;
	struct vmio_workers *pool;
	struct redir_conn_setup setup;
	struct redir_worker *workers;
	unsigned nworkers;
	unsigned next_worker; /* of the next connection accepted */
	/* Worker 0's: the listener and the signals. */
	struct vmio_loop *loop;
	struct redir_listener listener;
	int status;          /* exit status once the workers stop */
	const char *control_path;
	struct vmio_control *ctl;
	struct redirect_handover ho;
	struct vmio_takeover tk; /* when started by a predecessor */
};

/* Connections are independent: each worker takes the next in turn, this
 * thread (worker 0) included. */
static void deal(void *opaque, int a)
{
	struct redirect *rd = opaque;
	unsigned k = rd->next_worker;

	rd->next_worker = (k + 1) % rd->nworkers;
	if (k == 0)
		redir_conn_start(&rd->workers[0], a);
	else
		redir_conn_hand_over(&rd->workers[k], a);
}

/* A signal is a clean end, whatever the connections were doing. */
static void on_signal(void *opaque)
{
	struct redirect *rd = opaque;

	rd->status = 0;
	vmio_workers_stop(rd->pool);
}

/* Without fork the one connection was the whole job (and its only
 * worker is this thread). */
static void on_only_conn_ended(void *opaque, int status)
{
	struct redirect *rd = opaque;

	rd->status = status;
	vmio_workers_stop(rd->pool);
}

/* What the command can relay so far. Returns 0, or -1 with a message in
 * err. */
static int check_supported(const struct redirect *rd, char *err, size_t size)
{
	if (rd->ep[1].addr.kind == REDIR_UNIX_RECV) {
		snprintf(err, size,
			 "ADDRESS2 UNIX-RECV: it only receives, so it can only be ADDRESS1 (use UNIX-SENDTO to send)");
		return -1;
	}
	if (rd->ep[0].addr.kind == REDIR_UNIX_RECV && rd->ep[0].addr.fork) {
		snprintf(err, size,
			 "UNIX-RECV: option 'fork' does not apply (no connections to accept)");
		return -1;
	}
	if (rd->ep[0].addr.kind == REDIR_STDIO &&
	    rd->ep[1].addr.kind == REDIR_STDIO) {
		snprintf(err, size, "STDIO on both sides: there is one stdin and one stdout");
		return -1;
	}
	if (rd->ep[1].addr.kind == REDIR_STDIO && rd->ep[0].addr.fork) {
		snprintf(err, size,
			 "ADDRESS2 STDIO with fork: one stdin and stdout cannot serve several connections");
		return -1;
	}
	if (rd->ep[0].addr.kind == REDIR_UNIX_RECV &&
	    rd->dirs == REDIR_B_TO_A) {
		snprintf(err, size,
			 "-U with UNIX-RECV: it only receives, so nothing could flow from ADDRESS2 to it");
		return -1;
	}
	if (redir_addr_is_passive(&rd->ep[1].addr)) {
		snprintf(err, size,
			 "ADDRESS2 %s must connect: listening on both sides is not supported",
			 rd->ep[1].addr.keyword);
		return -1;
	}
	return 0;
}

/* Settles --engine for this pair (engine_choice.h). Returns 0 or an exit
 * status. */
static int choose_engine(struct redirect *rd)
{
	char err[320];
	int rc = redir_engine_choose(&rd->choice, rd->engine, rd->ep, err,
				     sizeof(err));

	if (rc == REDIR_CHOICE_MISFIT)
		return vmio_cli_usage_error("redirect",
			"--engine sockmap: %s to %s is not supported: %s",
			rd->ep[0].addr.keyword, rd->ep[1].addr.keyword, err);
	if (rc) {
		log_err("--engine sockmap: %s", err);
		return 1;
	}
	return 0;
}

static int parse_args(struct redirect *rd, int argc, char **argv,
		      int *verbosity)
{
	static const struct option longopts[] = {
		{ "engine", required_argument, NULL, OPT_ENGINE },
		{ "buffer-size", required_argument, NULL, 'b' },
		{ "stats", no_argument, NULL, OPT_STATS },
		{ "threads", required_argument, NULL, OPT_THREADS },
		{ "cpus", required_argument, NULL, OPT_CPUS },
		{ "control", required_argument, NULL, OPT_CONTROL },
		{ "handover-timeout", required_argument, NULL,
		  OPT_HANDOVER_TIMEOUT },
		{ "drain-timeout", required_argument, NULL, OPT_DRAIN_TIMEOUT },
		{ "verbose", no_argument, NULL, 'v' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	char err[256], name[64];
	unsigned dirs;
	uint64_t v;
	int c, rc;

	opterr = 0;
	while ((c = getopt_long(argc, argv, ":hvdqb:uU", longopts, NULL)) != -1) {
		switch (c) {
		case 'u':
		case 'U':
			dirs = c == 'u' ? REDIR_A_TO_B : REDIR_B_TO_A;
			if (rd->dirs != REDIR_BOTH && rd->dirs != dirs)
				return vmio_cli_usage_error("redirect",
					"-u and -U: one direction or the other, not both");
			rd->dirs = dirs;
			break;
		case 'h':
			printf("%s", redirect_usage);
			return 1;
		case 'v':
		case 'd':
			(*verbosity)++;
			break;
		case 'q':
			*verbosity = -1;
			break;
		case 'b':
			if (vmio_parse_u64(optarg, 1u << 30, &v) || v < 4096)
				return vmio_cli_usage_error("redirect",
					"--buffer-size: '%s' is not 4k to 1g", optarg);
			rd->buffer = (size_t)v;
			rd->buffer_given = true;
			break;
		case OPT_ENGINE:
			if (redir_engine_parse(optarg, &rd->engine))
				return vmio_cli_usage_error("redirect",
					"--engine: unknown engine '%s' (auto, copy, splice, sockmap)",
					optarg);
			break;
		case OPT_STATS:
			rd->stats = true;
			break;
		case OPT_CONTROL:
			rc = vmio_cli_check_socket_dir("redirect", "--control",
						       optarg);
			if (rc)
				return rc;
			rd->control_path = optarg;
			break;
		case OPT_HANDOVER_TIMEOUT:
			if (vmio_parse_u64(optarg, 3600000, &v) || v < 100)
				return vmio_cli_usage_error("redirect",
					"--handover-timeout: '%s' is not 100 to 3600000 ms",
					optarg);
			rd->ho.timeout_ms = (unsigned)v;
			break;
		case OPT_DRAIN_TIMEOUT:
			if (vmio_parse_u64(optarg, 86400 * 365, &v))
				return vmio_cli_usage_error("redirect",
					"--drain-timeout: '%s' is not 0 to 31536000 s",
					optarg);
			rd->ho.drain_s = (unsigned)v;
			break;
		case OPT_THREADS:
		case OPT_CPUS:
			rc = (c == OPT_THREADS ? vmio_workers_parse_threads
					       : vmio_workers_parse_cpus)(
				"redirect", optarg, &rd->threads);
			if (rc)
				return rc;
			break;
		case ':':
			vmio_cli_option_name(argv, name, sizeof(name));
			return vmio_cli_usage_error("redirect",
				"option '%s' needs a value", name);
		default:
			vmio_cli_option_name(argv, name, sizeof(name));
			return vmio_cli_usage_error("redirect",
				"unknown option '%s'", name);
		}
	}
	if (argc - optind != 2)
		return vmio_cli_usage_error("redirect",
			"expected ADDRESS1 and ADDRESS2, got %d address%s",
			argc - optind, argc - optind == 1 ? "" : "es");
	for (int i = 0; i < 2; i++) {
		struct redir_addr a;

		if (redir_addr_parse(argv[optind + i], &a, err, sizeof(err)) ||
		    redir_endpoint_resolve(&rd->ep[i], &a, err, sizeof(err)))
			return vmio_cli_usage_error("redirect", "ADDRESS%d: %s",
						    i + 1, err);
	}
	if (check_supported(rd, err, sizeof(err)))
		return vmio_cli_usage_error("redirect", "%s", err);
	return 0;
}

/* ADDRESS1 made into its first connection, or into the listener that
 * worker 0 accepts on. Returns 0 or -1 (logged). */
static int open_address1(struct redirect *rd)
{
	int sndbuf = rd->buffer_given ? (int)rd->buffer
				      : REDIR_SOCKMAP_DEFAULT_SNDBUF;

	if (rd->ep[0].addr.kind == REDIR_UNIX_RECV ||
	    !redir_addr_is_passive(&rd->ep[0].addr))
		return redir_first_connection(&rd->workers[0], rd->ep,
					      &rd->choice, sndbuf);
	return redir_listener_open(&rd->listener, rd->loop, &rd->ep[0], deal,
				   rd);
}

/* One worker per connection at most: only a forking listener has more
 * than one, and then no bound but the CPUs. */
static int make_workers(struct redirect *rd)
{
	bool forks = rd->ep[0].addr.fork;

	rd->setup = (struct redir_conn_setup){
		.to = &rd->ep[1],
		.engine = rd->choice.engine,
		.engine_name = redir_engine_running(&rd->choice, rd->ep),
		.buffer = rd->buffer,
		.dirs = rd->dirs,
		.stats = rd->stats,
		.ended = forks ? NULL : on_only_conn_ended,
		.opaque = rd,
	};
	rd->pool = vmio_workers_from_opts(&rd->threads, forks ? UINT_MAX : 1);
	if (!rd->pool)
		return -1;
	rd->loop = vmio_workers_loop(rd->pool, 0);
	rd->workers = calloc(vmio_workers_count(rd->pool),
			     sizeof(*rd->workers));
	if (!rd->workers) {
		log_err("out of memory setting up the worker threads");
		return -1;
	}
	for (unsigned k = 0; k < vmio_workers_count(rd->pool); k++) {
		if (redir_worker_init(&rd->workers[k], k,
					 vmio_workers_loop(rd->pool, k),
					 &rd->setup))
			return -1;
		rd->nworkers++;
	}
	log_debug("%u worker thread%s%s", rd->nworkers,
		  rd->nworkers == 1 ? "" : "s",
		  rd->nworkers == 1 ? "" : ", connections dealt out in turn");
	return 0;
}

/* Every worker joined: what is left of each is ended here, and the totals
 * are theirs summed. Returns the exit status. */
static int finish(struct redirect *rd, int rc)
{
	struct redir_totals sum = { 0 };

	redirect_handover_fini(&rd->ho);
	vmio_takeover_fini(&rd->tk);
	vmio_control_free(rd->ctl);
	for (unsigned k = 0; k < rd->nworkers; k++) {
		const struct redir_totals *t = &rd->workers[k].totals;

		redir_worker_fini(&rd->workers[k]);
		sum.bytes += t->bytes;
		sum.dropped += t->dropped;
		sum.conns += t->conns;
	}
	redir_listener_close(&rd->listener);
	redir_endpoint_unlink(&rd->ep[0]); /* UNIX-RECV's file */
	vmio_cli_unwatch_signals();
	redir_sockmap_free(rd->choice.sm); /* loaded, but never used */
	free(rd->workers);
	vmio_workers_free(rd->pool);
	if (rd->stats)
		vmio_log_raw(VMIO_LOG_INFO,
			"vmio redirect: total: %u connections, %llu bytes, %llu messages dropped",
			sum.conns, (unsigned long long)sum.bytes,
			(unsigned long long)sum.dropped);
	if (sum.dropped)
		log_err("%llu messages dropped", (unsigned long long)sum.dropped);
	return rc || sum.dropped ? 1 : rd->status;
}

/* ---- --control ---------------------------------------------------------- */

/* Worker 0's: what the listener did. */
static void write_listener(void *opaque, struct vmio_json *j)
{
	const struct redirect *rd = opaque;
	char where[160];

	vmio_json_object_begin(j);
	vmio_json_kv_string(j, "address1", redir_endpoint_describe(
						  &rd->ep[0], where,
						  sizeof(where)));
	vmio_json_kv_string(j, "engine",
			    redir_engine_running(&rd->choice, rd->ep));
	vmio_json_kv_uint(j, "accepted", rd->listener.accepted);
	vmio_json_kv_uint(j, "accept_failures", rd->listener.failures);
	vmio_json_object_end(j);
}

static void write_worker(void *opaque, struct vmio_json *j)
{
	redir_worker_write_stats(opaque, j);
}

static int add_parts(void *opaque, struct vmio_control *c)
{
	struct redirect *rd = opaque;

	if (vmio_control_add(c, "listener", rd->loop, write_listener, rd))
		return -1;
	for (unsigned k = 0; k < rd->nworkers; k++)
		if (vmio_control_add(c, "workers", rd->workers[k].loop,
				     write_worker, &rd->workers[k]))
			return -1;
	return 0;
}

/* Drained after a hand-over: the successor serves, this one is done. */
static void on_drained(void *opaque)
{
	struct redirect *rd = opaque;

	rd->status = 0;
	vmio_workers_stop(rd->pool);
}

/* SIGHUP and --control's reload, from before any worker starts (they
 * inherit the blocked signals). */
static int watch_handover(struct redirect *rd)
{
	struct redirect_handover *h = &rd->ho;

	h->loop = rd->loop;
	h->listener = &rd->listener;
	h->ep0 = &rd->ep[0];
	h->control_path = rd->control_path;
	h->ctl = &rd->ctl;
	h->workers = rd->workers;
	h->nworkers = rd->nworkers;
	h->stop = on_drained;
	h->opaque = rd;
	if (redirect_handover_init(h))
		return -1;
	return vmio_cli_watch_reload(redirect_handover_on_sighup, h);
}

/* Started by a predecessor: its listeners, not new ones. Returns 0 or
 * -1 (logged; the predecessor told why, and it goes on serving). */
static int take_over(struct redirect *rd)
{
	struct vmio_takeover *t = &rd->tk;

	if (rd->ep[0].addr.kind == REDIR_UNIX_RECV ||
	    !redir_addr_is_passive(&rd->ep[0].addr)) {
		vmio_takeover_refuse(t, "ADDRESS1 does not listen here");
		return -1;
	}
	if (vmio_takeover_receive(t, rd->loop, rd->ho.timeout_ms) ||
	    redirect_handover_take(&rd->ho, t, deal, add_parts, rd)) {
		vmio_takeover_refuse(t, t->why);
		return -1;
	}
	if (vmio_takeover_accept(t)) {
		redir_listener_give_up(&rd->listener);
		vmio_control_give_up_listener(rd->ctl);
		return -1;
	}
	/* What the state carried and nothing took, and the socket: done. */
	vmio_takeover_fini(t);
	return 0;
}

/* Listening (or connected) anew. Returns 0 or -1 (logged). */
static int open_fresh(struct redirect *rd)
{
	int rc = vmio_control_open(rd->loop, "redirect", rd->control_path,
				   add_parts, rd, &rd->ctl);

	if (!rc)
		rc = open_address1(rd);
	/* Listening, or connected: what the unit's dependents wait for. */
	if (!rc)
		vmio_sd_notify_ready();
	return rc;
}

static int run(struct redirect *rd)
{
	int successor = vmio_takeover_open(&rd->tk);
	int rc = successor < 0 ? -1 : make_workers(rd);

	/* Before any worker starts, so that each inherits the blocked
	 * signals and SIGTERM reaches worker 0's signalfd. */
	if (!rc)
		rc = vmio_cli_watch_signals(rd->loop, on_signal, rd);
	if (!rc)
		rc = watch_handover(rd);
	if (!rc)
		rc = successor ? take_over(rd) : open_fresh(rd);
	if (!rc) {
		vmio_control_set_reload(rd->ctl, redirect_handover_request,
					&rd->ho);
		redir_engine_log_choice(&rd->choice, rd->ep);
	}
	/* Without fork the one connection may have ended already: its stop,
	 * asked before the run, ends the run at once. */
	if (!rc)
		rc = vmio_workers_start(rd->pool);
	if (!rc)
		rc = vmio_workers_run(rd->pool);
	return finish(rd, rc);
}

int vmio_cmd_redirect(int argc, char **argv)
{
	struct redirect rd = {
		.engine = REDIR_ENGINE_AUTO,
		.buffer = 0, /* each engine's default */
		.dirs = REDIR_BOTH,
		.listener.fd = -1,
		.ho.timeout_ms = REDIRECT_HANDOVER_TIMEOUT_MS,
		.ho.drain_s = REDIRECT_DRAIN_TIMEOUT_S,
		.tk.sock = -1,
	};
	int verbosity = 0;
	int rc = parse_args(&rd, argc, argv, &verbosity);

	if (rc)
		return rc == 1 ? 0 : rc;
	vmio_cli_set_verbosity(verbosity);
	rc = choose_engine(&rd);
	if (rc)
		return rc;
	redir_engine_log_buffers(&rd.choice, rd.ep, rd.buffer, rd.buffer_given);
	return run(&rd);
}
