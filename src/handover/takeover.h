/* The new side of a hand-over: a vmio started by its predecessor
 * (successor.h) with VMIO_HANDOVER_FD in its environment receives the
 * state and its fds, takes what it serves with, then answers: taken over
 * (and tells systemd it is now the main process) or refused, with why.
 *
 * The state is hostile input (envelope.h): the fds it names are taken
 * by section, each counted against what the section claims, and any fd
 * not taken is closed when the takeover ends, whatever happened. */
#ifndef VMIO_HANDOVER_TAKEOVER_H
#define VMIO_HANDOVER_TAKEOVER_H

#include <stdbool.h>
#include <stddef.h>

#include "event/loop.h"
#include "handover/envelope.h"
#include "handover/fd_transfer.h"

struct vmio_takeover {
	int sock; /* -1: this process is no successor */
	struct vmio_fd_receiver rx;
	struct vmio_envelope env; /* once received */
	bool received, failed;
	bool say_ready; /* the predecessor waits for "ready" (successor.h) */
	char why[256];
};

/* Whether this process was started as a successor: 0 no, 1 yes (t->sock
 * is the predecessor's socket), -1 the variable names no socket (logged).
 * The variable is removed from the environment either way, so that a
 * later successor does not inherit a stale one. */
int vmio_takeover_open(struct vmio_takeover *t);

/* Says "ready" if the predecessor asked, receives the state on loop (its
 * turns run here until it is in, or for timeout_ms at most) and reads
 * it. Returns 0, or -1 with the reason in t->why. */
int vmio_takeover_receive(struct vmio_takeover *t, struct vmio_loop *loop,
			  unsigned timeout_ms);

/* The section called name, whose fds must be exactly count: they move to
 * fds[] (the caller's from now on). NULL, with the reason in t->why, if
 * there is no such section or its count differs. */
const struct vmio_envelope_section *
vmio_takeover_take(struct vmio_takeover *t, const char *name, unsigned count,
		   int *fds);

/* Tells systemd this is the main process now (MAINPID=, READY=1), then
 * answers "taken over". Returns 0, or -1 (logged) if the predecessor
 * stopped waiting: it then resumed (systemd is told so), and this process
 * must not serve. */
int vmio_takeover_accept(struct vmio_takeover *t);
/* Answers "refused: why" (logged too). */
void vmio_takeover_refuse(struct vmio_takeover *t, const char *why);
/* Closes the fds not taken and the socket. */
void vmio_takeover_fini(struct vmio_takeover *t);

#endif
