/* See scale_handover.h. */
#include "scale_handover.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nofile.h"
#include "round_trips.h"
#include "scale_fleet.h"
#include "scale_host.h"
#include "tool_common.h"
#include "util/clock.h"
#include "util/proc_status.h"
#include "util/unix_socket.h"
#include "vsock_transfer.h"

extern char **environ;

#define MAX_STREAMS 16
/* Bytes a write takes at most, and a read. */
#define PIECE 16384
#define READ_SIZE 65536
/* A paced stream that fell behind (the pause) catches up at most this
 * much, so that what follows a pause is no burst. */
#define CATCH_UP_NS (10 * 1000000ll)
/* The guests that carry no stream are served this often. */
#define IDLE_POLL_NS (50 * 1000000ll)
/* After the last reload of the leak run, before the last count. */
#define QUIET_MS 300
#define FD_PER_GUEST 8
#define FD_SLACK 64

static const char *const dir_name[2] = { "g2h", "h2g" };

/* One direction of one stream: pattern bytes at the stream offset,
 * seeded per flow, written by one end and read and checked by the
 * other. */
struct flow {
	unsigned stream, dir;
	const struct xfer_conns *w, *r;
	uint64_t seed, sent, rcvd;
	int64_t paid_ns;    /* pacing: bytes sent are paid up to here */
	int64_t last_rx_ns; /* the last read that brought bytes; 0: none */
};

/* One reload's figures. */
struct rec {
	int64_t start_ns, end_ns; /* `vmio reload` spawned; reaped */
	int64_t pause_ns[2];      /* by direction: the largest gap across */
	int64_t cpu_ns;           /* vmio's: old and successor, -1 unknown */
	int64_t between_ns;       /* the largest gap in the streaming after,
				   * which no reload spans */
	pid_t old, succ;
};

struct bench {
	const struct scale_handover_opts *o;
	struct vsock_vm_list vms;
	struct vg **g;
	struct vg *sg[MAX_STREAMS]; /* the guests with a stream, once each */
	unsigned nsg;
	struct vg_sock *gs[MAX_STREAMS];
	int hfd[MAX_STREAMS];
	int lfd[MAX_STREAMS];
	struct stat lst[MAX_STREAMS];
	char *lpath[MAX_STREAMS];
	struct xfer_vg xv;
	struct xfer_conns gc, hc;
	struct flow f[2 * MAX_STREAMS];
	unsigned nf;
	bool pacing;
	struct scale_host host;
	pid_t serving;
	int64_t idle_poll_ns;
	int64_t gap_outside_ns; /* the largest gap no reload spans, since
				 * last cleared */

	/* The reload in flight, and the process it replaces. */
	struct rec *cur;
	pid_t reload_pid; /* 0: reaped */
	int reload_status, reload_out;
	pid_t old;        /* 0: reaped */
	int64_t old_ns;   /* from wait4 */
};

/* ---- processes ---- */

/* The vmio serving, for a death midway (tool_die exits): it is no one
 * else's to end. */
static pid_t at_exit_kill;

static void kill_vmio(void)
{
	if (at_exit_kill > 0)
		kill(at_exit_kill, SIGTERM);
}

/* Spawns argv with stdout and stderr to out (-1: ours). */
static pid_t spawn(char *const *argv, int out)
{
	posix_spawn_file_actions_t fa;
	pid_t pid;
	int e;

	posix_spawn_file_actions_init(&fa);
	if (out >= 0) {
		posix_spawn_file_actions_adddup2(&fa, out, STDOUT_FILENO);
		posix_spawn_file_actions_adddup2(&fa, out, STDERR_FILENO);
	}
	e = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (e)
		tool_die("cannot start %s: %s", argv[0], strerror(e));
	return pid;
}

/* CPU time of every thread of pid, in ns (schedstat's first field);
 * -1 if it is gone. */
static int64_t task_ns(pid_t pid)
{
	char path[320];
	struct dirent *e;
	int64_t sum = 0;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	d = opendir(path);
	if (!d)
		return -1;
	while ((e = readdir(d))) {
		long long ns;
		FILE *f;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%s/schedstat",
			 (int)pid, e->d_name);
		f = fopen(path, "r");
		if (!f)
			continue; /* a thread that just ended */
		if (fscanf(f, "%lld", &ns) == 1)
			sum += ns;
		fclose(f);
	}
	closedir(d);
	return sum;
}

static const char *exit_why(int st, char *buf, size_t size)
{
	if (WIFEXITED(st))
		snprintf(buf, size, "status %d", WEXITSTATUS(st));
	else
		snprintf(buf, size, "signal %d", WTERMSIG(st));
	return buf;
}

/* Every child that ended: the reload, the process it replaced, or one
 * that must not end. */
static void reap(struct bench *b)
{
	struct rusage ru;
	char why[32];
	pid_t p;
	int st;

	while ((p = wait4(-1, &st, WNOHANG, &ru)) > 0) {
		if (p == b->reload_pid) {
			b->reload_pid = 0;
			b->reload_status = st;
			b->cur->end_ns = (int64_t)vmio_now_ns();
		} else if (p == b->old) {
			if (!WIFEXITED(st) || WEXITSTATUS(st))
				tool_die("the old vmio (pid %d) ended with %s",
					 (int)p, exit_why(st, why, sizeof(why)));
			b->old = 0;
			b->old_ns = (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) *
					    1000000000ll +
				    (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) *
					    1000ll;
		} else if (p == b->serving) {
			tool_die("vmio (pid %d) ended with %s", (int)p,
				 exit_why(st, why, sizeof(why)));
		} else if (p == b->host.pid) {
			b->host.pid = -1;
			tool_die("the host child ended with %s",
				 exit_why(st, why, sizeof(why)));
		}
	}
}

/* ---- the streams ---- */

/* Gaps: one that spans the reload in flight or the last one is its
 * pause; any other is the streams' own unevenness. */
static void gap(struct bench *b, const struct flow *f, int64_t t)
{
	int64_t g = t - f->last_rx_ns;
	struct rec *r = b->cur;

	if (!f->last_rx_ns)
		return;
	if (r && f->last_rx_ns < (r->end_ns ? r->end_ns : INT64_MAX) &&
	    t > r->start_ns) {
		if (g > r->pause_ns[f->dir])
			r->pause_ns[f->dir] = g;
	} else if (b->pacing && g > b->gap_outside_ns) {
		b->gap_outside_ns = g;
	}
}

/* Moves what a flow can move now; whether it moved a byte. */
static bool flow_step(struct bench *b, struct flow *f, int64_t now)
{
	static uint8_t out[PIECE], in[READ_SIZE];
	uint64_t rate = b->o->rate;
	bool moved = false;
	ssize_t r;

	if (b->pacing) {
		uint64_t n = PIECE;

		if (rate) {
			if (f->paid_ns < now - CATCH_UP_NS)
				f->paid_ns = now - CATCH_UP_NS;
			n = (uint64_t)(now - f->paid_ns) * rate / 1000000000u;
			if (n > PIECE)
				n = PIECE;
		}
		if (n) {
			vg_pattern_fill(f->seed, f->sent, out, n);
			r = f->w->ops->write(f->w->ctx, f->stream, out, n);
			if (r != XFER_AGAIN && r < 0)
				tool_die("stream %u %s: %s: %s", f->stream,
					 dir_name[f->dir], f->w->ops->write_name,
					 strerror((int)-r));
			if (r > 0) {
				f->sent += (uint64_t)r;
				f->paid_ns += rate ? (int64_t)((uint64_t)r *
							       1000000000u /
							       rate)
						   : 0;
				moved = true;
			}
		}
	}
	for (unsigned k = 0; k < 4; k++) {
		int64_t t;

		r = f->r->ops->read(f->r->ctx, f->stream, in, sizeof(in));
		if (r == XFER_AGAIN)
			break;
		if (r <= 0)
			tool_die("stream %u %s: %s after %" PRIu64 " bytes",
				 f->stream, dir_name[f->dir],
				 r ? strerror((int)-r) : "end of stream",
				 f->rcvd);
		if (vg_pattern_check(f->seed, f->rcvd, in, (size_t)r) !=
		    (size_t)r)
			tool_die("stream %u %s: wrong bytes at %" PRIu64,
				 f->stream, dir_name[f->dir],
				 f->rcvd + vg_pattern_check(f->seed, f->rcvd,
							    in, (size_t)r));
		t = (int64_t)vmio_now_ns();
		gap(b, f, t);
		f->rcvd += (uint64_t)r;
		f->last_rx_ns = t;
		moved = true;
	}
	return moved;
}

/* One turn: the streams, the guests, the children. */
static void step(struct bench *b)
{
	int64_t now = (int64_t)vmio_now_ns();
	bool moved = false;
	int r;

	for (unsigned i = 0; i < b->nf; i++)
		moved |= flow_step(b, &b->f[i], now);
	for (unsigned i = 0; i < b->nf; i++)
		if (b->pacing && b->f[i].last_rx_ns &&
		    now - b->f[i].last_rx_ns > XFER_STALL_MS * 1000000ll)
			tool_die("stream %u %s: nothing came for %d s",
				 b->f[i].stream, dir_name[b->f[i].dir],
				 XFER_STALL_MS / 1000);
	r = vg_poll_many(b->sg, b->nsg, moved ? 0 : 1);
	if (r < 0)
		tool_die("vg_poll: %s", strerror(-r));
	if (now - b->idle_poll_ns > IDLE_POLL_NS) {
		r = vg_poll_many(b->g, b->vms.n, 0);
		if (r < 0)
			tool_die("vg_poll: %s", strerror(-r));
		b->idle_poll_ns = now;
	}
	reap(b);
}

static void run_for(struct bench *b, uint64_t ms)
{
	int64_t end = (int64_t)vmio_now_ns() + (int64_t)ms * 1000000;

	while ((int64_t)vmio_now_ns() < end)
		step(b);
}

/* ---- reloads ---- */

/* `vmio reload` once, the streams served meanwhile, until it answered
 * and the old process exited; r gets the figures. */
static void reload(struct bench *b, struct rec *r)
{
	char *argv[] = { (char *)b->o->vmio, "reload",
			 (char *)b->o->control, NULL };
	char out[1024], why[32];
	const char *pid;
	int pipefd[2];
	int64_t old0;
	ssize_t n;

	*r = (struct rec){ .old = b->serving };
	if (pipe2(pipefd, O_CLOEXEC))
		tool_die("pipe: %s", strerror(errno));
	old0 = task_ns(b->serving);
	b->cur = r;
	b->old = b->serving;
	b->old_ns = -1;
	r->start_ns = (int64_t)vmio_now_ns();
	b->reload_pid = spawn(argv, pipefd[1]);
	close(pipefd[1]);
	while (b->reload_pid || b->old) {
		step(b);
		if (!b->reload_pid && !WIFEXITED(b->reload_status))
			tool_die("vmio reload: %s",
				 exit_why(b->reload_status, why, sizeof(why)));
		if (!b->reload_pid && WEXITSTATUS(b->reload_status) && b->old)
			break; /* refused: the old one serves on */
	}
	n = read(pipefd[0], out, sizeof(out) - 1);
	close(pipefd[0]);
	out[n > 0 ? n : 0] = '\0';
	out[strcspn(out, "\n")] = '\0';
	pid = strstr(out, "handed over to pid ");
	if (WEXITSTATUS(b->reload_status) || !pid)
		tool_die("reload of vmio %d failed: %s", (int)r->old, out);
	r->succ = (pid_t)strtol(pid + strlen("handed over to pid "), NULL, 10);
	b->serving = r->succ;
	at_exit_kill = b->serving;
	int64_t succ_ns = task_ns(r->succ);

	r->cpu_ns = old0 < 0 || b->old_ns < 0 || succ_ns < 0
			    ? -1
			    : b->old_ns - old0 + succ_ns;
}

/* Each reload's pause, time, noise after and CPU (-1: not known): */
enum { PAUSE, TOOK, BETWEEN, CPU, FIGURES };
static const char *const figure_name[FIGURES] = { "pause", "reload",
						  "gap_between", "vmio_cpu" };

static int64_t figure(const struct rec *r, unsigned f)
{
	switch (f) {
	case PAUSE:
		return r->pause_ns[0] > r->pause_ns[1] ? r->pause_ns[0]
						       : r->pause_ns[1];
	case TOOK:
		return r->end_ns - r->start_ns;
	case BETWEEN:
		return r->between_ns;
	default:
		return r->cpu_ns;
	}
}

/* The median (nearest rank) and the worst of each figure, in ms (each
 * kept as 32-bit ns: up to 4.29 s); the pause and the noise after it
 * only where the streams ran. */
static void summary(const char *what, const struct rec *rs, unsigned n,
		    bool streaming)
{
	struct rt_samples sm;

	printf("handover %s reloads=%u", what, n);
	rt_samples_init(&sm);
	for (unsigned f = streaming ? PAUSE : TOOK; f < FIGURES; f++) {
		if (!streaming && f == BETWEEN)
			continue;
		sm.n = 0;
		for (unsigned i = 0; i < n; i++)
			if (figure(&rs[i], f) >= 0)
				rt_keep(&sm, figure(&rs[i], f));
		rt_sort(&sm);
		if (sm.n)
			printf(" %s_ms_median=%.1f %s_ms_worst=%.1f",
			       figure_name[f], rt_pct_us(&sm, 50) / 1e3,
			       figure_name[f], rt_pct_us(&sm, 100) / 1e3);
		else
			printf(" %s_ms_median=- %s_ms_worst=-",
			       figure_name[f], figure_name[f]);
	}
	rt_samples_free(&sm);
	printf("\n");
	fflush(stdout);
}

/* ---- setting up ---- */

static void start_vmio(struct bench *b)
{
	const struct scale_handover_opts *o = b->o;
	char **argv = calloc(o->n_vmio_args + 8, sizeof(*argv));
	int log = -1;
	unsigned n = 0;

	if (!argv)
		tool_die("out of memory");
	argv[n++] = (char *)o->vmio;
	argv[n++] = "vsock";
	argv[n++] = "--control";
	argv[n++] = (char *)o->control;
	argv[n++] = "--config";
	argv[n++] = (char *)o->config;
	for (unsigned i = 0; i < o->n_vmio_args; i++)
		argv[n++] = o->vmio_args[i];
	if (o->log) {
		log = open(o->log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC,
			   0644);
		if (log < 0)
			tool_die("%s: %s", o->log, strerror(errno));
	}
	b->serving = spawn(argv, log);
	at_exit_kill = b->serving;
	atexit(kill_vmio);
	if (log >= 0)
		close(log);
	free(argv);

	/* Up once its control socket and every VM's socket are there. */
	int64_t end = vmio_now_ms() + XFER_STALL_MS;

	for (unsigned i = 0; i <= b->vms.n;) {
		const char *p = i < b->vms.n ? b->vms.vms[i].socket : o->control;
		struct stat st;

		if (!stat(p, &st) && S_ISSOCK(st.st_mode)) {
			i++;
			continue;
		}
		reap(b);
		if (vmio_now_ms() > end)
			tool_die("vmio did not create %s in %d s", p,
				 XFER_STALL_MS / 1000);
		usleep(10000);
	}
}

/* The host child holding the idle connections: one listener a VM. */
static void start_host(struct bench *b, struct scale_listener *l)
{
	static struct scale_host_cfg hc;
	char err[512];

	for (unsigned i = 0; i < b->vms.n; i++)
		l[i] = (struct scale_listener){ b->vms.vms[i].uds_path,
						SCALE_PORT_HOLD, SCALE_HOLD, i };
	hc = (struct scale_host_cfg){ l, b->vms.n, 1, 0 };
	if (scale_host_start(&hc, &b->host, err, sizeof(err)))
		tool_die("%s", err);
}

/* Stream j on VM j * n / streams; its host end accepted here. */
static void open_streams(struct bench *b)
{
	unsigned n = b->vms.n, k = b->o->streams;

	for (unsigned j = 0; j < k; j++) {
		const struct vsock_vm_spec *vm = &b->vms.vms[j * n / k];
		struct vg *g = b->g[j * n / k];
		int e = 0;

		if (j == 0 || b->sg[b->nsg - 1] != g)
			b->sg[b->nsg++] = g;
		if (asprintf(&b->lpath[j], "%s_%u", vm->uds_path,
			     SCALE_PORT_STREAM) < 0)
			tool_die("out of memory");
		b->lfd[j] = -1;
		if (j == 0 || j * n / k != (j - 1) * n / k) {
			b->lfd[j] = vmio_unix_listen(b->lpath[j], 64,
						     "vmio-scale", &b->lst[j]);
			if (b->lfd[j] < 0)
				tool_die("listen on %s: %s", b->lpath[j],
					 strerror(-b->lfd[j]));
		}
		b->gs[j] = vg_connect(g, SCALE_PORT_STREAM, XFER_STALL_MS, &e);
		if (!b->gs[j])
			tool_die("stream %u: connect: %s", j, strerror(-e));
		for (unsigned i = j + 1; i-- > 0;)
			if (b->lfd[i] >= 0) {
				struct pollfd p = { .fd = b->lfd[i],
						    .events = POLLIN };

				poll(&p, 1, XFER_STALL_MS);
				b->hfd[j] = accept4(b->lfd[i], NULL, NULL,
						    SOCK_CLOEXEC);
				break;
			}
		if (b->hfd[j] < 0)
			tool_die("stream %u: accept: %s", j, strerror(errno));
		tool_set_nonblock(b->hfd[j]);
	}
	b->xv = (struct xfer_vg){ b->gs, b->sg, b->nsg };
	b->gc = (struct xfer_conns){ &xfer_vg_ops, &b->xv };
	b->hc = (struct xfer_conns){ &xfer_fd_ops, b->hfd };
	for (unsigned j = 0; j < k; j++)
		for (unsigned d = 0; d < 2; d++)
			b->f[b->nf++] = (struct flow){
				.stream = j, .dir = d,
				.w = d ? &b->hc : &b->gc,
				.r = d ? &b->gc : &b->hc,
				.seed = 2 * j + d + 1,
			};
}

/* The idle connections: conns a VM, less its streams. */
static uint64_t open_idle(struct bench *b)
{
	unsigned n = b->vms.n, k = b->o->streams;
	unsigned *per = calloc(n, sizeof(*per));
	uint64_t total = 0;
	char err[512];

	if (!per)
		tool_die("out of memory");
	for (unsigned i = 0; i < n; i++)
		per[i] = b->o->conns;
	for (unsigned j = 0; j < k; j++)
		per[j * n / k]--;
	/* fleet_connect opens as many on each guest it is given: the VMs
	 * of one count at a time. */
	for (unsigned i = 0; i < n; i++) {
		struct vg **gs;
		struct vg_sock **out;
		unsigned m = 0, c = per[i];

		if (c == UINT32_MAX)
			continue;
		gs = calloc(n, sizeof(*gs));
		if (!gs)
			tool_die("out of memory");
		for (unsigned x = i; x < n; x++)
			if (per[x] == c) {
				gs[m++] = b->g[x];
				per[x] = UINT32_MAX;
			}
		out = calloc((size_t)m * c + 1, sizeof(*out));
		if (!out)
			tool_die("out of memory");
		if (c && fleet_connect(gs, m, SCALE_PORT_HOLD, c,
				       b->o->window, false, out, err,
				       sizeof(err)))
			tool_die("idle connections: %s", err);
		total += (uint64_t)m * c;
		free(out); /* the guests keep their sockets */
		free(gs);
	}
	free(per);
	return total;
}

/* ---- the two runs ---- */

/* Reloads while the streams run, a reload every settle_ms: the pause of
 * each into rs. */
static void pauses(struct bench *b, struct rec *rs)
{
	const struct scale_handover_opts *o = b->o;
	uint64_t moved = 0;

	b->pacing = true;
	for (unsigned i = 0; i < b->nf; i++)
		b->f[i].paid_ns = (int64_t)vmio_now_ns();
	run_for(b, o->settle_ms);
	for (unsigned k = 0; k < o->reloads; k++) {
		struct rec *r = &rs[k];

		reload(b, r);
		/* Every flow's first byte after it, then streaming alone. */
		for (unsigned i = 0; i < b->nf;)
			if (b->f[i].last_rx_ns > r->end_ns)
				i++;
			else
				step(b);
		b->cur = NULL;
		b->gap_outside_ns = 0;
		run_for(b, o->settle_ms);
		r->between_ns = b->gap_outside_ns;
		printf("handover reload=%u pid=%d->%d pause_ms=%.1f "
		       "g2h_ms=%.1f h2g_ms=%.1f reload_ms=%.1f "
		       "vmio_cpu_ms=%.1f gap_after_ms=%.1f\n", k + 1,
		       (int)r->old, (int)r->succ,
		       (double)figure(r, PAUSE) / 1e6,
		       (double)r->pause_ns[0] / 1e6,
		       (double)r->pause_ns[1] / 1e6,
		       (double)figure(r, TOOK) / 1e6,
		       (double)r->cpu_ns / 1e6, (double)r->between_ns / 1e6);
		fflush(stdout);
	}
	b->pacing = false;
	if (!o->reloads)
		return;
	for (unsigned i = 0; i < b->nf; i++)
		moved += b->f[i].rcvd;
	summary("pauses", rs, o->reloads, true);
	printf("handover streams bytes=%" PRIu64 " all checked\n", moved);
}

/* Reloads back to back, the streams quiet: whether the serving
 * process's descriptors or mappings changed (fds0 and maps0: the first
 * process's, for the record). */
static bool leaks(struct bench *b, struct rec *lr, long fds0, long maps0)
{
	unsigned n = b->o->leak_reloads;
	long fds1, maps1, fds2, maps2;
	struct rec warm;

	/* Counted from a successor that took over quiet streams, as the
	 * last will: one that served them has a malloc arena more for each
	 * worker thread that copied their bytes. */
	run_for(b, QUIET_MS);
	reload(b, &warm);
	b->cur = NULL;
	run_for(b, QUIET_MS);
	fds1 = vmio_proc_fd_count(b->serving);
	maps1 = vmio_proc_maps_count(b->serving);
	for (unsigned k = 0; k < n; k++) {
		reload(b, &lr[k]);
		b->cur = NULL;
	}
	run_for(b, QUIET_MS);
	fds2 = vmio_proc_fd_count(b->serving);
	maps2 = vmio_proc_maps_count(b->serving);
	summary("leaks", lr, n, false);
	printf("handover leaks reloads=%u fds=%ld->%ld maps=%ld->%ld "
	       "first_process_fds=%ld first_process_maps=%ld %s\n", n, fds1,
	       fds2, maps1, maps2, fds0, maps0,
	       fds1 == fds2 && maps1 == maps2 ? "equal" : "DIFFERENT");
	fflush(stdout);
	return fds1 != fds2 || maps1 != maps2;
}

int scale_handover(const struct scale_handover_opts *o)
{
	struct bench b = { .o = o };
	struct scale_listener *l;
	struct scale_host_msg held;
	struct rec *rs;
	uint64_t idle, need;
	long fds0, maps0;
	char err[512];
	int rc = 0;

	if (fleet_load(&b.vms, o->config, err, sizeof(err)))
		tool_die("%s", err);
	if (!o->streams || o->streams > MAX_STREAMS ||
	    o->conns < (o->streams + b.vms.n - 1) / b.vms.n)
		tool_die("--streams %u: 1 to %u, and no more on a VM than "
			 "--conns", o->streams, MAX_STREAMS);
	/* The host child holds a socket per idle connection. */
	need = (uint64_t)b.vms.n * o->conns + b.vms.n + FD_SLACK;
	if (need < (uint64_t)b.vms.n * FD_PER_GUEST + FD_SLACK)
		need = (uint64_t)b.vms.n * FD_PER_GUEST + FD_SLACK;
	if (nofile_raise(need, err, sizeof(err)))
		tool_die("%s", err);
	/* Successors are ours to wait for once their parent exits. */
	if (prctl(PR_SET_CHILD_SUBREAPER, 1))
		tool_die("PR_SET_CHILD_SUBREAPER: %s", strerror(errno));
	l = calloc(b.vms.n, sizeof(*l));
	b.g = calloc(b.vms.n, sizeof(*b.g));
	rs = calloc(o->reloads + o->leak_reloads + 1, sizeof(*rs));
	if (!l || !b.g || !rs)
		tool_die("out of memory");
	b.host.pid = -1;
	start_host(&b, l);
	start_vmio(&b);
	for (unsigned i = 0; i < b.vms.n; i++) {
		b.g[i] = fleet_open(&b.vms.vms[i], o->conns + 2, err,
				    sizeof(err));
		if (!b.g[i])
			tool_die("VM %u: %s", i, err);
	}

	int64_t t0 = (int64_t)vmio_now_ns();

	idle = open_idle(&b);
	open_streams(&b);
	if (scale_host_wait_held(&b.host, idle, &held) || held.n < idle)
		tool_die("the host holds %" PRIu64 " of %" PRIu64
			 " idle connections", held.n, idle);
	fds0 = vmio_proc_fd_count(b.serving);
	maps0 = vmio_proc_maps_count(b.serving);
	printf("handover vms=%u conns/vm=%u conns=%" PRIu64 " streams=%u "
	       "rate_MB/s=%.1f establish_s=%.2f vmio_fds=%ld vmio_maps=%ld\n",
	       b.vms.n, o->conns, idle + o->streams, o->streams,
	       (double)o->rate / 1e6,
	       (double)((int64_t)vmio_now_ns() - t0) / 1e9, fds0, maps0);
	fflush(stdout);

	pauses(&b, rs);
	if (o->leak_reloads && leaks(&b, rs + o->reloads, fds0, maps0))
		rc = 1;

	/* Every connection came through every hand-over. */
	if (scale_host_wait_held(&b.host, idle, &held))
		tool_die("the host child is gone");
	uint64_t violations = 0;

	for (unsigned i = 0; i < b.vms.n; i++)
		violations += b.g[i]->violations;
	printf("handover after: %" PRIu64 " of %" PRIu64 " idle connections "
	       "held, %" PRIu64 " closed, %" PRIu64 " stray bytes, %" PRIu64
	       " protocol violations\n", held.n, idle, held.m, held.bytes,
	       violations);
	if (held.n != idle || held.m || held.bytes || violations)
		rc = 1;
	for (unsigned j = 0; j < o->streams; j++) {
		close(b.hfd[j]);
		if (b.lfd[j] >= 0) {
			close(b.lfd[j]);
			vmio_unix_unlink_if_same(b.lpath[j], &b.lst[j]);
		}
		free(b.lpath[j]);
	}
	for (unsigned i = 0; i < b.vms.n; i++)
		vg_free(b.g[i]);
	kill(b.serving, SIGTERM);
	waitpid(b.serving, NULL, 0);
	at_exit_kill = 0;
	scale_host_stop(&b.host);
	free(l);
	free(b.g);
	free(rs);
	vsock_vms_release(&b.vms);
	return rc;
}
