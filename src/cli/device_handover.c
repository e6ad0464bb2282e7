/* A vhost-user device command handed over (device_handover.h). */
#include "cli/device_handover.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/control_handover.h"
#include "cli/serve.h"
#include "handover/start_path.h"
#include "util/log.h"

/* How soon a unit tries again for a message boundary: a VMM finishes a
 * message in microseconds, unless it is gone or hostile, which its
 * message timeout ends. */
#define RETRY_NS (1000 * 1000ull)

enum step {
	STEP_SAVE,
	STEP_RESUME,
	STEP_HAND_OVER,
	STEP_SERVE, /* the successor's, once taken over */
};

static const char *plural(const struct devho *h)
{
	return h->n == 1 ? "" : "s";
}

/* ---- On each unit's worker ---------------------------------------------- */

static void report(struct devho_unit *u)
{
	vmio_defer_post(&u->report);
}

__attribute__((format(printf, 2, 3))) static void
fail(struct devho_unit *u, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(u->why, sizeof(u->why), fmt, ap);
	va_end(ap);
}

static void pause_host(struct devho_unit *u, bool paused)
{
	if (u->h->ops->pause_host)
		u->h->ops->pause_host(u->dev, paused);
	u->paused = paused;
}

/* Held, or no front end: the host side stops, both records are taken. */
static void save(struct devho_unit *u)
{
	const struct devho_ops *ops = u->h->ops;
	unsigned max = u->h->max_device_fds;
	const char *why = NULL;
	char err[200];

	pause_host(u, true);
	if (u->has_session &&
	    vmio_session_save(u->be, &u->session, err, sizeof(err))) {
		fail(u, "its vhost-user session: %s", err);
		return;
	}
	u->device_fds = calloc(max ? max : 1, sizeof(*u->device_fds));
	if (!u->device_fds) {
		fail(u, "out of memory");
		return;
	}
	vmio_wire_writer_init(&u->device, VMIO_ENVELOPE_MAX_BYTES);
	if (ops->save(u->dev, &u->device, u->device_fds, max, &u->ndevice_fds,
		      &why))
		fail(u, "its %s: %s", ops->device, why);
	else if (u->device.failed)
		fail(u, "its %s's state is over %u MiB (%s)", ops->device,
		     VMIO_ENVELOPE_MAX_BYTES >> 20, ops->too_big);
}

static void on_held(void *opaque)
{
	struct devho_unit *u = opaque;

	u->held = true;
	u->has_session = true;
	save(u);
	report(u);
}

/* One try at a message boundary; reports unless it tries again. */
static void try_hold(struct devho_unit *u)
{
	char err[200];
	int rc = vmio_session_hold(u->be, on_held, u, err, sizeof(err));

	switch (rc) {
	case 0:
		on_held(u);
		return;
	case -EINPROGRESS:
		u->held = true; /* on_held follows */
		return;
	case -ENOTCONN:
		u->has_session = false;
		save(u);
		break;
	case -EAGAIN:
		if (vmio_loop_now_ns(u->loop) < u->deadline_ns) {
			vmio_timer_arm_ns(&u->retry, RETRY_NS);
			return;
		}
		fail(u, "not at a message boundary within %u ms: %s",
		     u->h->timeout_ms, err);
		break;
	default:
		fail(u, "%s", err);
	}
	report(u);
}

static void on_retry(void *opaque)
{
	try_hold(opaque);
}

/* Whatever step 1 did, undone: the unit is served as before. */
static void resume(struct devho_unit *u)
{
	if (u->paused)
		pause_host(u, false);
	if (u->held && vmio_session_resume(u->be))
		log_warn("hand-over: %s %u: its front end left during the hand-over",
			 u->h->ops->unit, u->index + 1);
	vmio_backend_hold_accept(u->be, false);
	u->paused = u->held = false;
}

/* The successor serves the unit: this process's copies go, unused. */
static void hand_over(struct devho_unit *u)
{
	if (u->held)
		vmio_session_handed_over(u->be);
	if (u->h->ops->handed_over)
		u->h->ops->handed_over(u->dev);
	vmio_backend_give_up_listener(u->be);
	u->held = false;
}

static void on_work(void *opaque)
{
	struct devho_unit *u = opaque;

	switch (u->step) {
	case STEP_SAVE:
		u->why[0] = '\0';
		u->held = u->paused = u->has_session = false;
		vmio_backend_hold_accept(u->be, true);
		u->deadline_ns = vmio_loop_now_ns(u->loop) +
				 u->h->timeout_ms * 1000000ull;
		try_hold(u);
		return;
	case STEP_RESUME:
		resume(u);
		break;
	case STEP_HAND_OVER:
		hand_over(u);
		break;
	case STEP_SERVE:
		devho_serve(u->h->ops, u->dev, u->be);
		break;
	}
	report(u);
}

/* ---- On worker 0 -------------------------------------------------------- */

static void ask_every_unit(struct devho *h, enum step step)
{
	h->pending = h->n;
	for (unsigned i = 0; i < h->n; i++) {
		h->units[i].step = step;
		vmio_defer_post(&h->units[i].work);
	}
}

/* The records and the successor, done with whatever the outcome. The
 * units are held or paused meanwhile: nothing of theirs moves. */
static void drop_state(struct devho *h)
{
	vmio_successor_free(h->succ);
	h->succ = NULL;
	vmio_envelope_writer_fini(&h->env);
	free(h->fds);
	h->fds = NULL;
	h->nfds = 0;
	for (unsigned i = 0; i < h->n; i++) {
		struct devho_unit *u = &h->units[i];

		vmio_session_record_free(&u->session);
		vmio_wire_writer_fini(&u->device);
		free(u->device_fds);
		u->device_fds = NULL;
		u->ndevice_fds = 0;
	}
}

static void give_up(struct devho *h)
{
	log_err("hand-over failed: %s; this process goes on serving", h->why);
	drop_state(h);
	h->phase = DEVHO_RESUMING;
	ask_every_unit(h, STEP_RESUME);
}

static void on_outcome(void *opaque, pid_t pid, const char *why)
{
	struct devho *h = opaque;

	if (why) {
		if (!h->why[0])
			snprintf(h->why, sizeof(h->why), "%s", why);
		if (h->phase == DEVHO_STARTING) {
			/* No unit stopped: nothing to resume. */
			vmio_timer_cancel(&h->ready_wait);
			log_err("hand-over failed: %s; this process goes on serving",
				h->why);
			drop_state(h);
			h->phase = DEVHO_IDLE;
			vmio_control_reload_done(*h->ctl, 0, h->why);
		} else if (h->phase == DEVHO_STARTED) {
			give_up(h);
		}
		/* While the units save, their answers decide when to resume
		 * (phase_done). */
		return;
	}
	/* The answer goes out before the listener does: the client that
	 * asked is connected to this process. */
	vmio_control_reload_done(*h->ctl, (int)pid, NULL);
	vmio_control_give_up_listener(*h->ctl);
	/* The successor is this process's child: if it exits (handing
	 * over in turn) once this one is gone, init reaps it; until then it
	 * must not stay a zombie here. */
	signal(SIGCHLD, SIG_IGN);
	log_info("hand-over: vmio %d took over %u %s%s; this process exits",
		 (int)pid, h->n, h->ops->unit, plural(h));
	drop_state(h);
	h->phase = DEVHO_HANDING;
	ask_every_unit(h, STEP_HAND_OVER);
}

/* Unit u's part of the state, its fds appended to h->fds. */
static int add_unit(struct devho *h, const struct devho_unit *u)
{
	int lfd = vmio_backend_listener(u->be);
	uint8_t kind = lfd < 0 ? DEVHO_LISTENER_NONE
		       : vmio_backend_owns_socket_file(u->be)
			       ? DEVHO_LISTENER_BOUND
			       : DEVHO_LISTENER_INHERITED;
	unsigned nfds = (lfd >= 0) + u->session.nfds + u->ndevice_fds;
	struct vmio_wire_writer w;
	char name[VMIO_ENVELOPE_NAME_MAX + 1];
	int rc;

	vmio_wire_writer_init(&w, VMIO_ENVELOPE_MAX_BYTES);
	if (h->ops->put_head)
		h->ops->put_head(h->opaque, u->index, &w);
	vmio_wire_put_u8(&w, kind);
	vmio_wire_put_u32(&w, (uint32_t)u->session.len);
	vmio_wire_put_bytes(&w, u->session.bytes, u->session.len);
	vmio_wire_put_u32(&w, u->session.nfds);
	vmio_wire_put_u32(&w, (uint32_t)u->device.len);
	vmio_wire_put_bytes(&w, u->device.buf, u->device.len);
	vmio_wire_put_u32(&w, u->ndevice_fds);
	snprintf(name, sizeof(name), "%s.%u", h->ops->section, u->index);
	rc = w.failed ? -1
		      : vmio_envelope_add(&h->env, name, w.buf, w.len, nfds);
	vmio_wire_writer_fini(&w);
	if (lfd >= 0)
		h->fds[h->nfds++] = lfd;
	for (unsigned i = 0; i < u->session.nfds; i++)
		h->fds[h->nfds++] = u->session.fds[i];
	for (unsigned i = 0; i < u->ndevice_fds; i++)
		h->fds[h->nfds++] = u->device_fds[i];
	return rc;
}

static int write_state(struct devho *h, const uint8_t **rec, size_t *len)
{
	size_t total = 1;
	int cfd;

	for (unsigned i = 0; i < h->n; i++)
		total += 1 + h->units[i].session.nfds + h->units[i].ndevice_fds;
	h->fds = calloc(total, sizeof(*h->fds));
	if (!h->fds)
		return -1;
	vmio_envelope_writer_init(&h->env, VMIO_VERSION);
	for (unsigned i = 0; i < h->n; i++)
		if (add_unit(h, &h->units[i]))
			return -1;
	if (h->ops->add_sections && h->ops->add_sections(h->opaque, &h->env))
		return -1;
	if (control_handover_add(&h->env, *h->ctl, h->control_path, &cfd))
		return -1;
	if (cfd >= 0)
		h->fds[h->nfds++] = cfd;
	return vmio_envelope_finish(&h->env, rec, len);
}

/* The successor is ready for the state (or the wait for a vmio that
 * does not say so is over): the units stop now. */
static void stop_units(struct devho *h)
{
	if (h->phase != DEVHO_STARTING)
		return;
	vmio_timer_cancel(&h->ready_wait);
	h->phase = DEVHO_SAVING;
	ask_every_unit(h, STEP_SAVE);
}

static void on_ready(void *opaque)
{
	stop_units(opaque);
}

/* At the request, before any unit stops: the successor execs and sets
 * itself up while the guests are served. Returns 0, or -1 with why
 * (nothing started). */
static int start_successor(struct devho *h, char *why, size_t why_size)
{
	struct vmio_successor_opts o = {
		.path = vmio_start_path(),
		.argv = vmio_start_argv(),
		.timeout_ms = h->timeout_ms,
		.done = on_outcome,
		.ready = on_ready,
		.opaque = h,
	};

	h->succ = vmio_successor_start(h->loop, &o, why, why_size);
	if (!h->succ)
		return -1;
	h->phase = DEVHO_STARTING;
	vmio_timer_arm_ms(&h->ready_wait, DEVHO_READY_WAIT_MS);
	return 0;
}

/* Every unit saved: the successor gets the state. */
static void send_state(struct devho *h)
{
	const uint8_t *rec;
	size_t len;

	if (write_state(h, &rec, &len)) {
		snprintf(h->why, sizeof(h->why),
			 "cannot write the state: out of memory, or over its bounds (%u MiB, %u sections, %u fds)",
			 VMIO_ENVELOPE_MAX_BYTES >> 20,
			 VMIO_ENVELOPE_MAX_SECTIONS, VMIO_ENVELOPE_MAX_FDS);
		give_up(h);
		return;
	}
	vmio_successor_send(h->succ, rec, len, h->fds, h->nfds);
	h->phase = DEVHO_STARTED;
	log_info("hand-over: %u %s%s held; the state went to %s, waiting up to %u ms from the request for it to take over",
		 h->n, h->ops->unit, plural(h), vmio_start_path(),
		 h->timeout_ms);
}

/* A request that came while the units were still being served after a
 * take-over, started now. */
static void start_waiting_request(struct devho *h)
{
	char why[512];

	h->request_waits = false;
	h->why[0] = '\0';
	if (start_successor(h, why, sizeof(why))) {
		log_err("hand-over not started: %s", why);
		vmio_control_reload_done(*h->ctl, 0, why);
	}
}

/* Every unit has answered the phase's step. */
static void phase_done(struct devho *h)
{
	switch (h->phase) {
	case DEVHO_SAVING:
		if (h->why[0])
			give_up(h);
		else
			send_state(h);
		return;
	case DEVHO_RESUMING:
		vmio_control_reload_done(*h->ctl, 0, h->why);
		h->phase = DEVHO_IDLE;
		return;
	case DEVHO_HANDING:
		h->phase = DEVHO_DONE;
		vmio_workers_stop(h->pool);
		return;
	case DEVHO_SERVING:
		log_info("hand-over: took over %u %s%s", h->n, h->ops->unit,
			 plural(h));
		h->phase = DEVHO_IDLE;
		if (h->request_waits)
			start_waiting_request(h);
		return;
	default:
		return;
	}
}

static void on_report(void *opaque)
{
	struct devho_unit *u = opaque;
	struct devho *h = u->h;

	if (h->phase == DEVHO_SAVING && u->why[0] && !h->why[0])
		snprintf(h->why, sizeof(h->why), "%s %u: %s", h->ops->unit,
			 u->index + 1, u->why);
	if (--h->pending == 0)
		phase_done(h);
}

static int request(struct devho *h, char *why, size_t why_size)
{
	if (h->phase == DEVHO_HANDING || h->phase == DEVHO_DONE) {
		snprintf(why, why_size,
			 "this process has handed over already and is exiting");
		return -1;
	}
	if (h->phase == DEVHO_SERVING && !h->request_waits) {
		/* Taken over a moment ago: the units first serve, on their
		 * workers, then this request starts (phase_done). */
		h->request_waits = true;
		return 0;
	}
	if (h->phase != DEVHO_IDLE) {
		snprintf(why, why_size, "a hand-over is under way already");
		return -1;
	}
	if (!vmio_start_path()) {
		snprintf(why, why_size,
			 "the path this vmio was started from is not known");
		return -1;
	}
	h->why[0] = '\0';
	return start_successor(h, why, why_size);
}

int devho_request(void *opaque, char *why, size_t why_size)
{
	int rc = request(opaque, why, why_size);

	if (rc)
		log_err("hand-over not started: %s", why);
	return rc;
}

void devho_on_sighup(void *opaque)
{
	char why[512];

	devho_request(opaque, why, sizeof(why));
}

int devho_watch(struct devho *h)
{
	vmio_control_set_reload(*h->ctl, devho_request, h);
	return vmio_cli_watch_reload(devho_on_sighup, h);
}

/* ---- Set-up -------------------------------------------------------------- */

int devho_alloc(struct devho *h, unsigned n)
{
	h->units = calloc(n, sizeof(*h->units));
	if (!h->units) {
		log_err("out of memory for the hand-over");
		return -1;
	}
	h->n = n;
	return 0;
}

static void on_ready_wait(void *opaque)
{
	stop_units(opaque);
}

int devho_init(struct devho *h)
{
	if (vmio_timer_init(&h->ready_wait, h->loop, on_ready_wait, h)) {
		log_err("out of memory for the hand-over's timers");
		return -1;
	}
	for (unsigned i = 0; i < h->n; i++) {
		struct devho_unit *u = &h->units[i];

		u->h = h;
		u->index = i;
		for (unsigned k = 0; k < VMIO_SESSION_MAX_FDS; k++)
			u->session.fds[k] = -1;
		vmio_defer_init(&u->work, u->loop, on_work, u);
		vmio_defer_init(&u->report, h->loop, on_report, u);
		if (vmio_timer_init(&u->retry, u->loop, on_retry, u)) {
			log_err("out of memory for the hand-over's timers");
			return -1;
		}
	}
	return 0;
}

void devho_fini(struct devho *h)
{
	if (!h->units)
		return;
	drop_state(h);
	vmio_timer_fini(&h->ready_wait);
	for (unsigned i = 0; i < h->n; i++) {
		vmio_defer_cancel(&h->units[i].work);
		vmio_defer_cancel(&h->units[i].report);
		vmio_timer_fini(&h->units[i].retry);
	}
	free(h->units);
	h->units = NULL;
}

/* ---- The successor's side ------------------------------------------------ */

/* fds[*next .. *next + n), or NULL if the section has not that many. */
static int *fd_run(struct devho_taken *u, unsigned *next, unsigned n,
		   struct vmio_wire_reader *r)
{
	int *p = u->fds + *next;

	if (n > u->nfds - *next) {
		vmio_wire_fail(r, "names more fds than it carries");
		return NULL;
	}
	*next += n;
	return p;
}

static void parse_unit(struct vmio_wire_reader *r, struct devho_taken *u)
{
	unsigned next = 0;

	u->listener_kind = vmio_wire_get_u8(r);
	u->session_len = vmio_wire_get_count(r, 1);
	u->session = vmio_wire_get_bytes(r, u->session_len);
	u->nsession_fds = vmio_wire_get_u32(r);
	u->device_len = vmio_wire_get_count(r, 1);
	u->device = vmio_wire_get_bytes(r, u->device_len);
	u->ndevice_fds = vmio_wire_get_u32(r);
	if (!vmio_wire_ok(r))
		return;
	if (r->left)
		vmio_wire_fail(r, "bytes past its end");
	else if (u->listener_kind > DEVHO_LISTENER_INHERITED)
		vmio_wire_fail(r, "an unknown kind of listener");
	else if (u->listener_kind != DEVHO_LISTENER_NONE &&
		 fd_run(u, &next, 1, r))
		u->listener = u->fds[0];
	if (!vmio_wire_ok(r))
		return;
	u->session_fds = fd_run(u, &next, u->nsession_fds, r);
	u->device_fds = fd_run(u, &next, u->ndevice_fds, r);
	if (vmio_wire_ok(r) && next != u->nfds)
		vmio_wire_fail(r, "carries fds it does not name");
}

int devho_open(struct vmio_takeover *t, const struct devho_ops *ops,
	       unsigned index,
	       void (*head)(void *opaque, struct vmio_wire_reader *r),
	       void *opaque, struct devho_taken *u)
{
	const struct vmio_envelope_section *s;
	char name[VMIO_ENVELOPE_NAME_MAX + 1];
	struct vmio_wire_reader r;

	memset(u, 0, sizeof(*u));
	u->listener = -1;
	snprintf(name, sizeof(name), "%s.%u", ops->section, index);
	s = vmio_envelope_find(&t->env, name);
	if (!s) {
		snprintf(t->why, sizeof(t->why),
			 "the predecessor served fewer %ss (no %s %u in its state)",
			 ops->unit, ops->unit, index + 1);
		return -1;
	}
	u->fds = calloc(s->fd_count ? s->fd_count : 1, sizeof(*u->fds));
	if (!u->fds) {
		snprintf(t->why, sizeof(t->why), "out of memory");
		return -1;
	}
	if (!vmio_takeover_take(t, name, s->fd_count, u->fds))
		return -1;
	u->nfds = s->fd_count;
	vmio_wire_reader_init(&r, s->data, s->len);
	if (head)
		head(opaque, &r);
	if (vmio_wire_ok(&r))
		parse_unit(&r, u);
	if (!vmio_wire_ok(&r)) {
		snprintf(t->why, sizeof(t->why), "%s %u's state: %s", ops->unit,
			 index + 1, r.why);
		return -1;
	}
	return 0;
}

int devho_restore_session(struct devho_taken *u, struct vmio_backend *be,
			  char *why, size_t why_size)
{
	char err[200];

	if (!u->session_len && !u->nsession_fds)
		return 0;
	if (vmio_session_restore(be, u->session, u->session_len,
				 u->session_fds, u->nsession_fds, err,
				 sizeof(err))) {
		snprintf(why, why_size, "its vhost-user session: %s", err);
		return -1;
	}
	return 0;
}

int devho_take_listener(struct devho_taken *u)
{
	int fd = u->listener;

	if (fd >= 0)
		u->fds[0] = -1;
	u->listener = -1;
	return fd;
}

void devho_taken_fini(struct devho_taken *u)
{
	for (unsigned i = 0; i < u->nfds; i++)
		if (u->fds[i] >= 0)
			close(u->fds[i]);
	free(u->fds);
	u->fds = NULL;
	u->nfds = 0;
}

void devho_let_go(const struct devho_ops *ops, void *dev,
		  struct vmio_backend *be)
{
	if (be) {
		vmio_session_handed_over(be);
		vmio_backend_give_up_listener(be);
	}
	if (dev && ops->handed_over)
		ops->handed_over(dev);
}

void devho_serve(const struct devho_ops *ops, void *dev,
		 struct vmio_backend *be)
{
	if (ops->pause_host)
		ops->pause_host(dev, false);
	/* No session: nothing to resume (-EINVAL), the listener serves. */
	vmio_session_resume(be);
}

int devho_took_over(struct devho *h, struct vmio_takeover *t)
{
	int rc = vmio_takeover_accept(t);

	vmio_takeover_fini(t);
	if (rc)
		return -1;
	/* Each unit on its own worker, once the workers run: the units of
	 * different workers resume side by side. */
	h->phase = DEVHO_SERVING;
	ask_every_unit(h, STEP_SERVE);
	return 0;
}

void devho_refuse(struct vmio_takeover *t)
{
	if (t->sock >= 0)
		vmio_takeover_refuse(t, t->why[0] ? t->why
						  : "it could not set up");
}
