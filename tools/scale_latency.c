/* See scale_latency.h. */
#include "scale_latency.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "scale_fleet.h"
#include "scale_host.h"
#include "nofile.h"
#include "tool_common.h"
#include "util/clock.h"
#include "vsock_transfer.h"

/* Round trips kept per kind of phase; later ones are counted, not kept. */
#define MAX_SAMPLES (1u << 20)
/* Not measured: the first round trips of a fresh connection. */
#define WARMUP_MS 300

/* ---- the streamer, in a child process of its own ---- */

enum { BULK_READY = 1, BULK_GO, BULK_GOING, BULK_STOP, BULK_STOPPED,
       BULK_FAILED };

struct bulk_msg {
	uint32_t op;
	uint64_t bytes; /* STOPPED: written in the phase */
	int64_t t0_ns;  /* STOPPED: the phase's first write */
	char error[160];
};

static void bulk_send(int ctl, uint32_t op, uint64_t bytes, int64_t t0,
		      const char *error)
{
	struct bulk_msg m = { .op = op, .bytes = bytes, .t0_ns = t0 };

	if (error)
		snprintf(m.error, sizeof(m.error), "%s", error);
	if (send(ctl, &m, sizeof(m), MSG_NOSIGNAL) != (ssize_t)sizeof(m))
		_exit(1);
}

static noreturn void bulk_fail(int ctl, const char *what, int e)
{
	char why[160];

	snprintf(why, sizeof(why), "%s: %s", what, strerror(e));
	bulk_send(ctl, BULK_FAILED, 0, 0, why);
	_exit(1);
}

/* The next command, if one came within timeout_ms; 0 if none. EOF (the
 * parent is gone) ends the process. */
static uint32_t bulk_command(int ctl, int timeout_ms)
{
	struct pollfd p = { .fd = ctl, .events = POLLIN };
	struct bulk_msg m;

	if (poll(&p, 1, timeout_ms) <= 0)
		return 0;
	if (recv(ctl, &m, sizeof(m), 0) != (ssize_t)sizeof(m))
		_exit(0);
	return m.op;
}

/* Each GO opens a stream to the sink and writes until STOP, then shuts
 * it down, so that the sink's end of stream says every byte arrived. */
static noreturn void bulk_main(const struct vsock_vm_spec *vm, uint64_t msg,
			       int ctl)
{
	uint8_t *buf = malloc(msg);
	char err[256];
	struct vg *g;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (!buf)
		bulk_fail(ctl, "malloc", ENOMEM);
	xfer_pattern_fill(msg, buf);
	g = fleet_open(vm, 0, err, sizeof(err));
	if (!g) {
		bulk_send(ctl, BULK_FAILED, 0, 0, err);
		_exit(1);
	}
	bulk_send(ctl, BULK_READY, 0, 0, NULL);
	for (;;) {
		uint32_t op = bulk_command(ctl, 1000);
		uint64_t off = 0;
		int64_t t0, last;
		struct vg_sock *s;
		int e = 0;

		if (op != BULK_GO)
			continue;
		s = vg_connect(g, SCALE_PORT_SINK, XFER_STALL_MS, &e);
		if (!s)
			bulk_fail(ctl, "connect", -e);
		t0 = last = (int64_t)vmio_now_ns();
		bulk_send(ctl, BULK_GOING, 0, 0, NULL);
		while (bulk_command(ctl, 0) != BULK_STOP) {
			ssize_t r = vg_write(s, buf + off % msg,
					     msg - off % msg, 0);

			if (r > 0) {
				off += (uint64_t)r;
				last = (int64_t)vmio_now_ns();
			} else if (r != -ETIMEDOUT) {
				bulk_fail(ctl, "vg_write", (int)-r);
			} else if ((int64_t)vmio_now_ns() - last >
				   (int64_t)XFER_STALL_MS * 1000000) {
				bulk_fail(ctl, "no credit", ETIMEDOUT);
			} else if (vg_poll(g, 10) < 0) {
				bulk_fail(ctl, "vg_poll", EIO);
			}
		}
		if (vg_shutdown(s, VSOCK_SHUTDOWN_SEND))
			bulk_fail(ctl, "shutdown", ECONNRESET);
		/* Served until the host has it all and closes (vmio passes
		 * that on); the parent hears the bytes from the sink. */
		last = vmio_now_ms();
		for (struct vg_sock_info si;
		     vg_sock_info(s, &si),
		     !si.reset && !(si.peer_shut & VSOCK_SHUTDOWN_SEND);) {
			if (vmio_now_ms() - last > XFER_STALL_MS)
				bulk_fail(ctl, "not drained", ETIMEDOUT);
			vg_poll(g, 100);
		}
		vg_close(s);
		bulk_send(ctl, BULK_STOPPED, off, t0, NULL);
	}
}

struct bulk {
	pid_t pid;
	int ctl;
};

static void bulk_expect(struct bulk *b, uint32_t op, struct bulk_msg *m)
{
	struct pollfd p = { .fd = b->ctl, .events = POLLIN };

	if (poll(&p, 1, XFER_STALL_MS * 2) != 1 ||
	    recv(b->ctl, m, sizeof(*m), 0) != (ssize_t)sizeof(*m))
		tool_die("the streaming VM's process said nothing");
	if (m->op == BULK_FAILED)
		tool_die("the streaming VM: %s", m->error);
	if (m->op != op)
		tool_die("the streaming VM: message %u, not %u", m->op, op);
}

static void bulk_order(struct bulk *b, uint32_t op)
{
	struct bulk_msg m = { .op = op };

	if (send(b->ctl, &m, sizeof(m), MSG_NOSIGNAL) != (ssize_t)sizeof(m))
		tool_die("the streaming VM's process is gone");
}

static void bulk_start(struct bulk *b, const struct vsock_vm_spec *vm,
		       uint64_t msg)
{
	int pair[2];
	struct bulk_msg m;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair))
		tool_die("socketpair: %s", strerror(errno));
	fflush(NULL);
	b->pid = fork();
	if (b->pid < 0)
		tool_die("fork: %s", strerror(errno));
	if (b->pid == 0) {
		close(pair[0]);
		bulk_main(vm, msg, pair[1]);
	}
	close(pair[1]);
	b->ctl = pair[0];
	bulk_expect(b, BULK_READY, &m);
}

/* ---- request/response ---- */

struct samples {
	uint32_t *ns;
	size_t n;
	uint64_t all;     /* round trips, kept or not */
	double seconds;   /* the phases' time */
};

/* Round trips of every VM, and when the config names each VM's worker
 * (thread=K), of those on the streamer's worker and of the others. */
enum { ALL, SAME_WORKER, OTHER_WORKER, GROUPS };
static const char *const group_name[GROUPS] = { "all", "same-worker",
						"other-worker" };

struct rr {
	struct vg_sock *s;
	unsigned group;     /* SAME_WORKER or OTHER_WORKER; ALL: unknown */
	int64_t t0;
	uint64_t sent, got; /* bytes of the round trip under way */
};

static void keep(struct samples *sm, int64_t ns)
{
	if (sm->n < MAX_SAMPLES)
		sm->ns[sm->n++] = ns > UINT32_MAX ? UINT32_MAX : (uint32_t)ns;
	sm->all++;
}

/* Round trips on every connection for ms (a round trip under way then
 * is finished, not counted), each kept in sm[ALL] and sm[its group]
 * (sm NULL: the warm-up). */
static void rr_phase(struct rr *rr, struct vg *const *gs, unsigned n,
		     uint64_t msg, uint64_t ms, struct samples *sm)
{
	static uint8_t req[XFER_MAX_MSG], resp[XFER_MAX_MSG];
	int64_t start = (int64_t)vmio_now_ns();
	int64_t end = start + (int64_t)ms * 1000000, last = start;
	bool ending = false;

	xfer_pattern_fill(msg, req);
	for (;;) {
		int64_t now = (int64_t)vmio_now_ns();
		bool moved = false, busy = false;

		ending |= now >= end;
		for (unsigned i = 0; i < n; i++) {
			struct rr *c = &rr[i];
			ssize_t r;

			if (c->sent < msg && !ending) {
				if (!c->sent)
					c->t0 = (int64_t)vmio_now_ns();
				r = vg_write(c->s, req + c->sent,
					     msg - c->sent, 0);
				if (r < 0 && r != -ETIMEDOUT)
					tool_die("VM %u: vg_write: %s", i,
						 strerror((int)-r));
				if (r > 0) {
					c->sent += (uint64_t)r;
					moved = true;
				}
			}
			if (!c->sent)
				continue;
			busy = true;
			r = vg_read(c->s, resp, msg - c->got, 0);
			if (r == 0 || (r < 0 && r != -ETIMEDOUT))
				tool_die("VM %u: vg_read: %s", i,
					 r ? strerror((int)-r) : "end of stream");
			if (r < 0)
				continue;
			c->got += (uint64_t)r;
			moved = true;
			if (c->got < msg)
				continue;
			if (sm && !ending) {
				int64_t rtt = (int64_t)vmio_now_ns() - c->t0;

				keep(&sm[ALL], rtt);
				if (c->group != ALL)
					keep(&sm[c->group], rtt);
			}
			c->sent = c->got = 0;
		}
		if (ending && !busy)
			break;
		if (moved) {
			last = (int64_t)vmio_now_ns();
			continue;
		}
		if ((int64_t)vmio_now_ns() - last >
		    (int64_t)XFER_STALL_MS * 1000000)
			tool_die("no echo for %d s", XFER_STALL_MS / 1000);
		int r = vg_poll_many(gs, n, 10);

		if (r < 0)
			tool_die("vg_poll: %s", strerror(-r));
	}
	for (unsigned k = 0; sm && k < GROUPS; k++)
		sm[k].seconds += (double)((int64_t)vmio_now_ns() - start) / 1e9;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

/* Nearest rank: the smallest sample with at least p percent at or below
 * it. */
static double pct_us(const struct samples *sm, unsigned p)
{
	size_t k = (sm->n * p + 99) / 100;

	return sm->n ? sm->ns[k ? k - 1 : 0] / 1e3 : 0;
}

static void print_phase(const char *bulk, const char *group,
			struct samples *sm, const char *extra)
{
	qsort(sm->ns, sm->n, sizeof(*sm->ns), cmp_u32);
	printf("latency bulk=%s vms=%s samples=%" PRIu64 " rr/s=%.0f "
	       "p50_us=%.1f p99_us=%.1f max_us=%.1f%s\n", bulk, group,
	       sm->all, (double)sm->all / sm->seconds, pct_us(sm, 50),
	       pct_us(sm, 99), sm->n ? sm->ns[sm->n - 1] / 1e3 : 0.0, extra);
}

int scale_latency(const struct scale_latency_opts *o)
{
	struct vsock_vm_list vms;
	struct scale_host echo, sink;
	struct scale_listener *l;
	/* By phase (idle, running), then group. */
	struct samples sm[2][GROUPS] = { { { 0 } } };
	bool grouped = true;
	struct bulk b;
	struct vg **g;
	struct rr *rr;
	uint64_t bulk_bytes = 0;
	double bulk_s = 0;
	unsigned n = 0;
	char err[512];

	if (fleet_load(&vms, o->config, err, sizeof(err)))
		tool_die("%s", err);
	if (vms.n < 2 || o->bulk_vm >= vms.n)
		tool_die("%s: %u VMs; one streams (--bulk-vm %u) and at least "
			 "one other answers", o->config, vms.n, o->bulk_vm);
	if (nofile_raise((uint64_t)vms.n * 16 + 1024, err, sizeof(err)))
		tool_die("%s", err);
	l = calloc(vms.n, sizeof(*l));
	g = calloc(vms.n, sizeof(*g));
	rr = calloc(vms.n, sizeof(*rr));
	if (!l || !g || !rr)
		tool_die("out of memory");
	for (unsigned p = 0; p < 2; p++)
		for (unsigned k = 0; k < GROUPS; k++)
			if (!(sm[p][k].ns = malloc(MAX_SAMPLES *
						   sizeof(*sm[p][k].ns))))
				tool_die("out of memory");
	/* Groups only where the config says which worker serves each VM:
	 * vmio's own dealing is not for this tool to guess. */
	for (unsigned i = 0; i < vms.n; i++)
		grouped &= vms.vms[i].thread >= 0;

	/* Echo and sink in processes of their own: the sink's reading must
	 * not delay the echoes, or the host program would be the head of
	 * the line. */
	for (unsigned i = 0; i < vms.n; i++)
		if (i != o->bulk_vm)
			l[n++] = (struct scale_listener){
				vms.vms[i].uds_path, SCALE_PORT_ECHO,
				SCALE_ECHO, i };
	struct scale_host_cfg ec = { l, n, o->msg, UINT64_MAX };
	struct scale_listener sl = { vms.vms[o->bulk_vm].uds_path,
				     SCALE_PORT_SINK, SCALE_SINK, o->bulk_vm };
	struct scale_host_cfg sc = { &sl, 1, o->bulk_msg, UINT64_MAX };

	if (scale_host_start(&ec, &echo, err, sizeof(err)) ||
	    scale_host_start(&sc, &sink, err, sizeof(err)))
		tool_die("%s", err);
	bulk_start(&b, &vms.vms[o->bulk_vm], o->bulk_msg);

	n = 0;
	for (unsigned i = 0; i < vms.n; i++) {
		int e = 0;

		if (i == o->bulk_vm)
			continue;
		g[n] = fleet_open(&vms.vms[i], 0, err, sizeof(err));
		if (!g[n])
			tool_die("VM %u: %s", i, err);
		rr[n].s = vg_connect(g[n], SCALE_PORT_ECHO, XFER_STALL_MS, &e);
		if (!rr[n].s)
			tool_die("VM %u: connect: %s", i, strerror(-e));
		if (grouped)
			rr[n].group = vms.vms[i].thread ==
						      vms.vms[o->bulk_vm].thread
					      ? SAME_WORKER
					      : OTHER_WORKER;
		n++;
	}
	rr_phase(rr, g, n, o->msg, WARMUP_MS, NULL);
	for (unsigned r = 0; r < o->rounds; r++) {
		struct bulk_msg m;
		struct scale_host_msg d;
		int got;

		rr_phase(rr, g, n, o->msg, o->phase_ms, sm[0]);
		bulk_order(&b, BULK_GO);
		bulk_expect(&b, BULK_GOING, &m);
		rr_phase(rr, g, n, o->msg, o->phase_ms, sm[1]);
		bulk_order(&b, BULK_STOP);
		bulk_expect(&b, BULK_STOPPED, &m);
		got = scale_host_recv(&sink, &d, XFER_STALL_MS);
		if (got != 1 || d.type != SCALE_DONE)
			tool_die("the sink did not report the stream");
		if (d.error[0] || d.bytes != m.bytes)
			tool_die("the stream: %s (%" PRIu64 " bytes of %"
				 PRIu64 ")", d.error[0] ? d.error : "short",
				 d.bytes, m.bytes);
		bulk_bytes += d.bytes;
		bulk_s += (double)(d.t_ns - m.t0_ns) / 1e9;
	}

	char extra[64];

	printf("latency vms=%u rr_vms=%u msg=%" PRIu64 " rounds=%u "
	       "phase_ms=%" PRIu64 "\n", vms.n, n, o->msg, o->rounds,
	       o->phase_ms);
	snprintf(extra, sizeof(extra), " bulk_MB/s=%.1f",
		 (double)bulk_bytes / 1e6 / bulk_s);
	/* The split says something only when both groups have VMs. */
	grouped &= sm[0][SAME_WORKER].all && sm[0][OTHER_WORKER].all;
	for (unsigned p = 0; p < 2; p++)
		for (unsigned k = 0; k < (grouped ? GROUPS : 1); k++)
			print_phase(p ? "running" : "idle", group_name[k],
				    &sm[p][k], p && k == ALL ? extra : "");

	for (unsigned i = 0; i < n; i++)
		vg_free(g[i]);
	kill(b.pid, SIGKILL);
	waitpid(b.pid, NULL, 0);
	close(b.ctl);
	scale_host_stop(&echo);
	scale_host_stop(&sink);
	for (unsigned p = 0; p < 2; p++)
		for (unsigned k = 0; k < GROUPS; k++)
			free(sm[p][k].ns);
	free(rr);
	free(g);
	free(l);
	vsock_vms_release(&vms);
	return 0;
}
