/* `vmio redirect` handed over, as nginx and HAProxy do it: the listening
 * sockets (ADDRESS1's and --control's) go to the successor, which
 * accepts on them without binding anew, so a client's connect is never
 * refused; the old process stops accepting once the successor took over,
 * lets the relays it has finish, and exits when the last has ended (or
 * when --drain-timeout passes). Its relays are host connections with two
 * socket ends, which need nothing from the successor to finish.
 *
 * The state: section "redirect.listener" (ADDRESS1 as text, its
 * listener's fd) and section "control" (--control's path, its
 * listener's fd if there is one). */
#ifndef VMIO_CLI_REDIRECT_HANDOVER_H
#define VMIO_CLI_REDIRECT_HANDOVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cli/control.h"
#include "event/loop.h"
#include "handover/envelope.h"
#include "handover/successor.h"
#include "handover/takeover.h"
#include "redirect/connection.h"
#include "redirect/listener.h"

#define REDIRECT_HANDOVER_TIMEOUT_MS 10000u
#define REDIRECT_DRAIN_TIMEOUT_S 600u

struct redirect_handover {
	/* Set by the command before init. */
	struct vmio_loop *loop; /* worker 0's */
	struct redir_listener *listener;
	struct redir_endpoint *ep0;
	const char *control_path;
	struct vmio_control **ctl;
	struct redir_worker *workers;
	unsigned nworkers;
	unsigned timeout_ms;   /* --handover-timeout */
	unsigned drain_s;      /* --drain-timeout; 0: no bound */
	void (*stop)(void *opaque); /* ends the run: drained */
	void *opaque;

	struct vmio_successor *succ;
	struct vmio_envelope_writer w;
	int fds[2];
	bool handed_over;
	struct vmio_timer drain_check, drain_bound;
};

/* Returns 0, or -1 (logged). */
int redirect_handover_init(struct redirect_handover *h);
void redirect_handover_fini(struct redirect_handover *h);

/* A reload asked for on --control (vmio_control_reload_fn). */
int redirect_handover_request(void *opaque, char *why, size_t why_size);
/* SIGHUP: the same, its outcome in the log only. */
void redirect_handover_on_sighup(void *opaque);

/* In a successor: the listeners from t, ADDRESS1's adopted by h->listener
 * (accepting with take) and --control's opened with add. Returns 0, or
 * -1 with the reason in t->why; whatever was taken is given up then
 * without touching the predecessor's socket files. */
int redirect_handover_take(struct redirect_handover *h, struct vmio_takeover *t,
			   void (*take)(void *opaque, int fd),
			   int (*add)(void *opaque, struct vmio_control *c),
			   void *opaque);

#endif
