/* --control at a hand-over: its listening socket goes to the successor in
 * a section of its own, "control", whose payload is the path this
 * process serves --control at (empty: none). A successor started with
 * another --control refuses: the path is in the unit's command line, and
 * the reload that asked waits on the old one. */
#ifndef VMIO_CLI_CONTROL_HANDOVER_H
#define VMIO_CLI_CONTROL_HANDOVER_H

#include "cli/control.h"
#include "handover/envelope.h"
#include "handover/takeover.h"

/* Adds the section for c (NULL: no --control) served at path. *fd is its
 * listener, to go next in the fd list, or -1 (none: the section has no
 * fd). Returns 0, or -1 (the writer has failed). */
int control_handover_add(struct vmio_envelope_writer *w,
			 const struct vmio_control *c, const char *path,
			 int *fd);

/* In a successor: --control (path, NULL: none) served on the listener of
 * the predecessor's section, with add(opaque, c) adding its parts, as
 * vmio_control_open_fd. Returns 0 with *out the server (NULL without
 * --control), or -1 with the reason in t->why. */
int control_handover_take(struct vmio_takeover *t, struct vmio_loop *loop,
			  const char *device, const char *path,
			  int (*add)(void *opaque, struct vmio_control *c),
			  void *opaque, struct vmio_control **out);

#endif
