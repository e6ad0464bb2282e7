/* `vmio redirect` handed over (redirect_handover.h). */
#include "cli/redirect_handover.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/control_handover.h"
#include "handover/start_path.h"
#include "util/log.h"

#define SECTION_LISTENER "redirect.listener"
/* How often a draining process looks whether its last relay ended. */
#define DRAIN_CHECK_MS 50u

static unsigned open_relays(const struct redirect_handover *h)
{
	unsigned n = 0;

	for (unsigned k = 0; k < h->nworkers; k++)
		n += redir_worker_count(&h->workers[k]);
	return n;
}

static void on_drain_check(void *opaque)
{
	struct redirect_handover *h = opaque;

	if (open_relays(h))
		return;
	log_info("hand-over: the last relay of this process has ended, exiting");
	vmio_timer_cancel(&h->drain_check);
	h->stop(h->opaque);
}

static void on_drain_bound(void *opaque)
{
	struct redirect_handover *h = opaque;

	log_warn("hand-over: %u relays still open after --drain-timeout %u s; closing them",
		 open_relays(h), h->drain_s);
	vmio_timer_cancel(&h->drain_check);
	h->stop(h->opaque);
}

int redirect_handover_init(struct redirect_handover *h)
{
	if (vmio_timer_init(&h->drain_check, h->loop, on_drain_check, h) ||
	    vmio_timer_init(&h->drain_bound, h->loop, on_drain_bound, h)) {
		log_err("out of memory for the hand-over's timers");
		return -1;
	}
	return 0;
}

void redirect_handover_fini(struct redirect_handover *h)
{
	vmio_successor_free(h->succ);
	h->succ = NULL;
	vmio_envelope_writer_fini(&h->w);
	vmio_timer_fini(&h->drain_check);
	vmio_timer_fini(&h->drain_bound);
}

/* The successor serves: this process only finishes what it has. */
static void drain(struct redirect_handover *h, int pid)
{
	unsigned n = open_relays(h);

	h->handed_over = true;
	/* The successor is this process's child: if it exits (handing over
	 * in turn) while this one drains, it must not stay a zombie. */
	signal(SIGCHLD, SIG_IGN);
	redir_listener_give_up(h->listener);
	vmio_control_give_up_listener(*h->ctl);
	log_info("hand-over: vmio %d took over; this process accepts no more and exits once its %u open relay%s ended",
		 pid, n, n == 1 ? " has" : "s have");
	vmio_timer_arm_periodic_ns(&h->drain_check, DRAIN_CHECK_MS * 1000000u);
	if (h->drain_s)
		vmio_timer_arm_ms(&h->drain_bound, h->drain_s * 1000ull);
	on_drain_check(h);
}

static void on_outcome(void *opaque, pid_t pid, const char *why)
{
	struct redirect_handover *h = opaque;

	if (why)
		log_err("hand-over failed: %s; this process goes on serving",
			why);
	/* The answer goes out before the listener does: the client that
	 * asked is connected to this process. */
	vmio_control_reload_done(*h->ctl, (int)pid, why);
	if (!why)
		drain(h, (int)pid);
	vmio_successor_free(h->succ);
	h->succ = NULL;
	vmio_envelope_writer_fini(&h->w);
}

/* The record: ADDRESS1 as this process reads it, so that a successor
 * started with other arguments refuses; the control socket's path for
 * the same reason. */
static int write_state(struct redirect_handover *h, const uint8_t **rec,
		       size_t *len, size_t *nfds)
{
	char where[160];
	int cfd;

	redir_endpoint_describe(h->ep0, where, sizeof(where));
	vmio_envelope_writer_init(&h->w, VMIO_VERSION);
	vmio_envelope_add(&h->w, SECTION_LISTENER, where, strlen(where), 1);
	control_handover_add(&h->w, *h->ctl, h->control_path, &cfd);
	h->fds[0] = h->listener->fd;
	h->fds[1] = cfd;
	*nfds = cfd >= 0 ? 2 : 1;
	return vmio_envelope_finish(&h->w, rec, len);
}

static int request(struct redirect_handover *h, char *why, size_t why_size);

int redirect_handover_request(void *opaque, char *why, size_t why_size)
{
	int rc = request(opaque, why, why_size);

	if (rc)
		log_err("hand-over not started: %s", why);
	return rc;
}

static int request(struct redirect_handover *h, char *why, size_t why_size)
{
	struct vmio_successor_opts o = {
		.path = vmio_start_path(),
		.argv = vmio_start_argv(),
		.timeout_ms = h->timeout_ms,
		.done = on_outcome,
		.opaque = h,
	};
	char where[160];
	const uint8_t *rec;
	size_t len, nfds;

	if (h->succ) {
		snprintf(why, why_size, "a hand-over is under way already");
		return -1;
	}
	if (h->handed_over) {
		snprintf(why, why_size,
			 "this process has handed over already and is draining");
		return -1;
	}
	if (h->listener->fd < 0) {
		snprintf(why, why_size,
			 "ADDRESS1 %s does not listen (UNIX-RECV, a connecting address, or no fork and its one connection made): nothing a successor could serve",
			 redir_endpoint_describe(h->ep0, where, sizeof(where)));
		return -1;
	}
	if (write_state(h, &rec, &len, &nfds)) {
		vmio_envelope_writer_fini(&h->w);
		snprintf(why, why_size, "cannot write the state (out of memory)");
		return -1;
	}
	h->succ = vmio_successor_start(h->loop, &o, why, why_size);
	if (!h->succ) {
		vmio_envelope_writer_fini(&h->w);
		return -1;
	}
	vmio_successor_send(h->succ, rec, len, h->fds, nfds);
	log_info("hand-over: started %s, waiting up to %u ms for it to take over",
		 o.path, h->timeout_ms);
	return 0;
}

void redirect_handover_on_sighup(void *opaque)
{
	char why[512];

	redirect_handover_request(opaque, why, sizeof(why));
}

int redirect_handover_take(struct redirect_handover *h, struct vmio_takeover *t,
			   void (*take)(void *opaque, int fd),
			   int (*add)(void *opaque, struct vmio_control *c),
			   void *opaque)
{
	const struct vmio_envelope_section *s;
	char where[160];
	int fd;

	if (control_handover_take(t, h->loop, "redirect", h->control_path, add,
				  opaque, h->ctl))
		return -1;
	s = vmio_takeover_take(t, SECTION_LISTENER, 1, &fd);
	if (!s)
		goto fail;
	redir_endpoint_describe(h->ep0, where, sizeof(where));
	if (s->len != strlen(where) || memcmp(s->data, where, s->len)) {
		close(fd);
		snprintf(t->why, sizeof(t->why),
			 "ADDRESS1 (%s here) differs from the predecessor's",
			 where);
		goto fail;
	}
	if (redir_listener_adopt(h->listener, h->loop, h->ep0, fd, take,
				 opaque, t->why, sizeof(t->why)))
		goto fail;
	return 0;
fail:
	redir_listener_give_up(h->listener);
	vmio_control_give_up_listener(*h->ctl);
	return -1;
}
