/* `vmio net`: a vhost-user virtio-net device whose frames go to a TAP
 * interface, to AF_XDP sockets on an interface's queues (--xdp), or
 * nowhere (--null, to measure the device alone). */
#include "cli/cmd_net.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/backend_args.h"
#include "cli/control.h"
#include "cli/control_handover.h"
#include "cli/device_handover.h"
#include "cli/net_kept.h"
#include "util/fd_store.h"
#include "util/json.h"
#include "cli/serve.h"
#include "cli/socket_instance.h"
#include "cli/workers_args.h"
#include "devices/net/port_null.h"
#include "devices/net/port_tap.h"
#include "devices/net/port_xdp.h"
#include "devices/net/device.h"
#include "devices/net/device_handover.h"
#include "devices/net/xdp_reserve.h"
#include "util/log.h"
#include "util/sd_notify.h"

#define NET_DEFAULT_QUEUE_SIZE 1024
#define NET_DEFAULT_MTU 1500
/* IPv4's minimum; the top is what the config space's le16 holds. */
#define NET_MIN_MTU 68
#define NET_MAX_MTU 65535

static const char net_usage[] =
	"Usage: vmio net (--socket PATH | --fd N)\n"
	"                (--tap NAME | --xdp IFACE[,queue=Q] | --null) [options]\n"
	"\n"
	"A vhost-user virtio-net device (QEMU: -netdev vhost-user). Every frame\n"
	"the guest sends is checked (virtio-net header, size) before it goes\n"
	"on; a bad one is dropped and counted.\n"
	"\n"
	"Device options:\n"
	"  --tap NAME           frames go to and come from the TAP interface\n"
	"                       NAME, created (multi-queue, vnet header) if it\n"
	"                       does not exist; needs CAP_NET_ADMIN\n"
	"  --null               drop what the guest sends, send it nothing\n"
	"  --null-source SIZE   with --null, send the guest a SIZE-byte frame\n"
	"                       (60 to 1514, within --mtu) for every buffer it\n"
	"                       posts: broadcast, ethertype 0x88b5, zero\n"
	"                       payload; to measure the device's rx path\n"
	"  --xdp IFACE[,queue=Q]\n"
	"                       AF_XDP: queue pair p is an XSK on IFACE's queue\n"
	"                       Q+p (Q defaults to 0) whose UMEM is the guest's\n"
	"                       memory, so frames are not copied by vmio (see\n"
	"                       --xdp-copy); native XDP where the driver has\n"
	"                       it, else generic; no offloads; --mtu at most\n"
	"                       3500; needs root (CAP_NET_RAW, CAP_NET_ADMIN,\n"
	"                       CAP_BPF)\n"
	"  --xdp-copy           with --xdp, copy frames through a UMEM of vmio's\n"
	"                       own instead\n"
	"  --xdp-reserve N      with --xdp without a copy, frames of vmio's own\n"
	"                       per queue pair (4 KiB each, 0 to 16384, default\n"
	"                       1024) that take frames arriving while the guest\n"
	"                       has no receive buffer posted; copied into its\n"
	"                       buffers in order (0: such frames are dropped)\n"
	"  --queues N           queue pairs, 1 to 256 (default 1)\n"
	"  --mac MAC            the guest's address, XX:XX:XX:XX:XX:XX\n"
	"                       (default 52:54:00:12:34:56)\n"
	"  --mtu N              largest frame payload, 68 to 65535 (default 1500)\n"
	"  --poll-us N          after a queue that had work runs dry, look at it\n"
	"                       again, once a turn of its worker's loop, for up\n"
	"                       to N microseconds before waiting for the guest's\n"
	"                       notification: no notifications while traffic\n"
	"                       flows, nothing spent once it stops; 0 waits at\n"
	"                       once (0 to 1000, default 50)\n"
	"  --stats              print the frame counters on exit\n"
	"  --print-instance     with --fd N from systemd (vmio-net-accept@NAME):\n"
	"                       print NAME and exit: LISTEN_FDNAMES, or where\n"
	"                       systemd names it \"connection\" (before 257),\n"
	"                       the directory of the socket's address\n"
	"                       (/run/vmio/net/NAME/vhost.sock)\n"
	"  --handover-timeout MS\n"
	"                       how long a successor has to take over at a\n"
	"                       reload (100 to 3600000, default 10000)\n"
	"  --fd-store           keep the session, the TAP's queues and the\n"
	"                       control queue's state in systemd's fd store\n"
	"                       (the unit passes it), so that after a crash or\n"
	"                       a restart the guest goes on: QEMU keeps its\n"
	"                       connection, the frames in flight are lost\n"
	"                       (--xdp: the XSKs are opened anew); needs\n"
	"                       NOTIFY_SOCKET and FileDescriptorStoreMax=\n"
	"\n"
	"Threads (queue pair P runs on worker P mod N; vhost-user messages and\n"
	"the control queue on worker 0; --xdp runs on one thread):\n"
	VMIO_WORKERS_OPTS_HELP
	"\n"
	"Hand-over (an upgrade the guest does not notice):\n"
	"SIGHUP, or `vmio reload` on --control, starts the binary now at the\n"
	"path this one was started from, with the same arguments, and hands it\n"
	"the vhost-user session and listener, the TAP's queues (the interface\n"
	"and its addresses stay: it is neither created nor configured again),\n"
	"the control queue's state (modes, filters, queue pairs in use), the\n"
	"counters and --control. Once it has taken over this process exits 0;\n"
	"the guest sees a pause, frames arriving meanwhile wait in the TAP (or\n"
	"are dropped past its queue). If it fails first (no binary there, it\n"
	"exits or refuses the state, --handover-timeout passes) this process\n"
	"goes on serving and says why. With --xdp the XSKs are not handed\n"
	"over: this process closes them, the new one opens its own, and frames\n"
	"arriving in between go to the host's stack. Without a hand-over, an\n"
	"exit ends the session (QEMU's reconnect= renegotiates, a TAP vmio\n"
	"made is made anew), unless --fd-store kept it for the vmio systemd\n"
	"starts next. Run by hand, without systemd, there is no store.\n"
	"\n"
	"Common options (--queue-size defaults to 1024):\n";

enum {
	OPT_TAP = 1,
	OPT_NULL,
	OPT_NULL_SOURCE,
	OPT_XDP,
	OPT_XDP_COPY,
	OPT_XDP_RESERVE,
	OPT_QUEUES,
	OPT_MAC,
	OPT_MTU,
	OPT_STATS,
	OPT_POLL_US,
	OPT_THREADS,
	OPT_CPUS,
	OPT_PRINT_INSTANCE,
	OPT_HANDOVER_TIMEOUT,
	OPT_FD_STORE,
};

struct net_opts {
	const char *tap;
	char xdp[16]; /* IFACE of --xdp, or "" */
	uint64_t xdp_queue;
	bool xdp_copy;
	uint64_t xdp_reserve; /* frames per pair */
	bool xdp_reserve_set;
	bool null;
	uint64_t null_source; /* frame size, 0: not a source */
	uint64_t queues;
	uint64_t mtu;
	uint64_t poll_us;
	uint8_t mac[6];
	bool stats;
	bool print_instance;
	uint64_t handover_timeout_ms;
	bool fd_store;
	struct vmio_workers_opts workers;
};

/* XX:XX:XX:XX:XX:XX, hex, a unicast address. */
static int parse_mac(const char *arg, uint8_t mac[6])
{
	unsigned v[6];
	char end;

	if (strlen(arg) != 17 ||
	    sscanf(arg, "%2x:%2x:%2x:%2x:%2x:%2x%c", &v[0], &v[1], &v[2], &v[3],
		   &v[4], &v[5], &end) != 6)
		return vmio_cli_usage_error(
			"net", "--mac: '%s' is not XX:XX:XX:XX:XX:XX", arg);
	if (v[0] & 1)
		return vmio_cli_usage_error(
			"net", "--mac: %s is a multicast address", arg);
	if (!(v[0] | v[1] | v[2] | v[3] | v[4] | v[5]))
		return vmio_cli_usage_error("net", "--mac: the zero address");
	for (int i = 0; i < 6; i++)
		mac[i] = (uint8_t)v[i];
	return 0;
}

/* The kernel's own rule (dev_valid_name), checked here so that the error
 * says what is wrong with the name. len is the name's length in arg. */
static int check_ifname(const char *opt, const char *arg, size_t len)
{
	if (!len || len > 15 || strcspn(arg, "/: \t\n") < len ||
	    (len == 1 && arg[0] == '.') || (len == 2 && !strncmp(arg, "..", 2)))
		return vmio_cli_usage_error(
			"net",
			"%s: '%.*s' is not an interface name (1 to 15 bytes, "
			"no '/', ':' or spaces)",
			opt, (int)len, arg);
	return 0;
}

/* IFACE[,queue=Q] */
static int parse_xdp(const char *arg, struct net_opts *n)
{
	const char *comma = strchr(arg, ',');
	size_t len = comma ? (size_t)(comma - arg) : strlen(arg);

	if (check_ifname("--xdp", arg, len))
		return -1;
	memcpy(n->xdp, arg, len);
	n->xdp[len] = '\0';
	if (!comma)
		return 0;
	if (strncmp(comma + 1, "queue=", 6))
		return vmio_cli_usage_error(
			"net", "--xdp: '%s': after the interface, only "
			       "',queue=Q' may follow", arg);
	return vmio_cli_parse_num("net", "--xdp queue", comma + 7, 0, 65535,
				  &n->xdp_queue);
}

static int handle_opt(void *opaque, int c, const char *arg)
{
	struct net_opts *n = opaque;

	switch (c) {
	case OPT_TAP:
		if (check_ifname("--tap", arg, strlen(arg)))
			return -1;
		n->tap = arg;
		return 0;
	case OPT_NULL:
		n->null = true;
		return 0;
	case OPT_NULL_SOURCE:
		return vmio_cli_parse_num("net", "--null-source", arg,
					  VNET_NULL_SOURCE_MIN,
					  VNET_NULL_SOURCE_MAX, &n->null_source);
	case OPT_XDP:
		return parse_xdp(arg, n);
	case OPT_XDP_COPY:
		n->xdp_copy = true;
		return 0;
	case OPT_XDP_RESERVE:
		n->xdp_reserve_set = true;
		return vmio_cli_parse_num("net", "--xdp-reserve", arg, 0,
					  VNET_RESERVE_MAX, &n->xdp_reserve);
	case OPT_QUEUES:
		return vmio_cli_parse_num("net", "--queues", arg, 1,
					  VNET_MAX_PAIRS, &n->queues);
	case OPT_MAC:
		return parse_mac(arg, n->mac);
	case OPT_MTU:
		return vmio_cli_parse_num("net", "--mtu", arg, NET_MIN_MTU,
					  NET_MAX_MTU, &n->mtu);
	case OPT_POLL_US:
		return vmio_cli_parse_num("net", "--poll-us", arg, 0, 1000,
					  &n->poll_us);
	case OPT_STATS:
		n->stats = true;
		return 0;
	case OPT_PRINT_INSTANCE:
		n->print_instance = true;
		return 0;
	case OPT_HANDOVER_TIMEOUT:
		return vmio_cli_parse_num("net", "--handover-timeout", arg, 100,
					  3600000, &n->handover_timeout_ms);
	case OPT_FD_STORE:
		n->fd_store = true;
		return 0;
	case OPT_THREADS:
		return vmio_workers_parse_threads("net", arg, &n->workers);
	case OPT_CPUS:
		return vmio_workers_parse_cpus("net", arg, &n->workers);
	}
	return -1;
}

static struct vnet_port *open_port(const struct net_opts *n)
{
	struct vnet_port *b;
	const char *why = "out of memory";
	int err = -ENOMEM;

	if (n->null) {
		b = vnet_port_null_new((unsigned)n->queues,
					  (size_t)n->null_source, &err);
		if (!b)
			log_err("net: cannot set up the null backend: %s",
				strerror(-err));
		return b;
	}
	if (n->xdp[0]) {
		b = vnet_port_xdp_new(n->xdp, (unsigned)n->xdp_queue,
					 (unsigned)n->queues, n->xdp_copy,
					 (unsigned)n->xdp_reserve, &err, &why);
		if (!b)
			log_err("net: cannot use AF_XDP on %s: %s (%s)",
				n->xdp, why, strerror(-err));
		return b;
	}
	b = vnet_port_tap_new(n->tap, (unsigned)n->queues, &err, &why);
	if (!b)
		log_err("net: cannot use tap %s: %s (%s)", n->tap, why,
			strerror(-err));
	return b;
}

static void print_stats(const struct vnet_device *dev,
			struct vnet_port *b)
{
	char line[1024];

	struct vnet_stats st;

	vnet_device_stats(dev, &st);
	vnet_stats_format(&st, line, sizeof(line));
	vmio_log_raw(VMIO_LOG_INFO, "vmio net: stats: %s", line);
	for (unsigned i = 0; b->ops->pair_mode && i < b->pairs; i++) {
		char counters[512] = "";

		if (b->ops->pair_counters)
			b->ops->pair_counters(b, i, counters, sizeof(counters));
		vmio_log_raw(VMIO_LOG_INFO, "vmio net: pair %u: %s %s%s%s", i,
			b->ops->name, b->ops->pair_mode(b, i),
			counters[0] ? " " : "", counters);
	}
}

struct net_parts {
	struct vmio_loop *loop;
	struct vmio_backend *be;
	const struct vnet_device *dev;
	struct vnet_port *b;
	struct vmio_loop **pair_loops;
	struct session_kept *kept; /* --fd-store, or NULL */
	/* One per pair, for its part (written on the pair's loop). */
	struct net_pair_part {
		const struct net_parts *p;
		unsigned index;
	} pairs[VNET_MAX_PAIRS];
};

/* On worker 0: the vhost-user session and the control queue's counters
 * (the frames are the pairs', each counted on its own worker). */
static void write_net(void *opaque, struct vmio_json *j)
{
	const struct net_parts *p = opaque;

	vmio_json_object_begin(j);
	vmio_backend_write_stats(p->be, j);
	vmio_json_kv_string(j, "backend", p->b->ops->name);
	if (p->kept)
		session_kept_write_stats(p->kept, j);
	vmio_json_key(j, "control_queue");
	vmio_json_object_begin(j);
	vnet_stats_write(vnet_ctrl_stats(p->dev), j);
	vmio_json_object_end(j);
	vmio_json_object_end(j);
}

/* What pair i cost vmio: its CPU time and its two queues' kicks. */
static void write_pair_cost(const struct net_parts *p, unsigned i,
			    struct vmio_json *j)
{
	uint64_t kicks = 0, idle = 0;

	for (unsigned q = 2 * i; q <= 2 * i + 1; q++) {
		uint64_t k, n;

		vmio_backend_queue_kicks(p->be, q, &k, &n);
		kicks += k;
		idle += n;
	}
	vmio_json_kv_uint(j, "cpu_us", vnet_pair_cpu_ns(p->dev, i) / 1000u);
	vmio_json_kv_uint(j, "kicks", kicks);
	vmio_json_kv_uint(j, "idle_kicks", idle);
}

/* On the pair's worker: its frame counters and what its port says of
 * itself. */
static void write_pair(void *opaque, struct vmio_json *j)
{
	const struct net_pair_part *pp = opaque;
	const struct vnet_port *b = pp->p->b;
	unsigned i = pp->index;

	vmio_json_object_begin(j);
	vmio_json_kv_uint(j, "index", i);
	if (b->ops->pair_mode)
		vmio_json_kv_string(j, "mode",
				    b->ops->pair_mode(pp->p->b, i));
	if (b->ops->pair_counters) {
		char counters[512] = "";

		b->ops->pair_counters(pp->p->b, i, counters, sizeof(counters));
		vmio_json_kv_string(j, "backend_counters", counters);
	}
	vnet_stats_write(vnet_pair_stats(pp->p->dev, i), j);
	write_pair_cost(pp->p, i, j);
	vmio_json_object_end(j);
}

static int add_parts(void *opaque, struct vmio_control *c)
{
	struct net_parts *p = opaque;

	if (vmio_control_add(c, "devices", p->loop, write_net, p))
		return -1;
	for (unsigned i = 0; i < p->b->pairs; i++) {
		p->pairs[i] = (struct net_pair_part){ p, i };
		if (vmio_control_add(c, "queue_pairs", p->pair_loops[i],
				     write_pair, &p->pairs[i]))
			return -1;
	}
	return 0;
}

static const char *backend_name(const struct net_opts *n)
{
	if (n->null)
		return "null backend";
	return n->tap ? "tap backend " : "xdp backend ";
}

/* The workers for the pairs: AF_XDP's attach finishes from timers on the
 * device's loop and hands the pair guest memory there, so --xdp keeps
 * every pair on one. */
static struct vmio_workers *net_workers(const struct net_opts *n,
					struct vmio_loop **pair_loops)
{
	unsigned pairs = (unsigned)n->queues;
	struct vmio_workers *pool =
		vmio_workers_from_opts(&n->workers, n->xdp[0] ? 1 : pairs);
	unsigned count;

	if (!pool)
		return NULL;
	count = vmio_workers_count(pool);
	for (unsigned i = 0; i < pairs; i++) {
		pair_loops[i] = vmio_workers_loop(pool, i % count);
		if (count > 1)
			log_debug("net: queue pair %u on worker %u", i,
				  i % count);
	}
	return pool;
}

/* ---- The hand-over (cli/device_handover.h) ------------------------------ */

static int save_device(const void *dev, struct vmio_wire_writer *w, int fds[],
		       unsigned max, unsigned *nfds, const char **why)
{
	return vnet_device_save(dev, w, fds, max, nfds, why);
}

/* The one device is the one unit; its record has its own version. */
static const struct devho_ops net_handover_ops = {
	.unit = "device",
	.section = "net",
	.device = "net device",
	.too_big = "its port's record",
	.save = save_device,
};

/* Everything `vmio net` serves, made fresh or taken over. */
struct net_run {
	const struct vmio_backend_opts *o;
	const struct net_opts *n;
	struct vmio_cli_run run;
	struct vnet_device_config cfg;
	struct vmio_cpu_account cpu; /* the VM's: each pair has its own */
	struct vnet_device *dev;
	struct vmio_backend *be;
	struct vmio_control *ctl;
	struct net_parts parts;
	struct devho ho;
	struct vmio_takeover tk; /* when started by a predecessor */
	bool taken;              /* from a predecessor, and serving */
	struct net_kept kept;    /* --fd-store (kept.s NULL: not kept) */
	/* What a process that died kept (back.bytes NULL: nothing), its
	 * session restored once the device listens. */
	struct session_kept_taken back;
};

/* The device and its backend on r->cfg.port. Returns 0, or -1. */
static int make_device(struct net_run *r)
{
	struct vmio_cpu_account *outer = vmio_cpu_account_enter(&r->cpu);

	r->dev = vnet_device_new(r->run.loop, &r->cfg);
	if (r->dev)
		r->be = vmio_backend_new(r->run.loop, vnet_device_ops(r->dev),
					 r->dev);
	vmio_cpu_account_leave(outer);
	if (!r->be)
		return -1;
	vmio_backend_set_message_timeout(r->be, r->o->message_timeout_ms);
	vmio_backend_set_kick_budget(r->be, &r->o->idle_kicks);
	r->parts = (struct net_parts){ .loop = r->run.loop, .be = r->be,
				       .dev = r->dev, .b = r->cfg.port,
				       .pair_loops = r->cfg.pair_loops };
	return 0;
}

/* The port the predecessor's record names, as this command line asks
 * for it. NULL with r failed. */
static struct vnet_port *take_port(const struct net_opts *n,
				   struct vmio_wire_reader *rd, int *fds,
				   unsigned nfds)
{
	struct vnet_port *b;
	int err;

	if (n->tap)
		return vnet_port_tap_restore(n->tap, (unsigned)n->queues, rd,
					     fds, nfds);
	if (n->xdp[0])
		return vnet_port_xdp_restore(n->xdp, (unsigned)n->xdp_queue,
					     (unsigned)n->queues, n->xdp_copy,
					     (unsigned)n->xdp_reserve, rd,
					     nfds);
	if (nfds) {
		vmio_wire_fail(rd, "descriptors a null port has no use for");
		return NULL;
	}
	b = vnet_port_null_new((unsigned)n->queues, (size_t)n->null_source,
			       &err);
	if (!b)
		vmio_wire_fail(rd, "cannot set up the null port");
	return b;
}

/* The device as a record of a process before has it (a predecessor's,
 * or the one a crashed process kept): its port first (the TAP's queues
 * taken from fds, neither created nor configured again), then the
 * device and its counters; its control state waits for the session.
 * Returns 0, or -1 with why. */
static int device_from_record(struct net_run *r, const uint8_t *rec,
			      size_t len, int *fds, unsigned nfds, char *why,
			      size_t why_size)
{
	const char *port = r->n->null ? "null" : r->n->tap ? "tap" : "xdp";
	struct vmio_wire_reader rd;

	vmio_wire_reader_init(&rd, rec, len);
	if (!vnet_device_read_head(&rd, &r->cfg, port))
		r->cfg.port = take_port(r->n, &rd, fds, nfds);
	if (!r->cfg.port) {
		snprintf(why, why_size, "its net device: %s", rd.why);
		return -1;
	}
	if (make_device(r)) {
		snprintf(why, why_size, "out of memory");
		return -1;
	}
	if (vnet_device_restore(r->dev, &rd)) {
		snprintf(why, why_size, "its net device: %s", rd.why);
		return -1;
	}
	return 0;
}

/* The device from the predecessor's record, then its listener, its
 * session (held), its control state, and --control. Returns 0, or -1
 * with the reason in r->tk.why; what was taken is let go of without a
 * trace. */
static int take_over(struct net_run *r)
{
	struct vmio_takeover *t = &r->tk;
	char why[sizeof(t->why)] = "out of memory";
	const char *no = NULL;
	struct devho_taken u = { .listener = -1 };
	int rc = -1;

	if (vmio_takeover_receive(t, r->run.loop, r->n->handover_timeout_ms))
		return -1;
	if (devho_open(t, &net_handover_ops, 0, NULL, NULL, &u))
		goto out;
	if (device_from_record(r, u.device, u.device_len, u.device_fds,
			       u.ndevice_fds, why, sizeof(why)))
		goto refused;
	if (vmio_cli_attach_handed_over(
		    r->be,
		    u.listener_kind == DEVHO_LISTENER_BOUND ? r->o->socket_path
							    : NULL,
		    devho_take_listener(&u), "", &r->run)) {
		snprintf(why, sizeof(why), "cannot accept on its listener");
		goto refused;
	}
	if (devho_restore_session(&u, r->be, why, sizeof(why)))
		goto refused;
	if (vnet_device_restored(r->dev, &no)) {
		snprintf(why, sizeof(why), "its net device: %s", no);
		goto refused;
	}
	rc = control_handover_take(t, r->run.loop, "net", r->o->control_path,
				   add_parts, &r->parts, &r->ctl);
	goto out;
refused:
	snprintf(t->why, sizeof(t->why), "%s", why);
out:
	devho_taken_fini(&u);
	return rc;
}

/* --fd-store: the kept state opened and, in a process systemd started,
 * what a process before kept taken. Returns 0, or -1 (logged). */
static int open_kept(struct net_run *r, bool successor)
{
	if (!vmio_fd_store_available())
		log_warn("--fd-store: not started by systemd (no NOTIFY_SOCKET): nothing is kept, and a crash ends the guest's session");
	if (net_kept_open(&r->kept, r->o->socket_path, r->run.loop,
			  !successor))
		return -1;
	if (successor || session_kept_take(r->kept.s, &r->back) <= 0)
		session_kept_done();
	return 0;
}

/* What the dead process kept is dealt with: the rest of the store's fds
 * closed. */
static void drop_back(struct net_run *r)
{
	session_kept_taken_fini(&r->back);
	session_kept_done();
}

static int open_fresh(struct net_run *r);

/* After a crash: the device as the dead process kept it, --control
 * opened; its session waits for the listener (take_back). A device
 * record refused (logged, the store cleared): fresh. Returns 0, or -1
 * (logged). */
static int open_back(struct net_run *r)
{
	struct session_kept_taken *t = &r->back;
	char why[256];

	if (!device_from_record(r, t->device, t->device_len,
				t->fds + t->nsession_fds, t->ndevice_fds, why,
				sizeof(why)))
		return vmio_control_open(r->run.loop, "net",
					 r->o->control_path, add_parts,
					 &r->parts, &r->ctl);
	session_kept_refuse(r->kept.s, why);
	drop_back(r);
	vmio_backend_free(r->be);
	vnet_device_free(r->dev);
	vnet_port_free(r->cfg.port);
	r->be = NULL;
	r->dev = NULL;
	r->cfg.port = NULL;
	return open_fresh(r);
}

/* The session the dead process kept, into the backend now listening,
 * and served: the guest goes on where the used rings say. */
static void take_back(struct net_run *r)
{
	const char *no = NULL;

	if (!session_kept_restore_session(r->kept.s, &r->back, r->be)) {
		if (vnet_device_restored(r->dev, &no))
			log_err("net: the control queue's state the fd store kept is not applied: %s",
				no);
		vmio_session_resume(r->be);
		log_info("net: session taken back from the fd store after the process before ended");
	}
	drop_back(r);
}

/* Fresh: the port opened (a TAP created if it is missing), the device
 * made, --control opened. Returns 0, or -1 (logged). */
static int open_fresh(struct net_run *r)
{
	r->cfg.port = open_port(r->n);
	if (!r->cfg.port)
		return -1;
	if (make_device(r)) {
		log_err("out of memory setting up the device");
		return -1;
	}
	return vmio_control_open(r->run.loop, "net", r->o->control_path,
				 add_parts, &r->parts, &r->ctl);
}

/* Taken over: the predecessor has its answer and serves nothing more.
 * Returns 0, or -1 if it had stopped waiting (it serves on). */
static int serve_taken(struct net_run *r)
{
	if (devho_took_over(&r->ho, &r->tk))
		return -1;
	r->taken = true;
	return 0;
}

/* SIGHUP and --control's reload, before any worker starts. */
static int watch_handover(struct net_run *r)
{
	struct devho *h = &r->ho;

	h->ops = &net_handover_ops;
	h->opaque = r->dev;
	h->loop = r->run.loop;
	h->pool = r->run.pool;
	h->control_path = r->o->control_path;
	h->ctl = &r->ctl;
	h->max_device_fds = (unsigned)r->n->queues;
	h->timeout_ms = (unsigned)r->n->handover_timeout_ms;
	if (devho_alloc(h, 1))
		return -1;
	h->units[0] = (struct devho_unit){ .loop = r->run.loop,
					   .dev = r->dev, .be = r->be };
	if (devho_init(h))
		return -1;
	return devho_watch(h);
}

static void stop_workers(void *pool)
{
	vmio_workers_stop(pool);
}

static int serve_net(struct net_run *r, bool successor)
{
	int rc;

	/* Before any worker thread starts: they inherit the blocked
	 * signals, so that only the signalfd sees them. */
	if (vmio_cli_watch_signals(r->run.loop, stop_workers, r->run.pool))
		return 1;
	rc = watch_handover(r) ? -1 : 0;
	if (!rc && successor)
		rc = serve_taken(r);
	else if (!rc) {
		rc = vmio_cli_attach(r->be, r->o->socket_path, r->o->fd, "",
				     &r->run);
		if (!rc && r->back.bytes)
			take_back(r);
		/* Everything a VMM needs is there: systemd may start it. */
		if (!rc)
			vmio_sd_notify_ready();
	}
	if (!rc && r->kept.s) {
		net_kept_start(&r->kept, r->be, r->dev);
		r->parts.kept = r->kept.s;
	}
	if (!rc) {
		rc = vmio_workers_start(r->run.pool);
		if (rc)
			log_err("cannot start the worker threads: %s",
				strerror(-rc));
		else
			rc = vmio_workers_run(r->run.pool);
	}
	vmio_cli_unwatch_signals();
	return rc ? 1 : 0;
}

static int run(const struct vmio_backend_opts *o, const struct net_opts *n)
{
	static struct vmio_loop *pair_loops[VNET_MAX_PAIRS];
	static struct net_run r;
	int successor, status = 1;

	r = (struct net_run){
		.o = o,
		.n = n,
		.cfg = {
			.mtu = (uint16_t)n->mtu,
			.pairs = (unsigned)n->queues,
			.max_queue_size = o->queue_size,
			.poll_ns = (uint32_t)n->poll_us * 1000,
			.pair_loops = pair_loops,
		},
		.tk.sock = -1,
	};
	memcpy(r.cfg.mac, n->mac, sizeof(r.cfg.mac));
	successor = vmio_takeover_open(&r.tk);
	if (successor < 0)
		return 1;
	r.run.pool = net_workers(n, pair_loops);
	if (!r.run.pool) {
		log_err("out of memory setting up the workers");
		goto out;
	}
	r.run.loop = vmio_workers_loop(r.run.pool, 0);
	if (n->fd_store && open_kept(&r, successor > 0))
		goto out;
	if (successor ? take_over(&r)
		      : r.back.bytes ? open_back(&r) : open_fresh(&r))
		goto out;
	log_info("net: %u queue pair(s), %s%s, mtu %u, %u worker thread%s",
		 r.cfg.pairs, backend_name(n), n->tap ? n->tap : n->xdp,
		 r.cfg.mtu, vmio_workers_count(r.run.pool),
		 vmio_workers_count(r.run.pool) == 1 ? "" : "s");
	status = serve_net(&r, successor > 0);
out:
	if (successor > 0 && !r.taken) {
		/* Not a trace: the predecessor serves on. */
		devho_refuse(&r.tk);
		devho_let_go(&net_handover_ops, r.dev, r.be);
		vmio_control_give_up_listener(r.ctl);
	}
	vmio_takeover_fini(&r.tk);
	vmio_control_free(r.ctl);
	/* The workers have stopped: what they served is this thread's. */
	vmio_backend_free(r.be);
	vmio_cpu_account_fini(&r.cpu);
	if (r.dev && n->stats)
		print_stats(r.dev, r.cfg.port);
	vnet_device_free(r.dev);
	devho_fini(&r.ho);
	/* Its retry timer is on worker 0's loop. */
	net_kept_fini(&r.kept);
	vmio_workers_free(r.run.pool);
	vnet_port_free(r.cfg.port);
	session_kept_taken_fini(&r.back);
	return status;
}

/* --print-instance: the NAME of vmio-net-accept@NAME.socket that
 * accepted --fd, for vmio-net-accept to read NAME's options. */
static int print_instance(const struct vmio_backend_opts *o)
{
	char name[256];
	const char *why = "";
	int rc;

	if (o->fd < 0)
		return vmio_cli_usage_error("net", "--print-instance goes with "
						   "--fd N");
	rc = vmio_socket_instance(o->fd, getenv("LISTEN_FDNAMES"), name,
				  sizeof(name), &why);
	if (rc)
		return vmio_cli_usage_error(
			"net", "--print-instance: --fd %d: %s (%s)", o->fd, why,
			strerror(-rc));
	printf("%s\n", name);
	return 0;
}

int vmio_cmd_net(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "tap", required_argument, NULL, OPT_TAP },
		{ "null", no_argument, NULL, OPT_NULL },
		{ "null-source", required_argument, NULL, OPT_NULL_SOURCE },
		{ "xdp", required_argument, NULL, OPT_XDP },
		{ "xdp-copy", no_argument, NULL, OPT_XDP_COPY },
		{ "xdp-reserve", required_argument, NULL, OPT_XDP_RESERVE },
		{ "queues", required_argument, NULL, OPT_QUEUES },
		{ "mac", required_argument, NULL, OPT_MAC },
		{ "mtu", required_argument, NULL, OPT_MTU },
		{ "stats", no_argument, NULL, OPT_STATS },
		{ "print-instance", no_argument, NULL, OPT_PRINT_INSTANCE },
		{ "poll-us", required_argument, NULL, OPT_POLL_US },
		{ "threads", required_argument, NULL, OPT_THREADS },
		{ "cpus", required_argument, NULL, OPT_CPUS },
		{ "handover-timeout", required_argument, NULL,
		  OPT_HANDOVER_TIMEOUT },
		{ "fd-store", no_argument, NULL, OPT_FD_STORE },
		VMIO_BACKEND_LONG_OPTIONS,
		{ NULL, 0, NULL, 0 },
	};
	struct net_opts n = {
		.queues = 1,
		.mtu = NET_DEFAULT_MTU,
		.poll_us = VNET_POLL_DEFAULT_NS / 1000,
		.xdp_reserve = VNET_XDP_DEFAULT_RESERVE,
		.handover_timeout_ms = DEVHO_TIMEOUT_MS,
		.mac = { 0x52, 0x54, 0x00, 0x12, 0x34, 0x56 },
	};
	const struct vmio_backend_cmdline cl = {
		.sub = "net",
		.qemu_type = "net",
		.usage = net_usage,
		.longopts = longopts,
		.own = handle_opt,
		.opaque = &n,
	};
	struct vmio_backend_opts o;
	int rc;

	vmio_backend_opts_init(&o, NET_DEFAULT_QUEUE_SIZE);
	rc = vmio_cli_parse_backend(&cl, argc, argv, &o);
	if (rc >= 0)
		return rc;
	if (n.print_instance)
		return print_instance(&o);
	if ((n.tap != NULL) + n.null + (n.xdp[0] != '\0') != 1)
		return vmio_cli_usage_error(
			"net", "exactly one of --tap NAME, --xdp IFACE or "
			       "--null is required");
	if (n.xdp_copy && !n.xdp[0])
		return vmio_cli_usage_error("net", "--xdp-copy goes with --xdp");
	if (n.xdp_reserve_set && !n.xdp[0])
		return vmio_cli_usage_error("net",
					    "--xdp-reserve goes with --xdp");
	if (n.null_source && !n.null)
		return vmio_cli_usage_error("net",
					    "--null-source goes with --null");
	/* The guest takes frames of at most --mtu bytes of payload. */
	if (n.null_source > n.mtu + VNET_ETH_HLEN)
		return vmio_cli_usage_error(
			"net", "--null-source: a %llu-byte frame carries more "
			       "than --mtu %llu", (unsigned long long)n.null_source,
			(unsigned long long)n.mtu);
	if (n.xdp[0] && n.mtu > VNET_XDP_MAX_MTU)
		return vmio_cli_usage_error(
			"net", "--mtu: at most %d with --xdp (one 4 KiB UMEM "
			       "frame per packet)", VNET_XDP_MAX_MTU);
	if (n.xdp[0] && n.workers.threads > 1)
		return vmio_cli_usage_error(
			"net", "--threads %u: --xdp serves every queue pair "
			       "from one thread", n.workers.threads);
	return run(&o, &n);
}
