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
#include "round_trips.h"
#include "tool_common.h"
#include "util/clock.h"
#include "vsock_transfer.h"

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

/* Round trips of every VM, and when the config names each VM's worker
 * (thread=K), of those on the streamer's worker and of the others. */
enum { ALL, SAME_WORKER, OTHER_WORKER, GROUPS };
static const char *const group_name[GROUPS] = { "all", "same-worker",
						"other-worker" };

/* Where a phase's round trips go: sm[ALL] and sm[the group of their
 * VM] (group[c]: SAME_WORKER or OTHER_WORKER; ALL: unknown). */
struct rr_keep {
	struct rt_samples *sm;
	const unsigned *group;
};

static void rr_kept(void *arg, unsigned c, int64_t ns)
{
	struct rr_keep *k = arg;

	rt_keep(&k->sm[ALL], ns);
	if (k->group[c] != ALL)
		rt_keep(&k->sm[k->group[c]], ns);
}

/* Round trips on every connection for ms, into sm (NULL: the
 * warm-up). */
static void rr_phase(const struct xfer_conns *cs, struct rt_conn *rc,
		     const unsigned *group, unsigned n, uint64_t msg,
		     uint64_t ms, struct rt_samples *sm)
{
	struct rr_keep k = { sm, group };
	int64_t start = (int64_t)vmio_now_ns();
	char err[256];

	if (rt_phase(cs, rc, n, msg, ms, sm ? rr_kept : NULL, &k, err,
		     sizeof(err)))
		tool_die("request/response: %s", err);
	for (unsigned g = 0; sm && g < GROUPS; g++)
		sm[g].seconds += (double)((int64_t)vmio_now_ns() - start) / 1e9;
}

static void print_phase(const char *bulk, const char *group,
			struct rt_samples *sm, const char *extra)
{
	rt_sort(sm);
	printf("latency bulk=%s vms=%s samples=%" PRIu64 " rr/s=%.0f "
	       "p50_us=%.1f p99_us=%.1f max_us=%.1f%s\n", bulk, group,
	       sm->all, (double)sm->all / sm->seconds, rt_pct_us(sm, 50),
	       rt_pct_us(sm, 99), sm->n ? sm->ns[sm->n - 1] / 1e3 : 0.0, extra);
}

int scale_latency(const struct scale_latency_opts *o)
{
	struct vsock_vm_list vms;
	struct scale_host echo, sink;
	struct scale_listener *l;
	/* By phase (idle, running), then group. */
	struct rt_samples sm[2][GROUPS];
	bool grouped = true;
	struct bulk b;
	struct vg **g;
	struct vg_sock **s;
	struct rt_conn *rc;
	unsigned *group;
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
	s = calloc(vms.n, sizeof(*s));
	rc = calloc(vms.n, sizeof(*rc));
	group = calloc(vms.n, sizeof(*group));
	if (!l || !g || !s || !rc || !group)
		tool_die("out of memory");
	for (unsigned p = 0; p < 2; p++)
		for (unsigned k = 0; k < GROUPS; k++)
			rt_samples_init(&sm[p][k]);
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
		s[n] = vg_connect(g[n], SCALE_PORT_ECHO, XFER_STALL_MS, &e);
		if (!s[n])
			tool_die("VM %u: connect: %s", i, strerror(-e));
		if (grouped)
			group[n] = vms.vms[i].thread ==
						      vms.vms[o->bulk_vm].thread
					      ? SAME_WORKER
					      : OTHER_WORKER;
		n++;
	}
	struct xfer_vg xv = { s, g, n };
	struct xfer_conns cs = { &xfer_vg_ops, &xv };

	rr_phase(&cs, rc, group, n, o->msg, RT_WARMUP_MS, NULL);
	for (unsigned r = 0; r < o->rounds; r++) {
		struct bulk_msg m;
		struct scale_host_msg d;
		int got;

		rr_phase(&cs, rc, group, n, o->msg, o->phase_ms, sm[0]);
		bulk_order(&b, BULK_GO);
		bulk_expect(&b, BULK_GOING, &m);
		rr_phase(&cs, rc, group, n, o->msg, o->phase_ms, sm[1]);
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
			rt_samples_free(&sm[p][k]);
	free(group);
	free(rc);
	free(s);
	free(g);
	free(l);
	vsock_vms_release(&vms);
	return 0;
}
