/* See scale_idle.h. */
#include "scale_idle.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "scale_fleet.h"
#include "scale_host.h"
#include "nofile.h"
#include "tool_common.h"
#include "util/clock.h"
#include "util/proc_stat.h"
#include "util/proc_status.h"
#include "vsock_transfer.h"

/* Descriptors: the host child holds one per connection and its
 * listeners; this process each guest's vhost-user socket, memfd and four
 * eventfds; both stdio and a few of their own. */
#define FD_PER_GUEST 8
#define FD_SLACK 64

/* One side of the busy comparison: its VMs, their guests, its vmio. */
struct side {
	const char *name;
	struct vsock_vm_list vms;
	struct vg **g;       /* every VM's guest (A) or the streamers' (B) */
	struct vg **streamers;
	pid_t pid;
};

static void open_guests(struct side *s, unsigned count, unsigned max_sockets)
{
	char err[256];

	s->g = calloc(count, sizeof(*s->g));
	if (!s->g)
		tool_die("out of memory");
	for (unsigned i = 0; i < count; i++) {
		s->g[i] = fleet_open(&s->vms.vms[i], max_sockets, err,
				     sizeof(err));
		if (!s->g[i])
			tool_die("%s: VM %u: %s", s->name, i, err);
	}
}

/* A's j-th streamer of k: B's are its first k VMs; A's are spread over
 * its VMs (not all among the first set up), the j-th from the j-th k-th
 * of the list on, the first there on the worker B's j-th has (thread=K in
 * both configs; -1 for either: any), so that both sides spread their
 * streams over workers alike. chosen holds the j before it. */
static unsigned pick_streamer(const struct vsock_vm_list *a, unsigned j,
			      unsigned k, int thread, const unsigned *chosen)
{
	unsigned start = (unsigned)((uint64_t)j * a->n / k);

	for (unsigned d = 0; d < a->n; d++) {
		unsigned i = (start + d) % a->n;
		bool taken = false;

		for (unsigned c = 0; c < j; c++)
			taken |= chosen[c] == i;
		if (!taken && (thread < 0 || a->vms[i].thread < 0 ||
			       a->vms[i].thread == thread))
			return i;
	}
	tool_die("no VM of %u for stream %u on worker %d", a->n, j, thread);
}

/* vmio's memory (KiB) and descriptors at one moment. */
struct snapshot {
	long rss, anon, shmem, file, fds;
};

static void snap(pid_t pid, struct snapshot *s)
{
	*s = (struct snapshot){
		.rss = vmio_proc_status_kib(pid, "VmRSS"),
		.anon = vmio_proc_status_kib(pid, "RssAnon"),
		.shmem = vmio_proc_status_kib(pid, "RssShmem"),
		.file = vmio_proc_status_kib(pid, "RssFile"),
		.fds = vmio_proc_fd_count(pid),
	};
	if (s->rss < 0 || s->anon < 0 || s->shmem < 0 || s->file < 0 ||
	    s->fds < 0)
		tool_die("vmio (pid %d): nothing in /proc", (int)pid);
}

/* Bytes per connection of a growth in KiB (may be negative). */
static double per_conn(long before, long after, uint64_t conns)
{
	return (double)(after - before) * 1024.0 / (double)conns;
}

/* vmio's CPU time, in seconds. */
static double cpu_s(const struct side *s)
{
	long t = vmio_proc_cpu_ticks(s->pid);

	if (t < 0)
		tool_die("%s: vmio (pid %d) is gone", s->name, (int)s->pid);
	return (double)t / (double)sysconf(_SC_CLK_TCK);
}

/* One timed run: a fresh stream connection from each streamer to the
 * sink, plan->per_conn bytes on each, timed from the first write to the
 * last byte the sink read; vmio's CPU seconds across it. */
static void stream_run(struct side *s, unsigned k, const struct xfer_plan *plan,
		       struct scale_host *h, unsigned run)
{
	struct vg_sock *sk[XFER_MAX_CONNS];
	struct xfer_vg v = { sk, s->streamers, k };
	struct xfer_conns cs = { &xfer_vg_ops, &v };
	int64_t t0 = 0, t_end = 0, last;
	double c0, c1;
	uint64_t total;
	unsigned done = 0;
	char err[256];

	for (unsigned j = 0; j < k; j++) {
		int e = 0;

		sk[j] = vg_connect(s->streamers[j], SCALE_PORT_SINK,
				   XFER_STALL_MS, &e);
		if (!sk[j])
			tool_die("%s: stream %u: connect: %s", s->name, j,
				 strerror(-e));
	}
	c0 = cpu_s(s);
	if (xfer_all(plan, &cs, true, &t0, &total, err, sizeof(err)))
		tool_die("%s: run %u: %s", s->name, run, err);
	/* The sink reports each stream at its end; meanwhile the guests'
	 * queues must go on being served (credit updates, the RSTs). */
	last = vmio_now_ms();
	while (done < k) {
		struct scale_host_msg m;
		int r = scale_host_recv(h, &m, 0);

		if (r < 0 || (r == 1 && m.type != SCALE_DONE))
			tool_die("%s: run %u: the host child is gone", s->name,
				 run);
		if (r == 1) {
			if (m.error[0])
				tool_die("%s: run %u: stream of VM %u: %s",
					 s->name, run, m.vm, m.error);
			if (m.t_ns > t_end)
				t_end = m.t_ns;
			done++;
			last = vmio_now_ms();
			continue;
		}
		if (vmio_now_ms() - last > XFER_STALL_MS)
			tool_die("%s: run %u: %u of %u streams not drained "
				 "after %d s", s->name, run, k - done, k,
				 XFER_STALL_MS / 1000);
		r = vg_poll_many(s->streamers, k, 1);
		if (r < 0)
			tool_die("%s: run %u: vg_poll: %s", s->name, run,
				 strerror(-r));
	}
	c1 = cpu_s(s);
	for (unsigned j = 0; j < k; j++)
		vg_close(sk[j]);

	double secs = (double)(t_end - t0) / 1e9;
	double gib = (double)total / (double)(1u << 30);

	printf("busy run=%u vmio=%s streams=%u bytes=%" PRIu64
	       " time=%.3f MB/s=%.1f vmio_cpu_s=%.2f vmio_s/GiB=%.3f\n", run,
	       s->name, k, total, secs, (double)total / 1e6 / secs, c1 - c0,
	       (c1 - c0) / gib);
	fflush(stdout);
}

int scale_idle(const struct scale_idle_opts *o)
{
	struct side a = { .name = "among-idle", .pid = o->pid };
	struct side b = { .name = "alone", .pid = o->alone_pid };
	struct scale_listener *l;
	struct scale_host_cfg hc;
	struct scale_host h;
	struct scale_host_msg held;
	struct snapshot s0, s1;
	struct vg_sock **socks;
	struct xfer_plan plan = { .msg = o->msg, .conns = o->busy };
	uint64_t total, need;
	unsigned nl = 0;
	char err[512];

	if (fleet_load(&a.vms, o->config, err, sizeof(err)))
		tool_die("%s", err);
	if (o->busy) {
		if (fleet_load(&b.vms, o->alone_config, err, sizeof(err)))
			tool_die("%s", err);
		if (a.vms.n < o->busy || b.vms.n < o->busy)
			tool_die("--busy %u: %s has %u VMs, %s %u", o->busy,
				 o->config, a.vms.n, o->alone_config, b.vms.n);
		plan.per_conn = o->bytes / o->busy / o->msg * o->msg;
		if (!plan.per_conn)
			plan.per_conn = o->msg;
	}
	total = (uint64_t)a.vms.n * o->conns;

	/* The host child holds a socket per connection: raise the limit
	 * before it forks. */
	need = total + a.vms.n + 2u * o->busy + FD_SLACK;
	if (need < (uint64_t)(a.vms.n + o->busy) * FD_PER_GUEST + FD_SLACK)
		need = (uint64_t)(a.vms.n + o->busy) * FD_PER_GUEST + FD_SLACK;
	if (nofile_raise(need, err, sizeof(err)))
		tool_die("%s", err);

	l = calloc(a.vms.n + 2u * o->busy, sizeof(*l));
	if (!l)
		tool_die("out of memory");
	for (unsigned i = 0; i < a.vms.n; i++)
		l[nl++] = (struct scale_listener){ a.vms.vms[i].uds_path,
						   SCALE_PORT_HOLD, SCALE_HOLD,
						   i };
	unsigned *ai = calloc(o->busy + 1, sizeof(*ai));

	a.streamers = calloc(o->busy + 1, sizeof(*a.streamers));
	b.streamers = calloc(o->busy + 1, sizeof(*b.streamers));
	if (!ai || !a.streamers || !b.streamers)
		tool_die("out of memory");
	for (unsigned j = 0; j < o->busy; j++) {
		ai[j] = pick_streamer(&a.vms, j, o->busy, b.vms.vms[j].thread,
				      ai);
		l[nl++] = (struct scale_listener){ a.vms.vms[ai[j]].uds_path,
						   SCALE_PORT_SINK, SCALE_SINK,
						   ai[j] };
		l[nl++] = (struct scale_listener){ b.vms.vms[j].uds_path,
						   SCALE_PORT_SINK, SCALE_SINK,
						   j };
	}
	hc = (struct scale_host_cfg){ l, nl, plan.msg, plan.per_conn };
	if (scale_host_start(&hc, &h, err, sizeof(err)))
		tool_die("%s", err);

	/* Room for the idle connections and the stream. */
	open_guests(&a, a.vms.n, o->conns + 2);
	if (o->busy)
		open_guests(&b, o->busy, 2);
	for (unsigned j = 0; j < o->busy; j++) {
		a.streamers[j] = a.g[ai[j]];
		b.streamers[j] = b.g[j];
	}

	/* Every guest's rx buffers and tx slots through vmio once (REQUESTs
	 * to a port nobody listens on, each answered with an RST), so that
	 * the guest memory vmio maps counts before the first figure, not in
	 * the growth per connection. */
	const struct vg_opts *go = &a.g[0]->o;

	if (fleet_connect(a.g, a.vms.n, SCALE_PORT_NONE,
			  go->rx_bufs + go->tx_slots, go->tx_slots, true,
			  NULL, err, sizeof(err)))
		tool_die("warm-up: %s", err);
	snap(a.pid, &s0);

	socks = calloc(total, sizeof(*socks));
	if (!socks)
		tool_die("out of memory");
	int64_t t0 = (int64_t)vmio_now_ns();

	if (fleet_connect(a.g, a.vms.n, SCALE_PORT_HOLD, o->conns, o->window,
			  false, socks, err, sizeof(err)))
		tool_die("idle: %s", err);
	if (scale_host_wait_held(&h, total, &held))
		tool_die("idle: the host child is gone");
	if (held.n < total)
		tool_die("idle: the host holds %" PRIu64 " of %" PRIu64
			 " connections (%" PRIu64 " closed)", held.n, total,
			 held.m);
	double secs = (double)((int64_t)vmio_now_ns() - t0) / 1e9;

	snap(a.pid, &s1);
	printf("idle vms=%u conns/vm=%u conns=%" PRIu64 " establish_s=%.2f "
	       "conns/s=%.0f\n", a.vms.n, o->conns, total, secs,
	       (double)total / secs);
	/* Before: RssShmem is the guests' memory vmio touched (their rings
	 * and buffers), RssAnon vmio's own. */
	printf("idle rss_kib=%ld->%ld (before: anon=%ld shmem=%ld) "
	       "B/conn=%.0f (anon=%.0f shmem=%.0f file=%.0f)\n", s0.rss,
	       s1.rss, s0.anon, s0.shmem, per_conn(s0.rss, s1.rss, total),
	       per_conn(s0.anon, s1.anon, total),
	       per_conn(s0.shmem, s1.shmem, total),
	       per_conn(s0.file, s1.file, total));
	printf("idle fds=%ld->%ld fds/conn=%.3f\n", s0.fds, s1.fds,
	       (double)(s1.fds - s0.fds) / (double)total);
	fflush(stdout);

	for (unsigned p = 1; p <= o->pairs && o->busy; p++) {
		stream_run(&a, o->busy, &plan, &h, p);
		stream_run(&b, o->busy, &plan, &h, p);
	}
	if (o->busy) {
		if (scale_host_wait_held(&h, 0, &held))
			tool_die("idle: the host child is gone");
		printf("idle after the runs: %" PRIu64 " of %" PRIu64
		       " idle connections held, %" PRIu64 " closed, %" PRIu64
		       " stray bytes\n", held.n, total, held.m, held.bytes);
		if (held.n != total || held.bytes)
			return 1;
	}
	/* Going away as a dying VMM does: vmio resets each VM. */
	for (unsigned i = 0; i < a.vms.n; i++)
		vg_free(a.g[i]);
	for (unsigned j = 0; j < o->busy; j++)
		vg_free(b.g[j]);
	scale_host_stop(&h);
	free(socks);
	free(l);
	free(a.g);
	free(b.g);
	free(ai);
	free(a.streamers);
	free(b.streamers);
	vsock_vms_release(&a.vms);
	vsock_vms_release(&b.vms);
	return 0;
}
