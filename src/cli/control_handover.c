/* --control at a hand-over (control_handover.h). */
#include "cli/control_handover.h"

#include <stdio.h>
#include <string.h>

#define SECTION_CONTROL "control"

int control_handover_add(struct vmio_envelope_writer *w,
			 const struct vmio_control *c, const char *path,
			 int *fd)
{
	const char *p = path ? path : "";

	*fd = c ? vmio_control_listener(c) : -1;
	return vmio_envelope_add(w, SECTION_CONTROL, p, strlen(p), *fd >= 0);
}

int control_handover_take(struct vmio_takeover *t, struct vmio_loop *loop,
			  const char *device, const char *path,
			  int (*add)(void *opaque, struct vmio_control *c),
			  void *opaque, struct vmio_control **out)
{
	const struct vmio_envelope_section *s =
		vmio_envelope_find(&t->env, SECTION_CONTROL);
	const char *mine = path ? path : "";
	int fd = -1;

	*out = NULL;
	if (!s || s->len != strlen(mine) || memcmp(s->data, mine, s->len)) {
		snprintf(t->why, sizeof(t->why),
			 "--control differs from the predecessor's");
		return -1;
	}
	if (!path)
		return 0;
	if (s->fd_count && !vmio_takeover_take(t, SECTION_CONTROL, 1, &fd))
		return -1;
	if (vmio_control_open_fd(loop, device, path, fd, add, opaque, out)) {
		snprintf(t->why, sizeof(t->why), "cannot serve --control %s",
			 path);
		return -1;
	}
	return 0;
}
